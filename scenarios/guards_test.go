package scenarios

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/outboxlab/outboxlab/store"
)

// taughtGuard is one predicate of a statement a lesson teaches, and what
// removing it from that statement does to the lesson's own run.
type taughtGuard struct {
	scenario string
	stmt     store.Stmt // the lesson's statement, as the store declares it
	guard    string     // the predicate, as its WHERE clause writes it
	// swap puts the guardless statement into the lesson's statement set.
	swap func(guardless store.Stmt) func(any) any
	// breaks are the checks that must fail, and only they: the run exits 1.
	breaks []string
	// gap, when set, says why removing the guard changes nothing in any
	// run of the lesson: the run must still pass, so that closing the gap
	// shows here and moves the guard to breaks.
	gap string
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
	return store.Stmt{Name: "test: " + stmt.Name + ", without AND " + guard, SQL: remove(stmt.SQL), Postgres: remove(stmt.Postgres)}
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
	heartbeat := func(g store.Stmt) func(any) any {
		return swapOf(func(hc heartbeatCast) heartbeatCast { hc.sqls.Renew = g; return hc })
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
			breaks: []string{"retake_stale_refused"}},
		{scenario: batchCompletion.Name, stmt: store.FetchAheadComplete, guard: "OutboxMessages.LockedBy = :worker", swap: batch,
			gap: tokenImpliesOwner},
		{scenario: hb, stmt: store.RenewWithinDeadline, guard: "claim_token = :token", swap: heartbeat,
			breaks: []string{"zero_row_renewals", "cancelled_on_lease_loss"}},
		{scenario: hb, stmt: store.RenewWithinDeadline, guard: "lease_until > :now", swap: heartbeat,
			gap: "every lease that expires in the lesson's run is reclaimed (a new token) before its relay renews it, so " +
				"claim_token = :token refuses the late renewal too; only the renew-without-margin variant renews an " +
				"expired lease that nobody has reclaimed"},
		{scenario: hb, stmt: store.RenewWithinDeadline, guard: ":now + :lease <= claimed_at + :max_processing", swap: heartbeat,
			breaks: []string{"deadline_refusals", "lost_events"}},
		{scenario: batchCompletion.Name, stmt: store.FetchAheadComplete, guard: "OutboxMessages.ClaimToken = Done.Token", swap: batch,
			breaks: []string{"stale_completions_committed", "results_overwritten", "stale_token_refused"}},
	}
}()

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
	for _, g := range taughtGuards {
		t.Run(g.scenario+"/"+g.guard, func(t *testing.T) {
			t.Parallel()
			sc, err := Lookup(g.scenario)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(sc.Statements, func(s store.Stmt) bool { return s.SQL == g.stmt.SQL }) {
				t.Fatalf("%s does not teach %q", g.scenario, g.stmt.Name)
			}
			opts := DefaultOptions()
			opts.TempRoot, opts.swap = t.TempDir(), g.swap(withoutGuard(t, g.stmt, g.guard))
			r, err := Execute(context.Background(), sc, "", opts, false)
			if err != nil {
				t.Fatal(err)
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
