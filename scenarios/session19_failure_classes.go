package scenarios

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
	env        *Env // opens the rows' instances: in-process, or child processes
}

// rowOutcome is a row's verdict, judged on durable state only.
type rowOutcome struct {
	observed string
	ok       bool
}

// failureRows are the six event orders of LESSONS.md, in order.
var failureRows = []failureRow{
	{1, "row_1_one_effect_after_resend", "send, crash, lease expiry, resend",
		"one business effect: credit 1000 after two offers", playRowResendAfterCrash},
	{2, "row_2_stale_completion_rejected", "claim A, lease expiry, claim B, A completes",
		"A's stale completion is rejected: the row stays unpublished until B completes", playRowStaleCompletion},
	{3, "row_3_lost_broker_ack_one_effect", "the broker's ack to the relay is lost, the relay resends",
		"resend allowed, still one effect: credit 1000 after two offers", playRowLostBrokerAck},
	{4, "row_4_lost_consumer_ack_no_second_effect", "the consumer commits its effect, its ack is lost (it dies before acking)",
		"the redelivery causes no second effect: credit 1000 after two deliveries", playRowLostConsumerAck},
	{5, "row_5_concurrent_duplicates_one_effect", "the same event arrives twice at once (two consumer connections, a barrier)",
		"the uniqueness of (consumer, event_id) serializes the effect: credit 1000", playRowConcurrentDuplicates},
	{6, "row_6_projection_never_moves_backward", "version 1 arrives after version 2 (crash after claim, lease expiry)",
		"the projection stays at the newest version (monotonic version)", playRowLateOlderVersion},
}

func failureClassChecks() []CheckDoc {
	var docs []CheckDoc
	for _, row := range failureRows {
		docs = append(docs, CheckDoc{Name: row.check, About: fmt.Sprintf("row %d (%s): %s", row.n, row.order, row.expected)})
	}
	return append(docs, CheckDoc{Name: "rows_passed", About: "every row's property held on durable state, read back from its own database after the row ran"})
}

var failureClasses = Scenario{
	Name:    "session-19-failure-classes",
	Session: "Session-19",
	FileTag: "Failure-Classes",
	Title:   "Session 19: six failure classes, judged on durable state",
	Design:  lab.Safe,
	Teaches: "Six injected event orders, each against its own fresh database and judged only on what the database holds " +
		"afterwards: a crash after the send and a resend after the lease expiry; a stale completion after a takeover; a lost " +
		"broker acknowledgement and a resend; a consumer that dies after its effect and before its ack; the same event applied " +
		"by two consumer connections at once (a barrier); and an older version arriving after a newer one. The faults are " +
		"failpoints: named points (after claim, broker ack, after send before complete, after effect before ack) where an " +
		"instance crashes (its connection closed, its memory dropped), loses an ack or stalls past its lease. The mechanisms " +
		"that hold: fencing tokens on completion, the inbox insert and the effect in one transaction, the uniqueness of " +
		"(consumer, event_id), and a version guard on projections.",
	DoesNotSolve: "A monotonic version protects state projections only: an additive effect such as a credit has no version " +
		"to compare (two deliveries of the same +1000 carry the same version, and a later +500 is not \"newer\" than it), so " +
		"credits need the inbox. And the inbox remembers only for its retention (session 20).",
	Statements: cast.PipelineSQL(store.ConsumerLesson.Project),
	Checks:     failureClassChecks(),
	Variants: []Variant{
		{Name: "naive-consumer", Designs: []cast.ConsumerDesign{cast.NaiveDesign}, Mistake: "the credit consumer increments unconditionally, with no inbox",
			Breaks: []string{"row_1_one_effect_after_resend", "row_3_lost_broker_ack_one_effect", "row_4_lost_consumer_ack_no_second_effect",
				"row_5_concurrent_duplicates_one_effect", "rows_passed"},
			Shows: "Rows 1, 3, 4 and 5 each deliver the event twice (a resend, a lost broker ack, a lost consumer ack, " +
				"two deliveries at once) and each credits 2000 cents instead of 1000. Every failure class that " +
				"duplicates a delivery needs the same cure: the consumer records the event id in its inbox in the " +
				"same transaction as its effect."},
		{Name: "complete-without-token", Swaps: []store.Stmt{store.CompleteByEventID}, Mistake: "the relays complete by event id alone, without the fencing token",
			Breaks: []string{"row_2_stale_completion_rejected", "rows_passed"},
			Shows: "In row 2 Relay-A completes after its lease expired and Relay-B claimed the event with token 2, and " +
				"the row is published by that stale owner before Relay-B completes. Only the fencing token tells a " +
				"stale owner from the current one; the other five rows have no stale owner and still pass."},
		{Name: s19EventIDPerSend, Changes: "the relay's code: each send carries a new message id, not the outbox event id", Mistake: "the relay gives every send a new message id instead of the outbox event id, so " +
			"neither the broker nor the inbox can recognise a resend",
			Breaks: []string{"row_1_one_effect_after_resend", "row_3_lost_broker_ack_one_effect", "row_5_concurrent_duplicates_one_effect", "rows_passed"},
			Shows: "Rows 1, 3 and 5 credit 2000 cents: each resend carries a new message id, so the inbox records two " +
				"different events and applies the effect twice. Row 4 still passes because the broker redelivers the " +
				"same offer with its id: deduplication works only when every send of an event carries the outbox " +
				"event id."},
		{Name: "effect-outside-inbox-tx", Designs: []cast.ConsumerDesign{cast.SplitDesign}, Mistake: "the consumer checks the inbox, applies the credit and records the inbox row " +
			"in three separate transactions",
			Breaks: []string{"row_4_lost_consumer_ack_no_second_effect", "row_5_concurrent_duplicates_one_effect", "rows_passed"},
			Shows: "In row 4 the consumer dies after its credit committed but before its inbox row did, so the " +
				"redelivery finds no record and credits again; in row 5 two connections both find the inbox empty and " +
				"both credit (2000 cents each time). The inbox insert and the effect must commit in one transaction, " +
				"so the unique (consumer, event_id) key decides once whether the effect happens."},
		{Name: "projection-without-version", Designs: []cast.ConsumerDesign{cast.UnversionedDesign}, Mistake: "the projection applies whatever arrives last, without comparing versions",
			Breaks: []string{"row_6_projection_never_moves_backward", "rows_passed"},
			Shows: "In row 6 version 1 of ACC-6 arrives after version 2, and the projection moves back from frozen " +
				"(version 2) to open (version 1). After a crash and a lease expiry, delivery order is not commit " +
				"order: a projection must apply an event only when its version is newer than the one it holds."},
	},
	Run: runFailureClasses,
}

