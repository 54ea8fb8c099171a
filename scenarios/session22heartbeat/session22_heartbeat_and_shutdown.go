// Package session22heartbeat is the lesson session-22-heartbeat-and-
// shutdown: its Lesson (the sequence, the checks, the variants and what the
// registry's tests read to prove it), the stages and actors only it uses,
// its proofs (proofs.go) and its tests.
package session22heartbeat

import (
	"context"
	"fmt"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/instance"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/store"
)

// Session 22's mistake variants.
const (
	variantRenewalFailureOnlyLogged = "renewal-failure-only-logged"
	variantNoDeadline               = "no-deadline"
	variantShutdownMarksComplete    = "shutdown-marks-complete"
	variantRenewWithoutMargin       = "renew-without-margin"
)

// Session 22's figures, in ticks (milliseconds) on the scenario clock.
const (
	hbLease = 30 * cast.TickSecond
	// heartbeatMargin is the heartbeat's safety margin: it renews when two
	// thirds of the lease has passed, so a third of the lease is left to
	// absorb a late beat.
	heartbeatMargin = hbLease / 3
	hbBeatDelay     = 1 * cast.TickSecond // every beat fires this late: a busy scheduler
	hbMaxProcessing = 2 * cast.TickMinute // no lease past claimed_at + this
	hbGrace         = 10 * cast.TickSecond
	hbLongWork      = 75 * cast.TickSecond // act 1's work: two and a half lease periods
	hbStuckPause    = 11 * cast.TickSecond // act 3's pause: its overdue renewal proposes exactly the deadline
)

// Session 22's cast: the relays, a process each, and the events of its four acts.
const (
	hbRelayA     = "Relay-A"
	hbRelayB     = "Relay-B"
	hbRelayC     = "Relay-C"
	hbRelayD     = "Relay-D"
	hbRelayFresh = "Relay-D (restarted)"
	hbPaused     = "e2"  // the event Relay-A holds when it freezes
	hbStuck      = "e3"  // the event whose work never ends
	hbSentFirst  = "e8"  // the event Relay-C sends, then freezes holding
	hbExpired    = "e9"  // the event whose lease runs out with nobody to reclaim it
	hbDone       = "e10" // the event whose completion a heartbeat tick races
)

