package cast

import (
	"context"
	"fmt"

	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/store"
)

// This file holds recovery: the drains that publish every committed event
// and deliver every offer once the scripted instances have stopped. A drain
// reads durable state before each move and hands the move to its caller:
// DrainRelays and DrainConsumer make each move in one go, the explorer
// makes it one recorded step at a time.

// OutboxState is what durable outbox state says a relay can do now.
type OutboxState struct {
	Claimable bool // an unpublished event with no live lease
	LiveLease bool // an unpublished event with a live lease
}

// OutboxStateOf reads it from the outbox rows, at the pipeline's clock.
func (p *Pipeline) OutboxStateOf(evs []store.Event) OutboxState {
	var s OutboxState
	now := p.Now()
	for _, e := range evs {
		if e.Delivered {
			continue
		}
		// The claim's predicate: lease_until IS NULL OR lease_until <= now
		// (a NULL lease reads as 0).
		if e.LeaseUntil <= now {
			s.Claimable = true
		} else {
			s.LiveLease = true
		}
	}
	return s
}

// ReadOutboxState reads it on the observer's connection.
func (p *Pipeline) ReadOutboxState(ctx context.Context) (OutboxState, error) {
	evs, err := store.NewRelay(p.Audit, store.RelayLesson).Events(ctx)
	return p.OutboxStateOf(evs), err
}

// BrokerState is what durable broker state says a consumer group can do now.
type BrokerState struct {
	// Deliverable: an accepted offer the group never received, or one ready again.
	Deliverable bool
	// InFlight are the group's unacknowledged deliveries.
	InFlight []store.BrokerDelivery
}

// BrokerStateOf reads group's state from the broker's rows.
func BrokerStateOf(group string, offers []store.BrokerOffer, ds []store.BrokerDelivery) BrokerState {
	var s BrokerState
	state := map[int64]string{}
	for _, d := range ds {
		if d.Consumer != group {
			continue
		}
		state[d.OfferID] = d.State
		if d.State == "in_flight" {
			s.InFlight = append(s.InFlight, d)
		}
	}
	for _, o := range offers {
		if st, ok := state[o.OfferID]; !o.Dropped && (!ok || st == "ready") {
			s.Deliverable = true
		}
	}
	return s
}

// ReadBrokerState reads group's state on the observer's connection.
func (p *Pipeline) ReadBrokerState(ctx context.Context, group string) (BrokerState, error) {
	offers, err := p.Broker().Offers(ctx)
	if err != nil {
		return BrokerState{}, err
	}
	ds, err := p.Broker().Deliveries(ctx)
	return BrokerStateOf(group, offers, ds), err
}

// RelayMove is a relay drain's next move, read from durable state.
type RelayMove int

// The moves of a relay drain.
const (
	// Publish: an event is claimable; claim, send and complete it.
	Publish RelayMove = iota + 1
	// Expire: only live leases remain; let the clock run them out.
	Expire
)

// maxDrainMoves bounds a drain: more moves than this is a bug.
const maxDrainMoves = 1000

// DrainRelaysBy is recovery, one move at a time: while durable state shows
// a claimable event, do(Publish); while only live leases remain,
// do(Expire). It returns once every committed event is published.
func (p *Pipeline) DrainRelaysBy(ctx context.Context, do func(RelayMove) error) error {
	for range maxDrainMoves {
		s, err := p.ReadOutboxState(ctx)
		if err != nil {
			return err
		}
		move := Publish
		switch {
		case s.Claimable:
		case s.LiveLease:
			move = Expire
		default:
			return nil
		}
		if err := do(move); err != nil {
			return err
		}
	}
	return fmt.Errorf("cast: the relays did not drain the outbox")
}

// DrainRelays is recovery: a fresh relay instance runs until every
// committed event is published, letting the leases of stalled or crashed
// owners expire on the clock first.
func (p *Pipeline) DrainRelays(ctx context.Context, name string) error {
	r, err := p.StartRelay(ctx, name)
	if err != nil {
		return err
	}
	defer r.Close(ctx)
	return p.DrainRelaysBy(ctx, func(m RelayMove) error {
		if m == Expire {
			_, err := p.ExpireLeases(ctx)
			return err
		}
		_, err := r.RunOnce(ctx)
		return err
	})
}

// ConsumerMove is a consumer drain's next move, read from durable state.
type ConsumerMove int

// The moves of a consumer drain.
const (
	// Take: an offer is deliverable; deliver, apply and acknowledge it.
	Take ConsumerMove = iota + 1
	// Redeliver: only in-flight deliveries remain; let their visibility
	// timeout run out (see [Pipeline.RedeliverInFlight]).
	Redeliver
)

// DrainConsumerBy is a consumer group's recovery, one move at a time:
// while durable state shows an offer deliverable to group, do(Take); while
// only in-flight deliveries remain, do(Redeliver). It returns once the
// broker has nothing left for group.
func (p *Pipeline) DrainConsumerBy(ctx context.Context, group string, do func(ConsumerMove) error) error {
	for range maxDrainMoves {
		s, err := p.ReadBrokerState(ctx, group)
		if err != nil {
			return err
		}
		move := Take
		switch {
		case s.Deliverable:
		case len(s.InFlight) > 0:
			move = Redeliver
		default:
			return nil
		}
		if err := do(move); err != nil {
			return err
		}
	}
	return fmt.Errorf("cast: consumer group %s did not drain its deliveries", group)
}

// RedeliverInFlight moves the clock until the visibility timeout
// (visibility ticks) of every in-flight delivery of group has run out; the
// broker then makes them ready again, or dead-letters those delivered
// maxDeliveries times (0 means no limit). It returns how many were in
// flight; with none, it does nothing.
func (p *Pipeline) RedeliverInFlight(ctx context.Context, group string, visibility, maxDeliveries int64) (int, store.Redelivery, error) {
	s, err := p.ReadBrokerState(ctx, group)
	if err != nil || len(s.InFlight) == 0 {
		return 0, store.Redelivery{}, err
	}
	for _, d := range s.InFlight {
		at, err := TickOfClock(d.DeliveredAt)
		if err != nil {
			return 0, store.Redelivery{}, err
		}
		p.SetNow(at + visibility)
	}
	r, err := p.Broker().RedeliverUnacked(ctx, group, p.Clock.Now(), TickSpan(visibility), maxDeliveries)
	return len(s.InFlight), r, err
}

// DrainConsumer has c take every delivery the broker has for its group;
// while deliveries stay unacknowledged, it lets their visibility timeout run
// out on the clock and the broker redeliver them (or dead-letter them after
// maxDeliveries; 0 means no limit).
func (p *Pipeline) DrainConsumer(ctx context.Context, c Consumer, maxDeliveries int64) error {
	return p.DrainConsumerBy(ctx, c.Group(), func(m ConsumerMove) error {
		if m == Take {
			_, err := c.ConsumeNext(ctx)
			return err
		}
		n, r, err := p.RedeliverInFlight(ctx, c.Group(), VisibilityTimeout, maxDeliveries)
		if err != nil {
			return err
		}
		p.Event(lab.KindNote, "broker", "redeliver", fmt.Sprintf("%s: visibility timeout (%s) ran out on %d unacknowledged deliveries: %d ready again, %d dead-lettered",
			c.Group(), DurationText(VisibilityTimeout), n, r.Ready, r.DeadLettered))
		return nil
	})
}
