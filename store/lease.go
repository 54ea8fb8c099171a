package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/outboxlab/outboxlab/clock"
)

// ClaimSQL is one way to claim an outbox message: the statements a lesson
// teaches (or a mistake it warns about), kept together so a report can print
// exactly what ran. Parameters are named: :now, :worker, :until, :id.
type ClaimSQL struct {
	Name string
	// SelectNext picks the oldest claimable message's Id.
	SelectNext string
	// Update takes ownership of the message :id. The lesson's version repeats
	// the claimable predicate, so it changes a row only if it is still claimable.
	Update string
	// Split is the mistake of running the select and the update in separate
	// transactions: between them another worker can take the same message.
	Split bool
}

// Claimable is the lesson's predicate: Pending, or Processing with an
// expired lease. A lease is live while now < LockedUntilUtc.
const Claimable = `(Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now))`

// LeaseClaim is Day 15's atomic claim: in one BEGIN IMMEDIATE transaction,
// select the oldest claimable message and update it with the same predicate;
// the claim succeeded only if exactly one row changed.
var LeaseClaim = ClaimSQL{
	Name: "lease claim (BEGIN IMMEDIATE, predicate repeated in the UPDATE)",
	SelectNext: `SELECT Id FROM OutboxMessages
WHERE ` + Claimable + `
ORDER BY CreatedAtUtc, Id
LIMIT 1`,
	Update: `UPDATE OutboxMessages
SET Status = 'Processing', LockedBy = :worker, LockedUntilUtc = :until
WHERE Id = :id
  AND ` + Claimable,
}

// ExpiryBlindClaim is the permanent-lock mistake: only Pending rows are
// claimable, so a message whose owner crashed stays Processing forever.
var ExpiryBlindClaim = ClaimSQL{
	Name: "expiry-blind claim (MISTAKE: ignores LockedUntilUtc)",
	SelectNext: `SELECT Id FROM OutboxMessages
WHERE Status = 'Pending'
ORDER BY CreatedAtUtc, Id
LIMIT 1`,
	Update: `UPDATE OutboxMessages
SET Status = 'Processing', LockedBy = :worker, LockedUntilUtc = :until
WHERE Id = :id
  AND Status = 'Pending'`,
}

// UnguardedClaim is the select-then-update mistake: the update trusts the
// earlier read and changes the row by Id alone, in its own transaction.
var UnguardedClaim = ClaimSQL{
	Name:       "unguarded claim (MISTAKE: SELECT, then UPDATE by Id alone)",
	SelectNext: LeaseClaim.SelectNext,
	Update: `UPDATE OutboxMessages
SET Status = 'Processing', LockedBy = :worker, LockedUntilUtc = :until
WHERE Id = :id`,
	Split: true,
}

// ClaimOutcome classifies a claim attempt. Every outcome is an expected
// value, not an error.
type ClaimOutcome string

// Claim outcomes.
const (
	Claimed ClaimOutcome = "claimed" // exactly one row changed: the worker owns the message
	Empty   ClaimOutcome = "empty"   // nothing was claimable
	Blocked ClaimOutcome = "blocked" // the message is Processing under someone's live lease
	Done    ClaimOutcome = "done"    // the message is already Processed
	Lost    ClaimOutcome = "lost"    // selected, but the guarded update changed 0 rows
)

// Claim is the result of one claim attempt.
type Claim struct {
	Outcome   ClaimOutcome
	Message   Message // the claimed (or blocking) message; zero when Empty
	HeldBy    string  // with Blocked: the live lease's owner
	HeldUntil string  // with Blocked: when that lease expires
	Stats     TxStats
}

// ClaimNext claims the oldest claimable message for worker with a lease of
// the given length. With a split claim, between (if not nil) runs after the
// select and before the update: the window the mistake leaves open.
func (db *DB) ClaimNext(ctx context.Context, c ClaimSQL, worker string, now time.Time, lease time.Duration, between func()) (Claim, error) {
	args := claimArgs(worker, now, lease)
	if c.Split {
		return db.claimSplit(ctx, c, args, between)
	}
	var claim Claim
	stats, err := db.InTx(ctx, func(tx *sql.Tx) error {
		claim = Claim{}
		var id int64
		err := tx.QueryRowContext(ctx, c.SelectNext, args...).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			claim.Outcome = Empty
			return nil
		}
		if err != nil {
			return err
		}
		return update(ctx, tx, c, id, args, &claim)
	})
	claim.Stats = stats
	if err != nil {
		return claim, fmt.Errorf("store: claim next for %s: %w", worker, err)
	}
	return claim, nil
}

