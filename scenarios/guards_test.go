package scenarios

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/store"
)

// taughtGuard is one predicate of a statement a lesson teaches, and what
// removing it from that statement does to the lesson's own run.
type taughtGuard struct {
	scenario string
	stmt     store.Stmt // the lesson's statement, as the store declares it
	guard    string     // the predicate, as its WHERE clause writes it
	// swap puts the guardless statement into the lesson's statement set;
	// nil swaps it wherever a set holds the lesson's statement (store.Swap).
	swap func(guardless store.Stmt) func(any) any
	// breaks are the checks that must fail, and only they: the run exits 1.
	breaks []string
	// gap, when set, says why removing the guard changes nothing in any
	// run of the lesson: the run must still pass, so that closing the gap
	// shows here and moves the guard to breaks.
	gap string
	// taughtBy, when set, names the lesson that teaches the guard and whose
	// run decides it; this lesson only reuses the statement, and its run is
	// not repeated here (see TestEveryGuardIsAccountedFor).
	taughtBy string
}

// withoutGuard is stmt with the line "AND <guard>" removed from its SQL
// (and its PostgreSQL text), so the guardless statement cannot drift from
// the lesson's. A guard the statement does not hold is a test failure.
func withoutGuard(t *testing.T, stmt store.Stmt, guard string) store.Stmt {
	t.Helper()
	remove := func(sql string) string {
		if sql == "" {
			return ""
		}
		line := "\n  AND " + guard
		if strings.Count(sql, line) != 1 {
			t.Fatalf("%q: no single line %q in\n%s", stmt.Name, line, sql)
		}
		return strings.Replace(sql, line, "", 1)
	}
	return store.Stmt{Name: "test: " + stmt.Name + ", without AND " + guard, SQL: remove(stmt.SQL), Postgres: remove(stmt.Postgres),
		Replaces: &stmt}
}

// taughtGuards are the guards of the statements the fencing lessons teach.
var taughtGuards = func() []taughtGuard {
	outbox := func(g store.Stmt) func(any) any {
		return swapOf(func(s store.OutboxSQL) store.OutboxSQL { s.Finalize = g; return s })
	}
	complete := func(g store.Stmt) func(any) any {
		return swapOf(func(s store.RelaySQL) store.RelaySQL { s.Complete = g; return s })
	}
	renew := func(g store.Stmt) func(any) any {
		return swapOf(func(s store.RelaySQL) store.RelaySQL { s.Renew = g; return s })
	}
	batch := func(g store.Stmt) func(any) any {
		return swapOf(func(c store.FetchAheadConfig) store.FetchAheadConfig { c.SQL.Complete = g; return c })
	}
	scale := func(g store.Stmt) func(any) any {
		return swapOf(func(designs []store.ScaleSQL) []store.ScaleSQL {
			designs = slices.Clone(designs)
			for i := range designs {
				designs[i].Finalize = g
			}
			return designs
		})
	}
	brokerAck := func(g store.Stmt) func(any) any {
		return swapOf(func(s cast.DeliverySQL) cast.DeliverySQL { s.Broker.Ack = g; return s })
	}
	late, renewal, hb := lateFinalize.Name, leaseRenewal.Name, heartbeatAndShutdown.Name
	return []taughtGuard{
		{scenario: late, stmt: store.FinalizeOwned, guard: "LockedBy = :worker", swap: outbox,
			breaks: []string{"ownership_violations", "owner_result_kept", "rejected_while_owner_holds"}},
		{scenario: late, stmt: store.FinalizeOwned, guard: "Status = 'Processing'", swap: outbox,
			breaks: []string{"retried_finalize_rows"}},
		{scenario: staleAckFencing.Name, stmt: store.CompleteWithToken, guard: "claim_token = :token", swap: complete,
			breaks: []string{"stale_ack_rows", "current_ack_rows", "failed_acks_lease_lost"}},
		{scenario: staleAckFencing.Name, stmt: store.CompleteWithToken, guard: "delivered = 0", swap: complete,
			breaks: []string{"retried_ack_rows"}},
		{scenario: renewal, stmt: store.RenewLease, guard: "claim_token = :token", swap: renew,
			breaks: []string{"steps_as_expected", "step_2_renew_without_token_refused", "step_3_shorten_refused",
				"step_8_stale_renew_refused"}},
		{scenario: renewal, stmt: store.RenewLease, guard: "lease_until > :now", swap: renew,
			breaks: []string{"steps_as_expected", "step_6_renew_at_expiry_refused", "step_7_claim_after_expiry",
				"step_8_stale_renew_refused", "step_9_new_owner_renews"}},
		{scenario: renewal, stmt: store.RenewLease, guard: "lease_until < :proposed", swap: renew,
			breaks: []string{"steps_as_expected", "step_3_shorten_refused"}},
		{scenario: claimsAtScale.Name, stmt: store.ScaleFinalize, guard: "LockedBy = :worker", swap: scale,
			gap: tokenImpliesOwner},
		{scenario: claimsAtScale.Name, stmt: store.ScaleFinalize, guard: "ClaimToken = :token", swap: scale,
			breaks: []string{"retake_stale_refused", "retake_retried_finalize_rows"}}, // the re-take is never retried: not measured
		{scenario: batchCompletion.Name, stmt: store.FetchAheadComplete, guard: "OutboxMessages.LockedBy = :worker", swap: batch,
			gap: tokenImpliesOwner},
		{scenario: hb, stmt: store.RenewWithinDeadline, guard: "claim_token = :token", swap: heartbeatRenewal,
			breaks: []string{"zero_row_renewals", "cancelled_on_lease_loss"}},
		{scenario: hb, stmt: store.RenewWithinDeadline, guard: "lease_until > :now", swap: heartbeatRenewal,
			breaks: []string{"expired_renewals_refused", "cancelled_on_expiry"}},
		{scenario: hb, stmt: store.RenewWithinDeadline, guard: ":now + :lease <= claimed_at + :max_processing", swap: heartbeatRenewal,
			breaks: []string{"deadline_refusals", "lost_events"}},
		{scenario: batchCompletion.Name, stmt: store.FetchAheadComplete, guard: "OutboxMessages.ClaimToken = Done.Token", swap: batch,
			breaks: []string{"stale_completions_committed", "results_overwritten", "stale_token_refused",
				"retried_flush_rows"}}, // the current completion commits nothing, so no flush is retried: not measured
		// Without the receipt, Inbox-Consumer-1's late ack acknowledges the
		// redelivery Inbox-Consumer-2 still holds, whose own ack then finds
		// it acked.
		{scenario: leaseExpiryAfterSend.Name, stmt: store.AckDelivery, guard: "delivery_count = :receipt", swap: brokerAck,
			breaks: []string{"stale_receipt_ack_rows", "redelivery_ack_rows"}},
	}
}()

