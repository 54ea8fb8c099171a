package scenarios

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/outboxlab/outboxlab/clock"
	"github.com/outboxlab/outboxlab/failpoint"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/store"
)

// variantTwoTransactions is session 14's mistake: the "after" keeps the two
// transactions of the "before".
const variantTwoTransactions = "two-transactions"

// crashedPayment is the payment the checkout is writing when it dies.
var crashedPayment = store.NewPayment{Key: "PAY-001", AmountCents: 2500}

var transactionalOutbox = Scenario{
	Name:    "session-14-transactional-outbox",
	Session: "Session-14",
	FileTag: "TransactionalOutbox",
	Title:   "Session 14 (prequel): the payment and its outbox message commit together, or not at all",
	Design:  lab.Safe,
	Teaches: "Before: checkout writes the payment in one transaction and its outbox message in a second; the " +
		"process dies between them (a failpoint closes its connection mid-step), and the committed payment is " +
		"left with no message, so no worker will ever act on it: an orphan. After: both inserts in one " +
		"transaction; the same crash leaves neither row, because SQLite discards the uncommitted transaction. " +
		"A crash-free run then shows exactly one outbox row per payment.",
	DoesNotSolve: "The outbox makes the intent durable; it says nothing about who processes it. Two workers " +
		"that both read the Pending messages process everything twice (session 15), and a relay that publishes " +
		"a message may still crash before recording it, so the message is offered at least once, not exactly once.",
	Statements: []lab.Statement{
		{Name: "payment row", SQL: store.InsertPaymentSQL},
		{Name: "outbox row (the same transaction)", SQL: store.InsertOutboxSQL},
		{Name: "orphans: payments no outbox message will act on", SQL: store.OrphanPaymentsSQL},
	},
	Checks: []CheckDoc{
		{"orphans_before", "two transactions + a crash between them left 1 payment with no outbox message"},
		{"orphans_after", "one transaction + the same crash left no orphan (neither row)"},
		{"outbox_rows_per_payment", "after the crash-free run, every payment has exactly one outbox row"},
	},
	Variants: []Variant{
		{Name: variantTwoTransactions, Mistake: "the \"after\" still commits the payment and the outbox row in two transactions, so the same crash leaves an orphan",
			Breaks: []string{"orphans_after"}},
	},
	Run: func(ctx context.Context, env *Env) (*lab.Result, error) {
		return runTransactionalOutbox(ctx, env, paymentWritesFor(env.Variant))
	},
}

// paymentWrites are how each phase of session 14 writes a payment; a
// variant swaps the "after".
type paymentWrites struct {
	before, after, crashFree paymentWrite
}

// paymentWrite writes one payment through db and names the design it
// used. crashHere is the failpoint between the payment and the outbox write;
// a design without that point never consults it.
type paymentWrite struct {
	design string
	write  func(ctx context.Context, db *store.DB, p store.NewPayment, now time.Time, crashHere func() bool) error
}

var (
	twoTransactions = paymentWrite{
		design: "two transactions",
		write: func(ctx context.Context, db *store.DB, p store.NewPayment, now time.Time, crashHere func() bool) error {
			_, err := db.CreatePaymentInTwoTransactions(ctx, p, now, crashHere)
			return err
		},
	}
	oneTransactionWithFailpoint = paymentWrite{
		design: "one transaction",
		write: func(ctx context.Context, db *store.DB, p store.NewPayment, now time.Time, crashHere func() bool) error {
			return db.CreatePaymentWithFailpoint(ctx, p, now, crashHere)
		},
	}
	oneTransaction = paymentWrite{
		design: "one transaction",
		write: func(ctx context.Context, db *store.DB, p store.NewPayment, now time.Time, _ func() bool) error {
			_, err := db.CreatePayment(ctx, p, now)
			return err
		},
	}
)

func paymentWritesFor(variant string) paymentWrites {
	w := paymentWrites{before: twoTransactions, after: oneTransactionWithFailpoint, crashFree: oneTransaction}
	if variant == variantTwoTransactions {
		w.after = twoTransactions
	}
	return w
}

// durableState is what a fresh connection finds after a crash.
type durableState struct {
	phase, design      string
	payments, messages int
	orphans            int
	pendingForWorker   int // what a worker's LoadPending would pick up
}

func runTransactionalOutbox(ctx context.Context, env *Env, writes paymentWrites) (*lab.Result, error) {
	return runTransactionalOutboxWithPlan(ctx, env, writes, nil)
}

