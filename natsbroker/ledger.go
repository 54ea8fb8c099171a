package natsbroker

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxlab/outboxlab/store"
)

// OfferAnswer is JetStream's answer to one offer: the PubAck.
type OfferAnswer struct {
	OfferID int64 // the ledger's number (0 when the offer failed)
	EventID string
	// StreamSeq is the PubAck's stream sequence: the message's own, or on a
	// duplicate the sequence of the message it duplicates.
	StreamSeq uint64
	// Duplicate is the PubAck's Duplicate flag.
	Duplicate bool
	// MsgID is true when the offer carried Nats-Msg-Id (a window > 0).
	MsgID bool
	// Window is the stream's duplicate window (real) at the offer.
	Window time.Duration
	// Err is the error text when the offer failed.
	Err string
}

// DeliveryAnswer is one message JetStream handed a consumer.
type DeliveryAnswer struct {
	Consumer     string
	OfferID      int64
	StreamSeq    uint64
	ConsumerSeq  uint64
	NumDelivered uint64 // the message metadata's delivery count: the receipt
}

// AckAnswer is what one Ack did.
type AckAnswer struct {
	Consumer string
	OfferID  int64
	Receipt  int64 // the delivery the ack named
	Latest   int64 // the latest delivery the adapter had seen then
	// Sent is false when no delivery had that receipt: nothing was sent.
	Sent bool
	// Took is true when JetStream reported the ack taken, by its ack
	// metric (SampleFrequency 100%), which it sends only for an ack that
	// removed a pending message.
	Took bool
	// Reply is the server's reply to the double ack ("" is its empty +OK).
	Reply string
	Err   string
}

// Advisory is one advisory or metric JetStream sent about a consumer.
type Advisory struct {
	Kind       string // "max_deliveries" or "ack"
	Consumer   string // the durable consumer's name
	StreamSeq  uint64
	Deliveries uint64
}

// ledger is the adapter's record of JetStream's answers, under Broker.mu.
type ledger struct {
	offers      []store.BrokerOffer
	offerMeta   []offerMeta      // by OfferID-1
	offerBySeq  map[uint64]int64 // stream sequence → the accepted offer
	deliveries  []*deliveryRecord
	byDelivery  map[deliveryKey]*deliveryRecord
	deadLetters []*deadLetterRecord
	offerAns    []OfferAnswer
	deliverAns  []DeliveryAnswer
	ackAns      []AckAnswer
	advisories  []Advisory
	acked       map[deliveryKey]uint64 // ack metrics: the delivery the ack named
	maxedOut    map[deliveryKey]uint64 // max-deliveries advisories not yet dead-lettered
	notes       []string
}

func newLedger() ledger {
	return ledger{
		offerBySeq: map[uint64]int64{}, byDelivery: map[deliveryKey]*deliveryRecord{},
		acked: map[deliveryKey]uint64{}, maxedOut: map[deliveryKey]uint64{},
	}
}

// offerMeta is what the ledger keeps of an offer beside its row.
type offerMeta struct {
	seq    uint64    // the PubAck's stream sequence
	realAt time.Time // when the PubAck came
	scenAt time.Time // the offer's scenario instant
	msgID  bool      // it carried Nats-Msg-Id
}

// deliveryKey names one message of one durable consumer.
type deliveryKey struct {
	durable string
	seq     uint64
}

// deliveryRecord is one consumer's delivery of one message: the row the
// lab's broker_deliveries would hold, and each delivery's message, kept to
// ack that very delivery.
type deliveryRecord struct {
	store.BrokerDelivery
	key         deliveryKey
	msgs        map[int64]jetstream.Msg // by delivery count
	realAt      time.Time               // when the latest delivery arrived
	scenAt      time.Time               // its scenario instant
	ackWaitReal time.Duration           // the consumer's AckWait then
	earlyNoted  bool                    // its ack wait ran out early, noted
}

// deadLetterRecord is a dead letter and where it sits in the DLQ stream.
type deadLetterRecord struct {
	store.DeadLetter
	dlqSeq  uint64
	deadAt  time.Time // scenario time
	removed bool      // purged or replayed
}

func (l *ledger) note(s string) { l.notes = append(l.notes, s) }

