package store

// RelaySQL is the relay's statements on outbox_events (sessions 16 to 20),
// kept together as one value: a lesson runs [RelayLesson], and a mistake
// variant is the same value with one field replaced by a mistake statement
// declared below. Time is a logical integer chosen by the scenario: a lease
// is live while :now < lease_until and has expired at :now = lease_until.
//
// Parameters are named. Every statement of a field is called with the same
// arguments, so a mistake that drops a guard still runs with them:
//   - Insert: :id, :type, :payload, :now (created_at)
//   - SelectNext: :now
//   - Claim: :relay, :until, :id, :now
//   - ReadClaim, Event: :id
//   - Complete: :now (delivered_at), :id, :token
//   - Renew: :proposed, :id, :token, :now
type RelaySQL struct {
	// Insert writes an outbox event, unclaimed (token 0) and not delivered.
	Insert Stmt
	// SelectNext picks the oldest claimable event: not delivered, and never
	// leased or its lease expired.
	SelectNext Stmt
	// Claim takes the event :id only if it is still claimable, and gives the
	// claim a new fencing token.
	Claim Stmt
	// ReadClaim reads back what a claim wrote, in the claim's transaction.
	ReadClaim Stmt
	// Complete marks the event delivered; the lesson's version only under
	// the current token and only once.
	Complete Stmt
	// Renew moves the lease deadline to :proposed.
	Renew Stmt
	// Event reads one event: why a fenced write changed 0 rows, or the
	// deadline a renewal left.
	Event Stmt
	// Events reads every event in creation order, for a report's tables.
	Events Stmt
}

// RelayLesson is the relay the lessons teach: fenced claims, completion
// and renewal under the current token.
var RelayLesson = RelaySQL{
	Insert:     InsertEvent,
	SelectNext: SelectNextEvent,
	Claim:      ClaimEvent,
	ReadClaim:  ReadClaim,
	Complete:   CompleteWithToken,
	Renew:      RenewLease,
	Event:      EventByID,
	Events:     ListEvents,
}

// The lesson's statements.
var (
	// InsertEvent writes an outbox event, unclaimed and not delivered.
	InsertEvent = named("relay: insert an outbox event (with the business change)", `INSERT INTO outbox_events (event_id, event_type, payload, created_at)
VALUES (:id, :type, :payload, :now)`)

	// SelectNextEvent picks the oldest claimable event.
	SelectNextEvent = named("relay: select the oldest claimable event", `SELECT event_id FROM outbox_events
WHERE delivered = 0
  AND (lease_until IS NULL OR lease_until <= :now)
ORDER BY created_at, event_id
LIMIT 1`)

	// ClaimEvent is the fenced claim: it takes the event only if it is still
	// claimable, and increments claim_token, so every successful claim gets
	// a new, unique token.
	ClaimEvent = named("relay: claim if claimable (fencing token + 1)", `UPDATE outbox_events
SET claim_token = claim_token + 1,
    locked_by   = :relay,
    lease_until = :until
WHERE event_id = :id
  AND delivered = 0
  AND (lease_until IS NULL OR lease_until <= :now)`)

	// ReadClaim reads back what a claim wrote, in the claim's transaction.
	ReadClaim = named("relay: read back the claim's token and lease", `SELECT payload, claim_token, lease_until FROM outbox_events WHERE event_id = :id`)

	// CompleteWithToken completes the event only under the current token and
	// only once. 0 rows: the token is stale (the lease was lost) or the
	// event is already delivered.
	CompleteWithToken = named("relay: complete under the current token", `UPDATE outbox_events
SET delivered = 1, delivered_at = :now
WHERE event_id = :id
  AND claim_token = :token
  AND delivered = 0`)

	// RenewLease extends a lease: it requires the current token, the pending
	// state, a live lease (lease_until > :now) and a longer deadline
	// (lease_until < :proposed).
	RenewLease = named("relay: renew under the current token (live lease, longer deadline)", `UPDATE outbox_events
SET lease_until = :proposed
WHERE event_id = :id
  AND claim_token = :token
  AND delivered = 0
  AND lease_until > :now
  AND lease_until < :proposed`)

	// EventByID reads one event.
	EventByID = named("relay: read one event (its token, lease and delivery)", `SELECT event_id, event_type, payload, created_at, claim_token, locked_by, lease_until, delivered, delivered_at
FROM outbox_events WHERE event_id = :id`)

	// ListEvents reads every event in creation order.
	ListEvents = audit("audit: read every outbox event", `SELECT event_id, event_type, payload, created_at, claim_token, locked_by, lease_until, delivered, delivered_at
FROM outbox_events ORDER BY created_at, event_id`)

	// CountDeliveredEvents counts delivered (published) events; run it with
	// [DB.Count].
	CountDeliveredEvents = audit("audit: count delivered outbox events", `SELECT count(*) FROM outbox_events WHERE delivered = 1`)
)

