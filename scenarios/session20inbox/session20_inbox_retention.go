// Package session20inbox is the lesson session-20-inbox-retention: its
// Lesson (the sequence, the checks, the variants and what the registry's
// tests read to prove it), the stages and actors only it uses, its proofs
// (proofs.go) and its tests.
package session20inbox

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/failpoint"
	"github.com/outboxlab/outboxlab/instance"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/natsbroker"
	"github.com/outboxlab/outboxlab/store"
)

// Session 20's timeline, in ticks. The relay sends at 1 s; the consumer
// first receives the offer at 40 s; its acks never reach the broker, which
// redelivers every visibility timeout (cast.VisibilityTimeout) and dead-letters the offer after
// s20MaxDeliveries; an operator replays the dead letter s20ReplayDelay later.
const (
	s20Event         = "e20"
	s20WindowEvent   = "e21"
	s20Account       = "ACC-20"
	s20Credit        = int64(1000)
	s20SendAt        = 1 * cast.TickSecond
	s20ConsumeAt     = 40 * cast.TickSecond
	s20MaxDeliveries = int64(3)
	s20ReplayDelay   = 3 * cast.TickDay
	// s20DeadLetterAt is when the broker gives up on the unacknowledged offer.
	s20DeadLetterAt = s20ConsumeAt + s20MaxDeliveries*cast.VisibilityTimeout
	// s20ReplayAt is the operator's replay, three days after the dead-lettering.
	s20ReplayAt = s20DeadLetterAt + s20ReplayDelay
	// s20ResendGap is how long after Relay-A's send Relay-B resends: one lease.
	s20ResendGap = cast.RelayLease
)

// s20EventIDPerSend is session 20's mistake that is no statement: the
// relay's choice of a message id per send.
const s20EventIDPerSend = "event-id-per-send"

