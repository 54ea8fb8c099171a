package scenarios

import (
	"context"
	"fmt"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/failpoint"
	"github.com/outboxlab/outboxlab/instance"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/store"
)

// variantBrokerDedupWindow is session 18's mistake that is no statement:
// the broker's deduplication window, an option.
const variantBrokerDedupWindow = "broker-dedup-window"

// Session 18's cast and figures.
const (
	e42           = "e42"
	account42     = "ACC-42"
	credit42      = int64(1000)
	inboxConsumer = "inbox-consumer"
	naiveConsumer = "naive-consumer"
	// The inbox consumer group's two instances: the first is held past the
	// broker's visibility timeout, the second takes the redelivery.
	s18InboxFirst  = "Inbox-Consumer-1"
	s18InboxSecond = "Inbox-Consumer-2"
)

var leaseExpiryAfterSend = Scenario{
	Name:    "session-18-lease-expiry-after-send",
	Session: "Session-18",
	FileTag: "Lease-Expiry-After-Send",
	Title:   "Session 18: the lease expires after the send",
	Design:  lab.Safe,
	Teaches: "Outbox event e42 awards 1000 cents. The lesson calls it outbox row 42: outbox_events is keyed by its event id, " +
		"so row 42 is the row WHERE event_id = 'e42' (the lab's relay table has no integer id). Relay-A claims it (token 1) " +
		"and sends it to the lab's broker, then " +
		"stalls until its 30 s lease has expired. Relay-B claims it (token 2) and sends it again. Relay-A's completion " +
		"presents token 1 and is fenced out (0 rows); Relay-B's completion publishes the row. The broker now holds two " +
		"offers of e42: the duplicate is the expected counterexample of at-least-once delivery, not a bug.\n\nTwo consumers " +
		"read both offers: the inbox consumer (INSERT INTO consumed_events ... ON CONFLICT DO NOTHING and the credit in one " +
		"transaction, the credit applied only when the insert added a row) ends at 1000 cents; the naive " +
		"consumer (an unconditional increment) ends at 2000.\n\nThe inbox consumer group runs two instances, and its first delivery " +
		"acks late: Inbox-Consumer-1 takes offer 1 (receipt 1, the delivery_count the broker gives it) and pauses before its " +
		"effect past the broker's 30 s visibility timeout; the broker redelivers offer 1 to Inbox-Consumer-2 (receipt 2), held in " +
		"flight. Inbox-Consumer-1 goes on: its credit commits with the inbox row, and its ack with receipt 1 changes 0 rows, " +
		"refused by delivery_count = :receipt alone (the delivery is still in flight, for the same consumer group). " +
		"Inbox-Consumer-2 then finds e42 in the inbox (no credit) and acks with receipt 2: 1 row.\n\n" +
		"The broker and inbox tables store UTC clock text; outbox_events keeps " +
		"logical ticks (milliseconds since 2026-01-15T09:00:00.000Z), shown beside their clock time.",
	DoesNotSolve: "Fencing keeps the database honest (only the current token's completion counts) but cannot unsend: " +
		"the broker already holds Relay-A's offer, so a duplicate broker message is normal and only the consumer can " +
		"neutralise it. The inbox that does so remembers only as long as its retention (session 20), and a " +
		"version check cannot replace it for additive effects such as a credit (session 19).",
	Statements: cast.PipelineSQL(),
	Checks: []CheckDoc{
		{Name: "broker_offers", Measure: true, About: "the broker holds 2 offers of e42: the resend after the lease expiry is a real duplicate"},
		{Name: "stale_completion_rows", About: "Relay-A's completion with the stale token 1 changed 0 rows"},
		{Name: "published", About: "the outbox row is published (delivered = 1), by Relay-B's completion"},
		{Name: "inbox_credit_cents", About: "the inbox consumer group credited 1000 cents for two offers and a redelivery"},
		{Name: "consumed_event_rows", About: "the inbox holds one consumed_events row for e42"},
		{Name: "naive_credit_cents", Measure: true, About: "the naive consumer credited 2000 cents: the duplicate reached the business state"},
		{Name: "stale_receipt_ack_rows", About: "Inbox-Consumer-1's ack of offer 1 with receipt 1, sent while the redelivery " +
			"(receipt 2) was in flight, changed 0 rows"},
		{Name: "redelivery_ack_rows", About: "Inbox-Consumer-2's ack of the redelivery with receipt 2 changed 1 row"},
	},
	Variants: []Variant{
		{Name: "complete-without-token", Swaps: []store.Stmt{store.CompleteByEventID}, Mistake: "the relays complete by event id alone: Relay-A's late completion, after its lease expired, is accepted",
			Breaks: []string{"stale_completion_rows"},
			Shows: "Relay-A's completion at 09:00:33, after its lease expired at 09:00:31 and Relay-B claimed e42 with " +
				"token 2, changes 1 row, and Relay-B's own completion then finds the row already delivered. Both " +
				"sends reached the broker, so nothing is lost here, but a relay that had lost its lease decided the " +
				"row's state: only the current token may complete it."},
		{Name: "naive-inbox", Designs: []cast.ConsumerDesign{cast.NaiveDesign}, Mistake: "the inbox consumer increments the credit without writing or checking consumed_events",
			Breaks: []string{"inbox_credit_cents", "consumed_event_rows"},
			Shows: "Both offers of e42, and the broker's redelivery of offer 1 after the visibility timeout, reach the inbox " +
				"consumer group and each credits ACC-42: {inbox_credit_cents} cents for one 1000-cent award, and no consumed_events row. A " +
				"send after a lease expiry and a redelivery after a late ack each make delivery at least once, so the " +
				"consumer must record e42 in consumed_events in the same transaction as the credit and skip an event " +
				"it has already seen."},
		{Name: variantBrokerDedupWindow, Changes: "an option: the broker drops a resend inside its deduplication window (--broker-window)", Mistake: "relying on the broker's deduplication window (2 min by default): the resend is dropped, " +
			"so the duplicate never reaches the consumers and the naive consumer looks correct. The counterexample is hidden, not " +
			"fixed: session 20 replays the event after the window",
			Breaks: []string{"broker_offers", "naive_credit_cents"},
			Shows: "The broker drops Relay-B's resend because it comes within its window (1 offer instead of 2), so even " +
				"the naive consumer credits 1000 cents and looks correct: the duplicate was hidden, not handled. A " +
				"window covers only the resends inside it; session 20 replays the same event days later, and only the " +
				"consumer's inbox keeps the effect single."},
	},
	Run: runLeaseExpiryAfterSend,
}

