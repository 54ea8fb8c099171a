// Package session15latefinalize is the lesson session-15-late-finalize: its
// Lesson (the sequence, the checks, the variants and what the registry's
// tests read to prove it), the stages and actors only it uses, its proofs
// (proofs.go) and its tests.
package session15latefinalize

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/instance"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/store"
)

// variantFinalizeWithoutOwnerGuard is session-15-late-finalize's mistake.
const variantFinalizeWithoutOwnerGuard = "finalize-without-owner-guard"

// The late-finalize timeline on the scenario clock. Part 1: Worker-A's
// lease on PAY-001 ends at .500; Worker-B reclaims at exactly that instant
// (the lab's boundary: a lease that ends at t is over at t), finalizes at
// .550, and the stalled Worker-A wakes at .700. Part 2: Worker-A claims
// PAY-002 at .800 and stalls; Worker-B reclaims at its lease end, 1.300,
// and is still working on it when Worker-A wakes at 1.400; Worker-B
// finalizes at 1.450 and, at 1.500, sends that finalize again, as its
// retry policy would had the reply to its COMMIT been lost.
const (
	lateLease      = 500 * time.Millisecond
	lateOwnerFinal = 550 * time.Millisecond
	lateWake       = 700 * time.Millisecond
	heldClaim      = 800 * time.Millisecond
	heldWake       = 1400 * time.Millisecond
	heldOwnerFinal = 1450 * time.Millisecond
	heldRetry      = 1500 * time.Millisecond
)

// Lesson is session-15-late-finalize, as the registry lists it: "Day 15: the
// guard that finalization needs (a worker that outlives its lease)".
var Lesson = lesson.Scenario{
	Name:    "session-15-late-finalize",
	Session: "Session-15",
	FileTag: "Late-Finalize",
	Title:   "Day 15: the guard that finalization needs (a worker that outlives its lease)",
	Design:  lab.Safe,
	Figures: map[string]float64{"rejected_finalizations": 1, "ownership_violations": 0, "processing_attempts": 2},
	Teaches: "Day 15's owner-guarded finalization only matters when a worker outlives its lease. First part: a " +
		"worker claims the oldest message with a {lease} lease and stalls (alive, not crashed). At exactly the lease " +
		"end the other worker reclaims it, checks the provider and finalizes: its guard WHERE LockedBy = its own name " +
		"changes the row and commits. The stalled worker wakes, checks the provider too, and its finalize WHERE " +
		"LockedBy = its own name changes no row and rolls back, so the payment keeps the owner's outcome. The message " +
		"was still worked on by both: a lease bounds duplicate work, it does not prevent it. In the first part the row " +
		"is already Processed, so Status = 'Processing' refuses the stalled worker as well; the second part shows the " +
		"owner guard deciding alone: the stalled worker claims the next message and stalls, the other reclaims it at " +
		"the lease end, and the stalled worker wakes while the new owner still holds it (Processing, LockedBy the " +
		"owner): only LockedBy = :worker refuses the stalled worker's finalize, and the owner's commits after it. " +
		"Last, the lab sends the owner's finalize again, as a client's retry policy does when the reply to its COMMIT " +
		"is lost: the row is Processed under the owner already, so only Status = 'Processing' refuses the retry (no " +
		"row changed, rolled back), and the owner, reading the row back (its own name, its first finalize's " +
		"ProcessedAtUtc), counts the retry as done, not fenced. Without that guard the retry changes the row again " +
		"and re-stamps ProcessedAtUtc and the payment.",
	DoesNotSolve: "The stalled worker still did the work (a second provider status check; with a side effect, a " +
		"second side effect). And LockedBy names a worker, not a claim: if the stalled worker itself had reclaimed the " +
		"message, its stale finalize would pass the guard. Session 16's fencing token, incremented by every " +
		"claim, tells the two claims apart.",
	Statements: []store.Stmt{
		store.ClaimSelectNext,
		store.ClaimUpdate,
		store.FinalizeOwned,
		store.ApplyPaymentOutcome,
	},
	Set: store.OutboxLesson,
	Checks: []lesson.CheckDoc{
		{Name: "rejected_finalizations", About: "first part: finalizations of {@late_payment} rolled back for changing no row " +
			"({@stalled_worker} woke after its lease ended, once {@owner} had reclaimed it)"},
		{Name: "ownership_violations", About: "finalizations committed by a worker that no longer owned the message, in either part"},
		{Name: "owner_result_kept", About: "each message's ProcessedAtUtc is its owner's finalization, not the stalled worker's"},
		{Name: "rejected_while_owner_holds", About: "second part: {@held_stalled_worker}'s finalization of {@held_payment}, " +
			"made while {@held_owner} held it (Processing, LockedBy {@held_owner}), refused by LockedBy = :worker alone"},
		{Name: "retried_finalize_rows", About: "rows changed by {@retrier}'s finalize of {@retried_payment} sent again, " +
			"under the same name, after it had committed"},
	},
	Facts: []lesson.FactDoc{
		{Name: "processing_attempts", About: "first part: provider checks of the reclaimed message, by both workers",
			Why: "the script has the reclaiming worker check the provider once it has reclaimed the message, and the " +
				"stalled worker when it wakes, whatever became of its lease: a lease bounds duplicate work, it does not " +
				"prevent it"},
		{Name: "held_processing_attempts", About: "second part: provider checks of the message the owner held, by both workers",
			Why: "the script has the reclaiming worker check the provider once it has reclaimed the message, and the " +
				"stalled worker when it wakes, before either finalizes"},
	},
	Variants: []lesson.Variant{
		{Name: variantFinalizeWithoutOwnerGuard, Swaps: []store.Stmt{store.CompleteByID},
			Mistake: "finalization marks the message Processed by Id alone, so the stalled worker's late finalize commits and overwrites the owner's result",
			Breaks: []string{"rejected_finalizations", "ownership_violations", "owner_result_kept", "rejected_while_owner_holds",
				"retried_finalize_rows"},
			Shows: "Woken after its lease ended and after {@owner} had finalized {@late_payment}, {@stalled_worker} " +
				"finalizes by Id and commits anyway ({finalizations_committed} finalizations of {@late_payment} committed, " +
				"{rejected_finalizations} rejected): its ProcessedAtUtc ends as {late_processed_at}, where the owner's " +
				"finalization had stamped {owner_final_at}. In the " +
				"second part {@held_stalled_worker}'s finalize of {@held_payment} commits while {@held_owner} still holds " +
				"it ({rejected_while_owner_holds} refused); {ownership_violations} finalizations committed by a non-owner " +
				"in all. {@retrier}'s retry of its own finalize changes {retried_finalize_rows} row again, re-stamping " +
				"{@retried_payment}. Both saw the same provider answer, so the damage is quiet; the guard LockedBy = me, " +
				"with a rollback when it changes no row, is what keeps a worker that outlived its lease from overwriting " +
				"the owner's outcome."},
	},
	Settings:  func(lesson.Options) map[string]string { return map[string]string{"lease": lateLease.String()} },
	Breakers:  breakers(),
	Guards:    guards(),
	Processes: processes,
	Run:       runLateFinalize,
}