// Lesson is session-20-inbox-retention, as the registry lists it: "Session
// 20: deduplication lasts only as long as its window".
var Lesson = lesson.Scenario{
	Name:    "session-20-inbox-retention",
	Session: "Session-20",
	FileTag: "Inbox-Retention",
	Title:   "Session 20: deduplication lasts only as long as its window",
	Design:  lab.Safe,
	// RealBroker: --broker nats runs each part on its own JetStream streams.
	RealBroker: true,
	Figures: map[string]float64{
		"credit_short_retention_cents": 2000, "credit_long_retention_cents": 1000, "broker_dropped_within_window": 1,
		"broker_passed_after_window": 1,
	},
	Teaches: "Part 1, inbox retention: event {@event} ({award_cents} cents) is consumed at {consume_clock} ({consume_at} into the part), but the " +
		"consumer's acks never reach the broker, which redelivers it every {visibility_timeout} (the inbox absorbs those " +
		"duplicates) and dead-letters it after {max_deliveries} deliveries. The dead-letter queue keeps it for its retention " +
		"(--dlq-retention: {dlq_retention}), while the inbox purges dedup records after its own " +
		"(--inbox-retention: {inbox_retention}). An operator replays it {replay_delay} after the dead-lettering: if the " +
		"inbox has purged its record by then, the replay is applied again. With an inbox retention at least the longest " +
		"redelivery interval (the DLQ retention plus the {max_deliveries} deliveries of {visibility_timeout} before it: " +
		"{redelivery_span} here; the lab's second run of part 1 keeps records {long_inbox_retention}), the replay is a duplicate.\n\nPart 2, broker window: {broker_name} drops an " +
		"offer whose event id it accepted within its window (--broker-window: {broker_window}); event {@window_event} is " +
		"resent {resend_gap} after its first send, when the first relay's lease has expired, and replayed " +
		"{replay_delay} after its dead-lettering. A window longer than the resend gap drops the resend, and one shorter " +
		"than the replay's distance lets the replay through, so only the inbox keeps the effect single.\n\nWith the " +
		"default flags the checks state the lesson's figures ({lesson_figures}). Other flags " +
		"change what the lab must measure: each expected value is then derived from the flags (the report's table of expected " +
		"values shows the rule), the run passes when the measurements match, and the verdict, built from the measurements, " +
		"says plainly which part of the lesson was or was not reproduced.\n\nReal systems' published defaults: MassTransit's " +
		"inbox duplicate-detection window 30 min; NServiceBus (SQL persistence) keeps deduplication data 7 days and warns that " +
		"a retry after that is seen as new; NATS JetStream's duplicate window 2 min; SQS FIFO's deduplication interval 5 min; " +
		"Kafka's idempotent producer deduplicates only within one producer session.\n\nThe broker and inbox tables store UTC " +
		"clock text; outbox_events keeps logical ticks (milliseconds since {tick_epoch}).",
	DoesNotSolve: "The inbox trades storage for safety: to stay correct it must remember every event id for as long as " +
		"anything can redeliver it (redeliveries, the DLQ, manual replays, restores), so consumed_events grows with " +
		"traffic times retention, and a replay after any finite retention is applied again (unbounded retention is the " +
		"only complete answer). Broker deduplication (NATS 2 min, SQS FIFO 5 min, Kafka's per-session producer ids) " +
		"covers only a relay's quick resends, never a replay days later. Exactly-once delivery is not claimed.",
	Settings:   retentionSettings,
	Statements: cast.PipelineSQL(store.ConsumerLesson.Purge, store.BrokerLesson.DeadLetter, store.BrokerLesson.PurgeDeadLetters, store.BrokerLesson.TakeDeadLetter),
	Set:        cast.DeliveryLesson,
	Options: []lesson.Option{
		{Flag: "inbox-retention", Usage: "how long the consumer keeps dedup records, a `DURATION` such as 90m, 24h or 2d",
			Duration: func(o *lesson.Options) *time.Duration { return &o.InboxRetention }},
		{Flag: "dlq-retention", Usage: "how long the dead-letter queue keeps messages, a `DURATION`",
			Duration: func(o *lesson.Options) *time.Duration { return &o.DLQRetention }},
		lesson.BrokerWindowOption,
	},
	Checks: []lesson.CheckDoc{
		{Name: "credit_short_retention_cents", Measure: true, About: "short retention: cents credited to {@account} for " +
			"{@event} by the end, {replay_delay} after its dead-lettering, when an operator replays it if the DLQ (keeping " +
			"messages {dlq_retention}) still holds it, the inbox keeping dedup records {inbox_retention}; the award is " +
			"{award_cents}, and each credit above it is a delivery applied again"},
		{Name: "credit_long_retention_cents", About: "long retention: cents credited to {@account} for {@event} after the " +
			"same replay, the inbox keeping dedup records {long_inbox_retention}, at least the longest redelivery " +
			"interval; the award is {award_cents}"},
		{Name: "broker_dropped_within_window", Measure: true, About: "broker window: sends of {@window_event} the broker's " +
			"{broker_window} window dropped before the replay ({@resender}'s resend came {resend_gap} after the first send)"},
		{Name: "broker_passed_after_window", Measure: true, About: "broker window: offers of {@window_event} the broker " +
			"accepted from the operator's replay, scheduled {replay_since_send} after the first send (none where the DLQ no " +
			"longer held the message), its window at {broker_window} and the DLQ keeping messages {dlq_retention}"},
		{Name: "credit_broker_window_cents", About: "broker window: cents credited to {@account} for {@window_event} over " +
			"the first send, the resend and the replay, whatever the broker's {broker_window} window dropped or passed, " +
			"the inbox keeping dedup records {long_inbox_retention}; the award is {award_cents}"},
	},
	Variants: []lesson.Variant{
		{Name: "naive-consumer", Designs: []cast.ConsumerDesign{cast.NaiveDesign}, Mistake: "the consumer increments unconditionally, with no inbox: every redelivery and the replay credit again",
			Breaks: []string{"credit_short_retention_cents", "credit_long_retention_cents", "credit_broker_window_cents"},
			Shows: "With no inbox, the short-retention part ended at {credit_short_retention_cents} cents, the " +
				"long-retention part at {credit_long_retention_cents} and the broker-window part at " +
				"{credit_broker_window_cents}, for one award of {award_cents}: the first delivery, the redeliveries of " +
				"unacknowledged deliveries and the replay {replay_delay} after the dead-lettering each credited, whatever " +
				"the inbox retention. Retention decides how long an inbox protects; without an inbox nothing does."},
		{Name: s20EventIDPerSend, Changes: "the relay's code: each send carries a new message id, not the outbox event id", Mistake: "the relay gives every send a new message id instead of the outbox event id, so the " +
			"broker's dedup window cannot recognise the resend",
			Breaks: []string{"broker_dropped_within_window", "credit_broker_window_cents"},
			Shows: "In the broker-window part {@resender}'s resend, {resend_gap} after the first send, carried a new " +
				"message id, so the broker's {broker_window} window dropped {broker_dropped_within_window} sends and the " +
				"inbox, which keys on the same id, credited the resend too: {credit_broker_window_cents} cents for one " +
				"award of {award_cents}. Deduplication, at the broker or in the inbox, works only on the outbox event's " +
				"own, stable id."},
	},
	Breakers:  breakers(),
	Guards:    guards(),
	Processes: processes,
	Run:       runInboxRetention,
}

