package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/outboxlab/outboxlab/clock"
)

// This file is the fetch-ahead design's two services ([FetchAheadSQL], in
// fetchahead_sql.go): a [Fetcher], one per process, that claims up to its
// free workers' count in one statement, and a [Completer] that marks the
// messages the workers finished Processed in one statement. Both run their
// statement prepared, in one transaction, through the claimer's retry.

// FetchAheadConfig chooses the fetch-ahead design's statements and retry.
type FetchAheadConfig struct {
	SQL   FetchAheadSQL // [FetchAhead], or a mistake design
	Retry Retry
}

// Fetcher is a process's one fetcher: it claims messages for the process's
// workers under one owner name (LockedBy), each message with its own
// fencing token and lease.
type Fetcher struct {
	db    *DB
	owner string
	cfg   FetchAheadConfig
	stmt  *sql.Stmt
}

// NewFetcher prepares the design's fetch on db for owner and sets
// cfg.Retry's busy handler on db's connection.
func NewFetcher(ctx context.Context, db *DB, owner string, cfg FetchAheadConfig) (*Fetcher, error) {
	stmt, err := prepareFetchAhead(ctx, db, owner, cfg, cfg.SQL.Fetch)
	if err != nil {
		return nil, err
	}
	return &Fetcher{db: db, owner: owner, cfg: cfg, stmt: stmt}, nil
}

// Close releases the prepared statement; the connection stays open.
func (f *Fetcher) Close() error { return f.stmt.Close() }

// Fetch claims up to limit of the oldest claimable messages in one
// transaction with a lease until now+lease, each with a new fencing token,
// oldest first. No messages means nothing was claimable. With an error
// the batch holds no messages: the transaction rolled back, so none of the
// rows it read is claimed.
func (f *Fetcher) Fetch(ctx context.Context, now time.Time, lease time.Duration, limit int) (ClaimedBatch, error) {
	if limit < 1 {
		return ClaimedBatch{}, fmt.Errorf("store: fetch for %s: limit %d, want at least 1", f.owner, limit)
	}
	args := append([]any{sql.Named("now", clock.Format(now)), sql.Named("limit", limit)},
		OutboxLeaseFor(f.owner, now, lease).claimArgs("worker")...)
	var b ClaimedBatch
	stats, held, err := f.db.inTxRetry(ctx, f.cfg.Retry, func(tx *sql.Tx) error {
		var err error
		b.Messages, err = scanClaimed(tx.StmtContext(ctx, f.stmt).QueryContext(ctx, args...))
		return err
	})
	b.Stats, b.Held = stats, held
	if err != nil {
		// The transaction rolled back, perhaps after its rows were read (a
		// COMMIT that failed): none of them is claimed.
		b.Messages = nil
		return b, fmt.Errorf("store: %s fetch of %d for %s: %w", f.cfg.SQL.Name, limit, f.owner, err)
	}
	return b, nil
}

// Completer marks the messages a process's workers finished Processed, a
// batch at a time, each row under its own guard.
type Completer struct {
	db    *DB
	owner string
	cfg   FetchAheadConfig
	stmt  *sql.Stmt
}

// NewCompleter prepares the design's completion on db for owner (the
// fetcher's) and sets cfg.Retry's busy handler on db's connection.
func NewCompleter(ctx context.Context, db *DB, owner string, cfg FetchAheadConfig) (*Completer, error) {
	stmt, err := prepareFetchAhead(ctx, db, owner, cfg, cfg.SQL.Complete)
	if err != nil {
		return nil, err
	}
	return &Completer{db: db, owner: owner, cfg: cfg, stmt: stmt}, nil
}

// Close releases the prepared statement; the connection stays open.
func (c *Completer) Close() error { return c.stmt.Close() }

// Complete marks msgs Processed with one run of the design's completion
// in one transaction. A row the guard refuses (its lease ran out and a
// newer fetch holds it) is reported in Rejected, an expected outcome; the
// others commit.
func (c *Completer) Complete(ctx context.Context, msgs []ClaimedMessage, now time.Time) (FinalizedBatch, error) {
	if len(msgs) == 0 {
		return FinalizedBatch{}, nil
	}
	args := []any{sql.Named("now", clock.Format(now)), sql.Named("worker", c.owner), sql.Named("claims", claimsJSON(msgs))}
	var done []int64
	stats, held, err := c.db.inTxRetry(ctx, c.cfg.Retry, func(tx *sql.Tx) error {
		var err error
		done, err = scanIDs(tx.StmtContext(ctx, c.stmt).QueryContext(ctx, args...))
		return err
	})
	f := FinalizedBatch{Stats: stats, Held: held}
	if err != nil {
		return f, fmt.Errorf("store: %s completion of %d messages for %s: %w", c.cfg.SQL.Name, len(msgs), c.owner, err)
	}
	f.sortOut(msgs, done)
	return f, nil
}

// prepareFetchAhead sets cfg.Retry's busy handler on db's connection and
// prepares stmt, one of cfg.SQL's.
func prepareFetchAhead(ctx context.Context, db *DB, owner string, cfg FetchAheadConfig, stmt Stmt) (*sql.Stmt, error) {
	if stmt.SQL == "" {
		return nil, fmt.Errorf("store: %s for %s: a statement of the design is missing", cfg.SQL.Name, owner)
	}
	if err := setBusyHandler(ctx, db, cfg.Retry); err != nil {
		return nil, err
	}
	ps, err := db.sql.PrepareContext(ctx, stmt.SQL)
	if err != nil {
		return nil, fmt.Errorf("store: prepare %q for %s: %w", stmt.Name, owner, err)
	}
	return ps, nil
}
