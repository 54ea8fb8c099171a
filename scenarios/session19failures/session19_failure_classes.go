// Package session19failures is the lesson session-19-failure-classes: its
// Lesson (the sequence, the checks, the variants and what the registry's
// tests read to prove it), the stages and actors only it uses, its proofs
// (proofs.go) and its tests.
package session19failures

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/failpoint"
	"github.com/outboxlab/outboxlab/instance"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/natsbroker"
	"github.com/outboxlab/outboxlab/store"
)

// s19EventIDPerSend is session 19's mistake that is no statement: the
// relay's choice of a message id per send.
const s19EventIDPerSend = "event-id-per-send"

// Session 19's consumer groups and the credit every row awards.
const (
	projectionService = "projection-service"
	rowCredit         = int64(1000)
)

// failureRow is one injected event order of session 19: what happens, the
// property durable state must show afterwards, and the script that plays it
// against a fresh database.
type failureRow struct {
	n        int
	check    string
	order    string
	expected string
	play     func(ctx context.Context, p *cast.Pipeline, plan *failpoint.Plan, d rowDesign) (rowOutcome, error)
}

// rowDesign is what the variant under test changes in the consumers, and
// where the instances a row crashes run their step.
type rowDesign struct {
	credit     cast.ConsumerDesign
	projection cast.ConsumerDesign
	env        *lesson.Env // opens the rows' instances: in-process, or child processes
}

// rowOutcome is a row's verdict, judged on durable state only, with the
// figures and the actors its texts quote, as its database and ledgers
// show them (keys without the row's prefix: see [rowOutcome.record]).
type rowOutcome struct {
	observed string
	ok       bool
	figures  map[string]float64
	roles    map[string]string
}

// figure records a figure of the row's run under key.
func (o *rowOutcome) figure(key string, v float64) {
	if o.figures == nil {
		o.figures = map[string]float64{}
	}
	o.figures[key] = v
}

// role records who played role in the row's run; "" records nothing.
func (o *rowOutcome) role(role, actor string) {
	if actor == "" {
		return
	}
	if o.roles == nil {
		o.roles = map[string]string{}
	}
	o.roles[role] = actor
}

// record puts the row's figures and actors in r under the row's prefix
// ("row_1_offers", "@row_2_stale"), except the award, which every credit
// row seeds alike.
func (o rowOutcome) record(r *lab.Result, n int) {
	for k, v := range o.figures {
		if k == "award_cents" {
			r.SetMetric(k, v)
			continue
		}
		r.SetMetric(fmt.Sprintf("row_%d_%s", n, k), v)
	}
	for k, who := range o.roles {
		r.SetCast(fmt.Sprintf("row_%d_%s", n, k), who)
	}
}

// failureRows are the six event orders of LESSONS.md, in order. Their
// order and expected property are templates the row's run fills (see
// [rowOutcome.record]).
var failureRows = []failureRow{
	{1, "row_1_one_effect_after_resend", "{@row_1_crashed} sends and crashes, its lease expires, {@row_1_resender} resends",
		"one business effect (the credit after {row_1_offers} offers: {row_1_credit_cents} cents, for an award of {award_cents})",
		playRowResendAfterCrash},
	{2, "row_2_stale_completion_rejected", "{@row_2_stale} claims, its lease expires, {@row_2_current} claims, {@row_2_stale} completes",
		"{@row_2_stale}'s stale completion (token {row_2_stale_token}) is rejected, and the row stays unpublished until " +
			"{@row_2_current} completes with token {row_2_current_token}", playRowStaleCompletion},
	{3, "row_3_lost_broker_ack_one_effect", "the broker's ack to {@row_3_relay} is lost, and it resends",
		"resend allowed, still one effect (the credit after {row_3_offers} offers: {row_3_credit_cents} cents, for an " +
			"award of {award_cents})", playRowLostBrokerAck},
	{4, "row_4_lost_consumer_ack_no_second_effect", "{@row_4_consumer} commits its effect and dies before its ack",
		"the redelivery causes no second effect (the credit after {row_4_deliveries} deliveries of the offer: " +
			"{row_4_credit_cents} cents, for an award of {award_cents})", playRowLostConsumerAck},
	{5, "row_5_concurrent_duplicates_one_effect", "the same event arrives at once on {row_5_connections} consumer connections " +
		"(a barrier)", "the uniqueness of (consumer, event_id) serializes the effect (the credit: {row_5_credit_cents} cents, " +
		"for an award of {award_cents})", playRowConcurrentDuplicates},
	{6, "row_6_projection_never_moves_backward", "version {row_6_late_version} arrives after version {row_6_early_version} " +
		"({@row_6_crashed} crashed after its claim, its lease expired)",
		"the projection stays at the newest committed version, {row_6_newest_version} (monotonic version; it holds " +
			"version {row_6_projected_version})", playRowLateOlderVersion},
}

