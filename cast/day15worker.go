package cast

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/outboxlab/outboxlab/clock"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/provider"
	"github.com/outboxlab/outboxlab/store"
)

// providerLatency is the real time a status check takes: enough for the
// two workers to interleave, short enough for a run to take milliseconds.
const providerLatency = 2 * time.Millisecond

// Day15Mistakes are the Day 15 worker's own mistakes, outside the SQL.
type Day15Mistakes struct {
	// CreatesPayment: the worker calls the provider's create payment again
	// before checking its status.
	CreatesPayment bool
	// DropsTransactionID: the worker marks a payment Paid without the
	// provider's transaction id.
	DropsTransactionID bool
}

// Day15 is one Day 15 run's world: its clock, the provider, the timeline
// and the separate ledgers the workers append to (they never read them).
type Day15 struct {
	Clock    *clock.Manual
	Provider *provider.Provider
	Mistakes Day15Mistakes
	// Payments are what checkout seeds: [SeedPayments] unless a lesson
	// needs fewer.
	Payments []store.NewPayment
	// Concurrent is set when the workers ran at the same time, so the
	// report marks what depends on their interleaving.
	Concurrent bool
	// ClaimBound is the most claim attempts WorkLeased may make, all
	// workers together; 0 means no bound. A claim that never drains the
	// backlog then stops at the bound instead of looping forever.
	ClaimBound int

	engine       store.Engine // of the database Setup opened
	timeline     lab.Timeline
	claimCount   int  // claim attempts WorkLeased made
	order        int  // the ledgers' own counter: loads finished, processing begun
	boundReached bool // a worker stopped at ClaimBound
	mu           sync.Mutex
	loads        []loadEntry
	claims       []claimEntry
	attempts     []attemptEntry
	finals       []finalEntry
}

type loadEntry struct {
	seq    int
	order  int // when the load had finished, on the ledgers' own counter
	at     string
	worker string
	keys   []string
}

type claimEntry struct {
	seq     int
	at      string
	worker  string
	phase   string
	target  string // "next" or a key
	outcome store.ClaimOutcome
	id      int64
	key     string
	until   string // lease expiry on success
	heldBy  string // holder when blocked
	busy    int
	// lockWaiters: other workers seen waiting for the claim's row lock
	lockWaiters int
}

type attemptEntry struct {
	seq    int
	start  int // when processing began (before the provider call), on the ledgers' own counter
	at     string
	worker string
	id     int64
	key    string
	answer string
}

type finalEntry struct {
	seq       int
	at        string
	worker    string
	id        int64
	key       string
	committed bool
	// guarded: the finalization ran the lesson's owner-guarded statement,
	// so its commit proves the database named worker the owner then.
	guarded bool
	busy    int
	// retryOf, when not 0, is the timeline number of the finalization
	// this one sends again (see [Day15.RetryFinalize]).
	retryOf int
	// done: a retry that changed 0 rows because its first finalization
	// had committed, as the row read back says: neither committed nor
	// rejected.
	done bool
}

// NewDay15 starts a Day 15 run at [LessonStart] with the worker's mistakes m.
func NewDay15(m Day15Mistakes) *Day15 {
	p := provider.New()
	p.Latency = providerLatency
	return &Day15{Clock: clock.NewManual(LessonStart), Provider: p, Mistakes: m, Payments: SeedPayments}
}

// Now is the scenario time, formatted.
func (d *Day15) Now() string { return clock.Format(d.Clock.Now()) }

// Event adds a timeline line of kind at the current scenario time and
// returns its number.
func (d *Day15) Event(kind lab.Kind, actor, action, detail string) int {
	return d.Add(lab.Event{Kind: kind, Actor: actor, Action: action, Detail: detail})
}

// Add adds e to the timeline at the current scenario time and returns
// its number.
func (d *Day15) Add(e lab.Event) int {
	e.At = d.Now()
	return d.timeline.Add(e)
}

