package store_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/outboxlab/outboxlab/clock"
	"github.com/outboxlab/outboxlab/store"
	"github.com/outboxlab/outboxlab/store/storetest"
)

// Ticks used below: milliseconds since brokerEpoch. The store takes instants
// and durations; at and span convert, so each test reads as a timetable.
const (
	tickSecond = int64(1000)
	tickMinute = 60 * tickSecond
	tickHour   = 60 * tickMinute
	tickDay    = 24 * tickHour
)

var brokerEpoch = time.Date(2026, 1, 15, 9, 0, 0, 0, time.UTC)

// at is the instant tick t.
func at(t int64) time.Time { return brokerEpoch.Add(span(t)) }

// span is a duration of t ticks.
func span(t int64) time.Duration { return time.Duration(t) * time.Millisecond }

// tickOf reads a stored time back as a tick.
func tickOf(tb testing.TB, s string) int64 {
	tb.Helper()
	t, err := clock.Parse(s)
	if err != nil {
		tb.Fatal(err)
	}
	return t.Sub(brokerEpoch).Milliseconds()
}

// inboxConsumer is the lesson's consumer service on db.
func inboxConsumer(db *store.DB) *store.Consumer { return store.NewConsumer(db, store.ConsumerLesson) }

// splitConsumer is the consumer of the effect-outside-inbox-tx mistake on db.
func splitConsumer(db *store.DB) *store.Consumer {
	s := store.ConsumerLesson
	s.Check = store.CheckInboxFirst
	return store.NewConsumer(db, s)
}

// mustOpenBrokerDB opens a fresh database with the relay and broker schema
// and returns it with its path, for tests that open more connections.
func mustOpenBrokerDB(tb testing.TB) (*store.DB, string) {
	tb.Helper()
	return storetest.Fresh(tb, store.DefaultConfig, store.RelayEvents, store.BrokerInbox)
}

