package natsbroker

import (
	"context"
	"testing"
	"time"

	"github.com/outboxlab/outboxlab/clock"
)

// TestDeadLetterQueue runs the lab broker's dead-letter timetable
// (store.TestDeadLetterQueue) on JetStream: after MaxDeliver (2)
// deliveries and the last ack wait, JetStream sends its max-deliveries
// advisory and delivers the message no more; RedeliverUnacked reports it
// and copies it into the dead-letter stream. The purge follows the
// retention on the scenario clock, and a replay is offered again under
// JetStream's duplicate window: dropped inside it, accepted after it.
func TestDeadLetterQueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const maxDeliveries = 2
	window := minute // the lesson's is 2 minutes: shorter here, so its compressed jumps take half the time
	b := startBroker(t, Config{Window: window, Visibility: visibility, MaxDeliveries: maxDeliveries})
	c := brokerCalls{t, b}
	mustOffer(t, b, "e20", 1*second, window)
	now := 2 * second
	for i := int64(1); i <= maxDeliveries; i++ {
		if d := c.deliver("inbox-consumer", now); !d.Found || d.Receipt != i {
			t.Fatalf("delivery %d: %+v", i, d)
		}
		now += visibility + 20*second
		r := c.redeliver("inbox-consumer", now, maxDeliveries)
		wantDead := int64(0)
		if i == maxDeliveries {
			wantDead = 1
		}
		if r.DeadLettered != wantDead || r.Ready != 1-wantDead {
			t.Fatalf("after delivery %d: %+v, want %d dead-lettered", i, r, wantDead)
		}
	}
	if d := c.deliver("inbox-consumer", now); d.Found {
		t.Fatalf("dead-lettered offer delivered again: %+v", d)
	}
	dead, err := b.DeadLetters(ctx)
	if err != nil || len(dead) != 1 || dead[0].EventID != "e20" || dead[0].OfferID != 1 || dead[0].Payload != testPayload ||
		dead[0].DeliveryCount != maxDeliveries || dead[0].DeadLetteredAt != clock.Format(at(now)) {
		t.Fatalf("dead letters %+v, %v", dead, err)
	}
	var advisories int
	for _, a := range b.Answers().Advisories {
		if a.Kind == "max_deliveries" && a.StreamSeq == 1 && a.Deliveries == maxDeliveries {
			advisories++
		}
	}
	if advisories != 1 {
		t.Fatalf("max-deliveries advisories %+v, want one for sequence 1 after 2 deliveries", b.Answers().Advisories)
	}
	if n := dlqMessages(t, b); n != 1 {
		t.Fatalf("dead-letter stream holds %d messages, want 1", n)
	}
	deadAt := now

	t.Run("PurgeKeepsYoungerThanRetention", func(t *testing.T) {
		if n, err := b.PurgeDeadLetters(ctx, at(deadAt+7*day-second), 7*day); err != nil || n != 0 {
			t.Fatalf("purged %d, %v", n, err)
		}
	})
	t.Run("ReplayGoesThroughTheDedupWindow", func(t *testing.T) {
		replayAt := deadAt + 7*day - second
		o, ok, err := b.ReplayDeadLetter(ctx, dead[0].ID, "operator", at(replayAt), window)
		if err != nil || !ok || o.Dropped || o.EventID != "e20" {
			t.Fatalf("replay after the window = %+v, %v, %v", o, ok, err)
		}
		if n := dlqMessages(t, b); n != 0 {
			t.Fatalf("replayed dead letter still in the dead-letter stream: %d", n)
		}
		d := c.deliver("inbox-consumer", replayAt)
		if !d.Found || d.OfferID != o.OfferID || d.Receipt != 1 {
			t.Fatalf("replayed delivery %+v, want offer %d receipt 1", d, o.OfferID)
		}
		if _, ok, err := b.ReplayDeadLetter(ctx, dead[0].ID, "operator", at(replayAt), window); ok || err != nil {
			t.Fatalf("second replay ok=%v err=%v, want gone", ok, err)
		}
	})
	t.Run("PurgeAtRetention", func(t *testing.T) {
		mustOffer(t, b, "e21", deadAt+7*day, 0)
		// audit-consumer gets every offer from the start: e20, its replay
		// and e21.
		delivered := deliverAll(t, b, "audit-consumer", deadAt+7*day)
		if len(delivered) != 3 {
			t.Fatalf("audit-consumer's deliveries %v, want 3", delivered)
		}
		// audit-consumer was made with MaxDeliver 2: this call, naming 1,
		// updates it, and JetStream gives up on all three at once.
		if r := c.redeliver("audit-consumer", deadAt+7*day+visibility+20*second, 1); r.DeadLettered != 3 {
			t.Fatalf("redelivery %+v, want 3 dead-lettered", r)
		}
		dead, _ := b.DeadLetters(ctx)
		if len(dead) != 3 || dead[2].EventID != "e21" {
			t.Fatalf("dead letters %+v, want e20, e20, e21", dead)
		}
		deadAt, err := clock.Parse(dead[0].DeadLetteredAt)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := b.PurgeDeadLetters(ctx, deadAt.Add(7*day), 7*day); err != nil || n != 3 {
			t.Fatalf("purged %d, %v at the retention, want 3", n, err)
		}
		if n := dlqMessages(t, b); n != 0 {
			t.Fatalf("purged dead letter still in the dead-letter stream: %d", n)
		}
	})
}

