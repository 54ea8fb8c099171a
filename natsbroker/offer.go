package natsbroker

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxlab/outboxlab/clock"
	"github.com/outboxlab/outboxlab/store"
)

// Offer publishes payload to the run's stream at scenario time now. With
// a window > 0 the message carries Nats-Msg-Id = eventID and the stream's
// duplicate window is set to the window's real duration: JetStream drops
// a resend inside it and says so in its PubAck (Duplicate), which becomes
// Offer.Dropped. With window 0 the message carries no Nats-Msg-Id, which
// is how JetStream keeps every send: its own window cannot be 0 (0 means
// its 2-minute default; the shortest is 100 ms). OfferID is the ledger's
// own number, one per offer, dropped ones included. An unreachable server
// gives an error wrapping [ErrUnavailable] within the request timeout.
func (b *Broker) Offer(ctx context.Context, eventID, payload, offeredBy string, now time.Time, window time.Duration) (store.Offer, error) {
	if err := b.clock.wait(ctx, now); err != nil {
		return store.Offer{EventID: eventID}, fmt.Errorf("natsbroker: offer %s: %w", eventID, err)
	}
	o, err := b.offer(ctx, eventID, payload, offeredBy, now, window)
	if err != nil {
		b.mu.Lock()
		b.offerAns = append(b.offerAns, OfferAnswer{EventID: eventID, MsgID: window > 0, Err: err.Error()})
		b.mu.Unlock()
	}
	return o, err
}