// Lesson is session-22-heartbeat-and-shutdown, as the registry lists it:
// "Session 22: a heartbeat that stops the work when the lease is lost, and a
// shutdown that loses nothing".
var Lesson = lesson.Scenario{
	Name:    "session-22-heartbeat-and-shutdown",
	Session: "Session-22",
	FileTag: "Heartbeat-And-Shutdown",
	Title:   "Session 22: a heartbeat that stops the work when the lease is lost, and a shutdown that loses nothing",
	Design:  lab.Safe,
	Figures: map[string]float64{
		"stale_sends": 0, "zero_row_renewals": 1, "cancelled_on_lease_loss": 1, "completed_by_new_owner": 1,
		"deadline_refusals": 1, "lost_events": 0, "completed_without_send": 0, "recovered_after_restart": 2,
	},
	Teaches: "Renewal helps only if a relay renews while it works and stops working when a renewal changes no row. " +
		"On the scenario clock, with a {lease} lease, each relay's heartbeat renews under its token when the lease has " +
		"{margin} left (the safety margin, the constant heartbeatMargin), each beat {beat_delay} late.\n\n" +
		"Act 1: {@long_worker} works on {@long_event} for {long_work}, several lease periods; every renewal changes its " +
		"row and its completion is accepted.\n\n" +
		"Act 2: {@lost_lease} freezes holding {@lost_event} (a stop-the-world pause); its lease expires and {@new_owner} " +
		"reclaims {@lost_event}. When {@lost_lease} resumes, its overdue renewal changes no row and the heartbeat cancels " +
		"the work's context before the send: no send, no completion attempted. {@new_owner} sends and completes " +
		"{@lost_event}. Then {@sent_then_lost} sends {@sent_event} and freezes before its completion; another relay " +
		"reclaims, sends and completes {@sent_event}; {@sent_then_lost}'s overdue renewal changes no row and cancels the " +
		"work after the send: the send stands (the broker holds {@sent_event} again; the inbox absorbs that) and no " +
		"completion is attempted.\n\n" +
		"Act 3: the renewal also refuses any lease past claimed_at + {max_processing} (the maximum processing time); a " +
		"lease that ends exactly at the deadline is allowed (<=): {@stuck}, whose work on {@stuck_event} never ends, is " +
		"paused {stuck_pause}, so its overdue renewal proposes exactly claimed_at + {max_processing} and is accepted, and " +
		"the next one is refused. {@stuck} loses {@stuck_event} and another relay delivers it.\n\nThen the live-lease " +
		"guard alone: {@expired_holder} claims {@expired_event} and freezes while no other relay polls; its lease runs " +
		"out on the clock and nobody reclaims {@expired_event}, so when {@expired_holder} resumes, its overdue renewal " +
		"presents its still-current token and only lease_until > :now refuses it: a lease that has ended is lost even if " +
		"nobody took it, and the heartbeat cancels the work before the send. {@expired_deliverer} delivers " +
		"{@expired_event} later.\n\nThen the delivered guard alone: {@done_racer}'s work on {@done_event} ends at the " +
		"instant its heartbeat's first tick falls due; its completion commits and the tick, already due, renews before " +
		"the relay tells its heartbeat to stop, under the still-current token, with the lease live and within the " +
		"deadline: only delivered = 0 refuses it. Read back, {@done_event} is delivered under {@done_racer}'s own token: " +
		"the work is already done, not a lost lease, and nothing is cancelled.\n\n" +
		"Act 4: {@stopped} holds {held_at_stop} when its stop signal arrives (SIGTERM, simulated in-process by a call to " +
		"the relay's Stop; run --processes sends a real SIGTERM to the relay as a child process): it stops polling at " +
		"once, completes what it had already sent within its {grace} grace period, and leaves {left_at_exit} to expire, " +
		"never marked complete; after the restart a fresh relay recovers them.\n\nPeers differ on the lost lease: " +
		"Hangfire's sliding lease only logs it (the renewal-failure-only-logged variant), goqite and River let the job " +
		"run to its end, Temporal's heartbeat cancels the activity's context, as here.",
	DoesNotSolve: "Cancellation stops the work at its next check, not mid-call: a send already on the wire when the lease is " +
		"lost still arrives, and a relay that only logs the failure (Hangfire) or runs the job to its end (goqite, River) " +
		"sends after its lease is gone. The lab fires the overdue heartbeat before the work's next step; a real relay must " +
		"also refuse to start an effect when its last confirmed lease has less than the margin left. Either way duplicates " +
		"remain possible, so consumers still need the inbox (session 18). An event whose work never ends is freed by the " +
		"deadline but will hang its next relay too: parking it is the dead-letter queue's job (sessions 19 and 20).",
	Statements: []store.Stmt{
		store.ClaimStampingClaimedAt,
		store.RenewWithinDeadline,
		store.CompleteWithToken,
	},
	Set: store.HeartbeatLesson,
	Checks: []lesson.CheckDoc{
		{Name: "stale_sends", About: "sends by a relay after it lost the lease (broker offers at or past the sender's last lease)"},
		{Name: "zero_row_renewals", Measure: true, About: "renewals that changed no row because another relay had reclaimed the event (a " +
			"newer token) before the relay sent: {lease_lost_before_send} (those after a send, {lease_lost_after_send}, " +
			"are cancelled_after_send's)"},
		{Name: "cancelled_on_lease_loss", About: "works cancelled before their send on a renewal that found the event " +
			"reclaimed (a newer token): {cancelled_before_send_on_loss}"},
		{Name: "cancelled_after_send", Measure: true, About: "works cancelled after their send on a renewal that found the event " +
			"reclaimed: {cancelled_after_send_on_loss}; the send stands"},
		{Name: "expired_renewals_refused", Measure: true, About: "renewals that changed no row while the row, read back, still held the " +
			"renewing relay's token, undelivered, with its lease ended (lease_until > :now refused them): {expired_renewals}"},
		{Name: "cancelled_on_expiry", Measure: true, About: "works cancelled before their send on a renewal refused for an ended lease " +
			"under the relay's own token: {cancelled_on_expiry_list}"},
		{Name: "renewals_after_delivery_rows", About: "rows changed by heartbeat renewals that ran after their event's " +
			"completion had committed ({renewals_after_delivery})"},
		{Name: "completed_by_new_owner", About: "committed completions of {@paused_event} by its new owner {@new_owner}: every " +
			"committed completion of {@paused_event} counts, so a second one, or a single one by another relay, fails"},
		{Name: "deadline_refusals", About: "renewals refused by the processing deadline, {@stuck}'s work on " +
			"{@stuck_event} never ending: {deadline_refused}"},
		{Name: "renewal_to_deadline_rows", About: "rows changed by {@stuck}'s renewal of {@stuck_event} whose lease ends " +
			"exactly at claimed_at + {max_processing} (the deadline allows a lease that ends on it)"},
		{Name: "lost_events", About: "committed events the broker never received by the end of the run, marked delivered or not"},
		{Name: "completed_without_send", About: "completions that changed a row for an event the completing relay never " +
			"sent ({completed_unsent})"},
		{Name: "recovered_after_restart", About: "events in flight at shutdown that the restarted relay recovered and " +
			"delivered ({recovered_events})"},
	},
	Settings: heartbeatSettings,
	Variants: []lesson.Variant{
		{Name: variantRenewalFailureOnlyLogged, Changes: "Relay-A's heartbeat policy: a 0-row renewal is logged and the work goes on", Mistake: "Relay-A only logs a renewal that changed no row (Hangfire): its work " +
			"goes on after the pause, sends {@lost_event} with its lost lease, and tries a completion that is fenced out",
			Breaks: []string{"stale_sends", "cancelled_on_lease_loss"},
			Shows: "The heartbeat of {@lost_lease} on {@lost_event} changes no row after its pause, but the relay only logs " +
				"it: it sends {@lost_event} under its lost lease (stale sends: {stale_sends}), and its completion is " +
				"fenced out by {@new_owner}'s newer token. Fencing keeps the row right but cannot unsend a message: a " +
				"renewal that changes no row must cancel the work before it sends."},
		{Name: variantNoDeadline, Swaps: []store.Stmt{store.RenewWithoutDeadline}, Mistake: "the renewal has no processing deadline: {@stuck}'s never-ending work renews, and holds {@stuck_event}, forever",
			Breaks: []string{"deadline_refusals", "lost_events"},
			Shows: "The gateway call of {@stuck} never returns and its heartbeat renews {@stuck_event} every {renew_interval} " +
				"with no end (deadline refusals: {deadline_refusals}), so no other relay can take {@stuck_event} over and " +
				"the broker never receives it (lost events: {lost_events}). A " +
				"heartbeat proves the process is alive, not that its work progresses: a processing deadline counted " +
				"from claimed_at has to stop the renewals."},
		{Name: variantShutdownMarksComplete, Swaps: []store.Stmt{store.MarkHeldComplete}, Mistake: "the shutdown hook marks every event the relay holds delivered, sent or not: " +
			"those it never sent ({completed_unsent}) are never published and the restarted relay recovers {recovered_events}",
			Breaks: []string{"lost_events", "completed_without_send", "recovered_after_restart"},
			Shows: "At SIGTERM {@stopped} marks {completed_unsent} delivered although it never sent them, so the broker " +
				"never receives them (lost events: {lost_events}) and the restarted relay recovers {recovered_events}. " +
				"A completion must " +
				"mean the broker accepted the event: at shutdown a relay leaves its unsent events to their leases, so " +
				"they come back after a restart."},
		{Name: variantRenewWithoutMargin, Changes: "Relay-A's heartbeat policy: a margin of 0, so it renews when its lease ends", Mistake: "Relay-A's heartbeat renews only when the lease ends (no margin): its beat, " +
			"{beat_delay} late, finds the lease expired, so its work on {@expired_event} is cancelled and another relay delivers it",
			Breaks: []string{"expired_renewals_refused", "cancelled_on_expiry"},
			Shows: "The beat of {@expired_holder} at {expired_beat_at} comes after {@expired_event}'s lease ended at " +
				"{expired_lease_end}, so lease_until > :now refuses it under {@expired_holder}'s own token and its work " +
				"on {@expired_event} is cancelled ({expired_renewals_refused} such refusals: {expired_renewals}; " +
				"{cancelled_on_expiry} cancellations on expiry: {cancelled_on_expiry_list}); {@expired_deliverer} " +
				"delivers {@expired_event} later. Nothing is sent more than once (stale sends: {stale_sends}), but a " +
				"healthy relay loses its long jobs: a heartbeat must " +
				"renew with a margin before the lease ends, since any delay turns a renewal at the deadline into a " +
				"lost lease."},
	},
	Breakers:  breakers(),
	Guards:    guards(),
	Processes: processes,
	Run: func(ctx context.Context, env *lesson.Env) (*lab.Result, error) {
		return runHeartbeatAndShutdown(ctx, env, lesson.Swapped(env, lessonHeartbeatCast(env)))
	},
}

