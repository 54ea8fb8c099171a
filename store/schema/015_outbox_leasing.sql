-- Day 15: a message is claimed with a lease. Status becomes
-- Pending | Processing | Processed; a Processing row whose lease has expired
-- (LockedUntilUtc <= now) is claimable again.
ALTER TABLE OutboxMessages ADD COLUMN LockedBy TEXT;
ALTER TABLE OutboxMessages ADD COLUMN LockedUntilUtc TEXT;
