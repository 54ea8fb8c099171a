package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"
)

// DatabaseClock is the database's own clock as the lab drives it: what
// db_now() answers in session 23's statements ([ClockSQL]), in milliseconds
// on the lesson's clock.
//
// SQLite has no server: its clock is the clock of the process that runs
// the library, so db_now() is a function each SQLite connection opened
// under [WithDatabaseClock] carries, answering its DatabaseClock's time,
// and the lab hands each process that time with each call. On PostgreSQL
// the clock is the server's: db_now() is a function in the run's schema
// reading a one-row table the lab moves ([DB.InstallDatabaseClock],
// [DB.MoveDatabaseClock]), the same for every connection.
type DatabaseClock struct {
	now atomic.Int64

	once   sync.Once
	driver *sqlite.Driver // opens the connections whose db_now() reads this clock
}

// NewDatabaseClock returns a clock stopped at 0.
func NewDatabaseClock() *DatabaseClock { return &DatabaseClock{} }

// Set moves the clock to now.
func (c *DatabaseClock) Set(now int64) { c.now.Store(now) }

// Now is the clock's time.
func (c *DatabaseClock) Now() int64 { return c.now.Load() }

// sqliteDriver is a driver of the clock's own (modernc's private
// registration): the connections it opens carry db_now(), which answers
// this clock's time, and no other connection does.
func (c *DatabaseClock) sqliteDriver() *sqlite.Driver {
	c.once.Do(func() {
		c.driver = &sqlite.Driver{}
		c.driver.MustRegisterScalarFunction("db_now", 0, func(*sqlite.FunctionContext, []driver.Value) (driver.Value, error) {
			return c.Now(), nil
		})
	})
	return c.driver
}

type clockKey struct{}

// WithDatabaseClock returns ctx under which [Open] opens SQLite connections
// whose db_now() answers clock's time. PostgreSQL connections ignore it:
// their clock is the server's.
func WithDatabaseClock(ctx context.Context, clock *DatabaseClock) context.Context {
	return context.WithValue(ctx, clockKey{}, clock)
}

// databaseClockOf is the clock ctx carries, or nil.
func databaseClockOf(ctx context.Context) *DatabaseClock {
	c, _ := ctx.Value(clockKey{}).(*DatabaseClock)
	return c
}

// clockConnector opens SQLite connections through a clock's own driver.
type clockConnector struct {
	driver *sqlite.Driver
	dsn    string
}

func (c clockConnector) Connect(ctx context.Context) (driver.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return c.driver.Open(c.dsn)
}

func (c clockConnector) Driver() driver.Driver { return c.driver }

// ErrNoDatabaseClock means an SQLite connection was asked to move a clock
// it was not opened with (see [WithDatabaseClock]).
var ErrNoDatabaseClock = errors.New("store: this SQLite connection has no database clock (open it under WithDatabaseClock)")

