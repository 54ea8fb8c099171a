package challenge_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/outboxlab/outboxlab/challenge"
)

// referenceRelays are the reference relays and how to run each with a
// mistake; the Python one only where python3 is installed.
func referenceRelays(t *testing.T) map[string]func(mistake string) string {
	relays := map[string]func(string) string{
		"go": func(m string) string {
			if m == "" {
				return goRelay
			}
			return goRelay + " -mistake " + m
		},
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Log("python3 is not installed: the Python reference relay's tests did not run")
		return relays
	}
	script, err := filepath.Abs("../examples/relay-py/relay.py")
	if err != nil {
		t.Fatal(err)
	}
	relays["python"] = func(m string) string {
		if m == "" {
			return "python3 " + script
		}
		return "python3 " + script + " --mistake " + m
	}
	return relays
}

// parallelOnServer runs a PostgreSQL run's test beside the others: most of
// its time is the server making and dropping the run's role and database.
func parallelOnServer(t *testing.T, database string) {
	if database != "" {
		t.Parallel()
	}
}

// TestReferenceRelaysPassEverySequence: both reference relays pass every
// sequence of every challenge, on SQLite and on PostgreSQL.
func TestReferenceRelaysPassEverySequence(t *testing.T) {
	for engine, database := range engines(t) {
		for lang, relay := range referenceRelays(t) {
			for _, ch := range challenge.Catalogue() {
				for _, s := range ch.Sequences {
					t.Run(engine+"/"+lang+"/"+ch.Name+"/"+s.Name, func(t *testing.T) {
						parallelOnServer(t, database)
						if r := runSequenceOn(t, database, ch.Name, s.Name, relay("")); !r.Passed() {
							t.Errorf("%s: %v", r.Verdict, r.BrokenInvariants())
						}
					})
				}
			}
		}
	}
}

// inboxVerdict is what an inbox consumer's failed verdict says of its
// events, by mistake: the effects the audit shows lost or repeated.
var inboxVerdict = map[string]string{
	"no-dedup":          "By the audit of committed credits, credited more than once: E-",
	"ack-before-effect": "By the audit of committed credits, never credited: E-",
}

// answerKey is each challenge's answer key: a reference relay's mistake
// fails exactly these checks in the sequence whose faults reach it, and
// none where they do not. or is what it fails instead where timing
// decides: the own clock's leases end on the wall clock, which a slow
// run (under -race) lets pass before the horizon.
var answerKey = []struct {
	challenge, mistake, sequence string
	fails, or                    []string
	// may are checks that may fail too, where timing decides.
	may []string
}{
	{"day15-worker", "zero-rows-ok", "two-workers", nil, nil, nil},
	{"day15-worker", "zero-rows-ok", "stall-past-lease", []string{"stale_writes"}, nil, nil},
	{"day15-worker", "zero-rows-ok", "frozen-past-lease", []string{"stale_writes"}, nil, nil},
	{"day15-worker", "no-owner-guard", "stall-past-lease", []string{"stale_writes"}, nil, nil},
	{"day15-worker", "no-owner-guard", "frozen-past-lease", []string{"stale_writes"}, nil, nil},
	{"day15-worker", "pending-only-claim", "two-workers", nil, nil, nil},
	{"day15-worker", "pending-only-claim", "crash-after-claim", lostMessage, nil, nil},
	{"day15-worker", "pending-only-claim", "failed-finalize", lostMessage, nil, nil},
	{"day15-worker", "own-clock", "crash-after-claim", lostMessage, []string{"claims_of_owned_messages"}, nil},
	{"day15-worker", "skips-provider", "two-workers", []string{"paid", "failed", "unchecked_messages"}, nil, nil},
	{"day15-worker", "drops-transaction-id", "two-workers", []string{"fake_successes"}, nil, nil},
	{"day15-worker", "ignores-skew", "two-workers", nil, nil, nil},
	{"day15-worker", "ignores-skew", "skewed-clocks", []string{"claims_of_owned_messages", "processed_more_than_once"}, nil, nil},
	{"fenced-relay", "no-token", "two-relays", nil, nil, nil},
	{"fenced-relay", "no-token", "expiry-after-send", []string{"stale_writes"}, nil, nil},
	{"fenced-relay", "no-token", "frozen-after-claim", []string{"stale_writes"}, nil, nil},
	{"fenced-relay", "complete-before-send", "two-relays", []string{"unsent_completions"}, nil, nil},
	{"fenced-relay", "complete-before-send", "crash-after-completion", []string{"events_never_sent", "unsent_completions"}, nil, nil},
	{"inbox-consumer", "no-dedup", "two-consumers", nil, nil, nil},
	{"inbox-consumer", "no-dedup", "crash-after-effect", appliedTwice, nil, nil},
	{"inbox-consumer", "no-dedup", "lost-ack", appliedTwice, nil, nil},
	{"inbox-consumer", "no-dedup", "concurrent-duplicate", appliedTwice, nil, nil},
	{"inbox-consumer", "ack-before-effect", "crash-after-ack", []string{"credit_cents", "events_recorded"}, nil, nil},
	// Without renewals the relays may also keep taking each other's
	// events over, until the horizon: which, depends on how they meet.
	{"heartbeat-relay", "no-renew", "two-relays", []string{"work_without_lease", "completions_short_of_work"},
		nil, []string{"events_delivered", "events_not_delivered", "duplicate_sends"}},
	{"heartbeat-relay", "renew-without-stopping", "two-relays", nil, nil, nil},
	{"heartbeat-relay", "renew-without-stopping", "stall-in-work", []string{"work_without_lease"}, nil, nil},
	{"heartbeat-relay", "ignore-sigterm", "two-relays", nil, nil, nil},
	{"heartbeat-relay", "ignore-sigterm", "sigterm-mid-work", []string{"claims_held_after_exit"}, nil, nil},
	{"heartbeat-relay", "no-deadline", "two-relays", nil, nil, nil},
	// Renewing without the deadline, a relay works E-4 to its end and
	// delivers it.
	{"heartbeat-relay", "no-deadline", "work-past-deadline", []string{"events_delivered", "events_not_delivered", "renewals_past_deadline"}, nil, nil},
}

