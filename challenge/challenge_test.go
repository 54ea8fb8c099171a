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

// runSequence runs one sequence of the named challenge with relay.
func runSequence(t *testing.T, name, seq, relay string) *lab.Result {
	t.Helper()
	ch, err := challenge.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ch.Sequence(seq)
	if err != nil {
		t.Fatal(err)
	}
	r, err := challenge.Run(context.Background(), ch, s, challenge.Options{Relay: relay, TempRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestGoRelayPassesDay15(t *testing.T) {
	ch, _ := challenge.Lookup("day15-worker")
	for _, s := range ch.Sequences {
		t.Run(s.Name, func(t *testing.T) {
			r := runSequence(t, ch.Name, s.Name, goRelay)
			if !r.Passed() {
				for _, b := range r.BrokenInvariants() {
					t.Error(b)
				}
				for _, tb := range r.Tables {
					if tb.Title == "The program's faults" || tb.Title == "The program's stderr" {
						t.Log(tb.Title, tb.Rows)
					}
				}
				t.Log(r.Verdict)
			}
		})
	}
}

// TestGoRelayMistakes is the Day 15 challenge's answer key: each mistake
// of the reference relay fails exactly the checks that name it, in the
// sequences whose faults reach it, and passes the others.
func TestGoRelayMistakes(t *testing.T) {
	lost := []string{"outbox_processed", "outbox_processing", "paid"}
	tests := []struct {
		mistake, sequence string
		fails             []string
		// or is what it fails instead where real time decides (the
		// own clock's leases end on the wall clock, which a slow run,
		// under -race, lets pass before the horizon).
		or []string
	}{
		{"zero-rows-ok", "two-workers", nil, nil},
		{"zero-rows-ok", "stall-past-lease", []string{"stale_writes"}, nil},
		{"zero-rows-ok", "frozen-past-lease", []string{"stale_writes"}, nil},
		{"no-owner-guard", "stall-past-lease", []string{"stale_writes"}, nil},
		{"no-owner-guard", "frozen-past-lease", []string{"stale_writes"}, nil},
		{"pending-only-claim", "two-workers", nil, nil},
		{"pending-only-claim", "crash-after-claim", lost, nil},
		{"pending-only-claim", "failed-finalize", lost, nil},
		{"own-clock", "crash-after-claim", lost, []string{"claims_of_owned_messages"}},
	}
	for _, tt := range tests {
		t.Run(tt.mistake+"/"+tt.sequence, func(t *testing.T) {
			r := runSequence(t, "day15-worker", tt.sequence, goRelay+" -mistake "+tt.mistake)
			if got := r.FailedChecks(); !slices.Equal(got, tt.fails) && (tt.or == nil || !slices.Equal(got, tt.or)) {
				t.Errorf("failed checks %v, want %v (%s)", got, tt.fails, r.Verdict)
			}
		})
	}
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
		{"never asks again", script(`echo '{"op":"hello"}'; read -r r; sleep 30`), "hang", "sent no request"},
		{"floods a line", script(`head -c 2000000 /dev/zero | tr '\0' a; echo`), "protocol", "longer than"},
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
					found = found || (row[1] == tt.kind && strings.Contains(row[2], tt.detail))
				}
			}
			if !found {
				t.Errorf("no %s fault saying %q; verdict: %s", tt.kind, tt.detail, r.Verdict)
			}
		})
	}
}

func TestGoRelayPassesFencedRelay(t *testing.T) {
	ch, _ := challenge.Lookup("fenced-relay")
	for _, s := range ch.Sequences {
		t.Run(s.Name, func(t *testing.T) {
			if r := runSequence(t, ch.Name, s.Name, goRelay); !r.Passed() {
				t.Errorf("%s: %v", r.Verdict, r.BrokenInvariants())
			}
		})
	}
}