func mustCountBroker(tb testing.TB, db *store.DB, query string, args ...any) int {
	tb.Helper()
	n, err := db.Count(context.Background(), query, args...)
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

func mustOfferE(tb testing.TB, db *store.DB, eventID string, now, window int64) store.Offer {
	tb.Helper()
	o, err := store.NewBroker(db, store.BrokerLesson).Offer(context.Background(), eventID, `{"account":"ACC-1","credit_cents":1000}`, "Relay-A", at(now), span(window))
	if err != nil {
		tb.Fatal(err)
	}
	return o
}

// TestOfferDedupWindow shows the broker's dedup window: a send of an event
// id accepted less than the window ago is dropped (and recorded), one at or
// after the window passes, and with no window every send passes.
func TestOfferDedupWindow(t *testing.T) {
	tests := []struct {
		name        string
		window      int64
		sends       []int64 // ticks of the sends of e42, in order
		wantDropped []bool
	}{
		{name: "NoWindowKeepsDuplicates", window: 0, sends: []int64{1 * tickSecond, 31 * tickSecond}, wantDropped: []bool{false, false}},
		{name: "ResendWithinWindowDropped", window: 2 * tickMinute, sends: []int64{1 * tickSecond, 31 * tickSecond}, wantDropped: []bool{false, true}},
		{name: "ExactlyAtWindowPasses", window: 2 * tickMinute, sends: []int64{1 * tickSecond, 1*tickSecond + 2*tickMinute}, wantDropped: []bool{false, false}},
		{name: "ReplayAfterThreeDaysPasses", window: 2 * tickMinute, sends: []int64{1 * tickSecond, 31 * tickSecond, 3 * tickDay}, wantDropped: []bool{false, true, false}},
		{name: "ReplayWithinLongWindowDropped", window: 4 * tickDay, sends: []int64{1 * tickSecond, 3 * tickDay}, wantDropped: []bool{false, true}},
		// A dropped send is no anchor: the window counts from the last accepted offer.
		{name: "WindowCountsFromAcceptedOffers", window: 2 * tickMinute, sends: []int64{0, 90 * tickSecond, 150 * tickSecond}, wantDropped: []bool{false, true, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, _ := mustOpenBrokerDB(t)
			for i, at := range tt.sends {
				if o := mustOfferE(t, db, "e42", at, tt.window); o.Dropped != tt.wantDropped[i] || o.OfferID != int64(i+1) {
					t.Fatalf("send %d at %d: offer %d dropped %v, want offer %d dropped %v", i+1, at, o.OfferID, o.Dropped, i+1, tt.wantDropped[i])
				}
			}
			dropped := 0
			for _, d := range tt.wantDropped {
				if d {
					dropped++
				}
			}
			if got := mustCountBroker(t, db, store.CountOffers.SQL, "e42", 1); got != dropped {
				t.Fatalf("dropped offers recorded = %d, want %d", got, dropped)
			}
			// A dropped offer is never delivered.
			delivered := 0
			for {
				d, err := store.NewBroker(db, store.BrokerLesson).DeliverNext(context.Background(), "inbox-consumer", at(10*tickDay))
				if err != nil {
					t.Fatal(err)
				}
				if !d.Found {
					break
				}
				delivered++
			}
			if delivered != len(tt.sends)-dropped {
				t.Fatalf("delivered %d offers, want %d", delivered, len(tt.sends)-dropped)
			}
		})
	}
}

func TestDeliverAckRedeliver(t *testing.T) {
	ctx := context.Background()
	db, _ := mustOpenBrokerDB(t)
	mustOfferE(t, db, "e42", 1*tickSecond, 0)
	mustOfferE(t, db, "e42", 31*tickSecond, 0)

	deliver := func(consumer string, now int64) store.Delivery {
		t.Helper()
		d, err := store.NewBroker(db, store.BrokerLesson).DeliverNext(ctx, consumer, at(now))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	ack := func(consumer string, offer, receipt, now int64) int64 {
		t.Helper()
		f, err := store.NewBroker(db, store.BrokerLesson).Ack(ctx, consumer, offer, receipt, at(now))
		if err != nil {
			t.Fatal(err)
		}
		return f.Rows
	}
	redeliver := func(consumer string, now int64) store.Redelivery {
		t.Helper()
		r, err := store.NewBroker(db, store.BrokerLesson).RedeliverUnacked(ctx, consumer, at(now), span(30*tickSecond), 0)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	t.Run("EachConsumerGetsEveryOffer", func(t *testing.T) {
		for _, c := range []string{"naive-consumer", "inbox-consumer"} {
			for want := int64(1); want <= 2; want++ {
				if d := deliver(c, 40*tickSecond); !d.Found || d.OfferID != want || d.Receipt != 1 || d.EventID != "e42" {
					t.Fatalf("%s: delivery %+v, want offer %d receipt 1", c, d, want)
				}
			}
			if d := deliver(c, 40*tickSecond); d.Found {
				t.Fatalf("%s: third delivery %+v, want none", c, d)
			}
		}
	})
	t.Run("AckNeedsCurrentReceipt", func(t *testing.T) {
		if rows := ack("inbox-consumer", 1, 2, 41*tickSecond); rows != 0 {
			t.Fatalf("ack with a future receipt changed %d rows", rows)
		}
		if rows := ack("inbox-consumer", 1, 1, 41*tickSecond); rows != 1 {
			t.Fatalf("ack changed %d rows, want 1", rows)
		}
		if rows := ack("inbox-consumer", 1, 1, 42*tickSecond); rows != 0 {
			t.Fatalf("tickSecond ack changed %d rows, want 0", rows)
		}
	})
	t.Run("RedeliverOnlyAfterVisibilityTimeout", func(t *testing.T) {
		if r := redeliver("inbox-consumer", 69*tickSecond); r.Ready != 0 {
			t.Fatalf("redelivered %d before the timeout", r.Ready)
		}
		if r := redeliver("inbox-consumer", 70*tickSecond); r.Ready != 1 || r.DeadLettered != 0 {
			t.Fatalf("redelivery %+v, want offer 2 ready", r)
		}
		d := deliver("inbox-consumer", 71*tickSecond)
		if !d.Found || d.OfferID != 2 || d.Receipt != 2 {
			t.Fatalf("redelivery %+v, want offer 2 receipt 2", d)
		}
		if rows := ack("inbox-consumer", 2, 1, 72*tickSecond); rows != 0 {
			t.Fatalf("late ack of the first delivery changed %d rows", rows)
		}
		if rows := ack("inbox-consumer", 2, 2, 72*tickSecond); rows != 1 {
			t.Fatalf("ack of the redelivery changed %d rows", rows)
		}
		if d := deliver("inbox-consumer", 200*tickSecond); d.Found {
			t.Fatalf("acked offers delivered again: %+v", d)
		}
	})
}

func TestDeadLetterQueue(t *testing.T) {
	ctx := context.Background()
	db, _ := mustOpenBrokerDB(t)
	mustOfferE(t, db, "e20", 1*tickSecond, 2*tickMinute)
	const visibility, maxDeliveries = 30 * tickSecond, 2
	now := 2 * tickSecond
	for i := 1; i <= maxDeliveries; i++ {
		d, err := store.NewBroker(db, store.BrokerLesson).DeliverNext(ctx, "inbox-consumer", at(now))
		if err != nil || !d.Found || d.Receipt != int64(i) {
			t.Fatalf("delivery %d: %+v, %v", i, d, err)
		}
		now += visibility
		r, err := store.NewBroker(db, store.BrokerLesson).RedeliverUnacked(ctx, "inbox-consumer", at(now), span(visibility), maxDeliveries)
		if err != nil {
			t.Fatal(err)
		}
		wantDead := int64(0)
		if i == maxDeliveries {
			wantDead = 1
		}
		if r.DeadLettered != wantDead || r.Ready != 1-wantDead {
			t.Fatalf("after delivery %d: %+v", i, r)
		}
	}
	if d, _ := store.NewBroker(db, store.BrokerLesson).DeliverNext(ctx, "inbox-consumer", at(now)); d.Found {
		t.Fatalf("dead-lettered offer delivered again: %+v", d)
	}
	dead, err := store.NewBroker(db, store.BrokerLesson).DeadLetters(ctx)
	if err != nil || len(dead) != 1 || dead[0].EventID != "e20" || dead[0].DeliveryCount != maxDeliveries || dead[0].DeadLetteredAt != clock.Format(at(now)) {
		t.Fatalf("dead letters %+v, %v", dead, err)
	}
	deadAt := now

	t.Run("PurgeKeepsYoungerThanRetention", func(t *testing.T) {
		if n, err := store.NewBroker(db, store.BrokerLesson).PurgeDeadLetters(ctx, at(deadAt+7*tickDay-1), span(7*tickDay)); err != nil || n != 0 {
			t.Fatalf("purged %d, %v", n, err)
		}
	})
	t.Run("ReplayGoesThroughTheDedupWindow", func(t *testing.T) {
		o, ok, err := store.NewBroker(db, store.BrokerLesson).ReplayDeadLetter(ctx, dead[0].ID, "operator", at(deadAt+3*tickDay), span(2*tickMinute))
		if err != nil || !ok || o.Dropped || o.EventID != "e20" {
			t.Fatalf("replay = %+v, %v, %v", o, ok, err)
		}
		if n := mustCountBroker(t, db, store.CountDeadLetters.SQL); n != 0 {
			t.Fatalf("replayed dead letter still queued: %d", n)
		}
		d, err := store.NewBroker(db, store.BrokerLesson).DeliverNext(ctx, "inbox-consumer", at(deadAt+3*tickDay))
		if err != nil || !d.Found || d.OfferID != o.OfferID || d.Receipt != 1 {
			t.Fatalf("replayed delivery %+v, %v", d, err)
		}
		if _, ok, err := store.NewBroker(db, store.BrokerLesson).ReplayDeadLetter(ctx, dead[0].ID, "operator", at(deadAt+3*tickDay), span(2*tickMinute)); ok || err != nil {
			t.Fatalf("tickSecond replay ok=%v err=%v, want gone", ok, err)
		}
	})
	t.Run("PurgeAtRetention", func(t *testing.T) {
		mustOfferE(t, db, "e21", deadAt, 0)
		for now := deadAt; ; now += visibility {
			d, _ := store.NewBroker(db, store.BrokerLesson).DeliverNext(ctx, "audit-consumer", at(now))
			if !d.Found {
				break
			}
			if _, err := store.NewBroker(db, store.BrokerLesson).RedeliverUnacked(ctx, "audit-consumer", at(now+visibility), span(visibility), 1); err != nil {
				t.Fatal(err)
			}
		}
		dead, _ := store.NewBroker(db, store.BrokerLesson).DeadLetters(ctx)
		if len(dead) == 0 {
			t.Fatal("nothing dead-lettered")
		}
		oldest := tickOf(t, dead[0].DeadLetteredAt)
		if n, err := store.NewBroker(db, store.BrokerLesson).PurgeDeadLetters(ctx, at(oldest+7*tickDay), span(7*tickDay)); err != nil || n == 0 {
			t.Fatalf("purged %d, %v at the retention", n, err)
		}
	})
}

func TestApplyCreditWithInbox(t *testing.T) {
	ctx := context.Background()
	t.Run("OK", func(t *testing.T) {
		db, _ := mustOpenBrokerDB(t)
		if err := inboxConsumer(db).OpenAccount(ctx, "ACC-42"); err != nil {
			t.Fatal(err)
		}
		for i, wantApplied := range []bool{true, false, false} {
			e, err := inboxConsumer(db).CreditWithInbox(ctx, "inbox-consumer", "e42", "ACC-42", 1000, at(int64(i)))
			if err != nil {
				t.Fatal(err)
			}
			if e.Applied != wantApplied || e.InboxRows != map[bool]int64{true: 1, false: 0}[wantApplied] {
				t.Fatalf("apply %d = %+v, want applied %v", i+1, e, wantApplied)
			}
		}
		if got := mustCountBroker(t, db, store.AccountCredit.SQL, "ACC-42"); got != 1000 {
			t.Fatalf("credit %d, want 1000", got)
		}
		if got := mustCountBroker(t, db, store.CountConsumedEvents.SQL, "inbox-consumer"); got != 1 {
			t.Fatalf("consumed rows %d, want 1", got)
		}
		// Another consumer has its own inbox: the same event is new to it.
		if err := inboxConsumer(db).OpenAccount(ctx, "ACC-43"); err != nil {
			t.Fatal(err)
		}
		if e, err := inboxConsumer(db).CreditWithInbox(ctx, "audit-consumer", "e42", "ACC-43", 1000, at(5)); err != nil || !e.Applied {
			t.Fatalf("other consumer: %+v, %v", e, err)
		}
	})
	t.Run("ErrNoAccountRollsBackTheInboxRow", func(t *testing.T) {
		db, _ := mustOpenBrokerDB(t)
		_, err := inboxConsumer(db).CreditWithInbox(ctx, "inbox-consumer", "e42", "ACC-404", 1000, at(0))
		if !errors.Is(err, store.ErrNoAccount) {
			t.Fatalf("err = %v, want ErrNoAccount", err)
		}
		if got := mustCountBroker(t, db, store.CountConsumedEvents.SQL, "inbox-consumer"); got != 0 {
			t.Fatalf("inbox row survived the failed effect: %d", got)
		}
	})
}

// TestConsumerMistakes shows why the inbox must share the effect's
// transaction: the naive consumer credits every delivery, and the split
// consumer credits again after a crash between its effect and its inbox row.
func TestConsumerMistakes(t *testing.T) {
	ctx := context.Background()
	t.Run("NaiveCreditsEveryDelivery", func(t *testing.T) {
		db, _ := mustOpenBrokerDB(t)
		_ = inboxConsumer(db).OpenAccount(ctx, "ACC-42")
		for range 2 {
			if e, err := inboxConsumer(db).Credit(ctx, "ACC-42", 1000); err != nil || !e.Applied {
				t.Fatalf("credit = %+v, %v", e, err)
			}
		}
		if got := mustCountBroker(t, db, store.AccountCredit.SQL, "ACC-42"); got != 2000 {
			t.Fatalf("credit %d, want 2000", got)
		}
	})
	t.Run("EffectOutsideInboxTxCreditsTwiceAfterACrash", func(t *testing.T) {
		db, _ := mustOpenBrokerDB(t)
		_ = inboxConsumer(db).OpenAccount(ctx, "ACC-42")
		deliveries := 0
		for attempt := 1; attempt <= 2; attempt++ {
			seen, err := splitConsumer(db).Check(ctx, "split-consumer", "e42")
			if err != nil {
				t.Fatal(err)
			}
			if seen {
				continue
			}
			deliveries++
			if _, err := inboxConsumer(db).Credit(ctx, "ACC-42", 1000); err != nil {
				t.Fatal(err)
			}
			if attempt == 1 {
				continue // crash: the inbox row is never written
			}
			if e, err := splitConsumer(db).Record(ctx, "split-consumer", "e42", at(int64(attempt))); err != nil || e.InboxRows != 1 {
				t.Fatalf("record = %+v, %v", e, err)
			}
		}
		if got := mustCountBroker(t, db, store.AccountCredit.SQL, "ACC-42"); got != 2000 || deliveries != 2 {
			t.Fatalf("credit %d after %d effects, want 2000 after 2", got, deliveries)
		}
	})
}

func TestPurgeConsumed(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name       string
		now        int64
		retention  int64
		wantPurged int64
	}{
		{name: "YoungerThanRetentionKept", now: 2*tickSecond + 24*tickHour - 1, retention: 24 * tickHour, wantPurged: 0},
		{name: "AtRetentionPurged", now: 2*tickSecond + 24*tickHour, retention: 24 * tickHour, wantPurged: 1},
		{name: "ThreeDaysLaterPurged", now: 3 * tickDay, retention: 24 * tickHour, wantPurged: 1},
		{name: "LongRetentionKeeps", now: 3 * tickDay, retention: 7 * tickDay, wantPurged: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, _ := mustOpenBrokerDB(t)
			_ = inboxConsumer(db).OpenAccount(ctx, "ACC-42")
			if _, err := inboxConsumer(db).CreditWithInbox(ctx, "inbox-consumer", "e42", "ACC-42", 1000, at(2*tickSecond)); err != nil {
				t.Fatal(err)
			}
			n, err := inboxConsumer(db).Purge(ctx, at(tt.now), span(tt.retention))
			if err != nil || n != tt.wantPurged {
				t.Fatalf("purged %d, %v; want %d", n, err, tt.wantPurged)
			}
			// A redelivery after the purge looks new: the effect applies again.
			e, err := inboxConsumer(db).CreditWithInbox(ctx, "inbox-consumer", "e42", "ACC-42", 1000, at(tt.now))
			if err != nil || e.Applied != (tt.wantPurged == 1) {
				t.Fatalf("redelivery after purge = %+v, %v", e, err)
			}
		})
	}
}

func TestApplyProjection(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name        string
		project     store.Stmt
		wantRows    []int64
		wantVersion int64
	}{
		{name: "VersionedIgnoresOlder", project: store.ConsumerLesson.Project, wantRows: []int64{1, 0, 0}, wantVersion: 2},
		{name: "UnversionedMovesBackward", project: store.ProjectLastWriteWins, wantRows: []int64{1, 1, 1}, wantVersion: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, _ := mustOpenBrokerDB(t)
			// Version 2 arrives first, then itself again, then the older version 1.
			for i, v := range []struct {
				version int64
				state   string
			}{{2, "frozen"}, {2, "frozen"}, {1, "open"}} {
				s := store.ConsumerLesson
				s.Project = tt.project
				f, err := store.NewConsumer(db, s).Project(ctx, "ACC-6", v.version, v.state, at(int64(i)))
				if err != nil || f.Rows != tt.wantRows[i] {
					t.Fatalf("apply version %d: rows %d, %v; want %d", v.version, f.Rows, err, tt.wantRows[i])
				}
			}
			ps, err := inboxConsumer(db).Projections(ctx)
			if err != nil || len(ps) != 1 || ps[0].Version != tt.wantVersion {
				t.Fatalf("projections %+v, %v; want version %d", ps, err, tt.wantVersion)
			}
		})
	}
}

