package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/outboxlab/outboxlab/internal/pgtest"
	"github.com/outboxlab/outboxlab/reports"
)

// slowAck is an ack the sandbox's check runs at once (its few rows hold
// no event :id matches) and the run cannot finish: for each event it
// counts a billion rows.
const slowAck = `UPDATE outbox_events SET delivered = 1, delivered_at = :now
WHERE event_id = :id AND claim_token = :token AND delivered = 0
  AND (WITH t(x) AS (VALUES (1),(2),(3),(4),(5),(6),(7),(8),(9),(10))
       SELECT count(*) FROM t a, t b, t c, t d, t e, t f, t g, t h, t i) > 0`

// badAck is one student's ack file, malformed or hostile, and what
// grading it alone must make of it.
type badAck struct {
	name    string // the student's folder; the file is NAME/ack.sql
	text    string
	code    int    // grade's exit code for this file alone
	verdict string // the gradebook's verdict
	reason  string // a regular expression the reason (or a failed check) matches
}

// badAcks are an ack class's worst: every one is refused (exit 2)
// or judged (exit 1) with a reason naming the problem, never the lab's
// own failure (exit 3).
var badAcks = []badAck{
	{"empty", "", exitUsage, "refused", `must hold one statement .*; found 0`},
	{"only-comments", "-- UPDATE outbox_events SET delivered = 1;\n/* I did not finish */\n", exitUsage, "refused", `found 0`},
	{"three-statements", ackAnswer + ";\nSELECT 1;\nSELECT 2", exitUsage, "refused", `must hold one statement .*; found 3`},
	{"drop-table", "DROP TABLE outbox_events", exitUsage, "refused", `refused a schema change \(CREATE, DROP or ALTER\)`},
	{"attach", "ATTACH DATABASE 'stolen.db' AS x", exitUsage, "refused", `refused ATTACH of a database`},
	{"syntax-error", "UPDATE outbox_events SET delivered = 1 WHER event_id = :id", exitUsage, "refused", `near "WHER": syntax error`},
	{"select-in-update-slot", "SELECT event_id FROM outbox_events WHERE event_id = :id", exitUsage, "refused", `must be an UPDATE of outbox_events; SQLite compiled it to no update`},
	{"no-such-table", "UPDATE OutboxMessages SET Status = 'Processed' WHERE Id = :id", exitUsage, "refused", `no such table: OutboxMessages`},
	{"unknown-parameter", "UPDATE outbox_events SET delivered = 1, locked_by = :worker WHERE event_id = :id", exitUsage, "refused", `uses :worker`},
	{"integer-overflow", "UPDATE outbox_events SET delivered = 1 WHERE event_id = :id AND abs(-9223372036854775808) > 0", exitUsage, "refused", `integer overflow`},
	{"runs-too-long", slowAck, exitUsage, "refused", `gave up after 5s|ran longer than 2s`},
	{"wrong-type", "UPDATE outbox_events SET delivered = 'yes', delivered_at = :now WHERE event_id = :id AND claim_token = :token", exitUsage, "refused",
		`file's statements stopped the run .*converting .*"yes"`},
	{"never-delivers", "UPDATE outbox_events SET delivered = 0 WHERE event_id = :id AND claim_token = :token", exitUsage, "refused",
		`stopped the explorer's run .*did not drain the outbox`},
	{"not-null", "UPDATE outbox_events SET delivered = 1, delivered_at = :now, claim_token = NULL WHERE event_id = :id AND claim_token = :token", exitUsage, "refused",
		`the statement failed in the explorer's run: .*NOT NULL constraint failed: outbox_events.claim_token`},
	{"every-row", "UPDATE outbox_events SET delivered = 1, delivered_at = :now WHERE 1 = 1", exitCheckFailed, "failed", `stale_ack_rows: expected 0, observed 1`},
}

// slowToGrade are the bad files whose grading runs the lesson, or waits
// out the timeout: TestGradeStudentFiles grades them only with the class.
var slowToGrade = map[string]bool{"runs-too-long": true, "wrong-type": true, "never-delivers": true, "not-null": true}

