package session17renewal

import (
	"slices"

	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/store"
)

// Statements no variant runs, for breaking the checks no variant breaks.
var (
	// claimNeverSucceeds changes no row, ever.
	claimNeverSucceeds = store.Stmt{Name: "test: claim that never changes a row", SQL: `UPDATE outbox_events
SET claim_token = claim_token + 1,
    locked_by   = :relay,
    lease_until = :until
WHERE event_id = :id
  AND 0`}
	// renewNeverSucceeds refuses every renewal.
	renewNeverSucceeds = store.Stmt{Name: "test: renewal that never changes a row", SQL: `UPDATE outbox_events
SET lease_until = :proposed
WHERE event_id = :id
  AND claim_token = :token
  AND 0`}
	// renewOffByOne changes the row the lesson's renewal would, 1 row, but
	// writes a deadline one tick past the proposed one: only the read-back
	// of the lease end can tell.
	renewOffByOne = store.Stmt{Name: "test: renewal that writes another deadline", SQL: `UPDATE outbox_events
SET lease_until = :proposed + 1
WHERE event_id = :id
  AND claim_token = :token
  AND delivered = 0
  AND lease_until > :now
  AND lease_until < :proposed`}
	// claimIgnoringLease takes the event under someone's live lease.
	claimIgnoringLease = store.Stmt{Name: "test: claim that ignores the live lease", SQL: `UPDATE outbox_events
SET claim_token = claim_token + 1,
    locked_by   = :relay,
    lease_until = :until
WHERE event_id = :id
  AND delivered = 0`}
)

// breakers are the lesson's [lesson.Breaker]s: statements no variant runs,
// each breaking checks no variant breaks.
func breakers() []lesson.Breaker {
	relay := func(f func(s *store.RelaySQL)) func(any) any {
		return lesson.SwapOf(func(s store.RelaySQL) store.RelaySQL { f(&s); return s })
	}
	return []lesson.Breaker{
		{Name: claimNeverSucceeds.Name, Swap: relay(func(s *store.RelaySQL) { s.Claim = claimNeverSucceeds }),
			Breaks: []string{"steps_as_expected", "step_1_claim_succeeds", "step_7_claim_after_expiry"}},
		{Name: renewNeverSucceeds.Name, Swap: relay(func(s *store.RelaySQL) { s.Renew = renewNeverSucceeds }),
			Breaks: []string{"steps_as_expected", "step_4_renew_extends", "step_9_new_owner_renews"}},
		{Name: claimIgnoringLease.Name, Swap: relay(func(s *store.RelaySQL) { s.Claim = claimIgnoringLease }),
			Breaks: []string{"steps_as_expected", "step_5_claim_blocked_by_live_lease"}},
		{Name: renewOffByOne.Name, Swap: relay(func(s *store.RelaySQL) { s.Renew = renewOffByOne }),
			Breaks: []string{"steps_as_expected", "step_4_renew_extends", "step_9_new_owner_renews"}},
	}
}

// guards are every guard of the statements the lesson runs that update
// a row ([lesson.Guard]): those its own run decides, its known gaps, and
// those it reuses from the lessons that teach them.
func guards() []lesson.Guard {
	renew := func(g store.Stmt) func(any) any {
		return lesson.SwapOf(func(s store.RelaySQL) store.RelaySQL { s.Renew = g; return s })
	}
	return slices.Concat([]lesson.Guard{
		{Stmt: store.RenewLease, Guard: "claim_token = :token", Swap: renew, Breaks: []string{"steps_as_expected", "step_2_renew_without_token_refused", "step_3_shorten_refused", "step_8_stale_renew_refused"}},
		{Stmt: store.RenewLease, Guard: "lease_until > :now", Swap: renew, Breaks: []string{"steps_as_expected", "step_6_renew_at_expiry_refused", "step_7_claim_after_expiry", "step_8_stale_renew_refused", "step_9_new_owner_renews"}},
		{Stmt: store.RenewLease, Guard: "lease_until < :proposed", Swap: renew, Breaks: []string{"steps_as_expected", "step_3_shorten_refused"}},
		{Stmt: store.ClaimEvent, Guard: lesson.ClaimableEvent, Breaks: []string{"steps_as_expected", "step_5_claim_blocked_by_live_lease", "step_6_renew_at_expiry_refused"}},
		{Stmt: store.RenewLease, Guard: "delivered = 0", Breaks: []string{"renewal_after_delivery_rows"}}, // Worker-B's renewal after its ack, after the nine steps
	},
		lesson.Reused(store.ClaimEvent, map[string]string{"delivered = 0": "session-16-stale-ack-fencing"}),
	)
}

// processes is what a run of the lesson with Options.Processes starts
// ([lesson.Processes]).
var processes = lesson.Processes{SameChecks: true, Children: lesson.Always(
	lesson.Child{Phase: s17WorkerA, Role: "relay-instance"}, lesson.Child{Phase: s17WorkerB, Role: "relay-instance"})}
