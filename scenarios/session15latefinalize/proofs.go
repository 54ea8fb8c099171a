package session15latefinalize

import (
	"slices"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/store"
)

// breakers are the lesson's [lesson.Breaker]s: statements no variant runs,
// each breaking checks no variant breaks.
func breakers() []lesson.Breaker {
	outbox := func(f func(s *store.OutboxSQL)) func(any) any {
		return lesson.SwapOf(func(s store.OutboxSQL) store.OutboxSQL { f(&s); return s })
	}
	return []lesson.Breaker{
		{Name: "an expiry-blind claim", Swap: outbox(func(s *store.OutboxSQL) { s.Claim = store.ExpiryBlindClaim }),
			Breaks: []string{"owner_result_kept"}},
	}
}

// guards are every guard of the statements the lesson runs that update
// a row ([lesson.Guard]): those its own run decides, its known gaps, and
// those it reuses from the lessons that teach them.
func guards() []lesson.Guard {
	outbox := func(g store.Stmt) func(any) any {
		return lesson.SwapOf(func(s store.OutboxSQL) store.OutboxSQL { s.Finalize = g; return s })
	}
	return slices.Concat([]lesson.Guard{
		{Stmt: store.FinalizeOwned, Guard: "LockedBy = :worker", Swap: outbox, Breaks: []string{"ownership_violations", "owner_result_kept", "rejected_while_owner_holds"}},
		{Stmt: store.FinalizeOwned, Guard: "Status = 'Processing'", Swap: outbox, Breaks: []string{"retried_finalize_rows"}},
	},
		lesson.Reused(store.ClaimUpdate, map[string]string{lesson.ClaimableOutbox: "session-15-outbox-leasing"}),
	)
}

// processes is what a run of the lesson with Options.Processes starts
// ([lesson.Processes]).
var processes = lesson.Processes{SameChecks: true, Children: lesson.Always(
	lesson.Child{Phase: cast.WorkerA, Role: "outbox-instance", Stalled: true}, lesson.Child{Phase: cast.WorkerB, Role: "outbox-instance"})}