// The relay's mistakes, each replacing one lesson statement.
var (
	// ClaimWithFixedToken is the reused-token mistake: the claim stamps the
	// worker's fixed number (1, the same on every replica of the relay)
	// instead of incrementing, so two claims carry the same token and a
	// stale owner cannot be told from the current one.
	ClaimWithFixedToken = mistake(&ClaimEvent, "stamps the fixed worker token 1 instead of claim_token + 1",
		"relay: claim with the worker's fixed token (MISTAKE)", `UPDATE outbox_events
SET claim_token = 1,
    locked_by   = :relay,
    lease_until = :until
WHERE event_id = :id
  AND delivered = 0
  AND (lease_until IS NULL OR lease_until <= :now)`)

	// ClaimIgnoringDelivery is the mistake of claiming without the
	// delivered guard: once the last lease has run out, an event already
	// delivered is claimed again, under a new token, and sent again.
	ClaimIgnoringDelivery = mistake(&ClaimEvent, "drops the delivered guard AND delivered = 0",
		"relay: claim if the lease is free, delivered or not (MISTAKE)", `UPDATE outbox_events
SET claim_token = claim_token + 1,
    locked_by   = :relay,
    lease_until = :until
WHERE event_id = :id
  AND (lease_until IS NULL OR lease_until <= :now)`)

	// CompleteByEventID is the mistake of completing without the token
	// guard, so a stale owner's late completion still publishes the event.
	CompleteByEventID = mistake(&CompleteWithToken, "drops the token guard AND claim_token = :token",
		"relay: complete by event id alone (MISTAKE)", `UPDATE outbox_events
SET delivered = 1, delivered_at = :now
WHERE event_id = :id
  AND delivered = 0`)

	// RenewByEventID is the mistake of renewing by event id alone: anyone,
	// including a stale owner or a worker that never claimed, extends the
	// lease.
	RenewByEventID = mistake(&RenewLease, "drops the token guard AND claim_token = :token",
		"relay: renew by event id alone (MISTAKE)", `UPDATE outbox_events
SET lease_until = :proposed
WHERE event_id = :id
  AND delivered = 0
  AND lease_until > :now
  AND lease_until < :proposed`)

	// RenewAllowShortening is the mistake of accepting any deadline: a
	// "renewal" can move lease_until earlier.
	RenewAllowShortening = mistake(&RenewLease, "drops the longer-deadline guard AND lease_until < :proposed",
		"relay: renew to any deadline, shorter too (MISTAKE)", `UPDATE outbox_events
SET lease_until = :proposed
WHERE event_id = :id
  AND claim_token = :token
  AND delivered = 0
  AND lease_until > :now`)

	// RenewAfterExpiry is the mistake of renewing a lease that has already
	// expired (:now >= lease_until): the old owner revives a lease another
	// worker is entitled to take.
	RenewAfterExpiry = mistake(&RenewLease, "drops the live-lease guard AND lease_until > :now",
		"relay: renew an expired lease too (MISTAKE)", `UPDATE outbox_events
SET lease_until = :proposed
WHERE event_id = :id
  AND claim_token = :token
  AND delivered = 0
  AND lease_until < :proposed`)
)