// runTransactionalOutboxWithPlan runs session 14; crashFreePlan (nil in the
// lesson) may arm failpoints in the crash-free run.
func runTransactionalOutboxWithPlan(ctx context.Context, env *Env, writes paymentWrites, crashFreePlan *failpoint.Plan) (*lab.Result, error) {
	clk := clock.NewManual(lessonStart.Add(-time.Minute))
	var timeline lab.Timeline
	event := func(actor, action, detail string) { timeline.Add(clock.Format(clk.Now()), actor, action, detail) }
	r := &lab.Result{}

	var states []durableState
	var fired []firedFailpoint
	for _, phase := range []struct {
		name  string
		write paymentWrite
		path  string
	}{
		{"before", writes.before, env.ExtraDatabasePath("session14-before")},
		{"after", writes.after, env.ExtraDatabasePath("session14-after")},
	} {
		// Each phase arms the same crash, at the same point, for the same payment.
		plan := failpoint.NewPlan(failpoint.Rule{Point: failpoint.BetweenOutboxWrites, Actor: checkout, Subject: crashedPayment.Key, Fault: failpoint.Crash})
		st, err := crashPhase(ctx, clk, event, phase.name, phase.write, phase.path, plan)
		if err != nil {
			return nil, err
		}
		states = append(states, st)
		for _, f := range plan.Fired() {
			fired = append(fired, firedFailpoint{phase: phase.name, design: phase.write.design, Firing: f})
		}
		clk.Advance(time.Second)
	}
	r.SetMetric("orphans_before", float64(states[0].orphans))
	r.SetMetric("orphans_after", float64(states[1].orphans))

	// The crash-free run, in the main database students may keep.
	db, err := openWorker(ctx, env.DatabasePath())
	if err != nil {
		return nil, err
	}
	defer db.Close()
	if err := db.Migrate(ctx, store.PaymentsOutbox); err != nil {
		return nil, err
	}
	clk.Set(lessonStart)
	event(checkout, "start", "crash-free run ("+writes.crashFree.design+"): six payments, own connection, no failpoint armed")
	for _, p := range seedPayments {
		p.MessageType = "PaymentCreated"
		p.Payload = fmt.Sprintf(`{"key":%q,"amountCents":%d}`, p.Key, p.AmountCents)
		err := writes.crashFree.write(ctx, db, p, clk.Now(), crashAt(crashFreePlan, p.Key))
		if errors.Is(err, store.ErrCrashed) {
			event(checkout, "CRASH", p.Key+": the process died mid-write")
			break
		}
		if err != nil {
			return nil, err
		}
		event(checkout, "create payment", p.Key+": payment row and outbox row committed")
		clk.Advance(time.Second)
	}
	// A restarted instance audits what is durable.
	auditor, err := openWorker(ctx, env.DatabasePath())
	if err != nil {
		return nil, err
	}
	defer auditor.Close()
	pays, err := auditor.Payments(ctx)
	if err != nil {
		return nil, err
	}
	msgs, err := auditor.Messages(ctx)
	if err != nil {
		return nil, err
	}
	perPayment := map[string][]store.Message{}
	for _, m := range msgs {
		perPayment[m.AggregateKey] = append(perPayment[m.AggregateKey], m)
	}
	matched, notOne := 0, 0
	for _, p := range pays {
		matched += len(perPayment[p.Key])
		if len(perPayment[p.Key]) != 1 {
			notOne++
		}
	}
	perPaymentRows := 0.0
	if len(pays) > 0 {
		perPaymentRows = float64(matched) / float64(len(pays))
	}
	r.SetMetric("outbox_rows_per_payment", perPaymentRows)
	r.SetMetric("payments_without_exactly_one_outbox_row", float64(notOne))
	r.SetMetric("crash_free_payments", float64(len(pays)))
	r.SetMetric("crash_free_outbox_rows", float64(len(msgs)))
	orphans, err := auditor.Count(ctx, store.OrphanPaymentsSQL)
	if err != nil {
		return nil, err
	}
	r.SetMetric("crash_free_orphans", float64(orphans))
	expectDocumented(r, env.Scenario.Checks, map[string]float64{"orphans_before": 1, "orphans_after": 0, "outbox_rows_per_payment": 1})

	if r.Schema, err = auditor.Schema(ctx); err != nil {
		return nil, err
	}
	r.Timeline = timeline.Events()
	crashTable := lab.Table{Title: "After each crash: what a restarted instance finds (durable state only)",
		Note: "Read on a fresh connection from session14-before.db and session14-after.db in the run folder. An orphan is a payment " +
			"no outbox message will ever act on; \"Pending for a worker\" is what a worker's plain SELECT of Pending messages returns.",
		Columns: []string{"Phase", "How checkout wrote", "Payments", "Outbox messages", "Orphans", "Pending for a worker"}}
	for _, st := range states {
		crashTable.AddRow(st.phase, st.design, st.payments, st.messages, st.orphans, st.pendingForWorker)
	}
	paymentsTable := lab.Table{Title: "Crash-free run: payments and their outbox rows (from the database)",
		Columns: []string{"IdempotencyKey", "AmountCents", "PaymentStatus", "CreatedAtUtc", "Outbox rows", "Outbox Id", "Outbox Status"}}
	for _, p := range pays {
		ms := perPayment[p.Key]
		id, status := "", ""
		if len(ms) > 0 {
			id, status = fmt.Sprint(ms[0].ID), ms[0].Status
		}
		paymentsTable.AddRow(p.Key, p.AmountCents, p.Status, p.CreatedAt, len(ms), id, status)
	}
	failpoints := lab.Table{Title: "Ledger: failpoints fired",
		Note:    "The crash each phase injected, recorded by the failpoint plan as it fired.",
		Columns: []string{"#", "Phase", "Design", "Point", "Actor", "Payment", "Fault"}}
	for i, f := range fired {
		failpoints.AddRow(i+1, f.phase, f.design, string(f.Point), f.Actor, f.Subject, string(f.Fault))
	}
	r.Tables = append(r.Tables, failpoints, crashTable, paymentsTable)

	m := metricsOf(r)
	if r.Passed() {
		r.Verdict = fmt.Sprintf("The BEFORE design is UNSAFE: two transactions and a crash left %s orphan payment that no worker will ever act on. "+
			"The AFTER design held: one transaction and the same crash left %s orphans (neither row); the crash-free run wrote %s outbox row per payment.",
			m("orphans_before"), m("orphans_after"), m("outbox_rows_per_payment"))
	} else {
		r.Verdict = fmt.Sprintf("DESIGN BROKEN by the %q mistake: failed checks %v. Orphans before %s, after %s; outbox rows per payment %s.",
			env.Variant, r.FailedChecks(), m("orphans_before"), m("orphans_after"), m("outbox_rows_per_payment"))
	}
	return r, nil
}

