package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/outboxlab/outboxlab/store"
)

// TestServerActivity: on PostgreSQL the write-ahead log moves with a
// write, a forced checkpoint is counted as requested, and Since keeps the
// counters' differences; on SQLite both calls refuse.
func TestServerActivity(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		ctx := context.Background()
		setup, _ := pgBacklog(t, 50)
		before, err := setup.ServerActivity(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cl := newClaimer(t, setup, "w", store.SkipLockedScale)
		claimN(t, cl, benchStart, time.Minute, 10, 10)
		if err := setup.Checkpoint(ctx); err != nil {
			t.Fatal(err)
		}
		var d store.ServerActivity
		for range 500 { // the checkpointer reports itself just after it wakes the caller
			after, err := setup.ServerActivity(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if d = after.Since(before); d.CheckpointsRequested >= 1 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		if d.CheckpointsRequested < 1 || d.WALBytes <= 0 || d.CheckpointsTimed < 0 {
			t.Fatalf("activity since: %+v, want a requested checkpoint and some WAL", d)
		}
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		db, _ := openBacklog(t, 1)
		if _, err := db.ServerActivity(context.Background()); err == nil {
			t.Error("ServerActivity on SQLite: want an error")
		}
		if err := db.Checkpoint(context.Background()); err == nil {
			t.Error("Checkpoint on SQLite: want an error")
		}
	})
}