func failureClassChecks() []lesson.CheckDoc {
	var docs []lesson.CheckDoc
	for _, row := range failureRows {
		docs = append(docs, lesson.CheckDoc{Name: row.check, About: "when " + row.order + ": " + row.expected})
	}
	return append(docs, lesson.CheckDoc{Name: "rows_passed", About: "event orders, of the {rows} run, whose property held on durable " +
		"state, read back from each row's own database after the row ran"})
}

// Lesson is session-19-failure-classes, as the registry lists it: "Session
// 19: six failure classes, judged on durable state".
var Lesson = lesson.Scenario{
	Name:    "session-19-failure-classes",
	Session: "Session-19",
	FileTag: "Failure-Classes",
	Title:   "Session 19: six failure classes, judged on durable state",
	Design:  lab.Safe,
	// RealBroker: --broker nats runs each part on its own JetStream streams.
	RealBroker: true,
	Figures:    map[string]float64{"rows_passed": 6},
	Teaches: "Each of {rows} injected event orders runs against its own fresh database and is judged only on what the " +
		"database holds afterwards: a crash after the send and a resend after the lease expiry; a stale completion after a takeover; a lost " +
		"broker acknowledgement and a resend; a consumer that dies after its effect and before its ack; the same event applied " +
		"by several consumer connections at once (a barrier); and an older version arriving after a newer one. The faults are " +
		"failpoints: named points (after claim, broker ack, after send before complete, after effect before ack) where an " +
		"instance crashes (its connection closed, its memory dropped), loses an ack or stalls past its lease. The mechanisms " +
		"that hold: fencing tokens on completion, the inbox insert and the effect in one transaction, the uniqueness of " +
		"(consumer, event_id), and a version guard on projections.",
	DoesNotSolve: "A monotonic version protects state projections only: an additive effect such as a credit has no version " +
		"to compare (two deliveries of the same +1000 carry the same version, and a later +500 is not \"newer\" than it), so " +
		"credits need the inbox. And the inbox remembers only for its retention (session 20).",
	Statements: cast.PipelineSQL(store.ConsumerLesson.Project),
	Set:        cast.DeliveryLesson,
	Checks:     failureClassChecks(),
	Variants: []lesson.Variant{
		{Name: "naive-consumer", Designs: []cast.ConsumerDesign{cast.NaiveDesign}, Mistake: "the credit consumer increments unconditionally, with no inbox",
			Breaks: []string{"row_1_one_effect_after_resend", "row_3_lost_broker_ack_one_effect", "row_4_lost_consumer_ack_no_second_effect",
				"row_5_concurrent_duplicates_one_effect", "rows_passed"},
			Shows: "Every event order that delivers the event more than once credited the award again: the resend after a " +
				"crash {row_1_credit_cents} cents, the lost broker ack {row_3_credit_cents}, the lost consumer ack " +
				"{row_4_credit_cents} and the concurrent duplicates {row_5_credit_cents}, each for an award of {award_cents}. " +
				"Every failure class that duplicates a delivery needs the same cure: the consumer records the event id in " +
				"its inbox in the same transaction as its effect."},
		{Name: "complete-without-token", Swaps: []store.Stmt{store.CompleteByEventID}, Mistake: "the relays complete by event id alone, without the fencing token",
			Breaks: []string{"row_2_stale_completion_rejected", "rows_passed"},
			Shows: "In the stale-completion row {@row_2_stale} completed with token {row_2_stale_token} after its lease " +
				"expired and {@row_2_current} claimed the event with token {row_2_current_token}, and the row was published by " +
				"the completion of {@row_2_publisher}, under token {row_2_publisher_token}. Only the fencing token tells a " +
				"stale owner from the current one; the other rows have no stale owner ({rows_passed} of {rows} rows passed)."},
		{Name: s19EventIDPerSend, Changes: "the relay's code: each send carries a new message id, not the outbox event id", Mistake: "the relay gives every send a new message id instead of the outbox event id, so " +
			"neither the broker nor the inbox can recognise a resend",
			Breaks: []string{"row_1_one_effect_after_resend", "row_3_lost_broker_ack_one_effect", "row_5_concurrent_duplicates_one_effect", "rows_passed"},
			Shows: "Each resend carried a new message id, so the inbox recorded it as a different event and credited it: " +
				"the resend after a crash {row_1_credit_cents} cents with {row_1_inbox_rows} consumed_events rows, the lost " +
				"broker ack {row_3_credit_cents} with {row_3_inbox_rows}, the concurrent duplicates {row_5_credit_cents} with " +
				"{row_5_inbox_rows}, each for an award of {award_cents}. The lost consumer ack ({row_4_credit_cents} cents) is " +
				"a redelivery of the same offer with its id: deduplication works only when every send of an event carries " +
				"the outbox event id."},
		{Name: "effect-outside-inbox-tx", Designs: []cast.ConsumerDesign{cast.SplitDesign}, Mistake: "the consumer checks the inbox, applies the credit and records the inbox row, " +
			"each in a transaction of its own",
			Breaks: []string{"row_4_lost_consumer_ack_no_second_effect", "row_5_concurrent_duplicates_one_effect", "rows_passed"},
			Shows: "In the lost-consumer-ack row {@row_4_consumer} died after its credit committed but before its inbox " +
				"row did, so the redelivery found no record and credited again ({row_4_credit_cents} cents for an award of " +
				"{award_cents}, {row_4_inbox_rows} consumed_events rows); in the concurrent row the {row_5_connections} " +
				"connections each found the inbox empty and credited ({row_5_credit_cents} cents). The inbox insert and the " +
				"effect must commit in one transaction, so the unique (consumer, event_id) key decides once whether the " +
				"effect happens."},
		{Name: "projection-without-version", Designs: []cast.ConsumerDesign{cast.UnversionedDesign}, Mistake: "the projection applies whatever arrives last, without comparing versions",
			Breaks: []string{"row_6_projection_never_moves_backward", "rows_passed"},
			Shows: "In the late-version row version {row_6_late_version} of {@row_6_entity} arrived after version " +
				"{row_6_early_version}, and the projection ended at version {row_6_projected_version} " +
				"({@row_6_projected_state}) though version {row_6_newest_version} ({@row_6_newest_state}) is the newest " +
				"committed. After a crash and a lease expiry, delivery order is not commit order: a projection must apply " +
				"an event only when its version is newer than the one it holds."},
	},
	Guards:    guards(),
	Processes: processes,
	Run:       runFailureClasses,
}

