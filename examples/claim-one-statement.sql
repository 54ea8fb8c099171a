-- The claim in one statement, the form production outboxes use: an UPDATE
-- that takes the oldest claimable message and returns its Id. outboxlab
-- runs it in one transaction (BEGIN IMMEDIATE on SQLite) and counts the
-- claim as successful only if it returned exactly one Id (none: nothing
-- was claimable; more than one is rolled back).
-- Parameters: :now, :worker and :until (the lease's end); there is no :id.
-- On PostgreSQL add FOR UPDATE SKIP LOCKED after LIMIT 1: without a row
-- lock, the second of two concurrent claims waits on the first's row and
-- then takes the same message (run it with --db: claims_of_owned_messages
-- fails).
UPDATE OutboxMessages
SET Status = 'Processing', LockedBy = :worker, LockedUntilUtc = :until
WHERE Id = (SELECT Id FROM OutboxMessages
            WHERE (Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now))
            ORDER BY CreatedAtUtc, Id
            LIMIT 1)
RETURNING Id;
