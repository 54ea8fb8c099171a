package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/outboxlab/outboxlab/reports"
)

const (
	okSelect = "SELECT Id FROM OutboxMessages\nWHERE Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now)\nORDER BY CreatedAtUtc, Id LIMIT 1"
	okUpdate = "UPDATE OutboxMessages SET Status = 'Processing', LockedBy = :worker, LockedUntilUtc = :until\nWHERE Id = :id AND (Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now))"
)

// hostileFile is a claim file the grade test writes, and what grade must
// make of it.
type hostileFile struct {
	name    string
	text    string // written as the file, unless make is set
	make    func(path string) error
	verdict string // PASS, FAIL or REFUSED
	reason  string // a substring of the error (REFUSED) or a failed check (FAIL)
}

// hostileFiles are twenty-odd claim files a class might hand in, by
// mistake or on purpose. Files that would write outside the run name
// their targets under dir (and one relative name).
func hostileFiles(dir string) []hostileFile {
	return []hostileFile{
		{name: "attach-absolute.sql", text: "ATTACH DATABASE '" + filepath.Join(dir, "evil-abs.db") + "' AS x;\n" + okUpdate, verdict: "REFUSED", reason: "ATTACH"},
		{name: "attach-relative.sql", text: okSelect + ";\nATTACH 'evil-grade-relative.db' AS x", verdict: "REFUSED", reason: "ATTACH"},
		{name: "attach-uri.sql", text: "ATTACH 'file:" + filepath.Join(dir, "evil-uri.db") + "?mode=rwc' AS x;\n" + okUpdate, verdict: "REFUSED", reason: "ATTACH"},
		{name: "vacuum-into.sql", text: "VACUUM INTO '" + filepath.Join(dir, "evil-vacuum.db") + "';\n" + okUpdate, verdict: "REFUSED", reason: "first statement"},
		{name: "drop-table.sql", text: "DROP TABLE Payments;\n" + okUpdate, verdict: "REFUSED", reason: "schema change"},
		{name: "drop-in-update.sql", text: okSelect + ";\nDROP TABLE OutboxMessages", verdict: "REFUSED", reason: "schema change"},
		{name: "pragma.sql", text: "PRAGMA writable_schema = ON;\n" + okUpdate, verdict: "REFUSED", reason: "PRAGMA"},
		{name: "update-payments.sql", text: okSelect + ";\nUPDATE Payments SET PaymentStatus = 'Paid' WHERE Id = :id", verdict: "REFUSED", reason: "UPDATE of Payments"},
		{name: "delete.sql", text: okSelect + ";\nDELETE FROM OutboxMessages WHERE Id = :id", verdict: "REFUSED", reason: "DELETE"},
		{name: "two-selects.sql", text: okSelect + ";\nSELECT Id FROM OutboxMessages WHERE Id = :id", verdict: "REFUSED", reason: "no update"},
		{name: "recursive.sql", text: "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c;\n" + okUpdate, verdict: "REFUSED", reason: "recursive"},
		{name: "empty.sql", text: "", verdict: "REFUSED", reason: "found 0"},
		{name: "only-comments.sql", text: "-- SELECT Id FROM OutboxMessages;\n/* UPDATE OutboxMessages SET x = 1; */\n", verdict: "REFUSED", reason: "found 0"},
		{name: "three-statements.sql", text: okSelect + ";\n" + okUpdate + ";\nSELECT 1", verdict: "REFUSED", reason: "found 3"},
		{name: "unterminated.sql", text: okSelect + ";\nUPDATE OutboxMessages SET LockedBy = 'oops WHERE Id = :id", verdict: "REFUSED", reason: "unterminated string"},
		{name: "nul.sql", text: okSelect + ";\x00\n" + okUpdate, verdict: "REFUSED", reason: "NUL"},
		{name: "oversize.sql", text: okSelect + ";\n" + okUpdate + ";\n-- " + strings.Repeat("x", 1<<20), verdict: "REFUSED", reason: "larger than 1024 KiB"},
		{name: "fifo.sql", make: func(p string) error { return syscall.Mkfifo(p, 0o644) }, verdict: "REFUSED", reason: "not a regular file"},
		{name: "folder.sql", make: func(p string) error { return os.Mkdir(p, 0o755) }, verdict: "REFUSED", reason: "a folder"},
		{name: "missing.sql", make: func(string) error { return nil }, verdict: "REFUSED", reason: "no such file"},
		{name: "self-assign.sql", text: okSelect + ";\nUPDATE OutboxMessages SET LockedBy = LockedBy WHERE Id = :id", verdict: "FAIL", reason: "claims_bounded"},
		{name: "every-row.sql", text: okSelect + ";\nUPDATE OutboxMessages SET Status = 'Processing', LockedBy = :worker, LockedUntilUtc = :until WHERE :id > 0", verdict: "FAIL", reason: "recovery_ok"},
		{name: "semicolons-quoted.sql", text: "-- a comment; with a semicolon\n" + strings.Replace(okSelect, "LIMIT 1", "AND Payload <> 'a;b' /* ; */ LIMIT 1", 1) + ";\n" + okUpdate + ";\n", verdict: "PASS"},
		{name: "pending-only.sql", text: okSelect[:strings.Index(okSelect, " OR")] + " ORDER BY Id LIMIT 1;\nUPDATE OutboxMessages SET Status = 'Processing', LockedBy = :worker, LockedUntilUtc = :until WHERE Id = :id AND Status = 'Pending'", verdict: "FAIL", reason: "recovery_ok"},
	}
}

