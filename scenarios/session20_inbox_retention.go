package scenarios

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/outboxlab/outboxlab/failpoint"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/store"
)

// Session 20's timeline, in ticks. The relay sends at 1 s; the consumer
// first receives the offer at 40 s; its acks never reach the broker, which
// redelivers every visibilityTimeout and dead-letters the offer after
// s20MaxDeliveries; an operator replays the dead letter s20ReplayDelay later.
const (
	s20Event         = "e20"
	s20WindowEvent   = "e21"
	s20Account       = "ACC-20"
	s20Credit        = int64(1000)
	s20SendAt        = 1 * tickSecond
	s20ConsumeAt     = 40 * tickSecond
	s20MaxDeliveries = int64(3)
	s20ReplayDelay   = 3 * tickDay
	// s20DeadLetterAt is when the broker gives up on the unacknowledged offer.
	s20DeadLetterAt = s20ConsumeAt + s20MaxDeliveries*visibilityTimeout
	// s20ReplayAt is the operator's replay, three days after the dead-lettering.
	s20ReplayAt = s20DeadLetterAt + s20ReplayDelay
	// s20ResendGap is how long after Relay-A's send Relay-B resends: one lease.
	s20ResendGap = relayLease
)

var inboxRetention = Scenario{
	Name:    "session-20-inbox-retention",
	Session: "Session-20",
	FileTag: "InboxRetention",
	Title:   "Session 20: deduplication lasts only as long as its window",
	Design:  lab.Safe,
	Teaches: "Part 1, inbox retention: event e20 (1000 cents) is consumed at t=40 s, but the consumer's acks never reach the " +
		"broker, which redelivers it (the inbox absorbs those duplicates) and dead-letters it after 3 deliveries. The " +
		"dead-letter queue keeps it for its retention (--dlq-retention, default 7d), while the inbox purges dedup records " +
		"after its own (--inbox-retention, default 24h). Replayed three days later, the message meets an empty inbox and is " +
		"applied again: credit 2000. With an inbox retention at least the longest redelivery interval (the DLQ retention " +
		"plus the redelivery span), the replay is a duplicate: credit 1000. Part 2, broker window: the lab's broker drops an " +
		"offer whose event id it accepted within its window (--broker-window, default 2m); the resend after a 30 s lease " +
		"expiry is dropped, but the three-day replay passes the broker, so only the inbox keeps the effect single. Real " +
		"systems' published defaults: MassTransit's inbox duplicate-detection window 30 min; NServiceBus (SQL persistence) " +
		"keeps deduplication data 7 days and warns that a retry after that is seen as new; NATS JetStream's duplicate window " +
		"2 min; SQS FIFO's deduplication interval 5 min; Kafka's idempotent producer deduplicates only within one producer " +
		"session. Times are logical ticks: milliseconds since 2026-01-15T09:00:00.000Z.",
	DoesNotSolve: "The inbox trades storage for safety: to stay correct it must remember every event id for as long as " +
		"anything can redeliver it (redeliveries, the DLQ, manual replays, restores), so consumed_events grows with " +
		"traffic times retention, and a replay after any finite retention is applied again (unbounded retention is the " +
		"only complete answer). Broker deduplication (NATS 2 min, SQS FIFO 5 min, Kafka's per-session producer ids) " +
		"covers only a relay's quick resends, never a replay days later. Exactly-once delivery is not claimed.",
	Statements: brokerStatements(
		lab.Statement{Name: "inbox retention purge", SQL: store.PurgeConsumedSQL},
		lab.Statement{Name: "broker: dead-letter after the last delivery", SQL: store.DeadLetterSQL},
		lab.Statement{Name: "broker: DLQ retention purge", SQL: store.PurgeDeadLettersSQL},
		lab.Statement{Name: "operator: replay a dead letter (then offer it again)", SQL: store.TakeDeadLetterSQL},
	),
	Checks: []CheckDoc{
		{"credit_short_retention_cents", "part 1: with the inbox retention shorter than the replay delay (and the DLQ still holding the message), the replay re-applies the effect: 2000"},
		{"credit_long_retention_cents", "part 1: with the inbox retention at least the longest redelivery interval, the replay has no second effect: 1000"},
		{"broker_dropped_within_window", "part 2: the resend 30 s after the first send falls inside the broker window (when the window is longer than 30 s) and is dropped: 1"},
		{"broker_passed_after_window", "part 2: the replay three days later falls outside the window (and the DLQ still holds it) and passes the broker: 1"},
	},
	Variants: []Variant{
		{Name: variantNaiveConsumer, Mistake: "the consumer increments unconditionally, with no inbox: every redelivery and the replay credit again",
			Breaks: []string{"credit_short_retention_cents", "credit_long_retention_cents"}},
		{Name: variantEventIDPerSend, Mistake: "the relay gives every send a new message id instead of the outbox event id, so the " +
			"broker's dedup window cannot recognise the resend",
			Breaks: []string{"broker_dropped_within_window"}},
	},
	Run: runInboxRetention,
}

