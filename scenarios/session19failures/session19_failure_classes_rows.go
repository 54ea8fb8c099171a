package session19failures

// This file holds session 19's rows: the script of each injected event
// order, and what each reads back from its own database and ledgers.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/failpoint"
	"github.com/outboxlab/outboxlab/instance"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/store"
)

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
	out := rowOutcome{observed: s.String(), ok: s.offers >= 2 && s.credit == rowCredit && s.published == 1}
	s.record(&out)
	out.role("crashed", firedBy(plan, failpoint.Crash))
	out.role("resender", lastSender(p, "e1"))
	return out, err
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
	var out rowOutcome
	castStaleAndCurrent(p, "e2", &out)
	out.observed = fmt.Sprintf("after %s's completion with token %d: delivered=%d, claim_token=%d; at the end: delivered=%d at %s "+
		"(%s completed at %s)", out.roles["stale"], int64(out.figures["stale_token"]), int(lab.Bool(afterA.Delivered)), afterA.Token,
		int(lab.Bool(final.Delivered)), cast.TickClock(final.DeliveredAt), out.roles["current"], cast.TickClock(completedAt))
	out.ok = !afterA.Delivered && afterA.Token == int64(out.figures["current_token"]) && final.Delivered && final.DeliveredAt == completedAt
	return out, nil
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
	out := rowOutcome{observed: s.String(), ok: s.offers >= 2 && s.credit == rowCredit && s.published == 1}
	s.record(&out)
	out.role("relay", firedBy(plan, failpoint.AckLost))
	return out, err
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
	observed := fmt.Sprintf("offer delivered %s; credit %d cents; %s", lab.Count(int64(s.maxDeliv), "time", "times"), s.credit,
		lab.Count(int64(s.inboxRows), "consumed_events row", "consumed_events rows"))
	out := rowOutcome{observed: observed, ok: s.maxDeliv >= 2 && s.credit == rowCredit}
	s.record(&out)
	out.role("consumer", firedBy(plan, failpoint.Crash))
	return out, err
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
	behindBarrier := []string{"Consumer-1", "Consumer-2"}
	if err := consumeBehindBarrier(ctx, d.env, p, behindBarrier, d.credit); err != nil {
		return rowOutcome{}, err
	}
	if err := consumeAll(ctx, d.env, p, "Consumer-3", cast.CreditService, d.credit); err != nil {
		return rowOutcome{}, err
	}
	concurrent, connections := 0, map[string]bool{}
	for _, e := range p.Effects() {
		if slices.Contains(behindBarrier, e.Instance) {
			concurrent++
			connections[e.Instance] = true
		}
	}
	s, err := observeCredit(ctx, p, "ACC-5")
	observed := fmt.Sprintf("%s applied at once by %s; credit %d cents; %s",
		lab.Count(int64(concurrent), "delivery", "deliveries"), lab.Count(int64(len(connections)), "connection", "connections"), s.credit,
		lab.Count(int64(s.inboxRows), "consumed_events row", "consumed_events rows"))
	out := rowOutcome{observed: observed, ok: concurrent == 2 && s.credit == rowCredit}
	s.record(&out)
	out.figure("connections", float64(len(connections)))
	return out, err
}

// consumeBehindBarrier starts one consumer instance per name, each on its
// own connection; each takes one delivery and waits at a barrier before its
// effect, so the effects start at the same moment.
func consumeBehindBarrier(ctx context.Context, env *lesson.Env, p *cast.Pipeline, names []string, design cast.ConsumerDesign) error {
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
	out, err := judgeLateVersion(ctx, p)
	out.role("crashed", firedBy(plan, failpoint.Crash))
	return out, err
}

// judgeLateVersion reads row 6's outcome from its database: the newest
// committed version, the order of the broker's offers, and the projection.
func judgeLateVersion(ctx context.Context, p *cast.Pipeline) (rowOutcome, error) {
	var out rowOutcome
	evs, err := store.NewRelay(p.Audit, store.RelayLesson).Events(ctx)
	if err != nil {
		return out, err
	}
	var newest cast.Payload
	for _, e := range evs {
		var v cast.Payload
		if err := json.Unmarshal([]byte(e.Payload), &v); err != nil {
			return out, err
		}
		if v.Version > newest.Version {
			newest = v
		}
	}
	out.figure("newest_version", float64(newest.Version))
	out.role("newest_state", newest.State)
	order, late, err := offerOrder(ctx, p, &out)
	if err != nil {
		return out, err
	}
	projs, err := p.Consumers().Projections(ctx)
	if err != nil {
		return out, err
	}
	if len(projs) != 1 {
		out.observed = fmt.Sprintf("%d projection rows", len(projs))
		return out, nil
	}
	pr := projs[0]
	out.figure("projected_version", float64(pr.Version))
	out.role("projected_state", pr.State)
	out.role("entity", pr.EntityID)
	out.observed = fmt.Sprintf("broker order %s; projection %s at version %d (%s); newest committed version %d",
		strings.Join(order, ", "), pr.EntityID, pr.Version, pr.State, newest.Version)
	out.ok = late && pr.Version == newest.Version
	return out, nil
}

// offerOrder is the broker's offers of row 6 in arrival order, and
// whether one carried an older version than an offer before it; it
// records the first offer's version and the first late one's in out.
func offerOrder(ctx context.Context, p *cast.Pipeline, out *rowOutcome) ([]string, bool, error) {
	offers, err := p.Broker().Offers(ctx)
	if err != nil {
		return nil, false, err
	}
	var order []string
	late := false // an offer carried an older version than one before it
	var highest int64
	for i, o := range offers {
		var v cast.Payload
		if err := json.Unmarshal([]byte(o.Payload), &v); err != nil {
			return nil, false, err
		}
		order = append(order, fmt.Sprintf("%s (v%d)", o.EventID, v.Version))
		if i == 0 {
			out.figure("early_version", float64(v.Version))
		}
		if v.Version < highest && !late {
			out.figure("late_version", float64(v.Version))
		}
		late = late || v.Version < highest
		highest = max(highest, v.Version)
	}
	return order, late, nil
}

// firedBy is the actor at whom plan's first fault of kind fired, "" when
// none fired.
func firedBy(plan *failpoint.Plan, fault failpoint.Fault) string {
	for _, f := range plan.Fired() {
		if f.Fault == fault {
			return f.Actor
		}
	}
	return ""
}

// lastSender is the relay whose send of event the send ledger records
// last, "" when none sent it.
func lastSender(p *cast.Pipeline, event string) string {
	who := ""
	for _, snd := range p.Record().Sends {
		if snd.Event == event {
			who = snd.Relay
		}
	}
	return who
}

// castStaleAndCurrent records in o the owners of the lowest and the
// highest token that claimed event (the claim ledger's), and the relay
// whose completion first changed the row, with their tokens.
func castStaleAndCurrent(p *cast.Pipeline, event string, o *rowOutcome) {
	rec := p.Record()
	if stale, current := rec.FirstAndLastClaims(event); stale != nil {
		o.role("stale", stale.Relay)
		o.figure("stale_token", float64(stale.Token))
		o.role("current", current.Relay)
		o.figure("current_token", float64(current.Token))
	}
	for _, c := range rec.Completions {
		if c.Event == event && c.Rows > 0 {
			o.role("publisher", c.Relay)
			o.figure("publisher_token", float64(c.Token))
			return
		}
	}
	o.role("publisher", "no relay")
}
