// Package storetest opens the lab's databases for tests: one helper per
// purpose, each connection closed when its test ends.
package storetest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/outboxlab/outboxlab/store"
)

// Open opens the SQLite database at path with cfg, applies migrations, and
// closes the connection when tb ends. Any failure fails tb.
func Open(tb testing.TB, path string, cfg store.Config, migrations ...store.Migration) *store.DB {
	tb.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, path, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	if len(migrations) > 0 {
		if err := db.Migrate(ctx, migrations...); err != nil {
			tb.Fatal(err)
		}
	}
	return db
}

// Fresh is [Open] on a new database file in tb.TempDir(); it returns the
// file's path too, for the test's other connections.
func Fresh(tb testing.TB, cfg store.Config, migrations ...store.Migration) (*store.DB, string) {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "lab.db")
	return Open(tb, path, cfg, migrations...), path
}

// OpenRecorded opens the database at path with the scenarios' settings and
// a statement ledger of its own: a test's [cast.Opener], where no run's
// ledger is wanted. The caller closes it.
func OpenRecorded(ctx context.Context, path string) (*store.DB, error) {
	cfg := store.DefaultConfig
	cfg.Ledger = &store.Ledger{}
	return store.Open(ctx, path, cfg)
}
