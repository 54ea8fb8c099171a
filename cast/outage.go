package cast

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/store"
)

// Broker outages: a real broker's server may be down when a relay sends.
// The relay still holds its claim, so it retries the send, every
// OutageRetryEvery of real time, for at most OutageRetryFor; each failed
// attempt is an event of the run (the timeline's "send failed"), never a
// lost message. The lab's own broker never has one.
const (
	OutageRetryEvery = 100 * time.Millisecond
	OutageRetryFor   = 30 * time.Second
)

// offer is r's send of sentAs to the broker, retried while the broker is
// unavailable ([store.ErrBrokerUnavailable]).
func (r *RelayInstance) offer(ctx context.Context, sentAs string) (store.Offer, error) {
	deadline := time.Now().Add(OutageRetryFor)
	for attempt := 1; ; attempt++ {
		o, err := r.p.brokerOn(r.db).Offer(ctx, sentAs, r.Claim.Payload, r.name, r.p.Clock.Now(), TickSpan(r.p.BrokerWindow))
		if err == nil || !errors.Is(err, store.ErrBrokerUnavailable) || time.Now().After(deadline) {
			return o, err
		}
		r.p.Add(lab.Event{Kind: lab.KindNote, Subject: r.Claim.EventID, Actor: r.name, Action: "send failed",
			Detail: fmt.Sprintf("%s (token %d): attempt %d: %v; the relay still holds its claim and retries in %s",
				r.Claim.EventID, r.Claim.Token, attempt, err, OutageRetryEvery)})
		r.p.mu.Lock()
		r.p.outageRetries++
		r.p.mu.Unlock()
		select {
		case <-ctx.Done():
			return o, ctx.Err()
		case <-time.After(OutageRetryEvery):
		}
	}
}

// OutageRetries counts the sends the relays retried because the broker
// was unavailable.
func (p *Pipeline) OutageRetries() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.outageRetries
}
