package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInspectDatabaseHeader: a file shorter than SQLite's header, or one
// that starts otherwise, is not a database; a real database is.
func TestInspectDatabaseHeader(t *testing.T) {
	t.Parallel()
	for name, text := range map[string]string{
		"one byte": "x", "fifteen bytes": "SQLite format 3", "text": strings.Repeat("not a database ", 40),
		"header without NUL": "SQLite format 3 and more",
	} {
		if err := CheckDatabaseHeader(strings.NewReader(text)); !errors.Is(err, ErrNotDatabase) {
			t.Errorf("%s: %v, want ErrNotDatabase", name, err)
		}
	}
	path := filepath.Join(t.TempDir(), "real.db")
	db, err := Open(context.Background(), path, DefaultConfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Migrate(context.Background(), PaymentsOutbox); err != nil {
		t.Fatal(err)
	}
	db.Close()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := CheckDatabaseHeader(f); err != nil {
		t.Errorf("a real database: %v", err)
	}
}

// TestInspectLeavesNoFiles: reading a kept database read-only leaves no
// -wal or -shm file beside it, and still sees its rows.
func TestInspectLeavesNoFiles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "kept.db")
	db, err := Open(ctx, path, DefaultConfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Migrate(ctx, PaymentsOutbox, OutboxLeasing); err != nil {
		t.Fatal(err)
	}
	db.Close()
	ro, err := Open(ctx, path, Config{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	tables, err := ro.Dump(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(tables) != 2 {
		t.Errorf("%d tables, want 2", len(tables))
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		if _, err := os.Stat(path + suffix); err == nil {
			t.Errorf("reading left %s beside the database", filepath.Base(path+suffix))
		}
	}
	ro.Close()
	for _, suffix := range []string{"-wal", "-shm"} {
		if _, err := os.Stat(path + suffix); err == nil {
			t.Errorf("closing left %s beside the database", filepath.Base(path+suffix))
		}
	}
}
