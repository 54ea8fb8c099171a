package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/outboxlab/outboxlab/clock"
)

// Outbox is the Day 15 service on OutboxMessages: claim, finalize, load and
// list messages, with the statements of one [OutboxSQL].
type Outbox struct {
	db  *DB
	sql OutboxSQL
	// watch, on PostgreSQL, is how long a claim holding a row lock looks
	// for another worker waiting on it (see [Outbox.WatchLockWaits]).
	watch time.Duration
}

// WatchLockWaits makes every claim that selected a message, on
// PostgreSQL, keep its transaction (and so its row lock) open until it sees
// another backend wait for that lock, or for d: the claim then reports the
// waiters it saw ([Claim.LockWaiters]). It is how a lesson shows that a
// claim without SKIP LOCKED makes workers queue, and that the lesson's does
// not. On SQLite, whose BEGIN IMMEDIATE serializes whole transactions, it
// does nothing.
func (o *Outbox) WatchLockWaits(d time.Duration) *Outbox {
	o.watch = d
	return o
}

// watchLockWaitersSQL counts the backends waiting, in a claim (the
// statement :claim), for a lock this connection holds; a lock the claim's
// select took is one. Only claims count: a select FOR UPDATE also keeps
// the lock of a row it rechecked and passed over (PostgreSQL's
// EvalPlanQual), so another worker's finalization of that row may wait a
// moment, which SKIP LOCKED does not promise to prevent.
// watchRefreshSQL makes each poll read pg_stat_activity anew: within a
// transaction PostgreSQL otherwise answers from its first read.
// Both run on PostgreSQL only.
var (
	watchRefreshSQL     = audit("lab: read pg_stat_activity afresh (PostgreSQL)", `SELECT pg_stat_clear_snapshot()`)
	watchLockWaitersSQL = audit("lab: whose claim waits for this claim's row lock? (PostgreSQL)",
		`SELECT count(*) FROM pg_stat_activity WHERE pg_backend_pid() = ANY (pg_blocking_pids(pid)) AND query = :claim`)
)

// lockWaiters polls, inside the claim's transaction, until another backend
// waits for one of its locks or o.watch has passed.
func (o *Outbox) lockWaiters(ctx context.Context, tx *sql.Tx) (int, error) {
	if o.watch <= 0 || o.db.Engine() != Postgres {
		return 0, nil
	}
	deadline := time.Now().Add(o.watch)
	claim := sql.Named("claim", runsOnPostgres(o.sql.Claim.SelectNext))
	for {
		var n int
		if _, err := tx.ExecContext(ctx, watchRefreshSQL.SQL); err != nil {
			return 0, err
		}
		if err := tx.QueryRowContext(ctx, watchLockWaitersSQL.SQL, claim).Scan(&n); err != nil {
			return 0, err
		}
		if n > 0 || time.Now().After(deadline) {
			return n, nil
		}
		if err := sleep(ctx, 5*time.Millisecond); err != nil {
			return 0, err
		}
	}
}

// NewOutbox returns the outbox service of db running the statements s.
func NewOutbox(db *DB, s OutboxSQL) *Outbox { return &Outbox{db: db, sql: s} }

// Message is an outbox message as read from the database.
type Message struct {
	ID           int64
	Type         string
	AggregateKey string
	Payload      string
	Status       string
	CreatedAt    string
	ProcessedAt  string
	LockedBy     string
	LockedUntil  string
}

// Outcome is the provider's answer applied to a payment.
type Outcome struct {
	Key           string
	Status        string // Paid or Failed
	TransactionID string // empty unless Paid
}

// ClaimOutcome classifies a claim attempt. Every outcome is an expected
// value, not an error.
type ClaimOutcome string

// Claim outcomes.
const (
	Claimed ClaimOutcome = "claimed" // exactly one row changed: the worker owns the message
	Empty   ClaimOutcome = "empty"   // nothing was claimable
	Blocked ClaimOutcome = "blocked" // the message is Processing under someone's live lease
	// Refused: the message is Processing under a lease that has expired,
	// yet the claim did not take it: the claim statement's own fault.
	Refused ClaimOutcome = "refused"
	// Overreach: the claim's UPDATE changed more than one row; the
	// transaction was rolled back and nothing was claimed.
	Overreach ClaimOutcome = "overreach"
	Done      ClaimOutcome = "done" // the message is already Processed
	Lost      ClaimOutcome = "lost" // selected, but the guarded update changed 0 rows
)

