package store_test

import (
	"context"
	"database/sql"
	"sync"
	"testing"
	"time"

	"github.com/outboxlab/outboxlab/store"
	"github.com/outboxlab/outboxlab/store/storetest"
)

// mustOpenRelayDB opens a fresh database with the relay schema and one event
// E-41 created at t=0.
func mustOpenRelayDB(tb testing.TB) (*store.DB, string) {
	tb.Helper()
	db, path := storetest.Fresh(tb, store.DefaultConfig, store.RelayEvents)
	if err := lessonRelay(db).Insert(context.Background(), store.NewEvent{ID: "E-41", Type: "CreditAwarded", Payload: `{"cents":1000}`}, 0); err != nil {
		tb.Fatal(err)
	}
	return db, path
}

// lessonRelay is the relay service with the lesson's statements.
func lessonRelay(db *store.DB) *store.Relay { return store.NewRelay(db, store.RelayLesson) }

// relayWith is the relay service with one of the lesson's statements replaced.
func relayWith(db *store.DB, edit func(s *store.RelaySQL)) *store.Relay {
	s := store.RelayLesson
	edit(&s)
	return store.NewRelay(db, s)
}

func mustEvent(tb testing.TB, db *store.DB, id string) store.Event {
	tb.Helper()
	e, ok, err := lessonRelay(db).EventByID(context.Background(), id)
	if err != nil || !ok {
		tb.Fatalf("EventByID(%s) = %v, %v", id, ok, err)
	}
	return e
}

func TestClaimEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name    string
		setup   func(t *testing.T, db *store.DB) // before the claim under test
		id      string
		now     int64
		want    store.ClaimOutcome
		rows    int64
		token   int64
		heldBy  string
		leaseTo int64
	}{
		{name: "OK", id: "E-41", now: 100, want: store.Claimed, rows: 1, token: 1, leaseTo: 150},
		{name: "BlockedByLiveLease", id: "E-41", now: 149, want: store.Blocked, heldBy: "Worker-A", leaseTo: 150,
			setup: func(t *testing.T, db *store.DB) { mustClaim(t, db, "Worker-A", 100, 150) }},
		{name: "ReclaimAtExpiryIncrementsToken", id: "E-41", now: 150, want: store.Claimed, rows: 1, token: 2, leaseTo: 200,
			setup: func(t *testing.T, db *store.DB) { mustClaim(t, db, "Worker-A", 100, 150) }},
		{name: "DeliveredNotReclaimable", id: "E-41", now: 500, want: store.Done,
			setup: func(t *testing.T, db *store.DB) {
				c := mustClaim(t, db, "Worker-A", 100, 150)
				if f, err := lessonRelay(db).Complete(ctx, "E-41", c.Token, 120); err != nil || f.Rows != 1 {
					t.Fatalf("ack = %+v, %v", f, err)
				}
			}},
		{name: "UnknownEventEmpty", id: "E-99", now: 100, want: store.Empty},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db, _ := mustOpenRelayDB(t)
			if tt.setup != nil {
				tt.setup(t, db)
			}
			c, err := lessonRelay(db).Claim(ctx, tt.id, tt.now, store.EventLease{Owner: "Worker-B", Until: tt.now + 50})
			if err != nil {
				t.Fatal(err)
			}
			if c.Outcome != tt.want || c.Rows != tt.rows || c.Token != tt.token || c.HeldBy != tt.heldBy || c.LeaseUntil != tt.leaseTo {
				t.Fatalf("claim = %+v, want outcome %s rows %d token %d held by %q lease %d", c, tt.want, tt.rows, tt.token, tt.heldBy, tt.leaseTo)
			}
		})
	}
}

func mustClaim(tb testing.TB, db *store.DB, relay string, now, until int64) store.EventClaim {
	tb.Helper()
	c, err := lessonRelay(db).Claim(context.Background(), "E-41", now, store.EventLease{Owner: relay, Until: until})
	if err != nil || c.Outcome != store.Claimed {
		tb.Fatalf("claim by %s at %d = %+v, %v", relay, now, c, err)
	}
	return c
}

// TestTokenIncrementsPerClaim: every successful claim gets a new token,
// whoever claims; failed claims do not consume one.
func TestTokenIncrementsPerClaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := mustOpenRelayDB(t)
	steps := []struct {
		relay string
		now   int64
		want  store.ClaimOutcome
		token int64
	}{
		{"Worker-A", 0, store.Claimed, 1},
		{"Worker-B", 5, store.Blocked, 0},
		{"Worker-A", 10, store.Claimed, 2}, // the same worker again: still a new token
		{"Worker-B", 20, store.Claimed, 3},
	}
	for _, s := range steps {
		c, err := lessonRelay(db).Claim(ctx, "E-41", s.now, store.EventLease{Owner: s.relay, Until: s.now + 10})
		if err != nil {
			t.Fatal(err)
		}
		if c.Outcome != s.want || c.Token != s.token {
			t.Fatalf("t=%d %s: claim = %+v, want %s token %d", s.now, s.relay, c, s.want, s.token)
		}
	}
	if e := mustEvent(t, db, "E-41"); e.Token != 3 || e.LockedBy != "Worker-B" || e.LeaseUntil != 30 {
		t.Fatalf("event = %+v", e)
	}
}

func TestClaimNextEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := mustOpenRelayDB(t)
	if err := lessonRelay(db).Insert(ctx, store.NewEvent{ID: "E-42", Type: "CreditAwarded", Payload: "{}"}, 1); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		outcome store.ClaimOutcome
		id      string
	}{{store.Claimed, "E-41"}, {store.Claimed, "E-42"}, {store.Empty, ""}}
	for i, w := range want {
		c, err := lessonRelay(db).ClaimNext(ctx, 10, store.EventLease{Owner: "Worker-A", Until: 20})
		if err != nil {
			t.Fatal(err)
		}
		if c.Outcome != w.outcome || c.EventID != w.id {
			t.Fatalf("claim %d = %+v, want %s %s", i, c, w.outcome, w.id)
		}
	}
	// At t=20 both leases have expired: E-41, the oldest, comes first again.
	c, err := lessonRelay(db).ClaimNext(ctx, 20, store.EventLease{Owner: "Worker-B", Until: 30})
	if err != nil || c.Outcome != store.Claimed || c.EventID != "E-41" || c.Token != 2 {
		t.Fatalf("claim after expiry = %+v, %v", c, err)
	}
}

// TestAckFencing is session 16 at the store level: the stale owner's ack
// changes 0 rows, the current owner's 1, and the delivered event stays done.
func TestAckFencing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name      string
		complete  store.Stmt
		staleRows int64
		curRows   int64
	}{
		{name: "WithToken", complete: store.CompleteWithToken, staleRows: 0, curRows: 1},
		{name: "ByEventIDMistake", complete: store.CompleteByEventID, staleRows: 1, curRows: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db, _ := mustOpenRelayDB(t)
			relay := relayWith(db, func(s *store.RelaySQL) { s.Complete = tt.complete })
			a := mustClaim(t, db, "Worker-A", 100, 150)
			b := mustClaim(t, db, "Worker-B", 150, 200)
			stale, err := relay.Complete(ctx, "E-41", a.Token, 160)
			if err != nil {
				t.Fatal(err)
			}
			cur, err := relay.Complete(ctx, "E-41", b.Token, 170)
			if err != nil {
				t.Fatal(err)
			}
			if stale.Rows != tt.staleRows || cur.Rows != tt.curRows {
				t.Fatalf("stale ack %d rows, current ack %d rows; want %d, %d", stale.Rows, cur.Rows, tt.staleRows, tt.curRows)
			}
			e := mustEvent(t, db, "E-41")
			if !e.Delivered || e.DeliveredAt != 160+10*tt.curRows {
				t.Fatalf("event = %+v", e)
			}
			again, err := lessonRelay(db).Complete(ctx, "E-41", b.Token, 180)
			if err != nil || again.Rows != 0 {
				t.Fatalf("second ack = %+v, %v; want 0 rows", again, err)
			}
			c, err := lessonRelay(db).Claim(ctx, "E-41", 1000, store.EventLease{Owner: "Worker-C", Until: 1050})
			if err != nil || c.Outcome != store.Done || c.Rows != 0 {
				t.Fatalf("claim of delivered event = %+v, %v", c, err)
			}
		})
	}
}

// TestFixedTokenMistake: a claim that stamps a fixed token gives two owners
// the same token, and the stale owner's ack goes through.
func TestFixedTokenMistake(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := mustOpenRelayDB(t)
	relay := relayWith(db, func(s *store.RelaySQL) { s.Claim = store.ClaimWithFixedToken })
	steps := []struct {
		worker     string
		now, until int64
		want       store.ClaimOutcome
		token      int64
	}{
		{"Worker-A", 100, 150, store.Claimed, 1},
		{"Worker-B", 120, 170, store.Blocked, 0}, // A's lease is live
		{"Worker-B", 150, 200, store.Claimed, 1}, // the same token as A's
	}
	for _, s := range steps {
		c, err := relay.Claim(ctx, "E-41", s.now, store.EventLease{Owner: s.worker, Until: s.until})
		if err != nil || c.Outcome != s.want || c.Token != s.token {
			t.Fatalf("t=%d %s: claim = %+v, %v; want %s token %d", s.now, s.worker, c, err, s.want, s.token)
		}
	}
	stale, err := lessonRelay(db).Complete(ctx, "E-41", 1, 160)
	if err != nil || stale.Rows != 1 {
		t.Fatalf("stale ack = %+v, %v; the mistake lets it through", stale, err)
	}
}