// The lesson's figures with the default flags: LESSONS.md's four metric
// keys, and part 2's credit, which LESSONS.md states in words ("only the
// consumer's inbox keeps the effect single").
var s20LessonFigures = map[string]float64{
	"credit_short_retention_cents": float64(2 * s20Credit),
	"credit_long_retention_cents":  float64(s20Credit),
	"broker_dropped_within_window": 1,
	"broker_passed_after_window":   1,
	"credit_broker_window_cents":   float64(s20Credit),
}

// retentionRun is one of session 20's three databases.
type retentionRun struct {
	label        string
	file         string
	event        string
	Lesson       int64
	brokerWindow int64
	resend       bool // part 2: Relay-A stalls past its lease and Relay-B resends
}

// retentionOutcome is what durable state and the ledgers say after a run.
type retentionOutcome struct {
	credit         int64
	consumedAt     int64 // the first effect: when the dedup record was written
	deadLetteredAt int64
	replayAt       int64
	inboxPurged    int64
	dlqPurged      int64
	replayed       bool  // the DLQ still held the message and the operator offered it again
	replayDropped  bool  // the broker's window dropped that replay
	replayApplied  bool  // a consumer applied the replay's offer: a second effect
	droppedBefore  int64 // offers dropped by the window before the replay
	passedAtReplay int64 // offers accepted at or after the replay
}

// retentionFlags are the periods a session-20 run uses, in ticks.
type retentionFlags struct {
	short, dlq, window int64
	// long is the part-1-long and part-2 inbox retention: the longest
	// redelivery interval (the redeliveries before the DLQ, then the DLQ's
	// whole retention), or the short retention if that is longer.
	long int64
}

func flagsOf(opts lesson.Options) retentionFlags {
	f := retentionFlags{short: cast.TicksOf(opts.InboxRetention), dlq: cast.TicksOf(opts.DLQRetention), window: cast.TicksOf(opts.BrokerWindow)}
	f.long = max(f.short, f.redeliverySpan())
	return f
}

// redeliverySpan is the longest after its first consumption that a message
// can still come back: its redeliveries, then a replay from the DLQ.
func (f retentionFlags) redeliverySpan() int64 {
	return f.dlq + s20MaxDeliveries*cast.VisibilityTimeout
}