// claimSplit runs the select and the update in two transactions.
func (db *DB) claimSplit(ctx context.Context, c ClaimSQL, args []any, between func()) (Claim, error) {
	var claim Claim
	var id int64
	found := false
	stats, err := db.InTx(ctx, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, c.SelectNext, args...).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		found = err == nil
		return err
	})
	claim.Stats = stats
	if err != nil {
		return claim, fmt.Errorf("store: claim select: %w", err)
	}
	if !found {
		claim.Outcome = Empty
		return claim, nil
	}
	if between != nil {
		between()
	}
	stats, err = db.InTx(ctx, func(tx *sql.Tx) error { return update(ctx, tx, c, id, args, &claim) })
	claim.Stats.BusyRetries += stats.BusyRetries
	claim.Stats.Waited += stats.Waited
	if err != nil {
		return claim, fmt.Errorf("store: claim update of %d: %w", id, err)
	}
	return claim, nil
}

// ClaimMessage claims one named message (the recovery demo's targeted
// claim). It reports Blocked with the holder when a live lease stands in the
// way, and Done when the message was already processed.
func (db *DB) ClaimMessage(ctx context.Context, c ClaimSQL, id int64, worker string, now time.Time, lease time.Duration) (Claim, error) {
	args := claimArgs(worker, now, lease)
	var claim Claim
	stats, err := db.InTx(ctx, func(tx *sql.Tx) error {
		claim = Claim{}
		if err := update(ctx, tx, c, id, args, &claim); err != nil || claim.Outcome == Claimed {
			return err
		}
		m, err := messageByID(ctx, tx, id)
		if errors.Is(err, sql.ErrNoRows) {
			claim.Outcome = Empty
			return nil
		}
		if err != nil {
			return err
		}
		claim.Message = m
		switch m.Status {
		case "Processed":
			claim.Outcome = Done
		case "Processing":
			claim.Outcome, claim.HeldBy, claim.HeldUntil = Blocked, m.LockedBy, m.LockedUntil
		default:
			claim.Outcome = Lost
		}
		return nil
	})
	claim.Stats = stats
	if err != nil {
		return claim, fmt.Errorf("store: claim message %d for %s: %w", id, worker, err)
	}
	return claim, nil
}

func claimArgs(worker string, now time.Time, lease time.Duration) []any {
	return []any{
		sql.Named("now", clock.Format(now)),
		sql.Named("worker", worker),
		sql.Named("until", clock.Format(now.Add(lease))),
	}
}

// update runs the claim's UPDATE for id and fills claim when exactly one
// row changed.
func update(ctx context.Context, tx *sql.Tx, c ClaimSQL, id int64, args []any, claim *Claim) error {
	res, err := tx.ExecContext(ctx, c.Update, append(args, sql.Named("id", id))...)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n != 1 {
		claim.Outcome = Lost
		return nil
	}
	m, err := messageByID(ctx, tx, id)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("the claim UPDATE changed 1 row, but message %d no longer exists afterwards", id)
	}
	if err != nil {
		return err
	}
	claim.Outcome, claim.Message = Claimed, m
	return nil
}

func messageByID(ctx context.Context, tx *sql.Tx, id int64) (Message, error) {
	var m Message
	var processed, lockedBy, lockedUntil sql.NullString
	err := tx.QueryRowContext(ctx, `SELECT Id, MessageType, AggregateKey, Payload, Status, CreatedAtUtc, ProcessedAtUtc, LockedBy, LockedUntilUtc
FROM OutboxMessages WHERE Id = ?`, id).Scan(&m.ID, &m.Type, &m.AggregateKey, &m.Payload, &m.Status, &m.CreatedAt, &processed, &lockedBy, &lockedUntil)
	m.ProcessedAt, m.LockedBy, m.LockedUntil = processed.String, lockedBy.String, lockedUntil.String
	return m, err
}

// FinalizeOwnedSQL is Day 15's ownership-verified completion: the message
// becomes Processed only while this worker still owns it.
const FinalizeOwnedSQL = `UPDATE OutboxMessages
SET Status = 'Processed', ProcessedAtUtc = :now
WHERE Id = :id
  AND Status = 'Processing'
  AND LockedBy = :worker`

// Finalization is the result of [DB.FinalizeOwned].
type Finalization struct {
	Finalized bool // false: the worker no longer owned the message; nothing was written
	Stats     TxStats
}

// errNotOwner rolls back a finalization whose guard changed no row.
var errNotOwner = errors.New("not the owner")

// FinalizeOwned, in one transaction, marks message id Processed with
// [FinalizeOwnedSQL] and applies the outcome to its payment. It commits only
// if the guarded update changed exactly one row; otherwise it rolls back and
// reports Finalized false, an expected outcome rather than an error.
func (db *DB) FinalizeOwned(ctx context.Context, id int64, worker string, o Outcome, now time.Time) (Finalization, error) {
	at := clock.Format(now)
	stats, err := db.InTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, FinalizeOwnedSQL, sql.Named("now", at), sql.Named("id", id), sql.Named("worker", worker))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n != 1 {
			return errNotOwner
		}
		return applyOutcome(ctx, tx, o, at)
	})
	if errors.Is(err, errNotOwner) {
		return Finalization{Finalized: false, Stats: stats}, nil
	}
	if err != nil {
		return Finalization{Stats: stats}, fmt.Errorf("store: finalize message %d for %s: %w", id, worker, err)
	}
	return Finalization{Finalized: true, Stats: stats}, nil
}
