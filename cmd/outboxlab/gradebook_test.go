package main

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestGradebookCell(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, want string }{
		{"alice", "alice"},
		{"=HYPERLINK(\"http://x\")", "'=HYPERLINK(\"http://x\")"},
		{"+1", "'+1"},
		{"-2", "'-2"},
		{"@SUM(A1)", "'@SUM(A1)"},
		{"line\nbreak", `line\nbreak`},
		{"esc\x1b[2J", `esc\x1b[2J`},
		{"", ""},
	} {
		if got := cell(tt.in); got != tt.want {
			t.Errorf("cell(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestGradeGradebook: --format csv is one row per file under a header,
// with the student, the verdict, the failed checks and the reason; --format
// json gives each file's every check with expected and observed values.
func TestGradeGradebook(t *testing.T) {
	t.Parallel()
	paths := writeSubmissions(t, [][2]string{
		{"alice/ack.sql", ackAnswer},
		{"bob/ack.sql", ackByID},
		{"carol/ack.sql", "DROP TABLE outbox_events"},
	})
	out := filepath.Join(t.TempDir(), "reports")
	o := runCLI(t, append([]string{"grade", "--exercise", "ack", "--format", "csv", "--out", out}, paths...)...)
	if o.code != exitUsage {
		t.Fatalf("exit %d, want 2 (carol's file is refused); stdout %s stderr %s", o.code, o.stdout, o.stderr)
	}
	rows, err := csv.NewReader(strings.NewReader(o.stdout)).ReadAll()
	if err != nil {
		t.Fatalf("%v:\n%s", err, o.stdout)
	}
	if want := []string{"student", "exercise", "file", "verdict", "failed_checks", "reason", "report", "page"}; len(rows) == 0 || !slices.Equal(rows[0], want) {
		t.Fatalf("header %q, want %q", rows[0], want)
	}
	if len(rows) != 4 {
		t.Fatalf("%d rows, want a header and 3:\n%s", len(rows), o.stdout)
	}
	for i, want := range []struct{ student, verdict, failed, reason string }{
		{"alice", "passed", "", ""},
		{"bob", "failed", "stale_ack_rows; failed_acks_lease_lost; retried_ack_rows; explore: violations_stale_completion", "stale_ack_rows: expected 0, observed 1"},
		{"carol", "refused", "", "must be an UPDATE of outbox_events that writes nothing else; SQLite's authorizer refused a schema change"},
	} {
		r := rows[i+1]
		if r[0] != want.student || r[1] != "ack" || r[2] != paths[i] || r[3] != want.verdict || r[4] != want.failed || !strings.Contains(r[5], want.reason) {
			t.Errorf("row %d: %q, want %s, ack, %s, %s, %q, a reason saying %q", i+1, r, want.student, paths[i], want.verdict, want.failed, want.reason)
		}
		if (r[6] != "") != (want.verdict != "refused") {
			t.Errorf("row %d: report %q with verdict %s", i+1, r[6], want.verdict)
		}
	}

	o = runCLI(t, append([]string{"grade", "--exercise", "ack", "--format", "json", "--out", out}, paths[1:2]...)...)
	if o.code != exitCheckFailed {
		t.Fatalf("exit %d, want 1; stderr %s", o.code, o.stderr)
	}
	gs := gradesOf(t, o.stdout)
	if len(gs) != 1 {
		t.Fatalf("%d JSON lines, want 1:\n%s", len(gs), o.stdout)
	}
	g := gs[0]
	if g.Student != "bob" || g.Exercise != "ack" || g.Verdict != "failed" || !strings.Contains(g.Reason, "stale_ack_rows: expected 0, observed 1") {
		t.Errorf("student %q, exercise %q, verdict %q, reason %q", g.Student, g.Exercise, g.Verdict, g.Reason)
	}
	byName := map[string]gradeCheck{}
	for _, c := range g.Checks {
		byName[c.Name] = c
	}
	for name, want := range map[string]gradeCheck{
		"stale_ack_rows":                       {Expected: "0", Observed: "1", Passed: false},
		"current_ack_rows":                     {Expected: "1", Observed: "1", Passed: true},
		"explore: violations_stale_completion": {Expected: "0", Observed: "3", Passed: false},
	} {
		c, ok := byName[name]
		if !ok || c.Expected != want.Expected || c.Observed != want.Observed || c.Passed != want.Passed {
			t.Errorf("check %s: %+v, want expected %s, observed %s, passed %t", name, c, want.Expected, want.Observed, want.Passed)
		}
	}
	if c := byName["explore: violations_stale_completion"]; !strings.Contains(c.Counterexample, "B claim, A complete") {
		t.Errorf("the explorer's check has no counterexample: %+v", c)
	}
}

// TestGradebookGolden: the gradebook's shape, for grades of each verdict
// and a hostile student name, is testdata/gradebook.csv (-update rewrites
// it).
func TestGradebookGolden(t *testing.T) {
	t.Parallel()
	grades := []grade{
		{Student: "alice", Exercise: "ack", File: "submissions/alice/ack.sql", Passed: true,
			Report: "r/ack/alice/Session-16/Session-16-Stale-Ack-Fencing-YourSQL-RunReport-20260115T090000Z.txt"},
		{Student: "bob", Exercise: "ack", File: "submissions/bob/ack.sql", FailedChecks: []string{"stale_ack_rows", "explore: violations_stale_completion"},
			reasons: []string{"expected 0, observed 1", "expected 0, observed 3; the shortest ordering that breaks it, 5 actions: A claim, A send, expire, B claim, A complete"},
			Report:  "r/ack/bob/Session-16/Session-16-Stale-Ack-Fencing-YourSQL-RunReport-20260115T090000Z.txt"},
		{Student: "carol", Exercise: "ack", File: "submissions/carol/ack.sql", Error: `refused: the statement: SQLite could not run it: near "WHER": syntax error (1)`, fault: fileFault},
		{Student: "=cmd|'/C calc'!A0", Exercise: "ack", File: "submissions/=cmd|'/C calc'!A0/ack.sql", Error: "the run could not complete: no temporary folder", fault: labFault},
		{Student: "dave\x1b[2J", Exercise: "ack", File: "submissions/dave\x1b[2J/ack.sql", Error: "interrupted", fault: interrupted},
	}
	for i := range grades {
		grades[i].settle()
	}
	var b strings.Builder
	if err := writeGradebook(&b, grades); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "gradebook.csv")
	if *update {
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -run TestGradebookGolden -update)", err)
	}
	if b.String() != string(want) {
		t.Errorf("the gradebook differs from %s (-update rewrites it):\n%s", golden, b.String())
	}
}
