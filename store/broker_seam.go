package store

import (
	"context"
	"errors"
	"time"
)

// ErrBrokerUnavailable is a broker outage: a [Broker]'s error wraps it
// when the broker could not be reached (a real broker's server is down or
// did not answer in time). It is a normal event: a relay retries its send
// while it holds its claim, and counts the attempts. The lab's own broker,
// tables in the run's database, never returns it.
var ErrBrokerUnavailable = errors.New("the broker is unavailable")

// Broker is a message broker as the lessons use it: the relays offer
// events to it, the consumers take their deliveries from it and
// acknowledge them with their receipt, a dead-letter queue keeps what was
// delivered too often, and the lessons' checks read the broker's own
// record of what it accepted, dropped, delivered and dead-lettered. The
// lab's own broker ([LabBroker], a few tables on the scenario clock)
// implements it; another broker is dropped in by implementing it.
type Broker interface {
	// Offer is a relay's send of eventID: accepted, or dropped when the
	// broker accepted an offer of the same id within window before now.
	Offer(ctx context.Context, eventID, payload, offeredBy string, now time.Time, window time.Duration) (Offer, error)
	// DeliverNext delivers consumer's next undelivered offer, if any.
	DeliverNext(ctx context.Context, consumer string, now time.Time) (Delivery, error)
	// Ack acknowledges consumer's delivery of offerID, if receipt is its
	// latest delivery's.
	Ack(ctx context.Context, consumer string, offerID, receipt int64, now time.Time) (Fenced, error)
	// DeliveryOf is consumer's delivery of offerID as the broker holds it.
	DeliveryOf(ctx context.Context, consumer string, offerID int64) (BrokerDelivery, bool, error)
	// RedeliverUnacked delivers again consumer's oldest delivery left
	// unacknowledged past visibility, or moves it to the dead-letter
	// queue after maxDeliveries.
	RedeliverUnacked(ctx context.Context, consumer string, now time.Time, visibility time.Duration, maxDeliveries int64) (Redelivery, error)
	// PurgeDeadLetters drops the dead letters older than retention.
	PurgeDeadLetters(ctx context.Context, now time.Time, retention time.Duration) (int64, error)
	// ReplayDeadLetter offers a dead letter again, as Offer would.
	ReplayDeadLetter(ctx context.Context, deadLetterID int64, by string, now time.Time, window time.Duration) (Offer, bool, error)

	// Offers, Deliveries and DeadLetters are the broker's own record, in
	// arrival order; CountOffers counts the accepted (or dropped) offers
	// of one event.
	Offers(ctx context.Context) ([]BrokerOffer, error)
	Deliveries(ctx context.Context) ([]BrokerDelivery, error)
	DeadLetters(ctx context.Context) ([]DeadLetter, error)
	CountOffers(ctx context.Context, eventID string, dropped bool) (int64, error)
}

var _ Broker = (*LabBroker)(nil)