// TestReplayDeadLetter replays a dead letter inside and outside the
// duplicate window of its event's offer: JetStream drops the replay
// inside it (PubAck.Duplicate) and accepts it after; either way the dead
// letter leaves the dead-letter stream, as in the lab's broker.
func TestReplayDeadLetter(t *testing.T) {
	t.Parallel()
	window := minute
	tests := []struct {
		name        string
		replayAt    time.Duration // the event was offered at 1 s, dead-lettered at 41 s
		wantDropped bool
	}{
		{name: "InsideTheWindowDropped", replayAt: 41 * second, wantDropped: true},
		{name: "AfterTheWindowAccepted", replayAt: 81 * second, wantDropped: false},
		{name: "ThreeDaysLaterAccepted", replayAt: 3 * day, wantDropped: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b := startBroker(t, Config{Window: window, Visibility: visibility, MaxDeliveries: 1})
			c := brokerCalls{t, b}
			mustOffer(t, b, "e7", 1*second, window)
			if d := c.deliver("inbox-consumer", 1*second); !d.Found {
				t.Fatal("no delivery")
			}
			if r := c.redeliver("inbox-consumer", 1*second+visibility+20*second, 1); r.DeadLettered != 1 {
				t.Fatalf("redelivery %+v, want 1 dead-lettered", r)
			}
			o, ok, err := b.ReplayDeadLetter(ctx, 1, "operator", at(tt.replayAt), window)
			if err != nil || !ok || o.Dropped != tt.wantDropped || o.OfferID != 2 {
				t.Fatalf("replay = %+v, %v, %v; want offer 2 dropped %v", o, ok, err, tt.wantDropped)
			}
			if n := dlqMessages(t, b); n != 0 {
				t.Fatalf("replayed dead letter still in the dead-letter stream: %d", n)
			}
			if dead, _ := b.DeadLetters(ctx); len(dead) != 0 {
				t.Fatalf("dead letters after the replay: %+v", dead)
			}
			want := 0
			if !tt.wantDropped {
				want = 1
			}
			if got := deliverAll(t, b, "inbox-consumer", tt.replayAt+second); len(got) != want {
				t.Fatalf("deliveries after the replay %v, want %d", got, want)
			}
		})
	}
}

// dlqMessages counts the messages in b's dead-letter stream, as
// JetStream reports them.
func dlqMessages(tb testing.TB, b *Broker) uint64 {
	tb.Helper()
	s, err := b.js.Stream(context.Background(), b.DeadLetterStreamName())
	if err != nil {
		tb.Fatal(err)
	}
	return s.CachedInfo().State.Msgs
}