func runLeaseExpiryAfterSend(ctx context.Context, env *Env) (*lab.Result, error) {
	return playLeaseExpiryAfterSend(ctx, env, failpoint.NewPlan())
}

// playLeaseExpiryAfterSend runs session 18 with the lesson's fault (Relay-A
// stalls after its send until its lease expires) added to plan; tests add
// more faults to show the checks fail.
func playLeaseExpiryAfterSend(ctx context.Context, env *Env, plan *failpoint.Plan) (*lab.Result, error) {
	plan.Arm(failpoint.Rule{Point: failpoint.AfterSendBeforeComplete, Actor: cast.RelayA, Subject: e42, Fault: failpoint.LeaseExpiry})
	var tl lab.Timeline
	p, err := cast.NewPipeline(ctx, env.Open, env.DatabasePath(), "", &tl, plan)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	p.SQL = statementSet(env, p.SQL)
	if env.Is(variantBrokerDedupWindow) {
		p.BrokerWindow = cast.TicksOf(env.Options.BrokerWindow)
	}
	if err := seedLeaseExpiryAfterSend(ctx, p); err != nil {
		return nil, err
	}
	if err := playRelaysPastTheLease(ctx, env, p); err != nil {
		return nil, err
	}
	late, err := playBothConsumers(ctx, env, p)
	if err != nil {
		return nil, err
	}

	r := &lab.Result{Database: env.DatabasePath()}
	if err := measureLeaseExpiryAfterSend(ctx, p, late, r); err != nil {
		return nil, err
	}
	expectDocumented(r, env.Scenario.Checks, map[string]float64{
		"broker_offers": 2, "stale_completion_rows": 0, "published": 1,
		"inbox_credit_cents": float64(credit42), "consumed_event_rows": 1, "naive_credit_cents": float64(2 * credit42),
		"stale_receipt_ack_rows": 0, "redelivery_ack_rows": 1,
	})
	if err := cast.FinishDelivery(ctx, r, []*cast.Pipeline{p}, map[string]*failpoint.Plan{"session 18": plan}); err != nil {
		return nil, err
	}
	r.Verdict = leaseExpiryAfterSendVerdict(r, env)
	return r, nil
}

