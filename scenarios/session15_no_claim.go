package scenarios

import (
	"context"
	"fmt"

	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/store"
)

const variantSequential = "sequential-workers"

var competingWorkersNoClaim = Scenario{
	Name:    "session-15-competing-workers-no-claim",
	Session: "Session-15",
	FileTag: "CompetingWorkersNoClaim",
	Title:   "Day 15 before: two workers, no claim",
	Design:  lab.Broken,
	Teaches: "Two workers, each its own application instance on its own SQLite connection, bulk-load every " +
		"Pending outbox message with a plain SELECT. A barrier of two holds both until both have the full " +
		"snapshot, then each processes everything it loaded: a provider status check, the payment update, " +
		"and a completion by Id alone. The final database looks perfect; only the separate ledgers show " +
		"that every message was processed twice.",
	DoesNotSolve: "Nothing: this is the broken design. A read is not a claim; the fix is the lease of " +
		"session-15-outbox-leasing.",
	Statements: []lab.Statement{
		{Name: "load (each worker)", SQL: store.LoadPendingSQL},
		{Name: "apply the provider's outcome", SQL: store.ApplyPaymentOutcomeSQL},
		{Name: "complete (no ownership guard)", SQL: store.MarkProcessedUnguardedSQL},
	},
	Checks: []CheckDoc{
		{"loaded_a", "Worker-A loaded all 6 Pending messages"},
		{"loaded_b", "Worker-B loaded the same 6 messages"},
		{"processing_attempts", "12 attempts: the race was reproduced, every message done twice"},
		{"status_checks", "the provider saw 12 status checks for 6 payments"},
		{"unique_messages", "6 distinct messages were worked on"},
		{"processed_more_than_once", "all 6 messages were processed more than once"},
		{"outbox_processed", "the final state looks perfect: 6 Processed"},
		{"outbox_pending", "no message left Pending"},
		{"paid", "4 payments Paid"},
		{"failed", "2 payments Failed"},
		{"duplicate_rows", "no duplicate payment or outbox rows: the database alone hides the race"},
	},
	Variants: []Variant{{
		Name: variantSequential,
		Mistake: "Worker-B starts only after Worker-A has finished, with no barrier, as in most local test runs: " +
			"the race hides and the test wrongly suggests the design is safe.",
		Breaks: []string{"loaded_b", "processing_attempts", "status_checks", "processed_more_than_once"},
	}},
	Run: runCompetingWorkersNoClaim,
}

func runCompetingWorkersNoClaim(ctx context.Context, env *Env) (*lab.Result, error) {
	d := newDay15(env.Variant)
	r := &lab.Result{}

	setup, err := openWorker(ctx, env.DatabasePath())
	if err != nil {
		return nil, err
	}
	defer setup.Close()
	if err := setup.Migrate(ctx, store.PaymentsOutbox); err != nil {
		return nil, err
	}
	if err := d.seed(ctx, setup); err != nil {
		return nil, err
	}

	barrier := NewBarrier(2)
	work := func(ctx context.Context, worker string) error {
		db, err := openWorker(ctx, env.DatabasePath())
		if err != nil {
			return err
		}
		defer db.Close()
		msgs, err := db.LoadPending(ctx)
		if err != nil {
			return err
		}
		d.recordLoad(worker, msgs)
		if !env.Is(variantSequential) {
			d.event(worker, "barrier", "waiting until both workers hold the full snapshot")
			if err := barrier.Wait(ctx); err != nil {
				return err
			}
		}
		for _, m := range msgs {
			o := d.process(worker, m.ID, m.AggregateKey)
			stats, err := db.CompleteUnguarded(ctx, m.ID, o, d.clk.Now())
			if err != nil {
				return err
			}
			d.recordFinal(worker, m.ID, m.AggregateKey, true, stats.BusyRetries,
				fmt.Sprintf("message %d (%s) marked Processed by Id alone; payment set %s", m.ID, m.AggregateKey, o.Status))
		}
		return nil
	}
	if env.Is(variantSequential) {
		d.event("scenario", "sequential (MISTAKE)", "Worker-B starts only after Worker-A has finished; no barrier")
		err = runInOrder(ctx, []string{workerA, workerB}, work)
	} else {
		d.concurrent = true
		err = runConcurrently(ctx, []string{workerA, workerB}, work)
	}
	if err != nil {
		return nil, err
	}

	if err := d.audit(ctx, setup, r); err != nil {
		return nil, err
	}
	loaded := map[string]int{}
	for _, l := range d.loads {
		loaded[l.worker] = len(l.keys)
	}
	r.SetMetric("loaded_a", float64(loaded[workerA]))
	r.SetMetric("loaded_b", float64(loaded[workerB]))
	if err := d.finish(ctx, setup, r); err != nil {
		return nil, err
	}

	want := map[string]float64{
		"loaded_a": 6, "loaded_b": 6, "processing_attempts": 12, "status_checks": 12, "unique_messages": 6,
		"processed_more_than_once": 6, "outbox_processed": 6, "outbox_pending": 0, "paid": 4, "failed": 2, "duplicate_rows": 0,
	}
	expectDocumented(r, env.Scenario.Checks, want)

	m := metricsOf(r)
	if r.Passed() {
		r.Verdict = fmt.Sprintf("UNSAFE DESIGN, race reproduced. The final database looks perfect (%s Processed, %s Paid, %s Failed, %s duplicate rows), "+
			"yet the ledgers show %s processing attempts and %s provider status checks for %s messages: every message was processed twice. "+
			"Loading is not claiming.", m("outbox_processed"), m("paid"), m("failed"), m("duplicate_rows"),
			m("processing_attempts"), m("status_checks"), m("unique_messages"))
	} else {
		r.Verdict = fmt.Sprintf("UNSAFE DESIGN, race NOT reproduced this run (%s processing attempts, %s messages processed more than once). "+
			"A run that happens to look clean proves nothing about the design.", m("processing_attempts"), m("processed_more_than_once"))
	}
	return r, nil
}

// expectDocumented adds one metric check per documented check, in the
// documented order, so the report and `describe` always agree.
func expectDocumented(r *lab.Result, docs []CheckDoc, want map[string]float64) {
	for _, c := range docs {
		w, ok := want[c.Name]
		if !ok {
			panic("scenarios: no expected value for documented check " + c.Name) // caught by every test
		}
		r.ExpectMetric(c.Name, w, c.About)
	}
}

// metricsOf returns a formatter for measured metrics, for verdict sentences.
func metricsOf(r *lab.Result) func(key string) string {
	return func(key string) string {
		v, ok := r.Metric(key)
		if !ok {
			return "?"
		}
		return lab.FormatNumber(v)
	}
}
