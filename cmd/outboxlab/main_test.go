package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/outboxlab/outboxlab/reports"
)

// outcome is what one in-process run of the CLI produced.
type outcome struct {
	code           int
	stdout, stderr string
}

// runCLI runs the CLI in-process with TMPDIR pointed at a fresh folder, so
// a test also sees whether temporary databases were cleaned up.
func runCLI(t *testing.T, args ...string) outcome {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), append([]string{"outboxlab"}, args...), &out, &errOut)
	return outcome{code, out.String(), errOut.String()}
}

func withTempDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("TMPDIR", dir)
	return dir
}

func TestCLI(t *testing.T) {
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
		{name: "RunBefore", args: []string{"run", "session-15-competing-workers-no-claim"}, code: 0, stdout: []string{"PASS", "UNSAFE DESIGN, race reproduced"}},
		{name: "RunVariantFails", args: []string{"run", leasing, "--variant", "permanent-lock"}, code: 1, stdout: []string{"FAIL", "FAILED recovery_ok: expected 1, observed 0"}},
		{name: "ClaimSQLLesson", args: []string{"run", leasing, "--claim-sql", "../../examples/claim-lesson.sql"}, code: 0, stdout: []string{"PASS"}},
		{name: "ClaimSQLPendingOnly", args: []string{"run", leasing, "--claim-sql", "../../examples/claim-pending-only.sql"}, code: 1, stdout: []string{"YOUR CLAIM FAILED", "FAILED recovery_ok"}},
		{name: "ClaimSQLBroken", args: []string{"run", leasing, "--claim-sql", badSQL}, code: 2, stderr: []string{"no such table: NoSuchTable"}},
		{name: "ClaimSQLOneStatement", args: []string{"run", leasing, "--claim-sql", oneStatement}, code: 2, stderr: []string{"must hold two statements"}, noReport: true},
		{name: "ClaimSQLWrongScenario", args: []string{"run", "session-15-competing-workers-no-claim", "--claim-sql", "../../examples/claim-lesson.sql"}, code: 2, stderr: []string{"does not take claim SQL"}, noReport: true},
		{name: "ClaimSQLMissingFile", args: []string{"run", leasing, "--claim-sql", "no-such.sql"}, code: 2, stderr: []string{"cannot read"}, noReport: true},
		{name: "InspectNotSQLite", args: []string{"inspect", "main.go"}, code: 2, stderr: []string{"main.go is not an SQLite database"}},
		{name: "InspectMissing", args: []string{"inspect", "no-such.db"}, code: 2, stderr: []string{"no such file"}},
		{name: "InspectFolder", args: []string{"inspect", "testdata"}, code: 2, stderr: []string{"is a folder"}},
		{name: "RunValueFlagLast", args: []string{"run", leasing, "--out"}, code: 2, stderr: []string{"--out needs a value"}, noReport: true},
		{name: "RunAllVariant", args: []string{"run", "--all", "--variant", "permanent-lock"}, code: 1, stdout: []string{"session-15-outbox-leasing --variant permanent-lock: FAIL"}},
		{name: "RunAllUnknownVariant", args: []string{"run", "--all", "--variant", "nope"}, code: 2, stderr: []string{`no scenario has a variant "nope"`}, noReport: true},
		{name: "RunHelp", args: []string{"run", leasing, "-h"}, code: 0, stdout: []string{"--claim-sql"}, noReport: true},
		{name: "HelpCommand", args: []string{"help", "run"}, code: 0, stdout: []string{"--keep-db"}},
		{name: "ExploreBound", args: []string{"run", "explore", "--bound", "3"}, code: 0, stdout: []string{"explore: PASS", "orderings"}},
		{name: "ExploreBoundTooLarge", args: []string{"run", "explore", "--bound", "99"}, code: 2, stderr: []string{"--bound must be from 1 to"}, noReport: true},
		{name: "BoundNotExplore", args: []string{"run", leasing, "--bound", "3"}, code: 2, stderr: []string{"--bound applies to explore"}, noReport: true},
		{name: "RunFlagsFirst", args: []string{"run", "--variant", "unguarded-claim", leasing}, code: 1, stdout: []string{"FAILED ownership_violations"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmp := withTempDir(t)
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
			if entries, _ := os.ReadDir(tmp); len(entries) > 0 {
				t.Errorf("temporary run folders left behind: %v", entries)
			}
		})
	}
}

