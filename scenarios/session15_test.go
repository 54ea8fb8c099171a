package scenarios

import (
	"testing"

	"github.com/outboxlab/outboxlab/store"
)

// Day 15 statements no variant runs, each replacing one statement of the
// lesson's set to show a check no variant breaks can fail.
var (
	// loadFive loads only five of the six Pending messages.
	loadFive = store.Stmt{Name: "test: load only five Pending messages", SQL: `SELECT Id, MessageType, AggregateKey, Payload, CreatedAtUtc
FROM OutboxMessages
WHERE Status = 'Pending'
ORDER BY CreatedAtUtc, Id
LIMIT 5`}
	// applyInverted stores every outcome the wrong way round.
	applyInverted = store.Stmt{Name: "test: store the opposite outcome", SQL: `UPDATE Payments
SET PaymentStatus = CASE :status WHEN 'Paid' THEN 'Failed' ELSE 'Paid' END, UpdatedAtUtc = :now
WHERE IdempotencyKey = :key`}
	// finalizeByCopy "finalizes" by inserting a Processed copy of the row.
	finalizeByCopy = store.Stmt{Name: "test: finalize by inserting a Processed copy", SQL: `INSERT INTO OutboxMessages (MessageType, AggregateKey, Payload, Status, CreatedAtUtc)
SELECT MessageType, AggregateKey, Payload, 'Processed', :now FROM OutboxMessages WHERE Id = :id`}
	// selectSkippingLast never selects PAY-006.
	selectSkippingLast = store.Stmt{Name: "test: select the oldest claimable message but PAY-006", SQL: `SELECT Id FROM OutboxMessages
WHERE (Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now))
  AND AggregateKey <> 'PAY-006'
ORDER BY CreatedAtUtc, Id
LIMIT 1`}
	// updateTakingNothing changes the row without taking it.
	updateTakingNothing = store.Stmt{Name: "test: claim that changes the row without taking it", SQL: `UPDATE OutboxMessages SET LockedBy = LockedBy WHERE Id = :id`}
)

func init() {
	outbox := func(f func(s *store.OutboxSQL)) func(any) any {
		return swapOf(func(s store.OutboxSQL) store.OutboxSQL { f(&s); return s })
	}
	const before, after, late = "session-15-competing-workers-no-claim", "session-15-outbox-leasing", "session-15-late-finalize"
	checkBreakers = append(checkBreakers,
		checkBreaker{before, loadFive.Name, outbox(func(s *store.OutboxSQL) { s.Load = loadFive }),
			[]string{"loaded_a", "loaded_b", "unique_messages", "outbox_processed", "outbox_pending", "paid"}},
		checkBreaker{before, applyInverted.Name, outbox(func(s *store.OutboxSQL) { s.ApplyOutcome = applyInverted }),
			[]string{"paid", "failed"}},
		checkBreaker{before, finalizeByCopy.Name, outbox(func(s *store.OutboxSQL) { s.Finalize = finalizeByCopy }),
			[]string{"duplicate_rows", "outbox_pending"}},
		checkBreaker{after, applyInverted.Name, outbox(func(s *store.OutboxSQL) { s.ApplyOutcome = applyInverted }),
			[]string{"paid", "failed", "fake_successes"}},
		checkBreaker{after, finalizeByCopy.Name, outbox(func(s *store.OutboxSQL) { s.Finalize = finalizeByCopy }),
			[]string{"duplicate_rows", "outbox_processing"}},
		checkBreaker{after, selectSkippingLast.Name, outbox(func(s *store.OutboxSQL) { s.Claim.SelectNext = selectSkippingLast }),
			[]string{"outbox_pending", "outbox_processed"}},
		checkBreaker{after, updateTakingNothing.Name, outbox(func(s *store.OutboxSQL) { s.Claim.Update = updateTakingNothing }),
			[]string{"claims_bounded", "recovery_ok"}},
		checkBreaker{after, "split claim with a finalization by Id alone", outbox(func(s *store.OutboxSQL) {
			s.Claim, s.Finalize = store.UnguardedClaim, store.CompleteByID
		}), []string{"ownership_violations"}},
		checkBreaker{late, "an expiry-blind claim", outbox(func(s *store.OutboxSQL) { s.Claim = store.ExpiryBlindClaim }),
			[]string{"owner_result_kept"}},
	)
}

// TestCustomClaimNamed: --claim-sql's statements are named for the report,
// each in place of the lesson's statement it replaces, as the file's
// check split them.
func TestCustomClaimNamed(t *testing.T) {
	t.Parallel()
	claim, err := LookupExercise("claim")
	if err != nil {
		t.Fatal(err)
	}
	sub := &Submission{Exercise: claim, Source: "mine.sql", File: store.SlotFile{Texts: []string{"SELECT 1", "UPDATE x SET y = 1 WHERE Id = :id"}}}
	set := submitted(&Env{Options: Options{Submission: sub}}, store.OutboxLesson).Claim
	if set.SelectNext.Name != "your claim: select (from mine.sql)" || set.Update.Name != "your claim: update (from mine.sql)" || set.Split() {
		t.Fatalf("claim = %+v", set)
	}
	if set.SelectNext.SQL != "SELECT 1" || set.SelectNext.Replaces.Name != store.ClaimSelectNext.Name {
		t.Fatalf("select = %+v, want the file's statement as it was checked, in place of the lesson's", set.SelectNext)
	}
}
