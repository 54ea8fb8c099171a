-- Session 16 on the Day 15 table: a fencing token. Every successful claim
-- sets ClaimToken = ClaimToken + 1; finalize must present the token its claim
-- returned, so a worker whose lease expired and was taken over changes 0 rows.
ALTER TABLE OutboxMessages ADD COLUMN ClaimToken INTEGER NOT NULL DEFAULT 0;
