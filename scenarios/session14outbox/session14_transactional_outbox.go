// Package session14outbox is the lesson session-14-transactional-outbox: its
// Lesson (the sequence, the checks, the variants and what the registry's
// tests read to prove it), the stages and actors only it uses, its proofs
// (proofs.go) and its tests.
package session14outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/clock"
	"github.com/outboxlab/outboxlab/failpoint"
	"github.com/outboxlab/outboxlab/instance"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/provider"
	"github.com/outboxlab/outboxlab/store"
)

// crashPhaseCount is how many crash phases a run plays: the "before" and
// the "after".
const crashPhaseCount = 2

// crashedPayment is the payment the checkout is writing when it dies.
var crashedPayment = cast.PaymentCreated(cast.SeedPayments[0])

// Lesson is session-14-transactional-outbox, as the registry lists it:
// "Session 14 (prequel): the payment and its outbox message commit together,
// or not at all".
var Lesson = lesson.Scenario{
	Name:    "session-14-transactional-outbox",
	Session: "Session-14",
	FileTag: "Transactional-Outbox",
	Title:   "Session 14 (prequel): the payment and its outbox message commit together, or not at all",
	Design:  lab.Safe,
	Figures: map[string]float64{"orphans_before": 1, "orphans_after": 0, "outbox_rows_per_payment": 1},
	Teaches: "This report has two halves. BEFORE, the broken design, reproduced on purpose: checkout writes the payment in " +
		"one transaction and its outbox message in a second; the process dies between them (a failpoint closes its " +
		"connection mid-step), and the committed payment is left with no message, so no worker will ever act on it: an " +
		"orphan. That half passes when the orphan is reproduced; it shows the two-transaction design " +
		"is unsafe. AFTER, the design this lesson teaches (hence \"safe\" above): both inserts in one transaction; the same " +
		"crash leaves neither row, because the database discards the uncommitted transaction. Both orphan counts are taken only " +
		"when the failpoint really fired and killed the instance. A crash-free run then shows exactly one outbox row per " +
		"payment, and the fake provider's create payment called once per key by checkout, only after the commit (a crashed " +
		"write never reaches the provider).",
	DoesNotSolve: "The outbox makes the intent durable; it says nothing about who processes it. Two workers " +
		"that both read the Pending messages process everything twice (session 15), and a relay that publishes " +
		"a message may still crash before recording it, so the message is offered at least once, not exactly once.",
	Statements: []store.Stmt{
		store.InsertPayment,
		store.InsertOutbox,
		store.OrphanPayments,
	},
	Set: store.PaymentWriteLesson,
	Checks: []lesson.CheckDoc{
		{Name: "orphans_before", Measure: true, About: "BEFORE: payments left with no outbox message when checkout wrote in {before_design} and " +
			"died between its inserts (counted only if the crash really killed the instance)"},
		{Name: "orphans_after", About: "AFTER: payments left with no outbox message when checkout wrote in {after_design} and " +
			"died at the same point (counted only if the crash really killed the instance)"},
		{Name: "rows_after_crash", About: "AFTER: payments + outbox messages a restarted instance finds after that crash"},
		{Name: "crashes_injected", About: "phases in which the failpoint fired and killed the checkout instance (connection closed, no more queries answered)"},
		{Name: "outbox_rows_per_payment", About: "outbox rows per payment after the crash-free run (the fewest, or the most when every payment has at least one)"},
		{Name: "keys_not_created_exactly_once", About: "keys the provider's create payment did not record exactly once, by checkout after its commit (a crashed write never reaches it)"},
	},
	Variants: []lesson.Variant{
		{Name: "two-transactions", Swaps: []store.Stmt{store.InsertPaymentAlone, store.InsertOutboxAlone}, Mistake: "the \"after\" still commits the payment and the outbox row in two transactions, so the same crash leaves an orphan",
			Breaks: []string{"orphans_after", "rows_after_crash"},
			Shows: "Written in {after_design}, the crash between the payment's commit and the message's leaves {@orphan} " +
				"committed with no outbox message (orphans after: {orphans_after}): no worker will ever be told to check " +
				"it at the provider, so it stays Pending for good. Only one transaction keeps the invariant that a payment " +
				"and its message exist together or not at all."},
	},
	// The "before" always writes in two transactions; the "after"'s design
	// is the run's (a variant's mistake changes it), recorded by the run.
	Settings: func(lesson.Options) map[string]string {
		return map[string]string{"before_design": designName(store.PaymentWriteTwoTransactions)}
	},
	Breakers:  breakers(),
	Processes: processes,
	// The crash is the failpoint plan and a closed connection, not a
	// statement: no swap can keep it from firing or from killing the
	// instance, and only a crash that did not happen sends a key to the
	// provider twice. The named test runs the lesson with a changed design.
	BrokenByTest: map[string]string{
		"crashes_injected":              "TestTransactionalOutboxChecksCanFail",
		"keys_not_created_exactly_once": "TestTransactionalOutboxChecksCanFail",
	},
	Run: func(ctx context.Context, env *lesson.Env) (*lab.Result, error) {
		return runTransactionalOutbox(ctx, env, lesson.Swapped(env, lessonOutboxDesign(env)))
	},
}

