package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// RelayEvents is the schema of sessions 16 to 20: the outbox_events table
// with a fencing token (claim_token) and a lease on logical integer time.
var RelayEvents = mustMigration("016_relay_events.sql")

// The relay's statements. Time is a logical integer chosen by the scenario:
// a lease is live while now < lease_until and has expired at now = lease_until.
const (
	// InsertEventSQL writes an outbox event, unclaimed (token 0) and not delivered.
	InsertEventSQL = `INSERT INTO outbox_events (event_id, event_type, payload, created_at)
VALUES (?, ?, ?, ?)`

	// SelectNextEventSQL picks the oldest claimable event: not delivered, and
	// never leased or its lease expired. Parameter: now.
	SelectNextEventSQL = `SELECT event_id FROM outbox_events
WHERE delivered = 0
  AND (lease_until IS NULL OR lease_until <= ?)
ORDER BY created_at, event_id
LIMIT 1`

	// ClaimEventSQL is the fenced claim: it takes the event only if it is
	// still claimable, and increments claim_token, so every successful claim
	// gets a new, unique token. Parameters: relay, lease_until, event_id, now.
	ClaimEventSQL = `UPDATE outbox_events
SET claim_token = claim_token + 1,
    locked_by   = ?,
    lease_until = ?
WHERE event_id = ?
  AND delivered = 0
  AND (lease_until IS NULL OR lease_until <= ?)`

	// ClaimEventFixedTokenSQL is the reused-token mistake: the claim stamps a
	// fixed value the worker brings (its "worker token") instead of
	// incrementing, so two claims can carry the same token and a stale owner
	// cannot be told from the current one. Parameters: token, relay,
	// lease_until, event_id, now.
	ClaimEventFixedTokenSQL = `UPDATE outbox_events
SET claim_token = ?,
    locked_by   = ?,
    lease_until = ?
WHERE event_id = ?
  AND delivered = 0
  AND (lease_until IS NULL OR lease_until <= ?)`

	// ReadClaimSQL reads back what a claim wrote, in the claim's transaction.
	ReadClaimSQL = `SELECT payload, claim_token, lease_until FROM outbox_events WHERE event_id = ?`

	// AckWithTokenSQL completes the event only under the current token and
	// only once. 0 rows: the token is stale (the lease was lost) or the event
	// is already delivered. Parameters: delivered_at, event_id, claim_token.
	AckWithTokenSQL = `UPDATE outbox_events
SET delivered = 1, delivered_at = ?
WHERE event_id = ?
  AND claim_token = ?
  AND delivered = 0`

	// AckByEventIDSQL is the mistake: the same update without the token
	// guard, so a stale owner's late ack still completes the event.
	// Parameters: delivered_at, event_id.
	AckByEventIDSQL = `UPDATE outbox_events
SET delivered = 1, delivered_at = ?
WHERE event_id = ?
  AND delivered = 0`

	// RenewLeaseSQL extends a lease: it requires the current token, the
	// pending state, a live lease (lease_until > now) and a longer deadline
	// (lease_until < proposed). Parameters: proposed, event_id, token, now, proposed.
	RenewLeaseSQL = `UPDATE outbox_events
SET lease_until = ?
WHERE event_id = ?
  AND claim_token = ?
  AND delivered = 0
  AND lease_until > ?
  AND lease_until < ?`

	// RenewLeaseByEventIDSQL is the mistake of renewing by event id alone:
	// anyone, including a stale owner or a worker that never claimed, can
	// extend the lease. Parameters: proposed, event_id, now, proposed.
	RenewLeaseByEventIDSQL = `UPDATE outbox_events
SET lease_until = ?
WHERE event_id = ?
  AND delivered = 0
  AND lease_until > ?
  AND lease_until < ?`

	// RenewLeaseAllowShorteningSQL is the mistake of accepting any deadline:
	// a "renewal" can move lease_until earlier. Parameters: proposed,
	// event_id, token, now.
	RenewLeaseAllowShorteningSQL = `UPDATE outbox_events
SET lease_until = ?
WHERE event_id = ?
  AND claim_token = ?
  AND delivered = 0
  AND lease_until > ?`

	// RenewLeaseAfterExpirySQL is the mistake of renewing a lease that has
	// already expired (now >= lease_until): the old owner revives a lease
	// another worker is entitled to take. Parameters: proposed, event_id,
	// token, proposed.
	RenewLeaseAfterExpirySQL = `UPDATE outbox_events
SET lease_until = ?
WHERE event_id = ?
  AND claim_token = ?
  AND delivered = 0
  AND lease_until < ?`

	// EventByIDSQL reads one event.
	EventByIDSQL = `SELECT event_id, event_type, payload, created_at, claim_token, locked_by, lease_until, delivered, delivered_at
FROM outbox_events WHERE event_id = ?`

	// ListEventsSQL reads every event in creation order.
	ListEventsSQL = `SELECT event_id, event_type, payload, created_at, claim_token, locked_by, lease_until, delivered, delivered_at
FROM outbox_events ORDER BY created_at, event_id`

	// CountDeliveredEventsSQL counts delivered (published) events.
	CountDeliveredEventsSQL = `SELECT count(*) FROM outbox_events WHERE delivered = 1`
)

