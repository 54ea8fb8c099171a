package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxlab/outboxlab/internal/pgtest"
	"github.com/outboxlab/outboxlab/internal/progress"
	"github.com/outboxlab/outboxlab/store"
)

// failAtCommitSQL makes every transaction that updates OutboxMessages
// fail at COMMIT, after the fetch read its rows: the update inserts a row
// whose deferred foreign key has no parent.
var failAtCommitSQL = map[store.Engine]string{
	store.SQLite: `
CREATE TABLE NoParent (Id INTEGER PRIMARY KEY);
CREATE TABLE FailAtCommit (ParentId INTEGER REFERENCES NoParent (Id) DEFERRABLE INITIALLY DEFERRED);
CREATE TRIGGER FailAtCommitOnUpdate AFTER UPDATE ON OutboxMessages
BEGIN INSERT INTO FailAtCommit VALUES (-1); END;`,
	store.Postgres: `
CREATE TABLE NoParent (Id integer PRIMARY KEY);
CREATE TABLE FailAtCommit (ParentId integer REFERENCES NoParent (Id) DEFERRABLE INITIALLY DEFERRED);
CREATE FUNCTION fail_at_commit() RETURNS trigger LANGUAGE plpgsql
  AS 'BEGIN INSERT INTO FailAtCommit VALUES (-1); RETURN NULL; END';
CREATE TRIGGER FailAtCommitOnUpdate AFTER UPDATE ON OutboxMessages
  FOR EACH STATEMENT EXECUTE FUNCTION fail_at_commit();`,
}

// TestFetchAheadDrainEndsWhenFetchesFail: every fetch reads its rows and
// fails at COMMIT. The fetcher gives its workers back, gives up after
// maxConsecutiveErrors fetches, and the drain ends with the fetch's error
// and every message lost. Before the fix a failed fetch gave back only the
// slots of the messages it did not return, so with one worker the fetcher
// waited for a free worker for ever (here: until the test's deadline).
func TestFetchAheadDrainEndsWhenFetchesFail(t *testing.T) {
	const messages = 20
	tests := []struct {
		engine  store.Engine
		workers int
	}{
		{store.SQLite, 1},
		{store.SQLite, 3},
		{store.Postgres, 1},
		{store.Postgres, 3},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/workers=%d", tt.engine, tt.workers), func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Dir = t.TempDir()
			if tt.engine == store.Postgres {
				cfg.Database = pgtest.URL(t)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			c := cell{claim: FetchAheadClaim, messages: messages, workers: tt.workers}
			src, err := newSource(ctx, cfg, "fail-at-commit")
			if err != nil {
				t.Fatal(err)
			}
			defer src.cleanup()
			p := progress.New(&strings.Builder{}, "bench")
			setup, err := seedCell(ctx, c, src, p)
			if err != nil {
				t.Fatal(err)
			}
			defer setup.Close()
			if err := setup.Migrate(ctx, store.Migration{Name: "test: fail at commit", SQL: failAtCommitSQL[tt.engine]}); err != nil {
				t.Fatal(err)
			}
			tallies, d, err := drainFetchAhead(ctx, cfg, c, src, make([]atomic.Uint32, messages+1), p)
			if ctx.Err() != nil {
				t.Fatalf("the drain ran until the test's deadline (%v): the fetcher hung", ctx.Err())
			}
			if err == nil || errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "FOREIGN KEY") && !strings.Contains(err.Error(), "23503") {
				t.Fatalf("drain error %v, want the fetch's failed COMMIT", err)
			}
			if d.process == nil || d.process.errors != maxConsecutiveErrors || d.finalized != 0 || d.fetches != 0 {
				t.Fatalf("drain %+v (fetcher %+v), want %d fetch errors and nothing completed", d, d.process, maxConsecutiveErrors)
			}
			for i, w := range tallies {
				if w.finalized != 0 {
					t.Errorf("worker %d worked %d messages of failed fetches", i+1, w.finalized)
				}
			}
			if n, err := setup.Count(context.Background(), store.CountUnprocessed.SQL); err != nil || n != messages {
				t.Fatalf("unprocessed %d, %v; want all %d", n, err, messages)
			}
		})
	}
}