// lateRun is what the late-finalize sequence observed.
type lateRun struct {
	messageID  int64
	key        string // the message's payment
	stalled    string // LockedBy as the stalled worker's claim read it back
	owner      string // LockedBy as the reclaim read it back, "" if it took nothing
	reclaimed  bool   // Worker-B claimed the message at the lease end
	ownerFinal string // when Worker-B's finalization committed, "" if it did not
	// held is part 2: the message Worker-A finalized late while Worker-B
	// held it, and whether the owner guard alone refused that write.
	held lateHeld
}

// lateHeld is what part 2 observed.
type lateHeld struct {
	messageID  int64
	key        string // the message's payment
	stalled    string // LockedBy as the stalled worker's claim read it back
	owner      string // LockedBy as the reclaim read it back, "" if it took nothing
	ownerFinal string // when Worker-B's finalization committed, "" if it did not
	// ownerRefused: Worker-A's finalize changed 0 rows, and the row as the
	// guard found it was Processing under Worker-B: LockedBy alone decided.
	ownerRefused bool
}

func runLateFinalize(ctx context.Context, env *lesson.Env) (*lab.Result, error) {
	d := cast.NewDay15(cast.Day15Mistakes{})
	d.Payments = cast.SeedPayments[:2]
	statements := lesson.StatementSet(env, store.OutboxLesson)

	setup, err := d.Setup(ctx, env.Open, env.DatabasePath(), store.PaymentsOutbox, store.OutboxLeasing)
	if err != nil {
		return nil, err
	}
	defer setup.Close()
	run, err := playLateFinalize(ctx, d, env, statements)
	if err != nil {
		return nil, err
	}
	r := &lab.Result{}
	if err := measureLateFinalize(ctx, d, setup, run, r); err != nil {
		return nil, err
	}
	lesson.ExpectDocumented(r, env.Scenario.Checks, map[string]float64{
		"rejected_finalizations": 1, "ownership_violations": 0, "owner_result_kept": 1, "rejected_while_owner_holds": 1,
		"retried_finalize_rows": 0,
	})
	r.Verdict = lateFinalizeVerdict(env, r)
	return r, nil
}

