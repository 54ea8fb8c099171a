package scenarios

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/instance"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/store"
)

// variantFinalizeWithoutOwnerGuard is session-15-late-finalize's mistake.
const variantFinalizeWithoutOwnerGuard = "finalize-without-owner-guard"

// The late-finalize timeline on the scenario clock: Worker-A's lease ends
// at .500; Worker-B reclaims at exactly that instant (the lab's boundary: a
// lease that ends at t is over at t), finalizes at .550, and the stalled
// Worker-A wakes at .700.
const (
	lateLease      = 500 * time.Millisecond
	lateOwnerFinal = 550 * time.Millisecond
	lateWake       = 700 * time.Millisecond
)

var lateFinalize = Scenario{
	Name:    "session-15-late-finalize",
	Session: "Session-15",
	FileTag: "Late-Finalize",
	Title:   "Day 15: the guard that finalization needs (a worker that outlives its lease)",
	Design:  lab.Safe,
	Teaches: "Day 15's owner-guarded finalization only matters when a worker outlives its lease. Worker-A " +
		"claims PAY-001 with a 500 ms lease and stalls (alive, not crashed). At exactly the lease end Worker-B " +
		"reclaims it, checks the provider and finalizes: its guard WHERE LockedBy = Worker-B changes 1 row and " +
		"commits. Worker-A wakes, checks the provider too, and its finalize WHERE LockedBy = Worker-A changes 0 " +
		"rows and rolls back, so the payment keeps the owner's outcome. The message was still worked on twice: a " +
		"lease bounds duplicate work, it does not prevent it.",
	DoesNotSolve: "The stalled worker still did the work (a second provider status check; with a side effect, a " +
		"second side effect). And LockedBy names a worker, not a claim: if Worker-A itself had reclaimed the " +
		"message, its stale finalize would pass the guard. Session 16's fencing token, incremented by every " +
		"claim, tells the two claims apart.",
	Statements: []store.Stmt{
		store.ClaimSelectNext,
		store.ClaimUpdate,
		store.FinalizeOwned,
		store.ApplyPaymentOutcome,
	},
	Checks: []CheckDoc{
		{Name: "rejected_finalizations", About: "the stalled worker's finalization changed 0 rows and rolled back"},
		{Name: "ownership_violations", About: "no finalization committed by a worker that no longer owned the message"},
		{Name: "processing_attempts", About: "the message was still worked on twice: a lease bounds duplicate work, it does not prevent it"},
		{Name: "owner_result_kept", About: "the message's ProcessedAtUtc is the owner's finalization, not the stalled worker's"},
	},
	Variants: []Variant{
		{Name: variantFinalizeWithoutOwnerGuard, Swaps: []store.Stmt{store.CompleteByID},
			Mistake: "finalization marks the message Processed by Id alone, so the stalled worker's late finalize commits and overwrites the owner's result",
			Breaks:  []string{"rejected_finalizations", "ownership_violations", "owner_result_kept"},
			Shows: "Worker-A wakes after its lease ended and after Worker-B had finalized PAY-001, and its finalize by " +
				"Id commits anyway ({rejected_finalizations} rejected, {ownership_violations} committed by a non-owner): " +
				"PAY-001's ProcessedAtUtc becomes Worker-A's instead of the owner's. Both saw the same provider answer, so the damage is " +
				"quiet; the guard LockedBy = me, with a rollback on 0 rows, is what keeps a worker that outlived its " +
				"lease from overwriting the owner's outcome."},
	},
	Run: runLateFinalize,
}

// lateRun is what the late-finalize sequence observed.
type lateRun struct {
	messageID  int64
	reclaimed  bool   // Worker-B claimed the message at the lease end
	ownerFinal string // when Worker-B's finalization committed, "" if it did not
}

func runLateFinalize(ctx context.Context, env *Env) (*lab.Result, error) {
	d := cast.NewDay15(cast.Day15Mistakes{})
	d.Payments = cast.SeedPayments[:1]
	statements := statementSet(env, store.OutboxLesson)

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
	expectDocumented(r, env.Scenario.Checks, map[string]float64{
		"rejected_finalizations": 1, "ownership_violations": 0, "processing_attempts": 2, "owner_result_kept": 1,
	})
	r.Verdict = lateFinalizeVerdict(env, r)
	return r, nil
}