// Seed has checkout create the run's payments (the six of Days 14 and 15
// unless set otherwise) through the transactional outbox, one second apart
// from 08:59:00, each registered at the provider after its commit.
func (d *Day15) Seed(ctx context.Context, db *store.DB) error {
	d.Clock.Set(LessonStart.Add(-time.Minute))
	c := CheckoutInstance{Payments: store.NewPayments(db, store.PaymentWriteLesson), Provider: d.Provider}
	for _, p := range d.Payments {
		if err := c.Pay(ctx, PaymentCreated(p), d.Clock.Now(), nil); err != nil {
			return err
		}
		d.Add(lab.Event{Kind: lab.KindCommit, Subject: p.Key, Actor: Checkout, Action: "create payment", Detail: fmt.Sprintf("%s %d cents: payment + outbox row in one transaction, then registered at the provider", p.Key, p.AmountCents)})
		d.Clock.Advance(time.Second)
	}
	d.Clock.Set(LessonStart)
	return nil
}

// Setup opens checkout's own connection to the database at path, applies
// the schema steps and seeds the run's payments through it. The caller
// closes the connection, which the audits then use.
func (d *Day15) Setup(ctx context.Context, open Opener, path string, steps ...store.Migration) (*store.DB, error) {
	db, err := open(ctx, path)
	if err != nil {
		return nil, err
	}
	d.engine = db.Engine()
	if err := db.Migrate(ctx, steps...); err != nil {
		db.Close()
		return nil, err
	}
	if err := d.Seed(ctx, db); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// tick advances the ledgers' own counter and returns it.
func (d *Day15) tick() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.order++
	return d.order
}

// Process is the work for one message: a status check at the provider,
// turned into the outcome to store. Only this step calls the provider.
func (d *Day15) Process(worker string, id int64, key string) store.Outcome {
	if d.Mistakes.CreatesPayment {
		d.Provider.Create(worker, key)
		d.Add(lab.Event{Kind: lab.KindWork, Subject: key, Actor: worker, Action: "provider create (MISTAKE)",
			Detail: key + " sent to the provider's create payment a second time"})
	}
	start := d.tick()
	st := d.Provider.CheckStatus(worker, key)
	o := store.Outcome{Key: key, Status: "Failed"}
	answer := "Failed"
	if st.Paid {
		o.Status, o.TransactionID = "Paid", st.TransactionID
		answer = "Paid " + st.TransactionID
		if d.Mistakes.DropsTransactionID {
			o.TransactionID = ""
		}
	}
	seq := d.Add(lab.Event{Kind: lab.KindWork, Subject: key, Actor: worker, Action: "process",
		Detail: fmt.Sprintf("message %d (%s): status check answered %s", id, key, answer)})
	d.mu.Lock()
	d.attempts = append(d.attempts, attemptEntry{seq: seq, start: start, at: d.Now(), worker: worker, id: id, key: key, answer: answer})
	d.mu.Unlock()
	return o
}

// WorkBefore is Day 15's "before" worker: it loads every Pending message,
// waits (wait may be nil), then processes each message it loaded and
// completes it with the outbox's Finalize statement.
func (d *Day15) WorkBefore(ctx context.Context, out Outbox, worker string, wait func(ctx context.Context) error) error {
	msgs, err := out.LoadPending(ctx)
	if err != nil {
		return err
	}
	d.RecordLoad(worker, msgs)
	if wait != nil {
		d.Event(lab.KindNote, worker, "barrier", "waiting until both workers hold the full snapshot")
		if err := wait(ctx); err != nil {
			return err
		}
	}
	for _, m := range msgs {
		o := d.Process(worker, m.ID, m.AggregateKey)
		f, err := out.Finalize(ctx, m.ID, worker, o, d.Clock.Now())
		if err != nil {
			return err
		}
		d.RecordFinal(worker, m.ID, m.AggregateKey, f.Finalized, ownerGuarded(out), f.Stats.BusyRetries, finalRefusal(f, worker),
			fmt.Sprintf("message %d (%s) marked Processed by Id alone; payment set %s", m.ID, m.AggregateKey, o.Status))
	}
	return nil
}

