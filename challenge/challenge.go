// Package challenge runs a user's own relay (any program that speaks
// relayproto) under the lab's faults and judges it on durable state: the
// challenges (each built on a lesson's schema and invariants), their named
// sequences of instances and faults, the world that serves the programs'
// requests on the lab clock, and the report each sequence files.
package challenge

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agnivade/levenshtein"

	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/relayproto"
	"github.com/outboxlab/outboxlab/store"
)

// Challenge is one task a relay program can take.
type Challenge struct {
	Name  string // registry name, e.g. day15-worker
	Title string
	// Lesson is the lesson whose schema and invariants it uses.
	Lesson string
	// Brief is what the program must do, for `challenge show`: the
	// tables, the settings hello carries and what the checks judge.
	Brief string
	// Tables are the tables the program's statements may use, and Schema
	// the lesson's migrations that make them (`challenge show` prints
	// their statements that name them).
	Tables []string
	Schema []store.Migration
	// Settings are what hello's reply carries (a lease, say), as numbers
	// or texts.
	Settings map[string]any
	// Checks documents every check a sequence's report makes, in report
	// order.
	Checks []lesson.CheckDoc
	// OnceChecks are the checks of work done once (a message processed,
	// an event sent), made only in the sequences where no fault makes the
	// lab take work over (not [Sequence.AtLeastOnce]).
	OnceChecks []string
	// Sequences are the named runs the challenge makes, in order.
	Sequences []Sequence
	// Horizon is the most lab time a sequence may take: the lab stops
	// the programs there, whatever is left undone.
	Horizon time.Duration
	// Explored is the sequence whose orderings `challenge run` explores
	// after the named sequences (see [Explore]), and --replay replays.
	Explored string

	// world builds a sequence's world: it seeds the database and returns
	// what serves the challenge's requests and judges the run, and the
	// timeline of the seed.
	world func(ctx context.Context, env *lesson.Env, seq Sequence) (rules, []lab.Event, error)
}

// rules are what a challenge adds to the generic world: its operations
// beyond SQL, when its work is done, and its judgement.
// explainer is a challenge's rules that can say, for a failed run's
// verdict, which of its events the durable state lacks or repeats, where
// its timeline marks no breach of its own.
type explainer interface {
	explain() string
}

type rules interface {
	// providerStatus answers OpProvider; ok is false where the challenge
	// has no provider.
	providerStatus(instance, key string) (status, txn string, ok bool)
	// send stores an offer at the broker ([errNoBroker] without one).
	send(ctx context.Context, instance, eventID, payload string, now time.Time) (offer int64, err error)
	// receive hands instance the broker's next delivery for its service
	// (nil: none now), and ack acknowledges one ([errNoBroker] without a
	// consumer's broker).
	receive(ctx context.Context, instance string, now time.Time) (*relayproto.Delivery, error)
	ack(ctx context.Context, instance string, offer int64, now time.Time) (took bool, err error)
	// work records a chunk of an event's work, from tick start to end,
	// after the commit numbered after ([errNoBroker]'s kin errNoWork
	// where the challenge has no long work).
	work(instance, key string, start, end, after int64) error
	// classify names what a committed change is, for a fault's boundary:
	// "claim", "completion" or "".
	classify(c store.AuditEntry) string
	// done says whether the durable state shows every task finished, so
	// the lab may stop the programs; finished says what that state is.
	done(ctx context.Context) (bool, error)
	finished() string
	// describe says a commit's changes as timeline events.
	describe(changes []store.AuditEntry) []lab.Event
	// judge measures the run into r, from the database and the ledgers.
	judge(ctx context.Context, w *world, r *lab.Result) error
	// summary says what a passing run left, from its metrics (m formats
	// one), for the verdict.
	summary(m func(key string) string) string
	// expected are the checks' expected values in seq.
	expected(seq Sequence) map[string]float64
	// close releases what world opened.
	close() error
}

