package natsbroker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// consumerState is one lesson consumer's durable pull consumer.
type consumerState struct {
	name       string // the lesson's name
	durable    string
	cons       jetstream.Consumer
	ackWait    time.Duration // real
	visibility time.Duration // scenario
	maxDeliver int64         // the lesson's; 0: no limit
	// held is a message RedeliverUnacked's pull brought, kept for the
	// next DeliverNext, and when it arrived (its ack wait runs from then).
	held   jetstream.Msg
	heldAt time.Time
}

// durableName is the JetStream durable name of a lesson consumer: its
// name with every character JetStream refuses in a name ('.', '*', '>',
// whitespace, path separators, ...) replaced by '_'.
func durableName(consumer string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		}
		return '_'
	}, consumer)
}

// consumerConfig is the durable pull consumer of the lesson's consumer:
// every offer from the start, explicit acks, AckWait the visibility
// timeout's real duration, MaxDeliver the lesson's maximum (-1: none),
// and an ack metric for every ack that takes (SampleFrequency 100%).
func (b *Broker) consumerConfig(durable string, visibility time.Duration, maxDeliveries int64) jetstream.ConsumerConfig {
	maxDeliver := -1
	if maxDeliveries > 0 {
		maxDeliver = int(maxDeliveries)
	}
	return jetstream.ConsumerConfig{
		Durable:         durable,
		Description:     "outboxlab consumer " + durable,
		DeliverPolicy:   jetstream.DeliverAllPolicy,
		AckPolicy:       jetstream.AckExplicitPolicy,
		AckWait:         max(b.clock.current().Real(visibility), time.Millisecond),
		MaxDeliver:      maxDeliver,
		FilterSubject:   b.subject,
		SampleFrequency: "100%",
	}
}

