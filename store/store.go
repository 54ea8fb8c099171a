// Package store is the only package that speaks SQL: it opens the lab's
// SQLite databases (one connection per application instance) and holds every
// statement a lesson teaches, as named constants the reports can print.
package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"modernc.org/sqlite"
)

// Documented errors of [Open].
var (
	// ErrNotDatabase means the file exists but is not an SQLite database.
	ErrNotDatabase = errors.New("store: file is not an SQLite database")
	// ErrLocked means another process holds the database and did not let go
	// within the busy timeout.
	ErrLocked = errors.New("store: database is locked by another process")
)

// SQLite primary result codes the lab tells apart.
const (
	codeBusy     = 5  // SQLITE_BUSY: another connection holds the lock
	codeLocked   = 6  // SQLITE_LOCKED: a conflict inside one connection
	codeNotADB   = 26 // SQLITE_NOTADB
	codeReadOnly = 8  // SQLITE_READONLY
)

// Config is how one application instance opens the database.
type Config struct {
	// BusyTimeout is how long SQLite's own busy handler waits for a lock
	// before it returns SQLITE_BUSY to us (then [DB.InTx] retries).
	BusyTimeout time.Duration
	// Synchronous is SQLite's synchronous setting: "NORMAL" (default) or "FULL".
	Synchronous string
	// ReadOnly opens the file without write access, for inspecting a kept database.
	ReadOnly bool
	// Ledger, when set, records every statement this connection executes:
	// give every connection of one run the same Ledger.
	Ledger *Ledger
	// OnBusy, when set, is called each time [DB.InTx] meets SQLITE_BUSY,
	// before its pause: a handshake for tests that hold the lock.
	OnBusy func()
	// SlotFile, when set, guards the connection for an untrusted slot
	// file (see [CheckSlotFile]): its statements compile only under
	// SQLite's authorizer with their shapes' policy, and no database can
	// be attached; on PostgreSQL they run bounded, as a [GraderRole].
	SlotFile *SlotFile
	// Program, when set, guards the connection for a user's program's
	// statements (see [ProgramSandbox]): on SQLite any text the lab does
	// not own compiles only under SQLite's authorizer with the sandbox's
	// policy; on PostgreSQL the connection logs in as the run's program
	// role ([GraderRole.GrantProgram]) and the lab refuses what the role's
	// rights cannot (see [ProgramTx]).
	Program *ProgramSandbox
}

// DefaultConfig is what the scenarios use.
var DefaultConfig = Config{BusyTimeout: time.Second, Synchronous: "NORMAL"}

// DB is one application instance's connection to a lab database. Write
// transactions begin with BEGIN IMMEDIATE, so a transaction that will write
// takes the write lock before it reads anything.
type DB struct {
	sql     *sql.DB
	ledger  *Ledger // the run's statement ledger, or nil
	onBusy  func()  // see Config.OnBusy
	engine  Engine
	schema  string          // PostgreSQL: the schema first on the search path
	program *ProgramSandbox // see Config.Program
	clock   *DatabaseClock  // SQLite opened under WithDatabaseClock: what its db_now() answers
}

// Engine is the database engine behind the connection.
func (db *DB) Engine() Engine {
	if db.engine == "" {
		return SQLite
	}
	return db.engine
}

// Open opens (creating if needed) the SQLite database at path with exactly
// one connection, in WAL mode, with a busy timeout and BEGIN IMMEDIATE write
// transactions. It fails with [ErrNotDatabase] or [ErrLocked] when the file
// cannot serve as a lab database. Under a ctx from [WithDatabaseClock] the
// connection's db_now() answers that clock's time.
func Open(ctx context.Context, path string, cfg Config) (*DB, error) {
	if cfg.BusyTimeout <= 0 {
		cfg.BusyTimeout = DefaultConfig.BusyTimeout
	}
	switch strings.ToUpper(cfg.Synchronous) {
	case "":
		cfg.Synchronous = DefaultConfig.Synchronous
	case "NORMAL", "FULL":
	default:
		return nil, fmt.Errorf("store: open %s: synchronous must be NORMAL or FULL, not %q", path, cfg.Synchronous)
	}
	q := []string{
		fmt.Sprintf("_pragma=busy_timeout(%d)", cfg.BusyTimeout.Milliseconds()),
		"_txlock=immediate",
	}
	dsn := fileURI(path)
	if cfg.ReadOnly {
		q = append(q, readOnlyParams(path)...)
	} else {
		q = append(q,
			"_pragma=journal_mode(WAL)",
			fmt.Sprintf("_pragma=synchronous(%s)", strings.ToUpper(cfg.Synchronous)),
			"_pragma=foreign_keys(1)")
	}
	dsn += "?" + strings.Join(q, "&")

	connector, err := sqlite.NewConnector(dsn)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	clock := databaseClockOf(ctx)
	if clock != nil {
		connector = clockConnector{driver: clock.sqliteDriver(), dsn: dsn}
	}
	if cfg.SlotFile != nil || cfg.Program != nil {
		connector = &guardConnector{base: connector, file: cfg.SlotFile, program: cfg.Program}
	}
	if cfg.Ledger != nil {
		connector = &recordingConnector{base: connector, ledger: cfg.Ledger}
	}
	sdb := oneConnection(connector)
	db := &DB{sql: sdb, ledger: cfg.Ledger, onBusy: cfg.OnBusy, clock: clock, program: cfg.Program}
	if err := db.verify(ctx); err != nil {
		sdb.Close()
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	return db, nil
}

// oneConnection is the pool every lab connection lives in, on either
// engine: one application instance, one connection, kept open, so a worker
// never borrows a second connection behind the lab's back and a
// transaction's statements all run on the connection that began it.
func oneConnection(c driver.Connector) *sql.DB {
	sdb := sql.OpenDB(c)
	sdb.SetMaxOpenConns(1)
	sdb.SetMaxIdleConns(1)
	sdb.SetConnMaxLifetime(0)
	return sdb
}

// The lab's reads of the database itself.
var (
	verifySQL = audit("lab: check the file is an SQLite database", "SELECT count(*) FROM sqlite_schema")
	schemaSQL = audit("lab: read the schema back for the report",
		"SELECT sql FROM sqlite_schema WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY rowid")
)

// verify makes SQLite read the file header, so a file that is not a
// database or is locked is reported at Open rather than at the first claim.
func (db *DB) verify(ctx context.Context) error {
	var n int
	err := db.sql.QueryRowContext(ctx, verifySQL.SQL).Scan(&n)
	switch {
	case err == nil:
		return nil
	case code(err) == codeNotADB:
		return ErrNotDatabase
	case code(err) == codeBusy || code(err) == codeLocked:
		return ErrLocked
	default:
		return err
	}
}

// Close closes the connection. Closing in the middle of a scenario is how a
// worker crash is simulated: SQLite rolls back whatever was uncommitted.
func (db *DB) Close() error { return db.sql.Close() }

// code extracts SQLite's primary result code from err, or 0.
func code(err error) int {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code() & 0xff
	}
	return 0
}

