package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/outboxlab/outboxlab/clock"
	"github.com/outboxlab/outboxlab/failpoint"
)

// The Day 14 and Day 15 statements on payments and their outbox messages.
const (
	// InsertPaymentSQL writes the business row of the transactional outbox.
	InsertPaymentSQL = `INSERT INTO Payments (IdempotencyKey, AmountCents, PaymentStatus, CreatedAtUtc, UpdatedAtUtc)
VALUES (?, ?, 'Pending', ?, ?)`

	// InsertOutboxSQL writes the outbox row, in the same transaction as the payment.
	InsertOutboxSQL = `INSERT INTO OutboxMessages (MessageType, AggregateKey, Payload, Status, CreatedAtUtc)
VALUES (?, ?, ?, 'Pending', ?)`

	// LoadPendingSQL is the naive bulk load of Day 15's "before": every
	// worker reads every Pending message and believes it owns them.
	LoadPendingSQL = `SELECT Id, MessageType, AggregateKey, Payload, CreatedAtUtc
FROM OutboxMessages
WHERE Status = 'Pending'
ORDER BY CreatedAtUtc, Id`

	// ApplyPaymentOutcomeSQL stores the provider's answer on the payment.
	ApplyPaymentOutcomeSQL = `UPDATE Payments
SET PaymentStatus = ?, TransactionId = ?, UpdatedAtUtc = ?
WHERE IdempotencyKey = ?`

	// MarkProcessedUnguardedSQL is the "before" completion: by Id alone, so a
	// second worker's completion of the same message succeeds too.
	MarkProcessedUnguardedSQL = `UPDATE OutboxMessages
SET Status = 'Processed', ProcessedAtUtc = ?
WHERE Id = ?`
)

// NewPayment is what checkout asks for: a payment under an idempotency key.
type NewPayment struct {
	Key         string
	AmountCents int64
	MessageType string
	Payload     string
}

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

// CreatePayment writes the payment and its outbox message in one
// transaction: both rows commit, or neither does.
func (db *DB) CreatePayment(ctx context.Context, p NewPayment, now time.Time) (TxStats, error) {
	at := clock.Format(now)
	stats, err := db.InTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, InsertPaymentSQL, p.Key, p.AmountCents, at, at); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, InsertOutboxSQL, p.MessageType, p.Key, p.Payload, at)
		return err
	})
	if err != nil {
		return stats, fmt.Errorf("store: create payment %s: %w", p.Key, err)
	}
	return stats, nil
}

// LoadPending runs [LoadPendingSQL]: a plain read, no claim.
func (db *DB) LoadPending(ctx context.Context) ([]Message, error) {
	rows, err := db.sql.QueryContext(ctx, LoadPendingSQL)
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

// CompleteUnguarded applies the outcome to the payment and marks the message
// Processed by Id alone ([MarkProcessedUnguardedSQL]), in one transaction.
// It never refuses: that is the flaw the "before" scenario shows.
func (db *DB) CompleteUnguarded(ctx context.Context, id int64, o Outcome, now time.Time) (TxStats, error) {
	at := clock.Format(now)
	stats, err := db.InTx(ctx, func(tx *sql.Tx) error {
		if err := applyOutcome(ctx, tx, o, at); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, MarkProcessedUnguardedSQL, at, id)
		return err
	})
	if err != nil {
		return stats, fmt.Errorf("store: complete message %d: %w", id, err)
	}
	return stats, nil
}

func applyOutcome(ctx context.Context, tx *sql.Tx, o Outcome, at string) error {
	var txn any
	if o.TransactionID != "" {
		txn = o.TransactionID
	}
	res, err := tx.ExecContext(ctx, ApplyPaymentOutcomeSQL, o.Status, txn, at, o.Key)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("payment %s: %d rows updated, want 1", o.Key, n)
	}
	return nil
}

// Messages returns every outbox message in creation order.
func (db *DB) Messages(ctx context.Context) ([]Message, error) {
	// LockedBy and LockedUntilUtc exist from Day 15 on; before that they read as NULL.
	hasLease, err := db.hasColumn(ctx, "OutboxMessages", "LockedBy")
	if err != nil {
		return nil, err
	}
	cols := "Id, MessageType, AggregateKey, Payload, Status, CreatedAtUtc, ProcessedAtUtc, NULL, NULL"
	if hasLease {
		cols = "Id, MessageType, AggregateKey, Payload, Status, CreatedAtUtc, ProcessedAtUtc, LockedBy, LockedUntilUtc"
	}
	rows, err := db.sql.QueryContext(ctx, "SELECT "+cols+" FROM OutboxMessages ORDER BY CreatedAtUtc, Id")
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

func (db *DB) hasColumn(ctx context.Context, table, column string) (bool, error) {
	var n int
	err := db.sql.QueryRowContext(ctx, "SELECT count(*) FROM pragma_table_info(?) WHERE name = ?", table, column).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("store: inspect %s: %w", table, err)
	}
	return n > 0, nil
}

