package cast

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/natsbroker"
	"github.com/outboxlab/outboxlab/store"
)

// TestJetStreamOutage stops the embedded NATS server in the middle of a
// run: the relay's send of e2 fails as a broker outage and is retried,
// each attempt an event of the run, until the server is back on its port
// and store; then e2 is sent and completed, and JetStream acknowledged a
// stored copy of every committed event (the broker's record, sequences 1
// and 2): nothing was lost.
func TestJetStreamOutage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	srv, err := natsbroker.Start(filepath.Join(dir, "jetstream"))
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			srv.Shutdown()
		}
	})
	b, err := natsbroker.Dial(ctx, srv.URL(), natsbroker.Config{RunID: "outage", Visibility: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	p := testPipeline(t, "outage")
	p.UseJetStream(b, "a test's embedded server")
	for _, e := range []string{"e1", "e2"} {
		if err := p.CommitCredit(ctx, e, "ACC-1", 1000); err != nil {
			t.Fatal(err)
		}
	}
	relay, err := p.OpenRelay(ctx, RelayA)
	if err != nil {
		t.Fatal(err)
	}
	defer relay.Close(ctx)
	publish := func() {
		t.Helper()
		if outcome, err := relay.ClaimNext(ctx); err != nil || outcome != store.Claimed {
			t.Fatalf("claim: %v, %v", outcome, err)
		}
		if acked, err := relay.Send(ctx); err != nil || !acked {
			t.Fatalf("send of %s: acked %v, %v", relay.Claim.EventID, acked, err)
		}
		if rows, err := relay.Complete(ctx); err != nil || rows != 1 {
			t.Fatalf("complete of %s: %d rows, %v", relay.Claim.EventID, rows, err)
		}
	}
	publish() // e1, with the server up
	port, storeDir := srv.Port(), filepath.Join(dir, "jetstream")
	srv.Shutdown()
	stopped = true
	type start struct {
		srv *natsbroker.Server
		err error
	}
	restarted := make(chan start, 1)
	go func() {
		time.Sleep(3 * OutageRetryEvery)
		s, err := natsbroker.StartOnPort(storeDir, port)
		restarted <- start{s, err}
	}()
	publish() // e2: its sends fail until the server is back
	again := <-restarted
	if again.err != nil {
		t.Fatal(again.err)
	}
	t.Cleanup(again.srv.Shutdown)
	var r lab.Result
	jetStreamReport(&r, []*Pipeline{p})
	if p.OutageRetries() == 0 || rowsOf(r, "JetStream: sends retried during an outage") != 1 {
		t.Errorf("%d sends retried, reported %v: the server's stop went unseen or unsaid", p.OutageRetries(), r.Tables)
	}
	if !slices.ContainsFunc(p.Timeline.Events(), func(e lab.Event) bool { return e.Action == "send failed" && strings.Contains(e.Detail, "unavailable") }) {
		t.Error("the run's events record no failed send")
	}
	offers, err := p.Broker().Offers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var sent []string
	for _, o := range offers {
		if !o.Dropped {
			sent = append(sent, o.EventID)
		}
	}
	if strings.Join(sent, ",") != "e1,e2" {
		t.Errorf("JetStream accepted %v, want e1 and e2: a committed event was lost", sent)
	}
	if a := b.Answers(); len(a.Offers) < 2 || a.Offers[len(a.Offers)-1].StreamSeq != 2 {
		t.Errorf("the stream's sequences: %+v, want e2 stored second", a.Offers)
	}
}

// rowsOf counts the rows of r's table titled title.
func rowsOf(r lab.Result, title string) int {
	for _, t := range r.Tables {
		if t.Title == title {
			return len(t.Rows)
		}
	}
	return 0
}
