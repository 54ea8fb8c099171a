package scenarios

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/store"
)

// runSession22 runs session 22 with hc in a fresh folder.
func runSession22(t *testing.T, hc heartbeatCast) *lab.Result {
	t.Helper()
	env := newTestEnv(t, &heartbeatAndShutdown)
	r, err := runHeartbeatAndShutdown(context.Background(), env, hc)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// claimKeepingToken is a claim no variant runs: it takes an expired lease
// without advancing the fencing token, so the new owner holds the old
// owner's token. Relay-A's overdue renewal after its pause then changes 1
// row, its work goes on, and it completes e2 before its new owner can.
var claimKeepingToken = store.Stmt{Name: "test: claim that does not advance the fencing token", SQL: `UPDATE outbox_events
SET locked_by   = :relay,
    lease_until = :until,
    claimed_at  = :now
WHERE event_id = :id
  AND delivered = 0
  AND (lease_until IS NULL OR lease_until <= :now)`}

// renewBeforeDeadline is the lesson's renewal with its deadline guard one
// step stricter, < for <=, cut from the lesson's own text so it cannot
// drift: a lease may no longer end exactly at the deadline, so Relay-C's
// renewal of e3 to claimed_at + 2 min changes 0 rows.
var renewBeforeDeadline = func() store.Stmt {
	const guard = "AND :now + :lease <= claimed_at + :max_processing"
	sql := store.RenewWithinDeadline.SQL
	if strings.Count(sql, guard) != 1 || store.RenewWithinDeadline.Postgres != "" {
		panic("session 22's renewal has no single " + guard + ", or a PostgreSQL text of its own")
	}
	return store.Stmt{Name: "test: renewal whose deadline guard is < instead of <=",
		SQL: strings.Replace(sql, guard, strings.Replace(guard, "<=", "<", 1), 1)}
}()

// renewWhileLeaseLive is a renewal no variant runs: it asks only for a live
// lease, whoever holds it, so a relay that lost its lease renews its new
// owner's (Relay-C's overdue renewal of e8 after its send changes 1 row,
// though Relay-B has delivered e8), a delivered event's lease moves
// (Relay-B's tick on e10), and no deadline stops it.
var renewWhileLeaseLive = store.Stmt{Name: "test: renewal guarded by a live lease only", SQL: `UPDATE outbox_events
SET lease_until = :now + :lease
WHERE event_id = :id
  AND lease_until > :now`}

func init() {
	const name = "session-22-heartbeat-and-shutdown"
	renew := func(s store.Stmt) func(any) any {
		return swapOf(func(hc heartbeatCast) heartbeatCast { hc.sqls.Renew = s; return hc })
	}
	checkBreakers = append(checkBreakers,
		checkBreaker{name, claimKeepingToken.Name,
			swapOf(func(hc heartbeatCast) heartbeatCast { hc.sqls.Relay.Claim = claimKeepingToken; return hc }),
			[]string{"completed_by_new_owner", "zero_row_renewals", "cancelled_on_lease_loss"}},
		checkBreaker{name, renewBeforeDeadline.Name, renew(renewBeforeDeadline), []string{"renewal_to_deadline_rows"}},
		checkBreaker{name, renewWhileLeaseLive.Name, renew(renewWhileLeaseLive),
			[]string{"zero_row_renewals", "cancelled_on_lease_loss", "cancelled_after_send", "deadline_refusals", "lost_events",
				"renewals_after_delivery_rows"}},
	)
}

// TestSession22VariantFigures pins what each variant does to the figures
// its mistake is about, beyond failing its checks.
func TestSession22VariantFigures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		variant string
		want    map[string]float64
	}{
		{"", map[string]float64{"renewals_one_row": 7, "stale_sends": 0, "recovered_after_restart": 2, "renewals_already_done": 1}},
		{variantRenewalFailureOnlyLogged, map[string]float64{"stale_sends": 1, "cancelled_on_lease_loss": 0, "zero_row_renewals": 1, "completed_by_new_owner": 1}},
		{variantNoDeadline, map[string]float64{"deadline_refusals": 0, "lost_events": 1, "recovered_after_restart": 2}},
		{variantShutdownMarksComplete, map[string]float64{"lost_events": 2, "completed_without_send": 2, "recovered_after_restart": 0}},
		{variantRenewWithoutMargin, map[string]float64{"expired_renewals_refused": 2, "cancelled_on_expiry": 2,
			"zero_row_renewals": 1, "cancelled_on_lease_loss": 1, "stale_sends": 0}},
	}
	for _, tt := range tests {
		t.Run("variant="+tt.variant, func(t *testing.T) {
			t.Parallel()
			r := runSession22(t, lessonHeartbeatCast(&Env{Scenario: &heartbeatAndShutdown, Variant: tt.variant}))
			for key, want := range tt.want {
				if got, ok := r.Metric(key); !ok || got != want {
					t.Errorf("%s = %v (measured %v), want %v", key, got, ok, want)
				}
			}
		})
	}
}

