package challenge

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/provider"
	"github.com/outboxlab/outboxlab/relayproto"
	"github.com/outboxlab/outboxlab/store"
)

// day15Lease is the lease hello's settings give the Day 15 workers.
const day15Lease = 500 * time.Millisecond

// Day15Worker is the Day 15 worker: claim a payment's outbox message with
// a lease, check the payment at the provider, finalize the payment and the
// message only while the claim is still the worker's own.
var Day15Worker = Challenge{
	Name:   "day15-worker",
	Title:  "The Day 15 worker: claim, process, finalize the payments outbox",
	Lesson: "session-15-outbox-leasing",
	Brief: "Six payments wait in Payments, each with a Pending message in OutboxMessages (the schema is session 15's). " +
		"Each instance loops: claim the oldest claimable message (by CreatedAtUtc, then Id; Pending, or Processing with " +
		"LockedUntilUtc <= now) with a lease of lease_ms, setting Status = 'Processing', LockedBy = its instance name and " +
		"LockedUntilUtc (now plus lease_ms, in now's format); ask " +
		"the provider for the payment's status (op provider, the message's AggregateKey); then, in one transaction, set " +
		"the payment's PaymentStatus (and TransactionId when Paid) and the message's Status = 'Processed' and " +
		"ProcessedAtUtc, only while the message is still its own. With nothing to claim it waits (op wait) and " +
		"tries again; it never stops on its own. Times are the lab's: every reply's now, written as " +
		"2026-01-15T09:00:00.000Z. An instance's clock may run up to max_clock_skew_ms ahead of or behind the others': " +
		"a lease another instance wrote has ended for sure only once now - max_clock_skew_ms has passed its end.",

	Tables:     []string{"Payments", "OutboxMessages"},
	Schema:     []store.Migration{store.PaymentsOutbox, store.OutboxLeasing},
	Settings:   map[string]any{"lease_ms": day15Lease.Milliseconds(), "max_clock_skew_ms": day15Skew.Milliseconds()},
	Horizon:    time.Minute,
	Explored:   "two-workers",
	OnceChecks: []string{"processed_more_than_once"},
	Checks: []lesson.CheckDoc{
		{Name: "outbox_processed", About: "messages Processed: every message was finalized"},
		{Name: "outbox_pending", About: "messages left Pending: never processed"},
		{Name: "outbox_processing", About: "messages left Processing: claimed and never finalized"},
		{Name: "paid", About: "payments Paid, as the provider answered"},
		{Name: "failed", About: "payments Failed, as the provider answered"},
		{Name: "fake_successes", About: "payments whose status or transaction id differs from the provider's record"},
		{Name: "duplicate_rows", About: "duplicate payment or outbox rows"},
		{Name: "unchecked_messages", About: "messages finalized without a status check of their payment at the provider"},
		{Name: "claims_of_owned_messages", About: "claims that took a message another instance held under a live lease, or one already Processed"},
		{Name: "stale_writes", About: "writes committed to a message or its payment by an instance that no longer held the message's latest claim (a stale completion)"},
		{Name: "processed_more_than_once", About: "messages checked at the provider by more than one instance, in a sequence where no fault makes the lab take work over"},
	},
	Sequences: []Sequence{
		{Name: "two-workers", About: "Worker-A and Worker-B, each its own process and connection, drain the outbox together",
			Instances: []string{cast.WorkerA, cast.WorkerB}},
		{Name: "three-workers", About: "three instances drain the outbox together",
			Instances: []string{cast.WorkerA, cast.WorkerB, "Worker-C"}},
		{Name: "crash-after-claim", About: "the first worker to commit a claim is killed (SIGKILL) right after it; its message must be recovered once its lease ends",
			Instances: []string{cast.WorkerA, cast.WorkerB}, AtLeastOnce: true,
			Faults: []Fault{{At: Boundary{Op: relayproto.OpCommit, Commits: "claim", Nth: 1}, Do: Kill}}},
		{Name: "stall-past-lease", About: "the first provider call is held for four leases: another worker takes the message over, and the late finalization must change nothing",
			Instances: []string{cast.WorkerA, cast.WorkerB}, AtLeastOnce: true,
			Faults: []Fault{{At: Boundary{Op: relayproto.OpProvider, Nth: 1}, Do: Hold, For: 4 * day15Lease}}},
		{Name: "frozen-past-lease", About: "the first worker to commit a claim is frozen (SIGSTOP) for four leases right after it, then continued (SIGCONT)",
			Instances: []string{cast.WorkerA, cast.WorkerB}, AtLeastOnce: true,
			Faults: []Fault{{At: Boundary{Op: relayproto.OpCommit, Commits: "claim", Nth: 1}, Do: Stop, For: 4 * day15Lease}}},
		{Name: "lost-commit-reply", About: "the reply to the first commit of a completion is lost: it committed, and its worker is told the outcome is unknown",
			Instances: []string{cast.WorkerA, cast.WorkerB},
			Faults:    []Fault{{At: Boundary{Op: relayproto.OpCommit, Commits: "completion", Nth: 1}, Do: LoseReply}}},
		{Name: "failed-finalize", About: "the first statement that writes Processed fails with a database error: its worker must roll back and the message be finalized later",
			Instances: []string{cast.WorkerA, cast.WorkerB}, AtLeastOnce: true,
			Faults: []Fault{{At: Boundary{Op: relayproto.OpExec, SQLContains: "Processed", Nth: 1}, Do: FailStatement}}},
		{Name: "skewed-clocks", About: "Worker-B's clock runs max_clock_skew_ms ahead of Worker-A's, Worker-B starts a millisecond late (so " +
			"Worker-A claims first), and Worker-A's first provider call is held for more than half a lease: by Worker-B's clock Worker-A's " +
			"lease ends early, and Worker-B must still not take the message",
			Instances: []string{cast.WorkerA, cast.WorkerB}, Skews: map[string]time.Duration{cast.WorkerB: day15Skew},
			Faults: []Fault{
				{Instance: cast.WorkerB, At: Boundary{Op: relayproto.OpHello, Nth: 1}, Do: Hold, For: time.Millisecond},
				{Instance: cast.WorkerA, At: Boundary{Op: relayproto.OpProvider, Nth: 1}, Do: Hold, For: day15Lease * 3 / 5},
			}},
	},
	world: newDay15World,
}

