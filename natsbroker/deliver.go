package natsbroker

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxlab/outboxlab/clock"
	"github.com/outboxlab/outboxlab/store"
)

// pollEvery is how often DeliverNext asks again while JetStream owes a
// redelivery its timer has not made yet.
const pollEvery = 5 * time.Millisecond

// DeliverNext fetches consumer's next message from its durable pull
// consumer without waiting (FetchNoWait of one message). JetStream, not
// this adapter, decides what comes next and guarantees that two callers
// for one consumer (two instances of one consumer group) never receive
// the same delivery. Receipt is the NumDelivered of the message's
// metadata; OfferID is the offer the stream sequence belongs to. When a
// delivery's ack wait has run out by the ledger's real clock but
// JetStream's timer has not yet queued it again, DeliverNext asks again
// for at most AnswerWait.
func (b *Broker) DeliverNext(ctx context.Context, consumer string, now time.Time) (store.Delivery, error) {
	if err := b.clock.wait(ctx, now); err != nil {
		return store.Delivery{}, fmt.Errorf("natsbroker: deliver next to %s: %w", consumer, err)
	}
	cs, err := b.consumerFor(ctx, consumer)
	if err != nil {
		return store.Delivery{}, err
	}
	if err := b.catchUpAckWaits(ctx, cs, now); err != nil {
		return store.Delivery{}, fmt.Errorf("natsbroker: deliver next to %s: %w", consumer, err)
	}
	b.mu.Lock()
	msg, realAt := cs.held, cs.heldAt
	cs.held = nil
	b.mu.Unlock()
	if msg != nil {
		return b.recordDelivery(cs, msg, now, realAt)
	}
	msg, err = b.fetchOne(cs)
	if err != nil {
		return store.Delivery{}, err
	}
	for deadline := time.Now().Add(b.cfg.AnswerWait); msg == nil && b.redeliveryDue(cs) && time.Now().Before(deadline); {
		select {
		case <-ctx.Done():
			return store.Delivery{}, ctx.Err()
		case <-time.After(pollEvery):
		}
		if msg, err = b.fetchOne(cs); err != nil {
			return store.Delivery{}, err
		}
	}
	if msg == nil {
		return store.Delivery{}, nil
	}
	return b.recordDelivery(cs, msg, now, time.Now())
}

// fetchOne asks JetStream for one message available now; nil when none.
func (b *Broker) fetchOne(cs *consumerState) (jetstream.Msg, error) {
	if !b.nc.IsConnected() {
		return nil, b.outage("fetch for "+cs.durable, fmt.Errorf("connection %s", b.nc.Status()))
	}
	b.mu.Lock()
	cons := cs.cons // reconfigure may replace it
	b.mu.Unlock()
	batch, err := cons.FetchNoWait(1)
	if err != nil {
		return nil, b.outage("fetch for "+cs.durable, err)
	}
	var msg jetstream.Msg
	for m := range batch.Messages() {
		msg = m
	}
	if err := batch.Error(); err != nil && msg == nil {
		return nil, b.outage("fetch for "+cs.durable, err)
	}
	return msg, nil
}

// redeliveryDue says whether a delivery to cs has outlived its ack
// wait on the real clock, not past its last delivery: JetStream owes it
// again.
func (b *Broker) redeliveryDue(cs *consumerState) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, d := range b.deliveries {
		if d.key.durable == cs.durable && d.expired(time.Now()) && !d.lastDelivery(cs.maxDeliver) {
			return true
		}
	}
	return false
}

// expired: in flight (or ready) and its ack wait has run out at realNow.
func (d *deliveryRecord) expired(realNow time.Time) bool {
	return (d.State == "in_flight" || d.State == "ready") && realNow.Sub(d.realAt) >= d.ackWaitReal
}

// lastDelivery: it was delivered maxDeliver times (the consumer's
// MaxDeliver now, which JetStream checks when it would deliver again);
// JetStream gives up on it.
func (d *deliveryRecord) lastDelivery(maxDeliver int64) bool {
	return maxDeliver > 0 && d.DeliveryCount >= maxDeliver
}

