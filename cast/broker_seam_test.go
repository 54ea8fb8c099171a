package cast

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/outboxlab/outboxlab/store"
)

// watchedBroker is a broker dropped into the seam: the lab's own, with
// every call the pipeline makes of it counted by name.
type watchedBroker struct {
	store.Broker
	mu    *sync.Mutex
	calls map[string]int
}

func (w watchedBroker) saw(call string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls[call]++
}

func (w watchedBroker) Offer(ctx context.Context, eventID, payload, by string, now time.Time, window time.Duration) (store.Offer, error) {
	w.saw("Offer")
	return w.Broker.Offer(ctx, eventID, payload, by, now, window)
}

func (w watchedBroker) DeliverNext(ctx context.Context, consumer string, now time.Time) (store.Delivery, error) {
	w.saw("DeliverNext")
	return w.Broker.DeliverNext(ctx, consumer, now)
}

func (w watchedBroker) Ack(ctx context.Context, consumer string, offerID, receipt int64, now time.Time) (store.Fenced, error) {
	w.saw("Ack")
	return w.Broker.Ack(ctx, consumer, offerID, receipt, now)
}

func (w watchedBroker) Offers(ctx context.Context) ([]store.BrokerOffer, error) {
	w.saw("Offers")
	return w.Broker.Offers(ctx)
}

// sendAndConsume plays one event through p's broker: e1 committed,
// Relay-A's claim and its own send, then Consumer-1's delivery and its ack,
// which must take.
func sendAndConsume(t *testing.T, p *Pipeline) {
	t.Helper()
	ctx := context.Background()
	if err := p.OpenAccount(ctx, CreditService, "ACC-1"); err != nil {
		t.Fatal(err)
	}
	if err := p.CommitCredit(ctx, "e1", "ACC-1", 1000); err != nil {
		t.Fatal(err)
	}
	relay, err := p.OpenRelay(ctx, RelayA)
	if err != nil {
		t.Fatal(err)
	}
	defer relay.Close(ctx)
	if outcome, err := relay.ClaimNext(ctx); err != nil || outcome != store.Claimed {
		t.Fatalf("claim: %v, %v", outcome, err)
	}
	if _, err := relay.Send(ctx); err != nil { // the relay's own send, on its own connection
		t.Fatal(err)
	}
	c, err := p.OpenConsumer(ctx, "Consumer-1", CreditService, InboxDesign)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if d, err := c.Deliver(ctx); err != nil || !d.Found {
		t.Fatalf("deliver: found %v, %v", d.Found, err)
	}
	if rows, err := c.Ack(ctx); err != nil || rows != 1 {
		t.Fatalf("ack: %d rows, %v", rows, err)
	}
}

// TestBrokerSeam: a pipeline whose NewBroker is set sends (a relay's own
// send), delivers, acknowledges and reads the broker's record through it
// alone, on each instance's own connection, so a second broker is dropped
// in there; and it refuses to hand the seam to a child process.
func TestBrokerSeam(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := testPipeline(t, "seam")
	w := watchedBroker{mu: &sync.Mutex{}, calls: map[string]int{}}
	p.NewBroker = func(db *store.DB) store.Broker {
		w := w
		w.Broker = store.NewBroker(db, p.sql().Broker)
		return w
	}
	sendAndConsume(t, p)
	if offers, err := p.Broker().Offers(ctx); err != nil || len(offers) != 1 {
		t.Fatalf("offers %v, %v", offers, err)
	}
	for _, call := range []string{"Offer", "DeliverNext", "Ack", "Offers"} {
		if w.calls[call] != 1 {
			t.Errorf("the dropped-in broker saw %s %d times, want 1 (calls: %v)", call, w.calls[call], w.calls)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("Settings handed a pipeline with a dropped-in broker to a child process")
		}
	}()
	p.Settings()
}