// InstallDatabaseClock starts the database's clock at now. On PostgreSQL it
// creates the clock's table and db_now() in the run's schema; on SQLite
// there is nothing to install (db_now() comes with the connection).
func (db *DB) InstallDatabaseClock(ctx context.Context, now int64) error {
	if db.Engine() != Postgres {
		return db.MoveDatabaseClock(ctx, now)
	}
	_, err := db.InTx(ctx, func(tx *sql.Tx) error {
		for _, s := range []Stmt{createClockTable, startClock, createNow} {
			if _, err := tx.ExecContext(ctx, s.SQL, sql.Named("now", now)); err != nil {
				return fmt.Errorf("%s: %w", s.Name, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: install the database's clock: %w", err)
	}
	return nil
}

// MoveDatabaseClock moves the database's clock to now, as the lab does:
// on PostgreSQL the server's, for every connection; on SQLite this
// process's, for this connection.
func (db *DB) MoveDatabaseClock(ctx context.Context, now int64) error {
	if db.Engine() != Postgres {
		return db.SyncProcessClock(now)
	}
	if _, err := db.sql.ExecContext(ctx, moveClock.SQL, sql.Named("now", now)); err != nil {
		return fmt.Errorf("store: move the database's clock: %w", err)
	}
	return nil
}

// SyncProcessClock hands an SQLite connection the database's time, now, as
// every process that runs SQLite reads it from the host: an application
// instance calls it before each statement that reads db_now(). On
// PostgreSQL it does nothing: an instance never moves the server's clock.
func (db *DB) SyncProcessClock(now int64) error {
	if db.Engine() == Postgres {
		return nil
	}
	if db.clock == nil {
		return ErrNoDatabaseClock
	}
	db.clock.Set(now)
	return nil
}

// ClockRelay is session 23's relay service on outbox_events: one
// connection and the statements it runs, which read the database's clock.
type ClockRelay struct {
	db  *DB
	sql ClockSQL
}

// NewClockRelay returns the service on db running the statements s.
func NewClockRelay(db *DB, s ClockSQL) *ClockRelay { return &ClockRelay{db: db, sql: s} }

// Insert writes e in its own transaction, created at now.
func (r *ClockRelay) Insert(ctx context.Context, e NewEvent, now int64) error {
	_, err := r.db.execRows(ctx, r.sql.Insert.SQL, sql.Named("id", e.ID), sql.Named("type", e.Type),
		sql.Named("payload", e.Payload), sql.Named("now", now))
	if err != nil {
		return fmt.Errorf("store: insert event %s: %w", e.ID, err)
	}
	return nil
}

// Claim claims eventID for relay for lease milliseconds (the Claim
// statement); workerNow is the worker's own clock, which the lesson's
// statement does not read. It reports Blocked with the holder while the
// lease stands, Done when the event is delivered and Empty when there is
// no such event.
func (r *ClockRelay) Claim(ctx context.Context, eventID, relay string, workerNow, lease int64) (EventClaim, error) {
	var c EventClaim
	stats, err := r.db.InTx(ctx, func(tx *sql.Tx) error {
		c = EventClaim{EventID: eventID}
		res, err := tx.ExecContext(ctx, r.sql.Claim.SQL, sql.Named("relay", relay), sql.Named("lease", lease),
			sql.Named("id", eventID), sql.Named("now", workerNow))
		if err != nil {
			return err
		}
		if c.Rows, err = res.RowsAffected(); err != nil {
			return err
		}
		if c.Rows == 1 {
			c.Outcome = Claimed
			return tx.QueryRowContext(ctx, r.sql.ReadClaim.SQL, sql.Named("id", eventID)).Scan(&c.Payload, &c.Token, &c.LeaseUntil)
		}
		e, err := scanEvent(tx.QueryRowContext(ctx, r.sql.Event.SQL, sql.Named("id", eventID)))
		switch {
		case errors.Is(err, sql.ErrNoRows):
			c.Outcome = Empty
		case err != nil:
			return err
		case e.Delivered:
			c.Outcome = Done
		default:
			c.Outcome, c.HeldBy, c.LeaseUntil = Blocked, e.LockedBy, e.LeaseUntil
		}
		return nil
	})
	c.Stats = stats
	if err != nil {
		return c, fmt.Errorf("store: claim %s: %w", eventID, err)
	}
	return c, nil
}

// Ack marks eventID delivered, presenting token (the Ack statement), in
// one try: a lock another transaction holds past the connection's lock
// wait (SQLite's busy timeout; on PostgreSQL lock_timeout, set for the
// ack) is a failed ack the relay must classify, not something to wait
// out. Rows 0 is an expected value: the lease was lost or the event is
// already delivered.
func (r *ClockRelay) Ack(ctx context.Context, eventID string, token int64) (Fenced, error) {
	var f Fenced
	start := time.Now()
	err := r.db.tryTx(ctx, func(tx *sql.Tx) error {
		if r.db.Engine() == Postgres {
			if _, err := tx.ExecContext(ctx, ackLockWait.SQL); err != nil {
				return err
			}
		}
		res, err := tx.ExecContext(ctx, r.sql.Ack.SQL, sql.Named("id", eventID), sql.Named("token", token))
		if err != nil {
			return err
		}
		f.Rows, err = res.RowsAffected()
		return err
	})
	f.Stats.Waited = time.Since(start)
	if err != nil {
		return f, fmt.Errorf("store: ack %s with token %d: %w", eventID, token, err)
	}
	return f, nil
}

// Renew gives eventID one more lease of lease milliseconds from the
// database's now, presenting token (the Renew statement).
func (r *ClockRelay) Renew(ctx context.Context, eventID string, token, lease int64) (Fenced, error) {
	f, err := r.db.execRows(ctx, r.sql.Renew.SQL, sql.Named("lease", lease), sql.Named("id", eventID), sql.Named("token", token))
	if err != nil {
		return f, fmt.Errorf("store: renew lease of %s: %w", eventID, err)
	}
	return f, nil
}

// EventByID reads one event (the Event statement); ok is false when there
// is no such event.
func (r *ClockRelay) EventByID(ctx context.Context, eventID string) (Event, bool, error) {
	return NewRelay(r.db, RelaySQL{Event: r.sql.Event}).EventByID(ctx, eventID)
}

// Events returns every event in creation order (the Events statement).
func (r *ClockRelay) Events(ctx context.Context) ([]Event, error) {
	return NewRelay(r.db, RelaySQL{Events: r.sql.Events}).Events(ctx)
}

// Stage starts a race trial (the Stage statement): eventID held by relay
// under a new token, its lease ending now on the database's clock. It
// returns the token and the lease end read back.
func (r *ClockRelay) Stage(ctx context.Context, eventID, relay string) (token, leaseUntil int64, err error) {
	_, err = r.db.InTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, r.sql.Stage.SQL, sql.Named("relay", relay), sql.Named("id", eventID)); err != nil {
			return err
		}
		var payload string
		return tx.QueryRowContext(ctx, r.sql.ReadClaim.SQL, sql.Named("id", eventID)).Scan(&payload, &token, &leaseUntil)
	})
	if err != nil {
		return 0, 0, fmt.Errorf("store: stage a race trial on %s: %w", eventID, err)
	}
	return token, leaseUntil, nil
}

// Held is a transaction kept open on purpose, holding its locks.
type Held struct{ tx *sql.Tx }

// Hold runs the Hold statement on eventID's row and keeps the transaction
// open until [Held.Release]: on SQLite every other writer then waits for
// the database's write lock, on PostgreSQL every writer of that row for
// the row's lock.
func (r *ClockRelay) Hold(ctx context.Context, eventID string) (*Held, error) {
	tx, err := r.db.sql.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("store: hold %s: %w", eventID, err)
	}
	if _, err := tx.ExecContext(ctx, r.sql.Hold.SQL, sql.Named("id", eventID)); err != nil {
		_ = tx.Rollback()
		return nil, fmt.Errorf("store: hold %s: %w", eventID, err)
	}
	return &Held{tx: tx}, nil
}

// Release commits the held transaction, freeing its locks.
func (h *Held) Release() error {
	if err := h.tx.Commit(); err != nil {
		return fmt.Errorf("store: release held transaction: %w", err)
	}
	return nil
}

// Abandon rolls the held transaction back unless it was released: a run
// that fails while it holds the lock frees it before its connections
// close.
func (h *Held) Abandon() {
	if h != nil {
		_ = h.tx.Rollback() // sql.ErrTxDone once released
	}
}