// recordDelivery enters msg, which arrived at realAt, into the ledger as
// cs's delivery at now.
func (b *Broker) recordDelivery(cs *consumerState, msg jetstream.Msg, now, realAt time.Time) (store.Delivery, error) {
	meta, err := msg.Metadata()
	if err != nil {
		return store.Delivery{}, fmt.Errorf("natsbroker: read the metadata of a delivery to %s: %w", cs.durable, err)
	}
	key := deliveryKey{durable: cs.durable, seq: meta.Sequence.Stream}
	receipt := int64(meta.NumDelivered)
	b.mu.Lock()
	defer b.mu.Unlock()
	offerID := b.offerBySeq[key.seq]
	r := b.byDelivery[key]
	if r == nil {
		r = &deliveryRecord{key: key, msgs: map[int64]jetstream.Msg{}}
		r.OfferID, r.Consumer = offerID, cs.name
		b.byDelivery[key] = r
		b.deliveries = append(b.deliveries, r)
	}
	r.State, r.DeliveryCount, r.DeliveredAt = "in_flight", receipt, clock.Format(now)
	r.msgs[receipt] = msg
	r.realAt, r.scenAt, r.ackWaitReal, r.earlyNoted = realAt, now, cs.ackWait, false
	b.deliverAns = append(b.deliverAns, DeliveryAnswer{
		Consumer: cs.name, OfferID: offerID, StreamSeq: key.seq, ConsumerSeq: meta.Sequence.Consumer, NumDelivered: meta.NumDelivered,
	})
	h := msg.Headers()
	return store.Delivery{
		Found: true, OfferID: offerID, EventID: h.Get(headerEventID), Payload: string(msg.Data()),
		OfferedAt: h.Get(headerOfferedAt), Receipt: receipt,
	}, nil
}

