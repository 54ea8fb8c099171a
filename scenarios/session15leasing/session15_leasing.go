// Package session15leasing is the lesson session-15-outbox-leasing: its
// Lesson (the sequence, the checks, the variants and what the registry's
// tests read to prove it), the stages and actors only it uses, its proofs
// (proofs.go) and its tests.
package session15leasing

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/failpoint"
	"github.com/outboxlab/outboxlab/instance"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/store"
)

// The mistake variants of session-15-outbox-leasing.
const (
	variantPermanentLock  = "permanent-lock"
	variantUnguardedClaim = "unguarded-claim"
	variantPaidWithoutTxn = "paid-without-transaction"
	variantWorkerCreates  = "worker-creates-payment"

	// PostgreSQL's mistakes, made on its row locks under READ COMMITTED.
	variantForUpdateWaits      = "for-update-without-skip-locked"
	variantReadCommittedUpdate = "select-then-update-read-committed"
)

// lockWatch is how long a claim, on PostgreSQL, keeps its transaction open
// looking for another worker waiting on its row lock: every claim of the
// concurrent phase does, lesson and variants alike, so the waits a claim
// without SKIP LOCKED causes are seen in pg_stat_activity, not guessed.
const lockWatch = 250 * time.Millisecond

// claimBound is the most claim attempts the concurrent phase may make: 8
// per seeded message. The lesson's claim needs about one each.
const claimBound = 8 * 6

// leaseLength is the lease every Day 15 claim takes.
const leaseLength = 500 * time.Millisecond