func runFailureClasses(ctx context.Context, env *lesson.Env) (*lab.Result, error) {
	return playFailureClasses(ctx, env, failureRows)
}

// playFailureClasses runs the given rows, each against its own database.
func playFailureClasses(ctx context.Context, env *lesson.Env, rows []failureRow) (*lab.Result, error) {
	d := rowDesign{credit: lesson.ConsumerDesign(env, cast.InboxDesign), projection: lesson.ConsumerDesign(env, cast.VersionedDesign)}
	d.env = env
	var tl lab.Timeline
	table := lab.Table{Title: "Failure classes", Note: "Each row ran against its own fresh database; Observed is read from that database afterwards, not from log lines.",
		Columns: []string{"#", "Event order", "Expected property", "Observed (durable state)", "Result"}}
	files := lab.Table{Title: "Row databases", Note: "Each row ran against a database of its own, beside the one named above. " + env.DatabaseWhere(), Columns: []string{"Row", env.DatabaseColumn()}}
	r := &lab.Result{}
	var ps []*cast.Pipeline
	plans := map[string]*failpoint.Plan{}
	defer func() {
		for _, p := range ps {
			p.Close()
		}
	}()
	passed := 0
	for _, row := range rows {
		label := fmt.Sprintf("row %d", row.n)
		path := env.ExtraDatabasePath(fmt.Sprintf("row-%d", row.n))
		plan := failpoint.NewPlan()
		p, err := cast.NewPipeline(ctx, env.Open, path, label, &tl, plan)
		if err != nil {
			return nil, err
		}
		ps = append(ps, p)
		plans[label] = plan
		if err := env.UseRealBroker(ctx, p, label, natsbroker.Config{Visibility: cast.TickSpan(cast.VisibilityTimeout)}); err != nil {
			return nil, err
		}
		p.SQL = lesson.StatementSet(env, p.SQL)
		p.EventIDPerSend = env.Is(s19EventIDPerSend)
		p.Event(lab.KindNote, "scenario", "row "+fmt.Sprint(row.n), row.order+" (fresh database "+filepath.Base(path)+")")
		out, err := row.play(ctx, p, plan, d)
		if err != nil {
			return nil, fmt.Errorf("row %d: %w", row.n, err)
		}
		out.record(r, row.n)
		table.AddRow(row.n, r.Fill(row.order), r.Fill(row.expected), out.observed, map[bool]string{true: "PASS", false: "FAIL"}[out.ok])
		files.AddRow(label, env.DatabaseLabel(path))
		r.SetFlag(row.check, out.ok)
		if out.ok {
			passed++
		}
		if r.Database == "" {
			r.Database = path
		}
	}
	// rows is how many event orders ran, for the verdict; it is no check:
	// each row's own check and rows_passed judge what the rows hold.
	r.SetMetric("rows", float64(len(rows)))
	r.SetMetric("rows_passed", float64(passed))
	want := map[string]float64{"rows_passed": float64(len(failureRows))}
	for _, row := range failureRows {
		want[row.check] = 1
	}
	lesson.ExpectDocumented(r, env.Scenario.Checks, want)

	r.Tables = append(r.Tables, table)
	for _, p := range ps {
		r.Concurrent = r.Concurrent || p.Concurrent
	}
	if err := cast.FinishDelivery(ctx, r, ps, plans); err != nil {
		return nil, err
	}
	r.Tables = append(r.Tables, files)
	r.Verdict = failureClassesVerdict(r, env, table)
	return r, nil
}

