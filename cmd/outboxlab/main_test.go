package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/reports"
)

// outcome is what one in-process run of the CLI produced.
type outcome struct {
	code           int
	stdout, stderr string
	tempRoot       string // where its runs made their temporary folders
}

// runCLI runs the CLI in-process with its run folders under a fresh folder
// of its own (no TMPDIR, so tests run in parallel), so a test also sees
// whether temporary databases were cleaned up.
func runCLI(t *testing.T, args ...string) outcome {
	t.Helper()
	return runCLIWith(t, &settings{now: time.Now, tempRoot: t.TempDir()}, args...)
}

// inProcess serializes in-process runs of the CLI: urfave/cli v2 applies
// its one package-level help flag to every app it runs, writing the flag's
// fields, so two apps running at once in one process race on it. The
// binary only ever runs one; parallel tests take turns here.
var inProcess sync.Mutex

// testChildTimeout bounds each wait on a child process of a run
// --processes in these tests: a child that never answers fails its test
// in seconds, not after proc.DefaultTimeout.
const testChildTimeout = 5 * time.Second

// runCLIWith runs the CLI in-process in the given settings, each wait on
// a child bounded by testChildTimeout unless they say otherwise.
func runCLIWith(t *testing.T, s *settings, args ...string) outcome {
	t.Helper()
	inProcess.Lock()
	defer inProcess.Unlock()
	if s.childTimeout == 0 {
		s.childTimeout = testChildTimeout
	}
	var out, errOut bytes.Buffer
	code := runWith(context.Background(), s, append([]string{"outboxlab"}, args...), &out, &errOut)
	return outcome{code, out.String(), errOut.String(), s.tempRoot}
}

