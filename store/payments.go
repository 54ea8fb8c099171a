package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/outboxlab/outboxlab/clock"
)

// The transactional outbox's writes (Days 14 and 15): the payment row and
// its outbox row. Parameters are named: :key, :amount, :type, :payload, :now.
var (
	// InsertPayment writes the business row of the transactional outbox.
	InsertPayment = named("checkout: payment row", `INSERT INTO Payments (IdempotencyKey, AmountCents, PaymentStatus, CreatedAtUtc, UpdatedAtUtc)
VALUES (:key, :amount, 'Pending', :now, :now)`)

	// InsertOutbox writes the outbox row, in the same transaction as the payment.
	InsertOutbox = named("checkout: outbox row (the same transaction)", `INSERT INTO OutboxMessages (MessageType, AggregateKey, Payload, Status, CreatedAtUtc)
VALUES (:type, :key, :payload, 'Pending', :now)`)

	// InsertPaymentAlone is Day 14's "before": the same payment row,
	// committed in a transaction of its own. Only the transaction differs,
	// so the comment that closes its text is what tells the two apart.
	InsertPaymentAlone = mistake(&InsertPayment,
		"commits the payment in a transaction of its own, before its outbox row exists",
		"checkout: payment row (a transaction of its own: MISTAKE)", `INSERT INTO Payments (IdempotencyKey, AmountCents, PaymentStatus, CreatedAtUtc, UpdatedAtUtc)
VALUES (:key, :amount, 'Pending', :now, :now) /* committed alone; the outbox row follows in a second transaction */`)

	// InsertOutboxAlone is the outbox row of Day 14's "before", written in a
	// second transaction after the payment committed.
	InsertOutboxAlone = separate(mistake(&InsertOutbox,
		"writes the outbox row in a second transaction, after the payment has committed",
		"checkout: outbox row (a transaction of its own: MISTAKE)", `INSERT INTO OutboxMessages (MessageType, AggregateKey, Payload, Status, CreatedAtUtc)
VALUES (:type, :key, :payload, 'Pending', :now) /* a second transaction, after the payment committed */`))
)

// PaymentWrite is how checkout writes a payment and its outbox message:
// the two inserts, in one transaction (the lesson), or in two when the
// outbox insert runs in a transaction of its own ([Stmt.Separate], Day
// 14's "before").
type PaymentWrite struct {
	Payment Stmt
	Outbox  Stmt
}

// Split reports whether the payment commits before the outbox row is
// written, in a second transaction: a crash between them leaves an orphan
// payment.
func (w PaymentWrite) Split() bool { return w.Outbox.Separate }

// The payment writes a lesson chooses from.
var (
	// PaymentWriteLesson writes both rows in one transaction: both commit,
	// or neither does.
	PaymentWriteLesson = PaymentWrite{Payment: InsertPayment, Outbox: InsertOutbox}
	// PaymentWriteTwoTransactions is Day 14's "before": the same rows in two
	// transactions.
	PaymentWriteTwoTransactions = PaymentWrite{Payment: InsertPaymentAlone, Outbox: InsertOutboxAlone}
)

// Payments is the service on Payments rows: checkout's write of a payment
// and its outbox message, and the list the reports read.
type Payments struct {
	db  *DB
	sql PaymentWrite
}

// NewPayments returns the payments service of db writing as w says.
func NewPayments(db *DB, w PaymentWrite) *Payments { return &Payments{db: db, sql: w} }

// NewPayment is what checkout asks for: a payment under an idempotency key.
type NewPayment struct {
	Key         string
	AmountCents int64
	MessageType string
	Payload     string
}