// failureClassesVerdict words the run: every row passed, or which failed.
func failureClassesVerdict(r *lab.Result, env *lesson.Env, table lab.Table) string {
	m := lesson.MetricsOf(r)
	if r.Passed() {
		return fmt.Sprintf("SAFE DESIGN held in every failure class: %s of %s rows passed on durable state. Offers were duplicated "+
			"(at least once), the database transitions were fenced, and the consumers kept one effect per event.", m("rows_passed"), m("rows"))
	}
	var failed []string
	for _, row := range table.Rows {
		if row[len(row)-1] == "FAIL" {
			failed = append(failed, "row "+row[0])
		}
	}
	if env.Variant == "" {
		return fmt.Sprintf("NOT SHOWN: the design did not hold this run; failed checks %v; %s of %s rows passed; FAIL in %s.",
			r.FailedChecks(), m("rows_passed"), m("rows"), strings.Join(failed, ", "))
	}
	return fmt.Sprintf("%s of %s rows passed; FAIL in %s.", m("rows_passed"), m("rows"), strings.Join(failed, ", "))
}

// creditState is what durable state says about one credit event.
type creditState struct {
	offers    int   // accepted broker offers
	credit    int64 // the consumer's account
	inboxRows int64
	published int64
	maxDeliv  int64 // the most deliveries of one offer to the consumer
	award     int64 // the credit the event awards, as its offers carry it
}

