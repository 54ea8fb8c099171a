package scenarios

import (
	"context"
	"fmt"
	"time"

	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/store"
)

// The mistake variants of session-15-outbox-leasing.
const (
	variantPermanentLock  = "permanent-lock"
	variantUnguardedClaim = "unguarded-claim"
	variantPaidWithoutTxn = "paid-without-transaction"
	variantWorkerCreates  = "worker-creates-payment"
)

// leaseLength is the lease every Day 15 claim takes.
const leaseLength = 500 * time.Millisecond

var outboxLeasing = Scenario{
	Name:    "session-15-outbox-leasing",
	Session: "Session-15",
	FileTag: "OutboxLeasing",
	Title:   "Day 15 after: lease claims and owner-guarded finalization",
	Design:  lab.Safe,
	Teaches: "A message is claimed, not loaded: one BEGIN IMMEDIATE transaction selects the oldest claimable " +
		"message (Pending, or Processing with an expired lease) and updates it with the same predicate; the " +
		"claim holds only if exactly one row changed. Finalization updates the payment and marks the message " +
		"Processed only WHERE LockedBy = me, and rolls back otherwise. A crashed worker's lease expires on the " +
		"scenario clock and another worker recovers the message.",
	DoesNotSolve: "A lease is not a lock: a slow owner whose lease expires can still act after another worker " +
		"took over (the post-send ambiguity). LockedBy alone cannot tell the old owner's late write from the " +
		"new owner's when the same worker name comes back; fencing tokens (session 16) fix that.",
	Statements: []lab.Statement{
		{Name: "claim: select the oldest claimable", SQL: store.LeaseClaim.SelectNext},
		{Name: "claim: take it only if still claimable", SQL: store.LeaseClaim.Update},
		{Name: "finalize: only while I own it", SQL: store.FinalizeOwnedSQL},
		{Name: "finalize: apply the provider's outcome (same transaction)", SQL: store.ApplyPaymentOutcomeSQL},
	},
	Checks: []CheckDoc{
		{"processing_attempts", "6 processing attempts for 6 messages"},
		{"unique_messages", "6 distinct messages were processed"},
		{"processed_more_than_once", "no message was processed twice"},
		{"status_checks", "the provider saw 6 status checks"},
		{"ownership_violations", "no claim took a message another worker still owned, or one already processed"},
		{"paid", "4 payments Paid"},
		{"failed", "2 payments Failed"},
		{"outbox_processed", "6 messages Processed"},
		{"outbox_pending", "none left Pending"},
		{"outbox_processing", "none stuck in Processing"},
		{"duplicate_rows", "no duplicate payment or outbox rows"},
		{"worker_creation_calls", "workers never call the provider's create"},
		{"keys_not_created_exactly_once", "the provider created each key exactly once"},
		{"fake_successes", "no Paid payment without a transaction id, no Failed one with one"},
		{"recovery_ok", "Worker-B was blocked before expiry, reclaimed PAY-001 after it, and it was processed once"},
	},
	Variants: []Variant{
		{Name: variantPermanentLock, Mistake: "the claim ignores LockedUntilUtc, so a crashed worker's message is never recovered",
			Breaks: []string{"recovery_ok", "outbox_processed", "outbox_processing", "processing_attempts", "unique_messages", "status_checks", "paid"}},
		{Name: variantUnguardedClaim, Mistake: "SELECT, then UPDATE by Id alone in a second transaction; a barrier between them lets both workers take the same message",
			Breaks: []string{"processing_attempts", "processed_more_than_once", "status_checks", "ownership_violations", "recovery_ok"}},
		{Name: variantPaidWithoutTxn, Mistake: "the worker marks a payment Paid but drops the provider's transaction id",
			Breaks: []string{"fake_successes"}},
		{Name: variantWorkerCreates, Mistake: "the worker calls the provider's create payment again before checking its status",
			Breaks: []string{"worker_creation_calls", "keys_not_created_exactly_once"}},
	},
	AcceptsClaimSQL: true,
	Run:             runOutboxLeasing,
}

