package natsbroker

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/outboxlab/outboxlab/store"
)

// visibility is the tests' visibility timeout: 20 scenario seconds, the
// consumers' AckWait of 100 ms real under testTiming.
const visibility = 20 * second

// brokerCalls wraps a broker's calls for one test, failing it on errors.
type brokerCalls struct {
	t *testing.T
	b *Broker
}

func (c brokerCalls) deliver(consumer string, now time.Duration) store.Delivery {
	c.t.Helper()
	d, err := c.b.DeliverNext(context.Background(), consumer, at(now))
	if err != nil {
		c.t.Fatal(err)
	}
	return d
}

func (c brokerCalls) ack(consumer string, offerID, receipt int64, now time.Duration) int64 {
	c.t.Helper()
	f, err := c.b.Ack(context.Background(), consumer, offerID, receipt, at(now))
	if err != nil {
		c.t.Fatal(err)
	}
	return f.Rows
}

func (c brokerCalls) redeliver(consumer string, now time.Duration, maxDeliveries int64) store.Redelivery {
	c.t.Helper()
	r, err := c.b.RedeliverUnacked(context.Background(), consumer, at(now), visibility, maxDeliveries)
	if err != nil {
		c.t.Fatal(err)
	}
	return r
}

// TestDeliverAckRedeliver runs the lab broker's delivery timetable
// (store.TestDeliverAckRedeliver) on JetStream, with the visibility
// timeout at 20 s: every consumer gets every offer; an ack must name a
// delivery the consumer received, and takes once; an unacknowledged
// delivery comes back after the ack wait with receipt 2, and a current
// ack stops its redelivery. Where JetStream differs from the lab's broker
// the test asserts what JetStream does (see the late ack below).
func TestDeliverAckRedeliver(t *testing.T) {
	t.Parallel()
	b := startBroker(t, Config{Visibility: visibility})
	c := brokerCalls{t, b}
	mustOffer(t, b, "e42", 1*second, 0)
	mustOffer(t, b, "e42", 2*second, 0)

	t.Run("EachConsumerGetsEveryOffer", func(t *testing.T) {
		for _, consumer := range []string{"naive-consumer", "inbox-consumer"} {
			for want := int64(1); want <= 2; want++ {
				if d := c.deliver(consumer, 3*second); !d.Found || d.OfferID != want || d.Receipt != 1 || d.EventID != "e42" || d.OfferedAt == "" {
					t.Fatalf("%s: delivery %+v, want offer %d receipt 1", consumer, d, want)
				}
			}
			if d := c.deliver(consumer, 3*second); d.Found {
				t.Fatalf("%s: third delivery %+v, want none", consumer, d)
			}
		}
	})
	t.Run("AckNeedsAReceivedDelivery", func(t *testing.T) {
		if rows := c.ack("inbox-consumer", 1, 2, 4*second); rows != 0 {
			t.Fatalf("ack with a future receipt changed %d rows", rows)
		}
		if rows := c.ack("inbox-consumer", 1, 1, 4*second); rows != 1 {
			t.Fatalf("ack changed %d rows, want 1", rows)
		}
		if rows := c.ack("inbox-consumer", 1, 1, 5*second); rows != 0 {
			t.Fatalf("second ack changed %d rows, want 0", rows)
		}
		acks := b.Answers().Acks
		if len(acks) != 3 || acks[0].Sent || !acks[1].Sent || !acks[1].Took || !acks[2].Sent || acks[2].Took {
			t.Fatalf("ack answers %+v: want nothing sent for the future receipt, then one ack taken and one sent but not taken", acks)
		}
		// Measured: the server replies to a double ack with an empty
		// message whether the ack took or not.
		if acks[1].Reply != "" || acks[2].Reply != "" {
			t.Fatalf("double-ack replies %q and %q, measured empty", acks[1].Reply, acks[2].Reply)
		}
	})
	t.Run("RedeliverAfterTheAckWait", func(t *testing.T) {
		// Offer 2 was delivered at 3 s: its ack wait runs out at 23 s.
		// The checks keep 20 s (100 ms real) from that boundary.
		if r := c.redeliver("inbox-consumer", 4*second, 0); r.Ready != 0 {
			t.Fatalf("%d deliveries ready before the ack wait ran out", r.Ready)
		}
		if r := c.redeliver("inbox-consumer", 43*second, 0); r.Ready != 1 || r.DeadLettered != 0 {
			t.Fatalf("redelivery %+v, want offer 2 ready", r)
		}
		d := c.deliver("inbox-consumer", 44*second)
		if !d.Found || d.OfferID != 2 || d.Receipt != 2 {
			t.Fatalf("redelivery %+v, want offer 2 receipt 2", d)
		}
		// Measured: JetStream takes the late ack of delivery 1 after the
		// redelivery (it matches an ack to the pending message by stream
		// sequence and does not compare the delivery count), where the lab's
		// broker refuses it; the current ack that follows then finds
		// nothing pending.
		if rows := c.ack("inbox-consumer", 2, 1, 45*second); rows != 1 {
			t.Fatalf("late ack of the first delivery changed %d rows; JetStream was measured to take it", rows)
		}
		if rows := c.ack("inbox-consumer", 2, 2, 45*second); rows != 0 {
			t.Fatalf("ack of the redelivery after the late ack changed %d rows, want 0", rows)
		}
		// JetStream's ack metrics for offer 2 (stream sequence 2): one, for
		// the late ack, naming delivery 1; none for the refused one, waited
		// for here for 200 ms.
		metrics := func() (n int, deliveries uint64) {
			for _, a := range b.Answers().Advisories {
				if a.Kind == "ack" && a.Consumer == "inbox-consumer" && a.StreamSeq == 2 {
					n, deliveries = n+1, a.Deliveries
				}
			}
			return n, deliveries
		}
		time.Sleep(200 * time.Millisecond)
		if n, deliveries := metrics(); n != 1 || deliveries != 1 {
			t.Fatalf("ack metrics for offer 2: %d, the last naming delivery %d; want 1 naming delivery 1", n, deliveries)
		}
		if d := c.deliver("inbox-consumer", 100*second); d.Found {
			t.Fatalf("acked offers delivered again: %+v", d)
		}
		if got, ok, _ := b.DeliveryOf(context.Background(), "inbox-consumer", 2); !ok || got.State != "acked" || got.DeliveryCount != 2 {
			t.Fatalf("delivery of offer 2: %+v %v, want acked after 2 deliveries", got, ok)
		}
	})
	t.Run("AckAfterTheAckWaitBeforeTheRedeliveryTakes", func(t *testing.T) {
		if d := c.deliver("late-consumer", 110*second); !d.Found || d.OfferID != 1 {
			t.Fatalf("delivery %+v", d)
		}
		if r := c.redeliver("late-consumer", 150*second, 0); r.Ready != 1 {
			t.Fatalf("redelivery %+v, want offer 1 ready", r)
		}
		// Measured: the ack wait ran out, but the message is still pending
		// until redelivered, and the ack takes.
		if rows := c.ack("late-consumer", 1, 1, 151*second); rows != 1 {
			t.Fatalf("ack after the ack wait changed %d rows; JetStream was measured to take it", rows)
		}
		if got := deliverAll(t, b, "late-consumer", 152*second); len(got) != 1 || got[0] != 2 {
			t.Fatalf("deliveries after the ack %v, want offer 2 only", got)
		}
	})
	t.Run("CurrentAckStopsRedelivery", func(t *testing.T) {
		d := c.deliver("audit-consumer", 200*second)
		if !d.Found || d.Receipt != 1 {
			t.Fatalf("delivery %+v", d)
		}
		if r := c.redeliver("audit-consumer", 240*second, 0); r.Ready != 1 {
			t.Fatalf("redelivery %+v, want 1 ready", r)
		}
		d = c.deliver("audit-consumer", 241*second)
		if !d.Found || d.Receipt != 2 {
			t.Fatalf("redelivery %+v, want receipt 2", d)
		}
		if rows := c.ack("audit-consumer", d.OfferID, 2, 242*second); rows != 1 {
			t.Fatalf("current ack changed %d rows, want 1", rows)
		}
		if r := c.redeliver("audit-consumer", 300*second, 0); r.Ready != 0 {
			t.Fatalf("redelivery after the ack %+v, want none", r)
		}
		for _, id := range deliverAll(t, b, "audit-consumer", 301*second) {
			if id == d.OfferID {
				t.Fatalf("acked offer %d delivered again", id)
			}
		}
	})
}