// seedLeaseExpiryAfterSend opens both consumers' accounts and commits e42.
func seedLeaseExpiryAfterSend(ctx context.Context, p *cast.Pipeline) error {
	for _, c := range []string{inboxConsumer, naiveConsumer} {
		if err := p.OpenAccount(ctx, c, account42); err != nil {
			return err
		}
	}
	return p.CommitCredit(ctx, e42, account42, credit42)
}

// playRelaysPastTheLease is the relays' script. At t=1 s Relay-A claims e42
// (token 1) and, at t=2 s, sends it; the failpoint stalls it there until
// its lease has expired (t=31 s). Relay-B takes over at the expiry (token
// 2) and sends again. Relay-A wakes up and completes with token 1; then
// Relay-B with token 2. A crash injected by a test is an expected outcome:
// the script goes on without the dead relay.
func playRelaysPastTheLease(ctx context.Context, env *Env, p *cast.Pipeline) error {
	a, err := env.Instances.PipelineRelay(ctx, p, cast.RelayA)
	if err != nil {
		return err
	}
	defer a.Close(ctx)
	b, err := env.Instances.PipelineRelay(ctx, p, cast.RelayB)
	if err != nil {
		return err
	}
	defer b.Close(ctx)
	p.SetNow(1 * cast.TickSecond)
	if err := cast.UnlessCrash(cast.MustClaim(ctx, a)); err != nil {
		return err
	}
	p.SetNow(2 * cast.TickSecond)
	if _, err := a.Send(ctx); cast.UnlessCrash(err) != nil {
		return err
	}
	if err := cast.UnlessCrash(cast.MustClaim(ctx, b)); err != nil {
		return err
	}
	for _, step := range []func(context.Context) error{
		func(ctx context.Context) error { _, err := b.Send(ctx); return err },
		func(ctx context.Context) error { _, err := a.Complete(ctx); return err },
		func(ctx context.Context) error { _, err := b.Complete(ctx); return err },
	} {
		p.SetNow(p.Now() + cast.TickSecond)
		if err := step(ctx); cast.UnlessCrash(err) != nil {
			return err
		}
	}
	return instance.CloseAll(ctx, a, b)
}

// playBothConsumers has the inbox consumer group (naive under the
// naive-inbox variant) and the naive consumer each read every offer: the
// inbox group's two instances first ack late (see [playStaleReceipt]),
// then Inbox-Consumer-1 takes the rest; the naive consumer takes every
// offer in one go.
func playBothConsumers(ctx context.Context, env *Env, p *cast.Pipeline) (staleReceipt, error) {
	p.SetNow(p.Now() + 5*cast.TickSecond)
	design := consumerDesign(env, cast.InboxDesign)
	first, err := env.Instances.PipelineConsumer(ctx, p, s18InboxFirst, inboxConsumer, design)
	if err != nil {
		return staleReceipt{}, err
	}
	defer first.Close(ctx)
	second, err := env.Instances.PipelineConsumer(ctx, p, s18InboxSecond, inboxConsumer, design)
	if err != nil {
		return staleReceipt{}, err
	}
	defer second.Close(ctx)
	late, err := playStaleReceipt(ctx, p, first, second)
	if err != nil {
		return late, err
	}
	if err := p.DrainConsumer(ctx, first, 0); err != nil {
		return late, err
	}
	if err := instance.CloseAll(ctx, first, second); err != nil {
		return late, err
	}
	naive, err := env.Instances.PipelineConsumer(ctx, p, "Naive-Consumer", naiveConsumer, cast.NaiveDesign)
	if err != nil {
		return late, err
	}
	defer naive.Close(ctx)
	if err := p.DrainConsumer(ctx, naive, 0); err != nil {
		return late, err
	}
	return late, naive.Close(ctx)
}

// staleReceipt is the late ack's delivery, as the broker's rows said while
// each instance held it: the offer, the first instance's receipt and the
// redelivery's. A zero receipt: no instance held it.
type staleReceipt struct {
	offer, stale, redelivery int64
}

