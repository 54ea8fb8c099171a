-- The lab's audit triggers on the Day 15 tables (see 899_lab_audit.sql).
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

CREATE TRIGGER lab_audit_payments_insert AFTER INSERT ON Payments BEGIN
    INSERT INTO lab_audit (tbl, op, row_key, new_state, new_owner)
    VALUES ('Payments', 'INSERT', NEW.IdempotencyKey, NEW.PaymentStatus, NEW.TransactionId);
END;
