package store_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outboxlab/outboxlab/store"
)

// openClocked opens the SQLite database at path with a database clock of
// its own, set to now.
func openClocked(t *testing.T, path string, now int64) *store.DB {
	t.Helper()
	clock := store.NewDatabaseClock()
	clock.Set(now)
	db, err := store.Open(store.WithDatabaseClock(context.Background(), clock), path, store.DefaultConfig)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// freshClockDB is a new relay database with event e1, and a connection
// whose database clock reads now.
func freshClockDB(t *testing.T, now int64) (*store.DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "lab.db")
	db := openClocked(t, path, now)
	ctx := context.Background()
	if err := db.Migrate(ctx, store.RelayEvents); err != nil {
		t.Fatal(err)
	}
	if err := store.NewClockRelay(db, store.ClockLesson).Insert(ctx, store.NewEvent{ID: "e1", Type: "T", Payload: "{}"}, now); err != nil {
		t.Fatal(err)
	}
	return db, path
}

// TestDatabaseClockIsPerConnection: db_now() answers the clock the
// connection was opened with, so two connections of one process can stand
// for two processes' clocks; a connection opened without one has no
// db_now() at all.
func TestDatabaseClockIsPerConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, path := freshClockDB(t, 0)
	b := openClocked(t, path, 1000)
	ra, rb := store.NewClockRelay(a, store.ClockLesson), store.NewClockRelay(b, store.ClockLesson)
	c, err := ra.Claim(ctx, "e1", "A", 0, 500)
	if err != nil || c.Outcome != store.Claimed || c.LeaseUntil != 500 {
		t.Fatalf("A's claim at 0 = %+v, %v; want claimed until 500", c, err)
	}
	if err := a.SyncProcessClock(400); err != nil {
		t.Fatal(err)
	}
	if c, err := ra.Claim(ctx, "e1", "A2", 0, 500); err != nil || c.Outcome != store.Blocked || c.HeldBy != "A" {
		t.Fatalf("a claim at 400 = %+v, %v; want blocked by A", c, err)
	}
	if c, err := rb.Claim(ctx, "e1", "B", 0, 500); err != nil || c.Outcome != store.Claimed || c.LeaseUntil != 1500 {
		t.Fatalf("B's claim at 1000 = %+v, %v; want claimed until 1500", c, err)
	}
	plain, err := store.Open(ctx, path, store.DefaultConfig)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := store.NewClockRelay(plain, store.ClockLesson).Renew(ctx, "e1", 2, 500); err == nil || !strings.Contains(err.Error(), "db_now") {
		t.Fatalf("a renewal without a database clock: err = %v, want no such function db_now", err)
	}
	if err := plain.SyncProcessClock(5); err != store.ErrNoDatabaseClock {
		t.Fatalf("SyncProcessClock without a clock = %v", err)
	}
}

// TestClaimOnWorkerClock: the mistake writes and compares the worker's
// own clock, so a fast worker takes a lease the database's clock says is
// live.
func TestClaimOnWorkerClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := freshClockDB(t, 0)
	r := store.NewClockRelay(db, store.ClockSQL{Claim: store.ClaimOnWorkerClock, ReadClaim: store.ReadClaim, Event: store.EventByID})
	if c, err := r.Claim(ctx, "e1", "S", -300, 500); err != nil || c.LeaseUntil != 200 {
		t.Fatalf("the slow worker's claim = %+v, %v; want lease until 200", c, err)
	}
	if err := db.SyncProcessClock(100); err != nil {
		t.Fatal(err)
	}
	if c, err := r.Claim(ctx, "e1", "F", 400, 500); err != nil || c.Outcome != store.Claimed || c.LeaseUntil != 900 {
		t.Fatalf("the fast worker's claim at 100 = %+v, %v; want claimed until 900", c, err)
	}
}

// TestAckFailsWhileAnotherTransactionHoldsTheLock: the ack tries once; a
// lock held past the busy timeout is an error, not a wait without end,
// and once the lock is released the same ack changes its row.
func TestAckFailsWhileAnotherTransactionHoldsTheLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, path := freshClockDB(t, 0)
	worker := openClocked(t, path, 0)
	c, err := store.NewClockRelay(worker, store.ClockLesson).Claim(ctx, "e1", "N", 0, 5000)
	if err != nil || c.Outcome != store.Claimed {
		t.Fatalf("claim = %+v, %v", c, err)
	}
	held, err := store.NewClockRelay(db, store.ClockLesson).Hold(ctx, "e1")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	f, err := store.NewClockRelay(worker, store.ClockLesson).Ack(ctx, "e1", c.Token)
	if err == nil || !store.IsBusy(err) {
		t.Fatalf("ack under the held lock = %+v, %v; want SQLITE_BUSY", f, err)
	}
	if waited := time.Since(start); waited < store.DefaultConfig.BusyTimeout/2 {
		t.Fatalf("the ack gave up after %s, before its busy timeout", waited)
	}
	if err := held.Release(); err != nil {
		t.Fatal(err)
	}
	if f, err := store.NewClockRelay(worker, store.ClockLesson).Ack(ctx, "e1", c.Token); err != nil || f.Rows != 1 {
		t.Fatalf("the retried ack = %+v, %v; want 1 row", f, err)
	}
}

// TestRenewalAtTheLeaseEnd: at the instant the lease ends the owner's
// renewal changes nothing, whatever the order; after another worker's
// claim only the renewal without the token still changes a row.
func TestRenewalAtTheLeaseEnd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := freshClockDB(t, 1000)
	r := store.NewClockRelay(db, store.ClockLesson)
	token, until, err := r.Stage(ctx, "e1", "S")
	if err != nil || until != 1000 {
		t.Fatalf("stage = %d, %d, %v; want the lease ending at 1000", token, until, err)
	}
	if f, err := r.Renew(ctx, "e1", token, 500); err != nil || f.Rows != 0 {
		t.Fatalf("renewal at the lease end = %+v, %v; want 0 rows", f, err)
	}
	if c, err := r.Claim(ctx, "e1", "F", 1000, 500); err != nil || c.Outcome != store.Claimed {
		t.Fatalf("claim at the lease end = %+v, %v", c, err)
	}
	if f, err := r.Renew(ctx, "e1", token, 500); err != nil || f.Rows != 0 {
		t.Fatalf("stale renewal after the claim = %+v, %v; want 0 rows", f, err)
	}
	byID := store.NewClockRelay(db, store.ClockSQL{Renew: store.RenewOnDatabaseClockByEventID})
	if f, err := byID.Renew(ctx, "e1", token, 500); err != nil || f.Rows != 1 {
		t.Fatalf("renewal by event id after the claim = %+v, %v; want 1 row", f, err)
	}
}
