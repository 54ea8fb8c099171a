// Package session18expiry is the lesson session-18-lease-expiry-after-send:
// its Lesson (the sequence, the checks, the variants and what the registry's
// tests read to prove it), the stages and actors only it uses, its proofs
// (proofs.go) and its tests.
package session18expiry

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/failpoint"
	"github.com/outboxlab/outboxlab/instance"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/natsbroker"
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

// Lesson is session-18-lease-expiry-after-send, as the registry lists it:
// "Session 18: the lease expires after the send".
var Lesson = lesson.Scenario{
	Name:    "session-18-lease-expiry-after-send",
	Session: "Session-18",
	FileTag: "Lease-Expiry-After-Send",
	Title:   "Session 18: the lease expires after the send",
	Design:  lab.Safe,
	Figures: map[string]float64{
		"broker_offers": 2, "stale_completion_rows": 0, "published": 1, "inbox_credit_cents": 1000,
		"consumed_event_rows": 1, "naive_credit_cents": 2000,
	},
	Teaches: "Outbox event {@event} awards {award_cents} cents to {@account}. The lesson calls it outbox row 42: " +
		"outbox_events is keyed by its event id, so row 42 is the row WHERE event_id = '{@event}' (the lab's relay table " +
		"has no integer id). {@stale_relay} claims it (token {stale_token}) and sends it to {broker_name}, then stalls " +
		"until its {lease} lease has expired. {@current_relay} claims it (token {current_token}) and sends it again. " +
		"{@stale_relay}'s completion presents token {stale_token}, and the completion's guard claim_token = :token fences " +
		"it out; only the current token's completion may publish the row. The broker then holds both sends as offers of " +
		"{@event}: the duplicate is the expected counterexample of at-least-once delivery, not a bug.\n\nTwo consumers " +
		"read every offer: the inbox consumer (INSERT INTO consumed_events ... ON CONFLICT DO NOTHING and the credit in one " +
		"transaction, the credit applied only when the insert added a row) credits the award once; the naive " +
		"consumer (an unconditional increment) credits it once per delivery.\n\nThe inbox consumer group runs " +
		"instances of its own, and its first delivery acks late: {@stale_receiver} takes offer {stale_offer} (receipt " +
		"{stale_receipt}, the delivery_count the broker gives it) and pauses before its effect past the broker's " +
		"{visibility_timeout} visibility timeout; the broker redelivers the offer to {@redelivery_receiver} (receipt " +
		"{redelivery_receipt}), held in flight. {@stale_receiver} goes on: its credit commits with the inbox row, and its " +
		"ack with receipt {stale_receipt} {stale_ack_result}. {@redelivery_receiver} then finds {@event} in the inbox (no " +
		"credit) and acks with receipt {redelivery_receipt}: {redelivery_ack_result}.\n\n" +
		"The broker and inbox tables store UTC clock text; outbox_events keeps " +
		"logical ticks (milliseconds since {tick_epoch}), shown beside their clock time.",
	DoesNotSolve: "Fencing keeps the database honest (only the current token's completion counts) but cannot unsend: " +
		"the broker already holds {@stale_relay}'s offer, so a duplicate broker message is normal and only the consumer can " +
		"neutralise it. The inbox that does so remembers only as long as its retention (session 20), and a " +
		"version check cannot replace it for additive effects such as a credit (session 19).",
	Settings:   leaseExpiryAfterSendSettings,
	Statements: cast.PipelineSQL(),
	Set:        cast.DeliveryLesson,
	Options:    []lesson.Option{lesson.BrokerWindowOption}, // its broker-dedup-window variant's window
	RealBroker: true,
	// The lab's broker fences an ack that names an earlier delivery (its
	// receipt) and takes the current one; JetStream's is measured.
	BrokerContract: []string{"stale_receipt_ack_rows", "redelivery_ack_rows"},
	Checks: []lesson.CheckDoc{
		{Name: "broker_offers", Measure: true, About: "offers of {@event} the broker accepted out of the relays' {sends} sends, " +
			"one of them the resend after {@stale_relay}'s lease expired: a real duplicate the design must survive"},
		{Name: "stale_completion_rows", About: "rows changed by {@stale_relay}'s completion of {@event} with its stale token " +
			"{stale_token}, sent after {@current_relay} claimed the row with token {current_token}"},
		{Name: "published", About: "outbox rows published (delivered set); {@event} was published by the completion of {@publisher}"},
		{Name: "inbox_credit_cents", About: "cents the inbox consumer group credited to {@account} over the deliveries of {@event} " +
			"it took ({inbox_deliveries}: the offers and the redelivery), for one award of {award_cents}"},
		{Name: "consumed_event_rows", About: "consumed_events rows the inbox consumer group holds for {@event}"},
		{Name: "naive_credit_cents", Measure: true, About: "cents the naive consumer (an unconditional increment) credited to " +
			"{@account} over the deliveries of {@event} it took ({naive_deliveries}): the duplicate as it reaches the business state"},
		{Name: "stale_receipt_ack_rows", About: "rows changed at the broker by {@stale_receiver}'s ack of offer {stale_offer} " +
			"with receipt {stale_receipt}, sent while {@redelivery_receiver}'s redelivery (receipt {redelivery_receipt}) was in flight"},
		{Name: "redelivery_ack_rows", About: "rows changed at the broker by {@redelivery_receiver}'s ack of the redelivery of " +
			"offer {stale_offer} with receipt {redelivery_receipt}"},
	},
	Variants: []lesson.Variant{
		{Name: "complete-without-token", Swaps: []store.Stmt{store.CompleteByEventID}, Mistake: "the relays complete by event id alone: a relay's late completion, after its lease expired, is accepted",
			Breaks: []string{"stale_completion_rows"},
			Shows: "The completion of {@event} by {@stale_relay}, sent with token {stale_token} after its lease expired and " +
				"{@current_relay} claimed the row with token {current_token}, changed rows: {stale_completion_rows}; the row " +
				"was published by the completion of {@publisher}, and {@current_relay}'s own completion then changed " +
				"{current_completion_rows}. The broker accepted {broker_offers} offers, so nothing is lost here, but a relay " +
				"that had lost its lease decided the row's state: only the current token may complete it."},
		{Name: "naive-inbox", Designs: []cast.ConsumerDesign{cast.NaiveDesign}, Mistake: "the inbox consumer increments the credit without writing or checking consumed_events",
			Breaks: []string{"inbox_credit_cents", "consumed_event_rows"},
			Shows: "The inbox consumer group took {inbox_deliveries} deliveries of {@event} (every offer, and the broker's " +
				"redelivery of offer {stale_offer} after the visibility timeout), and each credited {@account}: " +
				"{inbox_credit_cents} cents for one award of {award_cents}, with {consumed_event_rows} consumed_events rows. A " +
				"send after a lease expiry and a redelivery after a late ack each make delivery at least " +
				"once, so the consumer must record the event in consumed_events in the same transaction as the credit and " +
				"skip an event it has already seen."},
		{Name: variantBrokerDedupWindow, Changes: "an option: the broker drops a resend inside its deduplication window (--broker-window)",
			Mistake: "relying on the broker's deduplication window (--broker-window, {broker_window} in this run): a window " +
				"longer than the resend's gap drops the resend, so the duplicate never reaches the consumers and the naive " +
				"consumer looks correct. The counterexample is hidden, not fixed: session 20 replays the event after the window",
			Breaks: []string{"broker_offers", "naive_credit_cents"},
			Shows: "The broker's {broker_window} window dropped {broker_dropped_offers} of the relays' {sends} sends of " +
				"{@event} (dropped sends by: {@dropped_sender}) and accepted {broker_offers}, and the naive consumer credited " +
				"{naive_credit_cents} cents for one award of {award_cents}. Where the window drops the resend, the naive " +
				"consumer looks correct: the window hides the duplicate, it does not handle it. A window covers only the " +
				"resends inside it; the retention lesson replays the same event days later, and only the consumer's inbox " +
				"keeps the effect single."},
	},
	Breakers:  breakers(),
	Guards:    guards(),
	Processes: processes,
	Run:       runLeaseExpiryAfterSend,
}