// heartbeatCast is what a session-22 run is made of: the statements, and
// the heartbeat policies of Relay-A and of every other relay.
type heartbeatCast struct {
	sqls    store.HeartbeatSQL
	policyA cast.HeartbeatPolicy
	policy  cast.HeartbeatPolicy
}

// lessonHeartbeatCast is the lesson's cast: its statements with the
// variant's mistakes in them, and the heartbeat policy, Relay-A's as a
// variant may set it (a policy, not a statement).
func lessonHeartbeatCast(env *lesson.Env) heartbeatCast {
	p := cast.HeartbeatPolicy{Lease: hbLease, Margin: heartbeatMargin, Delay: hbBeatDelay, MaxProcessing: hbMaxProcessing, OnLeaseLost: cast.CancelWork}
	hc := heartbeatCast{sqls: lesson.VariantSet(env, store.HeartbeatLesson), policyA: p, policy: p}
	if env.Is(variantRenewalFailureOnlyLogged) {
		hc.policyA.OnLeaseLost = cast.LogOnly
	}
	if env.Is(variantRenewWithoutMargin) {
		hc.policyA.Margin = 0
	}
	return hc
}

// heartbeatRun is one session-22 run: its connections, the stage and the
// relays, and what the shutdown left.
type heartbeatRun struct {
	env      *lesson.Env
	hc       heartbeatCast
	dbs      []*store.DB
	timeline lab.Timeline
	setup    *store.DB
	producer *store.Relay
	broker   store.Broker
	stage    *cast.HeartbeatStage
	relays   *instance.HeartbeatRelays // the relay instances and the clock that reaches them
	a, b, c  instance.HeartbeatRelay

	heldAtExit []string // events Relay-D still held when it exited
}

