-- The lab's audit of a user's program on the Day 15 tables (challenges
-- only, not a lesson's schema): every change a statement makes to a payment
-- or an outbox message is written here by a trigger, in commit order, and
-- the lab names the instance that made it before the transaction commits.
-- The challenge's checks read it; a program's statements may not.
CREATE TABLE lab_audit (
    seq       INTEGER PRIMARY KEY,
    actor     TEXT,             -- the instance whose transaction wrote it
    at        TEXT,             -- the lab clock when that transaction committed
    tbl       TEXT NOT NULL,    -- the table changed
    op        TEXT NOT NULL,    -- INSERT, UPDATE or DELETE
    row_key   TEXT NOT NULL,    -- the payment's key (a message's AggregateKey)
    old_state TEXT, new_state TEXT, -- Status or PaymentStatus
    old_owner TEXT, new_owner TEXT, -- LockedBy, or a payment's TransactionId
    old_until TEXT, new_until TEXT, -- LockedUntilUtc
    old_token INTEGER, new_token INTEGER -- ClaimToken, where the table has one
);

CREATE TRIGGER lab_audit_outbox_update AFTER UPDATE ON OutboxMessages BEGIN
    INSERT INTO lab_audit (tbl, op, row_key, old_state, new_state, old_owner, new_owner, old_until, new_until)
    VALUES ('OutboxMessages', 'UPDATE', NEW.AggregateKey, OLD.Status, NEW.Status, OLD.LockedBy, NEW.LockedBy,
            OLD.LockedUntilUtc, NEW.LockedUntilUtc);
END;

CREATE TRIGGER lab_audit_outbox_insert AFTER INSERT ON OutboxMessages BEGIN
    INSERT INTO lab_audit (tbl, op, row_key, new_state, new_owner, new_until)
    VALUES ('OutboxMessages', 'INSERT', NEW.AggregateKey, NEW.Status, NEW.LockedBy, NEW.LockedUntilUtc);
END;

CREATE TRIGGER lab_audit_outbox_delete AFTER DELETE ON OutboxMessages BEGIN
    INSERT INTO lab_audit (tbl, op, row_key, old_state, old_owner, old_until)
    VALUES ('OutboxMessages', 'DELETE', OLD.AggregateKey, OLD.Status, OLD.LockedBy, OLD.LockedUntilUtc);
END;

CREATE TRIGGER lab_audit_payments_update AFTER UPDATE ON Payments BEGIN
    INSERT INTO lab_audit (tbl, op, row_key, old_state, new_state, old_owner, new_owner)
    VALUES ('Payments', 'UPDATE', NEW.IdempotencyKey, OLD.PaymentStatus, NEW.PaymentStatus,
            OLD.TransactionId, NEW.TransactionId);
END;

CREATE TRIGGER lab_audit_payments_delete AFTER DELETE ON Payments BEGIN
    INSERT INTO lab_audit (tbl, op, row_key, old_state, old_owner)
    VALUES ('Payments', 'DELETE', OLD.IdempotencyKey, OLD.PaymentStatus, OLD.TransactionId);
END;
