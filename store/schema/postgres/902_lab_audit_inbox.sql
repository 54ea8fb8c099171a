-- The lab's audit triggers on the inbox consumer's tables, on PostgreSQL
-- (see 899_lab_audit.sql and the SQLite file of the same name above).
CREATE FUNCTION lab_audit_accounts() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO lab_audit (tbl, op, row_key, old_state, new_state)
    VALUES ('accounts', 'UPDATE', NEW.id, OLD.credit_cents, NEW.credit_cents);
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION lab_audit_accounts() FROM PUBLIC;
CREATE TRIGGER lab_audit_accounts AFTER UPDATE ON accounts
    FOR EACH ROW EXECUTE FUNCTION lab_audit_accounts();

CREATE FUNCTION lab_audit_consumed() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO lab_audit (tbl, op, row_key, new_owner, new_state)
        VALUES ('consumed_events', 'INSERT', NEW.event_id, NEW.consumer, NEW.consumed_at);
    ELSE
        INSERT INTO lab_audit (tbl, op, row_key, old_owner)
        VALUES ('consumed_events', 'DELETE', OLD.event_id, OLD.consumer);
    END IF;
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION lab_audit_consumed() FROM PUBLIC;
CREATE TRIGGER lab_audit_consumed AFTER INSERT OR DELETE ON consumed_events
    FOR EACH ROW EXECUTE FUNCTION lab_audit_consumed();