// leftovers lists what the runs left in their temporary folder's parent.
func (o outcome) leftovers() []string {
	entries, _ := os.ReadDir(o.tempRoot)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestCLI(t *testing.T) {
	t.Parallel()
	notADir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notADir, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	leasing := "session-15-outbox-leasing"
	badSQL := filepath.Join(t.TempDir(), "bad.sql")
	oneStatement := filepath.Join(t.TempDir(), "one.sql")
	for path, text := range map[string]string{
		badSQL:       "SELECT Id FROM NoSuchTable; UPDATE OutboxMessages SET Status = 'Processing' WHERE Id = :id",
		oneStatement: "SELECT Id FROM OutboxMessages",
	} {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name     string
		args     []string
		code     int
		stdout   []string // substrings expected on stdout
		stderr   []string // substrings expected on stderr
		report   []string // substrings expected in the one report the command wrote
		noReport bool     // the command must not write a report
	}{
		{name: "List", args: []string{"list"}, code: 0, stdout: []string{leasing, "session-15-competing-workers-no-claim", "permanent-lock"}},
		{name: "Describe", args: []string{"describe", leasing}, code: 0, stdout: []string{"What it teaches", "What it does not solve", "LockedUntilUtc <= :now", "unguarded-claim", "breaks: "}},
		{name: "DescribeUnknown", args: []string{"describe", "session-15-outbox-leasng"}, code: 2, stderr: []string{`did you mean session-15-outbox-leasing`}},
		{name: "DescribeNoName", args: []string{"describe"}, code: 2, stderr: []string{"one scenario name"}},
		{name: "RunNoName", args: []string{"run"}, code: 2, stderr: []string{"name a scenario"}, noReport: true},
		{name: "RunUnknown", args: []string{"run", "session-15-outbox-leasin"}, code: 2, stderr: []string{"unknown scenario", "did you mean session-15-outbox-leasing"}, noReport: true},
		{name: "RunUnknownVariant", args: []string{"run", leasing, "--variant", "nope"}, code: 2, stderr: []string{`no variant "nope"`, "permanent-lock"}, noReport: true},
		{name: "RunRepeatZero", args: []string{"run", leasing, "--repeat", "0"}, code: 2, stderr: []string{"--repeat must be at least 1"}, noReport: true},
		{name: "RunRepeatNotNumber", args: []string{"run", leasing, "--repeat", "many"}, code: 2, stderr: []string{"invalid value"}, noReport: true},
		{name: "RunBadFormat", args: []string{"run", leasing, "--format", "xml"}, code: 2, stderr: []string{"--format must be text or json"}, noReport: true},
		{name: "RunBadDuration", args: []string{"run", leasing, "--inbox-retention", "3x"}, code: 2, stderr: []string{"--inbox-retention", "not a duration"}, noReport: true},
		{name: "RunNegativeDays", args: []string{"run", leasing, "--dlq-retention", "-1d"}, code: 2, stderr: []string{"not a duration"}, noReport: true},
		{name: "RunNegativeDuration", args: []string{"run", leasing, "--broker-window", "-1h"}, code: 2, stderr: []string{"at least 1ms"}, noReport: true},
		{name: "RunUnwritableOut", args: []string{"run", leasing, "--out", filepath.Join(notADir, "reports")}, code: 2, stderr: []string{"cannot be created"}, noReport: true},
		{name: "RunNamesAndAll", args: []string{"run", leasing, "--all"}, code: 2, stderr: []string{"not both"}, noReport: true},
		{name: "UnknownCommand", args: []string{"explode"}, code: 2, stderr: []string{`unknown command "explode"`}, noReport: true},
		{name: "RunPass", args: []string{"run", leasing}, code: 0, stdout: []string{leasing + ": PASS", "SAFE DESIGN held", "report:"}},
		{name: "RunBefore", args: []string{"run", "session-15-competing-workers-no-claim"}, code: 0,
			stdout: []string{"session-15-competing-workers-no-claim: PASS", "UNSAFE DESIGN, race reproduced", "processing attempts and 12 provider"},
			report: []string{"Result:   PASS (12 of 12 checks passed)",
				"| processed_more_than_once | messages processed more than once                         | 6        | 6        | PASS",
				"| processing_attempts      | processing attempts in the ledger: the race is reproduced | 12       | 12       | PASS"}},
		{name: "RunVariantFails", args: []string{"run", leasing, "--variant", "permanent-lock"}, code: 1, stdout: []string{"FAIL", "FAILED recovery_ok: expected 1, observed 0"}},
		{name: "ClaimSQLLesson", args: []string{"run", leasing, "--claim-sql", "../../examples/claim-lesson.sql"}, code: 0, stdout: []string{"PASS"}},
		{name: "ClaimSQLPendingOnly", args: []string{"run", leasing, "--claim-sql", "../../examples/claim-pending-only.sql"}, code: 1, stdout: []string{"YOUR CLAIM FAILED", "FAILED recovery_ok"}},
		{name: "ClaimSQLBroken", args: []string{"run", leasing, "--claim-sql", badSQL}, code: 2, stderr: []string{"no such table: NoSuchTable"}},
		{name: "ClaimSQLOneStatement", args: []string{"run", leasing, "--claim-sql", "../../examples/claim-one-statement.sql"}, code: 0, stdout: []string{"YOUR CLAIM HELD"}},
		{name: "ClaimSQLOneSelect", args: []string{"run", leasing, "--claim-sql", oneStatement}, code: 2,
			stderr: []string{"the statement (a file of one statement is read as the claim in one statement): must be an UPDATE of OutboxMessages"}, noReport: true},
		{name: "BrokerNATS", args: []string{"run", "session-18-lease-expiry-after-send", "--broker", "nats"}, code: 0, stdout: []string{"PASS"}},
		{name: "BrokerUnknown", args: []string{"run", "session-18-lease-expiry-after-send", "--broker", "kafka"}, code: 2,
			stderr: []string{"--broker must be lab, nats or nats://HOST:PORT"}, noReport: true},
		{name: "BrokerLessonWithout", args: []string{"run", leasing, "--broker", "nats"}, code: 2,
			stderr: []string{"runs on the lab's broker only; sessions 18, 19 and 20 take a real one"}, noReport: true},
		{name: "BrokerWithProcesses", args: []string{"run", "session-18-lease-expiry-after-send", "--broker", "nats", "--processes"}, code: 2,
			stderr: []string{"cannot be combined with --processes yet"}, noReport: true},
		{name: "ClaimSQLWrongScenario", args: []string{"run", "session-15-competing-workers-no-claim", "--claim-sql", "../../examples/claim-lesson.sql"}, code: 2, stderr: []string{"does not take claim SQL"}, noReport: true},
		{name: "ClaimSQLMissingFile", args: []string{"run", leasing, "--claim-sql", "no-such.sql"}, code: 2, stderr: []string{"cannot read"}, noReport: true},
		{name: "InspectNotSQLite", args: []string{"inspect", "main.go"}, code: 2, stderr: []string{"main.go is not an SQLite database"}},
		{name: "InspectMissing", args: []string{"inspect", "no-such.db"}, code: 2, stderr: []string{"no such file"}},
		{name: "InspectFolder", args: []string{"inspect", "testdata"}, code: 2, stderr: []string{"is a folder"}},
		{name: "RunValueFlagLast", args: []string{"run", leasing, "--out"}, code: 2, stderr: []string{"--out needs a value"}, noReport: true},
		{name: "RunAllVariant", args: []string{"run", "--all", "--variant", "permanent-lock"}, code: 1, stdout: []string{"session-15-outbox-leasing --variant permanent-lock: FAIL"}},
		{name: "RunDBNotPostgres", args: []string{"run", leasing, "--db", "lab.db"}, code: 2, stderr: []string{"--db takes a postgres:// URL"}, noReport: true},
		{name: "RunDBUnreachable", args: []string{"run", leasing, "--db", "postgres://nobody:secret@127.0.0.1:1/none?sslmode=disable"}, code: 2,
			stderr: []string{"cannot reach the PostgreSQL server", "127.0.0.1"}, noReport: true},
		{name: "RunPostgresVariantOnSQLite", args: []string{"run", leasing, "--variant", "for-update-without-skip-locked"}, code: 2,
			stderr: []string{"PostgreSQL mistake", "--db"}, noReport: true},
		{name: "DescribePostgres", args: []string{"describe", leasing}, code: 0,
			stdout: []string{"On PostgreSQL (--db)", "FOR UPDATE SKIP LOCKED", "for-update-without-skip-locked (PostgreSQL only: with --db)", "claim_lock_waits"}},
		{name: "GradeDBUnreachable", args: []string{"grade", "../../examples/claim-lesson.sql", "--db", "postgres://x@127.0.0.1:1/none"}, code: 2,
			stderr: []string{"cannot reach the PostgreSQL server", "127.0.0.1"}, noReport: true},
		{name: "RunAllUnknownVariant", args: []string{"run", "--all", "--variant", "nope"}, code: 2, stderr: []string{`no scenario has a variant "nope"`}, noReport: true},
		{name: "RunHelp", args: []string{"run", leasing, "-h"}, code: 0, stdout: []string{"--claim-sql"}, noReport: true},
		{name: "HelpCommand", args: []string{"help", "run"}, code: 0, stdout: []string{"--keep-db"}},
		{name: "ExploreBound", args: []string{"run", "explore", "--bound", "3"}, code: 0, stdout: []string{"explore: PASS", "orderings"}},
		{name: "ExploreBoundTooLarge", args: []string{"run", "explore", "--bound", "99"}, code: 2, stderr: []string{"--bound must be from 1 to"}, noReport: true},
		{name: "BoundNotExplore", args: []string{"run", leasing, "--bound", "3"}, code: 2, stderr: []string{"--bound applies to explore"}, noReport: true},
		{name: "RetentionNotSession20", args: []string{"run", leasing, "--inbox-retention", "2h"}, code: 2,
			stderr: []string{"--inbox-retention applies to session-20-inbox-retention, which this command does not run"}, noReport: true},
		{name: "BrokerWindowNotSession20", args: []string{"run", leasing, "--broker-window", "5m"}, code: 2,
			stderr: []string{"--broker-window applies to session-18-lease-expiry-after-send and session-20-inbox-retention"}, noReport: true},
		{name: "BrokerWindowSession18", args: []string{"run", "session-18-lease-expiry-after-send", "--variant", "broker-dedup-window", "--broker-window", "5m"},
			code: 1, stdout: []string{"broker-dedup-window: FAIL", "FAILED broker_offers: expected 2, observed 1",
				"FAILED naive_credit_cents: expected 2000, observed 1000"},
			report: []string{"dropped it as a duplicate within its 5m"}}, // the flag's window, not the 2 min default
		{name: "SkewNotSession23", args: []string{"run", leasing, "--skew-slow", "100ms"}, code: 2,
			stderr: []string{"--skew-slow applies to session-23-clocks-and-outages, which this command does not run"}, noReport: true},
		{name: "SkewBadDuration", args: []string{"run", "session-23-clocks-and-outages", "--skew-fast", "fast"}, code: 2,
			stderr: []string{"--skew-fast", "not a duration"}, noReport: true},
		{name: "SkewSession23", args: []string{"run", "session-23-clocks-and-outages", "--variant", "worker-clock-leases", "--skew-fast", "1s"},
			code: 1, stdout: []string{"FAILED live_lease_claims"}},
		{name: "RunFlagsFirst", args: []string{"run", "--variant", "unguarded-claim", leasing}, code: 1, stdout: []string{"FAILED processed_more_than_once"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out := filepath.Join(t.TempDir(), "reports")
			args := tt.args
			if args[0] == "run" && !contains(args, "--out") {
				args = append(args, "--out", out)
			}
			got := runCLI(t, args...)
			if got.code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", got.code, tt.code, got.stdout, got.stderr)
			}
			for _, s := range tt.stdout {
				if !strings.Contains(got.stdout, s) {
					t.Errorf("stdout lacks %q:\n%s", s, got.stdout)
				}
			}
			for _, s := range tt.stderr {
				if !strings.Contains(got.stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, got.stderr)
				}
			}
			if len(tt.report) > 0 {
				report := reportOf(t, got.stdout)
				for _, s := range tt.report {
					if !strings.Contains(report, s) {
						t.Errorf("report lacks %q", s)
					}
				}
			}
			if strings.Contains(got.stderr, "goroutine") || strings.Contains(got.stderr, "panic") {
				t.Errorf("stack trace on stderr:\n%s", got.stderr)
			}
			if tt.code == 2 && strings.Count(strings.TrimSpace(got.stderr), "\n") > 0 {
				t.Errorf("usage error should be one line:\n%s", got.stderr)
			}
			if tt.noReport {
				if entries, _ := os.ReadDir(out); len(entries) > 0 {
					t.Errorf("a rejected command wrote into %s", out)
				}
			}
			if left := got.leftovers(); len(left) > 0 {
				t.Errorf("temporary run folders left behind: %v", left)
			}
		})
	}
}