func writeHostileFiles(t *testing.T, dir string, files []hostileFile) []string {
	t.Helper()
	var paths []string
	for _, f := range files {
		p := filepath.Join(dir, f.name)
		var err error
		if f.make != nil {
			err = f.make(p)
		} else {
			err = os.WriteFile(p, []byte(f.text), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

func TestGradeHostileFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files := hostileFiles(dir)
	paths := writeHostileFiles(t, dir, files)
	out := filepath.Join(t.TempDir(), "reports")
	o := runCLI(t, append([]string{"grade", "--format", "json", "--out", out, "--timeout", "1m"}, paths...)...)
	if o.code != exitUsage {
		t.Errorf("exit %d, want %d (some files could not be judged); stderr %s", o.code, exitUsage, o.stderr)
	}
	got := map[string]grade{}
	sc := bufio.NewScanner(strings.NewReader(o.stdout))
	for sc.Scan() {
		var g grade
		if err := json.Unmarshal(sc.Bytes(), &g); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		got[filepath.Base(g.File)] = g
	}
	for _, f := range files {
		g, ok := got[f.name]
		if !ok {
			t.Errorf("%s: no JSON object", f.name)
			continue
		}
		if v := g.verdict(); v != f.verdict {
			t.Errorf("%s: verdict %s, want %s (error %q, failed %v)", f.name, v, f.verdict, g.Error, g.FailedChecks)
		}
		what := g.Error + " " + strings.Join(g.FailedChecks, " ")
		if !strings.Contains(what, f.reason) {
			t.Errorf("%s: %q does not say %q", f.name, what, f.reason)
		}
		if (g.Report != "") != (f.verdict != "REFUSED") {
			t.Errorf("%s: report %q with verdict %s", f.name, g.Report, f.verdict)
		}
		if g.Report != "" {
			if _, err := os.Stat(g.Report); err != nil {
				t.Errorf("%s: report: %v", f.name, err)
			}
		}
	}
	for _, evil := range []string{filepath.Join(dir, "evil-abs.db"), filepath.Join(dir, "evil-uri.db"), filepath.Join(dir, "evil-vacuum.db"), "evil-grade-relative.db"} {
		if _, err := os.Stat(evil); err == nil {
			t.Errorf("a refused claim file created %s", evil)
			os.Remove(evil)
		}
	}
	if summaries, _ := filepath.Glob(filepath.Join(out, "Grade", "Grade-Summary-*.txt")); len(summaries) != 1 {
		t.Errorf("summary reports: %v, want one", summaries)
	}
}

func TestGradeExamples(t *testing.T) {
	t.Parallel()
	examples, err := filepath.Glob(filepath.Join("..", "..", "examples", "*.sql"))
	if err != nil || len(examples) < 2 {
		t.Fatalf("examples: %v %v", examples, err)
	}
	out := filepath.Join(t.TempDir(), "reports")
	o := runCLI(t, append([]string{"grade", "--out", out}, examples...)...)
	if o.code != exitCheckFailed {
		t.Fatalf("exit %d, want 1 (claim-pending-only fails a check); stderr %s", o.code, o.stderr)
	}
	for _, want := range []string{"claim-lesson.sql", "PASS", "claim-pending-only.sql", "FAIL", "recovery_ok", "expected 1, observed", "claim-one-statement.sql",
		"3 files: 2 passed, 1 failed a check, 0 refused, 0 not judged", "summary: "} {
		if !strings.Contains(o.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, o.stdout)
		}
	}
	reportsWritten, _ := filepath.Glob(filepath.Join(out, "claim", "*", "Session-15", "*YourSQL*.txt"))
	if len(reportsWritten) != len(examples) {
		t.Errorf("reports: %v, want one per file", reportsWritten)
	}
}

func TestGradeOnlyPassing(t *testing.T) {
	t.Parallel()
	o := runCLI(t, "grade", "--out", filepath.Join(t.TempDir(), "r"), filepath.Join("..", "..", "examples", "claim-lesson.sql"))
	if o.code != exitOK {
		t.Fatalf("exit %d, want 0; %s %s", o.code, o.stdout, o.stderr)
	}
}

func TestGradeUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"grade"}, {"grade", "--jobs", "0", "x.sql"}, {"grade", "--format", "xml", "x.sql"},
		{"grade", "--student-from", "email", "x.sql"}, {"grade", "--exercise", "ack", "--bound", "3", "--out", t.TempDir(), ""}} {
		if o := runCLI(t, args...); o.code != exitUsage {
			t.Errorf("%v: exit %d, want 2", args, o.code)
		}
	}
}