// Lesson is session-15-outbox-leasing, as the registry lists it: "Day 15
// after: lease claims and owner-guarded finalization".
var Lesson = lesson.Scenario{
	Name:    "session-15-outbox-leasing",
	Session: "Session-15",
	FileTag: "Outbox-Leasing",
	Title:   "Day 15 after: lease claims and owner-guarded finalization",
	Design:  lab.Safe,
	Figures: map[string]float64{
		"processing_attempts": 6, "unique_messages": 6, "processed_more_than_once": 0, "status_checks": 6,
		"ownership_violations": 0, "paid": 4, "failed": 2, "outbox_processed": 6, "outbox_pending": 0,
		"outbox_processing": 0, "duplicate_rows": 0, "worker_creation_calls": 0, "fake_successes": 0, "recovery_ok": 1,
	},
	Teaches: "A message is claimed, not loaded: one BEGIN IMMEDIATE transaction selects the oldest claimable " +
		"message (Pending, or Processing with an expired lease) and updates it with the same predicate; the " +
		"claim holds only if exactly one row changed. Finalization updates the payment and marks the message " +
		"Processed only WHERE LockedBy = me, and rolls back otherwise. A crashed worker's lease expires on the " +
		"scenario clock and another worker recovers the message.",
	OnPostgres: "On PostgreSQL, whose transactions run at READ COMMITTED and take no database-wide write lock, the " +
		"claim's SELECT takes the row's lock and skips rows another claim holds (FOR UPDATE SKIP LOCKED), in the " +
		"transaction of the UPDATE; production claims do the same in one statement (`outboxlab describe` shows it).",
	DoesNotSolve: "A lease is not a lock: a slow owner whose lease expires can still act after another worker " +
		"took over (the post-send ambiguity). LockedBy alone cannot tell the old owner's late write from the " +
		"new owner's when the same worker name comes back; fencing tokens (session 16) fix that.",
	Statements: []store.Stmt{
		store.ClaimSelectNext,
		store.ClaimUpdate,
		store.FinalizeOwned,
		store.ApplyPaymentOutcome,
		store.ProductionClaim,
	},
	Set: store.OutboxLesson,
	Checks: []lesson.CheckDoc{
		{Name: "processing_attempts", About: "processing attempts in the ledger, the recovered message's included"},
		{Name: "unique_messages", About: "distinct messages processed"},
		{Name: "processed_more_than_once", About: "messages processed more than once"},
		{Name: "status_checks", About: "status checks the provider recorded"},
		{Name: "ownership_violations", About: "finalizations committed by a worker that no longer owned the message (the lesson's ownership violations)"},
		{Name: "claims_of_owned_messages", About: "claims that took a message another worker still owned, or one already processed"},
		{Name: "paid", About: "payments Paid"},
		{Name: "failed", About: "payments Failed"},
		{Name: "outbox_processed", About: "messages Processed"},
		{Name: "outbox_pending", About: "messages left Pending"},
		{Name: "outbox_processing", About: "messages stuck in Processing"},
		{Name: "duplicate_rows", About: "duplicate payment or outbox rows"},
		{Name: "worker_creation_calls", About: "calls of the provider's create made by a worker"},
		{Name: "keys_not_created_exactly_once", About: "keys the provider did not create exactly once"},
		{Name: "fake_successes", About: "payments whose transaction id is not the one the provider assigned to their key (a Paid payment without it, or another payment with one)"},
		{Name: "recovery_ok", About: "the recovery of {@recovered_payment}, claimed by {@crashed_owner} for {lease} before it crashed: " +
			"{@recoverer}'s claim blocked while that lease was live and granted once it had expired, and the message then processed once"},
		{Name: "claims_bounded", About: "the workers drained the backlog within the claim bound ({claim_bound})"},
		{Name: "claim_lock_waits", Engine: store.Postgres, Measure: true,
			About: "claims of the concurrent phase that made another worker's claim wait for their row lock (seen by the holder in pg_stat_activity)"},
	},
	Variants: []lesson.Variant{
		{Name: variantPermanentLock, Golden: true, Mistake: "the claim ignores LockedUntilUtc, so a crashed worker's message is never recovered",
			Swaps:  []store.Stmt{store.ClaimSelectPendingOnly, store.ClaimUpdatePendingOnly},
			Breaks: []string{"recovery_ok", "outbox_processed", "outbox_processing", "processing_attempts", "unique_messages", "status_checks", "paid"},
			Shows: "After {@crashed_owner} crashes holding {@recovered_payment} and its lease has expired, {@recoverer}'s " +
				"claim still skips the Processing row, so {@recovered_payment} stays Processing for good and is never checked at the provider " +
				"({unique_messages} messages processed, {paid} payments Paid, {outbox_processing} left Processing). " +
				"A lease must end: a claim has to treat a Processing row " +
				"whose lease has expired as claimable, or one crash locks a message forever."},
		{Name: variantUnguardedClaim, Mistake: "SELECT, then UPDATE by Id alone in a second transaction; a barrier between them lets both workers take the same message",
			Swaps:  []store.Stmt{store.ClaimSelectOwnTx, store.ClaimUpdateByID},
			Breaks: []string{"processing_attempts", "processed_more_than_once", "status_checks", "claims_of_owned_messages", "recovery_ok"},
			Shows: "With a take-over that no longer re-checks the row, a worker takes a message another worker holds: " +
				"{@live_lease_taker} takes {@recovered_payment} while {@crashed_owner}'s lease is live, and in the concurrent phase " +
				"{@second_double_claimer} claims {@double_claimed_payment} after {@first_double_claimer} had, so both process it " +
				"({processing_attempts} attempts and {status_checks} provider status checks for " +
				"{unique_messages} messages). A claim " +
				"must check and take in one transaction that changes exactly one row. The owner guard at finalization " +
				"still decides who finalizes ({ownership_violations} ownership violations, {outbox_processed} messages " +
				"Processed), so the duplicated work shows in the ledgers, not in the final rows."},
		{Name: variantPaidWithoutTxn, Changes: "the worker's code: it stores the provider's Paid answer without its transaction id", Mistake: "the worker marks a payment Paid but drops the provider's transaction id",
			Breaks: []string{"fake_successes"},
			Shows: "The payments the provider answered Paid end with no TransactionId (fake successes: {fake_successes}), so the " +
				"database records money as received with nothing that ties it to the provider's record. The outbox's " +
				"figures do not show it ({outbox_processed} messages Processed, {processed_more_than_once} processed " +
				"more than once): only this check, which compares each payment with the provider's record, notices. A " +
				"Paid payment must carry the id the provider assigned for its key."},
		{Name: variantWorkerCreates, Changes: "the worker's code: it calls the provider's create payment before its status check", Mistake: "the worker calls the provider's create payment again before checking its status",
			Breaks: []string{"worker_creation_calls", "keys_not_created_exactly_once"},
			Shows: "Each worker calls the provider's create before its status check, so keys are created at checkout and " +
				"again by a worker ({worker_creation_calls} worker creation calls, {keys_not_created_exactly_once} keys not " +
				"created exactly once); with a real provider that is a second " +
				"charge. Creation happens exactly once per key, at checkout; a worker only asks for the status of " +
				"what checkout created."},
		{Name: variantForUpdateWaits, Engine: store.Postgres,
			Mistake: "the claim's SELECT takes the row lock with FOR UPDATE but without SKIP LOCKED",
			Swaps:   []store.Stmt{store.ClaimSelectForUpdate},
			Breaks:  []string{"claim_lock_waits"},
			Shows: "Correct, but the workers queue: each claim keeps its transaction open until it sees the other worker " +
				"wait for its row lock, and with FOR UPDATE alone the other worker's claim does wait, on the same oldest " +
				"row, until the first claim commits; only then does PostgreSQL re-check the row, find it taken and move to " +
				"the next. The invariants' checks read as the lesson's ({processing_attempts} processing attempts for " +
				"{unique_messages} messages); the cost is {claim_lock_waits} claims that made another worker's claim wait, " +
				"so claims run one after another. SKIP LOCKED lets the waiting claim take the next message at once."},
		{Name: variantReadCommittedUpdate, Engine: store.Postgres,
			Mistake: "the claim's SELECT takes no row lock and its UPDATE changes the row by Id alone, trusting the read, in one READ COMMITTED transaction",
			Swaps:   []store.Stmt{store.ClaimSelectNoLock, store.ClaimUpdateTrustingRead},
			Breaks:  []string{"processing_attempts", "processed_more_than_once", "status_checks", "claims_of_owned_messages", "recovery_ok"},
			Shows: "One transaction is not enough on PostgreSQL: at READ COMMITTED a plain SELECT takes no lock, so both " +
				"workers read the same oldest message (a barrier holds each after its select until both have read). " +
				"{@first_double_claimer}'s UPDATE takes {@double_claimed_payment}; {@second_double_claimer}'s UPDATE " +
				"waits for that commit, then, with no claimable predicate to re-check, takes it too: a double claim, and " +
				"both process the message ({claims_of_owned_messages} claims of a message another worker owned, " +
				"{processing_attempts} processing attempts for {unique_messages} messages). The lesson's claim locks the " +
				"row it selects (FOR UPDATE SKIP LOCKED) and repeats the predicate in the UPDATE."},
	},
	Settings: func(lesson.Options) map[string]string {
		return map[string]string{"lease": leaseLength.String(), "claim_bound": fmt.Sprintf("%d claim attempts", claimBound)}
	},
	Breakers:  breakers(),
	Guards:    guards(),
	Processes: processes,
	Run:       runOutboxLeasing,
}

