// Package lab holds the plain data a scenario run produces (timeline,
// ledgers, metrics, checks) and that reports render; both sides import it.
package lab

import (
	"fmt"
	"math"
	"strconv"
)

// Design says which side of a lesson a scenario shows.
type Design string

const (
	// Broken marks a "before" scenario: it passes when the breakage was
	// reproduced and made visible, and its verdict still calls the design unsafe.
	Broken Design = "broken"
	// Safe marks an "after" scenario: it passes when the design held.
	Safe Design = "safe"
)

// DesignName is how JSON names what a run showed: "before" (a broken
// design, reproduced), "after" (the safe design) or "variant" (a design
// with a deliberate mistake), so a grader cannot mistake a BEFORE pass for a
// safe design.
func (r *Result) DesignName() string {
	switch {
	case r.Variant != "":
		return "variant"
	case r.Design == Broken:
		return "before"
	default:
		return "after"
	}
}

// BrokenInvariants says, one sentence per failed check, which invariant
// the run broke: what the check proves, what was expected and what was
// observed.
func (r *Result) BrokenInvariants() []string {
	var out []string
	for _, c := range r.Checks {
		if !c.Passed {
			out = append(out, fmt.Sprintf("Did not hold: %s (%s): expected %s, observed %s.", c.About, c.Name, c.Expected, c.Observed))
		}
	}
	return out
}

// Result is everything one scenario run produced, as plain data.
type Result struct {
	Scenario string // registry name, e.g. session-15-outbox-leasing
	Title    string // lesson title for people
	Session  string // report folder, e.g. Session-15
	FileTag  string // report file stem, e.g. OutboxLeasing
	Variant  string // mistake variant, "" for the lesson as designed
	// CustomSQL names the engineer's own SQL the run used instead of the
	// lesson's, "" when it ran the lesson's statements.
	CustomSQL string
	// CustomSlot is what that SQL stands for: "claim" for --claim-sql, an
	// exercise's name for a student's file.
	CustomSlot string
	// Relay is the command line of the user's own relay a challenge's run
	// drove ("" for a lesson's run): the run judges that program.
	Relay  string
	Design Design
	Lesson string // what the run teaches, one paragraph
	// DoesNotSolve is the problem the lesson's design leaves for a later
	// lesson; every report prints it.
	DoesNotSolve string
	// Mistake is the variant's mistake in one sentence ("" for the lesson
	// as designed), and MistakeShows what running it demonstrates.
	Mistake      string
	MistakeShows string
	// MistakeChanges, for a variant that swaps no statement, says what it
	// changes instead.
	MistakeChanges string
	// VariantStatements are the statements the variant itself put in place
	// of the lesson's, by name, with the actors that ran them: its swaps and
	// the statements its consumer designs change. A statement a lesson's
	// own broken actor runs in the design run too is not among them.
	VariantStatements []VariantStatement
	// MistakesNotRun names the variant's mistake statements the statement
	// ledger counted 0 runs of: swapped in, never executed.
	MistakesNotRun []string

	Database     string // path of the SQLite file the run used, or the server and schema on PostgreSQL
	Engine       string // "sqlite" or "postgres"
	DatabaseKept bool   // true when --keep-db left it for students

	Schema []string // CREATE statements in force at the end, from sqlite_schema
	// Statements is every statement the run executed, from the store's
	// statement ledger, in the order each first ran.
	Statements []Statement
	// Transactions is every shape of transaction the run finished, from the
	// same ledger.
	Transactions []Transaction
	Timeline     []Event // who did what when, in order
	// Concurrent says workers ran at the same time, so the timeline's
	// order (not its invariants) varies from run to run.
	Concurrent bool
	Tables     []Table  // per-message table, each ledger, step tables
	Metrics    []Metric // the figures LESSONS.md names, in report order
	Checks     []Check  // what decides the exit code
	// Facts are figures the lesson's script fixes: printed beside the
	// checks, never one of them, so they decide nothing.
	Facts   []Fact
	Verdict string // one sentence about the design being taught
	// Cast names the actors who played the lesson's roles in this run, as
	// the run's ledgers or database show them: role -> actor name. A text
	// of the lesson's names an actor only through it ({@role}, see
	// [Result.Fill]), never by a name written into the text.
	Cast map[string]string
	// Settings are the settings the run used (options, lease lengths,
	// timeouts) as texts quote them: key -> text, for {key} in a lesson's
	// text (see [Result.Fill]).
	Settings map[string]string
}