func TestRunJSON(t *testing.T) {
	withTempDir(t)
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
	withTempDir(t)
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
	if err != nil || !bytes.Contains(report, []byte(r.Database)) {
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
	withTempDir(t)
	fixed := time.Date(2026, 1, 15, 9, 0, 0, 0, time.UTC)
	nowFunc = func() time.Time { return fixed }
	t.Cleanup(func() { nowFunc = time.Now })
	out := t.TempDir()
	for i := 0; i < 3; i++ {
		if got := runCLI(t, "run", "session-15-outbox-leasing", "--out", out); got.code != 0 {
			t.Fatalf("exit %d: %s", got.code, got.stderr)
		}
	}
	files, _ := filepath.Glob(filepath.Join(out, "Session-15", "*.txt"))
	if len(files) != 3 {
		t.Fatalf("want 3 distinct reports in the same second, got %v", files)
	}
}

func TestRepeat(t *testing.T) {
	withTempDir(t)
	got := runCLI(t, "run", "session-15-outbox-leasing", "--repeat", "50", "--out", t.TempDir())
	if got.code != 0 {
		t.Fatalf("exit %d:\n%s\n%s", got.code, got.stdout, got.stderr)
	}
	for _, s := range []string{"x50: 50 passed, 0 failed", "Worker-A/Worker-B claims in the concurrent phase"} {
		if !strings.Contains(got.stdout, s) {
			t.Errorf("stdout lacks %q:\n%s", s, got.stdout)
		}
	}
}

// TestBinary runs the built program as a newcomer would: real exit codes,
// and Ctrl-C stops the workers and removes the temporary databases.
func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "outboxlab")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	t.Run("ExitCodes", func(t *testing.T) {
		for _, tt := range []struct {
			args []string
			code int
		}{
			{[]string{"run", "session-15-outbox-leasing", "--out", t.TempDir()}, 0},
			{[]string{"run", "session-15-outbox-leasing", "--variant", "unguarded-claim", "--out", t.TempDir()}, 1},
			{[]string{"run", "no-such-scenario"}, 2},
		} {
			err := exec.Command(bin, tt.args...).Run()
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
		tmp := t.TempDir()
		cmd := exec.Command(bin, "run", "session-15-outbox-leasing", "--repeat", "100000", "--out", t.TempDir())
		cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		err := cmd.Wait()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != exitInterrupted {
			t.Fatalf("after SIGINT: %v, want exit %d; stderr: %s", err, exitInterrupted, stderr.String())
		}
		if !strings.Contains(stderr.String(), "interrupted") {
			t.Errorf("stderr: %s", stderr.String())
		}
		if entries, _ := os.ReadDir(tmp); len(entries) > 0 {
			t.Errorf("temporary run folders left behind after interrupt: %v", entries)
		}
	})
}

func TestInterspersed(t *testing.T) {
	app := newApp(nil, nil)
	tests := []struct{ in, want string }{
		{"outboxlab run a --variant v b", "outboxlab run --variant v -- a b"},
		{"outboxlab run a --keep-db --out d", "outboxlab run --keep-db --out d -- a"},
		{"outboxlab run --all", "outboxlab run --all"},
		{"outboxlab run a --format=json", "outboxlab run --format=json -- a"},
		{"outboxlab describe x", "outboxlab describe -- x"},
		{"outboxlab list", "outboxlab list"},
		{"outboxlab run a -h", "outboxlab run -h"},
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

func TestParseDuration(t *testing.T) {
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