// leasingMistakes are the worker's own mistakes of each variant.
func leasingMistakes(variant string) cast.Day15Mistakes {
	return cast.Day15Mistakes{CreatesPayment: variant == variantWorkerCreates, DropsTransactionID: variant == variantPaidWithoutTxn}
}

func runOutboxLeasing(ctx context.Context, env *lesson.Env) (*lab.Result, error) {
	d := cast.NewDay15(leasingMistakes(env.Variant))
	d.ClaimBound = claimBound
	r := &lab.Result{}
	statements := lesson.StatementSet(env, store.OutboxLesson)

	setup, err := d.Setup(ctx, env.Open, env.DatabasePath(), store.PaymentsOutbox, store.OutboxLeasing)
	if err != nil {
		return nil, err
	}
	defer setup.Close()

	rec, err := recoveryDemo(ctx, d, env, statements)
	if err != nil {
		return nil, err
	}
	if err := concurrentPhase(ctx, d, env, statements, env.Is(variantReadCommittedUpdate)); err != nil {
		return nil, err
	}
	r.SetFlag("claims_bounded", !d.ClaimBoundReached())

	if err := d.Audit(ctx, setup, r); err != nil {
		return nil, err
	}
	r.SetMetric("ownership_violations", float64(d.OwnershipViolations()))
	r.SetMetric("claims_of_owned_messages", float64(d.ClaimsOfOwnedMessages()))
	r.SetMetric("successful_claims", float64(d.SuccessfulClaims()))
	rec.processedOnce = len(d.AttemptsByMessage()[rec.messageID]) == 1
	r.SetFlag("recovery_blocked_before_expiry", rec.blocked)
	r.SetFlag("recovery_reclaimed_after_expiry", rec.reclaimed)
	r.SetFlag("recovery_processed_once", rec.processedOnce)
	r.SetFlag("recovery_ok", rec.blocked && rec.reclaimed && rec.processedOnce)
	rec.cast(r)
	castDoubleClaim(d, r)
	claimsA, claimsB := d.ConcurrentClaims()
	r.SetMetric("concurrent_claims_a", float64(claimsA))
	r.SetMetric("concurrent_claims_b", float64(claimsB))
	want := map[string]float64{
		"processing_attempts": 6, "unique_messages": 6, "processed_more_than_once": 0, "status_checks": 6,
		"ownership_violations": 0, "claims_of_owned_messages": 0, "paid": 4, "failed": 2, "outbox_processed": 6, "outbox_pending": 0,
		"outbox_processing": 0, "duplicate_rows": 0, "worker_creation_calls": 0, "keys_not_created_exactly_once": 0,
		"fake_successes": 0, "recovery_ok": 1, "claims_bounded": 1,
	}
	if env.Engine() == store.Postgres {
		r.SetMetric("claim_lock_waits", float64(d.ClaimLockWaits()))
		want["claim_lock_waits"] = 0
	}
	if err := d.Finish(ctx, setup, r); err != nil {
		return nil, err
	}
	r.Tables = append(r.Tables, rec.table())

	lesson.ExpectDocumented(r, env.Scenario.Checks, want)
	r.Verdict = leasingVerdict(env, r)
	return r, nil
}

