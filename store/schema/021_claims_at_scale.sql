-- Session 21: claims at scale. The lesson's claim asks one question with an
-- OR (Pending, or Processing with an expired lease) ordered by CreatedAtUtc.
-- No index answers an OR of two statuses in creation order, so every claim
-- reads the whole table, Processed history included: a drain costs the
-- square of the backlog.
--
-- The indexed claim asks the same question of the messages not yet
-- processed, kept in the claim's order (CreatedAtUtc, then Id) by this
-- partial index. A claim walks it from the oldest entry and stops at the
-- first claimable message; it skips only messages under a live lease. Id is
-- in the index because the claim orders by it too: SQLite keys every index
-- entry by its rowid (Id) anyway, but PostgreSQL, given CreatedAtUtc alone,
-- sorts each run of entries it walks (an Incremental Sort fetches at least
-- 32 rows before it returns the first). Claiming changes no indexed column, so
-- a claim writes the table page alone; finalize (which sets ProcessedAtUtc)
-- removes the entry. It replaces Day 14's (Status, CreatedAtUtc) index,
-- which every claim and every finalize had to rewrite.
DROP INDEX IF EXISTS IX_OutboxMessages_Status_CreatedAtUtc;

CREATE INDEX IX_OutboxMessages_Unprocessed_CreatedAtUtc_Id
    ON OutboxMessages (CreatedAtUtc, Id) WHERE ProcessedAtUtc IS NULL;