// Claim is the result of one claim attempt.
type Claim struct {
	Outcome   ClaimOutcome
	Message   Message // the claimed (or blocking) message; zero when Empty
	HeldBy    string  // with Blocked or Refused: the lease's owner
	HeldUntil string  // with Blocked or Refused: when that lease ends (or ended)
	Rows      int64   // rows the claim's UPDATE changed (rolled back unless exactly 1)
	// LockWaiters is how many other workers were seen waiting for this
	// claim's row lock (PostgreSQL, with [Outbox.WatchLockWaits]).
	LockWaiters int
	Stats       TxStats
}

// Statements is the statement set this service runs.
func (o *Outbox) Statements() OutboxSQL { return o.sql }

// ClaimNext claims the oldest claimable message at now with lease (its
// owner and end). between (if not nil) runs after the select and before
// the update: between the two transactions of a split claim (the window the
// mistake leaves open), inside the claim's transaction otherwise. Pass it
// inside a transaction only on PostgreSQL: under SQLite's BEGIN IMMEDIATE
// the other worker cannot begin its claim while this one waits.
func (o *Outbox) ClaimNext(ctx context.Context, now time.Time, lease OutboxLease, between func()) (Claim, error) {
	args := claimArgs(now, lease)
	if o.sql.Claim.Split() {
		return o.claimSplit(ctx, args, between)
	}
	var claim Claim
	stats, err := o.db.InTx(ctx, func(tx *sql.Tx) error {
		claim = Claim{}
		if o.sql.Claim.OneStatement() {
			_, err := o.claimOne(ctx, tx, args, 0, between, &claim)
			return err
		}
		id, found, err := o.selectNext(ctx, tx, args)
		if err != nil || !found {
			claim.Outcome = Empty
			return err
		}
		if between != nil {
			between()
		}
		if claim.LockWaiters, err = o.lockWaiters(ctx, tx); err != nil {
			return err
		}
		return o.update(ctx, tx, id, args, &claim)
	})
	claim.Stats = stats
	if err := overreached(&claim, err); err != nil {
		return claim, fmt.Errorf("store: claim next for %s: %w", lease.Owner, err)
	}
	return claim, nil
}