func (b *Broker) offer(ctx context.Context, eventID, payload, offeredBy string, now time.Time, window time.Duration) (store.Offer, error) {
	o := store.Offer{EventID: eventID}
	what := "offer " + eventID + " from " + offeredBy
	if !b.nc.IsConnected() {
		return o, b.outage(what, fmt.Errorf("connection %s", b.nc.Status()))
	}
	if window > 0 {
		if err := b.setWindow(ctx, window); err != nil {
			return o, err
		}
		if err := b.catchUpWindow(ctx, eventID, now, window); err != nil {
			return o, fmt.Errorf("natsbroker: %s: %w", what, err)
		}
	}
	msg := nats.NewMsg(b.subject)
	msg.Data = []byte(payload)
	msg.Header.Set(headerEventID, eventID)
	msg.Header.Set(headerOfferedBy, offeredBy)
	msg.Header.Set(headerOfferedAt, clock.Format(now))
	if window > 0 {
		msg.Header.Set(jetstream.MsgIDHeader, eventID)
	}
	rctx, cancel := b.requestCtx(ctx)
	defer cancel()
	ack, err := b.js.PublishMsg(rctx, msg)
	if err != nil {
		return o, b.outage(what, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	o.OfferID = int64(len(b.offers)) + 1
	o.Dropped = ack.Duplicate
	if _, known := b.offerBySeq[ack.Sequence]; ack.Duplicate && !known {
		// JetStream answers a duplicate with the sequence of the copy it
		// holds; no offer of this ledger stored it, so an earlier attempt
		// of this send did, and its acknowledgement was lost (an outage
		// the relay retried). That copy is this offer's.
		o.Dropped = false
		b.ledger.note(fmt.Sprintf("offer %d of %s: JetStream answered Duplicate with sequence %d, which no recorded offer "+
			"stored: an earlier attempt of this send stored it and its acknowledgement was lost; the copy is this offer's",
			o.OfferID, eventID, ack.Sequence))
	}
	b.offers = append(b.offers, store.BrokerOffer{
		OfferID: o.OfferID, EventID: eventID, Payload: payload, OfferedBy: offeredBy,
		OfferedAt: clock.Format(now), Dropped: o.Dropped,
	})
	b.offerMeta = append(b.offerMeta, offerMeta{seq: ack.Sequence, realAt: time.Now(), scenAt: now, msgID: window > 0})
	if !o.Dropped {
		b.offerBySeq[ack.Sequence] = o.OfferID
	}
	b.offerAns = append(b.offerAns, OfferAnswer{
		OfferID: o.OfferID, EventID: eventID, StreamSeq: ack.Sequence, Duplicate: ack.Duplicate,
		MsgID: window > 0, Window: b.window,
	})
	return o, nil
}

// deadLetter copies the message at seq of the run's stream into the
// dead-letter stream, as consumer's dead letter after deliveries, at
// scenario time now, and records it. b.mu not held.
func (b *Broker) deadLetter(ctx context.Context, consumer string, key deliveryKey, deliveries uint64, now time.Time) error {
	rctx, cancel := b.requestCtx(ctx)
	defer cancel()
	s, err := b.js.Stream(rctx, b.stream)
	if err != nil {
		return b.outage("read stream "+b.stream, err)
	}
	orig, err := s.GetMsg(rctx, key.seq)
	if err != nil {
		return b.outage(fmt.Sprintf("read message %d of %s", key.seq, b.stream), err)
	}
	msg := nats.NewMsg(b.dlqSubj)
	msg.Data = orig.Data
	for k, v := range orig.Header {
		if k != jetstream.MsgIDHeader {
			msg.Header[k] = v
		}
	}
	msg.Header.Set(headerConsumer, consumer)
	msg.Header.Set(headerStreamSeq, strconv.FormatUint(key.seq, 10))
	msg.Header.Set(headerDeliveries, strconv.FormatUint(deliveries, 10))
	msg.Header.Set(headerDeadLettered, clock.Format(now))
	ack, err := b.js.PublishMsg(rctx, msg)
	if err != nil {
		return b.outage("publish a dead letter to "+b.dlqStream, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	d := &deadLetterRecord{dlqSeq: ack.Sequence, deadAt: now}
	d.DeadLetter = store.DeadLetter{
		ID: int64(len(b.deadLetters)) + 1, OfferID: b.offerBySeq[key.seq], Consumer: consumer,
		EventID: orig.Header.Get(headerEventID), Payload: string(orig.Data),
		DeliveryCount: int64(deliveries), DeadLetteredAt: clock.Format(now),
	}
	b.deadLetters = append(b.deadLetters, d)
	if r := b.byDelivery[key]; r != nil {
		r.State = "dead_lettered"
	}
	delete(b.maxedOut, key)
	return nil
}

// PurgeDeadLetters deletes from the dead-letter stream the dead letters
// dead-lettered at or before now minus retention, on the scenario clock
// (the retention is days in the lessons: no JetStream timer is involved),
// and reports how many JetStream deleted.
func (b *Broker) PurgeDeadLetters(ctx context.Context, now time.Time, retention time.Duration) (int64, error) {
	if err := b.clock.wait(ctx, now); err != nil {
		return 0, fmt.Errorf("natsbroker: purge dead letters: %w", err)
	}
	cutoff := now.Add(-retention)
	b.mu.Lock()
	var due []*deadLetterRecord
	for _, d := range b.deadLetters {
		if !d.removed && !d.deadAt.After(cutoff) {
			due = append(due, d)
		}
	}
	b.mu.Unlock()
	var n int64
	for _, d := range due {
		if err := b.deleteDeadLetter(ctx, d); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// deleteDeadLetter deletes d's message from the dead-letter stream and
// marks it removed.
func (b *Broker) deleteDeadLetter(ctx context.Context, d *deadLetterRecord) error {
	rctx, cancel := b.requestCtx(ctx)
	defer cancel()
	s, err := b.js.Stream(rctx, b.dlqStream)
	if err != nil {
		return b.outage("read stream "+b.dlqStream, err)
	}
	if err := s.DeleteMsg(rctx, d.dlqSeq); err != nil {
		return b.outage(fmt.Sprintf("delete dead letter %d (message %d of %s)", d.ID, d.dlqSeq, b.dlqStream), err)
	}
	b.mu.Lock()
	d.removed = true
	b.mu.Unlock()
	return nil
}

// ReplayDeadLetter is an operator's redrive: it reads the dead letter
// back from the dead-letter stream, offers it again as [Broker.Offer]
// would (same Nats-Msg-Id, so JetStream's duplicate window applies), and
// deletes it from the dead-letter stream. ok is false when the dead
// letter is gone (purged or replayed).
func (b *Broker) ReplayDeadLetter(ctx context.Context, deadLetterID int64, by string, now time.Time, window time.Duration) (store.Offer, bool, error) {
	b.mu.Lock()
	var d *deadLetterRecord
	if deadLetterID >= 1 && deadLetterID <= int64(len(b.deadLetters)) && !b.deadLetters[deadLetterID-1].removed {
		d = b.deadLetters[deadLetterID-1]
	}
	b.mu.Unlock()
	if d == nil {
		return store.Offer{}, false, nil
	}
	rctx, cancel := b.requestCtx(ctx)
	defer cancel()
	s, err := b.js.Stream(rctx, b.dlqStream)
	if err != nil {
		return store.Offer{}, false, b.outage("read stream "+b.dlqStream, err)
	}
	msg, err := s.GetMsg(rctx, d.dlqSeq)
	if err != nil {
		return store.Offer{}, false, b.outage(fmt.Sprintf("read dead letter %d", deadLetterID), err)
	}
	o, err := b.Offer(ctx, msg.Header.Get(headerEventID), string(msg.Data), by, now, window)
	if err != nil {
		return o, false, err
	}
	if err := b.deleteDeadLetter(ctx, d); err != nil {
		return o, true, err
	}
	return o, true, nil
}
