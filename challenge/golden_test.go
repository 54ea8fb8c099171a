package challenge_test

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/outboxlab/outboxlab/challenge"
	"github.com/outboxlab/outboxlab/reports"
)

var update = flag.Bool("update", false, "rewrite the golden reports in testdata/golden")

var (
	goldenStarted  = regexp.MustCompile(`(?m)^Started:  .*$`)
	goldenElapsed  = regexp.MustCompile(`(?m)^Elapsed:  .*$`)
	goldenDatabase = regexp.MustCompile(`(?m)^Database: .*(\n {10}.*)*`)
	// Whether a program exits on the shutdown reply or dies of the lab's
	// SIGTERM first is the operating system's race.
	goldenExit = regexp.MustCompile(`after the lab's SIGTERM: (exited with status 0|killed by terminated) *`)
)

// TestGoldenOrderedReport: a run in an ordering repeats, request for
// request, so its whole report is a golden file: the Go relay's split
// claim in the ordering the explorer finds, as a student replays it. It
// never says its workers ran concurrently, and names its replay command.
// Refresh with: go test ./challenge -run TestGoldenOrderedReport -update
func TestGoldenOrderedReport(t *testing.T) {
	ch, _ := challenge.Lookup("day15-worker")
	seq, _ := ch.Sequence(ch.Explored)
	ordering, err := challenge.ParseOrdering("5:Worker-B")
	if err != nil {
		t.Fatal(err)
	}
	r, err := challenge.Run(context.Background(), ch, seq, challenge.Options{Relay: "./relay-go -mistake split-claim",
		Dir: filepath.Dir(goRelay), TempRoot: t.TempDir(), Ordering: &ordering})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := reports.Text(&buf, r, reports.RunInfo{Started: time.Unix(0, 0)}); err != nil {
		t.Fatal(err)
	}
	got := goldenStarted.ReplaceAllString(buf.String(), "Started:  <wall clock>")
	got = goldenElapsed.ReplaceAllString(got, "Elapsed:  <elapsed>")
	got = goldenDatabase.ReplaceAllString(got, "Database: <run folder>")
	got = goldenExit.ReplaceAllString(got, "after the lab's SIGTERM: <exit>")
	// One request at a time: nothing in it varies by run, and it says so
	// nowhere; it names the whole command that replays it.
	if strings.Contains(got, reports.InterleavedNote) {
		t.Error("an ordered run's report says its workers ran concurrently")
	}
	if !strings.Contains(strings.Join(strings.Fields(got), " "), "outboxlab challenge run day15-worker --relay './relay-go -mistake split-claim' --replay 5:Worker-B") {
		t.Error("an ordered run's report lacks the command that replays it")
	}
	path := filepath.Join("testdata", "golden", "day15-worker-split-claim-ordered.txt")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("the report differs from %s at line %d (run with -update if the change is intended):\n got: %s\nwant: %s", path, i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("the report differs from %s in length: %d lines, want %d", path, len(gl), len(wl))
	}
}