// consumerFor returns the lesson consumer's durable consumer, created (or
// updated) with the configured visibility and maximum deliveries on first
// use, by one caller at a time: a caller that waited for another's create
// takes the consumer it made.
func (b *Broker) consumerFor(ctx context.Context, consumer string) (*consumerState, error) {
	b.mu.Lock()
	cs := b.consumer[consumer]
	b.mu.Unlock()
	if cs != nil {
		return cs, nil
	}
	if consumer == "" {
		return nil, errors.New("natsbroker: no consumer name")
	}
	durable := durableName(consumer)
	b.creating.Lock()
	defer b.creating.Unlock()
	b.mu.Lock()
	if cs := b.consumer[consumer]; cs != nil { // another caller made it while this one waited
		b.mu.Unlock()
		return cs, nil
	}
	for name, other := range b.consumer {
		if other.durable == durable && name != consumer {
			b.mu.Unlock()
			return nil, fmt.Errorf("natsbroker: consumers %q and %q share the durable name %s", name, consumer, durable)
		}
	}
	b.mu.Unlock()
	cc := b.consumerConfig(durable, b.cfg.Visibility, b.cfg.MaxDeliveries)
	rctx, cancel := b.requestCtx(ctx)
	defer cancel()
	cons, err := b.js.CreateOrUpdateConsumer(rctx, b.stream, cc)
	if err != nil {
		return nil, b.outage("create consumer "+durable, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	cs = &consumerState{name: consumer, durable: durable, cons: cons, ackWait: cc.AckWait,
		visibility: b.cfg.Visibility, maxDeliver: b.cfg.MaxDeliveries}
	b.consumer[consumer] = cs
	return cs, nil
}

// reconfigure updates the consumer when a call names another visibility
// or maximum than it runs with; JetStream applies them from then on.
func (b *Broker) reconfigure(ctx context.Context, cs *consumerState, visibility time.Duration, maxDeliveries int64) error {
	b.mu.Lock()
	same := cs.visibility == visibility && cs.maxDeliver == maxDeliveries
	b.mu.Unlock()
	if same || visibility <= 0 {
		return nil
	}
	b.clock.cover(visibility)
	cc := b.consumerConfig(cs.durable, visibility, maxDeliveries)
	rctx, cancel := b.requestCtx(ctx)
	defer cancel()
	cons, err := b.js.CreateOrUpdateConsumer(rctx, b.stream, cc)
	if err != nil {
		return b.outage("update consumer "+cs.durable, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.note(fmt.Sprintf("consumer %s updated during the run: AckWait %s real (visibility %s), MaxDeliver %d (was %s, %d)",
		cs.durable, cc.AckWait, visibility, maxDeliveries, cs.visibility, cs.maxDeliver))
	cs.cons, cs.ackWait, cs.visibility, cs.maxDeliver = cons, cc.AckWait, visibility, maxDeliveries
	return nil
}

// advisory is the part of JetStream's max-deliveries advisory and ack
// metric the adapter reads.
type advisory struct {
	Type       string `json:"type"`
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
}

// The subjects of JetStream's max-deliveries advisories and ack metrics
// for a stream's consumers.
const (
	maxDeliveriesSubject = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES."
	ackMetricSubject     = "$JS.EVENT.METRIC.CONSUMER.ACK."
)

// subscribeAdvisories listens to the max-deliveries advisories and the
// ack metrics of the run's consumers, and waits until the server has the
// subscriptions.
func (b *Broker) subscribeAdvisories() error {
	for _, s := range []struct {
		subject, kind string
	}{{maxDeliveriesSubject + b.stream + ".*", "max_deliveries"}, {ackMetricSubject + b.stream + ".*", "ack"}} {
		kind := s.kind
		sub, err := b.nc.Subscribe(s.subject, func(m *nats.Msg) { b.onAdvisory(kind, m.Data) })
		if err != nil {
			return b.outage("subscribe to "+s.subject, err)
		}
		b.subs = append(b.subs, sub)
	}
	if err := b.nc.FlushTimeout(b.cfg.RequestTimeout); err != nil {
		return b.outage("subscribe to the advisories", err)
	}
	return nil
}

// onAdvisory records an advisory and wakes whoever waits for one.
func (b *Broker) onAdvisory(kind string, data []byte) {
	var a advisory
	if err := json.Unmarshal(data, &a); err != nil || a.Stream != b.stream {
		return
	}
	key := deliveryKey{durable: a.Consumer, seq: a.StreamSeq}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advisories = append(b.advisories, Advisory{Kind: kind, Consumer: a.Consumer, StreamSeq: a.StreamSeq, Deliveries: a.Deliveries})
	switch kind {
	case "ack":
		b.acked[key] = a.Deliveries
		b.lateAckLocked(key)
	case "max_deliveries":
		b.maxedOut[key] = a.Deliveries
	}
	close(b.changed)
	b.changed = make(chan struct{})
}

// awaitAnswer waits, at most AnswerWait (real), until done (called with
// b.mu held) says JetStream's answer arrived; it reports whether it did.
func (b *Broker) awaitAnswer(ctx context.Context, done func() bool) bool {
	deadline := time.NewTimer(b.cfg.AnswerWait)
	defer deadline.Stop()
	for {
		b.mu.Lock()
		ok, changed := done(), b.changed
		b.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-changed:
		case <-deadline.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// lateAckLocked corrects the ledger when JetStream's ack metric for key
// arrives after the adapter stopped waiting for it: the latest ack sent
// for that message, recorded as not taken, took after all, and its
// delivery is acked. The caller was already answered 0 rows, so the
// adapter notes it (b.mu held).
func (b *Broker) lateAckLocked(key deliveryKey) {
	offerID, ok := b.offerBySeq[key.seq]
	if !ok {
		return
	}
	for i := len(b.ackAns) - 1; i >= 0; i-- {
		a := &b.ackAns[i]
		if a.OfferID != offerID || durableName(a.Consumer) != key.durable || !a.Sent || a.Err != "" {
			continue
		}
		if a.Took {
			return
		}
		a.Took = true
		if r := b.deliveryOfLocked(a.Consumer, offerID); r != nil && r.State != "acked" {
			r.State = "acked"
		}
		b.ledger.note(fmt.Sprintf("%s's ack of offer %d (receipt %d) took, but JetStream's ack metric came after the adapter's "+
			"%s wait: the ack was answered 0 rows", a.Consumer, offerID, a.Receipt, b.cfg.AnswerWait))
		return
	}
}
