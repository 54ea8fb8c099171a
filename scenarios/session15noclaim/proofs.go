package session15noclaim

import (
	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/lesson"
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
)

// breakers are the lesson's [lesson.Breaker]s: statements no variant runs,
// each breaking checks no variant breaks.
func breakers() []lesson.Breaker {
	outbox := func(f func(s *store.OutboxSQL)) func(any) any {
		return lesson.SwapOf(func(s store.OutboxSQL) store.OutboxSQL { f(&s); return s })
	}
	return []lesson.Breaker{
		{Name: loadFive.Name, Swap: outbox(func(s *store.OutboxSQL) { s.Load = loadFive }),
			Breaks: []string{"loaded_a", "loaded_b", "unique_messages", "outbox_processed", "outbox_pending", "paid"}},
		{Name: applyInverted.Name, Swap: outbox(func(s *store.OutboxSQL) { s.ApplyOutcome = applyInverted }),
			Breaks: []string{"paid", "failed"}},
		{Name: finalizeByCopy.Name, Swap: outbox(func(s *store.OutboxSQL) { s.Finalize = finalizeByCopy }),
			Breaks: []string{"duplicate_rows", "outbox_pending"}},
	}
}

// processes is what a run of the lesson with Options.Processes starts
// ([lesson.Processes]).
var processes = lesson.Processes{SameChecks: true, Children: lesson.Always(
	lesson.Child{Phase: cast.WorkerA, Role: "outbox-instance"}, lesson.Child{Phase: cast.WorkerB, Role: "outbox-instance"})}
