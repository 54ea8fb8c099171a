package session23clocks

import (
	"slices"

	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/store"
)

// stageLeaseAfterNow is a race trial staging no variant runs: the lease
// ends 1 ms after the database's now, so the renewal and the claim no
// longer meet at the lease end (the renewal wins every trial).
var stageLeaseAfterNow = store.Stmt{Name: "test: stage a race trial with the lease ending 1 ms after db_now()", SQL: `UPDATE outbox_events
SET claim_token = claim_token + 1,
    locked_by   = :relay,
    lease_until = db_now() + 1,
    delivered   = 0
WHERE event_id = :id`, Audit: true}

// breakers are the lesson's [lesson.Breaker]s: statements no variant runs,
// each breaking checks no variant breaks.
func breakers() []lesson.Breaker {
	return []lesson.Breaker{
		{Name: stageLeaseAfterNow.Name, Swap: lesson.SwapOf(func(s store.ClockSQL) store.ClockSQL { s.Stage = stageLeaseAfterNow; return s }),
			Breaks: []string{"race_trials"}}}
}

// guards are every guard of the statements the lesson runs that update
// a row ([lesson.Guard]): those its own run decides, its known gaps, and
// those it reuses from the lessons that teach them.
func guards() []lesson.Guard {
	return slices.Concat([]lesson.Guard{
		{Stmt: store.ClaimOnDatabaseClock, Guard: "(lease_until IS NULL OR lease_until <= db_now())", Breaks: []string{"live_lease_claims", "e1_processing_attempts"}},
		{Stmt: store.RenewOnDatabaseClock, Guard: "claim_token = :token", Breaks: []string{"race_both_won"}},
		{Stmt: store.RenewOnDatabaseClock, Guard: "lease_until > db_now()", Breaks: []string{"race_renewal_won"}},
		{Stmt: store.AckOnDatabaseClock, Guard: "lease_until > db_now()", Breaks: []string{"expired_ack_rows", "ack_failures_lease_lost"}}, // Worker-N's late ack of e5, nobody reclaiming it
	},
		// Session 23 keeps the tokens of sessions 16 to 18 (LESSONS.md); its
		// own guards are the database's clock.
		lesson.Reused(store.ClaimOnDatabaseClock, map[string]string{"delivered = 0": "session-16-stale-ack-fencing"}),
		lesson.Reused(store.AckOnDatabaseClock, map[string]string{"claim_token = :token": "session-16-stale-ack-fencing", "delivered = 0": "session-16-stale-ack-fencing"}),
		lesson.Reused(store.RenewOnDatabaseClock, map[string]string{"delivered = 0": "session-22-heartbeat-and-shutdown"}),
	)
}

// processes is what a run of the lesson with Options.Processes starts
// ([lesson.Processes]).
var processes = lesson.Processes{ // the race's split between winners varies, in-process too
	// Worker-N stalled by SIGSTOP after its send of e3; Worker-S and
	// Worker-F race 200 times as processes.
	Children: lesson.Always(lesson.Child{Phase: s23WorkerS, Role: "clock-relay"}, lesson.Child{Phase: s23WorkerF, Role: "clock-relay"},
		lesson.Child{Phase: s23WorkerN, Role: "clock-relay", Stalled: true})}
