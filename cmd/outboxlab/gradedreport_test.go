package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outboxlab/outboxlab/scenarios"
	"github.com/outboxlab/outboxlab/store"
)

// TestGradedReportHidesTheKey grades a right and a wrong answer to two
// exercises (ack, which the explorer grades too, and finalize): no report
// prints the lesson's statement for the file's slot, nor the lesson's text
// that explains it, except where the student's own file is the key, which
// then appears once, as the student's statement.
func TestGradedReportHidesTheKey(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"ack", "finalize"} {
		t.Run(name, func(t *testing.T) {
			x, err := scenarios.LookupExercise(name)
			if err != nil {
				t.Fatal(err)
			}
			var wrong []store.Stmt
			for _, m := range x.Mistakes() {
				if m.Engine == "" && m.Scenario == x.Lesson {
					wrong = m.Stmts
					break
				}
			}
			if wrong == nil {
				t.Fatalf("%s has no wrong answer its lesson runs on SQLite", name)
			}
			dir := t.TempDir()
			paths := writeFiles(t, dir, map[string]string{
				"right.sql": sqlFile("the key", x.Key, store.SQLite),
				"wrong.sql": sqlFile("a wrong answer", wrong, store.SQLite),
			})
			o := runCLI(t, append([]string{"grade", "--exercise", name, "--format", "json", "--out", filepath.Join(dir, "out")}, paths...)...)
			if o.code != 1 {
				t.Fatalf("exit %d, want 1: %s %s", o.code, o.stdout, o.stderr)
			}
			for _, g := range gradesOf(t, o.stdout) {
				right := filepath.Base(g.File) == "right.sql"
				if g.Passed != right {
					t.Errorf("%s: passed %v", g.File, g.Passed)
				}
				for _, path := range []string{g.Report, g.ExploreReport} {
					if path == "" {
						continue
					}
					b, err := os.ReadFile(path)
					if err != nil {
						t.Fatal(err)
					}
					report := collapsed(string(b))
					for _, k := range x.Key {
						want := 0
						if right {
							want = 1
						}
						if got := strings.Count(report, collapsed(k.SQL)); got != want {
							t.Errorf("%s: %s prints the key %q %d times, want %d", g.File, path, k.Name, got, want)
						}
					}
					if strings.Contains(report, "== What this lesson shows") || !strings.Contains(report, "== What this run grades") {
						t.Errorf("%s: %s prints the lesson's text, which explains the key", g.File, path)
					}
				}
			}
		})
	}
}
