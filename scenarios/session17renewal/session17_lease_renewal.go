// Package session17renewal is the lesson session-17-lease-renewal: its
// Lesson (the sequence, the checks, the variants and what the registry's
// tests read to prove it), the stages and actors only it uses, its proofs
// (proofs.go) and its tests.
package session17renewal

import (
	"context"
	"fmt"
	"strings"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/instance"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/store"
)

// The mistake variants of session-17-lease-renewal.
const (
	variantRenewByEventID   = "renew-by-event-id"
	variantAllowShortening  = "allow-shortening"
	variantRenewAfterExpiry = "renew-after-expiry"
)

const (
	s17WorkerA = "Worker-A"
	s17WorkerB = "Worker-B"
	s17EventID = "EVENT-81"
	claimStep  = "claim"
	renewStep  = "renew"
)

// renewalStep is one row of the session-17 step table: who does what at
// which logical time, and whether LESSONS.md says it succeeds.
type renewalStep struct {
	at    int64
	actor string
	kind  string // claimStep or renewStep
	until int64  // the lease a claim asks for, or the deadline a renewal proposes
	ok    bool   // expected: the statement changes 1 row
	// owner and leaseEnd are what the row must hold after the step, read
	// back from the database: who owns the lease and until when.
	owner    string
	leaseEnd int64
	why      string // the rule that decides it
	check    string // the step's check name
	about    string
}

// leaseRenewalSteps are the nine steps of LESSONS.md, in order, in logical
// ticks (milliseconds from cast.LessonStart). Each step's check text is a
// template: its time, actor, the lease end it asks for and the lease it
// meets come from the run (see castLeaseRenewal).
var leaseRenewalSteps = []renewalStep{
	{at: 100, actor: s17WorkerA, kind: claimStep, until: 150, ok: true, owner: s17WorkerA, leaseEnd: 150,
		why:   "no live lease: the claimer gets a new token (tA)",
		check: "step_1_claim_succeeds", about: "{step_1_at}: {@step_1_actor} claims {@event} with a lease until {step_1_until}"},
	{at: 110, actor: s17WorkerB, kind: renewStep, until: 180, ok: false, owner: s17WorkerA, leaseEnd: 150,
		why:   "the renewer holds no current token",
		check: "step_2_renew_without_token_refused", about: "{step_2_at}: {@step_2_actor}, holding no token, cannot renew " +
			"the lease of {@step_2_holder}"},
	{at: 120, actor: s17WorkerA, kind: renewStep, until: 140, ok: false, owner: s17WorkerA, leaseEnd: 150,
		why:   "the proposed end would shorten the lease",
		check: "step_3_shorten_refused", about: "{step_3_at}: {@step_3_actor}'s renewal to {step_3_until} is refused: " +
			"it would shorten the lease, which ends at {step_3_before}"},
	{at: 130, actor: s17WorkerA, kind: renewStep, until: 200, ok: true, owner: s17WorkerA, leaseEnd: 200,
		why:   "current token, lease live, a longer deadline",
		check: "step_4_renew_extends", about: "{step_4_at}: {@step_4_actor} renews to {step_4_until}: current token, " +
			"live lease, longer deadline"},
	{at: 160, actor: s17WorkerB, kind: claimStep, until: 210, ok: false, owner: s17WorkerA, leaseEnd: 200,
		why:   "the owner's lease is still live",
		check: "step_5_claim_blocked_by_live_lease", about: "{step_5_at}: {@step_5_actor}'s claim is refused: the lease " +
			"of {@step_5_holder} is live until {step_5_before}"},
	{at: 200, actor: s17WorkerA, kind: renewStep, until: 250, ok: false, owner: s17WorkerA, leaseEnd: 200,
		why:   "the lease expired at its end (now = lease_until)",
		check: "step_6_renew_at_expiry_refused", about: "{step_6_at}: {@step_6_actor}'s renewal to {step_6_until} is " +
			"refused: the lease expired at {step_6_before}"},
	{at: 200, actor: s17WorkerB, kind: claimStep, until: 260, ok: true, owner: s17WorkerB, leaseEnd: 260,
		why:   "the lease has expired: the claimer gets a new token (tB)",
		check: "step_7_claim_after_expiry", about: "{step_7_at}: {@step_7_actor} claims with a lease until " +
			"{step_7_until} and gets a new token"},
	{at: 210, actor: s17WorkerA, kind: renewStep, until: 270, ok: false, owner: s17WorkerB, leaseEnd: 260,
		why:   "its token is stale: a newer claim holds the event",
		check: "step_8_stale_renew_refused", about: "{step_8_at}: {@step_8_actor}'s renewal with its old token is " +
			"refused: the token is stale"},
	{at: 220, actor: s17WorkerB, kind: renewStep, until: 300, ok: true, owner: s17WorkerB, leaseEnd: 300,
		why:   "current token, lease live, a longer deadline",
		check: "step_9_new_owner_renews", about: "{step_9_at}: {@step_9_actor} renews to {step_9_until}"},
}

