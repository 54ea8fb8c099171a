-- The lesson's claim, as a starting point for your own: outboxlab runs the
-- two statements in one BEGIN IMMEDIATE transaction and counts the claim as
-- successful only if the UPDATE changed exactly one row.
-- Parameters: :now, :worker, :until (the lease's end), and :id in the UPDATE.
-- Times are UTC text with milliseconds, e.g. 2026-01-15T09:00:00.500Z.
SELECT Id FROM OutboxMessages
WHERE (Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now))
ORDER BY CreatedAtUtc, Id
LIMIT 1;

UPDATE OutboxMessages
SET Status = 'Processing', LockedBy = :worker, LockedUntilUtc = :until
WHERE Id = :id
  AND (Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now));
