package store

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

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