func leaseRenewalChecks() []lesson.CheckDoc {
	docs := []lesson.CheckDoc{
		{Name: "steps_as_expected", About: "every step changed what it should: its rows affected, and the owner and lease end read back from the database after it"},
	}
	for _, s := range leaseRenewalSteps {
		docs = append(docs, lesson.CheckDoc{Name: s.check, About: s.about})
	}
	return append(docs, lesson.CheckDoc{Name: "renewal_after_delivery_rows",
		About: "rows changed by {@late_renewer}'s renewal of {@event} after its own ack under the same token"})
}

// After the nine steps (LESSONS.md): Worker-B acknowledges EVENT-81 under
// its token, delivering it, then renews it; the renewal must change 0
// rows, which only its delivered = 0 guard can decide (B's token is
// current, its lease live and the deadline longer).
const (
	s17AckAt       = 230
	s17LateRenewAt = 240
	s17LateRenewTo = 320
)

// Lesson is session-17-lease-renewal, as the registry lists it: "Session 17:
// renewing a lease under a fencing token".
var Lesson = lesson.Scenario{
	Name:    "session-17-lease-renewal",
	Session: "Session-17",
	FileTag: "Lease-Renewal",
	Title:   "Session 17: renewing a lease under a fencing token",
	Design:  lab.Safe,
	Figures: map[string]float64{"steps_as_expected": 9, "renewal_after_delivery_rows": 0},
	Teaches: "A worker that needs more time renews its lease with one guarded UPDATE: it must present the " +
		"current token, the event must be pending, the lease must still be live (lease_until > now) and the new " +
		"deadline must be longer (lease_until < proposed). A claim needs no live lease. On logical time (shown as clock " +
		"time, the tick beside it), {step_count} steps by {@first_worker} and {@second_worker} on {@event} show each rule " +
		"accepting or refusing, judged by the rows each statement really changed. After them {@late_renewer} acknowledges " +
		"{@event} and then renews it: with its token current, its lease live and a longer deadline, only the " +
		"pending-state guard (delivered = 0) refuses the renewal.",
	DoesNotSolve: "Renewal shortens the window, it does not close it: a worker can renew, then stall past the new " +
		"deadline after it has sent the event and before it records completion (the post-send ambiguity). " +
		"Another worker then sends it again. The lease decides who may write to the row; only an idempotent " +
		"consumer (the inbox, session 18) makes the resend harmless.",
	Statements: []store.Stmt{
		store.ClaimEvent,
		store.RenewLease,
	},
	Set:      store.RelayLesson,
	Checks:   leaseRenewalChecks(),
	Settings: leaseRenewalScript,
	Variants: []lesson.Variant{
		{Name: variantRenewByEventID, Swaps: []store.Stmt{store.RenewByEventID}, Mistake: "the renewal updates WHERE event_id = :id without the token: a worker that holds no token, or a stale one, extends someone else's lease",
			Breaks: []string{"steps_as_expected", "step_2_renew_without_token_refused", "step_3_shorten_refused", "step_8_stale_renew_refused"},
			Shows: "At {step_2_at} {@step_2_actor}, holding no token, renews the lease of {@step_2_holder}: {step_2_changed}, " +
				"the lease read back ends at {step_2_lease}; at {step_8_at} {@step_8_actor}, with a stale token, renews the " +
				"lease of {@step_8_holder}: {step_8_changed}, read back until {step_8_lease}. The renewal that would shorten " +
				"the lease then reads back the end {step_3_lease} instead of {step_3_wanted}; {steps_as_expected} of " +
				"{step_count} steps behaved as specified. Only the current token holder may renew, so the token belongs in " +
				"the renewal's WHERE clause as much as in the ack's."},
		{Name: variantAllowShortening, Swaps: []store.Stmt{store.RenewAllowShortening}, Mistake: "the renewal drops lease_until < :proposed: a \"renewal\" may move the deadline earlier",
			Breaks: []string{"steps_as_expected", "step_3_shorten_refused"},
			Shows: "At {step_3_at} {@step_3_actor}'s renewal to {step_3_until} changes {step_3_changed} and moves the lease " +
				"end from {step_3_before} back to {step_3_lease}, sooner than the owner had already promised itself. A renewal must only move the deadline later (lease_until " +
				"< :proposed), or a delayed, out-of-order renewal cuts a lease short under its owner."},
		{Name: variantRenewAfterExpiry, Golden: true, Swaps: []store.Stmt{store.RenewAfterExpiry}, Mistake: "the renewal drops lease_until > :now: the old owner revives an expired lease and keeps the new claimer out",
			Breaks: []string{"steps_as_expected", "step_6_renew_at_expiry_refused", "step_7_claim_after_expiry", "step_8_stale_renew_refused", "step_9_new_owner_renews"},
			Shows: "At {step_6_at}, the instant the lease of {@step_6_holder} ends, {@step_6_actor}'s renewal to " +
				"{step_6_until} changes {step_6_changed}: {@step_7_actor}'s claim at {step_7_at} changes {step_7_changed}, " +
				"the lease read back after {@step_8_actor}'s renewal at {step_8_at} ends at {step_8_lease}, and the event " +
				"stays with {@final_owner} ({steps_as_expected} of {step_count} steps as specified). An expired lease is over: only a new claim may take it, never a " +
				"late renewal by the old owner."},
	},
	Breakers:  breakers(),
	Guards:    guards(),
	Processes: processes,
	Run: func(ctx context.Context, env *lesson.Env) (*lab.Result, error) {
		return runLeaseRenewal(ctx, env, lesson.StatementSet(env, store.RelayLesson), leaseRenewalSteps)
	},
}