// day15Skew is the most an instance's clock may be off in the Day 15
// challenge (hello's max_clock_skew_ms): the skewed-clocks sequence's
// Worker-B runs that far ahead.
const day15Skew = 400 * time.Millisecond

// day15World is the Day 15 challenge's world: checkout's seed, the
// provider, and the tracker that reads the audit.
type day15World struct {
	d     *cast.Day15
	db    *store.DB  // checkout's connection, which the audits use
	mu    sync.Mutex // guards live: the instances commit from their own goroutines
	live  day15Tracker
	seeds int
}

func newDay15World(ctx context.Context, env *lesson.Env, _ Sequence) (rules, []lab.Event, error) {
	d := cast.NewDay15(cast.Day15Mistakes{})
	db, err := d.Setup(ctx, env.Open, env.DatabasePath(), store.PaymentsOutbox, store.OutboxLeasing, store.LabAudit, store.AuditDay15)
	if err != nil {
		return nil, nil, err
	}
	seeded, err := db.TagAudit(ctx, cast.Checkout, relayproto.Format(cast.LessonStart.Add(-time.Minute)))
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	wd := &day15World{d: d, db: db, live: newDay15Tracker(), seeds: len(d.Payments)}
	for _, e := range seeded {
		wd.live.apply(e)
	}
	return wd, d.Events(), nil
}

func (wd *day15World) close() error { return wd.db.Close() }

func (wd *day15World) summary(m func(string) string) string {
	return fmt.Sprintf("%s messages Processed (%s Paid, %s Failed, as the provider answered), %s stale writes, %s claims of owned messages",
		m("outbox_processed"), m("paid"), m("failed"), m("stale_writes"), m("claims_of_owned_messages"))
}

func (wd *day15World) send(context.Context, string, string, string, time.Time) (int64, error) {
	return 0, errNoBroker
}

// classify: a claim moves a message to Processing, a completion to
// Processed.
func (wd *day15World) classify(c store.AuditEntry) string {
	switch {
	case c.Table != "OutboxMessages" || c.Op != "UPDATE":
		return ""
	case c.NewState == "Processing":
		return "claim"
	case c.NewState == "Processed":
		return "completion"
	}
	return ""
}

func (wd *day15World) providerStatus(instance, key string) (string, string, bool) {
	st := wd.d.Provider.CheckStatus(instance, key)
	if st.Paid {
		return "Paid", st.TransactionID, true
	}
	return "Failed", "", true
}

// done: every message is Processed.
func (wd *day15World) done(ctx context.Context) (bool, error) {
	n, err := wd.db.Count(ctx, store.CountOutboxByStatus.SQL, sql.Named("status", "Processed"))
	return n >= wd.seeds, err
}

func (wd *day15World) describe(changes []store.AuditEntry) []lab.Event {
	wd.mu.Lock()
	defer wd.mu.Unlock()
	var out []lab.Event
	for _, c := range changes {
		if e, ok := wd.live.apply(c); ok {
			out = append(out, e)
		}
	}
	return out
}

