package natsbroker

import (
	"context"
	"fmt"
	"time"
)

// The real clock can lag the scenario's: an operation runs late when the
// machine is busy (under -race on two cores, by 100 ms and more), and the
// interval JetStream measures from it to a later operation is then
// shorter than the mapped one. The broker therefore also waits, before an
// operation, until every JetStream duration the scenario clock says has
// run out (a window since an event's accepted offer, an ack wait since a
// delivery) has run out on the real clock, from the real instant
// JetStream started it. Lateness the other way (a real duration that ran
// out while the scenario's has not) cannot be undone: it is noted in
// [Answers.Notes].

// purgeSlack is how long after its window JetStream may still hold a
// message id: its purge timer fires at least 50 ms apart.
const purgeSlack = 75 * time.Millisecond

// ackWaitSlack is how long after an ack wait JetStream's timer may queue
// the redelivery (nats-server adds 1 ms to batch expiries).
const ackWaitSlack = 5 * time.Millisecond

// sleepUntil waits until the real instant t, or ctx ends.
func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// catchUpWindow waits, when the scenario clock says window has passed at
// now since eventID's last accepted offer with a message id, until it has
// passed on the real clock since JetStream accepted that offer, plus
// purgeSlack. Lock not held.
func (b *Broker) catchUpWindow(ctx context.Context, eventID string, now time.Time, window time.Duration) error {
	b.mu.Lock()
	var last *offerMeta
	for i := len(b.offers) - 1; i >= 0; i-- {
		if o := b.offers[i]; o.EventID == eventID && !o.Dropped && b.offerMeta[i].msgID {
			last = &b.offerMeta[i]
			break
		}
	}
	if last == nil {
		b.mu.Unlock()
		return nil
	}
	realWindow, passed := b.window, now.Sub(last.scenAt) >= window
	due := last.realAt.Add(realWindow)
	if !passed && !time.Now().Before(due) {
		b.note(fmt.Sprintf("offer of %s at %s: inside the %s window in scenario time (%s since its accepted offer) but past the %s real window in real time: JetStream may accept it",
			eventID, now.Format(time.TimeOnly), window, now.Sub(last.scenAt), realWindow))
	}
	b.mu.Unlock()
	if !passed {
		return nil
	}
	return sleepUntil(ctx, due.Add(purgeSlack))
}

// catchUpAckWaits waits until every delivery to cs whose visibility
// timeout the scenario clock says has run out at now has outlived its ack
// wait on the real clock too, plus ackWaitSlack, so JetStream's timer has
// queued it again. Lock not held.
func (b *Broker) catchUpAckWaits(ctx context.Context, cs *consumerState, now time.Time) error {
	b.mu.Lock()
	var until time.Time
	realNow := time.Now()
	for _, d := range b.deliveries {
		if d.key.durable != cs.durable || (d.State != "in_flight" && d.State != "ready") {
			continue
		}
		due := d.realAt.Add(d.ackWaitReal)
		switch {
		case now.Sub(d.scenAt) >= cs.visibility:
			if due.After(until) {
				until = due
			}
		case !realNow.Before(due) && !d.earlyNoted:
			d.earlyNoted = true
			b.note(fmt.Sprintf("%s: delivery %d of offer %d outlived its %s real ack wait while %s of its %s visibility passed in scenario time: JetStream redelivers it early",
				cs.durable, d.DeliveryCount, d.OfferID, d.ackWaitReal, now.Sub(d.scenAt), cs.visibility))
		}
	}
	b.mu.Unlock()
	if until.IsZero() {
		return nil
	}
	return sleepUntil(ctx, until.Add(ackWaitSlack))
}
