package cast

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/outboxlab/outboxlab/failpoint"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/store"
)

// TestBrokerStateOf reads a group's moves from the broker's rows: an offer
// it never received or one ready again is deliverable; a dropped offer and
// another group's deliveries are not its business.
func TestBrokerStateOf(t *testing.T) {
	t.Parallel()
	offers := []store.BrokerOffer{{OfferID: 1}, {OfferID: 2}, {OfferID: 3, Dropped: true}}
	tests := []struct {
		name        string
		ds          []store.BrokerDelivery
		deliverable bool
		inFlight    int
	}{
		{"NothingDelivered", nil, true, 0},
		{"AllAcked", []store.BrokerDelivery{{OfferID: 1, Consumer: "g", State: "acked"}, {OfferID: 2, Consumer: "g", State: "acked"}}, false, 0},
		{"OneInFlight", []store.BrokerDelivery{{OfferID: 1, Consumer: "g", State: "acked"}, {OfferID: 2, Consumer: "g", State: "in_flight"}}, false, 1},
		{"ReadyAgain", []store.BrokerDelivery{{OfferID: 1, Consumer: "g", State: "ready"}, {OfferID: 2, Consumer: "g", State: "dead_lettered"}}, true, 0},
		{"OtherGroup", []store.BrokerDelivery{{OfferID: 1, Consumer: "h", State: "in_flight"}, {OfferID: 2, Consumer: "h", State: "acked"}}, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := BrokerStateOf("g", offers, tt.ds)
			if s.Deliverable != tt.deliverable || len(s.InFlight) != tt.inFlight {
				t.Fatalf("deliverable %v, in flight %d; want %v, %d", s.Deliverable, len(s.InFlight), tt.deliverable, tt.inFlight)
			}
		})
	}
}

// TestConsumerSteps drives a consumer one step at a time, as the explorer
// does: a lost ack leaves the delivery in flight, the drain redelivers it,
// and the inbox design turns the second credit away.
func TestConsumerSteps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := testPipeline(t, "steps")
	if err := p.OpenAccount(ctx, CreditService, "ACC-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Broker().Offer(ctx, "e1", `{"account":"ACC-1","credit_cents":1000}`, RelayA, p.Clock.Now(), 0); err != nil {
		t.Fatal(err)
	}
	c, err := p.OpenConsumer(ctx, "Consumer-1", CreditService, InboxDesign)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var applied []bool
	take := func(ack bool) {
		if d, err := c.Deliver(ctx); err != nil || !d.Found {
			t.Fatalf("deliver: found %v, %v", d.Found, err)
		}
		pl, err := c.HeldPayload()
		if err != nil {
			t.Fatal(err)
		}
		_, e, err := c.Credit(ctx, pl)
		if err != nil {
			t.Fatal(err)
		}
		applied = append(applied, e.Applied)
		if ack {
			if rows, err := c.Ack(ctx); err != nil || rows != 1 {
				t.Fatalf("ack: %d rows, %v", rows, err)
			}
		}
		c.RecordAck(nil, "", "test")
	}
	take(false) // the ack is lost
	if c.Held().Found {
		t.Fatal("the consumer still holds a delivery after its ack was recorded")
	}
	err = p.DrainConsumerBy(ctx, CreditService, func(m ConsumerMove) error {
		if m == Take {
			take(true)
			return nil
		}
		_, _, err := p.RedeliverInFlight(ctx, CreditService, VisibilityTimeout, 0)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(applied) != 2 || !applied[0] || applied[1] {
		t.Fatalf("credits applied %v, want [true false]", applied)
	}
	if credit, err := p.Count(ctx, store.AccountCredit.SQL, AccountID(CreditService, "ACC-1")); err != nil || credit != 1000 {
		t.Fatalf("credit %d, %v; want 1000", credit, err)
	}
	if p.Now() != VisibilityTimeout {
		t.Fatalf("clock at %d after the redelivery, want %d", p.Now(), VisibilityTimeout)
	}
}

// testPipeline is a fresh pipeline on a database named name in the test's
// folder, recording into a ledger of its own, closed when the test ends.
func testPipeline(t *testing.T, name string) *Pipeline {
	t.Helper()
	open := func(ctx context.Context, path string) (*store.DB, error) {
		cfg := store.DefaultConfig
		cfg.Ledger = &store.Ledger{}
		return store.Open(ctx, path, cfg)
	}
	var tl lab.Timeline
	p, err := NewPipeline(context.Background(), open, filepath.Join(t.TempDir(), name+".db"), "", &tl, failpoint.NewPlan())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}
