-- The lab's audit triggers on the relay's outbox_events and the lab's
-- broker (see 899_lab_audit.sql). An offer the broker stores is recorded
-- with its sender and time, so the checks know whether an event had been
-- sent before a completion committed.
CREATE TRIGGER lab_audit_events_update AFTER UPDATE ON outbox_events BEGIN
    INSERT INTO lab_audit (tbl, op, row_key, old_state, new_state, old_owner, new_owner, old_until, new_until,
                           old_token, new_token)
    VALUES ('outbox_events', 'UPDATE', NEW.event_id, OLD.delivered, NEW.delivered, OLD.locked_by, NEW.locked_by,
            OLD.lease_until, NEW.lease_until, OLD.claim_token, NEW.claim_token);
END;

CREATE TRIGGER lab_audit_events_insert AFTER INSERT ON outbox_events BEGIN
    INSERT INTO lab_audit (tbl, op, row_key, new_state, new_owner, new_until, new_token)
    VALUES ('outbox_events', 'INSERT', NEW.event_id, NEW.delivered, NEW.locked_by, NEW.lease_until, NEW.claim_token);
END;

CREATE TRIGGER lab_audit_events_delete AFTER DELETE ON outbox_events BEGIN
    INSERT INTO lab_audit (tbl, op, row_key, old_state, old_owner, old_until, old_token)
    VALUES ('outbox_events', 'DELETE', OLD.event_id, OLD.delivered, OLD.locked_by, OLD.lease_until, OLD.claim_token);
END;

CREATE TRIGGER lab_audit_broker_offer AFTER INSERT ON broker_offers BEGIN
    INSERT INTO lab_audit (actor, at, tbl, op, row_key, new_state)
    VALUES (NEW.offered_by, NEW.offered_at, 'broker_offers', 'INSERT', NEW.event_id, NEW.offer_id);
END;
