package scenarios

import (
	"context"
	"fmt"
	"time"

	"github.com/outboxlab/outboxlab/clock"
	"github.com/outboxlab/outboxlab/failpoint"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/provider"
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
	Teaches: "This report has two halves. BEFORE, the broken design, reproduced on purpose: checkout writes the payment in " +
		"one transaction and its outbox message in a second; the process dies between them (a failpoint closes its " +
		"connection mid-step), and the committed payment is left with no message, so no worker will ever act on it: an " +
		"orphan. That half passes when the orphan is reproduced (orphans_before = 1); it shows the two-transaction design " +
		"is unsafe. AFTER, the design this lesson teaches (hence \"safe\" above): both inserts in one transaction; the same " +
		"crash leaves neither row, because SQLite discards the uncommitted transaction. Both orphan counts are taken only " +
		"when the failpoint really fired and killed the instance. A crash-free run then shows exactly one outbox row per " +
		"payment, and the fake provider's create payment called once per key by checkout, only after the commit (a crashed " +
		"write never reaches the provider).",
	DoesNotSolve: "The outbox makes the intent durable; it says nothing about who processes it. Two workers " +
		"that both read the Pending messages process everything twice (session 15), and a relay that publishes " +
		"a message may still crash before recording it, so the message is offered at least once, not exactly once.",
	Statements: []lab.Statement{
		{Name: "payment row", SQL: store.InsertPaymentSQL},
		{Name: "outbox row (the same transaction)", SQL: store.InsertOutboxSQL},
		{Name: "orphans: payments no outbox message will act on", SQL: store.OrphanPaymentsSQL},
	},
	Checks: []CheckDoc{
		{"orphans_before", "BEFORE: two transactions + a crash between them left 1 payment with no outbox message (counted only if the crash really killed the instance)"},
		{"orphans_after", "AFTER: one transaction + the same crash left no orphan (counted only if the crash really killed the instance)"},
		{"rows_after_crash", "AFTER: the crash left neither row: payments + outbox messages a restarted instance finds"},
		{"crashes_injected", "the failpoint fired and killed the checkout instance in both phases (connection closed, no more queries answered)"},
		{"outbox_rows_per_payment", "after the crash-free run, every payment has exactly one outbox row (the fewest and the most per payment are both 1)"},
		{"keys_not_created_exactly_once", "the provider's create payment ran exactly once per key, by checkout after each commit, never for a crashed write"},
	},
	Variants: []Variant{
		{Name: variantTwoTransactions, Mistake: "the \"after\" still commits the payment and the outbox row in two transactions, so the same crash leaves an orphan",
			Breaks: []string{"orphans_after", "rows_after_crash"}},
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

// durableState is what a fresh connection finds after a crash, and whether
// the crash really happened.
type durableState struct {
	phase, design      string
	payments, messages int
	orphans            int
	pendingForWorker   int  // what a worker's LoadPending would pick up
	fired              bool // the failpoint plan recorded the crash
	died               bool // the write reported the crash and the instance answers no query
	providerCalls      int  // provider creation calls made in this phase
}

// crashed says the phase measured a real crash.
func (st durableState) crashed() bool { return st.fired && st.died }

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
	// The payment provider is one external service for the whole run.
	prov := provider.New()

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
		st, err := crashPhase(ctx, clk, event, prov, phase.name, phase.write, phase.path, plan)
		if err != nil {
			return nil, err
		}
		states = append(states, st)
		for _, f := range plan.Fired() {
			fired = append(fired, firedFailpoint{phase: phase.name, design: phase.write.design, Firing: f})
		}
		clk.Advance(time.Second)
	}
	before, after := states[0], states[1]
	// An orphan count proves something only after a real crash.
	if before.crashed() {
		r.SetMetric("orphans_before", float64(before.orphans))
	}
	if after.crashed() {
		r.SetMetric("orphans_after", float64(after.orphans))
	}
	r.SetMetric("rows_after_crash", float64(after.payments+after.messages))
	crashes := 0
	for _, st := range states {
		if st.crashed() {
			crashes++
		}
	}
	r.SetMetric("crashes_injected", float64(crashes))

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
		if isCrash(err) {
			event(checkout, "CRASH", p.Key+": the process died mid-write; the provider was not called")
			break
		}
		if err != nil {
			return nil, err
		}
		prov.Create(checkout, p.Key)
		event(checkout, "create payment", p.Key+": payment row and outbox row committed, then registered at the provider")
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
	notOne := 0
	for _, p := range pays {
		if len(perPayment[p.Key]) != 1 {
			notOne++
		}
	}
	if rows, ok := outboxRowsPerPayment(pays, perPayment); ok {
		r.SetMetric("outbox_rows_per_payment", rows)
	}
	creations := prov.CreationCalls()
	perKey := provider.CountByKey(creations)
	wrongKeys := 0
	for _, p := range seedPayments {
		if perKey[p.Key] != 1 {
			wrongKeys++
		}
	}
	r.SetMetric("keys_not_created_exactly_once", float64(wrongKeys))
	r.SetMetric("provider_creation_calls", float64(len(creations)))
	r.SetMetric("payments_without_exactly_one_outbox_row", float64(notOne))
	r.SetMetric("crash_free_payments", float64(len(pays)))
	r.SetMetric("crash_free_outbox_rows", float64(len(msgs)))
	orphans, err := auditor.Count(ctx, store.OrphanPaymentsSQL)
	if err != nil {
		return nil, err
	}
	r.SetMetric("crash_free_orphans", float64(orphans))
	expectDocumented(r, env.Scenario.Checks, map[string]float64{
		"orphans_before": 1, "orphans_after": 0, "rows_after_crash": 0, "crashes_injected": 2,
		"outbox_rows_per_payment": 1, "keys_not_created_exactly_once": 0,
	})

	if r.Schema, err = auditor.Schema(ctx); err != nil {
		return nil, err
	}
	r.Timeline = timeline.Events()
	crashTable := lab.Table{Title: "After each crash: what a restarted instance finds (durable state only)",
		Note: "Read on a fresh connection from session14-before.db and session14-after.db in the run folder. An orphan is a payment " +
			"no outbox message will ever act on; \"Pending for a worker\" is what a worker's plain SELECT of Pending messages returns. " +
			"\"Crash fired\" comes from the failpoint plan, \"Instance dead\" from the crashed instance refusing a query afterwards; " +
			"checkout calls the provider only after its write committed.",
		Columns: []string{"Phase", "How checkout wrote", "Crash fired", "Instance dead", "Payments", "Outbox messages", "Orphans", "Pending for a worker", "Provider create calls"}}
	for _, st := range states {
		crashTable.AddRow(st.phase, st.design, st.fired, st.died, st.payments, st.messages, st.orphans, st.pendingForWorker, st.providerCalls)
	}
	paymentsTable := lab.Table{Title: "Crash-free run: payments and their outbox rows (from the database)",
		Columns: []string{"IdempotencyKey", "AmountCents", "PaymentStatus", "CreatedAtUtc", "Outbox rows", "Outbox Id", "Outbox Status", "Provider create calls"}}
	for _, p := range pays {
		ms := perPayment[p.Key]
		id, status := "", ""
		if len(ms) > 0 {
			id, status = fmt.Sprint(ms[0].ID), ms[0].Status
		}
		paymentsTable.AddRow(p.Key, p.AmountCents, p.Status, p.CreatedAt, len(ms), id, status, perKey[p.Key])
	}
	failpoints := lab.Table{Title: "Ledger: failpoints fired",
		Note:    "The crash each phase injected, recorded by the failpoint plan as it fired.",
		Columns: []string{"#", "Phase", "Design", "Point", "Actor", "Payment", "Fault"}}
	for i, f := range fired {
		failpoints.AddRow(i+1, f.phase, f.design, string(f.Point), f.Actor, f.Subject, string(f.Fault))
	}
	creationLedger := lab.Table{Title: creationLedgerTitle,
		Note:    "The provider's own record of \"create payment\", in call order: checkout calls it once per payment, after the commit. The crashed writes of both phases never reached it.",
		Columns: []string{"Call", "Caller", "Key", "Answer"}}
	for _, c := range creations {
		creationLedger.AddRow(c.Seq, c.Caller, c.Key, c.Answer)
	}
	r.Tables = append(r.Tables, failpoints, crashTable, paymentsTable, creationLedger)

	m := metricsOf(r)
	switch {
	case r.Passed():
		r.Verdict = fmt.Sprintf("The two-transaction design is UNSAFE (%s orphan reproduced: the crash between its two commits left a payment "+
			"that no worker will ever act on); the one-transaction design held: the same crash left %s orphans and neither row "+
			"(%s rows), and the crash-free run wrote exactly %s outbox row per payment for %s payments, with the provider's create "+
			"called once per key (%s calls), each after its commit.",
			m("orphans_before"), m("orphans_after"), m("rows_after_crash"), m("outbox_rows_per_payment"), m("crash_free_payments"), m("provider_creation_calls"))
	case env.Variant != "":
		r.Verdict = fmt.Sprintf("DESIGN BROKEN by the %q mistake: failed checks %v. Orphans before %s, after %s; rows after the crash %s; "+
			"outbox rows per payment %s.", env.Variant, r.FailedChecks(), m("orphans_before"), m("orphans_after"), m("rows_after_crash"), m("outbox_rows_per_payment"))
	default:
		r.Verdict = fmt.Sprintf("NOT SHOWN: failed checks %v. Crashes that really killed the instance %s of 2; orphans before %s, after %s "+
			"(? = not measured: no real crash); rows after the crash %s; outbox rows per payment %s; keys not created exactly once %s.",
			r.FailedChecks(), m("crashes_injected"), m("orphans_before"), m("orphans_after"), m("rows_after_crash"),
			m("outbox_rows_per_payment"), m("keys_not_created_exactly_once"))
	}
	return r, nil
}