// TestGradeInterrupted checks that a cancelled grade stops and says so.
func TestGradeInterrupted(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errOut strings.Builder
	inProcess.Lock()
	code := runWith(ctx, &settings{now: time.Now, tempRoot: t.TempDir()}, []string{"outboxlab", "grade", "--out", filepath.Join(t.TempDir(), "r"), filepath.Join("..", "..", "examples", "claim-lesson.sql")}, &out, &errOut)
	inProcess.Unlock()
	if code != exitInterrupted {
		t.Fatalf("exit %d, want %d", code, exitInterrupted)
	}
}

// TestGradeTimeout: a file whose run outlasts --timeout is reported as
// timed out, refused with its reason, and passed nothing; the timeout does
// not cut its claim file check.
func TestGradeTimeout(t *testing.T) {
	t.Parallel()
	o := runCLI(t, "grade", "--format", "json", "--timeout", "1ms", "--out", filepath.Join(t.TempDir(), "r"), filepath.Join("..", "..", "examples", "claim-lesson.sql"))
	var g grade
	if err := json.Unmarshal([]byte(o.stdout), &g); err != nil {
		t.Fatalf("exit %d, %q: %v; stderr %s", o.code, o.stdout, err, o.stderr)
	}
	if o.code != exitUsage || g.verdict() != "REFUSED" || g.Passed || !strings.Contains(g.Error, "gave up after 1ms") || strings.Contains(g.Error, "refused") {
		t.Errorf("exit %d, passed %v, error %q; want 2, REFUSED, not passed, and a timeout", o.code, g.Passed, g.Error)
	}
}

// TestGradeGradersShareOut: many graders started at once with one --out
// (a class graded by several terminals, or a script's parallel loop) all
// succeed, and no report overwrites another.
func TestGradeGradersShareOut(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	out := filepath.Join(t.TempDir(), "reports")
	lesson, err := filepath.Abs(filepath.Join("..", "..", "examples", "claim-lesson.sql"))
	if err != nil {
		t.Fatal(err)
	}
	const graders = 24
	type result struct {
		code           int
		stdout, stderr string
	}
	results := make(chan result, graders)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range graders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(bin, "grade", "--format", "json", "--out", out, lesson)
			cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			<-start
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				code = -1
			}
			results <- result{code, stdout.String(), stderr.String()}
		}()
	}
	close(start)
	wg.Wait()
	close(results)
	reportsSeen := map[string]bool{}
	for r := range results {
		var g grade
		if r.code != exitOK || json.Unmarshal([]byte(r.stdout), &g) != nil {
			t.Errorf("a grader: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
			continue
		}
		if reportsSeen[g.Report] {
			t.Errorf("two graders filed the same report %s", g.Report)
		}
		reportsSeen[g.Report] = true
	}
	summaries, _ := filepath.Glob(filepath.Join(out, "Grade", "Grade-Summary-*.txt"))
	if len(summaries) != graders {
		t.Errorf("%d summaries, want %d", len(summaries), graders)
	}
}