// runHeartbeatAndShutdown runs session 22 with hc.
func runHeartbeatAndShutdown(ctx context.Context, env *lesson.Env, hc heartbeatCast) (*lab.Result, error) {
	run := &heartbeatRun{env: env, hc: hc}
	defer run.close()
	if err := run.seed(ctx); err != nil {
		return nil, err
	}
	if err := run.play(ctx); err != nil {
		return nil, err
	}
	if err := run.relays.Close(ctx); err != nil {
		return nil, err
	}
	r := &lab.Result{}
	if err := run.measure(ctx, r); err != nil {
		return nil, err
	}
	lesson.ExpectDocumented(r, env.Scenario.Checks, map[string]float64{
		"stale_sends": 0, "zero_row_renewals": 1, "cancelled_on_lease_loss": 1, "cancelled_after_send": 1,
		"completed_by_new_owner": 1, "deadline_refusals": 1, "renewal_to_deadline_rows": 1, "lost_events": 0,
		"completed_without_send": 0, "recovered_after_restart": 2, "expired_renewals_refused": 1, "cancelled_on_expiry": 1,
		"renewals_after_delivery_rows": 0,
	})
	r.Verdict = run.verdict(r)
	return r, nil
}

// open opens one process's own connection, closed when the run ends.
func (run *heartbeatRun) open(ctx context.Context) (*store.DB, error) {
	db, err := run.env.Open(ctx, run.env.DatabasePath())
	if err != nil {
		return nil, err
	}
	run.dbs = append(run.dbs, db)
	return db, nil
}