// TestGradeStudentFiles grades each malformed or hostile file alone (but
// those slowToGrade) and checks the exit code and the reason, then grades
// them all at once with a right answer among them: every file gets its
// verdict and reason, and no bad file stops another from being graded.
func TestGradeStudentFiles(t *testing.T) {
	t.Parallel()
	var files [][2]string
	for _, f := range badAcks {
		files = append(files, [2]string{f.name + "/ack.sql", f.text})
	}
	paths := writeSubmissions(t, append(files, [2]string{"alice/ack.sql", ackAnswer}))
	out := filepath.Join(t.TempDir(), "reports")
	for i, f := range badAcks {
		if slowToGrade[f.name] {
			continue // graded with the others below: its verdict and reason decide its exit code as any file's
		}
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			o := runCLI(t, "grade", "--exercise", "ack", "--bound", "3", "--timeout", "5s", "--format", "json", "--out", out, paths[i])
			if o.code != f.code {
				t.Errorf("exit %d, want %d; stdout %s stderr %s", o.code, f.code, o.stdout, o.stderr)
			}
			if strings.Contains(o.stderr, "goroutine ") || strings.Contains(o.stderr, "panic") {
				t.Errorf("a stack trace: %s", o.stderr)
			}
			gs := gradesOf(t, o.stdout)
			if len(gs) != 1 {
				t.Fatalf("%d grades, want 1:\n%s", len(gs), o.stdout)
			}
			checkStudentGrade(t, gs[0], f)
		})
	}
	t.Run("AllAtOnce", func(t *testing.T) {
		t.Parallel()
		started := time.Now()
		o := runCLI(t, append([]string{"grade", "--exercise", "ack", "--bound", "3", "--timeout", "5s", "--format", "json", "--out", out}, paths...)...)
		t.Logf("%d files graded in %s", len(paths), time.Since(started).Round(time.Millisecond))
		if o.code != exitUsage {
			t.Errorf("exit %d, want 2 (some files refused); stderr %s", o.code, o.stderr)
		}
		got := map[string]grade{}
		for _, g := range gradesOf(t, o.stdout) {
			got[g.Student] = g
		}
		for _, f := range badAcks {
			checkStudentGrade(t, got[f.name], f)
		}
		if g := got["alice"]; g.Verdict != "passed" || g.Report == "" {
			t.Errorf("alice's right answer among the bad ones: verdict %q, report %q, error %q", g.Verdict, g.Report, g.Error)
		}
	})
	if _, err := os.Stat("stolen.db"); err == nil {
		os.Remove("stolen.db")
		t.Error("a refused ATTACH created stolen.db")
	}
}

// TestGradeStudentFilesOnPostgres grades the same class with --db, all at
// once: PostgreSQL's parser words some refusals otherwise (an ATTACH is a
// syntax error there), but every file is refused or judged, never the
// lab's failure, and the right answer passes.
func TestGradeStudentFilesOnPostgres(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	var files [][2]string
	for _, f := range badAcks {
		files = append(files, [2]string{f.name + "/ack.sql", f.text})
	}
	paths := writeSubmissions(t, append(files, [2]string{"alice/ack.sql", ackAnswer}))
	o := runCLI(t, append([]string{"grade", "--exercise", "ack", "--bound", "3", "--db", url, "--timeout", "30s", "--format", "json", "--out", t.TempDir()}, paths...)...)
	if o.code != exitUsage {
		t.Errorf("exit %d, want 2 (some files refused); stderr %s", o.code, o.stderr)
	}
	got := map[string]grade{}
	for _, g := range gradesOf(t, o.stdout) {
		got[g.Student] = g
	}
	for _, f := range badAcks {
		g := got[f.name]
		if g.Verdict != f.verdict || g.Reason == "" || g.Verdict == "not judged" || strings.HasPrefix(g.Error, "the run could not complete") {
			t.Errorf("%s: verdict %q (want %s), reason %q, error %q", f.name, g.Verdict, f.verdict, g.Reason, g.Error)
		}
	}
	if g := got["alice"]; g.Verdict != "passed" {
		t.Errorf("alice: verdict %q, error %q", g.Verdict, g.Error)
	}
}

// checkStudentGrade checks that g, f's grade, has f's verdict and a
// reason that names the problem.
func checkStudentGrade(t *testing.T, g grade, f badAck) {
	t.Helper()
	if g.Student != f.name || g.Verdict != f.verdict {
		t.Errorf("%s: student %q, verdict %q, want %s; error %q", f.name, g.Student, g.Verdict, f.verdict, g.Error)
	}
	if !regexp.MustCompile(f.reason).MatchString(g.Reason) {
		t.Errorf("%s: reason %q does not match %q", f.name, g.Reason, f.reason)
	}
	if g.Verdict == "not judged" || strings.HasPrefix(g.Error, "the run could not complete") || strings.HasPrefix(g.Error, "the lab") {
		t.Errorf("%s: the lab blames itself: %q", f.name, g.Error)
	}
}

// TestGradeLabBugCostsOneFile: a panic while judging one file (here in
// filing its report) is the lab's failure, exit 3, named in that file's
// row, and every other file is still graded.
func TestGradeLabBugCostsOneFile(t *testing.T) {
	t.Parallel()
	paths := writeSubmissions(t, [][2]string{{"alice/ack.sql", ackAnswer}, {"bob/ack.sql", ackByID}})
	s := &settings{now: time.Now, tempRoot: t.TempDir(), fileReport: func(path string, data []byte) (string, error) {
		if strings.Contains(path, string(filepath.Separator)+"bob"+string(filepath.Separator)) {
			panic(fmt.Sprintf("a bug filing %s", filepath.Base(path)))
		}
		return reports.WriteNew(path, data)
	}}
	o := runCLIWith(t, s, append([]string{"grade", "--exercise", "ack", "--bound", "3", "--format", "csv", "--out", filepath.Join(t.TempDir(), "r")}, paths...)...)
	if o.code != exitFailed {
		t.Errorf("exit %d, want %d; stderr %s", o.code, exitFailed, o.stderr)
	}
	for _, want := range []string{"alice,ack,", ",passed,", "bob,ack,", ",not judged,", "a bug in outboxlab"} {
		if !strings.Contains(o.stdout, want) {
			t.Errorf("the gradebook lacks %q:\n%s", want, o.stdout)
		}
	}
}