// playStaleReceipt is the late ack. Inbox-Consumer-1 takes the oldest
// offer (receipt 1) and the lab holds it before its effect while the
// broker's visibility timeout runs out: the broker makes the delivery
// ready again, and Inbox-Consumer-2 takes it (receipt 2), held in turn
// before its effect so that the redelivery is still in flight when
// Inbox-Consumer-1 goes on, applies its credit and acks with receipt 1.
// Then Inbox-Consumer-2 goes on. What each held comes from the broker's
// rows, read on the observer's connection.
func playStaleReceipt(ctx context.Context, p *cast.Pipeline, first, second cast.Consumer) (staleReceipt, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var late staleReceipt
	held, release := make(chan struct{}), make(chan struct{})
	second.HoldBeforeEffect(func(ctx context.Context) error {
		d, event, err := inFlightOf(ctx, p, second.Group())
		if err != nil {
			return err
		}
		late.redelivery = d.DeliveryCount
		p.Add(lab.Event{Kind: lab.KindNote, Subject: event, Offer: d.OfferID, Actor: second.Name(), Action: "held",
			Detail: fmt.Sprintf("took offer %d of %s: broker_deliveries reads %s, delivery_count %d (its receipt); the lab holds it "+
				"before its effect until %s has acked, so this delivery is in flight when that ack arrives",
				d.OfferID, event, d.State, d.DeliveryCount, first.Name())})
		close(held)
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	secondDone := make(chan error, 1)
	started := false
	first.HoldBeforeEffect(func(ctx context.Context) error {
		d, event, err := inFlightOf(ctx, p, first.Group())
		if err != nil {
			return err
		}
		late.offer, late.stale = d.OfferID, d.DeliveryCount
		p.Add(lab.Event{Kind: lab.KindStall, Subject: event, Offer: d.OfferID, Actor: first.Name(), Action: "stalls",
			Detail: fmt.Sprintf("took offer %d of %s: broker_deliveries reads %s, delivery_count %d (its receipt); it pauses before "+
				"its effect (a GC pause, a slow dependency)", d.OfferID, event, d.State, d.DeliveryCount)})
		n, r, err := p.RedeliverInFlight(ctx, first.Group(), cast.VisibilityTimeout, 0)
		if err != nil {
			return err
		}
		p.Add(lab.Event{Kind: lab.KindExpiry, Subject: event, Offer: d.OfferID, Actor: cast.ClockName, Action: "visibility timeout",
			Detail: fmt.Sprintf("the clock reaches %s: the broker's %s visibility timeout ran out on %s of %s; "+
				"its redelivery job made %d ready again; %s does not know", cast.TickClock(p.Now()), cast.DurationText(cast.VisibilityTimeout),
				unacknowledged(n), first.Group(), r.Ready, first.Name())})
		started = true
		go func() {
			_, err := second.ConsumeNext(ctx)
			secondDone <- err
		}()
		select {
		case <-held:
		case err := <-secondDone: // it took nothing, or failed, before its hold
			secondDone <- err
		}
		p.SetNow(p.Now() + cast.TickSecond)
		p.Add(lab.Event{Kind: lab.KindWake, Subject: event, Offer: d.OfferID, Actor: first.Name(), Action: "wakes",
			Detail: fmt.Sprintf("goes on from before its effect with offer %d, receipt %d", d.OfferID, d.DeliveryCount)})
		return nil
	})
	_, err := first.ConsumeNext(ctx)
	p.SetNow(p.Now() + cast.TickSecond)
	close(release)
	if started {
		if err2 := <-secondDone; err == nil {
			err = err2
		}
	}
	first.HoldBeforeEffect(nil)
	second.HoldBeforeEffect(nil)
	return late, err
}

// inFlightOf is group's one delivery in flight, read on the observer's
// connection, and its offer's event id.
func inFlightOf(ctx context.Context, p *cast.Pipeline, group string) (store.BrokerDelivery, string, error) {
	s, err := p.ReadBrokerState(ctx, group)
	if err != nil {
		return store.BrokerDelivery{}, "", err
	}
	if len(s.InFlight) != 1 {
		return store.BrokerDelivery{}, "", fmt.Errorf("%s holds %d deliveries in flight, want 1", group, len(s.InFlight))
	}
	d := s.InFlight[0]
	offers, err := p.Broker().Offers(ctx)
	if err != nil {
		return d, "", err
	}
	for _, o := range offers {
		if o.OfferID == d.OfferID {
			return d, o.EventID, nil
		}
	}
	return d, "", fmt.Errorf("no offer %d for %s's delivery", d.OfferID, group)
}

// unacknowledged is n unacknowledged deliveries, in words.
func unacknowledged(n int) string {
	if n == 1 {
		return "1 unacknowledged delivery"
	}
	return fmt.Sprintf("%d unacknowledged deliveries", n)
}

// leaseExpiryAfterSendVerdict words the run from its checks and figures.
func leaseExpiryAfterSendVerdict(r *lab.Result, env *Env) string {
	m, rows := metricsOf(r), rowsOf(r)
	switch {
	case r.Passed():
		return fmt.Sprintf("SAFE DESIGN held, with an honest duplicate: the broker holds %s offers of e42 after the lease expired "+
			"post-send; Relay-A's stale completion changed %s and the row was published once; %s's late ack with a stale "+
			"receipt changed %s and the redelivery's ack changed %s; the inbox consumer ended at %s cents with %s consumed_events "+
			"row, while the naive consumer, fed the same offers, ended at %s.",
			m("broker_offers"), rows("stale_completion_rows"), s18InboxFirst, rows("stale_receipt_ack_rows"), rows("redelivery_ack_rows"),
			m("inbox_credit_cents"), m("consumed_event_rows"), m("naive_credit_cents"))
	case env.Is(variantBrokerDedupWindow):
		return fmt.Sprintf("The counterexample is hidden, not fixed: the broker's dedup window dropped the resend (%s offer), so "+
			"the naive consumer looks correct here (%s cents); after the window the same duplicate gets through (session 20).",
			m("broker_offers"), m("naive_credit_cents"))
	case env.Variant == "":
		return fmt.Sprintf("NOT SHOWN: the design did not hold this run; failed checks %v.", r.FailedChecks())
	}
	return "" // Execute opens a variant's verdict with what its checks measured
}

// measureLeaseExpiryAfterSend takes session 18's figures, in the lesson's
// order: counts from the database, the completions' rows from the
// completion ledger, the late ack's from the acknowledgement ledger.
func measureLeaseExpiryAfterSend(ctx context.Context, p *cast.Pipeline, late staleReceipt, r *lab.Result) error {
	count := func(key, query string, args ...any) error {
		n, err := p.Count(ctx, query, args...)
		if err != nil {
			return fmt.Errorf("measure %s: %w", key, err)
		}
		r.SetMetric(key, float64(n))
		return nil
	}
	if err := count("broker_offers", store.CountOffers.SQL, e42, 0); err != nil {
		return err
	}
	if rows, ok := p.CompletionRows(cast.RelayA, e42); ok {
		r.SetMetric("stale_completion_rows", float64(rows))
	}
	for _, c := range []struct {
		key, query string
		args       []any
	}{
		{"published", store.CountDeliveredEvents.SQL, nil},
		{"inbox_credit_cents", store.AccountCredit.SQL, []any{cast.AccountID(inboxConsumer, account42)}},
		{"consumed_event_rows", store.CountConsumedEvents.SQL, []any{inboxConsumer}},
		{"naive_credit_cents", store.AccountCredit.SQL, []any{cast.AccountID(naiveConsumer, account42)}},
		{"broker_dropped_offers", store.CountOffers.SQL, []any{e42, 1}},
	} {
		if err := count(c.key, c.query, c.args...); err != nil {
			return err
		}
	}
	if rows, ok := p.CompletionRows(cast.RelayB, e42); ok {
		r.SetMetric("current_completion_rows", float64(rows))
	}
	if rows, ok := p.AckRows(s18InboxFirst, late.offer, late.stale); ok && late.stale != 0 {
		r.SetMetric("stale_receipt_ack_rows", float64(rows))
	}
	if rows, ok := p.AckRows(s18InboxSecond, late.offer, late.redelivery); ok && late.redelivery != 0 {
		r.SetMetric("redelivery_ack_rows", float64(rows))
	}
	return nil
}