// record puts s's figures in o: the offers, the credit, the inbox rows,
// the most deliveries of one offer, and the award.
func (s creditState) record(o *rowOutcome) {
	o.figure("offers", float64(s.offers))
	o.figure("credit_cents", float64(s.credit))
	o.figure("inbox_rows", float64(s.inboxRows))
	o.figure("deliveries", float64(s.maxDeliv))
	o.figure("award_cents", float64(s.award))
}

// String is the state as a row's Observed column prints it.
func (s creditState) String() string {
	return fmt.Sprintf("%s; credit %d cents; %s; published %d", lab.Count(int64(s.offers), "offer", "offers"), s.credit,
		lab.Count(int64(s.inboxRows), "consumed_events row", "consumed_events rows"), s.published)
}

// observeCredit reads a credit row's outcome from its database.
func observeCredit(ctx context.Context, p *cast.Pipeline, account string) (creditState, error) {
	var s creditState
	offers, err := p.Broker().Offers(ctx)
	if err != nil {
		return s, err
	}
	for _, o := range offers {
		if !o.Dropped {
			s.offers++
		}
		var pl cast.Payload
		if err := json.Unmarshal([]byte(o.Payload), &pl); err != nil {
			return s, err
		}
		s.award = pl.CreditCents
	}
	ds, err := p.Broker().Deliveries(ctx)
	if err != nil {
		return s, err
	}
	for _, d := range ds {
		if d.Consumer == cast.CreditService {
			s.maxDeliv = max(s.maxDeliv, d.DeliveryCount)
		}
	}
	if s.credit, err = p.Count(ctx, store.AccountCredit.SQL, cast.AccountID(cast.CreditService, account)); err != nil {
		return s, err
	}
	if s.inboxRows, err = p.Count(ctx, store.CountConsumedEvents.SQL, cast.CreditService); err != nil {
		return s, err
	}
	s.published, err = p.Count(ctx, store.CountDeliveredEvents.SQL)
	return s, err
}

// setupCredit opens the row's account and commits its credit event.
func setupCredit(ctx context.Context, p *cast.Pipeline, eventID, account string) error {
	if err := p.OpenAccount(ctx, cast.CreditService, account); err != nil {
		return err
	}
	return p.CommitCredit(ctx, eventID, account, rowCredit)
}

// runRelayOnce starts a relay instance, runs one loop body and closes it;
// an injected crash is an expected outcome.
func runRelayOnce(ctx context.Context, env *lesson.Env, p *cast.Pipeline, name string) error {
	r, err := env.Instances.PipelineRelay(ctx, p, name)
	if err != nil {
		return err
	}
	defer r.Close(ctx)
	if _, err := r.RunOnce(ctx); err != nil && !cast.IsCrash(err) {
		return err
	}
	return instance.CloseAll(ctx, r)
}

// consumeAll starts one consumer instance and drains the broker for it.
func consumeAll(ctx context.Context, env *lesson.Env, p *cast.Pipeline, name, group string, design cast.ConsumerDesign) error {
	c, err := env.Instances.PipelineConsumer(ctx, p, name, group, design)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	if err := p.DrainConsumer(ctx, c, 0); err != nil {
		return err
	}
	return c.Close(ctx)
}

// consumeOnce starts one consumer instance and has it take, apply and
// acknowledge one delivery; an injected crash is an expected outcome.
func consumeOnce(ctx context.Context, env *lesson.Env, p *cast.Pipeline, name, group string, design cast.ConsumerDesign) error {
	c, err := env.Instances.PipelineConsumer(ctx, p, name, group, design)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	if _, err := c.ConsumeNext(ctx); err != nil && !cast.IsCrash(err) {
		return err
	}
	return c.Close(ctx)
}
