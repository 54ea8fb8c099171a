-- The lab's audit triggers on the inbox consumer's tables (see
-- 899_lab_audit.sql): each change of an account's credit, with its old and
-- new value, and each inbox row.
CREATE TRIGGER lab_audit_accounts_update AFTER UPDATE ON accounts BEGIN
    INSERT INTO lab_audit (tbl, op, row_key, old_state, new_state)
    VALUES ('accounts', 'UPDATE', NEW.id, OLD.credit_cents, NEW.credit_cents);
END;

CREATE TRIGGER lab_audit_consumed_insert AFTER INSERT ON consumed_events BEGIN
    INSERT INTO lab_audit (tbl, op, row_key, new_owner, new_state)
    VALUES ('consumed_events', 'INSERT', NEW.event_id, NEW.consumer, NEW.consumed_at);
END;

CREATE TRIGGER lab_audit_consumed_delete AFTER DELETE ON consumed_events BEGIN
    INSERT INTO lab_audit (tbl, op, row_key, old_owner)
    VALUES ('consumed_events', 'DELETE', OLD.event_id, OLD.consumer);
END;