// playLateFinalize runs both parts. Each worker is an application instance
// on its own connection; with --processes a child process, and Worker-A's
// stalls real SIGSTOPs.
func playLateFinalize(ctx context.Context, d *cast.Day15, env *lesson.Env, statements store.OutboxSQL) (*lateRun, error) {
	run := &lateRun{}
	var workers instance.Set
	defer workers.Close(ctx)
	outA, err := env.Instances.Outbox(ctx, env.DatabasePath(), "", cast.WorkerA, statements, 0)
	if err != nil {
		return nil, err
	}
	workers.Add(outA)
	outB, err := env.Instances.Outbox(ctx, env.DatabasePath(), "", cast.WorkerB, statements, 0)
	if err != nil {
		return nil, err
	}
	workers.Add(outB)
	if err := lateAfterOwner(ctx, d, outA, outB, run); err != nil {
		return nil, err
	}
	if run.messageID != 0 {
		if err := lateWhileOwnerHolds(ctx, d, outA, outB, &run.held); err != nil {
			return nil, err
		}
	}
	return run, workers.Close(ctx)
}

// claimAndStall is Worker-A's claim of the next message at the current
// scenario time, and its stall holding it: the claim, or a claim that took
// nothing, for the checks to show.
func claimAndStall(ctx context.Context, d *cast.Day15, outA instance.Outbox, part string) (store.Claim, error) {
	now := d.Clock.Now()
	ca, err := outA.ClaimNext(ctx, now, store.OutboxLeaseFor(cast.WorkerA, now, lateLease), nil)
	if err != nil {
		return ca, err
	}
	d.RecordClaim(cast.WorkerA, part, "next", ca)
	if ca.Outcome != store.Claimed {
		return ca, nil // nothing to stall on: the checks say what is missing
	}
	key := ca.Message.AggregateKey
	how, err := outA.Stall(d.Now(), "its claim")
	if err != nil {
		return ca, err
	}
	d.Add(lab.Event{Kind: lab.KindStall, Subject: key, Actor: cast.WorkerA, Action: "stall", Detail: instance.WithHow(fmt.Sprintf("alive but paused (a long GC pause, a slow disk) with message %d (%s) in memory; its lease ends at %s", ca.Message.ID, key, ca.Message.LockedUntil), how)})
	return ca, nil
}

// reclaimAtLeaseEnd moves the clock to the end of Worker-A's lease on m
// and has Worker-B claim m.
func reclaimAtLeaseEnd(ctx context.Context, d *cast.Day15, outB instance.Outbox, part string, m store.Message, at time.Duration) (store.Claim, error) {
	d.Clock.Set(cast.LessonStart.Add(at + lateLease))
	d.Event(lab.KindExpiry, "clock", "advance", "scenario clock moves to "+d.Now()+", exactly "+m.LockedBy+"'s lease end: the lab treats a lease that ends at t as over at t (LockedUntilUtc <= now is claimable)")
	now := d.Clock.Now()
	cb, err := outB.ClaimMessage(ctx, m.ID, now, store.OutboxLeaseFor(cast.WorkerB, now, lateLease))
	if err != nil {
		return cb, err
	}
	d.RecordClaim(cast.WorkerB, part, m.AggregateKey, cb)
	return cb, nil
}

// wake is Worker-A resuming with message m at offset at.
func wake(d *cast.Day15, outA instance.Outbox, m store.Message, at time.Duration) error {
	d.Clock.Set(cast.LessonStart.Add(at))
	how, err := outA.Wake(d.Now(), "its provider check and finalization")
	if err != nil {
		return err
	}
	d.Add(lab.Event{Kind: lab.KindWake, Subject: m.AggregateKey, Actor: cast.WorkerA, Action: "wakes", Detail: instance.WithHow(fmt.Sprintf("resumes with message %d (%s), unaware that its lease ended at %s", m.ID, m.AggregateKey, m.LockedUntil), how)})
	return nil
}

