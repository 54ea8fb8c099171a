-- The lab's audit triggers on the relay's outbox_events and the lab's
-- broker, on PostgreSQL (see 899_lab_audit.sql and the SQLite file of the
-- same name above).
CREATE FUNCTION lab_audit_events() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        INSERT INTO lab_audit (tbl, op, row_key, old_state, new_state, old_owner, new_owner, old_until, new_until,
                               old_token, new_token)
        VALUES ('outbox_events', 'UPDATE', NEW.event_id, OLD.delivered, NEW.delivered, OLD.locked_by, NEW.locked_by,
                OLD.lease_until, NEW.lease_until, OLD.claim_token, NEW.claim_token);
    ELSIF TG_OP = 'INSERT' THEN
        INSERT INTO lab_audit (tbl, op, row_key, new_state, new_owner, new_until, new_token)
        VALUES ('outbox_events', 'INSERT', NEW.event_id, NEW.delivered, NEW.locked_by, NEW.lease_until, NEW.claim_token);
    ELSE
        INSERT INTO lab_audit (tbl, op, row_key, old_state, old_owner, old_until, old_token)
        VALUES ('outbox_events', 'DELETE', OLD.event_id, OLD.delivered, OLD.locked_by, OLD.lease_until, OLD.claim_token);
    END IF;
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION lab_audit_events() FROM PUBLIC;
CREATE TRIGGER lab_audit_events AFTER INSERT OR UPDATE OR DELETE ON outbox_events
    FOR EACH ROW EXECUTE FUNCTION lab_audit_events();

CREATE FUNCTION lab_audit_broker_offer() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO lab_audit (actor, at, tbl, op, row_key, new_state)
    VALUES (NEW.offered_by, NEW.offered_at, 'broker_offers', 'INSERT', NEW.event_id, NEW.offer_id);
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION lab_audit_broker_offer() FROM PUBLIC;
CREATE TRIGGER lab_audit_broker_offer AFTER INSERT ON broker_offers
    FOR EACH ROW EXECUTE FUNCTION lab_audit_broker_offer();