// judge measures the sequence: the final rows and the provider's record
// (cast's Day 15 audit), then the programs' committed changes, replayed
// from the database's audit in commit order.
func (wd *day15World) judge(ctx context.Context, w *world, r *lab.Result) error {
	if err := wd.d.Audit(ctx, wd.db, r); err != nil {
		return err
	}
	entries, err := wd.db.Audit(ctx)
	if err != nil {
		return err
	}
	t := newDay15Tracker()
	for _, e := range entries {
		t.apply(e)
	}
	checks := wd.d.Provider.StatusChecks()
	checkers := map[string][]string{}
	for _, c := range checks {
		if !slices.Contains(checkers[c.Key], c.Caller) {
			checkers[c.Key] = append(checkers[c.Key], c.Caller)
		}
	}
	more, unchecked := 0, 0
	for key := range checkers {
		if len(checkers[key]) > 1 {
			more++
		}
	}
	for key := range t.completed {
		if len(checkers[key]) == 0 {
			unchecked++
		}
	}
	r.SetMetric("processed_more_than_once", float64(more))
	r.SetMetric("unchecked_messages", float64(unchecked))
	r.SetMetric("claims_of_owned_messages", float64(t.steals))
	r.SetMetric("stale_writes", float64(t.stale))
	r.SetMetric("program_claims", float64(t.claims))
	if t.firstStale != "" {
		r.SetCast("stale_writer", t.firstStale)
	}

	msgs, err := store.NewOutbox(wd.db, store.OutboxLesson).Messages(ctx)
	if err != nil {
		return err
	}
	pays, err := store.NewPayments(wd.db, store.PaymentWriteLesson).List(ctx)
	if err != nil {
		return err
	}
	payBy := map[string]store.Payment{}
	for _, p := range pays {
		payBy[p.Key] = p
	}
	perMsg := lab.Table{Title: "Messages: final state and who worked on each",
		Note: "Status, lease and payment columns are read from the database; claimed by from the lab's audit of " +
			"committed changes, checked by from the provider's ledger.",
		Columns:        []string{"Id", "AggregateKey", "Status", "LockedBy", "LockedUntilUtc", "Payment", "TransactionId", "Claimed by", "Checked by"},
		VaryingColumns: []string{"LockedBy", "LockedUntilUtc", "Claimed by", "Checked by"}, Interleaved: true}
	for _, m := range msgs {
		p := payBy[m.AggregateKey]
		perMsg.AddRow(m.ID, m.AggregateKey, m.Status, m.LockedBy, m.LockedUntil, p.Status, p.TransactionID,
			strings.Join(t.claimers[m.AggregateKey], ", "), strings.Join(checkers[m.AggregateKey], ", "))
	}
	r.Tables = append(r.Tables, perMsg, t.table(entries))
	r.Tables = append(r.Tables, cast.ProviderTables(wd.d.Provider)[1:]...)
	return nil
}

// expected are the figures a sound worker leaves, from the seed and the
// provider's rule: every message Processed, each payment as the provider
// answers.
func (wd *day15World) expected(seq Sequence) map[string]float64 {
	failed := 0
	for _, p := range wd.d.Payments {
		if provider.FailingKeys[p.Key] {
			failed++
		}
	}
	n := float64(len(wd.d.Payments))
	want := map[string]float64{
		"outbox_processed": n, "outbox_pending": 0, "outbox_processing": 0, "paid": n - float64(failed), "failed": float64(failed),
		"fake_successes": 0, "duplicate_rows": 0, "unchecked_messages": 0, "claims_of_owned_messages": 0, "stale_writes": 0,
	}
	if !seq.AtLeastOnce {
		want["processed_more_than_once"] = 0
	}
	return want
}

// day15Tracker follows the programs' committed changes in commit order:
// who holds each message's latest claim, and what each change was.
type day15Tracker struct {
	claimer    map[string]string   // key -> the instance whose claim is the latest
	claimers   map[string][]string // key -> every instance that claimed it, in order
	completed  map[string]bool
	claims     int
	steals     int
	stale      int
	firstStale string
}

func newDay15Tracker() day15Tracker {
	return day15Tracker{claimer: map[string]string{}, claimers: map[string][]string{}, completed: map[string]bool{}}
}