// lateAfterOwner is part 1, LESSONS.md's sequence: A claims and stalls, B
// reclaims at the lease end and finalizes, A wakes and finalizes late.
func lateAfterOwner(ctx context.Context, d *cast.Day15, outA, outB instance.Outbox, run *lateRun) error {
	const part = "part 1: after the owner finalized"
	ca, err := claimAndStall(ctx, d, outA, part)
	if err != nil || ca.Outcome != store.Claimed {
		return err
	}
	run.messageID, run.key, run.stalled = ca.Message.ID, ca.Message.AggregateKey, ca.Message.LockedBy
	cb, err := reclaimAtLeaseEnd(ctx, d, outB, part, ca.Message, 0)
	if err != nil {
		return err
	}
	run.reclaimed = cb.Outcome == store.Claimed
	if run.reclaimed {
		run.owner = cb.Message.LockedBy
		d.Clock.Set(cast.LessonStart.Add(lateOwnerFinal))
		if err := d.ProcessAndFinalize(ctx, outB, cast.WorkerB, cb.Message); err != nil {
			return err
		}
		run.ownerFinal = d.Now()
	}
	if err := wake(d, outA, ca.Message, lateWake); err != nil {
		return err
	}
	return d.ProcessAndFinalize(ctx, outA, cast.WorkerA, ca.Message)
}

// lateWhileOwnerHolds is part 2: A claims the next message and stalls, B
// reclaims it at the lease end and checks the provider, A wakes and
// finalizes while B still holds the message, then B finalizes, and sends
// its finalize again as a client does whose reply to COMMIT was lost.
func lateWhileOwnerHolds(ctx context.Context, d *cast.Day15, outA, outB instance.Outbox, held *lateHeld) error {
	const part = "part 2: while the owner holds it"
	d.Clock.Set(cast.LessonStart.Add(heldClaim))
	ca, err := claimAndStall(ctx, d, outA, part)
	if err != nil || ca.Outcome != store.Claimed {
		return err
	}
	held.messageID, held.key, held.stalled = ca.Message.ID, ca.Message.AggregateKey, ca.Message.LockedBy
	cb, err := reclaimAtLeaseEnd(ctx, d, outB, part, ca.Message, heldClaim)
	if err != nil || cb.Outcome != store.Claimed {
		return err
	}
	held.owner = cb.Message.LockedBy
	ownerOutcome := d.Process(cast.WorkerB, cb.Message.ID, cb.Message.AggregateKey)
	if err := wake(d, outA, ca.Message, heldWake); err != nil {
		return err
	}
	f, err := d.Finalize(ctx, outA, cast.WorkerA, ca.Message, d.Process(cast.WorkerA, ca.Message.ID, ca.Message.AggregateKey))
	if err != nil {
		return err
	}
	held.ownerRefused = !f.Finalized && !f.Gone && f.Refused.Status == "Processing" && f.Refused.LockedBy != cast.WorkerA
	d.Clock.Set(cast.LessonStart.Add(heldOwnerFinal))
	if f, err = d.Finalize(ctx, outB, cast.WorkerB, cb.Message, ownerOutcome); err != nil {
		return err
	}
	if f.Finalized {
		held.ownerFinal = d.Now()
	}
	// The retry: Worker-B sends its finalize again, as after a lost reply.
	d.Clock.Set(cast.LessonStart.Add(heldRetry))
	if f, err = d.RetryFinalize(ctx, outB, cast.WorkerB, cb.Message, ownerOutcome); err != nil {
		return err
	}
	if f.Finalized {
		held.ownerFinal = d.Now() // the owner's last commit stamped the row
	}
	return nil
}