// outboxDesign is how each phase of session 14 writes a payment: a
// statement set per phase (a variant swaps the "after"'s), whether the
// crash is armed, and, for tests, a checkout that stands in for the
// instance.
type outboxDesign struct {
	before, after crashPhaseDesign
	crashFree     store.PaymentWrite
	// crashFreePlan (nil in the lesson) may arm failpoints in the crash-free run.
	crashFreePlan *failpoint.Plan
}

// crashPhaseDesign is one crash phase: how checkout writes, whether the
// failpoint between the two inserts is armed, and, for tests, a checkout
// that stands in for the instance (nil: the instance itself).
type crashPhaseDesign struct {
	write  store.PaymentWrite
	disarm bool
	wrap   func(instance.Checkout) instance.Checkout
}

// lessonOutboxDesign is the lesson's design: the broken "before", and the
// one-transaction write of the "after" and the crash-free run, the
// "after"'s with the variant's mistakes in it.
func lessonOutboxDesign(env *lesson.Env) outboxDesign {
	return outboxDesign{
		before:    crashPhaseDesign{write: store.PaymentWriteTwoTransactions},
		after:     crashPhaseDesign{write: lesson.VariantSet(env, store.PaymentWriteLesson)},
		crashFree: store.PaymentWriteLesson,
	}
}

// designName says how a payment write commits.
func designName(w store.PaymentWrite) string {
	if w.Split() {
		return "two transactions"
	}
	return "one transaction"
}

// durableState is what a fresh connection finds after a crash, and whether
// the crash really happened.
type durableState struct {
	phase, design      string
	payments, messages int
	orphans            int
	orphanKeys         []string // the orphaned payments' keys, read from the database
	pendingForWorker   int      // what a worker's LoadPending would pick up
	fired              bool     // the failpoint plan recorded the crash
	died               bool     // the write reported the crash and the instance is gone
	deathEvidence      string   // how the lab knows the instance is gone
	providerCalls      int      // provider creation calls made in this phase
}

// crashed says the phase measured a real crash.
func (st durableState) crashed() bool { return st.fired && st.died }

// session14Run is one run's clock, timeline and provider.
type session14Run struct {
	env      *lesson.Env
	clk      *clock.Manual
	timeline lab.Timeline
	prov     *provider.Provider
	fired    []firedFailpoint
}

func (run *session14Run) event(kind lab.Kind, subject, actor, action, detail string) {
	run.timeline.Add(lab.Event{At: clock.Format(run.clk.Now()), Kind: kind, Subject: subject, Actor: actor, Action: action, Detail: detail})
}

func runTransactionalOutbox(ctx context.Context, env *lesson.Env, design outboxDesign) (*lab.Result, error) {
	// The payment provider is one external service for the whole run.
	run := &session14Run{env: env, clk: clock.NewManual(cast.LessonStart.Add(-time.Minute)), prov: provider.New()}
	r := &lab.Result{}

	states, err := run.crashPhases(ctx, design)
	if err != nil {
		return nil, err
	}
	measureCrashes(r, states)
	castCrashes(r, states)
	pays, perPayment, err := run.crashFreeRun(ctx, design, r)
	if err != nil {
		return nil, err
	}
	lesson.ExpectDocumented(r, env.Scenario.Checks, map[string]float64{
		"orphans_before": 1, "orphans_after": 0, "rows_after_crash": 0, "crashes_injected": 2,
		"outbox_rows_per_payment": 1, "keys_not_created_exactly_once": 0,
	})
	r.Timeline = run.timeline.Events()
	r.Tables = append(r.Tables, run.tables(states, pays, perPayment)...)
	r.Verdict = transactionalOutboxVerdict(env, r)
	return r, nil
}

