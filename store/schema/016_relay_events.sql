-- Sessions 16 to 20: the relay's outbox table, on logical integer time.
-- A lease is live while now < lease_until; at now = lease_until it has expired.
-- Every successful claim increments claim_token: ack, completion and renewal
-- must present the current token, so a stale owner's write changes 0 rows.
CREATE TABLE outbox_events (
    event_id     TEXT    PRIMARY KEY,
    event_type   TEXT    NOT NULL,
    payload      TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    claim_token  INTEGER NOT NULL DEFAULT 0, -- fencing token: +1 on every successful claim
    locked_by    TEXT,
    lease_until  INTEGER,
    delivered    INTEGER NOT NULL DEFAULT 0, -- the relay completed (acked) it: published
    delivered_at INTEGER
);