// WorkLeased is Day 15's "after" worker: claim, process, finalize, until
// nothing is claimable. between is the split claim's window (nil: none).
func (d *Day15) WorkLeased(ctx context.Context, out Outbox, worker string, lease time.Duration, between func()) error {
	for ctx.Err() == nil {
		if !d.takeClaimAttempt() {
			d.Event(lab.KindNote, worker, "stop", fmt.Sprintf("claim bound reached: %d claim attempts and the backlog is not drained", d.ClaimBound))
			return nil
		}
		now := d.Clock.Now()
		c, err := out.ClaimNext(ctx, now, store.OutboxLeaseFor(worker, now, lease), between)
		if err != nil {
			return err
		}
		d.RecordClaim(worker, "concurrent", "next", c)
		switch c.Outcome {
		case store.Empty:
			return nil
		case store.Claimed:
			if err := d.ProcessAndFinalize(ctx, out, worker, c.Message); err != nil {
				return err
			}
		}
	}
	return ctx.Err()
}

// takeClaimAttempt counts one claim attempt, or reports false when the
// bound is reached.
func (d *Day15) takeClaimAttempt() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ClaimBound > 0 && d.claimCount >= d.ClaimBound {
		d.boundReached = true
		return false
	}
	d.claimCount++
	return true
}

// ClaimBoundReached reports whether a worker stopped at [Day15.ClaimBound].
func (d *Day15) ClaimBoundReached() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.boundReached
}

// Finalizer finalizes a claimed message with its statement set: a
// worker's outbox service on its own connection ([store.Outbox]), or a
// stand-in for one that runs in a child process.
type Finalizer interface {
	Finalize(ctx context.Context, id int64, worker string, out store.Outcome, now time.Time) (store.Finalization, error)
	Statements() store.OutboxSQL
}

// Outbox is a worker's outbox service as Day 15's workers use it: a
// [*store.Outbox] on the worker's own connection, or a stand-in for one
// that runs in a child process.
type Outbox interface {
	Finalizer
	LoadPending(ctx context.Context) ([]store.Message, error)
	ClaimNext(ctx context.Context, now time.Time, lease store.OutboxLease, between func()) (store.Claim, error)
	ClaimMessage(ctx context.Context, id int64, now time.Time, lease store.OutboxLease) (store.Claim, error)
}

// ProcessAndFinalize does the work for a claimed message and finalizes it
// under the ownership guard.
func (d *Day15) ProcessAndFinalize(ctx context.Context, out Finalizer, worker string, m store.Message) error {
	_, err := d.Finalize(ctx, out, worker, m, d.Process(worker, m.ID, m.AggregateKey))
	return err
}

// Finalize finalizes a message worker has processed (o is the outcome its
// [Day15.Process] returned) and records the finalization, or its
// rejection with the predicate that refused it, read back from the row.
func (d *Day15) Finalize(ctx context.Context, out Finalizer, worker string, m store.Message, o store.Outcome) (store.Finalization, error) {
	f, err := out.Finalize(ctx, m.ID, worker, o, d.Clock.Now())
	if err != nil {
		return f, err
	}
	fin := out.Statements().Finalize
	detail := fmt.Sprintf("message %d (%s) Processed WHERE LockedBy = %s; payment set %s", m.ID, m.AggregateKey, worker, o.Status)
	if fin.Replaces != nil {
		detail = fmt.Sprintf("message %d (%s) Processed by %q, with no ownership check; payment set %s", m.ID, m.AggregateKey, fin.Name, o.Status)
	}
	switch {
	case !f.Finalized && f.Gone:
		detail = fmt.Sprintf("message %d (%s): guard changed 0 rows: no message has Id %d any more (an UPDATE changed it); rolled back", m.ID, m.AggregateKey, m.ID)
	case !f.Finalized:
		detail = fmt.Sprintf("message %d (%s): guard changed 0 rows, refused by %s; rolled back", m.ID, m.AggregateKey, refusedBy(f.Refused, worker, fin))
	}
	d.RecordFinal(worker, m.ID, m.AggregateKey, f.Finalized, ownerGuarded(out), f.Stats.BusyRetries, finalRefusal(f, worker), detail)
	return f, nil
}

