package scenarios

import (
	"context"
	"errors"
	"fmt"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/store"
)

const variantSequential = "sequential-workers"

var competingWorkersNoClaim = Scenario{
	Name:    "session-15-competing-workers-no-claim",
	Session: "Session-15",
	FileTag: "Competing-Workers-No-Claim",
	Title:   "Day 15 before: two workers, no claim",
	Design:  lab.Broken,
	Teaches: "Two workers, each its own application instance on its own database connection, bulk-load every " +
		"Pending outbox message with a plain SELECT. A barrier of two holds both until both have the full " +
		"snapshot, then each processes everything it loaded: a provider status check, the payment update, " +
		"and a completion by Id alone. The final database looks perfect; only the separate ledgers show " +
		"that every message was processed twice.",
	DoesNotSolve: "Nothing: this is the broken design. A read is not a claim; the fix is the lease of " +
		"session-15-outbox-leasing.",
	Statements: []store.Stmt{
		store.LoadPending,
		store.CompleteByID,
		store.ApplyPaymentOutcome,
	},
	Checks: []CheckDoc{
		{Name: "loaded_a", About: "Worker-A loaded all 6 Pending messages"},
		{Name: "loaded_b", About: "Worker-B loaded the same 6 messages"},
		{Name: "barrier_held", About: "the barrier released both workers together, and by the ledgers' order both had finished loading before either processed anything"},
		{Name: "processing_attempts", About: "12 attempts: the race was reproduced, every message done twice"},
		{Name: "status_checks", About: "the provider saw 12 status checks for 6 payments"},
		{Name: "unique_messages", About: "6 distinct messages were worked on"},
		{Name: "processed_more_than_once", About: "all 6 messages were processed more than once"},
		{Name: "outbox_processed", About: "the final state looks perfect: 6 Processed"},
		{Name: "outbox_pending", About: "no message left Pending"},
		{Name: "paid", About: "4 payments Paid"},
		{Name: "failed", About: "2 payments Failed"},
		{Name: "duplicate_rows", About: "no duplicate payment or outbox rows: the database alone hides the race"},
	},
	Variants: []Variant{{
		Name: variantSequential, Changes: "the order: Worker-B starts only once Worker-A has finished, and no barrier holds them",
		Mistake: "Worker-B starts only after Worker-A has finished, with no barrier, as in most local test runs: " +
			"the race hides and the test wrongly suggests the design is safe",
		Breaks: []string{"loaded_b", "barrier_held", "processing_attempts", "status_checks", "processed_more_than_once"},
		Shows: "Worker-B finds nothing Pending when it starts (loaded {loaded_b}), so each message is processed once " +
			"({processing_attempts} attempts, {processed_more_than_once} twice) and the run looks safe, although nothing stops two workers from taking the " +
			"same message. A race shows only when the test forces the overlap: without the barrier a clean run " +
			"proves nothing about the design.",
	}},
	Run: runCompetingWorkersNoClaim,
}

// noClaimSQL is the statement set of Day 15's "before": a plain load, and a
// completion by Id alone.
func noClaimSQL() store.OutboxSQL {
	s := store.OutboxLesson
	s.Finalize = store.CompleteByID
	return s
}

func runCompetingWorkersNoClaim(ctx context.Context, env *Env) (*lab.Result, error) {
	d := cast.NewDay15(cast.Day15Mistakes{})
	r := &lab.Result{}

	setup, err := d.Setup(ctx, env.Open, env.DatabasePath(), store.PaymentsOutbox)
	if err != nil {
		return nil, err
	}
	defer setup.Close()

	statements := statementSet(env, noClaimSQL())
	barrier := cast.NewBarrier(2)
	work := func(ctx context.Context, worker string) error {
		out, err := env.Instances.Outbox(ctx, env.DatabasePath(), "", worker, statements, 0)
		if err != nil {
			return err
		}
		wait := barrier.Wait
		if env.Is(variantSequential) {
			wait = nil
		}
		workErr := d.WorkBefore(ctx, out, worker, wait)
		return errors.Join(workErr, out.Close(ctx))
	}
	workers := []string{cast.WorkerA, cast.WorkerB}
	if env.Is(variantSequential) {
		d.Event(lab.KindNote, "scenario", "sequential (MISTAKE)", "Worker-B starts only after Worker-A has finished; no barrier")
		err = cast.RunInOrder(ctx, workers, work)
	} else {
		d.Concurrent = true
		err = cast.RunConcurrently(ctx, workers, work)
	}
	if err != nil {
		return nil, err
	}

	if err := d.Audit(ctx, setup, r); err != nil {
		return nil, err
	}
	r.SetMetric("loaded_a", float64(d.Loaded(cast.WorkerA)))
	r.SetMetric("loaded_b", float64(d.Loaded(cast.WorkerB)))
	// The barrier held when it released a round with both workers arrived
	// and neither had processed anything before both had loaded.
	r.SetFlag("barrier_held", barrier.Rounds() > 0 && d.LoadedBeforeProcessing(cast.WorkerA, cast.WorkerB))
	if err := d.Finish(ctx, setup, r); err != nil {
		return nil, err
	}

	want := map[string]float64{
		"loaded_a": 6, "loaded_b": 6, "barrier_held": 1, "processing_attempts": 12, "status_checks": 12, "unique_messages": 6,
		"processed_more_than_once": 6, "outbox_processed": 6, "outbox_pending": 0, "paid": 4, "failed": 2, "duplicate_rows": 0,
	}
	expectDocumented(r, env.Scenario.Checks, want)

	m := metricsOf(r)
	if r.Passed() {
		r.Verdict = fmt.Sprintf("UNSAFE DESIGN, race reproduced. The final database looks perfect (%s Processed, %s Paid, %s Failed, %s duplicate rows), "+
			"yet the ledgers show %s processing attempts and %s provider status checks for %s messages: every message was processed twice. "+
			"Loading is not claiming.", m("outbox_processed"), m("paid"), m("failed"), m("duplicate_rows"),
			m("processing_attempts"), m("status_checks"), m("unique_messages"))
	} else if env.Variant != "" { // Execute opens a variant's verdict with what its checks measured
		r.Verdict = fmt.Sprintf("%s processing attempts, %s messages processed more than once: a run that happens to look "+
			"clean proves nothing about the design.", m("processing_attempts"), m("processed_more_than_once"))
	} else {
		r.Verdict = fmt.Sprintf("UNSAFE DESIGN, race NOT reproduced this run (%s processing attempts, %s messages processed more than once). "+
			"A run that happens to look clean proves nothing about the design.", m("processing_attempts"), m("processed_more_than_once"))
	}
	return r, nil
}
