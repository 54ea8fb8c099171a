-- Session 22 on outbox_events: when the current claim was taken (logical
-- integer time, like lease_until). The heartbeat's renewal refuses to move
-- lease_until past claimed_at + the maximum processing time, so a stuck
-- worker cannot hold an event forever by renewing.
ALTER TABLE outbox_events ADD COLUMN claimed_at INTEGER;
