package scenarios

import (
	"context"
	"testing"
	"time"

	"github.com/outboxlab/outboxlab/instance"
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

func init() {
	swap := func(f func(c *store.FetchAheadConfig)) func(any) any {
		return swapOf(func(c store.FetchAheadConfig) store.FetchAheadConfig { f(&c); return c })
	}
	lesson := batchCompletion.Name
	checkBreakers = append(checkBreakers,
		checkBreaker{lesson, completeByIDAlone.Name, swap(func(c *store.FetchAheadConfig) { c.SQL.Complete = completeByIDAlone }),
			[]string{"stale_completions_refused", "stale_completions_committed", "duplicates", "retried_flush_rows"}},
		checkBreaker{lesson, completeNothing.Name, swap(func(c *store.FetchAheadConfig) { c.SQL.Complete = completeNothing }),
			[]string{"lost"}},
		checkBreaker{lesson, fetchPendingOnly.Name, swap(func(c *store.FetchAheadConfig) { c.SQL.Fetch = fetchPendingOnly }),
			[]string{"redone_messages", "stale_completions_refused"}},
	)
}

// TestClosingAStalledChild: a run that fails while a child is frozen by
// SIGSTOP still closes it at once (continued, then told to finish), not
// after the child's call timeout; the context's deadline, far shorter than
// that timeout, makes the test fail instead of wait.
func TestClosingAStalledChild(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, &batchCompletion)
	env.Instances = instance.New(instance.Config{Processes: true, Open: env.Open, Target: env.target, Ledger: env.Ledger})
	defer env.Instances.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	setup, err := env.Open(ctx, env.DatabasePath())
	if err != nil {
		t.Fatal(err)
	}
	defer setup.Close()
	if err := setup.Migrate(ctx, store.PaymentsOutbox, store.OutboxLeasing, store.OutboxFencing, store.ClaimsAtScale); err != nil {
		t.Fatal(err)
	}
	p, err := env.Instances.BatchRelay(ctx, env.DatabasePath(), "", bcFirst, bcLesson)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Stall("t=0", "the test's start"); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatalf("closing the frozen child: %v", err)
	}
}