// reportOf reads the one report a text-format run names on stdout
// ("report:   PATH").
func reportOf(t *testing.T, stdout string) string {
	t.Helper()
	var paths []string
	for _, line := range strings.Split(stdout, "\n") {
		if path, ok := strings.CutPrefix(strings.TrimSpace(line), "report:"); ok {
			paths = append(paths, strings.TrimSpace(path))
		}
	}
	if len(paths) != 1 {
		t.Fatalf("stdout names %d reports, want 1:\n%s", len(paths), stdout)
	}
	b, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestRunJSON(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	got := runCLI(t, "run", "session-15-outbox-leasing", "session-15-competing-workers-no-claim", "--format", "json", "--out", out)
	if got.code != 0 {
		t.Fatalf("exit %d: %s %s", got.code, got.stdout, got.stderr)
	}
	lines := strings.Split(strings.TrimSpace(got.stdout), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 JSON lines, got %d:\n%s", len(lines), got.stdout)
	}
	want := map[string]map[string]float64{
		"session-15-outbox-leasing": {"processing_attempts": 6, "processed_more_than_once": 0, "ownership_violations": 0, "recovery_ok": 1, "paid": 4, "failed": 2},
		"session-15-competing-workers-no-claim": {"loaded_a": 6, "loaded_b": 6, "processing_attempts": 12, "status_checks": 12,
			"processed_more_than_once": 6, "paid": 4, "failed": 2},
	}
	for _, line := range lines {
		var r reports.JSONResult
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("bad JSON %q: %v", line, err)
		}
		if !r.Passed || len(r.Checks) == 0 {
			t.Errorf("%s: passed=%v checks=%d", r.Scenario, r.Passed, len(r.Checks))
		}
		for k, v := range want[r.Scenario] {
			if r.Metrics[k] != v {
				t.Errorf("%s: %s = %v, want %v", r.Scenario, k, r.Metrics[k], v)
			}
		}
		if _, err := os.Stat(r.Report); err != nil {
			t.Errorf("%s: report %s: %v", r.Scenario, r.Report, err)
		}
	}
}

