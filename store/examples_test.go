package store_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outboxlab/outboxlab/store"
)

// exampleCopies names the store claim each examples/*.sql file copies.
var exampleCopies = map[string]store.ClaimSQL{
	"claim-lesson.sql":        store.LeaseClaim,
	"claim-pending-only.sql":  store.ExpiryBlindClaim,
	"claim-one-statement.sql": {SelectNext: store.ProductionClaim},
}

// TestExamplesCopyTheStore: each examples/*.sql file holds exactly the
// statements of the store claim it copies (two, or the one of a claim in
// one statement), so a student who starts from a file starts from what the
// lesson (or its mistake) really runs.
func TestExamplesCopyTheStore(t *testing.T) {
	t.Parallel()
	paths, err := filepath.Glob(filepath.Join("..", "examples", "*.sql"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no example files: %v", err)
	}
	for _, path := range paths {
		name := filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			claim, ok := exampleCopies[name]
			if !ok {
				t.Fatalf("%s copies no known store claim: add it to exampleCopies", name)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			got := exampleStatements(string(b))
			want, names := []string{claim.SelectNext.SQL, claim.Update.SQL}, []string{claim.SelectNext.Name, claim.Update.Name}
			if claim.Update.SQL == "" { // a claim in one statement
				want = want[:1]
			}
			if len(got) != len(want) {
				t.Fatalf("%d statements, want %d", len(got), len(want))
			}
			for i := range want {
				if got[i] != strings.TrimSpace(want[i]) {
					t.Errorf("statement %d:\n%s\nwant (%s):\n%s", i+1, got[i], names[i], want[i])
				}
			}
		})
	}
}

// exampleStatements drops -- comment lines and splits the rest on ';'.
func exampleStatements(file string) []string {
	var kept []string
	for _, line := range strings.Split(file, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			kept = append(kept, line)
		}
	}
	var out []string
	for _, part := range strings.Split(strings.Join(kept, "\n"), ";") {
		if s := strings.TrimSpace(part); s != "" {
			out = append(out, s)
		}
	}
	return out
}
