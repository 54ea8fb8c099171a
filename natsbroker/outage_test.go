package natsbroker

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestOutageAndRestart stops the embedded server mid-run: Offer and
// DeliverNext return an error wrapping ErrUnavailable within the request
// timeout instead of hanging, and after the server restarts on the same
// port and store folder the client reconnects, a retried offer is
// accepted, and nothing offered before the outage is lost.
func TestOutageAndRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Start(dir)
	if err != nil {
		t.Fatal(err)
	}
	// A long window: the real time the outage costs (up to the request
	// timeout) runs JetStream's window on.
	window := 10 * minute
	const requestTimeout = time.Second
	b := newBroker(t, s, Config{Window: window, RequestTimeout: requestTimeout})
	mustOffer(t, b, "e1", 1*second, window)
	port := s.Port()
	s.Shutdown()

	for _, call := range []struct {
		name string
		run  func() error
	}{
		{"Offer", func() error {
			_, err := b.Offer(ctx, "e2", testPayload, "Relay-A", at(2*second), window)
			return err
		}},
		{"DeliverNext", func() error {
			_, err := b.DeliverNext(ctx, "inbox-consumer", at(2*second))
			return err
		}},
	} {
		started := time.Now()
		err := call.run()
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("%s with the server down: %v, want ErrUnavailable", call.name, err)
		}
		t.Logf("%s with the server down: %v (after %s)", call.name, err, time.Since(started))
		// A bound on the call, not a measure of speed: it must not hang.
		if took := time.Since(started); took > requestTimeout+time.Second {
			t.Fatalf("%s with the server down took %s, beyond the %s request timeout", call.name, took, requestTimeout)
		}
	}

	restarted, err := StartOnPort(dir, port)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(restarted.Shutdown)
	for deadline := time.Now().Add(5 * time.Second); !b.nc.IsConnected(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the client did not reconnect to the restarted server within 5 s")
		}
	}
	if id, dropped := mustOffer(t, b, "e2", 3*second, window); id != 2 || dropped {
		t.Fatalf("retried offer: offer %d dropped %v, want offer 2 accepted", id, dropped)
	}
	// Measured: the restarted server rebuilt its duplicate records from the
	// stored messages' Nats-Msg-Id, so a resend of e1 inside the window
	// is still dropped.
	if _, dropped := mustOffer(t, b, "e1", 4*second, window); !dropped {
		t.Fatal("resend of e1 inside the window after the restart accepted")
	}
	if got := deliverAll(t, b, "inbox-consumer", 5*second); len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("deliveries after the restart %v, want offers 1 and 2", got)
	}
	failed := 0
	for _, a := range b.Answers().Offers {
		if a.Err != "" {
			failed++
		}
	}
	if failed != 1 {
		t.Fatalf("failed offers in the answers: %d, want 1", failed)
	}
}

// TestServerLogs: the embedded server logs nothing unless asked, and to
// the writer it is given when asked.
func TestServerLogs(t *testing.T) {
	t.Parallel()
	var log strings.Builder
	s, err := StartWith(t.TempDir(), ServerOptions{Log: &syncWriter{w: &log}})
	if err != nil {
		t.Fatal(err)
	}
	s.Shutdown()
	if !strings.Contains(log.String(), "nats-server notice: ") {
		t.Fatalf("server log %q, want its notices", log.String())
	}
}

// syncWriter serialises writes to w (the server logs from goroutines).
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// TestOfferAfterALostAcknowledgement: a send whose first attempt JetStream
// stored but whose acknowledgement never reached the relay (an outage the
// relay retried) is answered Duplicate on the retry; the stored copy is
// that offer's, so the consumer's delivery names it and its ack takes.
func TestOfferAfterALostAcknowledgement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := startBroker(t, Config{Window: 2 * minute, Timing: testTiming})
	first := nats.NewMsg(b.subject) // the first attempt, stored, its ack lost
	first.Data = []byte(testPayload)
	first.Header.Set(jetstream.MsgIDHeader, "e1")
	if _, err := b.js.PublishMsg(ctx, first); err != nil {
		t.Fatal(err)
	}
	o, err := b.Offer(ctx, "e1", testPayload, "Relay-A", at(second), 2*minute)
	if err != nil || o.Dropped || o.OfferID != 1 {
		t.Fatalf("the retried offer: %+v, %v; want offer 1, not dropped", o, err)
	}
	d, err := b.DeliverNext(ctx, "Consumer-1", at(2*second))
	if err != nil || !d.Found || d.OfferID != 1 {
		t.Fatalf("delivery: %+v, %v; want offer 1", d, err)
	}
	if f, err := b.Ack(ctx, "Consumer-1", d.OfferID, d.Receipt, at(3*second)); err != nil || f.Rows != 1 {
		t.Fatalf("ack: %+v, %v; want it taken", f, err)
	}
	if a := b.Answers(); len(a.Notes) == 0 || !strings.Contains(a.Notes[0], "acknowledgement was lost") {
		t.Errorf("notes %q: want the lost acknowledgement said", a.Notes)
	}
}