// The predicates of the owner-guarded finalization ([store.FinalizeOwned])
// that [refusedBy] names.
const (
	statusGuard = "Status = 'Processing'"
	ownerGuard  = "LockedBy = :worker"
)

// refusedBy names the predicates of finalization fin that turned worker's
// write away, from the message as the guard found it (read back in the
// finalization's transaction): the status, when someone had already
// finalized it; the owner, when the row names another worker. Only a
// predicate fin's WHERE clause holds is named; where one predicate alone
// was false, it alone decided, and the sentence says so.
func refusedBy(m store.Message, worker string, fin store.Stmt) string {
	var refused []string
	if strings.Contains(fin.SQL, statusGuard) && m.Status != "Processing" {
		refused = append(refused, fmt.Sprintf("%s (the message is %s", statusGuard, m.Status)+finalizedBy(m)+")")
	}
	if strings.Contains(fin.SQL, ownerGuard) && m.LockedBy != worker {
		held := fmt.Sprintf("%s holds its lease", m.LockedBy)
		if m.Status != "Processing" {
			held = "the row names " + m.LockedBy
		}
		refused = append(refused, fmt.Sprintf("LockedBy = %s (%s)", worker, held))
	}
	switch len(refused) {
	case 0:
		return "the guard, though the message is " + m.Status + " under " + m.LockedBy
	case 1:
		return refused[0] + " alone"
	}
	return strings.Join(refused, " and by ") + ", each enough alone"
}

// finalRefusal is the guard that turned worker's finalization f away, read
// off the row as the guard found it (f.Refused): another owner before a
// status that says the work is done; "" for a finalization that committed.
func finalRefusal(f store.Finalization, worker string) lab.Refusal {
	if f.Finalized {
		return ""
	}
	return MessageRefusal(!f.Gone, f.Refused.Status, f.Refused.LockedBy, 0, worker, 0)
}

// finalizedBy says who finalized m, as far as the row says.
func finalizedBy(m store.Message) string {
	if m.Status == "Processed" && m.LockedBy != "" {
		return ", finalized by " + m.LockedBy
	}
	return ""
}