// Ack sends a real ack, with confirmation (the double ack: a request on
// the delivery's reply subject, so the server answers), on the message of
// the delivery the receipt names, even an earlier delivery than the
// latest. Rows is 1 when JetStream reports the ack taken by its ack
// metric, which it sends only for an ack that removed a pending message,
// and 0 otherwise: no delivery with that receipt (nothing is sent), the
// message already acknowledged or given up on, or no metric within
// AnswerWait. The server's reply to the double ack is an empty message
// whether the ack took or not (measured), so it cannot tell. JetStream
// does not compare the ack's delivery count with the latest (measured: a
// late ack of delivery 1 after redelivery 2 takes), unlike the lab's
// broker, which refuses it.
func (b *Broker) Ack(ctx context.Context, consumer string, offerID, receipt int64, now time.Time) (store.Fenced, error) {
	if err := b.clock.wait(ctx, now); err != nil {
		return store.Fenced{}, fmt.Errorf("natsbroker: ack offer %d by %s: %w", offerID, consumer, err)
	}
	ans := AckAnswer{Consumer: consumer, OfferID: offerID, Receipt: receipt}
	b.mu.Lock()
	r := b.deliveryOfLocked(consumer, offerID)
	var msg jetstream.Msg
	// JetStream answers an ack that takes with an ack metric, at most once
	// per message: none is awaited for a message it already reported
	// acknowledged, or gave up on (its max-deliveries advisory).
	var answered bool
	if r != nil {
		ans.Latest, msg = r.DeliveryCount, r.msgs[receipt]
		_, acked := b.acked[r.key]
		_, gaveUp := b.maxedOut[r.key]
		answered = acked || gaveUp || r.State == "dead_lettered"
	}
	if msg == nil {
		b.ackAns = append(b.ackAns, ans)
		b.mu.Unlock()
		return store.Fenced{}, nil
	}
	key := r.key
	b.mu.Unlock()

	ans.Sent = true
	rctx, cancel := b.requestCtx(ctx)
	defer cancel()
	reply, err := b.nc.RequestWithContext(rctx, msg.Reply(), []byte("+ACK"))
	if err != nil {
		err = b.outage(fmt.Sprintf("ack offer %d by %s (delivery %d)", offerID, consumer, receipt), err)
		ans.Err = err.Error()
		b.mu.Lock()
		b.ackAns = append(b.ackAns, ans)
		b.mu.Unlock()
		return store.Fenced{}, err
	}
	ans.Reply = string(reply.Data)
	if !answered {
		ans.Took = b.awaitAnswer(ctx, func() bool { _, ok := b.acked[key]; return ok })
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ackAns = append(b.ackAns, ans)
	if !ans.Took {
		return store.Fenced{}, nil
	}
	r.State, r.AckedAt = "acked", clock.Format(now)
	return store.Fenced{Rows: 1}, nil
}

// RedeliverUnacked reports what JetStream did on its own: it redelivers
// after the ack wait without being asked. Ready counts consumer's
// deliveries whose ack wait ran out (real clock, from the ledger: the
// next fetch redelivers them); DeadLettered counts the deliveries
// JetStream gave up on after MaxDeliver, learned from its max-deliveries
// advisory, each copied into the dead-letter stream at now. A visibility
// or maximum other than the consumer's updates the consumer first (see
// [Config]).
func (b *Broker) RedeliverUnacked(ctx context.Context, consumer string, now time.Time, visibility time.Duration, maxDeliveries int64) (store.Redelivery, error) {
	var out store.Redelivery
	if err := b.clock.wait(ctx, now); err != nil {
		return out, fmt.Errorf("natsbroker: redeliver to %s: %w", consumer, err)
	}
	cs, err := b.consumerFor(ctx, consumer)
	if err != nil {
		return out, err
	}
	if err := b.reconfigure(ctx, cs, visibility, maxDeliveries); err != nil {
		return out, err
	}
	if err := b.catchUpAckWaits(ctx, cs, now); err != nil {
		return out, fmt.Errorf("natsbroker: redeliver to %s: %w", consumer, err)
	}
	realNow := time.Now()
	b.mu.Lock()
	var owed []deliveryKey
	for _, d := range b.deliveries {
		if d.key.durable != cs.durable || d.State != "in_flight" || !d.expired(realNow) {
			continue
		}
		if d.lastDelivery(cs.maxDeliver) {
			owed = append(owed, d.key)
			continue
		}
		d.State = "ready"
		out.Ready++
	}
	b.mu.Unlock()
	if len(owed) > 0 {
		if err := b.awaitMaxDeliveries(ctx, cs, owed); err != nil {
			return out, err
		}
	}
	b.mu.Lock()
	dead := map[deliveryKey]uint64{}
	for k, n := range b.maxedOut {
		if k.durable == cs.durable {
			dead[k] = n
		}
	}
	b.mu.Unlock()
	for _, k := range sortedKeys(dead) {
		if err := b.deadLetter(ctx, consumer, k, dead[k], now); err != nil {
			return out, err
		}
		out.DeadLettered++
	}
	return out, nil
}

// awaitMaxDeliveries waits for JetStream's max-deliveries advisories of
// the owed deliveries. JetStream sends the advisory from its ack-wait
// timer only for MaxDeliver 1; for more (measured with MaxDeliver 2) it
// sends it when a pull request next reaches the consumer, so unless the
// advisories are in, a pull request of one message goes first, and the
// message it may bring is held for the consumer's next DeliverNext.
func (b *Broker) awaitMaxDeliveries(ctx context.Context, cs *consumerState, owed []deliveryKey) error {
	allIn := func() bool {
		for _, k := range owed {
			if _, ok := b.maxedOut[k]; !ok {
				return false
			}
		}
		return true
	}
	b.mu.Lock()
	in, holding := allIn(), cs.held != nil
	b.mu.Unlock()
	if !in && !holding {
		msg, err := b.fetchOne(cs)
		if err != nil {
			return err
		}
		if msg != nil {
			b.mu.Lock()
			cs.held, cs.heldAt = msg, time.Now()
			b.note(fmt.Sprintf("%s: the pull that made JetStream send its max-deliveries advisory brought a message, held for the next DeliverNext", cs.durable))
			b.mu.Unlock()
		}
	}
	if !b.awaitAnswer(ctx, allIn) {
		b.mu.Lock()
		b.note(fmt.Sprintf("%s: %d deliveries past MaxDeliver without JetStream's advisory within %s", cs.durable, len(owed), b.cfg.AnswerWait))
		b.mu.Unlock()
	}
	return nil
}

// sortedKeys orders one consumer's keys by stream sequence.
func sortedKeys(m map[deliveryKey]uint64) []deliveryKey {
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b deliveryKey) int { return cmp.Compare(a.seq, b.seq) })
	return keys
}
