package natsbroker

import (
	"context"
	"testing"
	"time"
)

// The tests' scenario clock: instants are durations after epoch.
var epoch = time.Date(2026, 1, 15, 9, 0, 0, 0, time.UTC)

const (
	second = time.Second
	minute = time.Minute
	day    = 24 * time.Hour
)

// at is the scenario instant d after epoch.
func at(d time.Duration) time.Time { return epoch.Add(d) }

// testTiming runs a scenario second as 5 ms: the lessons' 2-minute window
// as 600 ms, a 20-second visibility as 100 ms.
var testTiming = Timing{Scale: 5 * time.Millisecond, Jump: 50 * time.Millisecond}

// startServer starts an embedded server in the test's temporary folder,
// shut down when the test ends.
func startServer(tb testing.TB) *Server {
	tb.Helper()
	s, err := Start(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Shutdown)
	return s
}

// newBroker connects a broker to s with cfg (RunID "test" and the test
// timing unless set), closed when the test ends.
func newBroker(tb testing.TB, s *Server, cfg Config) *Broker {
	tb.Helper()
	if cfg.RunID == "" {
		cfg.RunID = "test"
	}
	if cfg.Timing.Scale == 0 {
		cfg.Timing = testTiming
	}
	b, err := Dial(context.Background(), s.URL(), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(b.Close)
	return b
}

// startBroker is a broker on a server of its own.
func startBroker(tb testing.TB, cfg Config) *Broker {
	tb.Helper()
	return newBroker(tb, startServer(tb), cfg)
}

const testPayload = `{"account":"ACC-1","credit_cents":1000}`

func mustOffer(tb testing.TB, b *Broker, eventID string, now, window time.Duration) (offerID int64, dropped bool) {
	tb.Helper()
	o, err := b.Offer(context.Background(), eventID, testPayload, "Relay-A", at(now), window)
	if err != nil {
		tb.Fatal(err)
	}
	return o.OfferID, o.Dropped
}

// deliverAll takes consumer's deliveries at now until none is left.
func deliverAll(tb testing.TB, b *Broker, consumer string, now time.Duration) []int64 {
	tb.Helper()
	var ids []int64
	for {
		d, err := b.DeliverNext(context.Background(), consumer, at(now))
		if err != nil {
			tb.Fatal(err)
		}
		if !d.Found {
			return ids
		}
		ids = append(ids, d.OfferID)
	}
}