// RetryFinalize sends worker's finalization of m again, under the same
// name with the same outcome o, as a client's retry policy sends a
// statement whose reply never came (a connection dropped after COMMIT).
// No reply was lost here: the lab repeats the statement, and the timeline
// says so. It repeats the latest finalization of m worker sent that was
// not itself a retry (an error if there is none). A retry that changes 0 rows is done, not refused, when the first
// committed and the row as the guard found it (read back in the retry's
// transaction) is Processed under worker with the first's time as its
// ProcessedAtUtc: that commit stands.
func (d *Day15) RetryFinalize(ctx context.Context, out Finalizer, worker string, m store.Message, o store.Outcome) (store.Finalization, error) {
	var prev finalEntry
	d.mu.Lock()
	for _, p := range d.finals {
		if p.id == m.ID && p.worker == worker && p.retryOf == 0 {
			prev = p
		}
	}
	d.mu.Unlock()
	if prev.seq == 0 {
		return store.Finalization{}, fmt.Errorf("day15: %s retries a finalization of message %d it never sent", worker, m.ID)
	}
	f, err := out.Finalize(ctx, m.ID, worker, o, d.Clock.Now())
	if err != nil {
		return f, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	first := prev.seq
	fin := out.Statements().Finalize
	e := lab.Event{Kind: lab.KindFinalize, Subject: m.AggregateKey, Actor: worker, Action: "retry finalize", Rows: lab.RowsOf(1)}
	entry := finalEntry{at: d.Now(), worker: worker, id: m.ID, key: m.AggregateKey, committed: f.Finalized, guarded: ownerGuarded(out),
		busy: f.Stats.BusyRetries, retryOf: first}
	switch row := f.Refused; {
	case f.Finalized && prev.committed:
		e.Detail = fmt.Sprintf("message %d (%s) changed 1 row again: ProcessedAtUtc and the payment re-stamped %s, over #%d's %s",
			m.ID, m.AggregateKey, d.Now(), first, prev.at)
	case f.Finalized:
		e.Detail = fmt.Sprintf("message %d (%s) changed 1 row: Processed at %s, where #%d changed none", m.ID, m.AggregateKey, d.Now(), first)
	case f.Gone:
		e.Kind, e.Rows, e.Refusal = lab.KindFenced, lab.RowsOf(0), lab.RefusedByGone
		e.Detail = fmt.Sprintf("message %d (%s): 0 rows: no message has Id %d any more; rolled back", m.ID, m.AggregateKey, m.ID)
	case FirstWriteStands(prev.committed, Mark{Done: true, By: worker, At: prev.at},
		Mark{Done: row.Status == "Processed", By: row.LockedBy, At: row.ProcessedAt}):
		entry.done = true
		e.Kind, e.Rows = lab.KindNoOp, lab.RowsOf(0)
		e.Detail = fmt.Sprintf("message %d (%s): 0 rows: %s turned it away, and the row's ProcessedAtUtc is %s, #%d's own: that "+
			"commit stands, so the retry is done, not fenced; rolled back", m.ID, m.AggregateKey, refusedBy(row, worker, fin),
			row.ProcessedAt, first)
	default:
		e.Kind, e.Rows, e.Refusal = lab.KindFenced, lab.RowsOf(0), finalRefusal(f, worker)
		e.Detail = fmt.Sprintf("message %d (%s): 0 rows, refused by %s; rolled back", m.ID, m.AggregateKey, refusedBy(row, worker, fin))
	}
	if claimer, claimed := d.lastClaimer(m.ID); f.Finalized && !entry.guarded && claimed && claimer != worker {
		e.Kind = lab.KindStale // as in RecordFinal: another worker's claim came after worker's
	}
	e.Detail = RetryNote(fmt.Sprintf("#%d", first)) + e.Detail
	entry.seq = d.Add(e)
	d.finals = append(d.finals, entry)
	return f, nil
}

// Retry is the worker and the payment of the first finalization the
// ledger records as sent again ([Day15.RetryFinalize]); ok is false when
// there is none.
func (d *Day15) Retry() (worker, key string, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, f := range d.finals {
		if f.retryOf != 0 {
			return f.worker, f.key, true
		}
	}
	return "", "", false
}

// RetriedRows is the rows the retries of [Day15.RetryFinalize] changed,
// and how many retries there were.
func (d *Day15) RetriedRows() (rows, retries int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, f := range d.finals {
		if f.retryOf != 0 {
			retries++
			if f.committed {
				rows++
			}
		}
	}
	return rows, retries
}

// RecordLoad notes what worker read with the plain load.
func (d *Day15) RecordLoad(worker string, msgs []store.Message) {
	keys := make([]string, len(msgs))
	for i, m := range msgs {
		keys[i] = m.AggregateKey
	}
	seq := d.Event(lab.KindNote, worker, "load", fmt.Sprintf("%d Pending messages: %s", len(msgs), strings.Join(keys, ", ")))
	d.mu.Lock()
	d.order++
	d.loads = append(d.loads, loadEntry{seq: seq, order: d.order, at: d.Now(), worker: worker, keys: keys})
	d.mu.Unlock()
}

// RecordClaim notes one claim attempt of worker in phase, at target ("next"
// or a key), and its outcome.
func (d *Day15) RecordClaim(worker, phase, target string, c store.Claim) {
	var detail string
	switch c.Outcome {
	case store.Claimed:
		detail = fmt.Sprintf("claimed message %d (%s), lease until %s", c.Message.ID, c.Message.AggregateKey, c.Message.LockedUntil)
	case store.Blocked:
		detail = fmt.Sprintf("message %d (%s) is Processing under %s's live lease until %s", c.Message.ID, c.Message.AggregateKey, c.HeldBy, c.HeldUntil)
	case store.Refused:
		detail = fmt.Sprintf("REFUSED although %s's lease on message %d (%s) ended at %s: the claim ignores expired leases (the design's fault)", c.HeldBy, c.Message.ID, c.Message.AggregateKey, c.HeldUntil)
	case store.Empty:
		detail = "nothing claimable"
	case store.Done:
		detail = fmt.Sprintf("message %d (%s) already Processed", c.Message.ID, c.Message.AggregateKey)
	case store.Lost:
		detail = "selected a message, but the UPDATE changed 0 rows"
	case store.Overreach:
		detail = fmt.Sprintf("the claim's UPDATE changed %s, not 1: rolled back, nothing claimed", lab.Rows(c.Rows))
	}
	if c.LockWaiters > 0 {
		detail += fmt.Sprintf("; %s waited for this claim's row lock", lab.Count(int64(c.LockWaiters), "other worker's claim", "other workers' claims"))
	}
	if c.Stats.BusyRetries > 0 {
		detail += fmt.Sprintf(" (after %d %s retries)", c.Stats.BusyRetries, d.engine.RetriedError())
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	e := lab.Event{Kind: d.claimKind(worker, c), Subject: c.Message.AggregateKey, Actor: worker, Action: "claim " + string(c.Outcome), Detail: detail}
	if c.Outcome == store.Overreach {
		e.Refusal = lab.RefusedByRowCount // rolled back: the claim changed more rows than one
	}
	if c.Outcome == store.Claimed {
		e.Until = c.Message.LockedUntil
	}
	if c.Outcome == store.Claimed || c.Outcome == store.Overreach {
		e.Rows = lab.RowsOf(c.Rows)
	}
	seq := d.Add(e)
	d.claims = append(d.claims, claimEntry{
		seq: seq, at: d.Now(), worker: worker, phase: phase, target: target, outcome: c.Outcome,
		id: c.Message.ID, key: c.Message.AggregateKey, until: c.Message.LockedUntil, heldBy: c.HeldBy, busy: c.Stats.BusyRetries,
		lockWaiters: c.LockWaiters,
	})
}

// claimKind is what claim c of worker was, from its outcome and, for a
// claim that took its message, the claim ledger: a claim that took a
// message under another worker's live lease, which that worker had not
// finalized, stole it. d.mu is held.
func (d *Day15) claimKind(worker string, c store.Claim) lab.Kind {
	switch c.Outcome {
	case store.Claimed:
		if holder, until, ok := d.holder(c.Message.ID); ok && holder != worker && until > d.Now() {
			return lab.KindSteal
		}
		return lab.KindClaim
	case store.Blocked, store.Lost:
		return lab.KindBlocked
	case store.Refused:
		return lab.KindRefused
	case store.Done:
		return lab.KindDone
	case store.Overreach:
		return lab.KindFenced
	}
	return lab.KindEmpty
}

// holder is the worker whose claim of message id the ledgers show last,
// and its lease end, unless that worker has finalized it since. d.mu is
// held.
func (d *Day15) holder(id int64) (worker, until string, ok bool) {
	seq := 0
	for _, c := range d.claims {
		if c.id == id && c.outcome == store.Claimed && c.seq > seq {
			seq, worker, until, ok = c.seq, c.worker, c.until, true
		}
	}
	for _, f := range d.finals {
		if ok && f.id == id && f.committed && f.worker == worker && f.seq > seq {
			return "", "", false
		}
	}
	return worker, until, ok
}

// ClaimLockWaits counts the claims that another worker was seen waiting on
// (PostgreSQL row locks; see [store.Outbox.WatchLockWaits]).
func (d *Day15) ClaimLockWaits() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, c := range d.claims {
		if c.lockWaiters > 0 {
			n++
		}
	}
	return n
}

// lastClaimer is the worker whose claim of message id the claims ledger
// shows last, finalized since or not. d.mu is held.
func (d *Day15) lastClaimer(id int64) (worker string, ok bool) {
	seq := 0
	for _, c := range d.claims {
		if c.id == id && c.outcome == store.Claimed && c.seq > seq {
			seq, worker, ok = c.seq, c.worker, true
		}
	}
	return worker, ok
}

// RecordFinal notes one finalization (committed) or its rejection. A
// committed finalization without the owner guard is stale when the claim
// ledger's last claim of the message is another worker's, whether that
// worker has finalized it since or still holds it; the owner-guarded
// statement's commit is the database's word that the worker owned it.
func (d *Day15) RecordFinal(worker string, id int64, key string, committed, guarded bool, busy int, refusal lab.Refusal, detail string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e := lab.Event{Kind: lab.KindFinalize, Subject: key, Actor: worker, Action: "finalize", Detail: detail, Rows: lab.RowsOf(1)}
	switch claimer, claimed := d.lastClaimer(id); {
	case !committed:
		e.Kind, e.Action, e.Rows, e.Refusal = lab.KindFenced, "finalize rejected", lab.RowsOf(0), refusal
	case !guarded && claimed && claimer != worker:
		e.Kind = lab.KindStale
	}
	seq := d.Add(e)
	d.finals = append(d.finals, finalEntry{seq: seq, at: d.Now(), worker: worker, id: id, key: key, committed: committed, guarded: guarded, busy: busy})
}

// ownerGuarded reports whether out finalizes with the lesson's
// owner-guarded statement ([store.FinalizeOwned]), whose WHERE clause
// names the finalizing worker as LockedBy.
func ownerGuarded(out Finalizer) bool {
	return out.Statements().Finalize.SQL == store.FinalizeOwned.SQL
}

// AttemptsByMessage lists the workers that processed each message, by id.
func (d *Day15) AttemptsByMessage() map[int64][]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	by := map[int64][]string{}
	for _, a := range d.attempts {
		by[a.id] = append(by[a.id], a.worker)
	}
	return by
}