func (run *heartbeatRun) close() {
	if run.relays != nil {
		_ = run.relays.Close(context.Background())
	}
	if run.stage != nil {
		run.stage.Close()
	}
	for _, db := range run.dbs {
		db.Close()
	}
}

// seed creates the schema, the broker and the stage, and starts Relay-A,
// Relay-B and Relay-C, each a process on its own connection.
func (run *heartbeatRun) seed(ctx context.Context) error {
	var err error
	if run.setup, err = run.open(ctx); err != nil {
		return err
	}
	if err := run.setup.Migrate(ctx, store.RelayEvents, store.HeartbeatClaims, store.BrokerInbox); err != nil {
		return err
	}
	run.producer = store.NewRelay(run.setup, run.hc.sqls.Relay)
	brokerDB, err := run.open(ctx)
	if err != nil {
		return err
	}
	run.broker = store.NewBroker(brokerDB, store.BrokerLesson)
	run.stage = cast.NewHeartbeatStage(&run.timeline, run.broker)
	run.relays = run.env.Instances.HeartbeatRelays(run.stage)
	relays := []*instance.HeartbeatRelay{&run.a, &run.b, &run.c}
	for i, name := range []string{hbRelayA, hbRelayB, hbRelayC} {
		p := run.hc.policy
		if name == hbRelayA {
			p = run.hc.policyA
		}
		if *relays[i], err = run.relays.Open(ctx, run.env.DatabasePath(), name, run.hc.sqls, p); err != nil {
			return err
		}
	}
	return nil
}

// play is the lesson's four acts, one after the other on one clock.
func (run *heartbeatRun) play(ctx context.Context) error {
	acts := []func(context.Context) error{run.heartbeat, run.pause, run.pauseAfterSend, run.deadline, run.expiry, run.doneRace,
		run.shutdown}
	for _, act := range acts {
		if err := act(ctx); err != nil {
			return err
		}
	}
	return nil
}

// at moves the clock to second t of the lesson, firing due heartbeats,
// in the lab's process or in the relays' own (run --processes).
func (run *heartbeatRun) at(ctx context.Context, t int64) error {
	return run.relays.AdvanceTo(ctx, t*cast.TickSecond)
}

// script runs steps, each at its second of the lesson.
func (run *heartbeatRun) script(ctx context.Context, steps []cast.Step) error {
	return cast.RunScript(ctx, run.at, steps)
}

// commit inserts the outbox events ids at the current time, as the
// producer's business transactions would.
func (run *heartbeatRun) commit(ctx context.Context, ids ...string) error {
	for _, id := range ids {
		e := store.NewEvent{ID: id, Type: "PaymentSettled", Payload: fmt.Sprintf(`{"event":%q}`, id)}
		if err := run.producer.Insert(ctx, e, run.stage.Now()); err != nil {
			return err
		}
	}
	run.stage.Event(lab.KindCommit, "producer", "commit", fmt.Sprintf("outbox events %v committed with their business changes", ids))
	return nil
}

