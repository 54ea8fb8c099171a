package store

import (
	"context"
	"testing"
)

// TestDatabaseClockOnPostgres: on PostgreSQL db_now() is the server's
// clock, one for every connection, which only the lab moves; an
// instance's SyncProcessClock leaves it alone. The ack meets a row lock
// held past its lock_timeout as an error, and succeeds once it is freed.
func TestDatabaseClockOnPostgres(t *testing.T) {
	t.Parallel()
	url, schema := pgSchema(t)
	ctx := context.Background()
	open := func() *DB {
		db, err := OpenPostgres(ctx, url, schema, Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	lab, worker := open(), open()
	if err := lab.Migrate(ctx, RelayEvents); err != nil {
		t.Fatal(err)
	}
	if err := lab.InstallDatabaseClock(ctx, 1000); err != nil {
		t.Fatal(err)
	}
	r := NewClockRelay(worker, ClockLesson)
	if err := r.Insert(ctx, NewEvent{ID: "e1", Type: "T", Payload: "{}"}, 1000); err != nil {
		t.Fatal(err)
	}
	if err := worker.SyncProcessClock(99999); err != nil {
		t.Fatal(err)
	}
	c, err := r.Claim(ctx, "e1", "N", 99999, 500)
	if err != nil || c.Outcome != Claimed || c.LeaseUntil != 1500 {
		t.Fatalf("claim = %+v, %v; want claimed until 1500 on the server's clock", c, err)
	}
	held, err := NewClockRelay(lab, ClockLesson).Hold(ctx, "e1")
	if err != nil {
		t.Fatal(err)
	}
	if f, err := r.Ack(ctx, "e1", c.Token); err == nil || !IsBusy(err) {
		t.Fatalf("ack under the held row lock = %+v, %v; want lock_timeout", f, err)
	}
	if err := held.Release(); err != nil {
		t.Fatal(err)
	}
	if err := lab.MoveDatabaseClock(ctx, 1500); err != nil {
		t.Fatal(err)
	}
	if f, err := r.Ack(ctx, "e1", c.Token); err != nil || f.Rows != 0 {
		t.Fatalf("ack at the lease end = %+v, %v; want 0 rows", f, err)
	}
	if err := lab.MoveDatabaseClock(ctx, 1200); err != nil {
		t.Fatal(err)
	}
	if f, err := r.Ack(ctx, "e1", c.Token); err != nil || f.Rows != 1 {
		t.Fatalf("ack inside the lease = %+v, %v; want 1 row", f, err)
	}
}