// longWhy says how the long retention was derived.
func (f retentionFlags) longWhy() string {
	if f.long == f.redeliverySpan() {
		return fmt.Sprintf("%s = the DLQ retention %s + %d deliveries × the %s visibility timeout: the longest after its first consumption that the message can still come back (redeliveries, then a replay from the DLQ)",
			cast.DurationText(f.long), cast.DurationText(f.dlq), s20MaxDeliveries, cast.DurationText(cast.VisibilityTimeout))
	}
	return fmt.Sprintf("%s = the inbox retention flag itself, already longer than the DLQ retention %s + %d deliveries × %s",
		cast.DurationText(f.long), cast.DurationText(f.dlq), s20MaxDeliveries, cast.DurationText(cast.VisibilityTimeout))
}

func runInboxRetention(ctx context.Context, env *lesson.Env) (*lab.Result, error) {
	f := flagsOf(env.Options)
	design := lesson.ConsumerDesign(env, cast.InboxDesign)
	runs := []retentionRun{
		{label: "part 1 short", file: "part-1-short-retention", event: s20Event, Lesson: f.short},
		{label: "part 1 long", file: "part-1-long-retention", event: s20Event, Lesson: f.long},
		{label: "part 2", file: "part-2-broker-window", event: s20WindowEvent, Lesson: f.long, brokerWindow: f.window, resend: true},
	}

	var tl lab.Timeline
	r := &lab.Result{}
	var ps []*cast.Pipeline
	plans := map[string]*failpoint.Plan{}
	defer func() {
		for _, p := range ps {
			p.Close()
		}
	}()
	summary := retentionSummary(env, f)
	outs, parts := map[string]retentionOutcome{}, map[string]*cast.Pipeline{}
	for _, run := range runs {
		path := env.ExtraDatabasePath(run.file)
		plan := failpoint.NewPlan()
		p, err := cast.NewPipeline(ctx, env.Open, path, run.label, &tl, plan)
		if err != nil {
			return nil, err
		}
		ps = append(ps, p)
		plans[run.label] = plan
		if err := env.UseRealBroker(ctx, p, run.label, natsbroker.Config{Window: cast.TickSpan(run.brokerWindow),
			Visibility: cast.TickSpan(cast.VisibilityTimeout), MaxDeliveries: s20MaxDeliveries}); err != nil {
			return nil, err
		}
		p.SQL = lesson.StatementSet(env, p.SQL)
		p.EventIDPerSend = env.Is(s20EventIDPerSend)
		p.Event(lab.KindNote, "scenario", run.label, fmt.Sprintf("inbox retention %s, DLQ retention %s, broker window %s (fresh database %s)",
			cast.DurationText(run.Lesson), cast.DurationText(f.dlq), cast.WindowText(run.brokerWindow), filepath.Base(path)))
		out, err := playRetention(ctx, env, p, plan, run, design, f.dlq)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", run.label, err)
		}
		outs[run.label], parts[run.label] = out, p
		addRetentionRow(&summary, run, f, out, env.DatabaseLabel(path))
		if r.Database == "" {
			r.Database = path
		}
	}
	measureRetention(r, f, outs)
	if err := castRetention(ctx, parts, outs, r); err != nil {
		return nil, err
	}
	expected := expectedRetentionFigures(f)
	want := map[string]float64{}
	for _, e := range expected {
		want[e.check] = e.want
	}
	lesson.ExpectDocumented(r, env.Scenario.Checks, want)

	r.Tables = append(r.Tables, summary, expectedTable(expected))
	if err := cast.FinishDelivery(ctx, r, ps, plans); err != nil {
		return nil, err
	}
	r.Verdict = retentionVerdict(r, env, f, outs)
	return r, nil
}

// retentionSummary is the table of the three parts, one row each.
func retentionSummary(env *lesson.Env, f retentionFlags) lab.Table {
	return lab.Table{Title: "Deduplication windows",
		Note: "One fresh database per part. " + env.DatabaseWhere() + " Credit and counts are read from each database after the replay. " +
			"The long inbox retention (part 1 long and part 2) is " + f.longWhy() + ". Part 1 runs with no broker window (off).",
		Columns: []string{"Part", "Inbox retention", "DLQ retention", "Broker window", "Dead-lettered at", "Replay at", "Inbox rows purged", "DLQ rows purged", "Replay at the broker", "Dropped before replay", "Credit (cents)", env.DatabaseColumn()}}
}

