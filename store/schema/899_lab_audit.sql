-- The lab's audit of a user's program (relay challenges only, not a lesson's
-- schema): the lab's triggers on the challenge's tables (900_..., 901_...)
-- write every change a statement makes here, in commit order, and the lab
-- names the instance that made it before the transaction commits. The
-- challenge's checks read it; a program's statements may not.
CREATE TABLE lab_audit (
    seq       INTEGER PRIMARY KEY,
    actor     TEXT,             -- the instance whose transaction wrote it
    at        TEXT,             -- the lab clock when that transaction committed
    tx        INTEGER,          -- that transaction's number, in commit order
    tbl       TEXT NOT NULL,    -- the table changed
    op        TEXT NOT NULL,    -- INSERT, UPDATE or DELETE
    row_key   TEXT NOT NULL,    -- the row's key: a payment's key, an event id
    old_state TEXT, new_state TEXT, -- Status, PaymentStatus, delivered
    old_owner TEXT, new_owner TEXT, -- LockedBy or locked_by, or a payment's TransactionId
    old_until TEXT, new_until TEXT, -- LockedUntilUtc or lease_until
    old_token INTEGER, new_token INTEGER -- ClaimToken or claim_token, where the table has one
);