// Sequence is one named run of a challenge: the instances the lab starts
// and the faults it injects at their request boundaries.
type Sequence struct {
	Name  string
	About string // what it does to the programs, in one sentence
	// Instances are the instances' names, started in this order.
	Instances []string
	Faults    []Fault
	// Skews are instance -> how far its clock runs ahead (negative:
	// behind) of the lab's.
	Skews map[string]time.Duration
	// WorkMs are, in the heartbeat relay, events whose work is not the
	// challenge's work_ms: event id -> its ms of work, which its payload
	// carries ("work_ms").
	WorkMs map[string]int64
	// Horizon, when set, is the sequence's own horizon of lab time, in
	// place of the challenge's (a sequence that cannot finish its work).
	Horizon time.Duration
	// AtLeastOnce says a message may be processed more than once in
	// this sequence (a stall or a crash makes the lab take work over):
	// only duplicates of its effects fail, not duplicate work.
	AtLeastOnce bool
}

// Catalogue lists every challenge, in course order.
func Catalogue() []*Challenge {
	return []*Challenge{&Day15Worker, &FencedRelay, &InboxConsumer, &HeartbeatRelay}
}

// Lookup finds a challenge by name; an unknown name's error suggests the
// closest.
func Lookup(name string) (*Challenge, error) {
	var names []string
	for _, c := range Catalogue() {
		if c.Name == name {
			return c, nil
		}
		names = append(names, c.Name)
	}
	best, bestD := "", 1<<30
	for _, n := range names {
		if d := levenshtein.ComputeDistance(name, n); d < bestD {
			best, bestD = n, d
		}
	}
	msg := fmt.Sprintf("unknown challenge %q; the challenges are %s", name, strings.Join(names, ", "))
	if bestD <= len(name)/2+2 {
		msg = fmt.Sprintf("unknown challenge %q: did you mean %s? (the challenges are %s)", name, best, strings.Join(names, ", "))
	}
	return nil, &UnknownError{msg}
}

// errNoBroker answers a send in a challenge without a broker.
var errNoBroker = errors.New("challenge: no broker")

// errNoWork answers a work request in a challenge without long work.
var errNoWork = errors.New("challenge: no long work")

// UnknownError is an unknown challenge or sequence name.
type UnknownError struct{ msg string }

func (e *UnknownError) Error() string { return e.msg }

// Sequence finds the named sequence.
func (c *Challenge) Sequence(name string) (Sequence, error) {
	var names []string
	for _, s := range c.Sequences {
		if s.Name == name {
			return s, nil
		}
		names = append(names, s.Name)
	}
	return Sequence{}, &UnknownError{fmt.Sprintf("challenge %s has no sequence %q; its sequences are %s", c.Name, name, strings.Join(names, ", "))}
}

// SequenceNames lists the challenge's sequences.
func (c *Challenge) SequenceNames() []string {
	var out []string
	for _, s := range c.Sequences {
		out = append(out, s.Name)
	}
	return out
}

// SchemaStatements are the statements of the challenge's schema that make
// or change its tables, each with the comments above it, in order.
func (c *Challenge) SchemaStatements() []string {
	var out []string
	for _, m := range c.Schema {
		for _, stmt := range splitStatements(m.SQL) {
			text := strings.TrimSpace(stmt)
			for _, t := range c.Tables {
				if strings.Contains(text, "TABLE "+t+" ") || strings.Contains(text, "ON "+t+" ") {
					out = append(out, text)
					break
				}
			}
		}
	}
	return out
}

// splitStatements splits a schema file at the semicolons that end its
// statements, not those inside a comment or a quoted text.
func splitStatements(text string) []string {
	var out []string
	start, quote, comment := 0, byte(0), false
	for i := 0; i < len(text); i++ {
		switch c := text[i]; {
		case comment:
			comment = c != '\n'
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '-' && i+1 < len(text) && text[i+1] == '-':
			comment = true
		case c == '\'' || c == '"':
			quote = c
		case c == ';':
			out = append(out, text[start:i])
			start = i + 1
		}
	}
	return append(out, text[start:])
}