// TestGoRelayFencedMistakes is the fenced relay challenge's answer key.
func TestGoRelayFencedMistakes(t *testing.T) {
	unsent := []string{"unsent_completions"}
	tests := []struct {
		mistake, sequence string
		fails             []string
	}{
		{"no-token", "two-relays", nil},
		{"no-token", "expiry-after-send", []string{"stale_writes"}},
		{"no-token", "frozen-after-claim", []string{"stale_writes"}},
		{"complete-before-send", "two-relays", unsent},
		{"complete-before-send", "crash-after-completion", []string{"events_never_sent", "unsent_completions"}},
	}
	for _, tt := range tests {
		t.Run(tt.mistake+"/"+tt.sequence, func(t *testing.T) {
			r := runSequence(t, "fenced-relay", tt.sequence, goRelay+" -mistake "+tt.mistake)
			if got := r.FailedChecks(); !slices.Equal(got, tt.fails) {
				t.Errorf("failed checks %v, want %v (%s)", got, tt.fails, r.Verdict)
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

func TestGoRelayPassesInboxConsumer(t *testing.T) {
	ch, _ := challenge.Lookup("inbox-consumer")
	for _, s := range ch.Sequences {
		t.Run(s.Name, func(t *testing.T) {
			if r := runSequence(t, ch.Name, s.Name, goRelay); !r.Passed() {
				t.Errorf("%s: %v", r.Verdict, r.BrokenInvariants())
			}
		})
	}
}

// TestGoRelayInboxMistakes is the inbox consumer challenge's answer key.
func TestGoRelayInboxMistakes(t *testing.T) {
	twice := []string{"credit_cents", "effects_applied_twice", "effects_without_inbox"}
	tests := []struct {
		mistake, sequence string
		fails             []string
	}{
		{"no-dedup", "two-consumers", nil},
		{"no-dedup", "crash-after-effect", twice},
		{"no-dedup", "lost-ack", twice},
		{"no-dedup", "concurrent-duplicate", twice},
		{"ack-before-effect", "crash-after-ack", []string{"credit_cents", "events_recorded"}},
	}
	for _, tt := range tests {
		t.Run(tt.mistake+"/"+tt.sequence, func(t *testing.T) {
			r := runSequence(t, "inbox-consumer", tt.sequence, goRelay+" -mistake "+tt.mistake)
			if got := r.FailedChecks(); !slices.Equal(got, tt.fails) {
				t.Errorf("failed checks %v, want %v (%s)", got, tt.fails, r.Verdict)
			}
		})
	}
}

func TestGoRelayPassesHeartbeatRelay(t *testing.T) {
	ch, _ := challenge.Lookup("heartbeat-relay")
	for _, s := range ch.Sequences {
		t.Run(s.Name, func(t *testing.T) {
			if r := runSequence(t, ch.Name, s.Name, goRelay); !r.Passed() {
				t.Errorf("%s: %v", r.Verdict, r.BrokenInvariants())
			}
		})
	}
}

// TestGoRelayHeartbeatMistakes is the heartbeat relay challenge's answer
// key.
func TestGoRelayHeartbeatMistakes(t *testing.T) {
	tests := []struct {
		mistake, sequence string
		fails             []string
	}{
		{"no-renew", "two-relays", []string{"work_without_lease", "completions_short_of_work"}},
		{"renew-without-stopping", "two-relays", nil},
		{"renew-without-stopping", "stall-in-work", []string{"work_without_lease"}},
		{"ignore-sigterm", "two-relays", nil},
		{"ignore-sigterm", "sigterm-mid-work", []string{"claims_held_after_exit"}},
	}
	for _, tt := range tests {
		t.Run(tt.mistake+"/"+tt.sequence, func(t *testing.T) {
			r := runSequence(t, "heartbeat-relay", tt.sequence, goRelay+" -mistake "+tt.mistake)
			if got := r.FailedChecks(); !slices.Equal(got, tt.fails) {
				t.Errorf("failed checks %v, want %v (%s)", got, tt.fails, r.Verdict)
			}
		})
	}
}
