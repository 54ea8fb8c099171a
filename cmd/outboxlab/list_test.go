package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestListMarksPostgresVariants: list and list --format json say which
// variants only PostgreSQL can run, so nobody runs one on SQLite by
// surprise.
func TestListMarksPostgresVariants(t *testing.T) {
	t.Parallel()
	text := runCLI(t, "list")
	if text.code != 0 || strings.Count(text.stdout, "(PostgreSQL only: --db)") != 2 {
		t.Errorf("list: exit %d, want the PostgreSQL-only variant marked:\n%s", text.code, text.stdout)
	}
	js := runCLI(t, "list", "--format", "json")
	var entries []struct {
		Name             string   `json:"name"`
		Variants         []string `json:"variants"`
		PostgresVariants []string `json:"postgres_variants"`
	}
	if err := json.Unmarshal([]byte(js.stdout), &entries); err != nil {
		t.Fatalf("list --format json: %v\n%s", err, js.stdout)
	}
	for _, e := range entries {
		for _, v := range e.PostgresVariants {
			if !slices.Contains(e.Variants, v) {
				t.Errorf("%s: PostgreSQL variant %s is not among its variants", e.Name, v)
			}
		}
		if e.Name == "session-15-outbox-leasing" && !slices.Equal(e.PostgresVariants, []string{"for-update-without-skip-locked", "select-then-update-read-committed"}) {
			t.Errorf("%s: postgres_variants %v", e.Name, e.PostgresVariants)
		}
	}
}