func runFailureClasses(ctx context.Context, env *Env) (*lab.Result, error) {
	return playFailureClasses(ctx, env, failureRows)
}

// playFailureClasses runs the given rows, each against its own database.
func playFailureClasses(ctx context.Context, env *Env, rows []failureRow) (*lab.Result, error) {
	d := rowDesign{credit: consumerDesign(env, cast.InboxDesign), projection: consumerDesign(env, cast.VersionedDesign)}
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
		p.SQL = statementSet(env, p.SQL)
		p.EventIDPerSend = env.Is(s19EventIDPerSend)
		p.Event(lab.KindNote, "scenario", "row "+fmt.Sprint(row.n), row.order+" (fresh database "+filepath.Base(path)+")")
		out, err := row.play(ctx, p, plan, d)
		if err != nil {
			return nil, fmt.Errorf("row %d: %w", row.n, err)
		}
		table.AddRow(row.n, row.order, row.expected, out.observed, map[bool]string{true: "PASS", false: "FAIL"}[out.ok])
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
	expectDocumented(r, env.Scenario.Checks, want)

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
func failureClassesVerdict(r *lab.Result, env *Env, table lab.Table) string {
	m := metricsOf(r)
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
}

// String is the state as a row's Observed column prints it.
func (s creditState) String() string {
	return fmt.Sprintf("%d offer(s); credit %d cents; %d consumed_events row(s); published %d", s.offers, s.credit, s.inboxRows, s.published)
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
func runRelayOnce(ctx context.Context, env *Env, p *cast.Pipeline, name string) error {
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
func consumeAll(ctx context.Context, env *Env, p *cast.Pipeline, name, group string, design cast.ConsumerDesign) error {
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
func consumeOnce(ctx context.Context, env *Env, p *cast.Pipeline, name, group string, design cast.ConsumerDesign) error {
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

// Row 1: Relay-A sends e1 and crashes before completing; its lease
// expires; Relay-B claims, resends and completes.
func playRowResendAfterCrash(ctx context.Context, p *cast.Pipeline, plan *failpoint.Plan, d rowDesign) (rowOutcome, error) {
	crash := failpoint.Rule{Point: failpoint.AfterSendBeforeComplete, Actor: cast.RelayA, Subject: "e1", Fault: failpoint.Crash}
	plan.Arm(crash)
	if err := setupCredit(ctx, p, "e1", "ACC-1"); err != nil {
		return rowOutcome{}, err
	}
	p.SetNow(1 * cast.TickSecond)
	if err := runRelayOnce(ctx, d.env, p, crash.Actor); err != nil {
		return rowOutcome{}, err
	}
	if _, err := p.ExpireLeases(ctx); err != nil {
		return rowOutcome{}, err
	}
	if err := runRelayOnce(ctx, d.env, p, cast.RelayB); err != nil {
		return rowOutcome{}, err
	}
	p.SetNow(p.Now() + 5*cast.TickSecond)
	if err := consumeAll(ctx, d.env, p, "Consumer-1", cast.CreditService, d.credit); err != nil {
		return rowOutcome{}, err
	}
	s, err := observeCredit(ctx, p, "ACC-1")
	return rowOutcome{observed: s.String(), ok: s.offers >= 2 && s.credit == rowCredit && s.published == 1}, err
}

// Row 2: Relay-A claims e2 and stalls past its lease; Relay-B claims it;
// Relay-A wakes, sends and completes with its stale token; then Relay-B.
func playRowStaleCompletion(ctx context.Context, p *cast.Pipeline, plan *failpoint.Plan, d rowDesign) (rowOutcome, error) {
	plan.Arm(failpoint.Rule{Point: failpoint.AfterClaim, Actor: cast.RelayA, Subject: "e2", Fault: failpoint.LeaseExpiry})
	if err := setupCredit(ctx, p, "e2", "ACC-2"); err != nil {
		return rowOutcome{}, err
	}
	a, err := d.env.Instances.PipelineRelay(ctx, p, cast.RelayA)
	if err != nil {
		return rowOutcome{}, err
	}
	defer a.Close(ctx)
	b, err := d.env.Instances.PipelineRelay(ctx, p, cast.RelayB)
	if err != nil {
		return rowOutcome{}, err
	}
	defer b.Close(ctx)
	p.SetNow(1 * cast.TickSecond)
	if err := cast.MustClaim(ctx, a); err != nil {
		return rowOutcome{}, err
	}
	if err := cast.MustClaim(ctx, b); err != nil {
		return rowOutcome{}, err
	}
	p.SetNow(p.Now() + cast.TickSecond)
	if _, err := a.Send(ctx); err != nil {
		return rowOutcome{}, err
	}
	if _, err := a.Complete(ctx); err != nil {
		return rowOutcome{}, err
	}
	afterA, _, err := store.NewRelay(p.Audit, store.RelayLesson).EventByID(ctx, "e2")
	if err != nil {
		return rowOutcome{}, err
	}
	p.SetNow(p.Now() + cast.TickSecond)
	if _, err := b.Send(ctx); err != nil {
		return rowOutcome{}, err
	}
	completedAt := p.Now()
	if _, err := b.Complete(ctx); err != nil {
		return rowOutcome{}, err
	}
	final, _, err := store.NewRelay(p.Audit, store.RelayLesson).EventByID(ctx, "e2")
	if err != nil {
		return rowOutcome{}, err
	}
	if err := instance.CloseAll(ctx, a, b); err != nil {
		return rowOutcome{}, err
	}
	p.SetNow(p.Now() + 5*cast.TickSecond)
	if err := consumeAll(ctx, d.env, p, "Consumer-1", cast.CreditService, d.credit); err != nil {
		return rowOutcome{}, err
	}
	observed := fmt.Sprintf("after A's completion with token 1: delivered=%d, claim_token=%d; at the end: delivered=%d at %s (B completed at %s)",
		int(lab.Bool(afterA.Delivered)), afterA.Token, int(lab.Bool(final.Delivered)), cast.TickClock(final.DeliveredAt), cast.TickClock(completedAt))
	ok := !afterA.Delivered && afterA.Token == 2 && final.Delivered && final.DeliveredAt == completedAt
	return rowOutcome{observed: observed, ok: ok}, nil
}

// Row 3: the broker stores Relay-A's send of e3 but its ack is lost; the
// relay resends under the same live claim and completes.
func playRowLostBrokerAck(ctx context.Context, p *cast.Pipeline, plan *failpoint.Plan, d rowDesign) (rowOutcome, error) {
	plan.Arm(failpoint.Rule{Point: failpoint.BrokerAck, Actor: cast.RelayA, Subject: "e3", Fault: failpoint.AckLost})
	if err := setupCredit(ctx, p, "e3", "ACC-3"); err != nil {
		return rowOutcome{}, err
	}
	p.SetNow(1 * cast.TickSecond)
	if err := runRelayOnce(ctx, d.env, p, cast.RelayA); err != nil {
		return rowOutcome{}, err
	}
	p.SetNow(p.Now() + 5*cast.TickSecond)
	if err := consumeAll(ctx, d.env, p, "Consumer-1", cast.CreditService, d.credit); err != nil {
		return rowOutcome{}, err
	}
	s, err := observeCredit(ctx, p, "ACC-3")
	return rowOutcome{observed: s.String(), ok: s.offers >= 2 && s.credit == rowCredit && s.published == 1}, err
}

// Row 4: the consumer commits its effect for e4 and dies before acking;
// after the visibility timeout the broker redelivers to a restarted instance.
func playRowLostConsumerAck(ctx context.Context, p *cast.Pipeline, plan *failpoint.Plan, d rowDesign) (rowOutcome, error) {
	crash := failpoint.Rule{Point: failpoint.AfterEffectBeforeAck, Actor: "Consumer-1", Fault: failpoint.Crash}
	plan.Arm(crash)
	if err := setupCredit(ctx, p, "e4", "ACC-4"); err != nil {
		return rowOutcome{}, err
	}
	p.SetNow(1 * cast.TickSecond)
	if err := runRelayOnce(ctx, d.env, p, cast.RelayA); err != nil {
		return rowOutcome{}, err
	}
	p.SetNow(p.Now() + 5*cast.TickSecond)
	if err := consumeOnce(ctx, d.env, p, crash.Actor, cast.CreditService, d.credit); err != nil {
		return rowOutcome{}, err
	}
	if err := consumeAll(ctx, d.env, p, "Consumer-1 (restarted)", cast.CreditService, d.credit); err != nil {
		return rowOutcome{}, err
	}
	s, err := observeCredit(ctx, p, "ACC-4")
	observed := fmt.Sprintf("offer delivered %d time(s); credit %d cents; %d consumed_events row(s)", s.maxDeliv, s.credit, s.inboxRows)
	return rowOutcome{observed: observed, ok: s.maxDeliv >= 2 && s.credit == rowCredit}, err
}

// Row 5: the broker holds two offers of e5 (a lost broker ack and a
// resend); two consumer instances, each on its own connection, take one
// each and a barrier releases them into the effect at the same moment.
func playRowConcurrentDuplicates(ctx context.Context, p *cast.Pipeline, plan *failpoint.Plan, d rowDesign) (rowOutcome, error) {
	plan.Arm(failpoint.Rule{Point: failpoint.BrokerAck, Actor: cast.RelayA, Subject: "e5", Fault: failpoint.AckLost})
	if err := setupCredit(ctx, p, "e5", "ACC-5"); err != nil {
		return rowOutcome{}, err
	}
	p.SetNow(1 * cast.TickSecond)
	if err := runRelayOnce(ctx, d.env, p, cast.RelayA); err != nil {
		return rowOutcome{}, err
	}
	p.SetNow(p.Now() + 5*cast.TickSecond)
	if err := consumeBehindBarrier(ctx, d.env, p, []string{"Consumer-1", "Consumer-2"}, d.credit); err != nil {
		return rowOutcome{}, err
	}
	if err := consumeAll(ctx, d.env, p, "Consumer-3", cast.CreditService, d.credit); err != nil {
		return rowOutcome{}, err
	}
	concurrent := 0
	for _, e := range p.Effects() {
		if e.Instance == "Consumer-1" || e.Instance == "Consumer-2" {
			concurrent++
		}
	}
	s, err := observeCredit(ctx, p, "ACC-5")
	observed := fmt.Sprintf("%d deliveries applied at once by two connections; credit %d cents; %d consumed_events row(s)", concurrent, s.credit, s.inboxRows)
	return rowOutcome{observed: observed, ok: concurrent == 2 && s.credit == rowCredit}, err
}

// consumeBehindBarrier starts one consumer instance per name, each on its
// own connection; each takes one delivery and waits at a barrier before its
// effect, so the effects start at the same moment.
func consumeBehindBarrier(ctx context.Context, env *Env, p *cast.Pipeline, names []string, design cast.ConsumerDesign) error {
	p.Concurrent = true
	barrier := cast.NewBarrier(len(names))
	instances := map[string]cast.Consumer{}
	// waited says the instance reached the barrier: it attempted an effect.
	// Each flag is written and read by its own consumer's goroutine only.
	waited := map[string]*bool{}
	for _, name := range names {
		c, err := env.Instances.PipelineConsumer(ctx, p, name, cast.CreditService, design)
		if err != nil {
			return err
		}
		defer c.Close(ctx)
		// The wait runs on the consumer's own context: when another
		// consumer fails, RunConcurrently cancels it and the wait ends.
		reached := new(bool)
		c.HoldBeforeEffect(func(ctx context.Context) error {
			*reached = true
			return barrier.Wait(ctx)
		})
		instances[name], waited[name] = c, reached
	}
	p.Event(lab.KindNote, "barrier", "armed", strings.Join(names, " and ")+" each take a delivery, then wait for each other before the effect")
	err := cast.RunConcurrently(ctx, names, func(ctx context.Context, name string) error {
		_, err := instances[name].ConsumeNext(ctx)
		if !*waited[name] || err != nil {
			// Found nothing, skipped the effect before the barrier, or
			// failed before or after it: never leave the others waiting
			// for this one.
			barrier.Leave()
		}
		return err
	})
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := instances[name].Close(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Row 6: Relay-A claims version 1 and crashes; Relay-B publishes version 2,
// then, after A's lease expires, version 1: the projection receives them in
// the order v2, v1.
func playRowLateOlderVersion(ctx context.Context, p *cast.Pipeline, plan *failpoint.Plan, d rowDesign) (rowOutcome, error) {
	crash := failpoint.Rule{Point: failpoint.AfterClaim, Actor: cast.RelayA, Subject: "e6-v1", Fault: failpoint.Crash}
	plan.Arm(crash)
	if err := p.CommitVersion(ctx, "e6-v1", "ACC-6", 1, "open"); err != nil {
		return rowOutcome{}, err
	}
	p.SetNow(1 * cast.TickSecond)
	if err := p.CommitVersion(ctx, "e6-v2", "ACC-6", 2, "frozen"); err != nil {
		return rowOutcome{}, err
	}
	p.SetNow(2 * cast.TickSecond)
	if err := runRelayOnce(ctx, d.env, p, crash.Actor); err != nil {
		return rowOutcome{}, err
	}
	b, err := d.env.Instances.PipelineRelay(ctx, p, cast.RelayB)
	if err != nil {
		return rowOutcome{}, err
	}
	defer b.Close(ctx)
	if _, err := b.RunOnce(ctx); err != nil {
		return rowOutcome{}, err
	}
	if _, err := p.ExpireLeases(ctx); err != nil {
		return rowOutcome{}, err
	}
	if _, err := b.RunOnce(ctx); err != nil {
		return rowOutcome{}, err
	}
	if err := instance.CloseAll(ctx, b); err != nil {
		return rowOutcome{}, err
	}
	p.SetNow(p.Now() + 5*cast.TickSecond)
	if err := consumeAll(ctx, d.env, p, "Projector-1", projectionService, d.projection); err != nil {
		return rowOutcome{}, err
	}

	// Judge on durable state: the newest committed version against the projection.
	evs, err := store.NewRelay(p.Audit, store.RelayLesson).Events(ctx)
	if err != nil {
		return rowOutcome{}, err
	}
	var newest int64
	for _, e := range evs {
		var v cast.Payload
		if err := json.Unmarshal([]byte(e.Payload), &v); err != nil {
			return rowOutcome{}, err
		}
		newest = max(newest, v.Version)
	}
	offers, err := p.Broker().Offers(ctx)
	if err != nil {
		return rowOutcome{}, err
	}
	var order []string
	late := false // an offer carried an older version than one before it
	var highest int64
	for _, o := range offers {
		var v cast.Payload
		if err := json.Unmarshal([]byte(o.Payload), &v); err != nil {
			return rowOutcome{}, err
		}
		order = append(order, fmt.Sprintf("%s (v%d)", o.EventID, v.Version))
		late = late || v.Version < highest
		highest = max(highest, v.Version)
	}
	projs, err := p.Consumers().Projections(ctx)
	if err != nil {
		return rowOutcome{}, err
	}
	if len(projs) != 1 {
		return rowOutcome{observed: fmt.Sprintf("%d projection rows", len(projs))}, nil
	}
	pr := projs[0]
	observed := fmt.Sprintf("broker order %s; projection %s at version %d (%s); newest committed version %d",
		strings.Join(order, ", "), pr.EntityID, pr.Version, pr.State, newest)
	return rowOutcome{observed: observed, ok: late && pr.Version == newest}, nil
}
