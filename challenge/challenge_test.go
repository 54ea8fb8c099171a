package challenge_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outboxlab/outboxlab/challenge"
	"github.com/outboxlab/outboxlab/internal/pgtest"
	"github.com/outboxlab/outboxlab/lab"
)

// goRelay is the reference relay in Go, built once for the package's tests.
var goRelay string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "outboxlab-relay-go-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	goRelay = filepath.Join(dir, "relay-go")
	build := exec.Command("go", "build", "-o", goRelay, "../examples/relay-go")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build the reference relay:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// engines are the databases a challenge's tests run on: SQLite ("") and,
// where the tests have a server, PostgreSQL (its URL). Under the race
// detector only SQLite: a PostgreSQL run's lab goroutines are the same,
// and make test runs the PostgreSQL halves (subtests named postgres/...)
// in a pass without it, where the server's time is not the detector's.
func engines(t *testing.T) map[string]string {
	switch {
	case os.Getenv(pgtest.EnvVar) == "":
		t.Log("the PostgreSQL runs skipped: no " + pgtest.EnvVar)
	case raceEnabled:
		t.Log("the PostgreSQL runs skipped under -race: make test runs them without it")
	default:
		return map[string]string{"sqlite": "", "postgres": os.Getenv(pgtest.EnvVar)}
	}
	return map[string]string{"sqlite": ""}
}

// runSequence runs one sequence of the named challenge with relay, on
// SQLite.
func runSequence(t *testing.T, name, seq, relay string) *lab.Result {
	t.Helper()
	return runSequenceOn(t, "", name, seq, relay)
}

// lookup finds a challenge's sequence.
func lookup(t *testing.T, name, seq string) (*challenge.Challenge, challenge.Sequence) {
	t.Helper()
	ch, err := challenge.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ch.Sequence(seq)
	if err != nil {
		t.Fatal(err)
	}
	return ch, s
}

// runSequenceOn runs one sequence of the named challenge with relay, on
// the PostgreSQL server at database, or on SQLite where it is "".
func runSequenceOn(t *testing.T, database, name, seq, relay string) *lab.Result {
	t.Helper()
	ch, s := lookup(t, name, seq)
	r, err := challenge.Run(context.Background(), ch, s, challenge.Options{Relay: relay, TempRoot: t.TempDir(), Database: database})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestExplorerFindsTheSplitClaim: a claim that reads in one transaction
// and takes by Id in another passes the named sequences' free runs only by
// luck; the explorer finds the ordering that breaks it with one switch,
// and that ordering, replayed, breaks it again.
func TestExplorerFindsTheSplitClaim(t *testing.T) {
	ch, _ := challenge.Lookup("day15-worker")
	seq, _ := ch.Sequence(ch.Explored)
	o := challenge.Options{Relay: goRelay + " -mistake split-claim", TempRoot: t.TempDir()}
	x, err := challenge.Explore(context.Background(), ch, seq, o, 1, 200)
	if err != nil {
		t.Fatal(err)
	}
	if x.Failing == nil {
		t.Fatalf("no ordering of %d broke the split claim", x.Runs)
	}
	if len(x.Ordering.Switches) != 1 || !slices.Contains(x.Failing.FailedChecks(), "claims_of_owned_messages") {
		t.Fatalf("ordering %s failed %v, want one switch failing claims_of_owned_messages", x.Ordering, x.Failing.FailedChecks())
	}
	replayed, err := challenge.ParseOrdering(x.Ordering.String())
	if err != nil {
		t.Fatal(err)
	}
	o.Ordering = &replayed
	r, err := challenge.Run(context.Background(), ch, seq, o)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.FailedChecks(), x.Failing.FailedChecks()) {
		t.Errorf("replaying %s failed %v, the exploration's run %v", x.Ordering, r.FailedChecks(), x.Failing.FailedChecks())
	}
}

// TestExplorerPassesTheReference: every ordering with up to one switch of
// the reference relay's requests keeps every invariant.
func TestExplorerPassesTheReference(t *testing.T) {
	ch, _ := challenge.Lookup("day15-worker")
	seq, _ := ch.Sequence(ch.Explored)
	x, err := challenge.Explore(context.Background(), ch, seq, challenge.Options{Relay: goRelay, TempRoot: t.TempDir()}, 1, 500)
	if err != nil {
		t.Fatal(err)
	}
	if x.Failing != nil {
		t.Fatalf("ordering %s broke the reference relay: %v", x.Ordering, x.Failing.FailedChecks())
	}
	if !x.Complete {
		t.Fatalf("explored %d orderings without finishing the bound", x.Runs)
	}
	t.Logf("%d orderings with up to one switch", x.Runs)
}

