package store

// HeartbeatClaims is session 22's migration on outbox_events: the
// claimed_at column the deadline-bounded renewal measures from.
var HeartbeatClaims = mustMigration("022_heartbeat_claimed_at.sql")

// HeartbeatSQL is session 22's statements: the relay's (its claim stamping
// claimed_at), the heartbeat's renewal bounded by a maximum processing time,
// and what a relay does at shutdown with the events it still holds. A
// variant is the same value with one field replaced by a mistake below.
//
// Parameters are named:
//   - Renew: :lease, :id, :token, :now, :max_processing
//   - AtShutdown: :relay, :now
type HeartbeatSQL struct {
	// Relay is the relay of sessions 16 to 18; its Claim also records
	// claimed_at = :now.
	Relay RelaySQL
	// Renew extends the lease to :now + :lease under the current token,
	// while the lease is live, and never past claimed_at + :max_processing.
	Renew Stmt
	// AtShutdown runs once when a relay stops, for the events it still
	// holds. The lesson runs nothing (its SQL is empty): their leases are
	// left to expire, so a fresh relay recovers them.
	AtShutdown Stmt
}

// HeartbeatLesson is session 22's relay as the lesson teaches it.
var HeartbeatLesson = HeartbeatSQL{
	Relay: RelaySQL{
		Insert:     InsertEvent,
		SelectNext: SelectNextEvent,
		Claim:      ClaimStampingClaimedAt,
		ReadClaim:  ReadClaim,
		Complete:   CompleteWithToken,
		Renew:      RenewLease,
		Event:      EventByID,
		Events:     ListEvents,
	},
	Renew:      RenewWithinDeadline,
	AtShutdown: LeaveLeasesToExpire,
}

// The lesson's statements.
var (
	// ClaimStampingClaimedAt is the fenced claim of sessions 16 to 18 that
	// also records when the claim was taken.
	ClaimStampingClaimedAt = named("relay: claim if claimable (fencing token + 1, claimed_at stamped)", `UPDATE outbox_events
SET claim_token = claim_token + 1,
    locked_by   = :relay,
    lease_until = :until,
    claimed_at  = :now
WHERE event_id = :id
  AND delivered = 0
  AND (lease_until IS NULL OR lease_until <= :now)`)

	// RenewWithinDeadline is the heartbeat's renewal: one more lease from
	// now, under the current token, while the lease is live, and only while
	// the new deadline stays within the maximum processing time from the
	// claim. 0 rows: the lease was lost, or the processing deadline is
	// reached.
	RenewWithinDeadline = named("heartbeat: renew one lease from now (current token, live lease, within the processing deadline)", `UPDATE outbox_events
SET lease_until = :now + :lease
WHERE event_id = :id
  AND claim_token = :token
  AND delivered = 0
  AND lease_until > :now
  AND :now + :lease <= claimed_at + :max_processing`)

	// LeaveLeasesToExpire is the lesson's shutdown step: no statement. An
	// event the relay holds but has not sent keeps its lease until it
	// expires; it is neither completed nor released.
	LeaveLeasesToExpire = Stmt{Name: "relay: at shutdown, leave held leases to expire (no statement)"}
)

// Session 22's mistakes, each replacing one lesson statement.
var (
	// RenewWithoutDeadline is the no-deadline mistake: the renewal has no
	// bound from the claim, so a worker whose work never ends renews, and
	// holds the event, forever.
	RenewWithoutDeadline = mistake(&RenewWithinDeadline, "drops the processing deadline AND :now + :lease <= claimed_at + :max_processing",
		"heartbeat: renew one lease from now, without a processing deadline (MISTAKE)", `UPDATE outbox_events
SET lease_until = :now + :lease
WHERE event_id = :id
  AND claim_token = :token
  AND delivered = 0
  AND lease_until > :now`)

	// MarkHeldComplete is the shutdown-marks-complete mistake: the shutdown
	// hook marks every event the relay still holds delivered, sent or not,
	// so an unsent event is never published and never recovered.
	MarkHeldComplete = mistake(&LeaveLeasesToExpire, "marks every event the relay holds delivered at shutdown, sent or not",
		"relay: mark held events complete at shutdown (MISTAKE)", `UPDATE outbox_events
SET delivered = 1, delivered_at = :now
WHERE locked_by = :relay
  AND delivered = 0
RETURNING event_id`)
)
