package session21batch

import (
	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/store"
)

// Batch-completion statements no variant runs, each replacing one
// statement of the lesson's fetch-ahead design to show a check no variant
// breaks can fail.
var (
	// completeByIDAlone completes a batch with no guard at all: the stale
	// batch goes through, and so does the new owner's, twice per message,
	// and a retried flush changes its rows again.
	completeByIDAlone = store.Stmt{Name: "test: batch completion by Id alone, no guard", SQL: `WITH Done AS (
    SELECT value ->> 0 AS Id FROM json_each(:claims))
UPDATE OutboxMessages
SET Status = 'Processed', ProcessedAtUtc = :now
FROM Done
WHERE OutboxMessages.Id = Done.Id
RETURNING OutboxMessages.Id`}
	// completeNothing is a completion whose guard refuses every row: no
	// message is ever Processed.
	completeNothing = store.Stmt{Name: "test: batch completion that changes no row", SQL: `WITH Done AS (
    SELECT value ->> 0 AS Id FROM json_each(:claims))
UPDATE OutboxMessages
SET Status = 'Processed', ProcessedAtUtc = :now
FROM Done
WHERE OutboxMessages.Id = Done.Id AND 0
RETURNING OutboxMessages.Id`}
	// fetchPendingOnly never fetches a message whose lease ran out: the
	// second process does only the messages nobody had fetched.
	fetchPendingOnly = store.Stmt{Name: "test: fetch of Pending messages only", SQL: `WITH Picked AS (
    SELECT Id FROM OutboxMessages
    WHERE ProcessedAtUtc IS NULL AND Status = 'Pending'
    ORDER BY CreatedAtUtc, Id
    LIMIT :limit)
UPDATE OutboxMessages
SET Status = 'Processing', LockedBy = :worker, LockedUntilUtc = :until,
    ClaimToken = ClaimToken + 1
FROM Picked
WHERE OutboxMessages.Id = Picked.Id
RETURNING OutboxMessages.Id, AggregateKey, Payload, CreatedAtUtc, LockedUntilUtc, ClaimToken`}
)

// breakers are the lesson's [lesson.Breaker]s: statements no variant runs,
// each breaking checks no variant breaks.
func breakers() []lesson.Breaker {
	swap := func(f func(c *store.FetchAheadConfig)) func(any) any {
		return lesson.SwapOf(func(c store.FetchAheadConfig) store.FetchAheadConfig { f(&c); return c })
	}
	return []lesson.Breaker{
		{Name: completeByIDAlone.Name, Swap: swap(func(c *store.FetchAheadConfig) { c.SQL.Complete = completeByIDAlone }),
			Breaks: []string{"stale_completions_refused", "stale_completions_committed", "duplicates", "retried_flush_rows"}},
		{Name: completeNothing.Name, Swap: swap(func(c *store.FetchAheadConfig) { c.SQL.Complete = completeNothing }),
			Breaks: []string{"lost"}},
		{Name: fetchPendingOnly.Name, Swap: swap(func(c *store.FetchAheadConfig) { c.SQL.Fetch = fetchPendingOnly }),
			Breaks: []string{"redone_messages", "stale_completions_refused"}},
	}
}

// guards are every guard of the statements the lesson runs that update
// a row ([lesson.Guard]): those its own run decides, its known gaps, and
// those it reuses from the lessons that teach them.
func guards() []lesson.Guard {
	batch := func(g store.Stmt) func(any) any {
		return lesson.SwapOf(func(c store.FetchAheadConfig) store.FetchAheadConfig { c.SQL.Complete = g; return c })
	}
	return []lesson.Guard{
		{Stmt: store.FetchAheadComplete, Guard: "OutboxMessages.LockedBy = :worker", Swap: batch, Gap: lesson.TokenImpliesOwner},
		{Stmt: store.FetchAheadComplete, Guard: "OutboxMessages.ClaimToken = Done.Token", Swap: batch, Breaks: []string{"stale_completions_committed", "results_overwritten", "stale_token_refused", "retried_flush_rows"}}, // the current completion commits nothing, so no flush is retried: not measured
		{Stmt: store.FetchAheadComplete, Guard: "OutboxMessages.Status = 'Processing'", Breaks: []string{"retried_flush_rows"}},
	}
}

// processes is what a run of the lesson with Options.Processes starts
// ([lesson.Processes]).
var processes = lesson.Processes{Same: "By message: its work and its completion", SameChecks: true,
	// Process-1's completer stalls by SIGSTOP holding its finished batch.
	Children: lesson.Always(lesson.Child{Phase: bcFirst, Role: "batch-relay", Stalled: true}, lesson.Child{Phase: bcSecond, Role: "batch-relay"})}