// claimSplit runs the select and the update in two transactions.
func (o *Outbox) claimSplit(ctx context.Context, args []any, between func()) (Claim, error) {
	var claim Claim
	var id int64
	found := false
	stats, err := o.db.InTx(ctx, func(tx *sql.Tx) (err error) {
		id, found, err = o.selectNext(ctx, tx, args)
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
	stats, err = o.db.InTx(ctx, func(tx *sql.Tx) error { return o.update(ctx, tx, id, args, &claim) })
	claim.Stats.BusyRetries += stats.BusyRetries
	claim.Stats.Waited += stats.Waited
	if err := overreached(&claim, err); err != nil {
		return claim, fmt.Errorf("store: claim update of %d: %w", id, err)
	}
	return claim, nil
}

// selectNext runs the claim's select; found is false when nothing is claimable.
func (o *Outbox) selectNext(ctx context.Context, tx *sql.Tx, args []any) (id int64, found bool, err error) {
	err = tx.QueryRowContext(ctx, o.sql.Claim.SelectNext.SQL, args...).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return id, err == nil, err
}

// ClaimMessage claims one named message at now with lease (the recovery
// demo's targeted claim). It reports Blocked with the holder when a live lease stands in the
// way, and Done when the message was already processed. A one-statement
// claim ([ClaimSQL.OneStatement]) names no message: it takes the oldest
// claimable one, and when that is not message id its claim is rolled
// back to a savepoint and the message's state decides the outcome.
func (o *Outbox) ClaimMessage(ctx context.Context, id int64, now time.Time, lease OutboxLease) (Claim, error) {
	args := claimArgs(now, lease)
	var claim Claim
	stats, err := o.db.InTx(ctx, func(tx *sql.Tx) error {
		claim = Claim{}
		if o.sql.Claim.OneStatement() {
			if took, err := o.claimOne(ctx, tx, args, id, nil, &claim); err != nil || took {
				return err
			}
		} else if err := o.update(ctx, tx, id, args, &claim); err != nil || claim.Outcome == Claimed {
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
			claim.Outcome, claim.HeldBy, claim.HeldUntil = leaseOutcome(m.LockedUntil, clock.Format(now)), m.LockedBy, m.LockedUntil
		default:
			claim.Outcome = Lost
		}
		return nil
	})
	claim.Stats = stats
	if err := overreached(&claim, err); err != nil {
		return claim, fmt.Errorf("store: claim message %d for %s: %w", id, lease.Owner, err)
	}
	return claim, nil
}

// leaseOutcome classifies a claim that found its message Processing and did
// not take it, from the facts: the lease is live while now < LockedUntilUtc
// (the lab's boundary: a lease that ends at t is over at t), so a refusal
// at or after the lease end is the claim's fault, not the lease's. Times
// are UTC text in one fixed layout, so text order is time order.
func leaseOutcome(lockedUntil, now string) ClaimOutcome {
	if lockedUntil > now {
		return Blocked
	}
	return Refused
}

func claimArgs(now time.Time, lease OutboxLease) []any {
	return append([]any{sql.Named("now", clock.Format(now))}, lease.claimArgs("worker")...)
}

// errOverreach rolls back a claim whose UPDATE changed more than one row.
var errOverreach = errors.New("the claim UPDATE changed more than one row")

// overreached turns a rolled-back overreaching claim into its outcome, an
// expected value rather than an error.
func overreached(claim *Claim, err error) error {
	if errors.Is(err, errOverreach) {
		claim.Outcome = Overreach
		return nil
	}
	return err
}

// update runs the claim's UPDATE for id and fills claim when exactly one
// row changed; more than one rolls the transaction back (errOverreach).
func (o *Outbox) update(ctx context.Context, tx *sql.Tx, id int64, args []any, claim *Claim) error {
	res, err := tx.ExecContext(ctx, o.sql.Claim.Update.SQL, append(args, sql.Named("id", id))...)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	claim.Rows = n
	switch {
	case n == 0:
		claim.Outcome = Lost
		return nil
	case n > 1:
		// A claim takes one message; an UPDATE that changed more is not a
		// claim, and nothing it changed may stay.
		claim.Outcome = Overreach
		return errOverreach
	}
	m, err := messageByID(ctx, tx, id)
	if errors.Is(err, sql.ErrNoRows) {
		// Only an UPDATE that changes the message's Id does this: an
		// engineer's claim, never the lesson's.
		return &SlotStatementError{Statement: "second statement", Err: fmt.Errorf("it changed 1 row, but message %d no longer exists afterwards (its Id changed)", id)}
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
	err := tx.QueryRowContext(ctx, ClaimReadBack.SQL, sql.Named("id", id)).Scan(&m.ID, &m.Type, &m.AggregateKey, &m.Payload, &m.Status, &m.CreatedAt, &processed, &lockedBy, &lockedUntil)
	m.ProcessedAt, m.LockedBy, m.LockedUntil = processed.String, lockedBy.String, lockedUntil.String
	return m, err
}

// Finalization is the result of [Outbox.Finalize].
type Finalization struct {
	Finalized bool // false: the worker no longer owned the message; nothing was written
	// Refused, when not Finalized, is the message as the guard found it,
	// read back in the finalization's transaction before it rolled back:
	// what tells which predicate turned the write away.
	Refused Message
	// Gone, when not Finalized, says no message has the Id any more (an
	// UPDATE, such as another worker's claim file, changed it): the guard
	// found no row, and Refused is empty.
	Gone  bool
	Stats TxStats
}

// errNotOwner rolls back a finalization whose guard changed no row.
var errNotOwner = errors.New("not the owner")

// Finalize, in one transaction, marks message id Processed with the set's
// Finalize statement and applies the outcome to its payment. It commits only
// if that statement changed exactly one row; otherwise it rolls back and
// reports Finalized false, an expected outcome rather than an error, also
// when message id no longer exists (Gone). The
// lesson's statement is [FinalizeOwned]; the "before"'s [CompleteByID]
// never refuses.
func (o *Outbox) Finalize(ctx context.Context, id int64, worker string, out Outcome, now time.Time) (Finalization, error) {
	at := clock.Format(now)
	var refused Message
	var gone bool
	stats, err := o.db.InTx(ctx, func(tx *sql.Tx) error {
		refused, gone = Message{}, false
		res, err := tx.ExecContext(ctx, o.sql.Finalize.SQL, sql.Named("now", at), sql.Named("id", id), sql.Named("worker", worker))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n != 1 {
			refused, err = messageByID(ctx, tx, id)
			if errors.Is(err, sql.ErrNoRows) {
				// The message's row is gone: a refusal of the statements
				// under test to judge, not the lab's failure.
				refused, gone, err = Message{}, true, nil
			}
			if err != nil {
				return err
			}
			return errNotOwner
		}
		return o.applyOutcome(ctx, tx, out, at)
	})
	if errors.Is(err, errNotOwner) {
		return Finalization{Finalized: false, Refused: refused, Gone: gone, Stats: stats}, nil
	}
	if err != nil {
		return Finalization{Stats: stats}, fmt.Errorf("store: finalize message %d for %s: %w", id, worker, err)
	}
	return Finalization{Finalized: true, Stats: stats}, nil
}

func (o *Outbox) applyOutcome(ctx context.Context, tx *sql.Tx, out Outcome, at string) error {
	var txn any
	if out.TransactionID != "" {
		txn = out.TransactionID
	}
	res, err := tx.ExecContext(ctx, o.sql.ApplyOutcome.SQL,
		sql.Named("status", out.Status), sql.Named("txn", txn), sql.Named("now", at), sql.Named("key", out.Key))
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("payment %s: %d rows updated, want 1", out.Key, n)
	}
	return nil
}

// LoadPending runs the set's Load: a plain read, no claim.
func (o *Outbox) LoadPending(ctx context.Context) ([]Message, error) {
	rows, err := o.db.sql.QueryContext(ctx, o.sql.Load.SQL)
	if err != nil {
		return nil, fmt.Errorf("store: load pending: %w", err)
	}
	defer rows.Close()
	var out []Message
	for rows.Next() {
		m := Message{Status: "Pending"}
		if err := rows.Scan(&m.ID, &m.Type, &m.AggregateKey, &m.Payload, &m.CreatedAt); err != nil {
			return nil, fmt.Errorf("store: load pending: %w", err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: load pending: %w", err)
	}
	return out, nil
}

// The reads behind the reports' message tables.
var (
	hasLeaseColumnsSQL = auditOn("audit: does OutboxMessages have Day 15's lease columns?",
		`SELECT count(*) FROM pragma_table_info('OutboxMessages') WHERE name = 'LockedBy'`,
		`SELECT count(*) FROM information_schema.columns
WHERE table_schema = current_schema() AND table_name = 'outboxmessages' AND column_name = 'lockedby'`)
	messagesSQL = audit("audit: read every outbox message", `SELECT Id, MessageType, AggregateKey, Payload, Status, CreatedAtUtc, ProcessedAtUtc, LockedBy, LockedUntilUtc
FROM OutboxMessages ORDER BY CreatedAtUtc, Id`)
	messagesBeforeLeasingSQL = audit("audit: read every outbox message (before Day 15's lease columns)", `SELECT Id, MessageType, AggregateKey, Payload, Status, CreatedAtUtc, ProcessedAtUtc, NULL, NULL
FROM OutboxMessages ORDER BY CreatedAtUtc, Id`)
)

// Messages returns every outbox message in creation order.
func (o *Outbox) Messages(ctx context.Context) ([]Message, error) {
	// LockedBy and LockedUntilUtc exist from Day 15 on; before that they read as NULL.
	var n int
	if err := o.db.sql.QueryRowContext(ctx, hasLeaseColumnsSQL.SQL).Scan(&n); err != nil {
		return nil, fmt.Errorf("store: inspect OutboxMessages: %w", err)
	}
	query := messagesBeforeLeasingSQL.SQL
	if n > 0 {
		query = messagesSQL.SQL
	}
	rows, err := o.db.sql.QueryContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("store: list messages: %w", err)
	}
	defer rows.Close()
	var out []Message
	for rows.Next() {
		var m Message
		var processed, lockedBy, lockedUntil sql.NullString
		if err := rows.Scan(&m.ID, &m.Type, &m.AggregateKey, &m.Payload, &m.Status, &m.CreatedAt, &processed, &lockedBy, &lockedUntil); err != nil {
			return nil, fmt.Errorf("store: list messages: %w", err)
		}
		m.ProcessedAt, m.LockedBy, m.LockedUntil = processed.String, lockedBy.String, lockedUntil.String
		out = append(out, m)
	}
	return out, rows.Err()
}