// NewEvent is an event to put in the outbox.
type NewEvent struct{ ID, Type, Payload string }

// InsertEvent writes e in its own transaction, created at now.
func (db *DB) InsertEvent(ctx context.Context, e NewEvent, now int64) error {
	_, err := db.InTx(ctx, func(tx *sql.Tx) error { return InsertEventTx(ctx, tx, e, now) })
	return err
}

// InsertEventTx writes e inside the caller's transaction, so the event
// commits together with the business change, or not at all.
func InsertEventTx(ctx context.Context, tx *sql.Tx, e NewEvent, now int64) error {
	if _, err := tx.ExecContext(ctx, InsertEventSQL, e.ID, e.Type, e.Payload, now); err != nil {
		return fmt.Errorf("store: insert event %s: %w", e.ID, err)
	}
	return nil
}

// EventClaim is the result of one claim attempt on outbox_events. Every
// outcome is an expected value, not an error.
type EventClaim struct {
	Outcome ClaimOutcome // Claimed, Empty, Blocked (live lease), Done (delivered), Lost
	EventID string
	Payload string
	// Token is the fencing token this claim got; 0 unless Claimed.
	Token int64
	// LeaseUntil is the new lease's deadline when Claimed, and the holder's
	// deadline when Blocked.
	LeaseUntil int64
	HeldBy     string // with Blocked: the live lease's owner
	Rows       int64  // rows the claim's UPDATE changed: 1 when Claimed, else 0
	Stats      TxStats
}

// ClaimEvent claims the named event for relay with a lease until leaseUntil
// ([ClaimEventSQL]). It reports Blocked with the holder while a live lease
// stands in the way, Done when the event is delivered and Empty when there
// is no such event.
func (db *DB) ClaimEvent(ctx context.Context, eventID, relay string, now, leaseUntil int64) (EventClaim, error) {
	return db.claimEvent(ctx, eventID, now, ClaimEventSQL, relay, leaseUntil, eventID, now)
}

// ClaimEventWithFixedToken is the reused-token mistake
// ([ClaimEventFixedTokenSQL]): the same claim, but it stamps token instead
// of incrementing the event's token.
func (db *DB) ClaimEventWithFixedToken(ctx context.Context, eventID, relay string, token, now, leaseUntil int64) (EventClaim, error) {
	return db.claimEvent(ctx, eventID, now, ClaimEventFixedTokenSQL, token, relay, leaseUntil, eventID, now)
}