// failsAsKeyed: got holds every check of fails, and nothing but them and
// the checks of may.
func failsAsKeyed(got, fails, may []string) bool {
	for _, f := range fails {
		if !slices.Contains(got, f) {
			return false
		}
	}
	for _, g := range got {
		if !slices.Contains(fails, g) && !slices.Contains(may, g) {
			return false
		}
	}
	return true
}

var (
	lostMessage  = []string{"outbox_processed", "outbox_processing", "paid"}
	appliedTwice = []string{"credit_cents", "effects_applied_twice", "effects_without_inbox"}
)

// TestAnswerKey runs the answer key with both reference relays, on SQLite
// and on PostgreSQL: each mistake fails by the checks' names, and the
// explorer finds the shortest ordering of the sequence's requests that
// fails them again, as `challenge run` files it for the student to replay.
func TestAnswerKey(t *testing.T) {
	for engine, database := range engines(t) {
		for lang, relay := range referenceRelays(t) {
			for _, tt := range answerKey {
				t.Run(engine+"/"+lang+"/"+tt.challenge+"/"+tt.mistake+"/"+tt.sequence, func(t *testing.T) {
					parallelOnServer(t, database)
					r := runSequenceOn(t, database, tt.challenge, tt.sequence, relay(tt.mistake))
					keyed := func(got []string) bool {
						return failsAsKeyed(got, tt.fails, tt.may) || (tt.or != nil && slices.Equal(got, tt.or))
					}
					if got := r.FailedChecks(); !keyed(got) {
						t.Errorf("failed checks %v, want %v (%s)", got, tt.fails, r.Verdict)
					}
					if tt.fails == nil {
						return
					}
					if want := inboxVerdict[tt.mistake]; want != "" && !strings.Contains(r.Verdict, want) {
						t.Errorf("the verdict does not say %q: %s", want, r.Verdict)
					}
					ch, seq := lookup(t, tt.challenge, tt.sequence)
					o := challenge.Options{Relay: relay(tt.mistake), TempRoot: t.TempDir(), Database: database}
					x, err := challenge.Explore(context.Background(), ch, seq, o, 1, 50)
					if err != nil {
						t.Fatal(err)
					}
					if x.Failing == nil {
						t.Fatalf("no ordering of %d, up to 1 switch, fails again", x.Runs)
					}
					if got := x.Failing.FailedChecks(); !keyed(got) {
						t.Errorf("the ordering %s failed checks %v, want %v (%s)", x.Ordering, got, tt.fails, x.Failing.Verdict)
					}
				})
			}
		}
	}
}