func TestRunKeepDB(t *testing.T) {
	t.Parallel()
	got := runCLI(t, "run", "session-15-outbox-leasing", "--keep-db", "--format", "json", "--out", t.TempDir())
	var r reports.JSONResult
	if err := json.Unmarshal([]byte(got.stdout), &r); err != nil || got.code != 0 {
		t.Fatalf("exit %d, %v: %s", got.code, err, got.stdout)
	}
	if !r.Kept {
		t.Fatal("database_kept is false")
	}
	if _, err := os.Stat(r.Database); err != nil {
		t.Fatalf("kept database: %v", err)
	}
	report, err := os.ReadFile(r.Report)
	// The report wraps a long path at reports.MaxLine: read it unwrapped.
	if err != nil || !strings.Contains(strings.Join(strings.Fields(string(report)), ""), r.Database) {
		t.Fatalf("report does not name the kept database %s (%v)", r.Database, err)
	}
	inspected := runCLI(t, "inspect", r.Database)
	for _, s := range []string{"== Payments (6 rows)", "== OutboxMessages (6 rows)", "Processed", "TXN-0001"} {
		if inspected.code != 0 || !strings.Contains(inspected.stdout, s) {
			t.Errorf("inspect exit %d, stdout lacks %q:\n%s%s", inspected.code, s, inspected.stdout, inspected.stderr)
		}
	}
}

