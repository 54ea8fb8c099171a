-- A common slip: only Pending rows are claimable, so a message whose owner
-- crashed while it was Processing is never taken over. Run it and see which
-- checks catch it:
--   outboxlab run session-15-outbox-leasing --claim-sql examples/claim-pending-only.sql
SELECT Id FROM OutboxMessages
WHERE Status = 'Pending'
ORDER BY CreatedAtUtc, Id
LIMIT 1;

UPDATE OutboxMessages
SET Status = 'Processing', LockedBy = :worker, LockedUntilUtc = :until
WHERE Id = :id
  AND Status = 'Pending';