// crashPhases runs the "before" and the "after", each in its own database,
// each with the same crash at the same point for the same payment.
func (run *session14Run) crashPhases(ctx context.Context, design outboxDesign) ([]durableState, error) {
	var states []durableState
	for _, phase := range []struct {
		name   string
		design crashPhaseDesign
		path   string
	}{
		{"before", design.before, run.env.ExtraDatabasePath("session14-before")},
		{"after", design.after, run.env.ExtraDatabasePath("session14-after")},
	} {
		plan := failpoint.NewPlan()
		if !phase.design.disarm {
			plan.Arm(failpoint.Rule{Point: failpoint.BetweenOutboxWrites, Actor: cast.Checkout, Subject: crashedPayment.Key, Fault: failpoint.Crash})
		}
		st, err := run.crashPhase(ctx, phase.name, phase.design, phase.path, plan)
		if err != nil {
			return nil, err
		}
		states = append(states, st)
		for _, f := range plan.Fired() {
			run.fired = append(run.fired, firedFailpoint{phase: phase.name, design: st.design, Firing: f})
		}
		run.clk.Advance(time.Second)
	}
	return states, nil
}

// measureCrashes sets the crash phases' figures. An orphan count proves
// something only after a real crash.
func measureCrashes(r *lab.Result, states []durableState) {
	before, after := states[0], states[1]
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
}

// castCrashes records what the crash phases' texts quote from the run: how
// checkout wrote in each phase, and the payment each phase left orphaned,
// read from its database (none cast when it left none).
func castCrashes(r *lab.Result, states []durableState) {
	r.SetSetting("before_design", states[0].design)
	r.SetSetting("after_design", states[1].design)
	if len(states[0].orphanKeys) > 0 {
		r.SetCast("before_orphan", states[0].orphanKeys[0])
	}
	if len(states[1].orphanKeys) > 0 {
		r.SetCast("orphan", states[1].orphanKeys[0])
	}
}

// crashFreeRun has checkout write the six payments in the main database
// students may keep, then audits it from a restarted instance.
func (run *session14Run) crashFreeRun(ctx context.Context, design outboxDesign, r *lab.Result) ([]store.Payment, map[string][]store.Message, error) {
	// The lab's own connection: it creates the schema, and once checkout
	// is done it reads only what checkout committed, as a restarted
	// instance would.
	auditor, err := run.env.Open(ctx, run.env.DatabasePath())
	if err != nil {
		return nil, nil, err
	}
	defer auditor.Close()
	if err := auditor.Migrate(ctx, store.PaymentsOutbox); err != nil {
		return nil, nil, err
	}
	run.clk.Set(cast.LessonStart)
	checkout, err := run.env.Instances.Checkout(ctx, run.env.DatabasePath(), "crash-free run", design.crashFree)
	if err != nil {
		return nil, nil, err
	}
	defer checkout.Close(ctx)
	run.event(lab.KindNote, "", cast.Checkout, "start", instance.WithHow(fmt.Sprintf("crash-free run (%s): %d payments, own connection, no failpoint armed", designName(design.crashFree), len(cast.SeedPayments)), checkout.Where()))
	for _, p := range cast.SeedPayments {
		w, err := checkout.Write(ctx, cast.PaymentCreated(p), run.clk.Now(), crashAt(design.crashFreePlan, p.Key))
		if err != nil {
			return nil, nil, err
		}
		if w.Crashed {
			run.event(lab.KindCrash, p.Key, cast.Checkout, "CRASH", instance.WithHow(p.Key+": the process died mid-write; the provider was not called", w.Death))
			break
		}
		run.prov.Create(cast.Checkout, p.Key)
		run.event(lab.KindCommit, p.Key, cast.Checkout, "create payment", p.Key+": payment row and outbox row committed, then registered at the provider")
		run.clk.Advance(time.Second)
	}
	if err := checkout.Close(ctx); err != nil {
		return nil, nil, err
	}
	return run.auditCrashFree(ctx, auditor, r)
}