// TestConcurrentInboxAppliesOnce has two consumer connections apply the same
// event at the same moment, 100 times: the uniqueness of (consumer,
// event_id) inside one BEGIN IMMEDIATE transaction lets exactly one of them
// apply the effect every time.
func TestConcurrentInboxAppliesOnce(t *testing.T) {
	ctx := context.Background()
	db, path := mustOpenBrokerDB(t)
	const rounds, cents = 100, 1000
	conns := []*store.DB{storetest.Open(t, path, store.DefaultConfig), storetest.Open(t, path, store.DefaultConfig)}
	for round := range rounds {
		account := "ACC-" + strconv.Itoa(round)
		event := "e" + strconv.Itoa(round)
		if err := inboxConsumer(db).OpenAccount(ctx, account); err != nil {
			t.Fatal(err)
		}
		start := make(chan struct{})
		effects := make([]store.Effect, len(conns))
		errs := make([]error, len(conns))
		var wg sync.WaitGroup
		for i, c := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				effects[i], errs[i] = inboxConsumer(c).CreditWithInbox(ctx, "inbox-consumer", event, account, cents, at(int64(round)))
			}()
		}
		close(start)
		wg.Wait()
		applied := 0
		for i := range conns {
			if errs[i] != nil {
				t.Fatalf("round %d: %v", round, errs[i])
			}
			if effects[i].Applied {
				applied++
			}
		}
		if applied != 1 {
			t.Fatalf("round %d: effect applied %d times", round, applied)
		}
		if got := mustCountBroker(t, db, store.AccountCredit.SQL, account); got != cents {
			t.Fatalf("round %d: credit %d, want %d", round, got, cents)
		}
	}
	if got := mustCountBroker(t, db, store.CountConsumedEvents.SQL, "inbox-consumer"); got != rounds {
		t.Fatalf("consumed rows %d, want %d", got, rounds)
	}
}

