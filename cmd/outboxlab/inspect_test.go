package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/outboxlab/outboxlab/store"
)

// TestInspectRefusesNonDatabases: a FIFO, /dev/zero, /dev/null, a folder,
// an empty file and a short or text file are refused with exit 2, without
// blocking.
func TestInspectRefusesNonDatabases(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "db.fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(dir, "short.db")
	if err := os.WriteFile(short, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	text := filepath.Join(dir, "text.db")
	if err := os.WriteFile(text, []byte(strings.Repeat("not a database\n", 100)), 0o644); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		short: "not an SQLite database", text: "not an SQLite database",
		fifo: "not a database file", "/dev/zero": "not a database file", "/dev/null": "not a database file",
		dir: "a folder", empty: "empty", filepath.Join(dir, "missing.db"): "no such file",
	} {
		o := runCLI(t, "inspect", path)
		if o.code != exitUsage || !strings.Contains(o.stderr, want) {
			t.Errorf("inspect %s: exit %d, stderr %q; want 2 and %q", path, o.code, o.stderr, want)
		}
	}
}

// TestInspectOddPaths: a path with '%', '?' or '#', or a leading "//",
// opens the file it names, and inspect leaves no -wal or -shm beside it.
func TestInspectOddPaths(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, name := range []string{"pct%41.db", "q?x.db", "h#x.db"} {
		path := filepath.Join(dir, name)
		db, err := store.Open(context.Background(), path, store.DefaultConfig)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Migrate(context.Background(), store.PaymentsOutbox); err != nil {
			t.Fatal(err)
		}
		db.Close()
		for _, arg := range []string{path, "/" + path} {
			o := runCLI(t, "inspect", arg)
			if o.code != exitOK || !strings.Contains(o.stdout, "2 tables") {
				t.Errorf("inspect %s: exit %d, %q %q", arg, o.code, o.stdout, o.stderr)
			}
		}
		for _, suffix := range []string{"-wal", "-shm"} {
			if _, err := os.Stat(path + suffix); err == nil {
				t.Errorf("inspect left %s", name+suffix)
			}
		}
	}
}