// VariantStatement names one statement a variant swapped in and who ran it.
type VariantStatement struct {
	Name string // the statement's name, as the statement ledger records it
	// By names the actors that ran it where the statement's name does not
	// ("the consumers of the inbox design"), "" where it does.
	By string
}

// Statement is one SQL statement as it ran, from the statement ledger.
type Statement struct {
	Name string // "" for text the lab did not name
	SQL  string
	// Runs, Rows and Failed are what the ledger counted: executions, rows
	// affected by a write or returned by a read, and executions that erred.
	Runs   int
	Rows   int64
	Failed int
	// Replaces names the lesson statement a mistake ran in place of, with
	// that statement's text; Mistake says what the replacement changed.
	Replaces    string
	ReplacedSQL string
	Mistake     string
	// Audit marks a read the lab made to measure the run, not one of the
	// lesson's actors.
	Audit bool
	// Omitted marks a step the mistake leaves out: it has no text and never
	// ran; Skipped counts the times it would have run.
	Omitted bool
	Skipped int
}

// Transaction is one shape of transaction a run finished: the statements
// that ran in it, in order, and how many such transactions committed or
// rolled back.
type Transaction struct {
	Statements []string
	Committed  int
	RolledBack int
}

// Event is one line of the timeline. What it is (Kind) and what it is
// about (Subject, Rows, Until, Offer, To) are set by the actor where it
// learned them from the database or its ledgers; the pictures draw these
// values and never read Action or Detail, which are for people.
type Event struct {
	Seq    int
	At     string // scenario clock, clock.Layout, or a logical time such as t=110
	Actor  string
	Action string
	Detail string
	// Kind says what the event is; every event has one.
	Kind Kind
	// Subject is the message or event it is about, e.g. PAY-001, E-41,
	// e42; "" for none.
	Subject string
	// Rows is how many rows the event's write changed; nil when it wrote
	// nothing (or is no write).
	Rows *int64
	// Until is the lease end a claim or renewal left, on the timeline's
	// clock (At's layout); "" for none.
	Until string
	// Offer is the broker's offer an offer or a delivery is about, 0 for
	// none; To is the consumer a delivery went to.
	Offer int64
	To    string
	// Service is the consumer service (the consumer group the broker
	// delivers to, whose inbox it keeps) a consumer instance's effect or
	// dedup is for; "" for none. Several instances may share it.
	Service string
	// Refusal, on a write of kind KindFenced, names the guard that turned
	// it away, as its writer read the row back after the 0-row write; ""
	// on every other event.
	Refusal Refusal
	// AckLost, on a relay's send (KindOffer), says the broker stored the
	// offer but its ack never reached the relay, which believes the send
	// failed. (A consumer's ack lost on its way to the broker is an event
	// of its own, KindAckLost.)
	AckLost bool
}

// Refusal names the predicate of a write's WHERE clause that turned it
// away (0 rows), as the writer learned it by reading its row back. Only
// RefusedByToken is a fence: a fencing token that had moved on.
type Refusal string

// The guards that refuse a write.
const (
	// RefusedByToken: the row's fencing token (claim_token, ClaimToken)
	// had moved on; a newer claim holds it. This alone is a fence.
	RefusedByToken Refusal = "token"
	// RefusedByOwner: LockedBy (locked_by) names another worker.
	RefusedByOwner Refusal = "owner"
	// RefusedByStatus: the row's status says the work is no longer in
	// progress (Status = 'Processing' or delivered = 0 failed): done.
	RefusedByStatus Refusal = "status"
	// RefusedByLease: the lease had ended (lease_until > now failed).
	RefusedByLease Refusal = "lease"
	// RefusedByDeadline: the new lease would pass the processing deadline
	// (claimed_at + the maximum processing time).
	RefusedByDeadline Refusal = "deadline"
	// RefusedByShorter: the proposed lease end is not later than the one
	// the row holds (lease_until < :proposed failed).
	RefusedByShorter Refusal = "shorter"
	// RefusedByReceipt: the broker's delivery is no longer in flight under
	// the ack's receipt (delivery_count = :receipt, state = 'in_flight').
	RefusedByReceipt Refusal = "receipt"
	// RefusedByGone: no row has the id any more.
	RefusedByGone Refusal = "gone"
	// RefusedByRowCount: the write changed more rows than one and the lab
	// rolled it back; no predicate refused it.
	RefusedByRowCount Refusal = "rowcount"
)

