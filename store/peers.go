package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"modernc.org/sqlite"
)

// This file opens SQLite for the peer queues the bench measures beside the
// lab's designs (goqite, River's SQLite driver): libraries that take a
// plain *sql.DB and run their own SQL. The file's settings are the lab's
// (WAL, the synchronous setting, BEGIN IMMEDIATE); only the pool is
// theirs.

// OpenPeer opens the SQLite database at path as a plain database/sql pool
// of one connection, as goqite's README and River's SQLite driver ask (both
// say SQLite serves one writer at a time), in WAL mode with cfg's
// synchronous setting and busy timeout and BEGIN IMMEDIATE write
// transactions. The caller hands it to the peer library and closes it.
func OpenPeer(ctx context.Context, path string, cfg Config) (*sql.DB, error) {
	if cfg.BusyTimeout <= 0 {
		cfg.BusyTimeout = DefaultConfig.BusyTimeout
	}
	if cfg.Synchronous == "" {
		cfg.Synchronous = DefaultConfig.Synchronous
	}
	q := []string{
		fmt.Sprintf("_pragma=busy_timeout(%d)", cfg.BusyTimeout.Milliseconds()),
		"_txlock=immediate",
		"_pragma=journal_mode(WAL)",
		fmt.Sprintf("_pragma=synchronous(%s)", strings.ToUpper(cfg.Synchronous)),
		"_pragma=foreign_keys(1)",
	}
	connector, err := sqlite.NewConnector(fileURI(path) + "?" + strings.Join(q, "&"))
	if err != nil {
		return nil, fmt.Errorf("store: open %s for a peer: %w", path, err)
	}
	pool := sql.OpenDB(connector)
	pool.SetMaxOpenConns(1)
	pool.SetMaxIdleConns(1)
	pool.SetConnMaxLifetime(0)
	var n int
	if err := pool.QueryRowContext(ctx, verifySQL.SQL).Scan(&n); err != nil {
		pool.Close()
		return nil, fmt.Errorf("store: open %s for a peer: %w", path, err)
	}
	return pool, nil
}

// GoqiteSchema is goqite's own SQLite schema (schema_sqlite.sql of
// maragu.dev/goqite v0.4.0, which the library does not embed), as a
// schema step: apply it with [DB.Migrate] before goqite runs.
var GoqiteSchema = Migration{Name: "goqite v0.4.0 schema_sqlite.sql (peer)", SQL: goqiteSchema.SQL}
