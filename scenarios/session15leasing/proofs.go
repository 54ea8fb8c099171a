package session15leasing

import (
	"slices"

	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/store"
)

// Day 15 statements no variant runs, each replacing one statement of the
// lesson's set to show a check no variant breaks can fail.
var (
	// selectSkippingLast never selects PAY-006.
	selectSkippingLast = store.Stmt{Name: "test: select the oldest claimable message but PAY-006", SQL: `SELECT Id FROM OutboxMessages
WHERE (Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now))
  AND AggregateKey <> 'PAY-006'
ORDER BY CreatedAtUtc, Id
LIMIT 1`}
	// updateTakingNothing changes the row without taking it.
	updateTakingNothing = store.Stmt{Name: "test: claim that changes the row without taking it", SQL: `UPDATE OutboxMessages SET LockedBy = LockedBy WHERE Id = :id`}
)

// breakers are the lesson's [lesson.Breaker]s: statements no variant runs,
// each breaking checks no variant breaks.
func breakers() []lesson.Breaker {
	outbox := func(f func(s *store.OutboxSQL)) func(any) any {
		return lesson.SwapOf(func(s store.OutboxSQL) store.OutboxSQL { f(&s); return s })
	}
	return []lesson.Breaker{
		{Name: store.ApplyInverted.Name, Swap: outbox(func(s *store.OutboxSQL) { s.ApplyOutcome = store.ApplyInverted }),
			Breaks: []string{"paid", "failed", "fake_successes"}},
		{Name: store.FinalizeByCopy.Name, Swap: outbox(func(s *store.OutboxSQL) { s.Finalize = store.FinalizeByCopy }),
			Breaks: []string{"duplicate_rows", "outbox_processing"}},
		{Name: selectSkippingLast.Name, Swap: outbox(func(s *store.OutboxSQL) { s.Claim.SelectNext = selectSkippingLast }),
			Breaks: []string{"outbox_pending", "outbox_processed"}},
		{Name: updateTakingNothing.Name, Swap: outbox(func(s *store.OutboxSQL) { s.Claim.Update = updateTakingNothing }),
			Breaks: []string{"claims_bounded", "recovery_ok"}},
		{Name: "split claim with a finalization by Id alone", Swap: outbox(func(s *store.OutboxSQL) {
			s.Claim, s.Finalize = store.UnguardedClaim, store.CompleteByID
		}), Breaks: []string{"ownership_violations"}},
	}
}

// guards are every guard of the statements the lesson runs that update
// a row ([lesson.Guard]): those its own run decides, its known gaps, and
// those it reuses from the lessons that teach them.
func guards() []lesson.Guard {
	return slices.Concat([]lesson.Guard{
		{Stmt: store.ClaimUpdate, Guard: lesson.ClaimableOutbox, Breaks: []string{"claims_of_owned_messages", "recovery_ok"}},
	},
		lesson.Reused(store.FinalizeOwned, map[string]string{"Status = 'Processing'": "session-15-late-finalize", "LockedBy = :worker": "session-15-late-finalize"}),
	)
}

// processes is what a run of the lesson with Options.Processes starts
// ([lesson.Processes]).
var processes = lesson.Processes{Children: lesson.Always(
	lesson.Child{Phase: "recovery: Worker-A", Role: "outbox-instance", Point: "after-claim"},
	lesson.Child{Phase: "recovery: Worker-B", Role: "outbox-instance"},
	lesson.Child{Phase: "concurrent: Worker-A", Role: "outbox-instance"},
	lesson.Child{Phase: "concurrent: Worker-B", Role: "outbox-instance"})}