// auditCrashFree measures the crash-free run's figures.
func (run *session14Run) auditCrashFree(ctx context.Context, auditor *store.DB, r *lab.Result) ([]store.Payment, map[string][]store.Message, error) {
	pays, err := store.NewPayments(auditor, store.PaymentWriteLesson).List(ctx)
	if err != nil {
		return nil, nil, err
	}
	msgs, err := store.NewOutbox(auditor, store.OutboxLesson).Messages(ctx)
	if err != nil {
		return nil, nil, err
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
	creations := run.prov.CreationCalls()
	perKey := provider.CountByKey(creations)
	wrongKeys := 0
	for _, p := range cast.SeedPayments {
		if perKey[p.Key] != 1 {
			wrongKeys++
		}
	}
	r.SetMetric("keys_not_created_exactly_once", float64(wrongKeys))
	r.SetMetric("provider_creation_calls", float64(len(creations)))
	r.SetMetric("payments_without_exactly_one_outbox_row", float64(notOne))
	r.SetMetric("crash_free_payments", float64(len(pays)))
	r.SetMetric("crash_free_outbox_rows", float64(len(msgs)))
	orphans, err := auditor.Count(ctx, store.OrphanPayments.SQL)
	if err != nil {
		return nil, nil, err
	}
	r.SetMetric("crash_free_orphans", float64(orphans))
	if r.Schema, err = auditor.Schema(ctx); err != nil {
		return nil, nil, err
	}
	return pays, perPayment, nil
}

// tables builds the report's tables: the failpoints that fired, what each
// crash left, the crash-free payments and the provider's creation ledger.
func (run *session14Run) tables(states []durableState, pays []store.Payment, perPayment map[string][]store.Message) []lab.Table {
	dead := "\"Instance dead\" from " + states[0].deathEvidence
	crashTable := lab.Table{Title: "After each crash: what a restarted instance finds (durable state only)",
		Note: "Read on a fresh connection from session14-before.db and session14-after.db in the run folder. An orphan is a payment " +
			"no outbox message will ever act on; \"Pending for a worker\" is what a worker's plain SELECT of Pending messages returns. " +
			"\"Crash fired\" comes from the failpoint plan, " + dead + "; " +
			"checkout calls the provider only after its write committed.",
		Columns: []string{"Phase", "How checkout wrote", "Crash fired", "Instance dead", "Payments", "Outbox messages", "Orphans", "Pending for a worker", "Provider create calls"}}
	for _, st := range states {
		crashTable.AddRow(st.phase, st.design, st.fired, st.died, st.payments, st.messages, st.orphans, st.pendingForWorker, st.providerCalls)
	}
	creations := run.prov.CreationCalls()
	perKey := provider.CountByKey(creations)
	paymentsTable := lab.Table{Title: "Crash-free run: payments and their outbox rows (from the database)",
		Note:    "Each payment with its outbox rows, read from the database, and the provider's creation calls for its key.",
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
	for i, f := range run.fired {
		failpoints.AddRow(i+1, f.phase, f.design, string(f.Point), f.Actor, f.Subject, string(f.Fault))
	}
	creationLedger := lab.Table{Title: cast.CreationLedgerTitle,
		Note:    "The provider's own record of \"create payment\", in call order: checkout calls it once per payment, after the commit. The crashed writes of both phases never reached it.",
		Columns: []string{"Call", "Caller", "Key", "Answer"}}
	for _, c := range creations {
		creationLedger.AddRow(c.Seq, c.Caller, c.Key, c.Answer)
	}
	return []lab.Table{failpoints, crashTable, paymentsTable, creationLedger}
}

// transactionalOutboxVerdict says what the run showed.
func transactionalOutboxVerdict(env *lesson.Env, r *lab.Result) string {
	m := lesson.MetricsOf(r)
	switch {
	case r.Passed():
		return r.Fill(fmt.Sprintf("The two-transaction design is UNSAFE (%s orphan reproduced: the crash between its two commits left "+
			"{@before_orphan} with no message, a payment no worker will ever act on); the one-transaction design held: the same crash left %s orphans and neither row "+
			"(%s rows), and the crash-free run wrote exactly %s outbox row per payment for %s payments, with the provider's create "+
			"called once per key (%s calls), each after its commit.",
			m("orphans_before"), m("orphans_after"), m("rows_after_crash"), m("outbox_rows_per_payment"), m("crash_free_payments"), m("provider_creation_calls")))
	case env.Variant != "":
		return fmt.Sprintf("Orphans before %s, after %s; rows after the crash %s; "+
			"outbox rows per payment %s.", m("orphans_before"), m("orphans_after"), m("rows_after_crash"), m("outbox_rows_per_payment"))
	default:
		return fmt.Sprintf("NOT SHOWN: failed checks %v. Crashes that really killed the instance %s of %d; orphans before %s, after %s "+
			"(? = not measured: no real crash); rows after the crash %s; outbox rows per payment %s; keys not created exactly once %s.",
			r.FailedChecks(), m("crashes_injected"), crashPhaseCount, m("orphans_before"), m("orphans_after"), m("rows_after_crash"),
			m("outbox_rows_per_payment"), m("keys_not_created_exactly_once"))
	}
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
func (run *session14Run) crashPhase(ctx context.Context, phase string, design crashPhaseDesign, path string, plan *failpoint.Plan) (durableState, error) {
	st := durableState{phase: phase, design: designName(design.write)}
	setup, err := run.env.Open(ctx, path)
	if err != nil {
		return st, err
	}
	defer setup.Close()
	if err := setup.Migrate(ctx, store.PaymentsOutbox); err != nil {
		return st, err
	}
	checkout, err := run.env.Instances.Checkout(ctx, path, phase, design.write)
	if err != nil {
		return st, err
	}
	defer checkout.Close(ctx)
	if design.wrap != nil {
		checkout = design.wrap(checkout)
	}
	p := crashedPayment
	callsBefore := len(run.prov.CreationCalls())
	run.event(lab.KindNote, p.Key, cast.Checkout, phase+": create payment", instance.WithHow(fmt.Sprintf("%s %d cents, %s", p.Key, p.AmountCents, st.design), checkout.Where()))
	w, err := checkout.Write(ctx, p, run.clk.Now(), crashAt(plan, p.Key))
	if err != nil {
		return st, err
	}
	if !w.Crashed {
		if err := checkout.Close(ctx); err != nil {
			return st, err
		}
		run.prov.Create(cast.Checkout, p.Key)
		run.event(lab.KindCommit, p.Key, cast.Checkout, phase+": committed", "no crash happened; then registered at the provider")
	} else {
		st.died, st.deathEvidence = checkout.Dead(ctx)
		run.event(lab.KindCrash, p.Key, cast.Checkout, "CRASH", crashDetail(st.died, w))
	}
	for _, f := range plan.Fired() {
		st.fired = st.fired || f.Fault == failpoint.Crash
	}
	st.providerCalls = len(run.prov.CreationCalls()) - callsBefore
	return run.durableState(ctx, st, path)
}

// crashDetail is the CRASH line of a write that died at the failpoint:
// how the instance died and what its write had left.
func crashDetail(died bool, w instance.Written) string {
	switch {
	case !died:
		return "the write reported a crash, yet the instance still answers queries: no real crash"
	case w.Death == "":
		return fmt.Sprintf("failpoint %s fired: the process died between the payment and the outbox write; its connection closed mid-step, memory gone; "+
			"the provider was never called", failpoint.BetweenOutboxWrites)
	}
	left := "its payment transaction had committed and its outbox transaction had not begun"
	if w.OpenTransaction {
		left = "its transaction was open: the payment row inserted, not committed, the outbox row not written"
	}
	return fmt.Sprintf("failpoint %s: %s; %s; the provider was never called", failpoint.BetweenOutboxWrites, w.Death, left)
}

// durableState is what a restarted instance sees: only what was committed.
func (run *session14Run) durableState(ctx context.Context, st durableState, path string) (durableState, error) {
	restarted, err := run.env.Open(ctx, path)
	if err != nil {
		return st, err
	}
	defer restarted.Close()
	pays, err := store.NewPayments(restarted, store.PaymentWriteLesson).List(ctx)
	if err != nil {
		return st, err
	}
	outbox := store.NewOutbox(restarted, store.OutboxLesson)
	msgs, err := outbox.Messages(ctx)
	if err != nil {
		return st, err
	}
	if st.orphans, err = restarted.Count(ctx, store.OrphanPayments.SQL); err != nil {
		return st, err
	}
	st.orphanKeys = orphanKeys(pays, msgs)
	pending, err := outbox.LoadPending(ctx)
	if err != nil {
		return st, err
	}
	st.payments, st.messages, st.pendingForWorker = len(pays), len(msgs), len(pending)
	run.event(lab.KindNote, "", "restart", st.phase+": durable state", fmt.Sprintf("payments %d, outbox messages %d, orphans %d; a worker's load of Pending messages returns %d",
		st.payments, st.messages, st.orphans, st.pendingForWorker))
	return st, nil
}

// orphanKeys are the keys of the payments among pays that no message of
// msgs is about.
func orphanKeys(pays []store.Payment, msgs []store.Message) []string {
	told := map[string]bool{}
	for _, m := range msgs {
		told[m.AggregateKey] = true
	}
	var keys []string
	for _, p := range pays {
		if !told[p.Key] {
			keys = append(keys, p.Key)
		}
	}
	return keys
}

// crashAt is the failpoint callback the store consults between the payment
// and the outbox write of key: it crashes when plan says so. With no plan
// there is none.
func crashAt(plan *failpoint.Plan, key string) func() bool {
	if plan == nil {
		return nil
	}
	return func() bool { return plan.Fire(failpoint.BetweenOutboxWrites, cast.Checkout, key) == failpoint.Crash }
}

// firedFailpoint is one fired failpoint and the phase it fired in.
type firedFailpoint struct {
	phase, design string
	failpoint.Firing
}