// addRetentionRow adds one part's row to the summary.
func addRetentionRow(summary *lab.Table, run retentionRun, f retentionFlags, out retentionOutcome, database string) {
	replay := "nothing to replay (DLQ purged)"
	switch {
	case out.replayed && out.replayDropped:
		replay = "dropped (inside the window)"
	case out.replayed:
		replay = "passed"
	}
	summary.AddRow(run.label, cast.DurationText(run.Lesson), cast.DurationText(f.dlq), cast.WindowText(run.brokerWindow),
		cast.TickClock(out.deadLetteredAt), cast.TickClock(out.replayAt), out.inboxPurged, out.dlqPurged, replay, out.droppedBefore, out.credit, database)
}

// playRetention runs one part: send (and, in part 2, a resend after a lease
// expiry), consumption whose acks are lost until the broker dead-letters the
// offer, then three days later the purge jobs and the operator's replay.
func playRetention(ctx context.Context, env *lesson.Env, p *cast.Pipeline, plan *failpoint.Plan, run retentionRun, design cast.ConsumerDesign, dlqRetention int64) (retentionOutcome, error) {
	var out retentionOutcome
	p.BrokerWindow = run.brokerWindow
	if err := p.OpenAccount(ctx, cast.CreditService, s20Account); err != nil {
		return out, err
	}
	if err := p.CommitCredit(ctx, run.event, s20Account, s20Credit); err != nil {
		return out, err
	}
	if err := sendRetention(ctx, env, p, plan, run); err != nil {
		return out, err
	}
	return consumeAndReplay(ctx, env, p, plan, run, design, dlqRetention)
}

// sendRetention is the relays' part: Relay-A sends the event and, in part
// 2, stalls past its lease while Relay-B resends and completes.
func sendRetention(ctx context.Context, env *lesson.Env, p *cast.Pipeline, plan *failpoint.Plan, run retentionRun) error {
	if run.resend {
		plan.Arm(failpoint.Rule{Point: failpoint.AfterSendBeforeComplete, Actor: cast.RelayA, Subject: run.event, Fault: failpoint.LeaseExpiry})
	}
	a, err := env.Instances.PipelineRelay(ctx, p, cast.RelayA)
	if err != nil {
		return err
	}
	defer a.Close(ctx)
	p.SetNow(s20SendAt)
	if err := cast.MustClaim(ctx, a); err != nil {
		return err
	}
	if _, err := a.Send(ctx); err != nil {
		return err
	}
	if run.resend {
		b, err := env.Instances.PipelineRelay(ctx, p, cast.RelayB)
		if err != nil {
			return err
		}
		defer b.Close(ctx)
		if err := cast.MustClaim(ctx, b); err != nil {
			return err
		}
		if _, err := b.Send(ctx); err != nil {
			return err
		}
		if _, err := b.Complete(ctx); err != nil {
			return err
		}
		if err := instance.CloseAll(ctx, b); err != nil {
			return err
		}
	}
	if _, err := a.Complete(ctx); err != nil {
		return err
	}
	return instance.CloseAll(ctx, a)
}