func TestReportsNeverOverwrite(t *testing.T) {
	t.Parallel()
	fixed := time.Date(2026, 1, 15, 9, 0, 0, 0, time.UTC)
	out := t.TempDir()
	for i := 0; i < 3; i++ {
		s := &settings{now: func() time.Time { return fixed }, tempRoot: t.TempDir()}
		if got := runCLIWith(t, s, "run", "session-15-outbox-leasing", "--out", out); got.code != 0 {
			t.Fatalf("exit %d: %s", got.code, got.stderr)
		}
	}
	files, _ := filepath.Glob(filepath.Join(out, "Session-15", "*.txt"))
	if len(files) != 3 {
		t.Fatalf("want 3 distinct reports in the same second, got %v", files)
	}
}

// TestRepeat: repeated runs are tallied right and leave no run folder.
// (200 runs would take ten seconds; TestRepeatTallyKeepsNoResult tallies
// 200 results.)
func TestRepeat(t *testing.T) {
	t.Parallel()
	got := runCLI(t, "run", "session-15-outbox-leasing", "--repeat", "20", "--out", t.TempDir())
	if got.code != 0 {
		t.Fatalf("exit %d:\n%s\n%s", got.code, got.stdout, got.stderr)
	}
	for _, s := range []string{"x20: 20 passed, 0 failed", "Worker-A/Worker-B claims in the concurrent phase"} {
		if !strings.Contains(got.stdout, s) {
			t.Errorf("stdout lacks %q:\n%s", s, got.stdout)
		}
	}
	total := 0
	for _, m := range regexp.MustCompile(` x(\d+)`).FindAllStringSubmatch(strings.SplitN(got.stdout, "phase: ", 2)[1], -1) {
		n, _ := strconv.Atoi(m[1])
		total += n
	}
	if total != 20 {
		t.Errorf("the splits count %d runs, want 20:\n%s", total, got.stdout)
	}
	if left := got.leftovers(); len(left) > 0 {
		t.Errorf("run folders left: %v", left)
	}
}

