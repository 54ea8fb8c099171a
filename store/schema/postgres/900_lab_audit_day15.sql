-- The lab's audit triggers on the Day 15 tables, on PostgreSQL (see
-- 899_lab_audit.sql). Each function runs with its owner's rights (the
-- lab's), on the search path it was made with; no one else may call it.
CREATE FUNCTION lab_audit_outbox() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        INSERT INTO lab_audit (tbl, op, row_key, old_state, new_state, old_owner, new_owner, old_until, new_until)
        VALUES ('OutboxMessages', 'UPDATE', NEW.AggregateKey, OLD.Status, NEW.Status, OLD.LockedBy, NEW.LockedBy,
                OLD.LockedUntilUtc, NEW.LockedUntilUtc);
    ELSIF TG_OP = 'INSERT' THEN
        INSERT INTO lab_audit (tbl, op, row_key, new_state, new_owner, new_until)
        VALUES ('OutboxMessages', 'INSERT', NEW.AggregateKey, NEW.Status, NEW.LockedBy, NEW.LockedUntilUtc);
    ELSE
        INSERT INTO lab_audit (tbl, op, row_key, old_state, old_owner, old_until)
        VALUES ('OutboxMessages', 'DELETE', OLD.AggregateKey, OLD.Status, OLD.LockedBy, OLD.LockedUntilUtc);
    END IF;
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION lab_audit_outbox() FROM PUBLIC;
CREATE TRIGGER lab_audit_outbox AFTER INSERT OR UPDATE OR DELETE ON OutboxMessages
    FOR EACH ROW EXECUTE FUNCTION lab_audit_outbox();

CREATE FUNCTION lab_audit_payments() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        INSERT INTO lab_audit (tbl, op, row_key, old_state, new_state, old_owner, new_owner)
        VALUES ('Payments', 'UPDATE', NEW.IdempotencyKey, OLD.PaymentStatus, NEW.PaymentStatus,
                OLD.TransactionId, NEW.TransactionId);
    ELSIF TG_OP = 'INSERT' THEN
        INSERT INTO lab_audit (tbl, op, row_key, new_state, new_owner)
        VALUES ('Payments', 'INSERT', NEW.IdempotencyKey, NEW.PaymentStatus, NEW.TransactionId);
    ELSE
        INSERT INTO lab_audit (tbl, op, row_key, old_state, old_owner)
        VALUES ('Payments', 'DELETE', OLD.IdempotencyKey, OLD.PaymentStatus, OLD.TransactionId);
    END IF;
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION lab_audit_payments() FROM PUBLIC;
CREATE TRIGGER lab_audit_payments AFTER INSERT OR UPDATE OR DELETE ON Payments
    FOR EACH ROW EXECUTE FUNCTION lab_audit_payments();
