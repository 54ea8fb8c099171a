-- Sessions 18 to 20: the broker the lab owns, and its consumers' tables.
-- Times are UTC text with milliseconds ('2026-01-15T09:00:30.000Z'), so they
-- read as clock times in the sqlite3 shell; in that fixed format text order is
-- time order. Windows, timeouts and retentions are applied by comparing with a
-- bound computed by the program (now minus the period), in the same format.
-- (outbox_events, shared with sessions 16 and 17, keeps logical integer time.)

-- Every send the broker received, in arrival order. A send refused by the
-- deduplication window stays here with dropped = 1, so the drop is visible.
CREATE TABLE broker_offers (
    offer_id   INTEGER PRIMARY KEY,         -- the broker's message id
    event_id   TEXT    NOT NULL,            -- the producer's id: the dedup and inbox key
    payload    TEXT    NOT NULL,
    offered_by TEXT    NOT NULL,            -- the relay (or operator) that sent it
    offered_at TEXT    NOT NULL,
    dropped    INTEGER NOT NULL DEFAULT 0   -- 1: its event id was accepted within the dedup window
);

CREATE INDEX ix_broker_offers_event_id ON broker_offers (event_id, offered_at);

-- Delivery and acknowledgement state of each offer, per consumer (each
-- consumer reads every accepted offer, as a subscription does).
-- in_flight: delivered, not acknowledged; ready: waiting for (re)delivery;
-- acked: done; dead_lettered: moved to broker_dead_letters.
CREATE TABLE broker_deliveries (
    offer_id       INTEGER NOT NULL REFERENCES broker_offers (offer_id),
    consumer       TEXT    NOT NULL,
    state          TEXT    NOT NULL CHECK (state IN ('in_flight', 'ready', 'acked', 'dead_lettered')),
    delivery_count INTEGER NOT NULL,        -- the receipt an ack must present
    delivered_at   TEXT    NOT NULL,        -- the latest delivery
    acked_at       TEXT,
    PRIMARY KEY (offer_id, consumer)
);

-- The dead-letter queue: offers a consumer did not acknowledge within the
-- delivery limit. It has its own retention: rows older than it are purged.
CREATE TABLE broker_dead_letters (
    dead_letter_id   INTEGER PRIMARY KEY,
    offer_id         INTEGER NOT NULL,
    consumer         TEXT    NOT NULL,
    event_id         TEXT    NOT NULL,
    payload          TEXT    NOT NULL,
    delivery_count   INTEGER NOT NULL,
    dead_lettered_at TEXT    NOT NULL,
    UNIQUE (offer_id, consumer)
);

-- The consumers' inbox: one row per (consumer, event id) whose effect
-- committed, written in the same transaction as the effect.
CREATE TABLE consumed_events (
    consumer    TEXT    NOT NULL,
    event_id    TEXT    NOT NULL,
    consumed_at TEXT    NOT NULL,
    UNIQUE (consumer, event_id)
);

CREATE INDEX ix_consumed_events_consumed_at ON consumed_events (consumed_at);

-- The business state the credit consumers change.
CREATE TABLE accounts (
    id           TEXT    PRIMARY KEY,
    credit_cents INTEGER NOT NULL DEFAULT 0
);

-- A versioned projection: the latest known state of an entity.
CREATE TABLE projections (
    entity_id  TEXT    PRIMARY KEY,
    version    INTEGER NOT NULL,
    state      TEXT    NOT NULL,
    updated_at TEXT    NOT NULL
);