// renewalWorker is one application instance: its relay on its own
// connection and the only thing it remembers, the token of its last
// successful claim (0: none).
type renewalWorker struct {
	relay instance.Relay
	sqls  store.RelaySQL // the statements it runs, whose guards alone can refuse its writes
	token int64
}

// stepResult is what one step observed.
type stepResult struct {
	step     renewalStep
	token    int64 // presented (renew) or obtained (claim)
	rows     int64
	owner    string // read back after the step
	leaseEnd int64
	observed string
	asExpect bool
	busy     int
	refusal  lab.Refusal // a renewal's 0 rows: the guard the row read back names
	// holderBefore and leaseBefore are the owner and lease end read back
	// after the step before: the lease this step met.
	holderBefore string
	leaseBefore  int64
}

// runLeaseRenewal runs steps with the relay statements sqls.
func runLeaseRenewal(ctx context.Context, env *lesson.Env, sqls store.RelaySQL, steps []renewalStep) (*lab.Result, error) {
	setup, err := env.Open(ctx, env.DatabasePath())
	if err != nil {
		return nil, err
	}
	defer setup.Close()
	var timeline lab.Timeline
	if err := seedLeaseRenewal(ctx, setup, store.NewRelay(setup, sqls), &timeline); err != nil {
		return nil, err
	}
	workers := map[string]*renewalWorker{}
	var instances instance.Set
	defer instances.Close(ctx)
	for _, name := range []string{s17WorkerA, s17WorkerB} {
		relay, err := env.Instances.Relay(ctx, env.DatabasePath(), name, sqls)
		if err != nil {
			return nil, err
		}
		instances.Add(relay)
		workers[name] = &renewalWorker{relay: relay, sqls: sqls}
	}
	var results []stepResult
	before := stepResult{} // what the database held before each step
	for _, s := range steps {
		res, err := playRenewalStep(ctx, workers[s.actor], s)
		if err != nil {
			return nil, err
		}
		res.holderBefore, res.leaseBefore = before.owner, before.leaseEnd
		e := lab.Event{At: s17At(s.at), Kind: stepKind(s, res, before), Subject: s17EventID, Actor: s.actor,
			Action: stepAction(s, res.token), Detail: res.observed, Rows: lab.RowsOf(res.rows)}
		if res.rows == 1 {
			e.Until = s17At(res.leaseEnd)
		}
		if e.Kind == lab.KindFenced {
			e.Refusal = res.refusal
		}
		timeline.Add(e)
		results = append(results, res)
		before = res
	}
	lateRows, err := renewAfterDelivery(ctx, s17WorkerB, workers[s17WorkerB], &timeline)
	if err != nil {
		return nil, err
	}
	if err := instances.Close(ctx); err != nil {
		return nil, err
	}
	r := &lab.Result{Timeline: timeline.Events()}
	measureLeaseRenewal(r, results)
	r.SetMetric("renewal_after_delivery_rows", float64(lateRows))
	checkLeaseRenewal(r, env.Scenario.Checks)
	if r.Schema, err = setup.Schema(ctx); err != nil {
		return nil, err
	}
	events, err := store.NewRelay(setup, sqls).Events(ctx)
	if err != nil {
		return nil, err
	}
	castLeaseRenewal(r, results, events)
	r.Tables = append(r.Tables, renewalStepTable(results), cast.OutboxEventsTable(events, cast.LessonTicks))
	r.Verdict = leaseRenewalVerdict(r, env.Variant)
	return r, nil
}