// TestGradeEscapesNames: file names are data. A name holding ESC, CR, BS,
// DEL, a C1 control, a bidirectional override or a byte that is not UTF-8,
// and an error quoting such SQL, reach the table, the summary and the
// report escaped (\x1b), never as the raw character, and every row of the
// table is as wide as its borders. JSON keeps the exact names.
func TestGradeEscapesNames(t *testing.T) {
	t.Parallel()
	// A short folder, not t.TempDir's, whose length varies with the test's
	// name and a counter: the table fits 120 columns by wrapping its widest
	// cells, and the names must show whole.
	dir, err := os.MkdirTemp("", "g")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	lesson, err := os.ReadFile(filepath.Join("..", "..", "examples", "claim-lesson.sql"))
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"clear\x1b[2J\x1b[H.sql", "cr\rback\bdel\x7f.sql", "c1\u009b2J.sql", "bidi\u202elqs.sql", "tab\tand\nnewline.sql", "bad\xffbyte.sql", "Zoë.sql"}
	var paths []string
	for _, n := range names {
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, lesson, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	refused := filepath.Join(dir, "refused\x1b]0;pwned\x07.sql")
	if err := os.WriteFile(refused, []byte("SELECT Id FROM OutboxMessages WHERE Payload = '\x1b[2J"), 0o644); err != nil {
		t.Fatal(err)
	}
	paths = append(paths, refused)
	out := filepath.Join(t.TempDir(), "reports")

	o := runCLI(t, append([]string{"grade", "--out", out}, paths...)...)
	if o.code != exitUsage {
		t.Fatalf("exit %d, want 2 (one file refused); stderr %s", o.code, o.stderr)
	}
	summaries, _ := filepath.Glob(filepath.Join(out, "Grade", "Grade-Summary-*.txt"))
	if len(summaries) != 1 {
		t.Fatalf("summaries %v", summaries)
	}
	summary, err := os.ReadFile(summaries[0])
	if err != nil {
		t.Fatal(err)
	}
	reportFiles, _ := filepath.Glob(filepath.Join(out, "claim", "*", "Session-15", "*.txt"))
	if len(reportFiles) != len(names) {
		t.Fatalf("reports %v, want %d", reportFiles, len(names))
	}
	texts := map[string]string{"stdout": o.stdout, "stderr": o.stderr, "summary": string(summary)}
	for _, r := range reportFiles {
		b, err := os.ReadFile(r)
		if err != nil {
			t.Fatal(err)
		}
		texts[r] = string(b)
	}
	for what, text := range texts {
		for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
			if strings.Contains(what, string(filepath.Separator)) {
				line = strings.ReplaceAll(line, "\t", " ") // a report may indent its SQL with tabs
			}
			if reports.Printable(line) != line {
				t.Errorf("%s holds a raw control character: %q", what, line)
			}
		}
	}
	for _, want := range []string{`clear\x1b[2J\x1b[H.sql`, `cr\rback\x08del\x7f.sql`, `c1\u009b2J.sql`, `bidi\u202elqs.sql`, `tab\tand\nnewline.sql`, `bad\xffbyte.sql`, "Zoë.sql", `refused\x1b]0;pwned\x07.sql`, `'\x1b[2J`} {
		if !strings.Contains(unwrapCells(o.stdout), want) || !strings.Contains(unwrapCells(string(summary)), want) {
			t.Errorf("the table or the summary does not show %s:\n%s\n%s", want, o.stdout, summary)
		}
	}
	// Every row and border of the table is as wide as the top border.
	var width int
	for _, line := range strings.Split(o.stdout, "\n") {
		if !strings.HasPrefix(line, "+") && !strings.HasPrefix(line, "|") {
			continue
		}
		if width == 0 {
			width = utf8.RuneCountInString(line)
		}
		if n := utf8.RuneCountInString(line); n != width {
			t.Errorf("table line %d columns wide, the border %d: %q", n, width, line)
		}
	}
	if width == 0 {
		t.Fatalf("no table on stdout:\n%s", o.stdout)
	}

	o = runCLI(t, append([]string{"grade", "--format", "json", "--out", out}, paths...)...)
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(o.stdout), "\n") {
		if reports.Printable(line) != line {
			t.Errorf("JSON line holds a raw control character: %q", line)
		}
		var g grade
		if err := json.Unmarshal([]byte(line), &g); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		seen[g.File] = true
	}
	for _, p := range paths {
		if !seen[strings.ToValidUTF8(p, "\uFFFD")] {
			t.Errorf("JSON does not name %q", p)
		}
	}
}