func runLeaseExpiryAfterSend(ctx context.Context, env *lesson.Env) (*lab.Result, error) {
	return playLeaseExpiryAfterSend(ctx, env, failpoint.NewPlan())
}

// playLeaseExpiryAfterSend runs session 18 with the lesson's fault (Relay-A
// stalls after its send until its lease expires) added to plan; tests add
// more faults to show the checks fail.
func playLeaseExpiryAfterSend(ctx context.Context, env *lesson.Env, plan *failpoint.Plan) (*lab.Result, error) {
	plan.Arm(failpoint.Rule{Point: failpoint.AfterSendBeforeComplete, Actor: cast.RelayA, Subject: e42, Fault: failpoint.LeaseExpiry})
	var tl lab.Timeline
	p, err := cast.NewPipeline(ctx, env.Open, env.DatabasePath(), "", &tl, plan)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	p.SQL = lesson.StatementSet(env, p.SQL)
	if env.Is(variantBrokerDedupWindow) {
		p.BrokerWindow = cast.TicksOf(env.Options.BrokerWindow)
	}
	if err := env.UseRealBroker(ctx, p, "session 18", natsbroker.Config{Window: cast.TickSpan(p.BrokerWindow), Visibility: cast.TickSpan(cast.VisibilityTimeout)}); err != nil {
		return nil, err
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
	if err := castLeaseExpiryAfterSend(ctx, p, late, env.Options, r); err != nil {
		return nil, err
	}
	lesson.ExpectDocumented(r, env.Scenario.Checks, map[string]float64{
		"broker_offers": 2, "stale_completion_rows": 0, "published": 1,
		"inbox_credit_cents": float64(credit42), "consumed_event_rows": 1, "naive_credit_cents": float64(2 * credit42),
		"stale_receipt_ack_rows": 0, "redelivery_ack_rows": 1,
	})
	if err := cast.FinishDelivery(ctx, r, []*cast.Pipeline{p}, map[string]*failpoint.Plan{"session 18": plan}); err != nil {
		return nil, err
	}
	env.MeasureBrokerContract(r)
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
func playRelaysPastTheLease(ctx context.Context, env *lesson.Env, p *cast.Pipeline) error {
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
func playBothConsumers(ctx context.Context, env *lesson.Env, p *cast.Pipeline) (staleReceipt, error) {
	p.SetNow(p.Now() + 5*cast.TickSecond)
	design := lesson.ConsumerDesign(env, cast.InboxDesign)
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
	// staleHolder and redeliveryHolder are the instances that held the
	// delivery under each receipt, as the broker's in-flight row read
	// while each held it.
	staleHolder, redeliveryHolder string
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
		late.redelivery, late.redeliveryHolder = d.DeliveryCount, second.Name()
		p.Add(lab.Event{Kind: lab.KindNote, Subject: event, Offer: d.OfferID, Actor: second.Name(), Action: "held",
			Detail: fmt.Sprintf("took offer %d of %s: %s reads %s, delivery_count %d (its receipt); the lab holds it "+
				"before its effect until %s has acked, so this delivery is in flight when that ack arrives",
				d.OfferID, event, p.DeliveriesRecord(), d.State, d.DeliveryCount, first.Name())})
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
		late.offer, late.stale, late.staleHolder = d.OfferID, d.DeliveryCount, first.Name()
		p.Add(lab.Event{Kind: lab.KindStall, Subject: event, Offer: d.OfferID, Actor: first.Name(), Action: "stalls",
			Detail: fmt.Sprintf("took offer %d of %s: %s reads %s, delivery_count %d (its receipt); it pauses before "+
				"its effect (a GC pause, a slow dependency)", d.OfferID, event, p.DeliveriesRecord(), d.State, d.DeliveryCount)})
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

// leaseExpiryAfterSendSettings are the settings session 18's texts quote:
// the relays' lease, the broker's visibility timeout, the broker window
// the broker-dedup-window variant runs with, and the tick epoch.
func leaseExpiryAfterSendSettings(opts lesson.Options) map[string]string {
	return map[string]string{
		"lease": cast.DurationText(cast.RelayLease), "visibility_timeout": cast.DurationText(cast.VisibilityTimeout),
		"broker_window": cast.WindowText(cast.TicksOf(opts.BrokerWindow)),
		"tick_epoch":    cast.LessonStart.Format("2006-01-02T15:04:05.000Z"),
		"broker_name":   lesson.BrokerName(opts),
		// What the lab's broker does with the two acks, as the lesson is
		// designed; a run says what its broker did (ackResults).
		"stale_ack_result":      staleAckRefused,
		"redelivery_ack_result": "it takes (1 row)",
	}
}

// staleAckRefused is the lab broker's answer to the late ack.
const staleAckRefused = "is refused by delivery_count = :receipt alone (the delivery is still in flight, for the same consumer group)"

// ackResults say what the broker did with the late ack of the first
// delivery and with the redelivery's ack, from the rows each changed at
// the broker.
func ackResults(staleRows, redeliveryRows int64, broker string) (stale, redelivery string) {
	stale = staleAckRefused
	if staleRows > 0 {
		stale = fmt.Sprintf("is taken by %s (%s): it matches an ack by the message, not by the delivery it names", broker, lab.Rows(staleRows))
	}
	redelivery = fmt.Sprintf("it takes (%s)", lab.Rows(redeliveryRows))
	if redeliveryRows == 0 {
		redelivery = "it finds nothing left to ack (0 rows)"
	}
	return stale, redelivery
}

// castLeaseExpiryAfterSend records who played session 18's roles and the
// figures its texts quote, as the ledgers and the database show them: the
// relays from the claim ledger (the lower token's owner is the stale
// relay), the publisher from the completion ledger's completion that
// changed the row at the tick the row's delivered_at reads, the award and
// its account from the outbox row's payload, the dropped resend's sender
// from broker_offers, and the late ack's instances from the broker's
// in-flight rows each held (see [playStaleReceipt]). It records the
// settings the texts quote too, the broker window as p ran with it, so
// that the verdict, written before [lesson.Execute] fills the texts, quotes them.
func castLeaseExpiryAfterSend(ctx context.Context, p *cast.Pipeline, late staleReceipt, opts lesson.Options, r *lab.Result) error {
	for k, v := range leaseExpiryAfterSendSettings(opts) {
		r.SetSetting(k, v)
	}
	r.SetSetting("broker_window", cast.WindowText(p.BrokerWindow))
	staleRows, _ := r.Metric("stale_receipt_ack_rows")
	redeliveryRows, _ := r.Metric("redelivery_ack_rows")
	stale, redelivery := ackResults(int64(staleRows), int64(redeliveryRows), lesson.BrokerName(opts))
	r.SetSetting("stale_ack_result", stale)
	r.SetSetting("redelivery_ack_result", redelivery)
	rec := p.Record()
	row, err := readBackEvent(ctx, p, e42)
	if err != nil {
		return err
	}
	r.SetCast("event", row.ID)
	var pl cast.Payload
	if err := json.Unmarshal([]byte(row.Payload), &pl); err != nil {
		return fmt.Errorf("read back %s's payload: %w", e42, err)
	}
	r.SetCast("account", pl.Account)
	r.SetMetric("award_cents", float64(pl.CreditCents))
	castRelays(rec, row, r)
	if err := castDroppedSenders(ctx, p, r); err != nil {
		return err
	}
	if late.stale != 0 {
		r.SetCast("stale_receiver", late.staleHolder)
	}
	if late.redelivery != 0 {
		r.SetCast("redelivery_receiver", late.redeliveryHolder)
	}
	for key, v := range map[string]int64{"stale_offer": late.offer, "stale_receipt": late.stale, "redelivery_receipt": late.redelivery} {
		if v != 0 {
			r.SetMetric(key, float64(v))
		}
	}
	deliveries := map[string]int{}
	for _, e := range rec.Effects {
		deliveries[e.Consumer]++
	}
	r.SetMetric("inbox_deliveries", float64(deliveries[inboxConsumer]))
	r.SetMetric("naive_deliveries", float64(deliveries[naiveConsumer]))
	return nil
}

// readBackEvent is event's outbox row, read on the observer's connection
// with the audit's read of every event.
func readBackEvent(ctx context.Context, p *cast.Pipeline, event string) (store.Event, error) {
	evs, err := store.NewRelay(p.Audit, store.RelayLesson).Events(ctx)
	if err != nil {
		return store.Event{}, err
	}
	for _, e := range evs {
		if e.ID == event {
			return e, nil
		}
	}
	return store.Event{}, fmt.Errorf("read back %s: no such outbox row", event)
}

// castRelays casts the stale and the current relay from the claim ledger
// (the owners of the lowest and the highest token that claimed row), and
// the publisher: the relay whose completion changed row at the tick its
// delivered_at reads, or "no relay" when the row is not delivered.
func castRelays(rec cast.Record, row store.Event, r *lab.Result) {
	if stale, current := rec.FirstAndLastClaims(row.ID); stale != nil {
		r.SetCast("stale_relay", stale.Relay)
		r.SetMetric("stale_token", float64(stale.Token))
		r.SetCast("current_relay", current.Relay)
		r.SetMetric("current_token", float64(current.Token))
	}
	sends := 0
	for _, s := range rec.Sends {
		if s.Event == row.ID {
			sends++
		}
	}
	r.SetMetric("sends", float64(sends))
	r.SetCast("publisher", "no relay")
	for _, c := range rec.Completions {
		if c.Event == row.ID && c.Rows > 0 && row.Delivered && c.Tick == row.DeliveredAt {
			r.SetCast("publisher", c.Relay)
			r.SetMetric("publisher_token", float64(c.Token))
			break
		}
	}
}

// castDroppedSenders casts who sent the offers of e42 that the broker's
// window dropped, as broker_offers records them ("no relay" when it dropped
// none).
func castDroppedSenders(ctx context.Context, p *cast.Pipeline, r *lab.Result) error {
	offers, err := p.Broker().Offers(ctx)
	if err != nil {
		return err
	}
	var senders []string
	for _, o := range offers {
		if o.EventID == e42 && o.Dropped {
			senders = append(senders, o.OfferedBy)
		}
	}
	if len(senders) == 0 {
		senders = []string{"no relay"}
	}
	r.SetCast("dropped_sender", strings.Join(senders, ", "))
	return nil
}