// seedLeaseRenewal creates the schema and the one event, EVENT-81.
func seedLeaseRenewal(ctx context.Context, setup *store.DB, relay *store.Relay, timeline *lab.Timeline) error {
	if err := setup.Migrate(ctx, store.RelayEvents); err != nil {
		return err
	}
	if err := relay.Insert(ctx, store.NewEvent{ID: s17EventID, Type: "CreditAwarded", Payload: `{"account":"ACC-81","cents":1000}`}, 0); err != nil {
		return err
	}
	timeline.Add(lab.Event{At: s17At(0), Kind: lab.KindCommit, Subject: s17EventID, Actor: "producer", Action: "insert event",
		Detail: s17EventID + " committed; claim_token 0, no lease"})
	return nil
}

// playRenewalStep runs one step's statement on the actor's connection and
// says what it observed, judged by the rows the statement changed.
func playRenewalStep(ctx context.Context, w *renewalWorker, s renewalStep) (stepResult, error) {
	res := stepResult{step: s}
	switch s.kind {
	case claimStep:
		c, err := w.relay.Claim(ctx, s17EventID, s.at, store.EventLease{Owner: s.actor, Until: s.until})
		if err != nil {
			return res, err
		}
		res.rows, res.busy = c.Rows, c.Stats.BusyRetries
		switch c.Outcome {
		case store.Claimed:
			w.token, res.token = c.Token, c.Token
			res.observed = fmt.Sprintf("claimed: %s, token %d, lease until %s", lab.Rows(c.Rows), c.Token, s17Time(c.LeaseUntil))
		case store.Blocked:
			res.observed = fmt.Sprintf("refused: 0 rows (%s's lease live until %s)", c.HeldBy, s17Time(c.LeaseUntil))
		default:
			res.observed = fmt.Sprintf("refused: %s, %s", lab.Rows(c.Rows), c.Outcome)
		}
	case renewStep:
		res.token = w.token
		f, err := w.relay.Renew(ctx, s17EventID, s.at, store.EventLease{Token: w.token, Until: s.until})
		if err != nil {
			return res, err
		}
		res.rows, res.busy = f.Rows, f.Stats.BusyRetries
		res.observed = "refused: 0 rows"
		if f.Rows == 1 {
			res.observed = "renewed: 1 row"
		}
	}
	return res, readBack(ctx, w, s, &res)
}