// leasingVerdict says what the run showed.
func leasingVerdict(env *lesson.Env, r *lab.Result) string {
	m := lesson.MetricsOf(r)
	switch {
	case r.Passed():
		return r.Fill(fmt.Sprintf("SAFE DESIGN held. %s processing attempts and %s status checks for %s messages, %s ownership violations; "+
			"{@crashed_owner} crashed holding {@recovered_payment}, and {@recoverer} recovered it after its lease expired; it was processed once. "+
			"Messages processed in this run, the recovered "+
			"one included: Worker-A %s, Worker-B %s (the split varies; the invariants do not).",
			m("processing_attempts"), m("status_checks"), m("unique_messages"), m("ownership_violations"),
			m("processed_by_a"), m("processed_by_b")))
	case env.Variant != "":
		return "" // lesson.Execute opens a variant's verdict with what its checks measured
	default:
		return fmt.Sprintf("THE DESIGN DID NOT HOLD in this run, as designed, without a mistake: failed checks %s. Read the claim ledger and the recovery demo.", strings.Join(r.FailedChecks(), ", "))
	}
}

// recovery is what the recovery demo observed.
type recovery struct {
	messageID int64
	key       string // the message's payment
	owner     string // LockedBy as the crashed worker's claim read it back
	recoverer string // the worker whose claims tried to take the message over
	// liveTaker is LockedBy as the recoverer's first claim read it back,
	// when that claim took the message while the owner's lease was live.
	liveTaker     string
	blocked       bool // Worker-B's claim was refused while the lease was live
	reclaimed     bool // Worker-B claimed it after expiry
	processedOnce bool
	steps         []recoveryStep
}

type recoveryStep struct{ at, actor, step, observed string }

// cast records who played the recovery demo's roles, as its claims read
// them back: the crashed owner, the worker that tried to take the message
// over (and took it while the lease was live, if it did), and the
// message's payment.
func (rec *recovery) cast(r *lab.Result) {
	roles := map[string]string{"crashed_owner": rec.owner, "recoverer": rec.recoverer, "recovered_payment": rec.key, "live_lease_taker": rec.liveTaker}
	for role, who := range roles {
		if who != "" {
			r.SetCast(role, who)
		}
	}
}