// apply reads one committed change and says it as a timeline event (false
// for checkout's seed).
func (t *day15Tracker) apply(c store.AuditEntry) (lab.Event, bool) {
	e := lab.Event{Subject: c.Key, Actor: c.Actor}
	if c.Actor == cast.Checkout {
		return e, false
	}
	owner := t.claimer[c.Key]
	stale := func(what string) lab.Event {
		t.stale++
		if t.firstStale == "" {
			t.firstStale = c.Actor
		}
		e.Kind, e.Action = lab.KindStale, "STALE "+what
		e.Detail = fmt.Sprintf("%s committed %s of %s while %s held its latest claim", c.Actor, what, c.Key, cmpOr(owner, "no instance"))
		return e
	}
	switch {
	case c.Op == "DELETE":
		// No worker may delete a payment or a message: a write outside
		// any claim.
		t.stale++
		e.Kind, e.Action, e.Detail = lab.KindStale, "DELETE", fmt.Sprintf("deleted %s's row from %s", c.Key, c.Table)
	case c.Op == "INSERT":
		e.Kind, e.Action, e.Detail = lab.KindNote, "INSERT", fmt.Sprintf("inserted a row for %s into %s", c.Key, c.Table)
	case c.Table == "OutboxMessages" && c.NewState == "Processing":
		t.claims++
		live := c.OldState == "Processing" && later(c.OldUntil, c.At) && owner != "" && owner != c.Actor
		t.claimer[c.Key] = c.Actor
		t.claimers[c.Key] = append(t.claimers[c.Key], c.Actor)
		e.Until = c.NewUntil
		if c.OldState == "Processed" || live {
			t.steals++
			e.Kind, e.Action = lab.KindSteal, "STEAL"
			e.Detail = fmt.Sprintf("claimed %s from %s (%s, lease until %s)", c.Key, cmpOr(owner, "nobody"), c.OldState, c.OldUntil)
			return e, true
		}
		e.Kind, e.Action = lab.KindClaim, "claim"
		e.Detail = fmt.Sprintf("claimed %s (was %s), lease until %s", c.Key, c.OldState, c.NewUntil)
	case owner != c.Actor:
		return stale(c.Table + " " + describeChange(c)), true
	case c.Table == "OutboxMessages" && c.NewState == "Processed":
		t.completed[c.Key] = true
		e.Kind, e.Action, e.Detail = lab.KindFinalize, "finalize", fmt.Sprintf("marked %s Processed", c.Key)
	case c.Table == "Payments":
		e.Kind, e.Action, e.Detail = lab.KindEffect, "payment", fmt.Sprintf("%s %s", c.Key, describeChange(c))
	case c.NewUntil != c.OldUntil:
		e.Kind, e.Action, e.Until = lab.KindRenew, "lease", c.NewUntil
		e.Detail = fmt.Sprintf("%s's lease now ends %s", c.Key, cmpOr(c.NewUntil, "never (released)"))
	default:
		e.Kind, e.Action, e.Detail = lab.KindNote, "update", fmt.Sprintf("%s %s", c.Key, describeChange(c))
	}
	return e, true
}

// table is the audit as a ledger: each committed change, who made it and
// what the lab read it as.
func (t *day15Tracker) table(entries []store.AuditEntry) lab.Table {
	tb := lab.Table{Title: "Ledger: committed changes (the lab's audit)",
		Note: "Every row change the programs committed, in commit order, as triggers recorded it; the checks of " +
			"claims and stale writes read this ledger, replayed from the database.",
		Columns: []string{"#", "Clock", "Instance", "Table", "Key", "Change", "Read as"}, VaryingColumns: []string{"#", "Clock", "Instance"},
		Interleaved: true}
	replay := newDay15Tracker()
	for _, c := range entries {
		e, ok := replay.apply(c)
		if !ok {
			continue
		}
		tb.AddRow(c.Seq, c.At, c.Actor, c.Table, c.Key, describeChange(c), string(e.Kind))
	}
	return tb
}

// describeChange says what one audited change did.
func describeChange(c store.AuditEntry) string {
	switch c.Op {
	case "INSERT":
		return "inserted, " + c.NewState
	case "DELETE":
		return "deleted, was " + c.OldState
	}
	parts := []string{}
	if c.OldState != c.NewState {
		parts = append(parts, c.OldState+" -> "+c.NewState)
	}
	if c.OldOwner != c.NewOwner {
		parts = append(parts, fmt.Sprintf("%s -> %s", cmpOr(c.OldOwner, "NULL"), cmpOr(c.NewOwner, "NULL")))
	}
	if c.OldUntil != c.NewUntil {
		parts = append(parts, "until "+cmpOr(c.NewUntil, "NULL"))
	}
	if len(parts) == 0 {
		return "rewritten, unchanged"
	}
	return strings.Join(parts, ", ")
}

// later reports whether time a is after time b, both as the tables
// store them; a time a program wrote in another form is read as such
// (RFC 3339), and one that reads as no time is not later.
func later(a, b string) bool {
	ta, errA := time.Parse(time.RFC3339Nano, a)
	tb, errB := time.Parse(time.RFC3339Nano, b)
	if errA != nil || errB != nil {
		return false
	}
	return ta.After(tb)
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (wd *day15World) receive(context.Context, string, time.Time) (*relayproto.Delivery, error) {
	return nil, errNoBroker
}

func (wd *day15World) ack(context.Context, string, int64, time.Time) (bool, error) {
	return false, errNoBroker
}

func (wd *day15World) work(string, string, int64, int64, int64) error { return errNoWork }

func (wd *day15World) finished() string { return "every message is Processed" }