// renewAfterDelivery plays the steps after the nine: w (worker, Worker-B)
// acknowledges EVENT-81 under its token, then renews it. It returns the
// rows the renewal changed; the timeline says what each write changed and
// what the database held after it.
func renewAfterDelivery(ctx context.Context, worker string, w *renewalWorker, timeline *lab.Timeline) (int64, error) {
	ack, err := w.relay.Complete(ctx, s17EventID, w.token, s17AckAt)
	if err != nil {
		return 0, err
	}
	ev, err := readEvent(ctx, w)
	if err != nil {
		return 0, err
	}
	kind, refusal := lab.KindFinalize, lab.Refusal("")
	if ack.Rows != 1 {
		kind, refusal = lab.KindFenced, cast.EventRefusal(w.sqls.Complete, ev, true, w.token, s17AckAt)
	}
	timeline.Add(lab.Event{At: s17At(s17AckAt), Kind: kind, Refusal: refusal, Subject: s17EventID, Actor: worker,
		Action: "acks with " + heldToken(w.token), Rows: lab.RowsOf(ack.Rows),
		Detail: fmt.Sprintf("%s; read back: delivered %s, lease until %s", lab.Rows(ack.Rows), lab.FormatNumber(lab.Bool(ev.Delivered)), s17Time(ev.LeaseUntil))})
	renewal, err := w.relay.Renew(ctx, s17EventID, s17LateRenewAt, store.EventLease{Token: w.token, Until: s17LateRenewTo})
	if err != nil {
		return 0, err
	}
	if ev, err = readEvent(ctx, w); err != nil {
		return 0, err
	}
	kind, refusal = lab.KindFenced, cast.EventRefusal(w.sqls.Renew, ev, true, w.token, s17LateRenewAt)
	if renewal.Rows == 1 {
		kind, refusal = lab.KindStale, ""
	}
	e := lab.Event{At: s17At(s17LateRenewAt), Kind: kind, Refusal: refusal, Subject: s17EventID, Actor: worker,
		Action: stepAction(renewalStep{kind: renewStep, until: s17LateRenewTo}, w.token), Rows: lab.RowsOf(renewal.Rows),
		Detail: fmt.Sprintf("%s; read back: delivered %s, lease until %s", lab.Rows(renewal.Rows), lab.FormatNumber(lab.Bool(ev.Delivered)), s17Time(ev.LeaseUntil))}
	if renewal.Rows == 1 {
		e.Until = s17At(ev.LeaseUntil)
	}
	timeline.Add(e)
	return renewal.Rows, nil
}

// readEvent reads EVENT-81 back on w's connection.
func readEvent(ctx context.Context, w *renewalWorker) (store.Event, error) {
	ev, ok, err := w.relay.EventByID(ctx, s17EventID)
	if err == nil && !ok {
		err = fmt.Errorf("session 17: %s vanished", s17EventID)
	}
	return ev, err
}