// retentionRun is one of session 20's three databases.
type retentionRun struct {
	label          string
	file           string
	event          string
	inboxRetention int64
	brokerWindow   int64
	resend         bool // part 2: Relay-A stalls past its lease and Relay-B resends
}

// retentionOutcome is what durable state says after a run.
type retentionOutcome struct {
	credit         int64
	deadLetteredAt int64
	replayAt       int64
	inboxPurged    int64
	dlqPurged      int64
	replayed       bool
	replayDropped  bool
	droppedBefore  int64 // offers dropped by the window before the replay
	passedAtReplay int64 // offers accepted at or after the replay
}

func runInboxRetention(ctx context.Context, env *Env) (*lab.Result, error) {
	opts := env.Options
	short := ticksOf(opts.InboxRetention)
	dlq := ticksOf(opts.DLQRetention)
	window := ticksOf(opts.BrokerWindow)
	// The longest redelivery interval: the redeliveries before the DLQ, then
	// the DLQ's whole retention.
	long := max(short, dlq+s20MaxDeliveries*visibilityTimeout)
	design := inboxDesign
	if env.Is(variantNaiveConsumer) {
		design = naiveDesign
	}
	runs := []retentionRun{
		{label: "part 1 short", file: "part-1-short-retention", event: s20Event, inboxRetention: short},
		{label: "part 1 long", file: "part-1-long-retention", event: s20Event, inboxRetention: long},
		{label: "part 2", file: "part-2-broker-window", event: s20WindowEvent, inboxRetention: long, brokerWindow: window, resend: true},
	}

	var tl lab.Timeline
	r := &lab.Result{}
	var ps []*pipeline
	plans := map[string]*failpoint.Plan{}
	defer func() {
		for _, p := range ps {
			p.close()
		}
	}()
	summary := lab.Table{Title: "Deduplication windows", Note: "One fresh database per part, each a file in the run folder. Credit and counts are read from each database after the replay.",
		Columns: []string{"Part", "Inbox retention", "DLQ retention", "Broker window", "Dead-lettered at", "Replay at", "Inbox rows purged", "DLQ rows purged", "Replay at the broker", "Dropped before replay", "Credit (cents)", "Database file"}}
	outs := map[string]retentionOutcome{}
	for _, run := range runs {
		path := env.ExtraDatabasePath(run.file)
		plan := failpoint.NewPlan()
		p, err := newPipeline(ctx, path, run.label, &tl, plan)
		if err != nil {
			return nil, err
		}
		ps = append(ps, p)
		plans[run.label] = plan
		p.eventIDPerSend = env.Is(variantEventIDPerSend)
		p.event("scenario", run.label, fmt.Sprintf("inbox retention %s, DLQ retention %s, broker window %s (fresh database %s)",
			durationText(run.inboxRetention), durationText(dlq), durationText(run.brokerWindow), filepath.Base(path)))
		out, err := playRetention(ctx, p, plan, run, design, dlq)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", run.label, err)
		}
		outs[run.label] = out
		replay := "nothing to replay (DLQ purged)"
		switch {
		case out.replayed && out.replayDropped:
			replay = "dropped (inside the window)"
		case out.replayed:
			replay = "passed"
		}
		summary.AddRow(run.label, durationText(run.inboxRetention), durationText(dlq), durationText(run.brokerWindow),
			tickClock(out.deadLetteredAt), tickClock(out.replayAt), out.inboxPurged, out.dlqPurged, replay, out.droppedBefore, out.credit, filepath.Base(path))
		if r.Database == "" {
			r.Database = path
		}
	}

	r.SetMetric("credit_short_retention_cents", float64(outs["part 1 short"].credit))
	r.SetMetric("credit_long_retention_cents", float64(outs["part 1 long"].credit))
	r.SetMetric("broker_dropped_within_window", float64(outs["part 2"].droppedBefore))
	r.SetMetric("broker_passed_after_window", float64(outs["part 2"].passedAtReplay))
	r.SetMetric("credit_broker_window_cents", float64(outs["part 2"].credit))
	r.SetMetric("inbox_rows_purged_short_retention", float64(outs["part 1 short"].inboxPurged))
	r.SetMetric("inbox_rows_purged_long_retention", float64(outs["part 1 long"].inboxPurged))
	r.SetMetric("inbox_retention_ms", float64(short))
	r.SetMetric("long_inbox_retention_ms", float64(long))
	r.SetMetric("dlq_retention_ms", float64(dlq))
	r.SetMetric("broker_window_ms", float64(window))

	// The lesson's figures, stated in terms of the options: with the
	// defaults (24h, 7d, 2m) they are 2000, 1000, 1 and 1.
	age := s20ReplayAt - s20ConsumeAt // the inbox record's age at the replay
	replayable := dlq > s20ReplayDelay
	want := map[string]float64{
		"credit_short_retention_cents": float64(s20Credit * (1 + b2i(replayable && short <= age))),
		"credit_long_retention_cents":  float64(s20Credit * (1 + b2i(replayable && long <= age))),
		"broker_dropped_within_window": float64(b2i(window > s20ResendGap)),
		"broker_passed_after_window":   float64(b2i(replayable && window <= s20ReplayAt-s20SendAt)),
	}
	about := map[string]string{
		"credit_short_retention_cents": fmt.Sprintf("inbox retention %s vs. the record's age %s at the replay, DLQ retention %s vs. the replay delay %s: "+
			"the replay re-applies the effect exactly when the record was purged and the DLQ still held the message",
			durationText(short), durationText(age), durationText(dlq), durationText(s20ReplayDelay)),
		"credit_long_retention_cents": fmt.Sprintf("inbox retention %s (at least the DLQ retention %s plus %d redeliveries of %s): the replay is a duplicate",
			durationText(long), durationText(dlq), s20MaxDeliveries, durationText(visibilityTimeout)),
		"broker_dropped_within_window": fmt.Sprintf("broker window %s vs. the resend %s after the first send: dropped when the window is longer",
			durationText(window), durationText(s20ResendGap)),
		"broker_passed_after_window": fmt.Sprintf("broker window %s vs. the replay %s after the first send: passes when the window is not longer (and the DLQ still held it)",
			durationText(window), durationText(s20ReplayAt-s20SendAt)),
	}
	for _, c := range env.Scenario.Checks {
		w, ok := want[c.Name]
		if !ok {
			panic("scenarios: no expected value for documented check " + c.Name) // caught by every test
		}
		r.ExpectMetric(c.Name, w, about[c.Name])
	}

	r.Tables = append(r.Tables, summary)
	if err := finishDelivery(ctx, r, ps, plans); err != nil {
		return nil, err
	}
	m := metricsOf(r)
	if r.Passed() {
		r.Verdict = fmt.Sprintf("SAFE DESIGN held within its window, and the window's edge was shown: with inbox retention %s the three-day "+
			"replay credited again (%s cents); with %s it did not (%s cents). The broker window (%s) dropped %s resend but let %s replay "+
			"through; only the inbox kept that replay single (%s cents).",
			durationText(short), m("credit_short_retention_cents"), durationText(long), m("credit_long_retention_cents"),
			durationText(window), m("broker_dropped_within_window"), m("broker_passed_after_window"), m("credit_broker_window_cents"))
	} else {
		r.Verdict = fmt.Sprintf("DESIGN BROKEN by the %q mistake: failed checks %v.", env.Variant, r.FailedChecks())
	}
	return r, nil
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// playRetention runs one part: send (and, in part 2, a resend after a lease
// expiry), consumption whose acks are lost until the broker dead-letters the
// offer, then three days later the purge jobs and the operator's replay.
func playRetention(ctx context.Context, p *pipeline, plan *failpoint.Plan, run retentionRun, design consumerDesign, dlqRetention int64) (retentionOutcome, error) {
	var out retentionOutcome
	p.brokerWindow = run.brokerWindow
	if err := p.openAccount(ctx, creditService, s20Account); err != nil {
		return out, err
	}
	if err := p.commitCredit(ctx, run.event, s20Account, s20Credit); err != nil {
		return out, err
	}
	if run.resend {
		plan.Arm(failpoint.Rule{Point: failpoint.AfterSendBeforeComplete, Actor: relayA, Subject: run.event, Fault: failpoint.LeaseExpiry})
	}
	a, err := p.startRelay(ctx, relayA)
	if err != nil {
		return out, err
	}
	defer a.close()
	p.setNow(s20SendAt)
	if err := mustClaim(ctx, a); err != nil {
		return out, err
	}
	if _, err := a.send(ctx); err != nil {
		return out, err
	}
	if run.resend {
		b, err := p.startRelay(ctx, relayB)
		if err != nil {
			return out, err
		}
		defer b.close()
		if err := mustClaim(ctx, b); err != nil {
			return out, err
		}
		if _, err := b.send(ctx); err != nil {
			return out, err
		}
		if _, err := b.complete(ctx); err != nil {
			return out, err
		}
	}
	if _, err := a.complete(ctx); err != nil {
		return out, err
	}

	// A partition between Consumer-1 and the broker: its acks never arrive.
	plan.Arm(failpoint.Rule{Point: failpoint.AfterEffectBeforeAck, Actor: "Consumer-1", Fault: failpoint.AckLost, Times: 1000})
	p.setNow(s20ConsumeAt)
	c1, err := p.startConsumer(ctx, "Consumer-1", creditService, design)
	if err != nil {
		return out, err
	}
	err = p.drainConsumer(ctx, c1, s20MaxDeliveries)
	c1.close()
	if err != nil {
		return out, err
	}
	dead, err := p.audit.DeadLetters(ctx)
	if err != nil {
		return out, err
	}
	if len(dead) == 0 {
		return out, fmt.Errorf("nothing was dead-lettered")
	}
	out.deadLetteredAt = dead[0].DeadLetteredAt
	p.event("broker", "dead-lettered", fmt.Sprintf("%d offer(s) moved to the DLQ after %d unacknowledged deliveries; the DLQ keeps them %s",
		len(dead), s20MaxDeliveries, durationText(dlqRetention)))

	// Three days later: the nightly purge jobs have run, then an operator
	// replays the event's oldest dead letter through the broker.
	out.replayAt = out.deadLetteredAt + s20ReplayDelay
	p.setNow(out.replayAt)
	p.event(clockName, "three days later", "the partition has healed; the purge jobs run, then an operator replays the DLQ")
	if out.inboxPurged, err = p.audit.PurgeConsumed(ctx, p.now(), run.inboxRetention); err != nil {
		return out, err
	}
	p.event("inbox purge", "delete", fmt.Sprintf("consumed_events older than %s: %d row(s) deleted", durationText(run.inboxRetention), out.inboxPurged))
	if out.dlqPurged, err = p.audit.PurgeDeadLetters(ctx, p.now(), dlqRetention); err != nil {
		return out, err
	}
	p.event("DLQ purge", "delete", fmt.Sprintf("dead letters older than %s: %d row(s) deleted", durationText(dlqRetention), out.dlqPurged))
	if dead, err = p.audit.DeadLetters(ctx); err != nil {
		return out, err
	}
	if len(dead) > 0 {
		o, ok, err := p.audit.ReplayDeadLetter(ctx, dead[0].ID, operator, p.now(), run.brokerWindow)
		if err != nil {
			return out, err
		}
		out.replayed, out.replayDropped = ok, o.Dropped
		answer := fmt.Sprintf("broker accepted it as offer %d", o.OfferID)
		if o.Dropped {
			answer = fmt.Sprintf("broker dropped it: the event id was accepted within its %s window", durationText(run.brokerWindow))
		}
		p.event(operator, "replay", fmt.Sprintf("dead letter %d (%s) offered again: %s", dead[0].ID, dead[0].EventID, answer))
	} else {
		p.event(operator, "replay", "the DLQ is empty: its retention purged the message, nothing to replay")
	}
	c2, err := p.startConsumer(ctx, "Consumer-2", creditService, design)
	if err != nil {
		return out, err
	}
	err = p.drainConsumer(ctx, c2, s20MaxDeliveries)
	c2.close()
	if err != nil {
		return out, err
	}

	offers, err := p.audit.Offers(ctx)
	if err != nil {
		return out, err
	}
	for _, o := range offers {
		switch {
		case o.Dropped && o.OfferedAt < out.replayAt:
			out.droppedBefore++
		case !o.Dropped && o.OfferedAt >= out.replayAt:
			out.passedAtReplay++
		}
	}
	out.credit, err = p.count(ctx, store.AccountCreditSQL, accountID(creditService, s20Account))
	return out, err
}
