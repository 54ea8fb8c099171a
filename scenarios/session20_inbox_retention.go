package scenarios

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/failpoint"
	"github.com/outboxlab/outboxlab/instance"
	"github.com/outboxlab/outboxlab/lab"
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

var inboxRetention = Scenario{
	Name:    "session-20-inbox-retention",
	Session: "Session-20",
	FileTag: "Inbox-Retention",
	Title:   "Session 20: deduplication lasts only as long as its window",
	Design:  lab.Safe,
	Teaches: "Part 1, inbox retention: event e20 (1000 cents) is consumed at t=40 s, but the consumer's acks never reach the " +
		"broker, which redelivers it (the inbox absorbs those duplicates) and dead-letters it after 3 deliveries. The " +
		"dead-letter queue keeps it for its retention (--dlq-retention, default 7d), while the inbox purges dedup records " +
		"after its own (--inbox-retention, default 24h). Replayed three days later, the message meets an empty inbox and is " +
		"applied again: credit 2000. With an inbox retention at least the longest redelivery interval (the DLQ retention " +
		"plus the 3 deliveries of 30 s before it: 7d1m30s with the defaults), the replay is a duplicate: credit 1000.\n\nPart 2, " +
		"broker window: the lab's broker drops an offer whose event id it accepted within its window (--broker-window, default " +
		"2m); the resend after a 30 s lease expiry is dropped, but the three-day replay passes the broker, so only the inbox " +
		"keeps the effect single.\n\nWith the default flags the checks state the lesson's figures (2000, 1000, 1, 1). Other flags " +
		"change what the lab must measure: each expected value is then derived from the flags (the report's table of expected " +
		"values shows the rule), the run passes when the measurements match, and the verdict, built from the measurements, " +
		"says plainly which part of the lesson was or was not reproduced.\n\nReal systems' published defaults: MassTransit's " +
		"inbox duplicate-detection window 30 min; NServiceBus (SQL persistence) keeps deduplication data 7 days and warns that " +
		"a retry after that is seen as new; NATS JetStream's duplicate window 2 min; SQS FIFO's deduplication interval 5 min; " +
		"Kafka's idempotent producer deduplicates only within one producer session.\n\nThe broker and inbox tables store UTC " +
		"clock text; outbox_events keeps logical ticks (milliseconds since 2026-01-15T09:00:00.000Z).",
	DoesNotSolve: "The inbox trades storage for safety: to stay correct it must remember every event id for as long as " +
		"anything can redeliver it (redeliveries, the DLQ, manual replays, restores), so consumed_events grows with " +
		"traffic times retention, and a replay after any finite retention is applied again (unbounded retention is the " +
		"only complete answer). Broker deduplication (NATS 2 min, SQS FIFO 5 min, Kafka's per-session producer ids) " +
		"covers only a relay's quick resends, never a replay days later. Exactly-once delivery is not claimed.",
	Statements: cast.PipelineSQL(store.ConsumerLesson.Purge, store.BrokerLesson.DeadLetter, store.BrokerLesson.PurgeDeadLetters, store.BrokerLesson.TakeDeadLetter),
	Checks: []CheckDoc{
		{Name: "credit_short_retention_cents", About: "part 1: the inbox retention is shorter than the three-day replay while the DLQ still holds the message, " +
			"so the replay re-applies the effect: 2000 with the default flags (other flags: see the expected-values table)"},
		{Name: "credit_long_retention_cents", About: "part 1: with the inbox retention at least the longest redelivery interval, the replay has no second effect: 1000"},
		{Name: "broker_dropped_within_window", About: "part 2: the resend 30s after the first send falls inside the broker window and is dropped: 1 with the default flags"},
		{Name: "broker_passed_after_window", About: "part 2: the replay three days later falls outside the broker window (and the DLQ still holds it) and passes the broker: 1 with the default flags"},
		{Name: "credit_broker_window_cents", About: "part 2: whatever the broker window dropped or passed, only the inbox keeps the effect single: " +
			"the resend and the replay credit nothing more, 1000 with any flags"},
	},
	Variants: []Variant{
		{Name: "naive-consumer", Designs: []cast.ConsumerDesign{cast.NaiveDesign}, Mistake: "the consumer increments unconditionally, with no inbox: every redelivery and the replay credit again",
			Breaks: []string{"credit_short_retention_cents", "credit_long_retention_cents", "credit_broker_window_cents"},
			Shows: "With no inbox, every part ends at 4000 cents for one 1000-cent award: the first delivery, the " +
				"redeliveries of unacknowledged deliveries and the replay three days later all credit again, whatever " +
				"the inbox retention. Retention decides how long an inbox protects; without an inbox nothing does."},
		{Name: s20EventIDPerSend, Changes: "the relay's code: each send carries a new message id, not the outbox event id", Mistake: "the relay gives every send a new message id instead of the outbox event id, so the " +
			"broker's dedup window cannot recognise the resend",
			Breaks: []string{"broker_dropped_within_window", "credit_broker_window_cents"},
			Shows: "In part 2 the resend 30 s after the first send carries a new message id, so the broker's window does " +
				"not recognise it (nothing dropped) and the inbox, which keys on the same id, credits it too: 2000 " +
				"cents for one 1000-cent award. Deduplication, at the broker or in the inbox, works only on the " +
				"outbox event's own, stable id."},
	},
	Run: runInboxRetention,
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
	label          string
	file           string
	event          string
	inboxRetention int64
	brokerWindow   int64
	resend         bool // part 2: Relay-A stalls past its lease and Relay-B resends
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

func flagsOf(opts Options) retentionFlags {
	f := retentionFlags{short: cast.TicksOf(opts.InboxRetention), dlq: cast.TicksOf(opts.DLQRetention), window: cast.TicksOf(opts.BrokerWindow)}
	f.long = max(f.short, f.dlq+s20MaxDeliveries*cast.VisibilityTimeout)
	return f
}

// longWhy says how the long retention was derived.
func (f retentionFlags) longWhy() string {
	span := f.dlq + s20MaxDeliveries*cast.VisibilityTimeout
	if f.long == span {
		return fmt.Sprintf("%s = the DLQ retention %s + %d deliveries × the %s visibility timeout: the longest after its first consumption that the message can still come back (redeliveries, then a replay from the DLQ)",
			cast.DurationText(f.long), cast.DurationText(f.dlq), s20MaxDeliveries, cast.DurationText(cast.VisibilityTimeout))
	}
	return fmt.Sprintf("%s = the inbox retention flag itself, already longer than the DLQ retention %s + %d deliveries × %s",
		cast.DurationText(f.long), cast.DurationText(f.dlq), s20MaxDeliveries, cast.DurationText(cast.VisibilityTimeout))
}

func runInboxRetention(ctx context.Context, env *Env) (*lab.Result, error) {
	f := flagsOf(env.Options)
	design := consumerDesign(env, cast.InboxDesign)
	runs := []retentionRun{
		{label: "part 1 short", file: "part-1-short-retention", event: s20Event, inboxRetention: f.short},
		{label: "part 1 long", file: "part-1-long-retention", event: s20Event, inboxRetention: f.long},
		{label: "part 2", file: "part-2-broker-window", event: s20WindowEvent, inboxRetention: f.long, brokerWindow: f.window, resend: true},
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
	outs := map[string]retentionOutcome{}
	for _, run := range runs {
		path := env.ExtraDatabasePath(run.file)
		plan := failpoint.NewPlan()
		p, err := cast.NewPipeline(ctx, env.Open, path, run.label, &tl, plan)
		if err != nil {
			return nil, err
		}
		ps = append(ps, p)
		plans[run.label] = plan
		p.SQL = statementSet(env, p.SQL)
		p.EventIDPerSend = env.Is(s20EventIDPerSend)
		p.Event(lab.KindNote, "scenario", run.label, fmt.Sprintf("inbox retention %s, DLQ retention %s, broker window %s (fresh database %s)",
			cast.DurationText(run.inboxRetention), cast.DurationText(f.dlq), cast.WindowText(run.brokerWindow), filepath.Base(path)))
		out, err := playRetention(ctx, env, p, plan, run, design, f.dlq)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", run.label, err)
		}
		outs[run.label] = out
		addRetentionRow(&summary, run, f, out, env.DatabaseLabel(path))
		if r.Database == "" {
			r.Database = path
		}
	}
	measureRetention(r, f, outs)
	expected := expectedRetentionFigures(f)
	want := map[string]float64{}
	for _, e := range expected {
		want[e.check] = e.want
	}
	expectDocumented(r, env.Scenario.Checks, want)

	r.Tables = append(r.Tables, summary, expectedTable(expected))
	if err := cast.FinishDelivery(ctx, r, ps, plans); err != nil {
		return nil, err
	}
	r.Verdict = retentionVerdict(r, env, f, outs)
	return r, nil
}

// retentionSummary is the table of the three parts, one row each.
func retentionSummary(env *Env, f retentionFlags) lab.Table {
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
	summary.AddRow(run.label, cast.DurationText(run.inboxRetention), cast.DurationText(f.dlq), cast.WindowText(run.brokerWindow),
		cast.TickClock(out.deadLetteredAt), cast.TickClock(out.replayAt), out.inboxPurged, out.dlqPurged, replay, out.droppedBefore, out.credit, database)
}

// measureRetention sets session 20's figures from the three parts' outcomes
// and the flags.
func measureRetention(r *lab.Result, f retentionFlags, outs map[string]retentionOutcome) {
	r.SetMetric("credit_short_retention_cents", float64(outs["part 1 short"].credit))
	r.SetMetric("credit_long_retention_cents", float64(outs["part 1 long"].credit))
	r.SetMetric("broker_dropped_within_window", float64(outs["part 2"].droppedBefore))
	r.SetMetric("broker_passed_after_window", float64(outs["part 2"].passedAtReplay))
	r.SetMetric("credit_broker_window_cents", float64(outs["part 2"].credit))
	r.SetMetric("inbox_rows_purged_short_retention", float64(outs["part 1 short"].inboxPurged))
	r.SetMetric("inbox_rows_purged_long_retention", float64(outs["part 1 long"].inboxPurged))
	r.SetMetric("inbox_retention_ms", float64(f.short))
	r.SetMetric("long_inbox_retention_ms", float64(f.long))
	r.SetMetric("dlq_retention_ms", float64(f.dlq))
	r.SetMetric("broker_window_ms", float64(f.window))
}

// expectedFigure is one check's expected value and the rule it follows from.
type expectedFigure struct {
	check string
	rule  string // the rule, in words
	here  string // the rule applied to this run's flags
	want  float64
}

// expectedRetentionFigures states what the lab must measure with these
// flags: with the defaults (24h, 7d, 2m) the lesson's 2000, 1000, 1, 1 and
// part 2's 1000.
func expectedRetentionFigures(f retentionFlags) []expectedFigure {
	age := s20ReplayAt - s20ConsumeAt // the dedup record's age at the replay
	sinceSend := s20ReplayAt - s20SendAt
	replayable := f.dlq > s20ReplayDelay
	yes := map[bool]string{true: "yes", false: "no"}
	twice := func(again bool) float64 { return float64(s20Credit) * (1 + lab.Bool(again)) }
	return []expectedFigure{
		{check: "credit_short_retention_cents",
			rule: fmt.Sprintf("2000 when the DLQ still holds the message at the replay (DLQ retention > %s) and the inbox record is gone "+
				"(inbox retention <= its age at the replay, %s); otherwise 1000", cast.DurationText(s20ReplayDelay), cast.DurationText(age)),
			here: fmt.Sprintf("DLQ %s > %s: %s; inbox %s <= %s: %s", cast.DurationText(f.dlq), cast.DurationText(s20ReplayDelay), yes[replayable],
				cast.DurationText(f.short), cast.DurationText(age), yes[f.short <= age]),
			want: twice(replayable && f.short <= age)},
		{check: "credit_long_retention_cents",
			rule: "the same rule with the long inbox retention (the DLQ retention + 3 deliveries × 30s, or the inbox flag if that is longer)",
			here: fmt.Sprintf("DLQ %s > %s: %s; inbox %s <= %s: %s", cast.DurationText(f.dlq), cast.DurationText(s20ReplayDelay), yes[replayable],
				cast.DurationText(f.long), cast.DurationText(age), yes[f.long <= age]),
			want: twice(replayable && f.long <= age)},
		{check: "broker_dropped_within_window",
			rule: fmt.Sprintf("1 when the broker window is longer than the %s between the send and the resend; otherwise 0", cast.DurationText(s20ResendGap)),
			here: fmt.Sprintf("window %s > %s: %s", cast.WindowText(f.window), cast.DurationText(s20ResendGap), yes[f.window > s20ResendGap]),
			want: lab.Bool(f.window > s20ResendGap)},
		{check: "broker_passed_after_window",
			rule: fmt.Sprintf("1 when the DLQ still holds the message at the replay and the window is not longer than the %s between the first send and the replay; otherwise 0",
				cast.DurationText(sinceSend)),
			here: fmt.Sprintf("DLQ %s > %s: %s; window %s <= %s: %s", cast.DurationText(f.dlq), cast.DurationText(s20ReplayDelay), yes[replayable],
				cast.WindowText(f.window), cast.DurationText(sinceSend), yes[f.window <= sinceSend]),
			want: lab.Bool(replayable && f.window <= sinceSend)},
		{check: "credit_broker_window_cents",
			rule: "1000 with any flags: part 2 runs with the long inbox retention, so whatever the broker window drops or passes " +
				"(the resend, the replay), the inbox applies the event once",
			here: fmt.Sprintf("inbox %s covers the replay: 1000", cast.DurationText(f.long)),
			want: float64(s20Credit)},
	}
}

func expectedTable(expected []expectedFigure) lab.Table {
	t := lab.Table{Title: "Expected values: how each follows from the flags",
		Note:    "With the default flags (--inbox-retention 24h --dlq-retention 7d --broker-window 2m) these are the lesson's figures; other flags change what the lab must measure.",
		Columns: []string{"Check", "Rule", "With these flags", "Expected", "Lesson figure"}}
	for _, e := range expected {
		t.AddRow(e.check, e.rule, e.here, e.want, s20LessonFigures[e.check])
	}
	return t
}

// retentionVerdict words the run from its measurements: which part of the
// lesson was reproduced, and which was not.
func retentionVerdict(r *lab.Result, env *Env, f retentionFlags, outs map[string]retentionOutcome) string {
	short, long, part2 := outs["part 1 short"], outs["part 1 long"], outs["part 2"]
	m := metricsOf(r)
	lessonShown := true
	for key, want := range s20LessonFigures {
		if got, ok := r.Metric(key); !ok || got != want {
			lessonShown = false
		}
	}

	part1 := "Part 1, short retention: " + replaySentence(f.short, f.dlq, short) + "."
	if !short.replayApplied {
		part1 += " The short-retention breakage was not reproduced."
	}
	part1 += " Part 1, long retention: " + replaySentence(f.long, f.dlq, long) + "."
	if long.replayApplied {
		part1 += " Even the long retention did not keep the replay single."
	}
	part2Text := "Part 2: the broker window (" + cast.WindowText(f.window) + ") "
	if part2.droppedBefore > 0 {
		part2Text += fmt.Sprintf("dropped %d resend %s after the first send", part2.droppedBefore, cast.DurationText(s20ResendGap))
	} else {
		part2Text += fmt.Sprintf("let the resend %s after the first send through (nothing dropped), so the within-window drop was not reproduced", cast.DurationText(s20ResendGap))
	}
	switch {
	case part2.passedAtReplay > 0 && part2.replayApplied:
		part2Text += fmt.Sprintf("; the three-day replay passed the broker (%d offer) and was applied again", part2.passedAtReplay)
	case part2.passedAtReplay > 0 && part2.credit == s20Credit:
		part2Text += fmt.Sprintf("; the three-day replay passed the broker (%d offer) and only the inbox kept it single", part2.passedAtReplay)
	case part2.passedAtReplay > 0:
		part2Text += fmt.Sprintf("; the three-day replay passed the broker (%d offer) and the inbox turned it away, yet the effect is not single: "+
			"a duplicate delivered before the replay was applied as a new event", part2.passedAtReplay)
	case part2.replayed && part2.replayDropped:
		part2Text += "; the window also dropped the three-day replay (it outlasts it), so the replay-passes-the-broker part was not reproduced"
	default:
		part2Text += fmt.Sprintf("; nothing was replayed, because the DLQ retention of %s purged the message first, so the replay-passes-the-broker part was not reproduced",
			cast.DurationText(f.dlq))
	}
	parts := part1 + " " + part2Text + " (" + effectsText(part2.credit) + ")."

	switch {
	case !r.Passed() && env.Variant != "":
		return parts
	case !r.Passed():
		return fmt.Sprintf("NOT SHOWN: the design did not hold this run; failed checks %v (credits %s and %s cents, %s dropped, %s passed). %s", r.FailedChecks(),
			m("credit_short_retention_cents"), m("credit_long_retention_cents"), m("broker_dropped_within_window"), m("broker_passed_after_window"), parts)
	case lessonShown:
		return "SAFE DESIGN held within its window, and the window's edge was shown. " + parts
	default:
		return "The measurements match what these flags predict, but the lesson was only partly reproduced. " + parts +
			" The default flags (--inbox-retention 24h --dlq-retention 7d --broker-window 2m) reproduce all of it."
	}
}

// effectsText words a part's credit as the number of effects it holds, so
// no sentence can call a doubled credit single.
func effectsText(credit int64) string {
	switch {
	case credit == s20Credit:
		return fmt.Sprintf("credit %d cents: one effect", credit)
	case credit%s20Credit == 0:
		return fmt.Sprintf("credit %d cents: the %d-cent event applied %d times", credit, s20Credit, credit/s20Credit)
	default:
		return fmt.Sprintf("credit %d cents, for one %d-cent event", credit, s20Credit)
	}
}

// replaySentence says what happened to one part's three-day replay, and
// the credit the part ended with.
func replaySentence(retention, dlq int64, o retentionOutcome) string {
	age := o.replayAt - o.consumedAt
	with := "with an inbox retention of " + cast.DurationText(retention)
	credit := " (" + effectsText(o.credit) + ")"
	switch {
	case !o.replayed:
		return fmt.Sprintf("%s nothing was replayed, because the DLQ retention of %s purged the message first%s", with, cast.DurationText(dlq), credit)
	case o.replayDropped:
		return fmt.Sprintf("%s the broker window dropped the replay%s", with, credit)
	case o.replayApplied && o.inboxPurged > 0:
		return fmt.Sprintf("%s, not longer than the dedup record's age of %s at the replay, the record was purged and the replay was applied again%s",
			with, cast.DurationText(age), credit)
	case o.replayApplied:
		return fmt.Sprintf("%s the replay was applied again: no dedup record held it back%s", with, credit)
	default:
		return fmt.Sprintf("%s, longer than the dedup record's age of %s at the replay, the replay was deduplicated%s", with, cast.DurationText(age), credit)
	}
}

// playRetention runs one part: send (and, in part 2, a resend after a lease
// expiry), consumption whose acks are lost until the broker dead-letters the
// offer, then three days later the purge jobs and the operator's replay.
func playRetention(ctx context.Context, env *Env, p *cast.Pipeline, plan *failpoint.Plan, run retentionRun, design cast.ConsumerDesign, dlqRetention int64) (retentionOutcome, error) {
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
func sendRetention(ctx context.Context, env *Env, p *cast.Pipeline, plan *failpoint.Plan, run retentionRun) error {
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
func consumeAndReplay(ctx context.Context, env *Env, p *cast.Pipeline, plan *failpoint.Plan, run retentionRun, design cast.ConsumerDesign, dlqRetention int64) (retentionOutcome, error) {
	var out retentionOutcome
	if err := consumeUntilDeadLettered(ctx, env, p, plan, design, dlqRetention, &out); err != nil {
		return out, err
	}
	// Three days later: the nightly purge jobs have run, then an operator
	// replays the event's oldest dead letter through the broker.
	out.replayAt = out.deadLetteredAt + s20ReplayDelay
	p.SetNow(out.replayAt)
	p.Event(lab.KindNote, cast.ClockName, "three days later", "the partition has healed; the purge jobs run, then an operator replays the DLQ")
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
func consumeUntilDeadLettered(ctx context.Context, env *Env, p *cast.Pipeline, plan *failpoint.Plan, design cast.ConsumerDesign, dlqRetention int64, out *retentionOutcome) error {
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
	p.Event(lab.KindNote, "broker", "dead-lettered", fmt.Sprintf("%d offer(s) moved to the DLQ after %d unacknowledged deliveries; the DLQ keeps them %s",
		len(dead), s20MaxDeliveries, cast.DurationText(dlqRetention)))
	return nil
}

// purgeRetention runs the inbox's and the DLQ's retention purges at the
// clock's now.
func purgeRetention(ctx context.Context, p *cast.Pipeline, run retentionRun, dlqRetention int64, out *retentionOutcome) error {
	var err error
	if out.inboxPurged, err = p.Consumers().Purge(ctx, p.Clock.Now(), cast.TickSpan(run.inboxRetention)); err != nil {
		return err
	}
	p.Event(lab.KindNote, "inbox purge", "delete", fmt.Sprintf("consumed_events older than %s: %d row(s) deleted", cast.DurationText(run.inboxRetention), out.inboxPurged))
	if out.dlqPurged, err = p.Broker().PurgeDeadLetters(ctx, p.Clock.Now(), cast.TickSpan(dlqRetention)); err != nil {
		return err
	}
	p.Event(lab.KindNote, "DLQ purge", "delete", fmt.Sprintf("dead letters older than %s: %d row(s) deleted", cast.DurationText(dlqRetention), out.dlqPurged))
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