// TestRepeatTallyKeepsNoResult: what the repeat summary stores holds no
// lab.Result (nor a pointer, slice or map of them), only counts.
func TestRepeatTallyKeepsNoResult(t *testing.T) {
	t.Parallel()
	result := reflect.TypeOf(lab.Result{})
	var holds func(reflect.Type, int) bool
	holds = func(ty reflect.Type, depth int) bool {
		if ty == result {
			return true
		}
		if depth > 6 {
			return false
		}
		switch ty.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Chan:
			return holds(ty.Elem(), depth+1)
		case reflect.Map:
			return holds(ty.Key(), depth+1) || holds(ty.Elem(), depth+1)
		case reflect.Struct:
			for i := 0; i < ty.NumField(); i++ {
				if holds(ty.Field(i).Type, depth+1) {
					return true
				}
			}
		}
		return false
	}
	if holds(reflect.TypeOf(repeatTally{}), 0) {
		t.Fatal("repeatTally stores lab.Result values: memory grows with --repeat")
	}
	var tally repeatTally
	for i := 0; i < 200; i++ {
		a := float64(i % 3)
		tally.add(&lab.Result{Checks: []lab.Check{{Name: "x", Passed: i != 1}}, Metrics: []lab.Metric{{Key: "concurrent_claims_a", Value: a}, {Key: "concurrent_claims_b", Value: 6 - a}}})
	}
	var b strings.Builder
	printRepeatSummary(&b, &lesson.Scenario{Name: "s"}, "", &tally)
	if want := "s x200: 199 passed, 1 failed\n  Worker-A/Worker-B claims in the concurrent phase: 0/6 x67, 1/5 x67, 2/4 x66\n"; !strings.HasPrefix(b.String(), want) {
		t.Errorf("summary %q, want it to start %q", b.String(), want)
	}
}

// built is the program, built for the tests that run it as a user would
// (a real process: exit codes, signals, graders side by side), and shared
// while any of them runs: the last one to end removes it.
var built struct {
	mu    sync.Mutex
	dir   string
	path  string
	users int
}

// binary returns the built program, building it when no running test has
// it; t's end lets it go. With -short it skips t.
func binary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	built.mu.Lock()
	defer built.mu.Unlock()
	if built.users == 0 {
		dir, err := os.MkdirTemp("", "outboxlab-test-bin-")
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "outboxlab")
		if out, err := exec.Command("go", "build", "-o", path, ".").CombinedOutput(); err != nil {
			os.RemoveAll(dir)
			t.Fatalf("build: %v\n%s", err, out)
		}
		built.dir, built.path = dir, path
	}
	built.users++
	t.Cleanup(func() {
		built.mu.Lock()
		defer built.mu.Unlock()
		if built.users--; built.users == 0 {
			os.RemoveAll(built.dir)
		}
	})
	return built.path
}

// TestBinary runs the built program as a newcomer would: real exit codes,
// and Ctrl-C stops the workers and removes the temporary databases.
func TestBinary(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	t.Run("ExitCodes", func(t *testing.T) {
		t.Parallel()
		for _, tt := range []struct {
			args []string
			code int
		}{
			{[]string{"run", "session-15-outbox-leasing", "--out", t.TempDir()}, 0},
			{[]string{"run", "session-15-outbox-leasing", "--variant", "unguarded-claim", "--out", t.TempDir()}, 1},
			{[]string{"run", "no-such-scenario"}, 2},
		} {
			cmd := exec.Command(bin, tt.args...)
			cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tt.code {
				t.Errorf("%v: exit %d, want %d", tt.args, code, tt.code)
			}
		}
	})
	t.Run("Interrupt", func(t *testing.T) {
		t.Parallel()
		tmp := t.TempDir()
		stderr := interruptAfterFirstRun(t, bin, tmp)
		if !strings.Contains(stderr, "interrupted") {
			t.Errorf("stderr: %s", stderr)
		}
		if entries, _ := os.ReadDir(tmp); len(entries) > 0 {
			t.Errorf("temporary run folders left behind after interrupt: %v", entries)
		}
	})
	t.Run("InterruptKeepDB", func(t *testing.T) {
		t.Parallel()
		tmp := t.TempDir()
		stderr := interruptAfterFirstRun(t, bin, tmp, "--keep-db")
		m := regexp.MustCompile(`database is kept in (\S+)`).FindStringSubmatch(stderr)
		if m == nil || !strings.HasPrefix(m[1], filepath.Join(tmp, "outboxlab-session-15-outbox-leasing-")) {
			t.Fatalf("stderr does not name the kept run folder under %s: %s", tmp, stderr)
		}
		if st, err := os.Stat(m[1]); err != nil || !st.IsDir() {
			t.Errorf("kept folder %s: %v", m[1], err)
		}
	})
}