func runOutboxLeasing(ctx context.Context, env *Env) (*lab.Result, error) {
	d := newDay15(env.Variant)
	r := &lab.Result{}
	claimSQL := store.LeaseClaim
	switch env.Variant {
	case variantPermanentLock:
		claimSQL = store.ExpiryBlindClaim
	case variantUnguardedClaim:
		claimSQL = store.UnguardedClaim
	}
	if c := env.Options.Claim; c != nil {
		claimSQL = store.ClaimSQL{Name: "your claim from " + c.Source, SelectNext: c.Select, Update: c.Update}
	}
	r.Statements = []lab.Statement{
		{Name: "claim: select (" + claimSQL.Name + ")", SQL: claimSQL.SelectNext},
		{Name: "claim: update", SQL: claimSQL.Update},
		{Name: "finalize: only while I own it", SQL: store.FinalizeOwnedSQL},
		{Name: "finalize: apply the provider's outcome (same transaction)", SQL: store.ApplyPaymentOutcomeSQL},
	}

	setup, err := openWorker(ctx, env.DatabasePath())
	if err != nil {
		return nil, err
	}
	defer setup.Close()
	if err := setup.Migrate(ctx, store.PaymentsOutbox, store.OutboxLeasing); err != nil {
		return nil, err
	}
	if err := d.seed(ctx, setup); err != nil {
		return nil, err
	}

	rec, err := d.recoveryDemo(ctx, env, claimSQL)
	if err != nil {
		return nil, err
	}
	if err := d.concurrentPhase(ctx, env, claimSQL); err != nil {
		return nil, err
	}

	if err := d.audit(ctx, setup, r); err != nil {
		return nil, err
	}
	r.SetMetric("ownership_violations", float64(d.ownershipViolations()))
	by := d.attemptsByMessage()
	rec.processedOnce = len(by[rec.messageID]) == 1
	r.SetFlag("recovery_blocked_before_expiry", rec.blocked)
	r.SetFlag("recovery_reclaimed_after_expiry", rec.reclaimed)
	r.SetFlag("recovery_processed_once", rec.processedOnce)
	r.SetFlag("recovery_ok", rec.blocked && rec.reclaimed && rec.processedOnce)
	claimsA, claimsB := d.concurrentClaims()
	r.SetMetric("concurrent_claims_a", float64(claimsA))
	r.SetMetric("concurrent_claims_b", float64(claimsB))
	if err := d.finish(ctx, setup, r); err != nil {
		return nil, err
	}
	r.Tables = append(r.Tables, rec.table())

	want := map[string]float64{
		"processing_attempts": 6, "unique_messages": 6, "processed_more_than_once": 0, "status_checks": 6,
		"ownership_violations": 0, "paid": 4, "failed": 2, "outbox_processed": 6, "outbox_pending": 0,
		"outbox_processing": 0, "duplicate_rows": 0, "worker_creation_calls": 0, "keys_not_created_exactly_once": 0,
		"fake_successes": 0, "recovery_ok": 1,
	}
	expectDocumented(r, env.Scenario.Checks, want)

	m := metricsOf(r)
	if r.Passed() {
		r.Verdict = fmt.Sprintf("SAFE DESIGN held. %s processing attempts and %s status checks for %s messages, %s ownership violations; "+
			"the crashed worker's message was recovered after its lease expired and processed once. This run's split: Worker-A %s, Worker-B %s claims "+
			"in the concurrent phase (it varies; the invariants do not).",
			m("processing_attempts"), m("status_checks"), m("unique_messages"), m("ownership_violations"),
			m("concurrent_claims_a"), m("concurrent_claims_b"))
	} else if env.Options.Claim != nil {
		r.Verdict = fmt.Sprintf("YOUR CLAIM FAILED the lesson's invariants (from %s): failed checks %v. Compare the claim ledger and the recovery demo with the lesson's claim (`outboxlab describe %s`).",
			env.Options.Claim.Source, r.FailedChecks(), env.Scenario.Name)
	} else {
		r.Verdict = fmt.Sprintf("DESIGN BROKEN by the %q mistake: failed checks %v.", env.Variant, r.FailedChecks())
	}
	return r, nil
}