// slowClaimSQL is a claim that passes every check but takes a few seconds
// to grade: its SELECT counts ten million rows for each candidate message.
const slowClaimSQL = `SELECT Id FROM OutboxMessages
WHERE (Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now))
  AND (WITH t(x) AS (VALUES (1),(2),(3),(4),(5),(6),(7),(8),(9),(10))
       SELECT count(*) FROM t a, t b, t c, t d, t e, t f, t g WHERE a.x <> OutboxMessages.Id) > 0
ORDER BY CreatedAtUtc, Id LIMIT 1;
` + okUpdate

// TestGradeFullDisk: a disk that fills loses no verdict. Whatever report
// or summary cannot be written, every verdict reached is printed, as JSON
// or as the table, each unwritten report is named, and the exit is 3.
func TestGradeFullDisk(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	refused := filepath.Join(dir, "refused.sql")
	if err := os.WriteFile(refused, []byte("PRAGMA writable_schema = ON;\n"+okUpdate), 0o644); err != nil {
		t.Fatal(err)
	}
	files := []string{filepath.Join("..", "..", "examples", "claim-lesson.sql"), filepath.Join("..", "..", "examples", "claim-pending-only.sql"), refused}
	verdicts := map[string]string{"claim-lesson.sql": "PASS", "claim-pending-only.sql": "FAIL", "refused.sql": "REFUSED"}
	full := func(path string, _ []byte) (string, error) {
		return "", fmt.Errorf("reports: write %s: %w", path, syscall.ENOSPC)
	}
	summaryOnly := func(path string, data []byte) (string, error) {
		if strings.Contains(path, "Grade-Summary") {
			return full(path, data)
		}
		return reports.WriteNew(path, data)
	}
	for _, tt := range []struct {
		name       string
		fileReport func(string, []byte) (string, error)
		format     string
		unwritten  int // reports not written
	}{
		{"FullJSON", full, "json", 2},
		{"FullText", full, "text", 2},
		{"SummaryOnlyJSON", summaryOnly, "json", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := &settings{now: time.Now, tempRoot: t.TempDir(), fileReport: tt.fileReport}
			o := runCLIWith(t, s, append([]string{"grade", "--format", tt.format, "--out", filepath.Join(t.TempDir(), "r")}, files...)...)
			if o.code != exitFailed {
				t.Errorf("exit %d, want %d; stderr %s", o.code, exitFailed, o.stderr)
			}
			if !strings.Contains(o.stderr, "could not be written") {
				t.Errorf("stderr does not say what could not be written: %s", o.stderr)
			}
			if tt.format == "text" {
				// The table's cells may wrap; the line under it counts
				// every verdict, and each unwritten report has a row.
				if !strings.Contains(o.stdout, "3 files: 1 passed, 1 failed a check, 1 refused, 0 not judged") {
					t.Errorf("the table does not count the three verdicts:\n%s", o.stdout)
				}
				if n := strings.Count(o.stdout, "its report could not"); n != tt.unwritten {
					t.Errorf("%d rows say a report was not written, want %d:\n%s", n, tt.unwritten, o.stdout)
				}
				if strings.Contains(o.stdout, "summary: ") {
					t.Errorf("the table names a summary that was not written:\n%s", o.stdout)
				}
				return
			}
			got := byFileName(gradesOf(t, o.stdout))
			unwritten := 0
			for name, v := range verdicts {
				g, ok := got[name]
				if !ok || g.verdict() != v {
					t.Errorf("%s: %+v, want verdict %s", name, g, v)
				}
				if g.ReportError != "" {
					unwritten++
					if g.Report != "" || !strings.Contains(g.ReportError, "no space left on device") {
						t.Errorf("%s: report %q, report_error %q", name, g.Report, g.ReportError)
					}
				}
			}
			if unwritten != tt.unwritten {
				t.Errorf("%d reports not written, want %d", unwritten, tt.unwritten)
			}
		})
	}
}