// TestTwoInstancesNeverShareADelivery has two instances of one consumer
// fetch at once (store.TestConcurrentDeliverNext): JetStream's durable
// consumer hands each message to one of them.
func TestTwoInstancesNeverShareADelivery(t *testing.T) {
	t.Parallel()
	b := startBroker(t, Config{Visibility: 10 * minute})
	const offers = 20
	for i := range offers {
		mustOffer(t, b, "e"+strconv.Itoa(i), time.Duration(i)*time.Millisecond, 0)
	}
	seen := make([][]int64, 2)
	var wg sync.WaitGroup
	for i := range seen {
		wg.Go(func() {
			for {
				d, err := b.DeliverNext(context.Background(), "inbox-consumer", at(time.Second))
				if err != nil {
					t.Error(err)
					return
				}
				if !d.Found {
					return
				}
				seen[i] = append(seen[i], d.OfferID)
			}
		})
	}
	wg.Wait()
	got := map[int64]int{}
	for _, ids := range seen {
		for _, id := range ids {
			got[id]++
		}
	}
	if len(got) != offers {
		t.Fatalf("delivered %d distinct offers, want %d", len(got), offers)
	}
	for id, n := range got {
		if n != 1 {
			t.Fatalf("offer %d delivered %d times", id, n)
		}
	}
}

