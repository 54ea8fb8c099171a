package session22heartbeat

import (
	"context"
	"slices"
	"testing"

	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/lesson/lessontest"
)

// runSession22 runs session 22 with hc in a fresh folder.
func runSession22(t *testing.T, hc heartbeatCast) *lab.Result {
	t.Helper()
	env := lessontest.NewEnv(t, &Lesson)
	r, err := runHeartbeatAndShutdown(context.Background(), env, hc)
	if err != nil {
		t.Fatal(err)
	}
	return r
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
			r := runSession22(t, lessonHeartbeatCast(&lesson.Env{Scenario: &Lesson, Variant: tt.variant}))
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
	r := runSession22(t, lessonHeartbeatCast(&lesson.Env{Scenario: &Lesson}))
	for key, want := range map[string]float64{"cancelled_on_lease_loss": 1, "cancelled_after_send": 1, "zero_row_renewals": 1,
		"zero_row_renewals_after_send": 1, "e8_broker_offers": 2, "e8_completions_by_relay_c": 0, "renewal_to_deadline_rows": 1,
		"expired_renewals_refused": 1, "cancelled_on_expiry": 1, "renewals_already_done": 1, "renewals_after_delivery_rows": 0} {
		if got, ok := r.Metric(key); !ok || got != want {
			t.Errorf("%s = %v (measured %v), want %v", key, got, ok, want)
		}
	}
	if !lessontest.TimelineSays(r, "work cancelled", "e8: lease lost; after its send: the send stands") {
		t.Error("no timeline line says Relay-C's work on e8 was cancelled after its send")
	}
	if !lessontest.TimelineSays(r, "heartbeat e3", "lease until 09:05:21 (next beat 09:05:12): exactly the processing deadline") ||
		!lessontest.TimelineSays(r, "heartbeat e3 refused", "processing deadline: a lease until 09:05:42 would pass") {
		t.Error("the timeline does not show e3's renewal to exactly its deadline accepted and the next one refused")
	}
	if !lessontest.TimelineSays(r, "heartbeat e9 refused", "token 1: 0 rows; lease expired: only lease_until > :now refused it "+
		"(read back: token 1 still current, not delivered, lease_until 09:06:01 <= now 09:06:10)") ||
		!lessontest.TimelineSays(r, "work cancelled", "e9: lease expired; before its send") {
		t.Error("the timeline does not show e9's renewal refused by the live-lease guard alone and its work cancelled")
	}
	if !lessontest.TimelineSays(r, "complete e10", "under token 1: 1 row, e10 delivered") ||
		!lessontest.TimelineSays(r, "heartbeat e10 refused", "token 1: 0 rows; already done: only delivered = 0 refused it "+
			"(read back: token 1 still current, delivered at 09:06:39, lease_until 09:06:48 > now 09:06:39)") ||
		!lessontest.TimelineSays(r, "heartbeat stops", "e10 is delivered under token 1, its own, so the work is already done, not a lost lease") {
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
		hc := lessonHeartbeatCast(&lesson.Env{Scenario: &Lesson})
		hc.sqls.Renew = renewBeforeDeadline
		r := runSession22(t, hc)
		if got := r.FailedChecks(); !slices.Equal(got, []string{"renewal_to_deadline_rows"}) {
			t.Errorf("failed checks %v, want [renewal_to_deadline_rows]", got)
		}
		if !lessontest.TimelineSays(r, "heartbeat e3 refused", "a lease until 09:05:21 would end exactly at claimed_at 09:03:21") {
			t.Error("the refused renewal does not say it would end exactly at the deadline")
		}
	})
}