// recovery is what the recovery demo observed.
type recovery struct {
	messageID     int64
	blocked       bool // Worker-B's claim was refused while the lease was live
	reclaimed     bool // Worker-B claimed it after expiry
	processedOnce bool
	steps         []recoveryStep
}

type recoveryStep struct{ at, actor, step, observed string }

func (rec *recovery) add(at, actor, step, observed string) {
	rec.steps = append(rec.steps, recoveryStep{at, actor, step, observed})
}

func (rec *recovery) table() lab.Table {
	t := lab.Table{Title: "Recovery demo", Note: "Before the concurrent phase, on the scenario clock: a crashed owner's lease must expire before anyone else may take the message.",
		Columns: []string{"Clock", "Actor", "Step", "Observed"}}
	for _, s := range rec.steps {
		t.AddRow(s.at, s.actor, s.step, s.observed)
	}
	return t
}

// recoveryDemo plays the fixed timeline: A claims PAY-001 at 09:00:00.000Z
// with a 500 ms lease and crashes; B is blocked; at 09:00:00.600Z B reclaims
// PAY-001 and processes it.
func (d *day15) recoveryDemo(ctx context.Context, env *Env, claimSQL store.ClaimSQL) (*recovery, error) {
	rec := &recovery{}
	d.clk.Set(lessonStart)

	a, err := openWorker(ctx, env.DatabasePath())
	if err != nil {
		return nil, err
	}
	d.event(workerA, "start", "recovery demo: own connection")
	ca, err := a.ClaimNext(ctx, claimSQL, workerA, d.clk.Now(), leaseLength, nil)
	if err != nil {
		a.Close()
		return nil, err
	}
	d.recordClaim(workerA, "recovery", "next", ca)
	if ca.Outcome != store.Claimed {
		a.Close()
		return nil, fmt.Errorf("recovery demo: Worker-A's first claim was %s, want claimed", ca.Outcome)
	}
	rec.messageID = ca.Message.ID
	rec.add(d.now(), workerA, "claims "+ca.Message.AggregateKey+" for 500 ms", "lease until "+ca.Message.LockedUntil)

	// The crash: the process dies before processing. Its connection goes
	// with it; the row stays Processing with LockedBy Worker-A.
	if err := a.Close(); err != nil {
		return nil, err
	}
	d.event(workerA, "CRASH", "died before processing "+ca.Message.AggregateKey+"; connection and memory gone")
	rec.add(d.now(), workerA, "crashes before processing", "row stays Processing, LockedBy Worker-A")

	b, err := openWorker(ctx, env.DatabasePath())
	if err != nil {
		return nil, err
	}
	defer b.Close()
	d.event(workerB, "start", "recovery demo: own connection")
	cb, err := b.ClaimMessage(ctx, claimSQL, rec.messageID, workerB, d.clk.Now(), leaseLength)
	if err != nil {
		return nil, err
	}
	d.recordClaim(workerB, "recovery", ca.Message.AggregateKey, cb)
	rec.blocked = cb.Outcome == store.Blocked
	rec.add(d.now(), workerB, "tries to claim "+ca.Message.AggregateKey, claimObserved(cb))

	d.clk.Set(lessonStart.Add(600 * time.Millisecond))
	d.event("clock", "advance", "scenario clock moves to "+d.now()+"; Worker-A's lease has expired")
	cb, err = b.ClaimMessage(ctx, claimSQL, rec.messageID, workerB, d.clk.Now(), leaseLength)
	if err != nil {
		return nil, err
	}
	d.recordClaim(workerB, "recovery", ca.Message.AggregateKey, cb)
	rec.reclaimed = cb.Outcome == store.Claimed
	rec.add(d.now(), workerB, "claims "+ca.Message.AggregateKey+" again", claimObserved(cb))
	if rec.reclaimed {
		if err := d.processAndFinalize(ctx, b, workerB, cb.Message); err != nil {
			return nil, err
		}
		rec.add(d.now(), workerB, "processes and finalizes "+ca.Message.AggregateKey, "see the ledgers")
	}
	return rec, nil
}

