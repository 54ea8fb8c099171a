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

// TestDay15ComparisonPage: with --html the comparison gets a page of its
// own beside its report, linking the two runs' pages, keeping the
// article's duplicate rows as 0 / 0 and explaining the claims beyond one
// per message; with --all, index.html links it.
func TestDay15ComparisonPage(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	got := runCLI(t, "run", "session-15-competing-workers-no-claim", "session-15-outbox-leasing", "--html", "--out", out)
	pages, _ := filepath.Glob(filepath.Join(out, "Session-15", "Session-15-Before-After-*.html"))
	if got.code != 0 || len(pages) != 1 {
		t.Fatalf("exit %d, pages %v:\n%s%s", got.code, pages, got.stdout, got.stderr)
	}
	b, err := os.ReadFile(pages[0])
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	for _, want := range []string{
		`<td>duplicate payment / outbox rows</td><td>0 / 0</td><td>0 / 0</td>`,
		"the recovery demo&#39;s first claim of PAY-001 died with Worker-A",
		`href="Session-15-Competing-Workers-No-Claim-RunReport-`, `href="Session-15-Outbox-Leasing-RunReport-`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the comparison page lacks %s", want)
		}
	}
	if strings.Contains(page, "above it") {
		t.Error("the comparison page refers to runs above it")
	}
}