// consumeAndReplay is the consumers' part: acks lost until the broker
// dead-letters the offer, then, three days later, the purge jobs, the
// operator's replay and a fresh consumer.
func consumeAndReplay(ctx context.Context, env *lesson.Env, p *cast.Pipeline, plan *failpoint.Plan, run retentionRun, design cast.ConsumerDesign, dlqRetention int64) (retentionOutcome, error) {
	var out retentionOutcome
	if err := consumeUntilDeadLettered(ctx, env, p, plan, design, dlqRetention, &out); err != nil {
		return out, err
	}
	// Three days later: the nightly purge jobs have run, then an operator
	// replays the event's oldest dead letter through the broker.
	out.replayAt = out.deadLetteredAt + s20ReplayDelay
	p.SetNow(out.replayAt)
	p.Event(lab.KindNote, cast.ClockName, cast.DurationText(s20ReplayDelay)+" later",
		"the partition has healed; the purge jobs run, then an operator replays the DLQ")
	if err := purgeRetention(ctx, p, run, dlqRetention, &out); err != nil {
		return out, err
	}
	replayOffer, err := replayDeadLetter(ctx, p, run, &out)
	if err != nil {
		return out, err
	}
	c2, err := env.Instances.PipelineConsumer(ctx, p, "Consumer-2", cast.CreditService, design)
	if err != nil {
		return out, err
	}
	if err := p.DrainConsumer(ctx, c2, s20MaxDeliveries); err != nil {
		_ = c2.Close(ctx) // on the failure path the step's own error is the one to report
		return out, err
	}
	if err := c2.Close(ctx); err != nil {
		return out, err
	}
	for _, e := range p.Effects() {
		if e.Applied && out.replayed && !out.replayDropped && e.OfferID == replayOffer {
			out.replayApplied = true
		}
	}
	return out, measureRetentionRun(ctx, p, &out)
}

// consumeUntilDeadLettered is the partition: Consumer-1's acks never reach
// the broker, which redelivers the offer until it dead-letters it.
func consumeUntilDeadLettered(ctx context.Context, env *lesson.Env, p *cast.Pipeline, plan *failpoint.Plan, design cast.ConsumerDesign, dlqRetention int64, out *retentionOutcome) error {
	plan.Arm(failpoint.Rule{Point: failpoint.AfterEffectBeforeAck, Actor: "Consumer-1", Fault: failpoint.AckLost, Times: 1000})
	p.SetNow(s20ConsumeAt)
	c1, err := env.Instances.PipelineConsumer(ctx, p, "Consumer-1", cast.CreditService, design)
	if err != nil {
		return err
	}
	if err := p.DrainConsumer(ctx, c1, s20MaxDeliveries); err != nil {
		_ = c1.Close(ctx) // on the failure path the step's own error is the one to report
		return err
	}
	if err := c1.Close(ctx); err != nil {
		return err
	}
	for _, e := range p.Effects() {
		if e.Applied {
			out.consumedAt = e.Tick
			break
		}
	}
	dead, err := p.Broker().DeadLetters(ctx)
	if err != nil {
		return err
	}
	if len(dead) == 0 {
		return fmt.Errorf("nothing was dead-lettered")
	}
	if out.deadLetteredAt, err = cast.TickOfClock(dead[0].DeadLetteredAt); err != nil {
		return err
	}
	p.Event(lab.KindNote, "broker", "dead-lettered", fmt.Sprintf("%s moved to the DLQ after %d unacknowledged deliveries; the DLQ keeps them %s",
		lab.Count(int64(len(dead)), "offer", "offers"), s20MaxDeliveries, cast.DurationText(dlqRetention)))
	return nil
}

// purgeRetention runs the inbox's and the DLQ's retention purges at the
// clock's now.
func purgeRetention(ctx context.Context, p *cast.Pipeline, run retentionRun, dlqRetention int64, out *retentionOutcome) error {
	var err error
	if out.inboxPurged, err = p.Consumers().Purge(ctx, p.Clock.Now(), cast.TickSpan(run.Lesson)); err != nil {
		return err
	}
	p.Event(lab.KindNote, "inbox purge", "delete", fmt.Sprintf("consumed_events older than %s: %s deleted", cast.DurationText(run.Lesson), lab.Rows(int64(out.inboxPurged))))
	if out.dlqPurged, err = p.Broker().PurgeDeadLetters(ctx, p.Clock.Now(), cast.TickSpan(dlqRetention)); err != nil {
		return err
	}
	p.Event(lab.KindNote, "DLQ purge", "delete", fmt.Sprintf("dead letters older than %s: %s deleted", cast.DurationText(dlqRetention), lab.Rows(int64(out.dlqPurged))))
	return nil
}

