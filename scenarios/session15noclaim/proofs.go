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
		{Name: store.ApplyInverted.Name, Swap: outbox(func(s *store.OutboxSQL) { s.ApplyOutcome = store.ApplyInverted }),
			Breaks: []string{"paid", "failed"}},
		{Name: store.FinalizeByCopy.Name, Swap: outbox(func(s *store.OutboxSQL) { s.Finalize = store.FinalizeByCopy }),
			Breaks: []string{"duplicate_rows", "outbox_pending"}},
	}
}

// processes is what a run of the lesson with Options.Processes starts
// ([lesson.Processes]).
var processes = lesson.Processes{SameChecks: true, Children: lesson.Always(
	lesson.Child{Phase: cast.WorkerA, Role: "outbox-instance"}, lesson.Child{Phase: cast.WorkerB, Role: "outbox-instance"})}