// claimWith polls once with the relay instance and insists it claimed
// something.
func claimWith(ctx context.Context, relay instance.HeartbeatRelay) (instance.HeartbeatJob, error) {
	j, err := relay.Poll(ctx)
	if err == nil && j == nil {
		err = fmt.Errorf("session 22: %s found nothing to claim", relay.Name())
	}
	return j, err
}

// heartbeat is act 1: Relay-A works on e1 for 75 s; its heartbeat renews
// three times, each 1 row, and the completion is accepted.
func (run *heartbeatRun) heartbeat(ctx context.Context) error {
	if err := run.commit(ctx, "e1"); err != nil {
		return err
	}
	var j instance.HeartbeatJob
	return run.script(ctx, []cast.Step{
		cast.At(1, func() (err error) {
			if j, err = claimWith(ctx, run.a); err == nil {
				run.stage.Event(lab.KindWork, hbRelayA, "works", "e1's work takes "+ticksText(hbLongWork)+
					": two and a half lease periods")
			}
			return err
		}),
		cast.At(1+hbLongWork/cast.TickSecond, func() error { _, err := j.Send(ctx); return err }),
		cast.At(79, func() error { _, err := j.Complete(ctx); return err }),
		cast.At(82, func() error { return run.pollAndDeliver(ctx, run.b, 82) }),
	})
}

// pollAndDeliver lets relay poll at second t, and send and complete each
// event it claims, until nothing is claimable.
func (run *heartbeatRun) pollAndDeliver(ctx context.Context, relay instance.HeartbeatRelay, t int64) error {
	for ; ; t += 3 {
		var j instance.HeartbeatJob
		err := run.script(ctx, []cast.Step{cast.At(t, func() (err error) { j, err = relay.Poll(ctx); return err })})
		if err != nil || j == nil {
			return err
		}
		if err := run.script(ctx, []cast.Step{
			cast.At(t+1, func() error { _, err := j.Send(ctx); return err }),
			cast.At(t+2, func() error { _, err := j.Complete(ctx); return err }),
		}); err != nil {
			return err
		}
	}
}

// measure sets the lesson's figures from the ledgers and the database.
func (run *heartbeatRun) measure(ctx context.Context, r *lab.Result) error {
	s := run.stage
	offers, err := run.broker.Offers(ctx)
	if err != nil {
		return err
	}
	events, err := run.producer.Events(ctx)
	if err != nil {
		return err
	}
	stale, err := staleSends(s, offers)
	if err != nil {
		return err
	}
	r.SetMetric("stale_sends", float64(stale))
	run.castHeartbeatRoles(r)
	tally := tallyRenewals(s)
	r.SetMetric("zero_row_renewals", float64(tally.LeaseLostBeforeSend))
	r.SetMetric("zero_row_renewals_after_send", float64(tally.LeaseLostAfterSend))
	before, after := cancelled(s, cast.ErrLeaseLost)
	r.SetMetric("cancelled_on_lease_loss", float64(before))
	r.SetMetric("cancelled_after_send", float64(after))
	r.SetMetric("expired_renewals_refused", float64(tally.Expired))
	expired, _ := cancelled(s, cast.ErrLeaseExpired)
	r.SetMetric("cancelled_on_expiry", float64(expired))
	run.measureCompletions(r)
	r.SetMetric("deadline_refusals", float64(tally.Deadline))
	// The renewal of e3 that proposes exactly the deadline: its rows, or
	// -1 when no renewal of e3 reached it.
	toDeadline := -1
	for _, e := range renewalsToDeadline(s, hbStuck, run.hc.policy.MaxProcessing) {
		toDeadline = int(e.Rows)
	}
	r.SetMetric("renewal_to_deadline_rows", float64(toDeadline))
	r.SetMetric("lost_events", float64(lostEvents(events, offers)))
	r.SetMetric("renewals_one_row", float64(tally.OneRow))
	r.SetMetric("renewals_already_done", float64(tally.Delivered))
	// The rows renewals changed after their event's completion, or -1
	// when no renewal came after one.
	afterRows, after := rowsAfterCompletion(s)
	if after == 0 {
		afterRows = -1
	}
	r.SetMetric("renewals_after_delivery_rows", float64(afterRows))
	r.SetMetric("e8_broker_offers", float64(acceptedOffers(offers, hbSentFirst)))
	if r.Schema, err = run.setup.Schema(ctx); err != nil {
		return err
	}
	r.Timeline = run.timeline.Events()
	r.Tables = append(r.Tables, policyTable(run.hc.policy, run.hc.policyA, hbGrace))
	r.Tables = append(r.Tables, stageTables(s)...)
	r.Tables = append(r.Tables, cast.OutboxEventsTableOnClock(events))
	return nil
}