// TestRecordTimesAreScenarioClockText (store.TestBrokerTimesAreClockText):
// the ledger's times are the scenario instants in clock.Layout, as the
// lab's broker stores them, never the real times JetStream ran at.
func TestRecordTimesAreScenarioClockText(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := startBroker(t, Config{Visibility: visibility})
	c := brokerCalls{t, b}
	mustOffer(t, b, "e42", 1*second, 0)
	d := c.deliver("inbox-consumer", 40*second)
	if rows := c.ack("inbox-consumer", d.OfferID, d.Receipt, 41*second); rows != 1 {
		t.Fatalf("ack changed %d rows", rows)
	}
	offers, _ := b.Offers(ctx)
	deliveries, _ := b.Deliveries(ctx)
	if len(offers) != 1 || len(deliveries) != 1 {
		t.Fatalf("offers %+v, deliveries %+v", offers, deliveries)
	}
	tests := []struct {
		what, got, want string
	}{
		{"delivery's OfferedAt", d.OfferedAt, "2026-01-15T09:00:01.000Z"},
		{"offer's OfferedAt", offers[0].OfferedAt, "2026-01-15T09:00:01.000Z"},
		{"DeliveredAt", deliveries[0].DeliveredAt, "2026-01-15T09:00:40.000Z"},
		{"AckedAt", deliveries[0].AckedAt, "2026-01-15T09:00:41.000Z"},
		{"State", deliveries[0].State, "acked"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %q, want %q", tt.what, tt.got, tt.want)
		}
	}
}

// TestAckMetricAfterTheWait: with a wait of a microsecond, JetStream's
// ack metric mostly arrives after the adapter stopped waiting (the ack is
// answered 0 rows); whenever it comes, the ledger ends right: the ack
// took and the delivery is acked (a note says when the answer was 0 rows).
func TestAckMetricAfterTheWait(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := startBroker(t, Config{Timing: testTiming, AnswerWait: time.Microsecond})
	mustOffer(t, b, "e1", second, 0)
	d, err := b.DeliverNext(ctx, "Consumer-1", at(2*second))
	if err != nil || !d.Found {
		t.Fatalf("delivery: %+v, %v", d, err)
	}
	if _, err := b.Ack(ctx, "Consumer-1", d.OfferID, d.Receipt, at(3*second)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		a := b.Answers()
		if len(a.Acks) == 1 && a.Acks[0].Took {
			if bd, ok, err := b.DeliveryOf(ctx, "Consumer-1", d.OfferID); err != nil || !ok || bd.State != "acked" {
				t.Errorf("delivery %+v (%v, %v), want acked", bd, ok, err)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ack metric never corrected the ledger: %+v", a.Acks)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestInstancesFirstFetchingAtOnce has several instances of a consumer
// take their first delivery at the same moment, for many consumers. The
// server answers a second create of a durable consumer before the first
// create has it listen for fetches, and a fetch then finds no responders:
// so one create request per consumer goes out (counted on the wire), and
// every instance's fetch is answered.
func TestInstancesFirstFetchingAtOnce(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	b := newBroker(t, s, Config{Visibility: 10 * minute})
	creates := countRequests(t, s, "$JS.API.CONSUMER.CREATE.>")
	mustOffer(t, b, "e1", 0, 0)
	const consumers, instances = 25, 4
	var wg sync.WaitGroup
	for c := range consumers {
		start := make(chan struct{})
		for range instances {
			wg.Go(func() {
				<-start
				if _, err := b.DeliverNext(context.Background(), "consumer-"+strconv.Itoa(c), at(time.Second)); err != nil {
					t.Error(err)
				}
			})
		}
		close(start)
	}
	wg.Wait()
	if n := creates(); n != consumers {
		t.Errorf("%d consumer create requests for %d consumers", n, consumers)
	}
}

// countRequests counts, on a connection of its own, the messages sent to
// subject on s from now on; the function it returns flushes and reads the
// count.
func countRequests(tb testing.TB, s *Server, subject string) func() int {
	tb.Helper()
	nc, err := nats.Connect(s.URL())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	sub, err := nc.SubscribeSync(subject)
	if err != nil {
		tb.Fatal(err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		tb.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		tb.Fatal(err)
	}
	return func() int {
		// The server writes what it routed before the flush's answer, and
		// the connection queues it before reading that answer.
		if err := nc.Flush(); err != nil {
			tb.Fatal(err)
		}
		n, _, err := sub.Pending()
		if err != nil {
			tb.Fatal(err)
		}
		return n
	}
}