// ClaimNextEvent claims the oldest claimable event for relay: in one
// BEGIN IMMEDIATE transaction it selects it ([SelectNextEventSQL]) and
// updates it with the same predicate ([ClaimEventSQL]). It reports Empty
// when nothing is claimable.
func (db *DB) ClaimNextEvent(ctx context.Context, relay string, now, leaseUntil int64) (EventClaim, error) {
	var claim EventClaim
	stats, err := db.InTx(ctx, func(tx *sql.Tx) error {
		claim = EventClaim{}
		var id string
		err := tx.QueryRowContext(ctx, SelectNextEventSQL, now).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			claim.Outcome = Empty
			return nil
		}
		if err != nil {
			return err
		}
		return claimInTx(ctx, tx, &claim, id, now, ClaimEventSQL, relay, leaseUntil, id, now)
	})
	claim.Stats = stats
	if err != nil {
		return claim, fmt.Errorf("store: claim next event for %s: %w", relay, err)
	}
	return claim, nil
}

func (db *DB) claimEvent(ctx context.Context, eventID string, now int64, stmt string, args ...any) (EventClaim, error) {
	var claim EventClaim
	stats, err := db.InTx(ctx, func(tx *sql.Tx) error {
		claim = EventClaim{}
		return claimInTx(ctx, tx, &claim, eventID, now, stmt, args...)
	})
	claim.Stats = stats
	if err != nil {
		return claim, fmt.Errorf("store: claim %s: %w", eventID, err)
	}
	return claim, nil
}

// claimInTx runs one claim UPDATE and classifies its outcome from the
// affected row count and, when 0 rows changed, from the row as it stands.
func claimInTx(ctx context.Context, tx *sql.Tx, claim *EventClaim, eventID string, now int64, stmt string, args ...any) error {
	claim.EventID = eventID
	res, err := tx.ExecContext(ctx, stmt, args...)
	if err != nil {
		return err
	}
	if claim.Rows, err = res.RowsAffected(); err != nil {
		return err
	}
	if claim.Rows == 1 {
		claim.Outcome = Claimed
		return tx.QueryRowContext(ctx, ReadClaimSQL, eventID).Scan(&claim.Payload, &claim.Token, &claim.LeaseUntil)
	}
	e, err := eventByID(ctx, tx, eventID)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		claim.Outcome = Empty
		return nil
	case err != nil:
		return err
	}
	claim.Payload = e.Payload
	switch {
	case e.Delivered:
		claim.Outcome = Done
	case e.LeaseUntil > now:
		claim.Outcome, claim.HeldBy, claim.LeaseUntil = Blocked, e.LockedBy, e.LeaseUntil
	default:
		claim.Outcome = Lost
	}
	return nil
}

// Fenced is the result of a fenced write (ack, completion, renewal). Rows 0
// is an expected value, not an error: the token was stale, the lease had
// expired, the deadline was not longer, or the event was already delivered.
type Fenced struct {
	Rows  int64
	Stats TxStats
}

// AckWithToken completes the event under its current token
// ([AckWithTokenSQL]): delivered = 1, delivered_at = now. A stale token or
// an event already delivered yields Rows 0.
func (db *DB) AckWithToken(ctx context.Context, eventID string, token int64, now int64) (Fenced, error) {
	f, err := db.execRows(ctx, AckWithTokenSQL, now, eventID, token)
	if err != nil {
		return f, fmt.Errorf("store: ack %s with token %d: %w", eventID, token, err)
	}
	return f, nil
}

// AckByEventID is the mistake ([AckByEventIDSQL]): the same update without
// the token guard, so whoever acks first completes the event.
func (db *DB) AckByEventID(ctx context.Context, eventID string, now int64) (Fenced, error) {
	f, err := db.execRows(ctx, AckByEventIDSQL, now, eventID)
	if err != nil {
		return f, fmt.Errorf("store: ack %s by event id: %w", eventID, err)
	}
	return f, nil
}

// RenewLease moves the lease deadline to proposed ([RenewLeaseSQL]). It
// requires the current token, delivered = 0, a live lease (lease_until >
// now) and a longer deadline (lease_until < proposed); otherwise Rows is 0.
func (db *DB) RenewLease(ctx context.Context, eventID string, token int64, now, proposed int64) (Fenced, error) {
	return db.renew(ctx, eventID, RenewLeaseSQL, proposed, eventID, token, now, proposed)
}