// outboxRowsPerPayment is the crash-free run's figure: 1 only when every
// payment has exactly one outbox row. When the counts differ it reports the
// one that is not 1 (the fewest if that is not 1, else the most), so a
// payment with none and another with two never average out to 1. ok is
// false when there is no payment to judge.
func outboxRowsPerPayment(pays []store.Payment, perPayment map[string][]store.Message) (rows float64, ok bool) {
	if len(pays) == 0 {
		return 0, false
	}
	fewest, most := len(perPayment[pays[0].Key]), len(perPayment[pays[0].Key])
	for _, p := range pays[1:] {
		n := len(perPayment[p.Key])
		fewest, most = min(fewest, n), max(most, n)
	}
	if fewest != 1 {
		return float64(fewest), true
	}
	return float64(most), true
}

// crashPhase runs one checkout instance that dies while writing
// crashedPayment, then audits the durable state on a fresh connection.
// Checkout calls the provider's create payment only once its write has
// committed; a crashed write never reaches it.
func crashPhase(ctx context.Context, clk *clock.Manual, event func(actor, action, detail string), prov *provider.Provider, phase string, w paymentWrite, path string, plan *failpoint.Plan) (durableState, error) {
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
	callsBefore := len(prov.CreationCalls())
	event(checkout, phase+": create payment", fmt.Sprintf("%s %d cents, %s", p.Key, p.AmountCents, w.design))
	err = w.write(ctx, app, p, clk.Now(), crashAt(plan, p.Key))
	switch {
	case isCrash(err):
		// A dead instance answers no query: its connection is gone.
		_, queryErr := app.Payments(ctx)
		st.died = queryErr != nil
		detail := fmt.Sprintf("failpoint %s fired: the process died between the payment and the outbox write; its connection closed mid-step, memory gone; "+
			"the provider was never called", failpoint.BetweenOutboxWrites)
		if !st.died {
			detail = "the write reported a crash, yet the instance still answers queries: no real crash"
		}
		event(checkout, "CRASH", detail)
	case err != nil:
		return st, err
	default:
		prov.Create(checkout, p.Key)
		event(checkout, phase+": committed", "no crash happened; then registered at the provider")
	}
	for _, f := range plan.Fired() {
		st.fired = st.fired || f.Fault == failpoint.Crash
	}
	st.providerCalls = len(prov.CreationCalls()) - callsBefore

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