func claimObserved(c store.Claim) string {
	switch c.Outcome {
	case store.Blocked:
		return fmt.Sprintf("blocked: %s holds a live lease until %s", c.HeldBy, c.HeldUntil)
	case store.Claimed:
		return "claimed, lease until " + c.Message.LockedUntil
	default:
		return string(c.Outcome)
	}
}

// processAndFinalize does the work for a claimed message and finalizes it
// under the ownership guard.
func (d *day15) processAndFinalize(ctx context.Context, db *store.DB, worker string, m store.Message) error {
	o := d.process(worker, m.ID, m.AggregateKey)
	f, err := db.FinalizeOwned(ctx, m.ID, worker, o, d.clk.Now())
	if err != nil {
		return err
	}
	detail := fmt.Sprintf("message %d (%s) Processed WHERE LockedBy = %s; payment set %s", m.ID, m.AggregateKey, worker, o.Status)
	if !f.Finalized {
		detail = fmt.Sprintf("message %d (%s): guard changed 0 rows, %s no longer owns it; rolled back", m.ID, m.AggregateKey, worker)
	}
	d.recordFinal(worker, m.ID, m.AggregateKey, f.Finalized, f.Stats.BusyRetries, detail)
	return nil
}

// concurrentPhase runs both workers, each on its own connection, looping
// claim, process, finalize until nothing is claimable. Worker-A is a fresh
// instance after its crash.
func (d *day15) concurrentPhase(ctx context.Context, env *Env, claimSQL store.ClaimSQL) error {
	var barrier *Barrier
	if claimSQL.Split {
		// The mistake's window made deterministic: both workers have
		// selected before either updates.
		barrier = NewBarrier(2)
	}
	d.concurrent = true
	d.event("scenario", "concurrent phase", "Worker-A (restarted) and Worker-B loop claim, process, finalize until nothing is claimable")
	return runConcurrently(ctx, []string{workerA, workerB}, func(ctx context.Context, worker string) error {
		db, err := openWorker(ctx, env.DatabasePath())
		if err != nil {
			return err
		}
		defer db.Close()
		if barrier != nil {
			defer barrier.Leave()
		}
		var between func()
		if barrier != nil {
			between = func() { _ = barrier.Wait(ctx) }
		}
		for ctx.Err() == nil {
			c, err := db.ClaimNext(ctx, claimSQL, worker, d.clk.Now(), leaseLength, between)
			if err != nil {
				return err
			}
			d.recordClaim(worker, "concurrent", "next", c)
			switch c.Outcome {
			case store.Empty:
				return nil
			case store.Claimed:
				if err := d.processAndFinalize(ctx, db, worker, c.Message); err != nil {
					return err
				}
			}
		}
		return ctx.Err()
	})
}

// ownershipViolations counts successful claims that took a message another
// worker still owned (its lease live and not finalized) or that was already
// finalized. It is computed from the claim and finalization ledgers in order.
func (d *day15) ownershipViolations() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	type owner struct {
		worker, until string
	}
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
	sortBySeq(events, func(e event) int { return e.seq })
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

// concurrentClaims counts successful claims per worker in the concurrent phase.
func (d *day15) concurrentClaims() (a, b int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.claims {
		if c.phase == "concurrent" && c.outcome == store.Claimed {
			switch c.worker {
			case workerA:
				a++
			case workerB:
				b++
			}
		}
	}
	return a, b
}