// Loaded is how many messages worker's load returned.
func (d *Day15) Loaded(worker string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, l := range d.loads {
		if l.worker == worker {
			n = len(l.keys)
		}
	}
	return n
}

// LoadedBy is how many messages worker's last load returned, and whether
// the loads ledger holds a load of worker's at all.
func (d *Day15) LoadedBy(worker string) (n int, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, l := range d.loads {
		if l.worker == worker {
			n, ok = len(l.keys), true
		}
	}
	return n, ok
}

// LoadOrder is the workers of the loads ledger in the order their first
// loads finished.
func (d *Day15) LoadOrder() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	loads := slices.Clone(d.loads)
	slices.SortFunc(loads, func(a, b loadEntry) int { return a.order - b.order })
	var out []string
	for _, l := range loads {
		if !slices.Contains(out, l.worker) {
			out = append(out, l.worker)
		}
	}
	return out
}

// OwnershipViolations is Day 15's metric: finalizations that committed
// although the finalizing worker did not own the message then. A
// finalization with the owner-guarded statement that committed changed
// the row WHERE LockedBy named its worker, so the database itself said
// that worker owned it: it is never one (it changes 0 rows and rolls back
// instead). Any other committed finalization is one when the last
// successful claim before it in the ledgers was another worker's. The
// database's word is taken where there is one because the ledgers' order
// is the order the lab heard of each commit, which, between workers
// committing at nearly the same moment (child processes most of all), can
// differ from the order the database committed them.
func (d *Day15) OwnershipViolations() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	type event struct {
		seq    int
		worker string
		id     int64
		claim  bool
	}
	var events []event
	for _, c := range d.claims {
		if c.outcome == store.Claimed {
			events = append(events, event{c.seq, c.worker, c.id, true})
		}
	}
	for _, f := range d.finals {
		if f.committed && !f.guarded {
			events = append(events, event{f.seq, f.worker, f.id, false})
		}
	}
	SortBySeq(events, func(e event) int { return e.seq })
	owner := map[int64]string{}
	violations := 0
	for _, e := range events {
		switch {
		case e.claim:
			owner[e.id] = e.worker
		case owner[e.id] != "" && owner[e.id] != e.worker:
			violations++
		}
	}
	return violations
}