// Refusals lists every refusal, in the legend's order.
var Refusals = []Refusal{RefusedByToken, RefusedByOwner, RefusedByStatus, RefusedByLease, RefusedByDeadline, RefusedByShorter,
	RefusedByReceipt, RefusedByGone, RefusedByRowCount}

// RowsOf is n as an event's Rows.
func RowsOf(n int64) *int64 { return &n }

// Kind says what a timeline event is, for the lane view and the HTML
// timeline.
type Kind string

// The kinds of event.
const (
	KindNote     Kind = "note"     // a start, a phase, a step of the scenario: nothing to mark
	KindClaim    Kind = "claim"    // a claim that took a free or expired lease
	KindSteal    Kind = "steal"    // a claim that took a message under a live lease, or one already done: only a mistake does this
	KindBlocked  Kind = "blocked"  // a claim a live lease turned away, as it should be
	KindDone     Kind = "done"     // a claim that found the message already done
	KindRefused  Kind = "refused"  // a claim that did not take a message whose lease had ended: the claim's own fault
	KindEmpty    Kind = "empty"    // a claim that found nothing claimable
	KindRenew    Kind = "renew"    // a renewal or heartbeat that extended a lease
	KindFinalize Kind = "finalize" // the owner's last write that changed its row: finalize, complete, ack
	KindFenced   Kind = "fenced"   // a write a guard turned away, 0 rows; its Refusal names the guard (only a token fences)
	KindNoOp     Kind = "noop"     // the current owner's write that changed 0 rows: the work was already done
	KindStale    Kind = "stale"    // a write that changed its row after its writer's lease had ended: only a mistake lets it
	KindExpiry   Kind = "expiry"   // the clock passed a lease's end while its owner still held it
	KindStall    Kind = "stall"    // an actor paused (a GC pause, a frozen process), holding what it held
	KindWake     Kind = "wake"     // a stalled actor went on
	KindError    Kind = "error"    // a statement that failed: the database gave no answer
	KindCrash    Kind = "crash"    // an actor died
	KindWork     Kind = "work"     // a processing attempt: the work for a message (a provider call)
	KindOffer    Kind = "offer"    // a relay's send: the broker stored an offer
	KindDeliver  Kind = "deliver"  // the broker handed an offer to a consumer
	KindEffect   Kind = "effect"   // a consumer's or worker's effect on its own data
	KindDedup    Kind = "dedup"    // a consumer's guard found a duplicate: no effect
	KindAck      Kind = "ack"      // a consumer's ack to the broker that reached it
	KindAckLost  Kind = "ack-lost" // a consumer's ack lost on the way: the broker never saw it
	KindUnsent   Kind = "unsent"   // a completion that marked a message done though it was never sent
	KindCommit   Kind = "commit"   // a producer committed business data and its outbox row
)

// Kinds lists every kind, in the legend's order.
var Kinds = []Kind{KindNote, KindClaim, KindSteal, KindBlocked, KindDone, KindRefused, KindEmpty, KindRenew, KindFinalize,
	KindFenced, KindNoOp, KindStale, KindExpiry, KindStall, KindWake, KindError, KindCrash, KindWork, KindOffer, KindDeliver, KindEffect, KindDedup,
	KindAck, KindAckLost, KindUnsent, KindCommit}

// Table is a titled table: a ledger, the per-message table or a step table.
type Table struct {
	Title string
	Note  string // what the table proves, printed under its title
	// Interleaved says the rows depend on how concurrent workers
	// interleaved: their order and split vary by run.
	Interleaved bool
	// VaryingColumns, for an interleaved table, names the columns whose
	// cells vary by run; the other columns of each row do not, only the
	// rows' order does. Nil: any cell may vary.
	VaryingColumns []string
	Columns        []string
	Rows           [][]string
	// RealBroker marks a real broker's own answers (--broker nats): the
	// HTML page shows these tables too, under that name.
	RealBroker bool `json:",omitempty"`
}