// RenewLeaseByEventID is the mistake of renewing without the token
// ([RenewLeaseByEventIDSQL]).
func (db *DB) RenewLeaseByEventID(ctx context.Context, eventID string, now, proposed int64) (Fenced, error) {
	return db.renew(ctx, eventID, RenewLeaseByEventIDSQL, proposed, eventID, now, proposed)
}

// RenewLeaseAllowShortening is the mistake of accepting a shorter deadline
// ([RenewLeaseAllowShorteningSQL]).
func (db *DB) RenewLeaseAllowShortening(ctx context.Context, eventID string, token int64, now, proposed int64) (Fenced, error) {
	return db.renew(ctx, eventID, RenewLeaseAllowShorteningSQL, proposed, eventID, token, now)
}

// RenewLeaseAfterExpiry is the mistake of renewing a lease at or after its
// expiry ([RenewLeaseAfterExpirySQL]). now is not consulted: that is the flaw.
func (db *DB) RenewLeaseAfterExpiry(ctx context.Context, eventID string, token int64, now, proposed int64) (Fenced, error) {
	return db.renew(ctx, eventID, RenewLeaseAfterExpirySQL, proposed, eventID, token, proposed)
}

func (db *DB) renew(ctx context.Context, eventID, stmt string, args ...any) (Fenced, error) {
	f, err := db.execRows(ctx, stmt, args...)
	if err != nil {
		return f, fmt.Errorf("store: renew lease of %s: %w", eventID, err)
	}
	return f, nil
}

// execRows runs one statement (a guarded UPDATE, an insert or a purge) in
// its own BEGIN IMMEDIATE transaction and reports how many rows it changed.
// Every fenced write of the relay, the broker and the consumers goes
// through it.
func (db *DB) execRows(ctx context.Context, stmt string, args ...any) (Fenced, error) {
	var f Fenced
	stats, err := db.InTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, stmt, args...)
		if err != nil {
			return err
		}
		f.Rows, err = res.RowsAffected()
		return err
	})
	f.Stats = stats
	return f, err
}

// Event is an outbox_events row as read from the database. LockedBy is ""
// and LeaseUntil 0 when the event was never claimed; DeliveredAt is 0 until
// delivered.
type Event struct {
	ID          string
	Type        string
	Payload     string
	CreatedAt   int64
	Token       int64
	LockedBy    string
	LeaseUntil  int64
	Delivered   bool
	DeliveredAt int64
}

// Events returns every event in creation order.
func (db *DB) Events(ctx context.Context) ([]Event, error) {
	rows, err := db.sql.QueryContext(ctx, ListEventsSQL)
	if err != nil {
		return nil, fmt.Errorf("store: list events: %w", err)
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		e, err := scanEvent(rows)
		if err != nil {
			return nil, fmt.Errorf("store: list events: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list events: %w", err)
	}
	return out, nil
}

// EventByID reads one event; ok is false when there is no such event.
func (db *DB) EventByID(ctx context.Context, eventID string) (e Event, ok bool, err error) {
	e, err = scanEvent(db.sql.QueryRowContext(ctx, EventByIDSQL, eventID))
	if errors.Is(err, sql.ErrNoRows) {
		return Event{}, false, nil
	}
	if err != nil {
		return Event{}, false, fmt.Errorf("store: read event %s: %w", eventID, err)
	}
	return e, true, nil
}

func eventByID(ctx context.Context, tx *sql.Tx, eventID string) (Event, error) {
	return scanEvent(tx.QueryRowContext(ctx, EventByIDSQL, eventID))
}

func scanEvent(row interface{ Scan(...any) error }) (Event, error) {
	var e Event
	var lockedBy sql.NullString
	var leaseUntil, deliveredAt sql.NullInt64
	var delivered int64
	err := row.Scan(&e.ID, &e.Type, &e.Payload, &e.CreatedAt, &e.Token, &lockedBy, &leaseUntil, &delivered, &deliveredAt)
	e.LockedBy, e.LeaseUntil, e.DeliveredAt = lockedBy.String, leaseUntil.Int64, deliveredAt.Int64
	e.Delivered = delivered != 0
	return e, err
}