// replayDeadLetter is the operator's redrive of the oldest dead letter, if
// the DLQ still holds one; it returns the replay's offer id.
func replayDeadLetter(ctx context.Context, p *cast.Pipeline, run retentionRun, out *retentionOutcome) (int64, error) {
	dead, err := p.Broker().DeadLetters(ctx)
	if err != nil {
		return 0, err
	}
	if len(dead) == 0 {
		p.Event(lab.KindNote, cast.Operator, "replay", "the DLQ is empty: its retention purged the message, nothing to replay")
		return 0, nil
	}
	o, ok, err := p.Broker().ReplayDeadLetter(ctx, dead[0].ID, cast.Operator, p.Clock.Now(), cast.TickSpan(run.brokerWindow))
	if err != nil {
		return 0, err
	}
	out.replayed, out.replayDropped = ok, o.Dropped
	answer := fmt.Sprintf("broker accepted it as offer %d", o.OfferID)
	if o.Dropped {
		answer = fmt.Sprintf("broker dropped it: the event id was accepted within its %s window", cast.WindowText(run.brokerWindow))
	}
	p.Add(lab.Event{Kind: lab.KindOffer, Subject: dead[0].EventID, Offer: o.OfferID, Actor: cast.Operator, Action: "replay",
		Detail: fmt.Sprintf("dead letter %d (%s) offered again: %s", dead[0].ID, dead[0].EventID, answer)})
	return o.OfferID, nil
}

// measureRetentionRun reads a part's figures from its database: the offers
// dropped before the replay and accepted at or after it, and the credit.
func measureRetentionRun(ctx context.Context, p *cast.Pipeline, out *retentionOutcome) error {
	offers, err := p.Broker().Offers(ctx)
	if err != nil {
		return err
	}
	for _, o := range offers {
		at, err := cast.TickOfClock(o.OfferedAt)
		if err != nil {
			return err
		}
		switch {
		case o.Dropped && at < out.replayAt:
			out.droppedBefore++
		case !o.Dropped && at >= out.replayAt:
			out.passedAtReplay++
		}
	}
	out.credit, err = p.Count(ctx, store.AccountCredit.SQL, cast.AccountID(cast.CreditService, s20Account))
	return err
}

// castRetention records the roles and the periods session 20's texts
// quote, as the parts' ledgers and databases show them: the event, its
// account and award from part 1 short's send ledger and offers, and from
// part 2's send ledger its event, the relay that resent it, the gap between the sends
// and the replay's distance from the first send; part 1's first effect
// gives the time of consumption. Recorded here, they stand in the texts
// in place of the script's periods (see [retentionSettings]).
func castRetention(ctx context.Context, parts map[string]*cast.Pipeline, outs map[string]retentionOutcome, r *lab.Result) error {
	short := parts["part 1 short"]
	if sends := short.Record().Sends; len(sends) > 0 {
		r.SetCast("event", sends[0].Event) // the outbox event id, whatever message id the send carried
	}
	offers, err := short.Broker().Offers(ctx)
	if err != nil {
		return err
	}
	if len(offers) > 0 {
		var pl cast.Payload
		if err := json.Unmarshal([]byte(offers[0].Payload), &pl); err != nil {
			return err
		}
		r.SetCast("account", pl.Account)
		r.SetMetric("award_cents", float64(pl.CreditCents))
	}
	r.SetSetting("consume_at", cast.DurationText(outs["part 1 short"].consumedAt))
	r.SetSetting("consume_clock", cast.LessonTicks.Clock(outs["part 1 short"].consumedAt))
	sends := parts["part 2"].Record().Sends
	if len(sends) > 0 {
		r.SetCast("window_event", sends[0].Event)
		r.SetSetting("replay_since_send", cast.DurationText(outs["part 2"].replayAt-sends[0].Tick))
	}
	if len(sends) > 1 {
		r.SetCast("resender", sends[1].Relay)
		r.SetSetting("resend_gap", cast.DurationText(sends[1].Tick-sends[0].Tick))
	}
	return nil
}
