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

// NewEvent is an event to put in the outbox.
type NewEvent struct{ ID, Type, Payload string }

// Relay is the relay's service on outbox_events: one connection and the
// statements it runs. The lessons build it with [RelayLesson], or with the
// same value with one statement replaced by a mistake.
type Relay struct {
	db  *DB
	sql RelaySQL
}

// NewRelay returns the relay service on db running the statements s.
func NewRelay(db *DB, s RelaySQL) *Relay { return &Relay{db: db, sql: s} }

// Insert writes e in its own transaction, created at now.
func (r *Relay) Insert(ctx context.Context, e NewEvent, now int64) error {
	_, err := r.db.InTx(ctx, func(tx *sql.Tx) error { return r.InsertTx(ctx, tx, e, now) })
	return err
}

// InsertTx writes e inside the caller's transaction, so the event commits
// together with the business change, or not at all.
func (r *Relay) InsertTx(ctx context.Context, tx *sql.Tx, e NewEvent, now int64) error {
	_, err := tx.ExecContext(ctx, r.sql.Insert.SQL, sql.Named("id", e.ID), sql.Named("type", e.Type),
		sql.Named("payload", e.Payload), sql.Named("now", now))
	if err != nil {
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

// Claim claims the named event at now with lease, its owner and end (the
// Claim statement). It reports Blocked with the holder while a live
// lease stands in the way, Done when the event is delivered and Empty when
// there is no such event.
func (r *Relay) Claim(ctx context.Context, eventID string, now int64, lease EventLease) (EventClaim, error) {
	var claim EventClaim
	stats, err := r.db.InTx(ctx, func(tx *sql.Tx) error {
		claim = EventClaim{}
		return r.claimInTx(ctx, tx, &claim, eventID, now, lease)
	})
	claim.Stats = stats
	if err != nil {
		return claim, fmt.Errorf("store: claim %s: %w", eventID, err)
	}
	return claim, nil
}

// ClaimNext claims the oldest claimable event at now with lease: in one BEGIN
// IMMEDIATE transaction it selects it (SelectNext) and updates it with the
// same predicate (Claim). It reports Empty when nothing is claimable.
func (r *Relay) ClaimNext(ctx context.Context, now int64, lease EventLease) (EventClaim, error) {
	var claim EventClaim
	stats, err := r.db.InTx(ctx, func(tx *sql.Tx) error {
		claim = EventClaim{}
		var id string
		err := tx.QueryRowContext(ctx, r.sql.SelectNext.SQL, sql.Named("now", now)).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			claim.Outcome = Empty
			return nil
		}
		if err != nil {
			return err
		}
		return r.claimInTx(ctx, tx, &claim, id, now, lease)
	})
	claim.Stats = stats
	if err != nil {
		return claim, fmt.Errorf("store: claim next event for %s: %w", lease.Owner, err)
	}
	return claim, nil
}

// claimInTx runs one claim UPDATE and classifies its outcome from the
// affected row count and, when 0 rows changed, from the row as it stands.
func (r *Relay) claimInTx(ctx context.Context, tx *sql.Tx, claim *EventClaim, eventID string, now int64, lease EventLease) error {
	claim.EventID = eventID
	res, err := tx.ExecContext(ctx, r.sql.Claim.SQL, append(lease.claimArgs("relay"), sql.Named("id", eventID), sql.Named("now", now))...)
	if err != nil {
		return err
	}
	if claim.Rows, err = res.RowsAffected(); err != nil {
		return err
	}
	if claim.Rows == 1 {
		claim.Outcome = Claimed
		return tx.QueryRowContext(ctx, r.sql.ReadClaim.SQL, sql.Named("id", eventID)).Scan(&claim.Payload, &claim.Token, &claim.LeaseUntil)
	}
	e, err := scanEvent(tx.QueryRowContext(ctx, r.sql.Event.SQL, sql.Named("id", eventID)))
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

// Complete marks the event delivered at now, presenting token (the
// Complete statement). With the lesson's statement a stale token or an
// event already delivered yields Rows 0.
func (r *Relay) Complete(ctx context.Context, eventID string, token, now int64) (Fenced, error) {
	f, err := r.db.execRows(ctx, r.sql.Complete.SQL, sql.Named("now", now), sql.Named("id", eventID), sql.Named("token", token))
	if err != nil {
		return f, fmt.Errorf("store: complete %s with token %d: %w", eventID, token, err)
	}
	return f, nil
}

// Renew moves the lease's end to lease.Until (:proposed), presenting
// lease.Token (the Renew statement). The lesson's statement requires the
// current token, delivered = 0, a live lease (lease_until > now) and a
// longer deadline (lease_until < proposed); otherwise Rows is 0.
func (r *Relay) Renew(ctx context.Context, eventID string, now int64, lease EventLease) (Fenced, error) {
	f, err := r.db.execRows(ctx, r.sql.Renew.SQL, append(lease.renewalArgs(), sql.Named("id", eventID), sql.Named("now", now))...)
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

// Events returns every event in creation order (the Events statement).
func (r *Relay) Events(ctx context.Context) ([]Event, error) {
	rows, err := r.db.sql.QueryContext(ctx, r.sql.Events.SQL)
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

// EventByID reads one event (the Event statement); ok is false when there
// is no such event.
func (r *Relay) EventByID(ctx context.Context, eventID string) (e Event, ok bool, err error) {
	e, err = scanEvent(r.db.sql.QueryRowContext(ctx, r.sql.Event.SQL, sql.Named("id", eventID)))
	if errors.Is(err, sql.ErrNoRows) {
		return Event{}, false, nil
	}
	if err != nil {
		return Event{}, false, fmt.Errorf("store: read event %s: %w", eventID, err)
	}
	return e, true, nil
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
