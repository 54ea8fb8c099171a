package store

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestURIPaths: a database path is handed to SQLite as an escaped file:
// URI, so '%', '?', '#' and a leading "//" name the file they spell.
func TestURIPaths(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, name := range []string{"pct%41.db", "q?mode=memory.db", "hash#x.db", "space and 100%.db"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "dir%3F?#")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, name)
			db, err := Open(ctx, path, DefaultConfig)
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Migrate(ctx, PaymentsOutbox); err != nil {
				t.Fatal(err)
			}
			db.Close()
			if _, err := os.Stat(path); err != nil {
				t.Fatalf("the database is not at %s: %v", path, err)
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 1 {
				var names []string
				for _, e := range entries {
					names = append(names, e.Name())
				}
				t.Errorf("folder holds %q, want only %q", names, name)
			}
			ro, err := Open(ctx, path, Config{ReadOnly: true})
			if err != nil {
				t.Fatalf("read-only: %v", err)
			}
			ro.Close()
		})
	}
	t.Run("LeadingDoubleSlash", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "x.db")
		db, err := Open(ctx, "/"+path, DefaultConfig)
		if err != nil {
			t.Fatal(err)
		}
		db.Close()
		if _, err := os.Stat(path); err != nil {
			t.Fatal(err)
		}
	})
}

func TestURIFileURI(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"a.db":        "file:a.db",
		"/tmp/a.db":   "file:///tmp/a.db",
		"//tmp/a.db":  "file:////tmp/a.db",
		"/t/50%?#.db": "file:///t/50%25%3F%23.db",
	} {
		if got := fileURI(in); got != want {
			t.Errorf("fileURI(%q) = %q, want %q", in, got, want)
		}
		if strings.Contains(fileURI(in), "?") {
			t.Errorf("fileURI(%q) holds a '?'", in)
		}
	}
}