// crashPhase runs one checkout instance that dies while writing
// crashedPayment, then audits the durable state on a fresh connection.
func crashPhase(ctx context.Context, clk *clock.Manual, event func(actor, action, detail string), phase string, w paymentWrite, path string, plan *failpoint.Plan) (durableState, error) {
	st := durableState{phase: phase, design: w.design}
	setup, err := openWorker(ctx, path)
	if err != nil {
		return st, err
	}
	defer setup.Close()
	if err := setup.Migrate(ctx, store.PaymentsOutbox); err != nil {
		return st, err
	}

	app, err := openWorker(ctx, path)
	if err != nil {
		return st, err
	}
	defer app.Close()
	p := crashedPayment
	p.MessageType = "PaymentCreated"
	p.Payload = fmt.Sprintf(`{"key":%q,"amountCents":%d}`, p.Key, p.AmountCents)
	event(checkout, phase+": create payment", fmt.Sprintf("%s %d cents, %s", p.Key, p.AmountCents, w.design))
	err = w.write(ctx, app, p, clk.Now(), crashAt(plan, p.Key))
	switch {
	case errors.Is(err, store.ErrCrashed):
		event(checkout, "CRASH", fmt.Sprintf("failpoint %s fired: the process died between the payment and the outbox write; its connection closed mid-step, memory gone",
			failpoint.BetweenOutboxWrites))
	case err != nil:
		return st, err
	default:
		event(checkout, phase+": committed", "no crash happened")
	}

	// A restarted instance sees only what was committed.
	restarted, err := openWorker(ctx, path)
	if err != nil {
		return st, err
	}
	defer restarted.Close()
	pays, err := restarted.Payments(ctx)
	if err != nil {
		return st, err
	}
	msgs, err := restarted.Messages(ctx)
	if err != nil {
		return st, err
	}
	if st.orphans, err = restarted.Count(ctx, store.OrphanPaymentsSQL); err != nil {
		return st, err
	}
	pending, err := restarted.LoadPending(ctx)
	if err != nil {
		return st, err
	}
	st.payments, st.messages, st.pendingForWorker = len(pays), len(msgs), len(pending)
	event("restart", phase+": durable state", fmt.Sprintf("payments %d, outbox messages %d, orphans %d; a worker's load of Pending messages returns %d",
		st.payments, st.messages, st.orphans, st.pendingForWorker))
	return st, nil
}

// crashAt is the failpoint callback the store consults between the payment
// and the outbox write of key: it crashes when plan says so.
func crashAt(plan *failpoint.Plan, key string) func() bool {
	return func() bool { return plan.Fire(failpoint.BetweenOutboxWrites, checkout, key) == failpoint.Crash }
}

// firedFailpoint is one fired failpoint and the phase it fired in.
type firedFailpoint struct {
	phase, design string
	failpoint.Firing
}