// ClaimsOfOwnedMessages counts successful claims that took a message
// another worker still owned (its lease live and not finalized) or that was
// already finalized: the claim-side failure a split claim shows. It is
// computed from the claim and finalization ledgers in order.
func (d *Day15) ClaimsOfOwnedMessages() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	type event struct {
		seq   int
		claim *claimEntry
		final *finalEntry
	}
	var events []event
	for i := range d.claims {
		if d.claims[i].outcome == store.Claimed {
			events = append(events, event{seq: d.claims[i].seq, claim: &d.claims[i]})
		}
	}
	for i := range d.finals {
		if d.finals[i].committed {
			events = append(events, event{seq: d.finals[i].seq, final: &d.finals[i]})
		}
	}
	SortBySeq(events, func(e event) int { return e.seq })
	type owner struct{ worker, until string }
	owners := map[int64]owner{}
	finalized := map[int64]bool{}
	violations := 0
	for _, e := range events {
		if e.final != nil {
			finalized[e.final.id] = true
			delete(owners, e.final.id)
			continue
		}
		c := e.claim
		if prev, ok := owners[c.id]; finalized[c.id] || ok && prev.worker != c.worker && c.at < prev.until {
			violations++
		}
		owners[c.id] = owner{worker: c.worker, until: c.until}
	}
	return violations
}

