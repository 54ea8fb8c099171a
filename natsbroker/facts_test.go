package natsbroker

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestDuplicateWindowLimits measures what JetStream makes of a stream's
// duplicate window, which is why a lesson's window of 0 is sent without
// Nats-Msg-Id rather than as a window: 0 is JetStream's default of two
// minutes, and a window under 100 ms is refused.
func TestDuplicateWindowLimits(t *testing.T) {
	t.Parallel()
	b := startBroker(t, Config{})
	tests := []struct {
		name    string
		window  time.Duration
		want    time.Duration // the window the server keeps
		refused bool
	}{
		{name: "ZeroIsTheTwoMinuteDefault", window: 0, want: 2 * time.Minute},
		{name: "UnderTheMinimumRefused", window: 50 * time.Millisecond, refused: true},
		{name: "TheMinimumKept", window: minDuplicateWindow, want: minDuplicateWindow},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := "FACTS_" + string(rune('A'+i))
			s, err := b.js.CreateStream(context.Background(), jetstream.StreamConfig{
				Name: name, Subjects: []string{"facts." + name}, Storage: jetstream.MemoryStorage, Duplicates: tt.window,
			})
			if tt.refused {
				if err == nil {
					t.Fatalf("a duplicate window of %s accepted: %s", tt.window, s.CachedInfo().Config.Duplicates)
				}
				t.Logf("a duplicate window of %s refused: %v", tt.window, err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := s.CachedInfo().Config.Duplicates; got != tt.want {
				t.Fatalf("a duplicate window of %s kept as %s, want %s", tt.window, got, tt.want)
			}
		})
	}
}

// TestMaxDeliveriesAdvisoryNeedsAPull measures when JetStream sends its
// max-deliveries advisory for a pull consumer: with MaxDeliver 1 its
// ack-wait timer sends it as the only delivery's ack wait runs out; with
// MaxDeliver 2 nothing comes when the second delivery's ack wait runs out
// (waited here for 300 ms beyond it), only when a pull request next
// reaches the consumer. RedeliverUnacked therefore pulls once when an
// advisory is owed.
func TestMaxDeliveriesAdvisoryNeedsAPull(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name           string
		maxDeliver     int64
		wantBeforePull bool
	}{
		{name: "MaxDeliver1SentByTheTimer", maxDeliver: 1, wantBeforePull: true},
		{name: "MaxDeliver2SentOnThePull", maxDeliver: 2, wantBeforePull: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := startBroker(t, Config{Visibility: visibility, MaxDeliveries: tt.maxDeliver})
			c := brokerCalls{t, b}
			mustOffer(t, b, "e1", second, 0)
			now := 2 * second
			for i := int64(1); i <= tt.maxDeliver; i++ {
				if d := c.deliver("inbox-consumer", now); !d.Found || d.Receipt != i {
					t.Fatalf("delivery %d: %+v", i, d)
				}
				now += visibility + 20*second
			}
			cs, err := b.consumerFor(context.Background(), "inbox-consumer")
			if err != nil {
				t.Fatal(err)
			}
			// Past the last ack wait (the broker's clock waits), then 300 ms.
			if err := b.clock.wait(context.Background(), at(now)); err != nil {
				t.Fatal(err)
			}
			advised := func() bool {
				_, ok := b.maxedOut[deliveryKey{durable: cs.durable, seq: 1}]
				return ok
			}
			b.cfg.AnswerWait = 300 * time.Millisecond
			if got := b.awaitAnswer(context.Background(), advised); got != tt.wantBeforePull {
				t.Fatalf("advisory before a pull: %v, want %v", got, tt.wantBeforePull)
			}
			if msg, err := b.fetchOne(cs); err != nil || msg != nil {
				t.Fatalf("pull: %v, %v; want nothing delivered", msg, err)
			}
			if !b.awaitAnswer(context.Background(), advised) {
				t.Fatal("no advisory after the pull")
			}
		})
	}
}