// IsBusy reports whether err is SQLITE_BUSY (including its extended codes),
// or on PostgreSQL a serialization failure, a deadlock victim or a lock not
// available: a normal event under contention, to be retried and counted.
func IsBusy(err error) bool {
	return code(err) == codeBusy || pgRetryable(err) || errors.Is(err, errRaceLost)
}

// errRaceLost means a transaction lost a race it can only see at its end
// (a concurrent transaction committed the row it meant to write first): it
// is retried like SQLITE_BUSY, and its next run reads the winner's commit.
var errRaceLost = errors.New("store: another instance committed the same row first")

// TxStats is what one call of [DB.InTx] cost.
type TxStats struct {
	BusyRetries int           // how many times the whole transaction was retried after SQLITE_BUSY
	Waited      time.Duration // time from the first BEGIN to the successful COMMIT or final error
}

// InTx runs fn inside one BEGIN IMMEDIATE transaction and commits when fn
// returns nil; any error rolls back. SQLITE_BUSY, at BEGIN, inside fn or at
// COMMIT, is not a failure: the transaction is rolled back and run again
// after a short jittered backoff, until ctx ends. fn must therefore keep no
// state across calls.
func (db *DB) InTx(ctx context.Context, fn func(tx *sql.Tx) error) (TxStats, error) {
	stats, _, err := retryBusy(ctx, backoff, db.onBusy, func() (bool, error) { return true, db.tryTx(ctx, fn) })
	return stats, err
}

// retryBusy is the lab's one busy-retry loop, under every write
// transaction: it runs try until it returns an error that is not busy (see
// [IsBusy]), or nil, or says its error must not be retried (a connection
// that died with its crash), sleeping pause(attempt, waited) between two
// tries and calling onBusy (if set) after each busy one. It gives up only
// when ctx ends. It returns the retries and the time from the first try to
// the last one's end, and held, how long the last try took: the
// transaction's own cost, without the waiting.
func retryBusy(ctx context.Context, pause func(attempt int, waited time.Duration) time.Duration, onBusy func(),
	try func() (retryable bool, err error)) (stats TxStats, held time.Duration, err error) {
	start := time.Now()
	for attempt := 0; ; attempt++ {
		began := time.Now()
		retryable, err := try()
		if err == nil || !retryable || !IsBusy(err) {
			end := time.Now()
			stats.Waited = end.Sub(start)
			return stats, end.Sub(began), err
		}
		stats.BusyRetries++
		if onBusy != nil {
			onBusy()
		}
		if err := pauseFor(ctx, pause(attempt, time.Since(start))); err != nil {
			stats.Waited = time.Since(start)
			return stats, 0, fmt.Errorf("store: gave up after %d busy retries: %w", stats.BusyRetries, err)
		}
	}
}

func (db *DB) tryTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := db.sql.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		_ = tx.Rollback()
		return err
	}
	return nil
}

// backoff grows from about 1 ms to about 32 ms with full jitter, so two
// retrying workers do not keep colliding in step.
func backoff(attempt int, _ time.Duration) time.Duration {
	ceiling := time.Millisecond << min(attempt, 5)
	return time.Duration(rand.Int64N(int64(ceiling))) + 100*time.Microsecond
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Schema returns the CREATE statements in force, in creation order, read
// from sqlite_schema so the report shows what the database really holds.
func (db *DB) Schema(ctx context.Context) ([]string, error) {
	if db.Engine() == Postgres {
		return db.postgresSchema(ctx)
	}
	rows, err := db.sql.QueryContext(ctx, schemaSQL.SQL)
	if err != nil {
		return nil, fmt.Errorf("store: read schema: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, fmt.Errorf("store: read schema: %w", err)
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// RemoveFiles deletes the database file at path and its WAL, shared-memory
// and rollback-journal companions; a file that does not exist is not an
// error. Close every connection to it first.
func RemoveFiles(path string) error {
	for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
		if err := os.Remove(path + suffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("store: remove %s: %w", path+suffix, err)
		}
	}
	return nil
}
