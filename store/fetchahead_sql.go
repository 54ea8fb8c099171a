package store

// FetchAheadSQL is the fetch-ahead design of the bench, River's shape with
// the lab's fencing, as one value: the fetch that one fetcher per process
// runs to claim up to its free workers' count in one statement, and the
// batch completion a completer runs to mark the finished messages
// Processed in one statement. A mistake design is the same value with the
// completion swapped.
//
// Both statements are written as River writes its own (JobGetAvailable:
// a CTE that picks and locks the jobs, then UPDATE … FROM it;
// JobSetStateIfRunningMany: a CTE of the completions, then UPDATE … FROM
// it), so the two can be read side by side. What River's lack is the
// fencing: every fetch gives each message it takes its own new token
// (ClaimToken + 1) and lease, and the completion of each row checks that
// row's owner and token, so a completion that arrives after the lease ran
// out and another claim took the message changes nothing.
//
// Parameters are named, and every statement of a field is called with the
// same arguments, so a mistake that drops a guard still runs with them:
//   - Fetch: :now, :worker (the process's owner name), :until, :limit
//   - Complete: :now, :worker, :claims (a JSON array of [id, token] pairs)
type FetchAheadSQL struct {
	// Name is what a report calls the design: "fetch-ahead", or the
	// mistake's name.
	Name string
	// Fetch claims up to :limit of the oldest claimable messages in one
	// UPDATE … RETURNING, each with a new fencing token and the lease
	// :until, and returns them with their tokens.
	Fetch Stmt
	// Complete marks a batch Processed in one UPDATE … RETURNING the Ids
	// it changed; the lesson's version only each row still Processing
	// under this owner and the token its fetch returned.
	Complete Stmt
}

// The fetch-ahead designs: the lesson's, fenced, and River's guard.
var (
	// FetchAhead is the fenced design the bench runs (`--claim fetch-ahead`).
	FetchAhead = FetchAheadSQL{Name: "fetch-ahead", Fetch: FetchAheadFetch, Complete: FetchAheadComplete}

	// FetchAheadStatusOnly is the same design with River's completion
	// guard: a row is completed while it is Processing, whoever holds it
	// under whatever token. A completer that stalls past the lease
	// completes messages another fetch has taken since.
	FetchAheadStatusOnly = FetchAheadSQL{Name: "complete-if-processing", Fetch: FetchAheadFetch, Complete: FetchAheadCompleteIfProcessing}
)

// The fetch-ahead statements.
var (
	// FetchAheadFetch takes up to :limit messages (the process's free
	// workers) in one statement. On SQLite, under BEGIN IMMEDIATE, the CTE
	// walks the unprocessed-messages index as the indexed claim does; on
	// PostgreSQL it locks what it picks, skipping rows another process has
	// locked, and the row lock is the whole guard (as the skip-locked
	// claim's is).
	FetchAheadFetch = namedOn("fetch-ahead: claim up to :limit (the free workers) of the oldest claimable in one statement, each with its own fencing token and lease", `WITH Picked AS (
    SELECT Id FROM OutboxMessages
    WHERE ProcessedAtUtc IS NULL
      AND (Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now))
    ORDER BY CreatedAtUtc, Id
    LIMIT :limit)
UPDATE OutboxMessages
SET Status = 'Processing', LockedBy = :worker, LockedUntilUtc = :until,
    ClaimToken = ClaimToken + 1
FROM Picked
WHERE OutboxMessages.Id = Picked.Id
RETURNING OutboxMessages.Id, AggregateKey, Payload, CreatedAtUtc, LockedUntilUtc, ClaimToken`, `WITH Picked AS (
    SELECT Id FROM OutboxMessages
    WHERE ProcessedAtUtc IS NULL
      AND (Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now))
    ORDER BY CreatedAtUtc, Id
    LIMIT :limit
    FOR UPDATE SKIP LOCKED)
UPDATE OutboxMessages
SET Status = 'Processing', LockedBy = :worker, LockedUntilUtc = :until,
    ClaimToken = ClaimToken + 1
FROM Picked
WHERE OutboxMessages.Id = Picked.Id
RETURNING OutboxMessages.Id, AggregateKey, Payload, CreatedAtUtc, LockedUntilUtc, ClaimToken`)

	// FetchAheadComplete completes a batch, each row only while it is
	// Processing under this owner and the token its fetch returned. A row
	// whose lease ran out and was fetched again (a new token, perhaps
	// another owner) is left alone: the completer counts it as refused.
	FetchAheadComplete = namedOn("fetch-ahead: complete a batch in one statement, each row only while I own it under its token", `WITH Done AS (
    SELECT value ->> 0 AS Id, value ->> 1 AS Token FROM json_each(:claims))
UPDATE OutboxMessages
SET Status = 'Processed', ProcessedAtUtc = :now
FROM Done
WHERE OutboxMessages.Id = Done.Id
  AND OutboxMessages.Status = 'Processing'
  AND OutboxMessages.LockedBy = :worker
  AND OutboxMessages.ClaimToken = Done.Token
RETURNING OutboxMessages.Id`, `WITH Done AS (
    SELECT (value ->> 0)::bigint AS Id, (value ->> 1)::bigint AS Token
    FROM jsonb_array_elements(CAST(:claims AS jsonb)) AS value)
UPDATE OutboxMessages
SET Status = 'Processed', ProcessedAtUtc = :now
FROM Done
WHERE OutboxMessages.Id = Done.Id
  AND OutboxMessages.Status = 'Processing'
  AND OutboxMessages.LockedBy = :worker
  AND OutboxMessages.ClaimToken = Done.Token
RETURNING OutboxMessages.Id`)

	// FetchAheadCompleteIfProcessing is River's guard: River's batch
	// completion (JobSetStateIfRunningMany) changes a job while its state
	// is 'running', by id alone. A completion that arrives after another
	// fetch took the message goes through, over the new owner's work.
	FetchAheadCompleteIfProcessing = mistakeOn(&FetchAheadComplete,
		"drops the owner and token guard AND OutboxMessages.LockedBy = :worker AND OutboxMessages.ClaimToken = Done.Token: checks only Status = 'Processing', as River's JobSetStateIfRunningMany checks only state = 'running'",
		"fetch-ahead: complete a batch while Processing, by Id alone (MISTAKE)", `WITH Done AS (
    SELECT value ->> 0 AS Id, value ->> 1 AS Token FROM json_each(:claims))
UPDATE OutboxMessages
SET Status = 'Processed', ProcessedAtUtc = :now
FROM Done
WHERE OutboxMessages.Id = Done.Id
  AND OutboxMessages.Status = 'Processing'
RETURNING OutboxMessages.Id`, `WITH Done AS (
    SELECT (value ->> 0)::bigint AS Id, (value ->> 1)::bigint AS Token
    FROM jsonb_array_elements(CAST(:claims AS jsonb)) AS value)
UPDATE OutboxMessages
SET Status = 'Processed', ProcessedAtUtc = :now
FROM Done
WHERE OutboxMessages.Id = Done.Id
  AND OutboxMessages.Status = 'Processing'
RETURNING OutboxMessages.Id`)
)