// TestConcurrentDeliverNext has two instances of one consumer poll at once:
// each offer is delivered once.
func TestConcurrentDeliverNext(t *testing.T) {
	ctx := context.Background()
	db, path := mustOpenBrokerDB(t)
	const offers = 20
	for i := range offers {
		mustOfferE(t, db, "e"+strconv.Itoa(i), int64(i), 0)
	}
	seen := make([][]int64, 2)
	var wg sync.WaitGroup
	for i := range seen {
		c := storetest.Open(t, path, store.DefaultConfig)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				d, err := store.NewBroker(c, store.BrokerLesson).DeliverNext(ctx, "inbox-consumer", at(100))
				if err != nil {
					t.Error(err)
					return
				}
				if !d.Found {
					return
				}
				seen[i] = append(seen[i], d.OfferID)
			}
		}()
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

// TestBrokerTimesAreClockText: every time the broker and the consumers
// store is UTC text with milliseconds, readable (and comparable) in the
// sqlite3 shell, not an integer.
func TestBrokerTimesAreClockText(t *testing.T) {
	ctx := context.Background()
	db, _ := mustOpenBrokerDB(t)
	if err := inboxConsumer(db).OpenAccount(ctx, "ACC-42"); err != nil {
		t.Fatal(err)
	}
	mustOfferE(t, db, "e42", 1*tickSecond, 0)
	d, err := store.NewBroker(db, store.BrokerLesson).DeliverNext(ctx, "inbox-consumer", at(40*tickSecond))
	if err != nil || !d.Found || d.OfferedAt != "2026-01-15T09:00:01.000Z" {
		t.Fatalf("delivery %+v, %v", d, err)
	}
	if _, err := store.NewBroker(db, store.BrokerLesson).Ack(ctx, "inbox-consumer", d.OfferID, d.Receipt, at(41*tickSecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := inboxConsumer(db).CreditWithInbox(ctx, "inbox-consumer", "e42", "ACC-42", 1000, at(40*tickSecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := inboxConsumer(db).Project(ctx, "ACC-6", 1, "open", at(3*tickDay)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		table, column, want string
	}{
		{"broker_offers", "offered_at", "2026-01-15T09:00:01.000Z"},
		{"broker_deliveries", "delivered_at", "2026-01-15T09:00:40.000Z"},
		{"broker_deliveries", "acked_at", "2026-01-15T09:00:41.000Z"},
		{"consumed_events", "consumed_at", "2026-01-15T09:00:40.000Z"},
		{"projections", "updated_at", "2026-01-18T09:00:00.000Z"},
	}
	for _, tt := range tests {
		q := "SELECT count(*) FROM " + tt.table + " WHERE typeof(" + tt.column + ") = 'text' AND " + tt.column + " = ?"
		if n := mustCountBroker(t, db, q, tt.want); n != 1 {
			t.Errorf("%s.%s: %d rows hold the text %s, want 1", tt.table, tt.column, n, tt.want)
		}
	}
}