// castDoubleClaim casts, from the claim ledger, the first message of the
// concurrent phase that both workers claimed and the workers in the order
// their claims were recorded (none when no message was claimed twice).
func castDoubleClaim(d *cast.Day15, r *lab.Result) {
	key, first, second, ok := d.DoubleClaim("concurrent")
	if !ok {
		return
	}
	r.SetCast("double_claimed_payment", key)
	r.SetCast("first_double_claimer", first)
	r.SetCast("second_double_claimer", second)
}

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
func recoveryDemo(ctx context.Context, d *cast.Day15, env *lesson.Env, statements store.OutboxSQL) (*recovery, error) {
	rec := &recovery{}
	d.Clock.Set(cast.LessonStart)

	// Worker-A: its crash, once its claim has returned, closes its
	// connection, or kills its child process with SIGKILL.
	a, err := env.Instances.Outbox(ctx, env.DatabasePath(), "recovery", cast.WorkerA, statements, 0)
	if err != nil {
		return nil, err
	}
	d.Event(lab.KindNote, cast.WorkerA, "start", "recovery demo: own connection")
	now := d.Clock.Now()
	ca, err := a.ClaimNext(ctx, now, store.OutboxLeaseFor(cast.WorkerA, now, leaseLength), nil)
	if err != nil {
		return nil, errors.Join(err, a.Close(ctx))
	}
	d.RecordClaim(cast.WorkerA, "recovery", "next", ca)
	if ca.Outcome != store.Claimed {
		// A claim that cannot take the oldest message fails the demo's
		// check (recovery_ok), not the run.
		rec.add(d.Now(), cast.WorkerA, "tries to claim the oldest message", claimObserved(ca)+": the demo cannot go on")
		return rec, a.Close(ctx)
	}
	rec.messageID = ca.Message.ID
	key := ca.Message.AggregateKey
	rec.key, rec.owner = key, ca.Message.LockedBy
	rec.add(d.Now(), cast.WorkerA, "claims "+key+" for "+leaseLength.String(), "lease until "+ca.Message.LockedUntil)

	// The crash: the process dies before processing; its connection and
	// memory go with it.
	death, err := a.Crash(ctx, failpoint.AfterClaim)
	if err != nil {
		return nil, err
	}
	crashed := "died before processing " + key + "; connection and memory gone"
	if death != "" {
		crashed = fmt.Sprintf("died before processing %s: %s; its claim had committed, so the row stays Processing, LockedBy %s", key, death, rec.owner)
	}
	d.Add(lab.Event{Kind: lab.KindCrash, Subject: key, Actor: cast.WorkerA, Action: "CRASH", Detail: crashed})
	rec.add(d.Now(), cast.WorkerA, "crashes before processing", "row stays Processing, LockedBy "+rec.owner)

	outB, err := env.Instances.Outbox(ctx, env.DatabasePath(), "recovery", cast.WorkerB, statements, 0)
	if err != nil {
		return nil, err
	}
	var workers instance.Set
	defer workers.Close(ctx)
	workers.Add(outB)
	d.Event(lab.KindNote, cast.WorkerB, "start", "recovery demo: own connection")
	now = d.Clock.Now()
	cb, err := outB.ClaimMessage(ctx, rec.messageID, now, store.OutboxLeaseFor(cast.WorkerB, now, leaseLength))
	if err != nil {
		return nil, err
	}
	d.RecordClaim(cast.WorkerB, "recovery", key, cb)
	rec.recoverer = cast.WorkerB
	rec.blocked = cb.Outcome == store.Blocked
	if cb.Outcome == store.Claimed {
		rec.liveTaker = cb.Message.LockedBy
	}
	rec.add(d.Now(), cast.WorkerB, "tries to claim "+key, claimObserved(cb))

	d.Clock.Set(cast.LessonStart.Add(600 * time.Millisecond))
	if cb.Outcome == store.Claimed {
		// Worker-B's first claim took the message (a mistake's): no lease of
		// Worker-A's is left to expire.
		d.Event(lab.KindNote, "clock", "advance", "scenario clock moves to "+d.Now()+"; "+rec.owner+"'s lease would have ended by now, "+
			"but "+rec.liveTaker+"'s claim took "+key+" while it was live")
	} else {
		d.Add(lab.Event{Kind: lab.KindExpiry, Subject: key, Actor: "clock", Action: "advance", Detail: "scenario clock moves to " + d.Now() + "; " + rec.owner + "'s lease has expired"})
	}
	now = d.Clock.Now()
	cb, err = outB.ClaimMessage(ctx, rec.messageID, now, store.OutboxLeaseFor(cast.WorkerB, now, leaseLength))
	if err != nil {
		return nil, err
	}
	d.RecordClaim(cast.WorkerB, "recovery", key, cb)
	rec.reclaimed = cb.Outcome == store.Claimed
	if rec.reclaimed {
		rec.recoverer = cb.Message.LockedBy
	}
	rec.add(d.Now(), cast.WorkerB, "claims "+key+" again", claimObserved(cb))
	if rec.reclaimed {
		if err := d.ProcessAndFinalize(ctx, outB, cast.WorkerB, cb.Message); err != nil {
			return nil, err
		}
		rec.add(d.Now(), cast.WorkerB, "processes and finalizes "+key, "see the ledgers")
	}
	return rec, workers.Close(ctx)
}