// Payment is a payment row as read from the database.
type Payment struct {
	ID            int64
	Key           string
	AmountCents   int64
	Status        string
	TransactionID string
	CreatedAt     string
	UpdatedAt     string
}

// Payments returns every payment in key order.
func (db *DB) Payments(ctx context.Context) ([]Payment, error) {
	rows, err := db.sql.QueryContext(ctx, `SELECT Id, IdempotencyKey, AmountCents, PaymentStatus, TransactionId, CreatedAtUtc, UpdatedAtUtc
FROM Payments ORDER BY IdempotencyKey`)
	if err != nil {
		return nil, fmt.Errorf("store: list payments: %w", err)
	}
	defer rows.Close()
	var out []Payment
	for rows.Next() {
		var p Payment
		var txn sql.NullString
		if err := rows.Scan(&p.ID, &p.Key, &p.AmountCents, &p.Status, &txn, &p.CreatedAt, &p.UpdatedAt); err != nil {
			return nil, fmt.Errorf("store: list payments: %w", err)
		}
		p.TransactionID = txn.String
		out = append(out, p)
	}
	return out, rows.Err()
}

// Audit queries: each figure a Day 14/15 report shows about final state.
const (
	// CountOutboxByStatusSQL counts outbox rows in one status.
	CountOutboxByStatusSQL = `SELECT count(*) FROM OutboxMessages WHERE Status = ?`
	// CountPaymentsByStatusSQL counts payments in one status.
	CountPaymentsByStatusSQL = `SELECT count(*) FROM Payments WHERE PaymentStatus = ?`
	// DuplicateRowsSQL counts payment rows sharing a key plus outbox rows
	// sharing an aggregate: rows that should not exist.
	DuplicateRowsSQL = `SELECT (SELECT count(*) - count(DISTINCT IdempotencyKey) FROM Payments)
     + (SELECT count(*) - count(DISTINCT AggregateKey) FROM OutboxMessages)`
	// FakeSuccessesSQL counts Paid payments without the provider's
	// transaction id and non-Paid payments with one.
	FakeSuccessesSQL = `SELECT count(*) FROM Payments
WHERE (PaymentStatus = 'Paid' AND TransactionId IS NULL)
   OR (PaymentStatus <> 'Paid' AND TransactionId IS NOT NULL)`
	// OrphanPaymentsSQL counts payments that no outbox message will ever act on.
	OrphanPaymentsSQL = `SELECT count(*) FROM Payments p
WHERE NOT EXISTS (SELECT 1 FROM OutboxMessages o WHERE o.AggregateKey = p.IdempotencyKey)`
)

// Count runs one of the audit queries above and returns its single number.
func (db *DB) Count(ctx context.Context, query string, args ...any) (int, error) {
	var n sql.NullInt64
	if err := db.sql.QueryRowContext(ctx, query, args...).Scan(&n); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return 0, nil
		}
		return 0, fmt.Errorf("store: count: %w", err)
	}
	return int(n.Int64), nil
}

// ErrCrashed reports that a failpoint killed the application instance in
// the middle of an operation: its connection was closed under it, SQLite
// discarded whatever was uncommitted, and the [DB] is closed for good. Only
// what was committed before the failpoint survives. It is the store's form
// of [failpoint.ErrCrashed] and wraps it, so errors.Is(err,
// failpoint.ErrCrashed) recognises a crash whichever layer carried it out.
var ErrCrashed = fmt.Errorf("store: crashed at failpoint: %w", failpoint.ErrCrashed)