// measureCompletions sets the figures the completion ledger gives.
func (run *heartbeatRun) measureCompletions(r *lab.Result) {
	held := map[string]bool{}
	for _, id := range run.heldAtExit {
		held[id] = true
	}
	var withoutSend, recovered, cOnE8 int
	for _, c := range run.stage.Completions {
		if c.Relay == hbRelayC && c.Event == hbSentFirst {
			cOnE8++
		}
		if c.Rows == 0 {
			continue
		}
		if !c.Sent {
			withoutSend++
		}
		if c.Relay == hbRelayFresh && held[c.Event] {
			recovered++
		}
	}
	committed, newOwner := completedOnceBy(run.stage.Completions, hbPaused, r.Cast["new_owner"])
	r.SetMetric("paused_event_completions", float64(committed))
	r.SetMetric("completed_by_new_owner", float64(newOwner))
	r.SetMetric("completed_without_send", float64(withoutSend))
	r.SetMetric("recovered_after_restart", float64(recovered))
	r.SetMetric("e8_completions_by_relay_c", float64(cOnE8))
}

// verdict says what the checks showed.
func (run *heartbeatRun) verdict(r *lab.Result) string {
	m := lesson.MetricsOf(r)
	switch {
	case r.Passed():
		return r.Fill(fmt.Sprintf("SAFE DESIGN held. The heartbeats renewed %s times, each under its token (1 row); "+
			"after the pause {@lost_lease}'s renewal of {@lost_event} changed 0 rows and its work was cancelled before the "+
			"send (%s stale sends), {@new_owner} completed {@lost_event}; {@sent_then_lost}'s renewal after its send of "+
			"{@sent_event} changed 0 rows too: its work was cancelled (%s cancelled after the send), yet the send stands "+
			"(the broker holds %s offers of {@sent_event}) and {@sent_then_lost} attempted %s completions of it; the "+
			"renewal of the stuck {@stuck_event} to exactly its deadline changed %s and the processing deadline refused %s "+
			"renewal after it; {@expired_holder}'s overdue renewal of {@expired_event}, whose lease ran out with nobody "+
			"reclaiming it, changed 0 rows under its own token (expired renewals refused: %s) and its work was cancelled "+
			"before the send (%s); {@done_racer}'s tick on {@done_event}, due as its completion committed, was read back "+
			"as already done (%s), not a lost lease, and renewals after a delivery changed %s; the shutdown marked "+
			"nothing it had not sent (%s) and the restarted relay recovered %s events. Cancellation narrows the window; "+
			"the inbox still absorbs what slips through.",
			m("renewals_one_row"), m("stale_sends"), m("cancelled_after_send"), m("e8_broker_offers"),
			m("e8_completions_by_relay_c"), lesson.RowsOf(r)("renewal_to_deadline_rows"), m("deadline_refusals"),
			m("expired_renewals_refused"), m("cancelled_on_expiry"), m("renewals_already_done"),
			lesson.RowsOf(r)("renewals_after_delivery_rows"), m("completed_without_send"), m("recovered_after_restart")))
	case run.env.Variant != "":
		return "" // lesson.Execute opens a variant's verdict with what its checks measured
	default:
		return fmt.Sprintf("NOT SHOWN: the design did not hold this run; failed checks %v.", r.FailedChecks())
	}
}