// TestRenewLease runs each renewal statement against the same situations:
// the owner's token and a stale one, a longer and a shorter deadline, a live
// lease and one that has expired (now = lease_until).
func TestRenewLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	renewals := map[string]store.Stmt{
		"guarded":          store.RenewLease,
		"by-event-id":      store.RenewByEventID,
		"allow-shortening": store.RenewAllowShortening,
		"after-expiry":     store.RenewAfterExpiry,
	}
	// The event is claimed with token 1, lease until 150.
	cases := []struct {
		name          string
		token         int64
		now, proposed int64
		delivered     bool
		rows          map[string]int64 // by renewal
	}{
		{"LiveLonger", 1, 130, 200, false, map[string]int64{"guarded": 1, "by-event-id": 1, "allow-shortening": 1, "after-expiry": 1}},
		{"StaleToken", 0, 130, 200, false, map[string]int64{"guarded": 0, "by-event-id": 1, "allow-shortening": 0, "after-expiry": 0}},
		{"Shorter", 1, 120, 140, false, map[string]int64{"guarded": 0, "by-event-id": 0, "allow-shortening": 1, "after-expiry": 0}},
		{"SameDeadline", 1, 120, 150, false, map[string]int64{"guarded": 0, "by-event-id": 0, "allow-shortening": 1, "after-expiry": 0}},
		{"AtExpiry", 1, 150, 250, false, map[string]int64{"guarded": 0, "by-event-id": 0, "allow-shortening": 0, "after-expiry": 1}},
		{"AfterExpiry", 1, 180, 250, false, map[string]int64{"guarded": 0, "by-event-id": 0, "allow-shortening": 0, "after-expiry": 1}},
		{"Delivered", 1, 130, 200, true, map[string]int64{"guarded": 0, "by-event-id": 0, "allow-shortening": 0, "after-expiry": 0}},
	}
	for _, tc := range cases {
		for name, renew := range renewals {
			t.Run(tc.name+"/"+name, func(t *testing.T) {
				t.Parallel()
				db, _ := mustOpenRelayDB(t)
				mustClaim(t, db, "Worker-A", 100, 150)
				if tc.delivered {
					if f, err := lessonRelay(db).Complete(ctx, "E-41", 1, 110); err != nil || f.Rows != 1 {
						t.Fatalf("ack = %+v, %v", f, err)
					}
				}
				f, err := relayWith(db, func(s *store.RelaySQL) { s.Renew = renew }).Renew(ctx, "E-41", tc.now, store.EventLease{Token: tc.token, Until: tc.proposed})
				if err != nil {
					t.Fatal(err)
				}
				if f.Rows != tc.rows[name] {
					t.Fatalf("rows = %d, want %d", f.Rows, tc.rows[name])
				}
				want := int64(150)
				if f.Rows == 1 {
					want = tc.proposed
				}
				if e := mustEvent(t, db, "E-41"); e.LeaseUntil != want {
					t.Fatalf("lease_until = %d, want %d", e.LeaseUntil, want)
				}
			})
		}
	}
}

// TestInsertEventTx: the event commits or rolls back with the caller's
// transaction.
func TestInsertEventTx(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := mustOpenRelayDB(t)
	_, err := db.InTx(ctx, func(tx *sql.Tx) error {
		if err := lessonRelay(db).InsertTx(ctx, tx, store.NewEvent{ID: "E-42", Type: "T", Payload: "{}"}, 5); err != nil {
			return err
		}
		return sql.ErrTxDone // any error rolls back
	})
	if err == nil {
		t.Fatal("InTx succeeded, want the rollback error")
	}
	if _, ok, err := lessonRelay(db).EventByID(ctx, "E-42"); err != nil || ok {
		t.Fatalf("rolled-back event present = %v, %v", ok, err)
	}
	if err := lessonRelay(db).Insert(ctx, store.NewEvent{ID: "E-41", Type: "T", Payload: "{}"}, 5); err == nil {
		t.Fatal("duplicate event id accepted")
	}
	events, err := lessonRelay(db).Events(ctx)
	if err != nil || len(events) != 1 || events[0].ID != "E-41" || events[0].Token != 0 || events[0].Delivered {
		t.Fatalf("events = %+v, %v", events, err)
	}
}