// allTaughtGuards are the guards whose removal a lesson's own run is
// tested for: the fencing writes' and the claims' and reused writes'.
func allTaughtGuards() []taughtGuard { return slices.Concat(taughtGuards, moreTaughtGuards) }

// swapAnywhere swaps guardless, a lesson statement without one guard, into
// every statement set that holds the statement, and counts the sets.
func swapAnywhere(guardless store.Stmt, swaps *atomic.Int32) func(any) any {
	return func(set any) any {
		out, err := store.Swap(set, guardless)
		if err != nil {
			return set // a set of the lesson that does not hold the statement
		}
		swaps.Add(1)
		return out
	}
}

// tokenImpliesOwner is why the owner guard of a token-fenced statement
// never decides alone.
const tokenImpliesOwner = "every claim increments the row's token, so a row another worker holds never carries the " +
	"token a stale writer presents: ClaimToken refuses every write LockedBy refuses, and LockedBy could decide alone " +
	"only after a claim that keeps the token"

// TestEveryTaughtGuardDecides: removing any guard a lesson teaches from
// its statement makes that lesson's own run exit 1 (the named checks fail,
// and only they), or the guard is listed as a known gap with its reason,
// and then the run still passes.
func TestEveryTaughtGuardDecides(t *testing.T) {
	t.Parallel()
	for _, g := range allTaughtGuards() {
		t.Run(g.scenario+"/"+g.stmt.Name+"/"+g.guard, func(t *testing.T) {
			t.Parallel()
			sc, err := Lookup(g.scenario)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(sc.Statements, func(s store.Stmt) bool { return s.SQL == g.stmt.SQL }) {
				t.Fatalf("%s does not teach %q", g.scenario, g.stmt.Name)
			}
			guardless, swaps := withoutGuard(t, g.stmt, g.guard), &atomic.Int32{}
			opts := DefaultOptions()
			opts.TempRoot, opts.swap = t.TempDir(), swapAnywhere(guardless, swaps)
			if g.swap != nil {
				typed := g.swap(guardless)
				opts.swap = func(set any) any { swaps.Add(1); return typed(set) } // counted when the lesson runs it
			}
			r, err := Execute(context.Background(), sc, "", opts, false)
			if err != nil {
				t.Fatal(err)
			}
			if swaps.Load() == 0 {
				t.Fatalf("no statement set of %s holds %q", g.scenario, g.stmt.Name)
			}
			failed := r.FailedChecks()
			if g.gap != "" {
				if !r.Passed() {
					t.Fatalf("known gap closed: without the guard the run fails %v; move the guard from gap to breaks", failed)
				}
				t.Logf("known gap: the guard never decides in this lesson's run: %s", g.gap)
				return
			}
			if r.Passed() {
				t.Fatal("the run passed without the guard: the guard decides nothing in it")
			}
			want := slices.Clone(g.breaks)
			slices.Sort(want)
			slices.Sort(failed)
			if !slices.Equal(failed, want) {
				t.Fatalf("failed checks %v, want %v", failed, want)
			}
		})
	}
}