// AddRow appends one row, formatting each cell with [Cell].
func (t *Table) AddRow(cells ...any) {
	row := make([]string, len(cells))
	for i, c := range cells {
		row[i] = Cell(c)
	}
	t.Rows = append(t.Rows, row)
}

// Cell formats a value for a table: booleans as yes/no, empty strings as "-".
func Cell(v any) string {
	switch x := v.(type) {
	case string:
		if x == "" {
			return "-"
		}
		return x
	case bool:
		if x {
			return "yes"
		}
		return "no"
	case float64:
		return FormatNumber(x)
	case nil:
		return "-"
	default:
		return fmt.Sprint(v)
	}
}

// Metric is one named figure. Booleans are stored as 0 or 1.
type Metric struct {
	Key   string
	Value float64
}

// Check is one PASS/FAIL line of a report.
type Check struct {
	Name     string // metric key or short name; variants name the check they break
	About    string // what the check means, for the student
	Expected string
	Observed string
	Passed   bool
	// Measure marks a check of what the lesson measures or reproduces (how
	// a claim's work grows with the backlog, a lock wait, a duplicate the
	// design has to survive), not of an invariant the design keeps: a run
	// that fails only such checks broke no invariant.
	Measure bool
	// Counterexample is the shortest ordering that broke the check, where
	// a search (the interleaving explorer) found one: its length and its
	// actions, as steps a student can follow.
	Counterexample string
}

// Fact is a figure the lesson's script fixes by construction (how many
// times the script has a worker do the work, say): no statement of the
// lesson can change it, so it is a fact of the setup, not a check. Its
// metric stays among the result's metrics.
type Fact struct {
	Name  string // metric key
	About string // what the figure counts, for the student
	Value string // the measured figure, or "not measured"
	Why   string // why the script fixes it
}

// AddFact records the metric key as a fact of the setup, with its value as
// measured.
func (r *Result) AddFact(key, about, why string) {
	value := NotMeasured
	if v, ok := r.Metric(key); ok {
		value = FormatNumber(v)
	}
	r.Facts = append(r.Facts, Fact{Name: key, About: about, Value: value, Why: why})
}

// Passed reports whether every check passed. A result with no checks has
// proved nothing and does not pass.
func (r *Result) Passed() bool {
	if len(r.Checks) == 0 {
		return false
	}
	for _, c := range r.Checks {
		if !c.Passed {
			return false
		}
	}
	return true
}

// BrokeInvariant reports whether a check of an invariant failed (a failed
// check that is no [Check.Measure]).
func (r *Result) BrokeInvariant() bool {
	for _, c := range r.Checks {
		if !c.Passed && !c.Measure {
			return true
		}
	}
	return false
}

// FailedChecks returns the names of the checks that failed.
func (r *Result) FailedChecks() []string {
	var names []string
	for _, c := range r.Checks {
		if !c.Passed {
			names = append(names, c.Name)
		}
	}
	return names
}

// SetMetric records a figure, replacing an earlier value of the same key.
func (r *Result) SetMetric(key string, value float64) {
	for i := range r.Metrics {
		if r.Metrics[i].Key == key {
			r.Metrics[i].Value = value
			return
		}
	}
	r.Metrics = append(r.Metrics, Metric{Key: key, Value: value})
}

// SetFlag records a boolean figure as 0 or 1.
func (r *Result) SetFlag(key string, value bool) {
	r.SetMetric(key, Bool(value))
}

// Metric returns the figure recorded under key.
func (r *Result) Metric(key string) (float64, bool) {
	for _, m := range r.Metrics {
		if m.Key == key {
			return m.Value, true
		}
	}
	return 0, false
}

// NotMeasured is a check's Observed when the run never measured its metric.
const NotMeasured = "not measured"

// ExpectMetric adds a check that the metric key equals want. A missing
// metric fails the check: a figure that was never measured proves nothing.
func (r *Result) ExpectMetric(key string, want float64, about string) {
	got, ok := r.Metric(key)
	observed := NotMeasured
	if ok {
		observed = FormatNumber(got)
	}
	r.Checks = append(r.Checks, Check{
		Name:     key,
		About:    about,
		Expected: FormatNumber(want),
		Observed: observed,
		Passed:   ok && got == want,
	})
}

// Bool converts a boolean to the 0/1 the JSON metrics use.
func Bool(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// FormatNumber prints integers without a decimal point and others compactly.
func FormatNumber(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}