// TestGradeLabFailure: a grade that cannot make its temporary folder
// (TMPDIR missing, a file, or read-only) exits 3 as run does: the lab's
// fault, not the file's. The verdicts are printed as NOT JUDGED, saying so.
func TestGradeLabFailure(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	notAFolder := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notAFolder, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	tmpdirs := map[string]string{"Missing": filepath.Join(t.TempDir(), "missing"), "NotAFolder": notAFolder}
	if os.Geteuid() != 0 { // root writes in a read-only folder
		readOnly := t.TempDir()
		if err := os.Chmod(readOnly, 0o555); err != nil {
			t.Fatal(err)
		}
		tmpdirs["ReadOnly"] = readOnly
	}
	lesson := filepath.Join("..", "..", "examples", "claim-lesson.sql")
	for name, tmpdir := range tmpdirs {
		for _, args := range [][]string{
			{"grade", "--out", t.TempDir(), lesson},
			{"run", "session-15-outbox-leasing", "--claim-sql", lesson, "--out", t.TempDir()},
		} {
			cmd := exec.Command(bin, args...)
			cmd.Env = append(os.Environ(), "TMPDIR="+tmpdir)
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitFailed {
				t.Errorf("%s %s: %v, want exit %d; stdout %s stderr %s", name, args[0], err, exitFailed, stdout.String(), stderr.String())
			}
			if args[0] == "grade" && !strings.Contains(stdout.String(), "1 files: 0 passed, 0 failed a check, 0 refused, 1 not judged") {
				t.Errorf("%s grade: the table is missing:\n%s", name, stdout.String())
			}
		}
	}
}

// TestGradeInterruptPrintsVerdicts: Ctrl-C during a grade prints the
// verdicts reached so far (and which files it did not reach), then exits
// 130. The signal comes once the first file's report is filed.
func TestGradeInterruptPrintsVerdicts(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	dir := t.TempDir()
	slow := filepath.Join(dir, "slow.sql")
	if err := os.WriteFile(slow, []byte(slowClaimSQL), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "reports")
	cmd := exec.Command(bin, "grade", "--jobs", "1", "--out", out, filepath.Join("..", "..", "examples", "claim-lesson.sql"), slow, slow)
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// The files are in two folders: each is named by its folder.
	for first := filepath.Join(out, "claim", "examples", "Session-15"); ; time.Sleep(20 * time.Millisecond) {
		if reps, _ := filepath.Glob(filepath.Join(first, "*.txt")); len(reps) > 0 {
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("exited before the first report: %v; stderr %s", err, stderr.String())
		default:
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := <-exited
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitInterrupted {
		t.Fatalf("%v, want exit %d; stderr %s", err, exitInterrupted, stderr.String())
	}
	// The table's cells may wrap; the line under it counts the verdicts.
	if !strings.Contains(stdout.String(), "3 files: 1 passed, 0 failed a check, 0 refused, 2 not judged") || strings.Count(stdout.String(), "| interrupted") != 2 {
		t.Errorf("stdout does not show the verdict reached and the files not reached:\n%s", stdout.String())
	}
	if !strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("stderr: %s", stderr.String())
	}
}

// TestGradeHelpExitCodes: grade --help documents every exit code grade
// can return.
func TestGradeHelpExitCodes(t *testing.T) {
	t.Parallel()
	o := runCLI(t, "grade", "--help")
	for _, code := range []string{"0 ", "1 ", "2 ", "3 ", "130 "} {
		if !regexp.MustCompile(`(?m)^\s+` + regexp.QuoteMeta(code)).MatchString(o.stdout) {
			t.Errorf("grade --help does not document exit %s:\n%s", code, o.stdout)
		}
	}
}