func claimObserved(c store.Claim) string {
	switch c.Outcome {
	case store.Blocked:
		return fmt.Sprintf("blocked: %s holds a live lease until %s", c.HeldBy, c.HeldUntil)
	case store.Refused:
		return fmt.Sprintf("REFUSED although %s's lease ended at %s: the claim statement ignores expired leases, so a crashed worker's message is never recovered (the design's fault)", c.HeldBy, c.HeldUntil)
	case store.Empty:
		return "nothing claimable"
	case store.Claimed:
		return "claimed, lease until " + c.Message.LockedUntil
	default:
		return string(c.Outcome)
	}
}

// concurrentPhase runs both workers, each on its own connection, looping
// claim, process, finalize until nothing is claimable. Worker-A is a fresh
// instance after its crash. On PostgreSQL every claim watches for workers
// waiting on its row lock ([lockWatch]). With readWindow (PostgreSQL's
// read-committed mistake) a barrier holds each claim after its select, in
// its transaction, until both have read.
func concurrentPhase(ctx context.Context, d *cast.Day15, env *lesson.Env, statements store.OutboxSQL, readWindow bool) error {
	var barrier *cast.Barrier
	// A claim in one statement on PostgreSQL (a student's or an
	// engineer's file) holds its transaction after its statement until the
	// other worker's claim has run too: with SKIP LOCKED that one takes
	// the next message; without it, it waits on this one's row lock and
	// never arrives, so this one waits only for the lock watch, commits,
	// and the other's UPDATE, re-checked, takes the same message.
	oneStatement := statements.Claim.OneStatement() && env.Engine() == store.Postgres
	if statements.Claim.Split() || readWindow || oneStatement {
		// The mistake's window made deterministic: both workers have
		// selected before either updates.
		barrier = cast.NewBarrier(2)
	}
	d.Concurrent = true
	d.Event(lab.KindNote, "scenario", "concurrent phase", "Worker-A (restarted) and Worker-B loop claim, process, finalize until nothing is claimable")
	// Both instances are up before either claims: a child process takes
	// longer to start than a claim takes to run.
	started := cast.NewBarrier(2)
	return cast.RunConcurrently(ctx, []string{cast.WorkerA, cast.WorkerB}, func(ctx context.Context, worker string) error {
		out, err := env.Instances.Outbox(ctx, env.DatabasePath(), "concurrent", worker, statements, lockWatch)
		if err != nil {
			started.Leave()
			return err
		}
		if err := started.Wait(ctx); err != nil {
			return errors.Join(err, out.Close(ctx))
		}
		var between func()
		if barrier != nil {
			defer barrier.Leave()
			between = func() { _ = barrier.Wait(ctx) }
		}
		if oneStatement {
			between = func() {
				wait, cancel := context.WithTimeout(ctx, lockWatch)
				defer cancel()
				_ = barrier.Wait(wait)
			}
		}
		workErr := d.WorkLeased(ctx, out, worker, leaseLength, between)
		return errors.Join(workErr, out.Close(ctx))
	})
}