// readBack judges a step on what it left in the database: the rows its
// statement changed, and the owner and lease end read back after it.
func readBack(ctx context.Context, w *renewalWorker, s renewalStep, res *stepResult) error {
	ev, ok, err := w.relay.EventByID(ctx, s17EventID)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("session 17: %s vanished after step at t=%d", s17EventID, s.at)
	}
	res.owner, res.leaseEnd = ev.LockedBy, ev.LeaseUntil
	if s.kind == renewStep && res.rows == 0 {
		res.refusal = cast.EventRefusal(w.sqls.Renew, ev, ok, res.token, s.at)
		if res.refusal == "" && ev.LeaseUntil >= s.until && strings.Contains(w.sqls.Renew.SQL, "lease_until < :proposed") {
			res.refusal = lab.RefusedByShorter // the row's lease already reaches the proposed end
		}
	}
	res.observed += fmt.Sprintf("; read back: owner %s, lease until %s", ev.LockedBy, s17Time(ev.LeaseUntil))
	res.asExpect = (res.rows == 1) == s.ok && ev.LockedBy == s.owner && ev.LeaseUntil == s.leaseEnd
	return nil
}

// measureLeaseRenewal sets a flag per step and the step counts.
func measureLeaseRenewal(r *lab.Result, results []stepResult) {
	passed := 0
	for _, res := range results {
		if res.asExpect {
			passed++
		}
		r.SetFlag(res.step.check, res.asExpect)
	}
	r.SetMetric("steps_as_expected", float64(passed))
}

// checkLeaseRenewal expects all nine steps, each as LESSONS.md says.
func checkLeaseRenewal(r *lab.Result, docs []lesson.CheckDoc) {
	want := map[string]float64{"steps_as_expected": float64(len(leaseRenewalSteps)), "renewal_after_delivery_rows": 0}
	for _, s := range leaseRenewalSteps {
		want[s.check] = 1
	}
	lesson.ExpectDocumented(r, docs, want)
}

// leaseRenewalVerdict says what the checks showed.
func leaseRenewalVerdict(r *lab.Result, variant string) string {
	m := lesson.MetricsOf(r)
	if r.Passed() {
		return fmt.Sprintf("SAFE DESIGN held. %s of %d steps behaved as specified: only the current token's holder renewed, "+
			"only while the lease was live and only to a later deadline, and a claim succeeded only once the lease had expired. "+
			"Renewal narrows the post-send window; it does not close it.", m("steps_as_expected"), len(leaseRenewalSteps))
	}
	if variant == "" {
		return fmt.Sprintf("NOT SHOWN: the design did not hold this run; failed checks %v; %s of %d steps as expected.",
			r.FailedChecks(), m("steps_as_expected"), len(leaseRenewalSteps))
	}
	return fmt.Sprintf("%s of %d steps as expected.", m("steps_as_expected"), len(leaseRenewalSteps))
}

// stepKind is what step s was, from the rows it changed and the owner and
// lease end the database held before it (before, read back after the step
// before): a claim that changed the row under another worker's live lease
// stole it; a renewal that changed the row of an owner other than its
// actor, or a lease already over, was a stale write.
func stepKind(s renewalStep, res, before stepResult) lab.Kind {
	live := before.owner != "" && before.leaseEnd > s.at
	switch {
	case s.kind == claimStep && res.rows == 1 && live && before.owner != s.actor:
		return lab.KindSteal
	case s.kind == claimStep && res.rows == 1:
		return lab.KindClaim
	case s.kind == claimStep && live:
		return lab.KindBlocked
	case s.kind == claimStep:
		return lab.KindRefused
	case res.rows == 1 && (before.owner != s.actor || !live):
		return lab.KindStale
	case res.rows == 1:
		return lab.KindRenew
	}
	return lab.KindFenced
}

// stepAction words a step the way the step table prints it.
func stepAction(s renewalStep, token int64) string {
	if s.kind == claimStep {
		return fmt.Sprintf("claims, lease until %s", s17Time(s.until))
	}
	return fmt.Sprintf("renews to %s with %s", s17Time(s.until), heldToken(token))
}

