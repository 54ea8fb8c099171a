package cast

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/outboxlab/outboxlab/failpoint"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/natsbroker"
	"github.com/outboxlab/outboxlab/store"
)

// TestJetStreamSeam drops the JetStream broker (package natsbroker) into a lesson's pipeline
// as cast's TestBrokerSeam drops a watched lab broker: a relay's own send
// reaches JetStream, a consumer instance takes the delivery and its ack
// takes, and the pipeline reads JetStream's record back. One Broker
// serves every instance's connection.
func TestJetStreamSeam(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, err := natsbroker.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	b, err := natsbroker.Dial(ctx, srv.URL(), natsbroker.Config{RunID: "seam", Window: 2 * time.Minute, Visibility: 30 * time.Second, MaxDeliveries: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	open := func(ctx context.Context, path string) (*store.DB, error) {
		cfg := store.DefaultConfig
		cfg.Ledger = &store.Ledger{}
		return store.Open(ctx, path, cfg)
	}
	var tl lab.Timeline
	p, err := NewPipeline(ctx, open, filepath.Join(t.TempDir(), "seam.db"), "", &tl, failpoint.NewPlan())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	p.NewBroker = func(*store.DB) store.Broker { return b }
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
	if _, err := relay.Send(ctx); err != nil {
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
	if offers, err := p.Broker().Offers(ctx); err != nil || len(offers) != 1 || offers[0].EventID != "e1" {
		t.Fatalf("offers %v, %v", offers, err)
	}
	if a := b.Answers(); len(a.Offers) != 1 || a.Offers[0].StreamSeq != 1 || len(a.Acks) != 1 || !a.Acks[0].Took {
		t.Fatalf("JetStream's answers %+v", a)
	}
}