// TestSession22BoundarySteps pins the steps at the edges the lesson's text
// states: Relay-C's renewal of e8 after its send changes 0 rows and its
// work is cancelled with the send made (so cancelled_on_lease_loss's
// before-the-send filter leaves out a real cancellation), and its renewal
// of e3 to exactly claimed_at + 2 min changes 1 row, the next one 0; with
// < for <= only that boundary's check fails. Relay-B's renewal of e9,
// whose lease ran out with nobody reclaiming it, is refused by the live-lease
// guard alone, as read back from the row, and its work is cancelled.
// Relay-B's tick on e10, due as its completion commits, is refused by
// delivered = 0 alone, read back as already done under its own token:
// no lease loss, nothing cancelled; without that guard it changes 1 row.
func TestSession22BoundarySteps(t *testing.T) {
	t.Parallel()
	r := runSession22(t, lessonHeartbeatCast(&Env{Scenario: &heartbeatAndShutdown}))
	for key, want := range map[string]float64{"cancelled_on_lease_loss": 1, "cancelled_after_send": 1, "zero_row_renewals": 1,
		"zero_row_renewals_after_send": 1, "e8_broker_offers": 2, "e8_completions_by_relay_c": 0, "renewal_to_deadline_rows": 1,
		"expired_renewals_refused": 1, "cancelled_on_expiry": 1, "renewals_already_done": 1, "renewals_after_delivery_rows": 0} {
		if got, ok := r.Metric(key); !ok || got != want {
			t.Errorf("%s = %v (measured %v), want %v", key, got, ok, want)
		}
	}
	if !timelineSays(r, "work cancelled", "e8: lease lost; after its send: the send stands") {
		t.Error("no timeline line says Relay-C's work on e8 was cancelled after its send")
	}
	if !timelineSays(r, "heartbeat e3", "lease until 09:05:21 (next beat 09:05:12): exactly the processing deadline") ||
		!timelineSays(r, "heartbeat e3 refused", "processing deadline: a lease until 09:05:42 would pass") {
		t.Error("the timeline does not show e3's renewal to exactly its deadline accepted and the next one refused")
	}
	if !timelineSays(r, "heartbeat e9 refused", "token 1: 0 rows; lease expired: only lease_until > :now refused it "+
		"(read back: token 1 still current, not delivered, lease_until 09:06:01 <= now 09:06:10)") ||
		!timelineSays(r, "work cancelled", "e9: lease expired; before its send") {
		t.Error("the timeline does not show e9's renewal refused by the live-lease guard alone and its work cancelled")
	}
	if !timelineSays(r, "complete e10", "under token 1: 1 row, e10 delivered") ||
		!timelineSays(r, "heartbeat e10 refused", "token 1: 0 rows; already done: only delivered = 0 refused it "+
			"(read back: token 1 still current, delivered at 09:06:39, lease_until 09:06:48 > now 09:06:39)") ||
		!timelineSays(r, "heartbeat stops", "e10 is delivered under token 1, its own, so the work is already done, not a lost lease") {
		t.Error("the timeline does not show e10's tick, after its completion, refused by delivered = 0 alone as already done")
	}
	for _, e := range r.Timeline {
		if e.Subject == hbDone && (e.Kind == lab.KindFenced || e.Action == "work cancelled") {
			t.Errorf("e10's already-done renewal counts as a fenced write or a cancellation: %+v", e)
		}
		if e.Subject == hbDone && e.Action == "heartbeat e10 refused" && e.Kind != lab.KindNoOp {
			t.Errorf("e10's refused renewal is %s, want %s", e.Kind, lab.KindNoOp)
		}
	}

	t.Run("strict deadline", func(t *testing.T) {
		t.Parallel()
		hc := lessonHeartbeatCast(&Env{Scenario: &heartbeatAndShutdown})
		hc.sqls.Renew = renewBeforeDeadline
		r := runSession22(t, hc)
		if got := r.FailedChecks(); !slices.Equal(got, []string{"renewal_to_deadline_rows"}) {
			t.Errorf("failed checks %v, want [renewal_to_deadline_rows]", got)
		}
		if !timelineSays(r, "heartbeat e3 refused", "a lease until 09:05:21 would end exactly at claimed_at 09:03:21") {
			t.Error("the refused renewal does not say it would end exactly at the deadline")
		}
	})
}