// scripted are programs written for one check each, where no mistake of a
// worker's would make it fail: each writes what the check must catch.
var scripted = []struct {
	challenge, sequence, name, script string
	fails                             []string
}{
	{"day15-worker", "two-workers", "does nothing", "exit 0",
		[]string{"outbox_processed", "outbox_pending", "paid", "failed", "program_faults"}},
	{"day15-worker", "two-workers", "inserts a second message for a payment", hello +
		ask(`{"op":"begin"}`) + ask(`{"op":"exec","sql":"INSERT INTO OutboxMessages (MessageType, AggregateKey, Payload, CreatedAtUtc) VALUES (:type, :key, :payload, :at)",`+
		`"params":{"type":"PaymentCreated","key":"PAY-001","payload":"{}","at":"x"}}`) +
		ask(`{"op":"commit"}`) + idle, []string{"outbox_processed", "outbox_pending", "paid", "failed", "duplicate_rows"}},
	{"fenced-relay", "two-relays", "does nothing", "exit 0",
		[]string{"events_delivered", "events_not_delivered", "program_faults"}},
	{"fenced-relay", "two-relays", "each instance takes E-1 under a long lease and sends it", hello +
		ask(`{"op":"begin"}`) + ask(`{"op":"exec","sql":"UPDATE outbox_events SET claim_token = claim_token + 1, locked_by = :who, lease_until = 100000 WHERE event_id = :id",`+
		`"params":{"who":"x","id":"E-1"}}`) +
		ask(`{"op":"commit"}`) + ask(`{"op":"send","event_id":"E-1","payload":"{}"}`) + idle,
		[]string{"events_delivered", "events_not_delivered", "claims_of_owned_events", "duplicate_sends"}},
	{"heartbeat-relay", "two-relays", "each instance claims E-1 under a lease past its deadline", hello +
		ask(`{"op":"begin"}`) + ask(`{"op":"exec","sql":"UPDATE outbox_events SET claim_token = claim_token + 1, locked_by = :who, lease_until = 100000 WHERE event_id = :id",`+
		`"params":{"who":"x","id":"E-1"}}`) + ask(`{"op":"commit"}`) + idle,
		[]string{"events_delivered", "events_not_delivered", "claims_of_owned_events", "renewals_past_deadline"}},
	{"inbox-consumer", "two-consumers", "receives and never acks", hello + ask(`{"op":"receive"}`) + ask(`{"op":"wait","ms":1500}`) +
		ask(`{"op":"receive"}`) + idle,
		[]string{"credit_cents", "events_recorded", "deliveries_not_acked", "redeliveries"}},
}

// hello, ask and idle build a scripted program's shell: each request, then
// its reply read; idle waits on the lab clock until the lab stops it. A
// request holds no single quote (the shell's): its values are params.
const (
	hello = `echo '{"op":"hello"}'; read -r r; `
	idle  = `while true; do echo '{"op":"wait","ms":100}'; read -r r || exit 0; done`
)

func ask(request string) string { return "echo '" + request + "'; read -r r; " }

// TestEveryCheckCanFail: every check of every challenge fails in some run
// of the answer key (the Go relay's), a scripted program, or the
// sequences' faults on a program that never reaches them.
func TestEveryCheckCanFail(t *testing.T) {
	failed := map[string]bool{}
	note := func(ch string, checks []string) {
		for _, c := range checks {
			failed[ch+"/"+c] = true
		}
	}
	for _, tt := range answerKey {
		note(tt.challenge, tt.fails)
	}
	dir := t.TempDir()
	for i, sc := range scripted {
		t.Run(sc.challenge+"/"+sc.name, func(t *testing.T) {
			path := filepath.Join(dir, "relay"+strconv.Itoa(i)+".sh")
			if err := os.WriteFile(path, []byte("#!/bin/sh\n"+sc.script+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			r := runSequence(t, sc.challenge, sc.sequence, path)
			if got := r.FailedChecks(); !slices.Equal(got, sc.fails) {
				t.Errorf("failed checks %v, want %v (%s)", got, sc.fails, r.Verdict)
			}
			note(sc.challenge, r.FailedChecks())
		})
	}
	// A program that does nothing never reaches a sequence's faults.
	note("day15-worker", []string{"faults_not_reached"})
	// The explorer catches the split claim (TestExplorerFindsTheSplitClaim).
	note("day15-worker", []string{"claims_of_owned_messages", "processed_more_than_once"})
	// The world's own checks are one code for every challenge, and the
	// heartbeat relay's judge is the fenced relay's, then its work's.
	common := []string{"program_faults", "faults_not_reached"}
	inherits := map[string]string{"heartbeat-relay": "fenced-relay"}
	for _, ch := range challenge.Catalogue() {
		for _, c := range append(slices.Clone(ch.Checks), challenge.WorldChecks...) {
			if !failed[ch.Name+"/"+c.Name] && !failed[inherits[ch.Name]+"/"+c.Name] &&
				!(slices.Contains(common, c.Name) && failed["day15-worker/"+c.Name]) {
				t.Errorf("%s: nothing makes check %s fail", ch.Name, c.Name)
			}
		}
	}
}