// TestProgramFaults: what a program does wrong outside the invariants is
// its fault, reported by kind, never the lab's: a run ends with a report
// whatever the program does.
func TestProgramFaults(t *testing.T) {
	script := func(body string) string {
		path := filepath.Join(t.TempDir(), "relay.sh")
		if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return path
	}
	tests := []struct {
		name, relay, kind, detail string
	}{
		{"exits at once", script("exit 3"), "exit", "exited with status 3"},
		{"not JSON", script(`echo 'hello'; read -r r; sleep 30`), "protocol", "one JSON object per line"},
		{"no hello first", script(`echo '{"op":"begin"}'; read -r r; sleep 30`), "protocol", "first request must be hello"},
		{"never asks again", script(`echo '{"op":"hello"}'; read -r r; sleep 30`), "hang", "sent no request for 1s (real time) after its last reply"},
		{"never speaks", script(`sleep 30`), "hang", "sent no request for 1s (real time) since it started"},
		// Faults that repeat stop the program at the tenth: its report
		// lists ten, not the 20000 requests' worth.
		{"prints its own messages forever", script(`while true; do echo 'debug: still here'; read -r r; done`), "flood", "10 times"},
		{"repeats a refused statement", script(`echo '{"op":"hello"}'; read -r r; echo '{"op":"begin"}'; read -r r; ` +
			`while true; do echo '{"op":"query","sql":"SELECT * FROM lab_audit"}'; read -r r; done`), "flood", "stdout carries requests only"},
		{"floods a line", script(`head -c 2000000 /dev/zero | tr '\0' a; echo`), "protocol", "longer than"},
		{"never reads its replies", script(`echo '{"op":"hello"}'; read -r r; while true; do echo '{"op":"log","message":"x"}'; done`),
			"hang", "did not read the lab's reply"},
		// The run ends though a process outside the program's group holds
		// its output open: its exit, or the idle bound, is the fault.
		{"leaves a process holding its output", script(`setsid sleep 5 & exit 3`), "", ""},
		{"a statement outside the sandbox", script(`echo '{"op":"hello"}'; read -r r; echo '{"op":"begin"}'; read -r r; ` +
			`echo '{"op":"query","sql":"SELECT * FROM lab_audit"}'; read -r r; exit 0`), "sandbox", "lab_audit"},
	}
	ch, _ := challenge.Lookup("day15-worker")
	seq, _ := ch.Sequence("two-workers")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := challenge.Run(context.Background(), ch, seq, challenge.Options{Relay: tt.relay, TempRoot: t.TempDir(),
				IdleTimeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if r.Passed() || !slices.Contains(r.FailedChecks(), "program_faults") {
				t.Fatalf("checks failed %v, want program_faults among them", r.FailedChecks())
			}
			var found bool
			for _, tb := range r.Tables {
				if tb.Title != "The program's faults" {
					continue
				}
				for _, row := range tb.Rows {
					found = found || ((row[1] == tt.kind || tt.kind == "") && strings.Contains(row[2], tt.detail))
				}
			}
			if !found {
				t.Errorf("no %s fault saying %q; verdict: %s", tt.kind, tt.detail, r.Verdict)
			}
			if n, _ := r.Metric("program_faults"); n > 2*(10+1) {
				t.Errorf("%v faults listed: a program that repeats a fault is stopped at the tenth", n)
			}
		})
	}
}

// TestProtocolPageFirstExchange: the first exchange docs/relay-protocol.md
// shows (and the README quotes) is what the lab answers, byte for byte:
// a program sends the page's requests as Worker-A and the lab's replies
// are compared with the page's.
func TestProtocolPageFirstExchange(t *testing.T) {
	exchange := func(path string) (asks, answers []string) {
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(text), "\n") {
			switch {
			case strings.HasPrefix(l, ">> "):
				asks = append(asks, strings.TrimPrefix(l, ">> "))
			case strings.HasPrefix(l, "<< "):
				answers = append(answers, strings.TrimPrefix(l, "<< "))
			}
		}
		return asks, answers
	}
	asks, answers := exchange("../docs/relay-protocol.md")
	if len(asks) == 0 || len(asks) != len(answers) {
		t.Fatalf("the page shows %d requests and %d replies", len(asks), len(answers))
	}
	dir := t.TempDir()
	requests, replies := filepath.Join(dir, "requests"), filepath.Join(dir, "replies")
	if err := os.WriteFile(requests, []byte(strings.Join(asks, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "relay.sh")
	body := `#!/bin/sh
if [ "$OUTBOXLAB_INSTANCE" != Worker-A ]; then echo '{"op":"hello"}'; read -r r; sleep 30; fi
while read -r ask <&3; do echo "$ask"; read -r answer; echo "$answer" >> ` + replies + `; done 3< ` + requests + `
sleep 30
`
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	ch, _ := challenge.Lookup("day15-worker")
	seq, _ := ch.Sequence("two-workers")
	if _, err := challenge.Run(context.Background(), ch, seq, challenge.Options{Relay: script, TempRoot: t.TempDir(), IdleTimeout: time.Second}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(replies)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Join(answers, "\n") + "\n"; string(got) != want {
		t.Errorf("the lab answered\n%s\nthe page says\n%s", got, want)
	}
	_, readme := exchange("../README.md")
	if !slices.Equal(readme, answers[:len(readme)]) {
		t.Errorf("the README's first exchange differs from the page's:\n%s", strings.Join(readme, "\n"))
	}
}