// DoubleClaim is the first message of phase that the claim ledger shows
// claimed by both workers: its payment, and the workers in the order their
// successful claims were recorded. ok is false when there is none.
func (d *Day15) DoubleClaim(phase string) (key, first, second string, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	claims := slices.Clone(d.claims)
	SortBySeq(claims, func(c claimEntry) int { return c.seq })
	firstBy := map[int64]string{}
	for _, c := range claims {
		if c.phase != phase || c.outcome != store.Claimed {
			continue
		}
		if prev, seen := firstBy[c.id]; seen && prev != c.worker {
			return c.key, prev, c.worker, true
		} else if !seen {
			firstBy[c.id] = c.worker
		}
	}
	return "", "", "", false
}

// ConcurrentClaims counts successful claims per worker in the concurrent phase.
func (d *Day15) ConcurrentClaims() (a, b int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.claims {
		if c.phase == "concurrent" && c.outcome == store.Claimed {
			switch c.worker {
			case WorkerA:
				a++
			case WorkerB:
				b++
			}
		}
	}
	return a, b
}

// FinalizationsOf counts the committed and the rejected finalizations of
// message id; a retry found done is neither.
func (d *Day15) FinalizationsOf(id int64) (committed, rejected int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, f := range d.finals {
		switch {
		case f.id != id:
		case f.committed:
			committed++
		case !f.done:
			rejected++
		}
	}
	return committed, rejected
}

// LoadedBeforeProcessing reports, from the ledgers' order, whether every
// named worker had finished its load before any worker began processing a
// message (before its provider call, not after it): what a barrier of all
// of them must guarantee.
func (d *Day15) LoadedBeforeProcessing(workers ...string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	lastLoad := map[string]int{}
	for _, l := range d.loads {
		lastLoad[l.worker] = max(lastLoad[l.worker], l.order)
	}
	firstAttempt := -1
	for _, a := range d.attempts {
		if firstAttempt < 0 || a.start < firstAttempt {
			firstAttempt = a.start
		}
	}
	for _, w := range workers {
		seq, ok := lastLoad[w]
		if !ok || firstAttempt >= 0 && seq > firstAttempt {
			return false
		}
	}
	return true
}

// SuccessfulClaims counts the claims that took a message, every phase.
func (d *Day15) SuccessfulClaims() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, c := range d.claims {
		if c.outcome == store.Claimed {
			n++
		}
	}
	return n
}

// Events is the run's timeline so far, for a run that builds its own
// report around Day 15's world (a relay challenge's).
func (d *Day15) Events() []lab.Event { return d.timeline.Events() }