// CreatePaymentInTwoTransactions is Day 14's "before": the payment row
// commits in one transaction ([InsertPaymentSQL]) and its outbox message in
// a second ([InsertOutboxSQL]). crashHere (if not nil) is the failpoint
// between them: when it returns true the process dies after the first
// commit, the connection is closed, the second transaction never runs, the
// payment is left without a message and the call returns [ErrCrashed].
func (db *DB) CreatePaymentInTwoTransactions(ctx context.Context, p NewPayment, now time.Time, crashHere func() bool) (TxStats, error) {
	at := clock.Format(now)
	stats, err := db.InTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, InsertPaymentSQL, p.Key, p.AmountCents, at, at)
		return err
	})
	if err != nil {
		return stats, fmt.Errorf("store: create payment %s (first transaction): %w", p.Key, err)
	}
	if crashHere != nil && crashHere() {
		if err := db.dieMidStep(ctx, func(context.Context, driver.Conn) error { return nil }); !errors.Is(err, ErrCrashed) {
			return stats, fmt.Errorf("store: create payment %s: crash: %w", p.Key, err)
		}
		return stats, ErrCrashed
	}
	second, err := db.InTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, InsertOutboxSQL, p.MessageType, p.Key, p.Payload, at)
		return err
	})
	stats.BusyRetries += second.BusyRetries
	stats.Waited += second.Waited
	if err != nil {
		return stats, fmt.Errorf("store: create payment %s (second transaction): %w", p.Key, err)
	}
	return stats, nil
}

// CreatePaymentWithFailpoint writes the payment and its outbox message in
// one transaction, like [CreatePayment], with a failpoint between the two
// inserts. When crashHere returns true the process dies there, before the
// outbox insert and before COMMIT: the connection is closed mid-transaction,
// SQLite discards the transaction, neither row survives, and the call
// returns [ErrCrashed]. Otherwise both rows commit together. It runs on the
// instance's raw connection so that the crash can close it mid-transaction;
// it is meant for a single writer and does not retry SQLITE_BUSY.
func (db *DB) CreatePaymentWithFailpoint(ctx context.Context, p NewPayment, now time.Time, crashHere func() bool) error {
	at := clock.Format(now)
	completed := false
	err := db.dieMidStep(ctx, func(ctx context.Context, c driver.Conn) (err error) {
		begin, ok := c.(driver.ConnBeginTx)
		exec, ok2 := c.(driver.ExecerContext)
		if !ok || !ok2 {
			return errors.New("driver connection cannot begin or execute")
		}
		tx, err := begin.BeginTx(ctx, driver.TxOptions{})
		if err != nil {
			return err
		}
		defer func() {
			if err != nil && !completed {
				_ = tx.Rollback()
			}
		}()
		if _, err := exec.ExecContext(ctx, InsertPaymentSQL, namedValues(p.Key, p.AmountCents, at, at)); err != nil {
			return err
		}
		if crashHere != nil && crashHere() {
			return nil // the failpoint: dieMidStep closes the connection now
		}
		if _, err := exec.ExecContext(ctx, InsertOutboxSQL, namedValues(p.MessageType, p.Key, p.Payload, at)); err != nil {
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		completed = true
		return errSurvived
	})
	switch {
	case completed:
		return nil
	case errors.Is(err, ErrCrashed):
		return err
	default:
		return fmt.Errorf("store: create payment %s: %w", p.Key, err)
	}
}

// errSurvived tells dieMidStep that the step reached its end without a crash.
var errSurvived = errors.New("survived")

func namedValues(args ...any) []driver.NamedValue {
	out := make([]driver.NamedValue, len(args))
	for i, a := range args {
		out[i] = driver.NamedValue{Ordinal: i + 1, Value: a}
	}
	return out
}

// dieMidStep runs step on this instance's raw driver connection and then,
// unless step returned an error, closes that connection without committing
// or rolling back, as a process death would, and closes the DB: it returns
// [ErrCrashed]. A step that returns errSurvived finished normally; the
// connection goes back to the pool unharmed.
func (db *DB) dieMidStep(ctx context.Context, step func(ctx context.Context, c driver.Conn) error) error {
	conn, err := db.sql.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	crashed := false
	err = conn.Raw(func(dc any) error {
		c, ok := dc.(driver.Conn)
		if !ok {
			return errors.New("not a driver connection")
		}
		if err := step(ctx, c); err != nil {
			return err
		}
		closer, ok := dc.(io.Closer)
		if !ok {
			return errors.New("driver connection cannot be closed")
		}
		if err := closer.Close(); err != nil {
			return err
		}
		crashed = true
		return driver.ErrBadConn // database/sql discards the dead connection
	})
	if !crashed {
		return err
	}
	conn.Close()
	db.sql.Close()
	return ErrCrashed
}