// Create writes the payment and its outbox message, in one transaction or
// in two as the service's [PaymentWrite] says. crashHere (if not nil) is the
// failpoint between the two inserts: when it returns true the process dies
// there. Its connection is closed without COMMIT or ROLLBACK, the DB is
// closed for good and Create returns [ErrCrashed]. What survives is what had
// committed: in one transaction, nothing; in two, the payment alone, an
// orphan no outbox message will act on. SQLITE_BUSY is retried per
// transaction, as [DB.InTx] does.
func (p *Payments) Create(ctx context.Context, np NewPayment, now time.Time, crashHere func() bool) (TxStats, error) {
	at := clock.Format(now)
	payment := []any{sql.Named("key", np.Key), sql.Named("amount", np.AmountCents), sql.Named("now", at)}
	outbox := []any{sql.Named("type", np.MessageType), sql.Named("key", np.Key), sql.Named("payload", np.Payload), sql.Named("now", at)}
	crash := func() bool { return crashHere != nil && crashHere() }
	var stats TxStats
	err := p.db.onOwnConn(ctx, func(c *ownConn) error {
		if !p.sql.Split() {
			return c.tx(ctx, &stats, func() error {
				if err := c.exec(ctx, p.sql.Payment, payment); err != nil {
					return err
				}
				if crash() {
					return c.die() // mid-transaction: SQLite discards both rows
				}
				return c.exec(ctx, p.sql.Outbox, outbox)
			})
		}
		if err := c.tx(ctx, &stats, func() error { return c.exec(ctx, p.sql.Payment, payment) }); err != nil {
			return err
		}
		if crash() {
			return c.die() // between the commits: the payment is durable, its message never comes
		}
		return c.tx(ctx, &stats, func() error { return c.exec(ctx, p.sql.Outbox, outbox) })
	})
	switch {
	case errors.Is(err, ErrCrashed):
		return stats, err
	case err != nil:
		return stats, fmt.Errorf("store: create payment %s: %w", np.Key, err)
	}
	return stats, nil
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

var paymentsSQL = audit("audit: read every payment", `SELECT Id, IdempotencyKey, AmountCents, PaymentStatus, TransactionId, CreatedAtUtc, UpdatedAtUtc
FROM Payments ORDER BY IdempotencyKey`)

// List returns every payment in key order.
func (p *Payments) List(ctx context.Context) ([]Payment, error) {
	rows, err := p.db.sql.QueryContext(ctx, paymentsSQL.SQL)
	if err != nil {
		return nil, fmt.Errorf("store: list payments: %w", err)
	}
	defer rows.Close()
	var out []Payment
	for rows.Next() {
		var pay Payment
		var txn sql.NullString
		if err := rows.Scan(&pay.ID, &pay.Key, &pay.AmountCents, &pay.Status, &txn, &pay.CreatedAt, &pay.UpdatedAt); err != nil {
			return nil, fmt.Errorf("store: list payments: %w", err)
		}
		pay.TransactionID = txn.String
		out = append(out, pay)
	}
	return out, rows.Err()
}

// Audit queries: each figure a Day 14/15 report shows about final state.
var (
	// CountOutboxByStatus counts outbox rows in status :status.
	CountOutboxByStatus = audit("audit: count outbox messages in one status", `SELECT count(*) FROM OutboxMessages WHERE Status = :status`)
	// CountPaymentsByStatus counts payments in status :status.
	CountPaymentsByStatus = audit("audit: count payments in one status", `SELECT count(*) FROM Payments WHERE PaymentStatus = :status`)
	// DuplicateRows counts payment rows sharing a key plus outbox rows
	// sharing an aggregate: rows that should not exist.
	DuplicateRows = audit("audit: count duplicate payment and outbox rows", `SELECT (SELECT count(*) - count(DISTINCT IdempotencyKey) FROM Payments)
     + (SELECT count(*) - count(DISTINCT AggregateKey) FROM OutboxMessages)`)
	// DuplicatePaymentRows counts payment rows beyond one per key.
	DuplicatePaymentRows = audit("audit: count duplicate payment rows", `SELECT count(*) - count(DISTINCT IdempotencyKey) FROM Payments`)
	// DuplicateOutboxRows counts outbox rows beyond one per payment.
	DuplicateOutboxRows = audit("audit: count duplicate outbox rows", `SELECT count(*) - count(DISTINCT AggregateKey) FROM OutboxMessages`)
	// CountPayments counts every payment row.
	CountPayments = audit("audit: count payments", `SELECT count(*) FROM Payments`)
	// CountOutbox counts every outbox row.
	CountOutbox = audit("audit: count outbox messages", `SELECT count(*) FROM OutboxMessages`)
	// OrphanPayments counts payments that no outbox message will ever act on.
	OrphanPayments = audit("audit: count payments no outbox message will act on", `SELECT count(*) FROM Payments p
WHERE NOT EXISTS (SELECT 1 FROM OutboxMessages o WHERE o.AggregateKey = p.IdempotencyKey)`)
)

// Count runs an audit query and returns its single number.
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
