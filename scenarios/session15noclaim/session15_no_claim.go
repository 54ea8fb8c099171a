// Package session15noclaim is the lesson session-15-competing-workers-no-
// claim: its Lesson (the sequence, the checks, the variants and what the
// registry's tests read to prove it), the stages and actors only it uses,
// its proofs (proofs.go) and its tests.
package session15noclaim

import (
	"context"
	"errors"
	"fmt"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/store"
)

const variantSequential = "sequential-workers"

// Lesson is session-15-competing-workers-no-claim, as the registry lists it:
// "Day 15 before: two workers, no claim".
var Lesson = lesson.Scenario{
	Name:    "session-15-competing-workers-no-claim",
	Session: "Session-15",
	FileTag: "Competing-Workers-No-Claim",
	Title:   "Day 15 before: two workers, no claim",
	Design:  lab.Broken,
	Figures: map[string]float64{
		"loaded_a": 6, "loaded_b": 6, "processing_attempts": 12, "status_checks": 12, "unique_messages": 6,
		"processed_more_than_once": 6, "outbox_processed": 6, "paid": 4, "failed": 2, "outbox_pending": 0,
		"duplicate_rows": 0,
	},
	Teaches: "Two workers, each its own application instance on its own database connection, bulk-load every " +
		"Pending outbox message with a plain SELECT. A barrier holds both until both have the full " +
		"snapshot, then each processes everything it loaded: a provider status check, the payment update, " +
		"and a completion by Id alone. The final database looks perfect; only the separate ledgers show " +
		"that every message was processed by both workers.",
	DoesNotSolve: "Nothing: this is the broken design. A read is not a claim; the fix is the lease of " +
		"session-15-outbox-leasing.",
	Statements: []store.Stmt{
		store.LoadPending,
		store.CompleteByID,
		store.ApplyPaymentOutcome,
	},
	Set: noClaimSQL(),
	Checks: []lesson.CheckDoc{
		{Name: "loaded_a", Measure: true, About: "Pending messages {@loader_a}'s plain SELECT loaded, by the loads ledger"},
		{Name: "loaded_b", Measure: true, About: "Pending messages {@loader_b}'s plain SELECT loaded, by the loads ledger"},
		{Name: "barrier_held", Measure: true, About: "the barrier released both workers together, and by the ledgers' order both had finished loading before either processed anything"},
		{Name: "processing_attempts", Measure: true, About: "processing attempts in the ledger: the race is reproduced when both workers do every message"},
		{Name: "status_checks", Measure: true, About: "status checks the provider recorded for the seeded payments"},
		{Name: "unique_messages", About: "distinct messages worked on"},
		{Name: "processed_more_than_once", Measure: true, About: "messages processed more than once"},
		{Name: "outbox_processed", About: "messages Processed in the final state"},
		{Name: "outbox_pending", About: "messages left Pending"},
		{Name: "paid", About: "payments Paid"},
		{Name: "failed", About: "payments Failed"},
		{Name: "duplicate_rows", About: "duplicate payment or outbox rows, the only trace the race could leave in the database"},
	},
	Variants: []lesson.Variant{{
		Name: variantSequential, Changes: "the order: one worker starts only once the other has finished, and no barrier holds them",
		Mistake: "the second worker starts only after the first has finished, with no barrier, as in most local test runs: " +
			"the race hides and the test wrongly suggests the design is safe",
		Breaks: []string{"loaded_b", "barrier_held", "processing_attempts", "status_checks", "processed_more_than_once"},
		Shows: "Started after {@first_loader} had finished, {@last_loader} finds {loaded_last} messages Pending, so the " +
			"ledgers show {processing_attempts} attempts for {unique_messages} messages, {processed_more_than_once} " +
			"processed more than once, and the run looks safe, although nothing stops both workers from taking the " +
			"same message. A race shows only when the test forces the overlap: without the barrier a clean run " +
			"proves nothing about the design.",
	}},
	Breakers:  breakers(),
	Processes: processes,
	Run:       runCompetingWorkersNoClaim,
}

// noClaimSQL is the statement set of Day 15's "before": a plain load, and a
// completion by Id alone.
func noClaimSQL() store.OutboxSQL {
	s := store.OutboxLesson
	s.Finalize = store.CompleteByID
	return s
}

func runCompetingWorkersNoClaim(ctx context.Context, env *lesson.Env) (*lab.Result, error) {
	d := cast.NewDay15(cast.Day15Mistakes{})
	r := &lab.Result{}

	setup, err := d.Setup(ctx, env.Open, env.DatabasePath(), store.PaymentsOutbox)
	if err != nil {
		return nil, err
	}
	defer setup.Close()

	statements := lesson.StatementSet(env, noClaimSQL())
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
	castLoaders(d, r)
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
	lesson.ExpectDocumented(r, env.Scenario.Checks, want)

	m := lesson.MetricsOf(r)
	if r.Passed() {
		r.Verdict = fmt.Sprintf("UNSAFE DESIGN, race reproduced. The final database looks perfect (%s Processed, %s Paid, %s Failed, %s duplicate rows), "+
			"yet the ledgers show %s processing attempts and %s provider status checks for %s messages: %s messages processed more than once. "+
			"Loading is not claiming.", m("outbox_processed"), m("paid"), m("failed"), m("duplicate_rows"),
			m("processing_attempts"), m("status_checks"), m("unique_messages"), m("processed_more_than_once"))
	} else if env.Variant != "" { // lesson.Execute opens a variant's verdict with what its checks measured
		r.Verdict = fmt.Sprintf("%s processing attempts, %s messages processed more than once: a run that happens to look "+
			"clean proves nothing about the design.", m("processing_attempts"), m("processed_more_than_once"))
	} else {
		r.Verdict = fmt.Sprintf("UNSAFE DESIGN, race NOT reproduced this run (%s processing attempts, %s messages processed more than once). "+
			"A run that happens to look clean proves nothing about the design.", m("processing_attempts"), m("processed_more_than_once"))
	}
	return r, nil
}

// castLoaders casts the workers the loads ledger names: loader_a and
// loader_b, whose loads loaded_a and loaded_b count, and first_loader and
// last_loader in the order their loads finished, with loaded_last, what the
// last load returned.
func castLoaders(d *cast.Day15, r *lab.Result) {
	for role, worker := range map[string]string{"loader_a": cast.WorkerA, "loader_b": cast.WorkerB} {
		if _, ok := d.LoadedBy(worker); ok {
			r.SetCast(role, worker)
		}
	}
	order := d.LoadOrder()
	if len(order) < 2 {
		return
	}
	first, last := order[0], order[len(order)-1]
	r.SetCast("first_loader", first)
	r.SetCast("last_loader", last)
	n, _ := d.LoadedBy(last)
	r.SetMetric("loaded_last", float64(n))
}