// TestRelayBusyCounted: a claim that meets another connection's write
// transaction retries SQLITE_BUSY and reports it, rather than failing.
func TestRelayBusyCounted(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a safety net, not a synchronisation
	defer cancel()
	_, path := mustOpenRelayDB(t)
	holder, err := store.Open(ctx, path, store.Config{BusyTimeout: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	// The handshake: the claimer's first SQLITE_BUSY releases the holder.
	backoff := make(chan struct{})
	var once sync.Once
	onBusy := func() { once.Do(func() { close(backoff) }) }
	claimer, err := store.Open(ctx, path, store.Config{BusyTimeout: time.Millisecond, OnBusy: onBusy})
	if err != nil {
		t.Fatal(err)
	}
	defer claimer.Close()

	locked, done := make(chan struct{}), make(chan error, 1)
	go func() {
		_, err := holder.InTx(ctx, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, "UPDATE outbox_events SET payload = payload"); err != nil {
				return err
			}
			close(locked)
			<-backoff // the claimer has met our lock and backs off
			return nil
		})
		done <- err
	}()
	<-locked
	c, err := lessonRelay(claimer).Claim(ctx, "E-41", 0, store.EventLease{Owner: "Worker-A", Until: 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if c.Outcome != store.Claimed || c.Stats.BusyRetries == 0 {
		t.Fatalf("claim = %+v, want claimed after at least one SQLITE_BUSY retry", c)
	}
	f, err := lessonRelay(claimer).Complete(ctx, "E-41", c.Token, 5)
	if err != nil || f.Rows != 1 {
		t.Fatalf("ack = %+v, %v", f, err)
	}
}

// TestRelayDatabaseErrorIsAnError: a write on a closed connection is an
// error, never a 0-row outcome, so callers can tell it from a lost lease.
func TestRelayDatabaseErrorIsAnError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := mustOpenRelayDB(t)
	c := mustClaim(t, db, "Worker-A", 0, 10)
	db.Close()
	if f, err := lessonRelay(db).Complete(ctx, "E-41", c.Token, 5); err == nil {
		t.Fatalf("ack on a closed connection = %+v, want an error", f)
	}
	if f, err := lessonRelay(db).Renew(ctx, "E-41", 5, store.EventLease{Token: c.Token, Until: 20}); err == nil {
		t.Fatalf("renew on a closed connection = %+v, want an error", f)
	}
}

// TestClaimEventConcurrent: two relays, each on its own connection, claim
// the same event at the same logical time, round after round; exactly one
// wins each round and every win gets the next token.
func TestClaimEventConcurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, path := mustOpenRelayDB(t)
	relays := map[string]*store.DB{}
	for _, name := range []string{"Relay-A", "Relay-B"} {
		db, err := store.Open(ctx, path, store.DefaultConfig)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		relays[name] = db
	}
	const rounds = 30
	for round := int64(1); round <= rounds; round++ {
		now := round * 100 // every earlier lease (now+50) has expired
		results := make(chan store.EventClaim, len(relays))
		errs := make(chan error, len(relays))
		for name, db := range relays {
			go func() {
				c, err := lessonRelay(db).Claim(ctx, "E-41", now, store.EventLease{Owner: name, Until: now + 50})
				results <- c
				errs <- err
			}()
		}
		var claimed []store.EventClaim
		for range relays {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
			if c := <-results; c.Outcome == store.Claimed {
				claimed = append(claimed, c)
			} else if c.Outcome != store.Blocked {
				t.Fatalf("round %d: loser's outcome %s, want blocked", round, c.Outcome)
			}
		}
		if len(claimed) != 1 || claimed[0].Token != round {
			t.Fatalf("round %d: claims %+v, want exactly one with token %d", round, claimed, round)
		}
	}
}

// TestRelayStatements: every statement of the lesson's set is named, and
// each mistake names the lesson statement it replaces and what it changed.
func TestRelayStatements(t *testing.T) {
	t.Parallel()
	l := store.RelayLesson
	for _, s := range []store.Stmt{l.Insert, l.SelectNext, l.Claim, l.ReadClaim, l.Complete, l.Renew, l.Event, l.Events} {
		if s.Name == "" || s.SQL == "" || s.Replaces != nil {
			t.Errorf("lesson statement %+v: want a name, SQL and no Replaces", s)
		}
	}
	mistakes := []struct {
		mistake, replaces store.Stmt
	}{
		{store.ClaimWithFixedToken, l.Claim},
		{store.CompleteByEventID, l.Complete},
		{store.RenewByEventID, l.Renew},
		{store.RenewAllowShortening, l.Renew},
		{store.RenewAfterExpiry, l.Renew},
	}
	for _, m := range mistakes {
		if m.mistake.Replaces == nil || m.mistake.Replaces.SQL != m.replaces.SQL || m.mistake.Mistake == "" {
			t.Errorf("mistake %q: replaces %v, says %q; want it to replace %q and say what changed",
				m.mistake.Name, m.mistake.Replaces, m.mistake.Mistake, m.replaces.Name)
		}
	}
}
