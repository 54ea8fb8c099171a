package cast

import (
	"context"
	"testing"
	"time"

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
	p := testPipeline(t, "seam")
	p.NewBroker = func(*store.DB) store.Broker { return b }
	sendAndConsume(t, p)
	if offers, err := p.Broker().Offers(ctx); err != nil || len(offers) != 1 || offers[0].EventID != "e1" {
		t.Fatalf("offers %v, %v", offers, err)
	}
	if a := b.Answers(); len(a.Offers) != 1 || a.Offers[0].StreamSeq != 1 || len(a.Acks) != 1 || !a.Acks[0].Took {
		t.Fatalf("JetStream's answers %+v", a)
	}
}