// playLateFinalize runs the sequence: A claims and stalls, B reclaims at the
// lease end and finalizes, A wakes and finalizes late. Each worker is an
// application instance on its own connection; with --processes a
// child process, and Worker-A's stall a real SIGSTOP.
func playLateFinalize(ctx context.Context, d *cast.Day15, env *Env, statements store.OutboxSQL) (*lateRun, error) {
	run := &lateRun{}
	var workers instance.Set
	defer workers.Close(ctx)
	outA, err := env.Instances.Outbox(ctx, env.DatabasePath(), "", cast.WorkerA, statements, 0)
	if err != nil {
		return nil, err
	}
	workers.Add(outA)
	ca, err := outA.ClaimNext(ctx, cast.WorkerA, d.Clock.Now(), lateLease, nil)
	if err != nil {
		return nil, err
	}
	d.RecordClaim(cast.WorkerA, "late finalize", "next", ca)
	if ca.Outcome != store.Claimed {
		return run, workers.Close(ctx) // nothing to stall on: the checks say what is missing
	}
	run.messageID = ca.Message.ID
	key := ca.Message.AggregateKey
	how, err := outA.Stall(d.Now(), "its claim")
	if err != nil {
		return nil, err
	}
	d.Add(lab.Event{Kind: lab.KindStall, Subject: key, Actor: cast.WorkerA, Action: "stall", Detail: instance.WithHow(fmt.Sprintf("alive but paused (a long GC pause, a slow disk) with message %d (%s) in memory; its lease ends at %s", ca.Message.ID, key, ca.Message.LockedUntil), how)})

	d.Clock.Set(cast.LessonStart.Add(lateLease))
	d.Event(lab.KindExpiry, "clock", "advance", "scenario clock moves to "+d.Now()+", exactly Worker-A's lease end: the lab treats a lease that ends at t as over at t (LockedUntilUtc <= now is claimable)")
	outB, err := env.Instances.Outbox(ctx, env.DatabasePath(), "", cast.WorkerB, statements, 0)
	if err != nil {
		return nil, err
	}
	workers.Add(outB)
	cb, err := outB.ClaimMessage(ctx, run.messageID, cast.WorkerB, d.Clock.Now(), lateLease)
	if err != nil {
		return nil, err
	}
	d.RecordClaim(cast.WorkerB, "late finalize", key, cb)
	run.reclaimed = cb.Outcome == store.Claimed
	if run.reclaimed {
		d.Clock.Set(cast.LessonStart.Add(lateOwnerFinal))
		if err := d.ProcessAndFinalize(ctx, outB, cast.WorkerB, cb.Message); err != nil {
			return nil, err
		}
		run.ownerFinal = d.Now()
	}

	d.Clock.Set(cast.LessonStart.Add(lateWake))
	if how, err = outA.Wake(d.Now(), "its provider check and finalization"); err != nil {
		return nil, err
	}
	d.Add(lab.Event{Kind: lab.KindWake, Subject: key, Actor: cast.WorkerA, Action: "wakes", Detail: instance.WithHow(fmt.Sprintf("resumes with message %d (%s), unaware that its lease ended at %s", ca.Message.ID, key, ca.Message.LockedUntil), how)})
	if err := d.ProcessAndFinalize(ctx, outA, cast.WorkerA, ca.Message); err != nil {
		return nil, err
	}
	return run, workers.Close(ctx)
}

// measureLateFinalize takes the figures: finalizations and attempts from the
// ledgers, the message's ProcessedAtUtc from the database.
func measureLateFinalize(ctx context.Context, d *cast.Day15, db *store.DB, run *lateRun, r *lab.Result) error {
	if err := d.Audit(ctx, db, r); err != nil {
		return err
	}
	committed, rejected := d.Finalizations()
	r.SetMetric("finalizations_committed", float64(committed))
	r.SetMetric("rejected_finalizations", float64(rejected))
	r.SetMetric("ownership_violations", float64(d.OwnershipViolations()))
	r.SetMetric("processing_attempts", float64(len(d.AttemptsByMessage()[run.messageID])))
	msgs, err := store.NewOutbox(db, store.OutboxLesson).Messages(ctx)
	if err != nil {
		return err
	}
	kept := false
	for _, m := range msgs {
		if m.ID == run.messageID {
			kept = run.ownerFinal != "" && m.ProcessedAt == run.ownerFinal
			r.SetFlag("reclaimed_at_lease_end", run.reclaimed)
		}
	}
	r.SetFlag("owner_result_kept", kept)
	return d.Finish(ctx, db, r)
}

// lateFinalizeVerdict says what the run showed, naming each broken
// invariant in a sentence.
func lateFinalizeVerdict(env *Env, r *lab.Result) string {
	m := metricsOf(r)
	if r.Passed() {
		return fmt.Sprintf("SAFE DESIGN held. The stalled Worker-A's finalization changed 0 rows and rolled back (%s rejected, %s ownership violations), "+
			"so the payment keeps the owner's outcome. Yet the message was worked on %s times: a lease bounds duplicate work, it does not prevent it. "+
			"That is why session 16 adds a fencing token.",
			m("rejected_finalizations"), m("ownership_violations"), m("processing_attempts"))
	}
	who := fmt.Sprintf("DESIGN BROKEN by the %q mistake", env.Variant)
	if env.Variant == "" {
		who = "THE DESIGN DID NOT HOLD in this run, as designed, without a mistake"
	}
	result := "the payment kept the owner's result"
	if v, _ := r.Metric("owner_result_kept"); v != 1 {
		result = "the message's ProcessedAtUtc is not the owner's finalization"
	}
	return fmt.Sprintf("%s: %s finalizations were rejected, %s committed by a worker that no longer owned the message, "+
		"the message was worked on %s times, and %s (failed checks: %s).",
		who, m("rejected_finalizations"), m("ownership_violations"), m("processing_attempts"), result, strings.Join(r.FailedChecks(), ", "))
}
