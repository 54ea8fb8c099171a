package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDay15Comparison: running both Day 15 scenarios in one invocation, as
// `make run` does, writes and prints the BEFORE and AFTER comparison; a
// variant or a single scenario does not.
func TestDay15Comparison(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		args  []string
		wants bool
	}{
		{"BothAsDesigned", []string{"session-15-competing-workers-no-claim", "session-15-outbox-leasing"}, true},
		{"OnlyOne", []string{"session-15-outbox-leasing"}, false},
		{"AVariant", []string{"session-15-competing-workers-no-claim", "session-15-outbox-leasing", "--variant", "sequential-workers"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out := t.TempDir()
			got := runCLI(t, append([]string{"run", "--out", out}, tc.args...)...)
			files, _ := filepath.Glob(filepath.Join(out, "Session-15", "Session-15-Before-After-*.txt"))
			if !tc.wants {
				if len(files) != 0 || strings.Contains(got.stdout, "side by side") {
					t.Fatalf("comparison written for %v: %v", tc.args, files)
				}
				return
			}
			if got.code != 0 || len(files) != 1 || !strings.Contains(got.stdout, files[0]) {
				t.Fatalf("exit %d, files %v, stdout:\n%s\nstderr:\n%s", got.code, files, got.stdout, got.stderr)
			}
			b, err := os.ReadFile(files[0])
			if err != nil {
				t.Fatal(err)
			}
			text := strings.Join(strings.Fields(string(b)), " ")
			for _, want := range []string{
				"The halving: 12 processing attempts for 6 messages before, 6 after.",
				"| processing attempts | 12 | 6 |",
				"| messages processed more than once | 6 | 0 |",
				"| provider status checks | 12 | 6 |",
			} {
				if !strings.Contains(text, want) {
					t.Errorf("comparison lacks %q:\n%s", want, b)
				}
			}
		})
	}
}