// measureLateFinalize takes the figures: finalizations and attempts from the
// ledgers (part 1's message for LESSONS.md's figures), the messages'
// ProcessedAtUtc from the database.
func measureLateFinalize(ctx context.Context, d *cast.Day15, db *store.DB, run *lateRun, r *lab.Result) error {
	if err := d.Audit(ctx, db, r); err != nil {
		return err
	}
	committed, rejected := d.FinalizationsOf(run.messageID)
	r.SetMetric("finalizations_committed", float64(committed))
	r.SetMetric("rejected_finalizations", float64(rejected))
	r.SetMetric("ownership_violations", float64(d.OwnershipViolations()))
	attempts := d.AttemptsByMessage()
	r.SetMetric("processing_attempts", float64(len(attempts[run.messageID])))
	r.SetMetric("held_processing_attempts", float64(len(attempts[run.held.messageID])))
	r.SetFlag("rejected_while_owner_holds", run.held.ownerRefused)
	if rows, retries := d.RetriedRows(); retries == 1 {
		r.SetMetric("retried_finalize_rows", float64(rows))
	}
	msgs, err := store.NewOutbox(db, store.OutboxLesson).Messages(ctx)
	if err != nil {
		return err
	}
	kept := map[int64]bool{}
	for _, m := range msgs {
		switch m.ID {
		case run.messageID:
			kept[m.ID] = run.ownerFinal != "" && m.ProcessedAt == run.ownerFinal
			r.SetSetting("late_processed_at", m.ProcessedAt)
			r.SetSetting("owner_final_at", run.ownerFinal)
			r.SetFlag("reclaimed_at_lease_end", run.reclaimed)
		case run.held.messageID:
			kept[m.ID] = run.held.ownerFinal != "" && m.ProcessedAt == run.held.ownerFinal
		}
	}
	r.SetFlag("owner_result_kept", len(kept) == 2 && kept[run.messageID] && kept[run.held.messageID])
	run.cast(d, r)
	return d.Finish(ctx, db, r)
}

// cast records who played each role, as the claims read the rows back
// and as the finalization ledger records the retry; a role the run did not
// reach stays uncast.
func (run *lateRun) cast(d *cast.Day15, r *lab.Result) {
	roles := map[string]string{
		"late_payment": run.key, "stalled_worker": run.stalled, "owner": run.owner,
		"held_payment": run.held.key, "held_stalled_worker": run.held.stalled, "held_owner": run.held.owner,
	}
	if worker, key, ok := d.Retry(); ok {
		roles["retrier"], roles["retried_payment"] = worker, key
	}
	for role, who := range roles {
		if who != "" {
			r.SetCast(role, who)
		}
	}
}

// lateFinalizeVerdict says what the run showed, naming each broken
// invariant in a sentence; actors and payments come from the run's cast.
func lateFinalizeVerdict(env *lesson.Env, r *lab.Result) string {
	m, rows := lesson.MetricsOf(r), lesson.RowsOf(r)
	if r.Passed() {
		return r.Fill(fmt.Sprintf("SAFE DESIGN held. The stalled {@stalled_worker}'s finalization of {@late_payment} was rolled back "+
			"for changing no row (%s rejected), and so was {@held_stalled_worker}'s finalization of {@held_payment} while "+
			"{@held_owner} still held it (%s refused by LockedBy alone); %s ownership violations, so each payment keeps its "+
			"owner's outcome. {@retrier}'s finalize of {@retried_payment}, sent again as after a lost reply, changed %s: "+
			"its first commit stands. Yet {@late_payment} was worked on %s times and {@held_payment} %s times: "+
			"a lease bounds duplicate work, it does not prevent it. That is why session 16 adds a fencing token.",
			m("rejected_finalizations"), m("rejected_while_owner_holds"), m("ownership_violations"), rows("retried_finalize_rows"),
			m("processing_attempts"), m("held_processing_attempts")))
	}
	// A variant's verdict is opened by lesson.Execute, with what its checks measured.
	who := "In this run"
	failed := ""
	if env.Variant == "" {
		who = "THE DESIGN DID NOT HOLD in this run, as designed, without a mistake"
		failed = " (failed checks: " + strings.Join(r.FailedChecks(), ", ") + ")"
	}
	result := "each payment kept its owner's result"
	if v, _ := r.Metric("owner_result_kept"); v != 1 {
		result = "a message's ProcessedAtUtc is not its owner's finalization"
	}
	return r.Fill(fmt.Sprintf("%s: %s finalizations of {@late_payment} were rejected, %s of {@held_payment} while its owner held it, "+
		"%s committed by a worker that no longer owned the message, {@late_payment} was worked on %s times, {@retrier}'s "+
		"retried finalize of {@retried_payment} changed %s, and %s%s.",
		who, m("rejected_finalizations"), m("rejected_while_owner_holds"), m("ownership_violations"), m("processing_attempts"),
		rows("retried_finalize_rows"), result, failed))
}