// Answers is everything JetStream answered, for the reports.
type Answers struct {
	Offers     []OfferAnswer
	Deliveries []DeliveryAnswer
	Acks       []AckAnswer
	Advisories []Advisory
	// Notes are what the adapter changed on the server during the run
	// (duplicate window, consumer config).
	Notes   []string
	Timings Timings
}

// Timings are the real durations the run used.
type Timings struct {
	Scale           time.Duration // real per scenario second
	Jump            time.Duration // real step beyond the threshold's for a compressed step
	Threshold       time.Duration // scenario: longest step mapped linearly
	ThresholdReal   time.Duration
	Window          time.Duration // scenario: the window in force
	WindowReal      time.Duration // the stream's duplicate window
	Visibility      time.Duration // scenario: the configured visibility timeout
	AckWaitReal     time.Duration // the consumers' AckWait
	CompressedJumps int           // scenario steps compressed so far
}

// Answers returns a copy of JetStream's answers so far.
func (b *Broker) Answers() Answers {
	t := b.Timings()
	b.mu.Lock()
	defer b.mu.Unlock()
	return Answers{
		Offers:     append([]OfferAnswer(nil), b.offerAns...),
		Deliveries: append([]DeliveryAnswer(nil), b.deliverAns...),
		Acks:       append([]AckAnswer(nil), b.ackAns...),
		Advisories: append([]Advisory(nil), b.advisories...),
		Notes:      append([]string(nil), b.notes...),
		Timings:    t,
	}
}

// Timings are the real durations in force, e.g. for "JetStream's
// duplicate window ran as 1.2 s real for the lesson's 2 min".
func (b *Broker) Timings() Timings {
	tm := b.clock.current()
	b.mu.Lock()
	defer b.mu.Unlock()
	return Timings{
		Scale: tm.Scale, Jump: tm.Jump, Threshold: tm.Threshold, ThresholdReal: tm.Real(tm.Threshold),
		Window: b.scenWin, WindowReal: b.window,
		Visibility: b.cfg.Visibility, AckWaitReal: tm.Real(b.cfg.Visibility),
		CompressedJumps: b.clock.compressedJumps(),
	}
}

// Offers returns every offer, accepted or dropped, in the ledger's order.
func (b *Broker) Offers(context.Context) ([]store.BrokerOffer, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]store.BrokerOffer(nil), b.offers...), nil
}

// Deliveries returns each consumer's delivery of each offer, in the order
// of their first delivery.
func (b *Broker) Deliveries(context.Context) ([]store.BrokerDelivery, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]store.BrokerDelivery, 0, len(b.deliveries))
	for _, d := range b.deliveries {
		out = append(out, d.BrokerDelivery)
	}
	return out, nil
}

// DeadLetters returns the dead letters still in the dead-letter stream.
func (b *Broker) DeadLetters(context.Context) ([]store.DeadLetter, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []store.DeadLetter
	for _, d := range b.deadLetters {
		if !d.removed {
			out = append(out, d.DeadLetter)
		}
	}
	return out, nil
}

// CountOffers counts the offers of eventID JetStream accepted, or with
// dropped those it reported duplicates.
func (b *Broker) CountOffers(_ context.Context, eventID string, dropped bool) (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var n int64
	for _, o := range b.offers {
		if o.EventID == eventID && o.Dropped == dropped {
			n++
		}
	}
	return n, nil
}

// DeliveryOf is consumer's delivery of offerID as the ledger holds it.
func (b *Broker) DeliveryOf(_ context.Context, consumer string, offerID int64) (store.BrokerDelivery, bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if d := b.deliveryOfLocked(consumer, offerID); d != nil {
		return d.BrokerDelivery, true, nil
	}
	return store.BrokerDelivery{OfferID: offerID, Consumer: consumer}, false, nil
}

// deliveryOfLocked finds consumer's delivery of offerID. b.mu held.
func (b *Broker) deliveryOfLocked(consumer string, offerID int64) *deliveryRecord {
	if offerID < 1 || offerID > int64(len(b.offerMeta)) || b.offers[offerID-1].Dropped {
		return nil
	}
	return b.byDelivery[deliveryKey{durable: durableName(consumer), seq: b.offerMeta[offerID-1].seq}]
}