// interruptAfterFirstRun starts the binary on a long --repeat with its
// temporary folder under tmp, sends SIGINT once the first run's JSON line
// is out (a handshake, not a sleep), and returns its stderr after checking
// it exited 130.
func interruptAfterFirstRun(t *testing.T, bin, tmp string, extra ...string) string {
	t.Helper()
	args := append([]string{"run", "session-15-outbox-leasing", "--repeat", "100000", "--format", "json", "--out", t.TempDir()}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	first := &firstLine{seen: make(chan struct{})}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = first, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-first.seen:
	case err := <-exited:
		t.Fatalf("exited before its first run was out: %v; stderr: %s", err, stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := <-exited
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != exitInterrupted {
		t.Fatalf("after SIGINT: %v, want exit %d; stderr: %s", err, exitInterrupted, stderr.String())
	}
	return stderr.String()
}

// firstLine is a writer that closes seen when the first line is written.
type firstLine struct {
	mu   sync.Mutex
	done bool
	seen chan struct{}
}

func (f *firstLine) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.done && bytes.IndexByte(p, '\n') >= 0 {
		f.done = true
		close(f.seen)
	}
	return len(p), nil
}

func TestInterspersed(t *testing.T) {
	t.Parallel()
	app := newApp(&settings{}, nil, nil)
	tests := []struct{ in, want string }{
		{"outboxlab run a --variant v b", "outboxlab run --variant v -- a b"},
		{"outboxlab run a --keep-db --out d", "outboxlab run --keep-db --out d -- a"},
		{"outboxlab run --all", "outboxlab run --all"},
		{"outboxlab run a --format=json", "outboxlab run --format=json -- a"},
		{"outboxlab describe x", "outboxlab describe -- x"},
		{"outboxlab list", "outboxlab list"},
		{"outboxlab run a -h", "outboxlab run -h"},
		{"outboxlab exercise show ack --starter --out d", "outboxlab exercise show --starter --out d -- ack"},
		{"outboxlab exercise list", "outboxlab exercise list"},
	}
	for _, tt := range tests {
		args, err := interspersed(app, strings.Fields(tt.in))
		if err != nil {
			t.Fatalf("interspersed(%q): %v", tt.in, err)
		}
		got := strings.Join(args, " ")
		if got != tt.want {
			t.Errorf("interspersed(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestValueFlagGivenTwice: a flag that takes one value, given twice, is a
// usage error naming the flag, wherever the two stand, not a silent
// override by the last.
func TestValueFlagGivenTwice(t *testing.T) {
	t.Parallel()
	lesson := filepath.Join("..", "..", "examples", "claim-lesson.sql")
	pending := filepath.Join("..", "..", "examples", "claim-pending-only.sql")
	for _, args := range [][]string{
		{"run", "session-15-outbox-leasing", "--claim-sql", lesson, "--claim-sql", pending},
		{"run", "session-15-outbox-leasing", "--claim-sql=" + lesson, "--claim-sql", pending},
		{"run", "--claim-sql", lesson, "session-15-outbox-leasing", "-claim-sql", pending},
		{"grade", lesson, "--out", t.TempDir(), "--out", t.TempDir()},
	} {
		o := runCLI(t, args...)
		flag := "--claim-sql"
		if args[0] == "grade" {
			flag = "--out"
		}
		if o.code != exitUsage || !strings.Contains(o.stderr, flag+" is given more than once") {
			t.Errorf("%q: exit %d, stderr %q; want 2 naming %s", args, o.code, o.stderr, flag)
		}
		if strings.Contains(o.stdout, "PASS") || strings.Contains(o.stdout, "FAIL") {
			t.Errorf("%q ran: %s", args, o.stdout)
		}
	}
}

func TestParseDuration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"24h", 24 * time.Hour, true},
		{"7d", 7 * 24 * time.Hour, true},
		{"1d12h", 36 * time.Hour, true},
		{"2m", 2 * time.Minute, true},
		{"0.5d", 12 * time.Hour, true},
		{"0s", 0, false},
		{"500us", 0, false},
		{".5d", 0, false},
		{"1d-2h", 0, false},
		{"1dx", 0, false},
		{"d", 0, false},
		{"-1h", 0, false},
		{"three days", 0, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		got, err := parseDuration("x", tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parseDuration(%q) = %v, %v; want %v ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
