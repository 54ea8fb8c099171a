package main

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/outboxlab/outboxlab/reports"
)

// TestMain is also the program's child process in these tests: a run with
// --processes starts this test binary as `<binary> worker --role ROLE`
// (the standard helper-process pattern), and it runs the CLI as the
// program does, so the child takes the hidden worker subcommand's path.
func TestMain(m *testing.M) {
	if isWorker(os.Args) {
		os.Exit(run(context.Background(), os.Args, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestRunProcesses: run --processes passes session 14 with its checkout a
// child process, and the report names each killed process, its point and
// its signal, in the timeline and in the processes table.
func TestRunProcesses(t *testing.T) {
	t.Parallel()
	got := runCLI(t, "run", "session-14-transactional-outbox", "--processes", "--format", "json", "--out", t.TempDir())
	if got.code != 0 {
		t.Fatalf("exit %d: %s %s", got.code, got.stdout, got.stderr)
	}
	var r reports.JSONResult
	if err := json.Unmarshal([]byte(got.stdout), &r); err != nil {
		t.Fatalf("bad JSON %q: %v", got.stdout, err)
	}
	report, err := os.ReadFile(r.Report)
	if err != nil {
		t.Fatal(err)
	}
	text := string(report)
	rows := regexp.MustCompile(`\| (before|after) +\| checkout \| (\d+) +\| between-outbox-writes \| killed +\| signal: killed +\|`).FindAllStringSubmatch(text, -1)
	if len(rows) != 2 {
		t.Fatalf("the report's processes table does not list the two killed checkout processes:\n%s", text)
	}
	flat := strings.Join(strings.Fields(strings.ReplaceAll(text, "|", " ")), " ")
	for _, row := range rows {
		if !strings.Contains(flat, "checkout, process "+row[2]+", killed by SIGKILL at between-outbox-writes") {
			t.Errorf("the timeline does not name killed process %s", row[2])
		}
	}
}

// TestWorkerIsHidden: the worker subcommand is for the lab's own children;
// the list of commands never offers it, and it wants its role.
func TestWorkerIsHidden(t *testing.T) {
	t.Parallel()
	if got := runCLI(t, "no-such-command"); got.code != exitUsage || strings.Contains(got.stderr, "worker") {
		t.Errorf("unknown command: exit %d, stderr %q; want exit %d and no worker in the list", got.code, got.stderr, exitUsage)
	}
	if got := runCLI(t, "worker"); got.code != exitUsage || !strings.Contains(got.stderr, "role") {
		t.Errorf("worker without a role: exit %d, stderr %q; want exit %d naming --role", got.code, got.stderr, exitUsage)
	}
}