// heldToken words the token a worker presents: "token N", or "no token".
func heldToken(token int64) string {
	if token == 0 {
		return "no token"
	}
	return fmt.Sprintf("token %d", token)
}

func renewalStepTable(results []stepResult) lab.Table {
	t := lab.Table{Title: "The steps: expected and observed",
		Note: "Observed comes from the rows each real statement changed (1 row = succeeded, 0 rows = refused) and from the owner and lease end read back from the database after the step; a step passes only if both match. " +
			"A lease is live while now < lease_until; at now = lease_until it has expired. " + cast.LessonTicks.Note(),
		Columns: []string{"Step", "Time", "Actor", "Action", "Expected", "Observed", "Busy retries", "Result"}}
	for i, res := range results {
		expected := "fails: " + res.step.why
		if res.step.ok {
			expected = "succeeds: " + res.step.why
		}
		verdict := "FAIL"
		if res.asExpect {
			verdict = "PASS"
		}
		t.AddRow(i+1, s17Time(res.step.at), res.step.actor, stepAction(res.step, res.token), expected, res.observed, res.busy, verdict)
	}
	return t
}

// castLeaseRenewal records the roles and settings the lesson's texts
// quote, each read from the run: a step's time, the lease end it asked for,
// the rows it changed, its actor (the worker whose connection ran the
// statement), the owner and lease end read back before it (the lease it
// met: {@step_N_holder}, {step_N_before}) and after it ({step_N_lease}).
// The first and second workers are the steps' actors in the order they
// first act; the late
// renewer is the actor of the renewal after the ack, as the timeline
// records it; the final owner is the row's locked_by read back at the end.
func castLeaseRenewal(r *lab.Result, results []stepResult, events []store.Event) {
	if len(events) > 0 {
		r.SetCast("event", events[0].ID)
		r.SetCast("final_owner", events[0].LockedBy)
	}
	r.SetSetting("step_count", fmt.Sprint(len(results)))
	for i, res := range results {
		key := fmt.Sprintf("step_%d_", i+1)
		r.SetSetting(key+"at", s17Time(res.step.at))
		r.SetSetting(key+"until", s17Time(res.step.until))
		r.SetSetting(key+"changed", lab.Rows(res.rows))
		r.SetSetting(key+"lease", s17Time(res.leaseEnd))
		r.SetSetting(key+"wanted", s17Time(res.step.leaseEnd))
		r.SetCast(key+"actor", res.step.actor)
		if res.holderBefore != "" {
			r.SetCast(key+"holder", res.holderBefore)
			r.SetSetting(key+"before", s17Time(res.leaseBefore))
		}
		if _, ok := r.Cast["first_worker"]; !ok {
			r.SetCast("first_worker", res.step.actor)
		} else if _, ok := r.Cast["second_worker"]; !ok && res.step.actor != r.Cast["first_worker"] {
			r.SetCast("second_worker", res.step.actor)
		}
	}
	if n := len(r.Timeline); n > 0 {
		r.SetCast("late_renewer", r.Timeline[n-1].Actor) // the timeline's last event is the renewal after the ack
	}
}

// s17At is tick t as a timeline's clock time; s17Time, as a student reads
// it in a text or a table: the clock time, the tick beside it.
func s17At(t int64) string   { return cast.LessonTicks.At(t) }
func s17Time(t int64) string { return cast.LessonTicks.Time(t) }

// leaseRenewalScript is what the step script sets before any run: each
// step's time and the lease end it asks for, and the number of steps, for
// `describe`; a run records the same keys from what it ran
// (castLeaseRenewal), and its record stands.
func leaseRenewalScript(lesson.Options) map[string]string {
	out := map[string]string{"step_count": fmt.Sprint(len(leaseRenewalSteps))}
	for i, s := range leaseRenewalSteps {
		key := fmt.Sprintf("step_%d_", i+1)
		out[key+"at"], out[key+"until"] = s17Time(s.at), s17Time(s.until)
	}
	return out
}
