package store_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxlab/outboxlab/store"
)

// fetchAheadEngines are the engines every fetch-ahead test runs on; the
// PostgreSQL one skips without a test server (see internal/pgtest).
var fetchAheadEngines = []store.Engine{store.SQLite, store.Postgres}

// fetchAheadBacklog makes a fresh database of engine with session 21's
// schema and n Pending messages; open opens another connection to it, as
// another process would, closed when t ends.
func fetchAheadBacklog(t *testing.T, engine store.Engine, n int) (setup *store.DB, open func() *store.DB) {
	t.Helper()
	if engine == store.Postgres {
		return pgBacklog(t, n)
	}
	setup, path := openBacklog(t, n)
	return setup, func() *store.DB {
		db, err := store.Open(context.Background(), path, store.DefaultConfig)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
}

// newFetcher and newCompleter prepare owner's fetch-ahead services of
// design s on db, closed at cleanup.
func newFetcher(t *testing.T, db *store.DB, owner string, s store.FetchAheadSQL) *store.Fetcher {
	t.Helper()
	f, err := store.NewFetcher(context.Background(), db, owner, store.FetchAheadConfig{SQL: s, Retry: store.DefaultRetry})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func newCompleter(t *testing.T, db *store.DB, owner string, s store.FetchAheadSQL) *store.Completer {
	t.Helper()
	c, err := store.NewCompleter(context.Background(), db, owner, store.FetchAheadConfig{SQL: s, Retry: store.DefaultRetry})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// fetchN fetches limit messages for f at now and fails unless it got want.
func fetchN(t *testing.T, f *store.Fetcher, now time.Time, lease time.Duration, limit, want int) []store.ClaimedMessage {
	t.Helper()
	b, err := f.Fetch(context.Background(), now, lease, limit)
	if err != nil || len(b.Messages) != want {
		t.Fatalf("fetch %d: %v, got %+v, want %d messages", limit, err, b.Messages, want)
	}
	return b.Messages
}

// TestFetchAheadTokensPerClaim: one fetch takes up to its limit, oldest
// first, each message with its own token and lease; a message fetched
// again after its lease ran out gets the next token, so every (message,
// token) pair is one claim.
func TestFetchAheadTokensPerClaim(t *testing.T) {
	for _, engine := range fetchAheadEngines {
		t.Run(string(engine), func(t *testing.T) {
			t.Parallel()
			_, open := fetchAheadBacklog(t, engine, 5)
			a := newFetcher(t, open(), "Process-A", store.FetchAhead)
			b := newFetcher(t, open(), "Process-B", store.FetchAhead)
			first := fetchN(t, a, benchStart, time.Minute, 3, 3)
			second := fetchN(t, b, benchStart, time.Minute, 8, 2) // the other two; A's three are leased
			later := benchStart.Add(2 * time.Minute)
			again := fetchN(t, b, later, time.Minute, 8, 5) // every lease ran out
			type claim struct{ id, token int64 }
			seen := map[claim]bool{}
			for i, m := range slices.Concat(first, second) {
				if m.ID != int64(i+1) || m.Token != 1 || m.LockedUntil != "2026-01-15T08:01:00.000Z" {
					t.Fatalf("first fetches not oldest first, token 1, own lease: %+v %+v", first, second)
				}
				seen[claim{m.ID, m.Token}] = true
			}
			for i, m := range again {
				if m.ID != int64(i+1) || m.Token != 2 || m.LockedUntil != "2026-01-15T08:03:00.000Z" {
					t.Fatalf("refetch after expiry: %+v, want tokens 2", again)
				}
				if seen[claim{m.ID, m.Token}] {
					t.Fatalf("claim %+v seen twice", m)
				}
				seen[claim{m.ID, m.Token}] = true
			}
			if len(seen) != 10 {
				t.Fatalf("%d distinct (message, token) claims, want 10", len(seen))
			}
		})
	}
}

// TestFetchAheadCompleteGuardsEachRow: Process-A fetches three messages
// and its completer stalls past the lease; another fetch takes message 1
// (token 2). A's batch completion then arrives. The fenced completion
// refuses message 1 and counts it, and the new owner completes it; River's
// status-only guard lets A's stale completion through, and the new
// owner's own completion is refused: its result is lost. With the same
// owner name (a restarted process) only the token tells them apart.
func TestFetchAheadCompleteGuardsEachRow(t *testing.T) {
	tests := []struct {
		name          string
		design        store.FetchAheadSQL
		newOwner      string
		staleDone     int // A's completion: rows changed
		staleRefused  int // A's completion: rows refused
		currentRefuse int // the new owner's completion of message 1: refused
	}{
		{"Fenced/OtherOwner", store.FetchAhead, "Process-B", 2, 1, 0},
		{"Fenced/SameOwner", store.FetchAhead, "Process-A", 2, 1, 0},
		{"StatusOnly/OtherOwner", store.FetchAheadStatusOnly, "Process-B", 3, 0, 1},
		{"StatusOnly/SameOwner", store.FetchAheadStatusOnly, "Process-A", 3, 0, 1},
	}
	for _, engine := range fetchAheadEngines {
		for _, tt := range tests {
			t.Run(string(engine)+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				setup, open := fetchAheadBacklog(t, engine, 3)
				a := open()
				stale := fetchN(t, newFetcher(t, a, "Process-A", tt.design), benchStart, time.Minute, 3, 3)
				later := benchStart.Add(2 * time.Minute)
				b := open()
				taken := fetchN(t, newFetcher(t, b, tt.newOwner, tt.design), later, time.Hour, 1, 1)
				if taken[0].ID != 1 || taken[0].Token != 2 {
					t.Fatalf("the new fetch took %+v, want message 1 under token 2", taken)
				}
				f, err := newCompleter(t, a, "Process-A", tt.design).Complete(ctx, stale, later)
				if err != nil || len(f.Finalized) != tt.staleDone || len(f.Rejected) != tt.staleRefused {
					t.Fatalf("stale completion: %v %+v, want %d completed, %d refused", err, f, tt.staleDone, tt.staleRefused)
				}
				if tt.staleRefused == 1 && f.Rejected[0] != 1 {
					t.Fatalf("refused %v, want message 1", f.Rejected)
				}
				cur, err := newCompleter(t, b, tt.newOwner, tt.design).Complete(ctx, taken, later.Add(time.Second))
				if err != nil || len(cur.Rejected) != tt.currentRefuse || len(cur.Finalized)+len(cur.Rejected) != 1 {
					t.Fatalf("current owner's completion: %v %+v, want %d refused", err, cur, tt.currentRefuse)
				}
				if n, err := setup.Count(ctx, store.CountUnprocessed.SQL); err != nil || n != 0 {
					t.Fatalf("unprocessed %d, %v", n, err)
				}
			})
		}
	}
}

// TestFetchAheadDrainsOnce: two processes, each one fetcher, four workers
// and one completer, drain a backlog together: every message is fetched
// once (its token is 1) and completed once, none is refused, none is left.
func TestFetchAheadDrainsOnce(t *testing.T) {
	const messages, processes, workers = 300, 2, 4
	for _, engine := range fetchAheadEngines {
		t.Run(string(engine), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			setup, open := fetchAheadBacklog(t, engine, messages)
			var mu sync.Mutex
			completed := map[int64]int{}
			var wg sync.WaitGroup
			errs := make(chan error, processes)
			for p := range processes {
				owner := fmt.Sprintf("Process-%d", p+1)
				db := open()
				fetcher := newFetcher(t, db, owner, store.FetchAhead)
				completer := newCompleter(t, db, owner, store.FetchAhead)
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs <- drainProcess(ctx, fetcher, completer, workers, func(ids []int64) {
						mu.Lock()
						defer mu.Unlock()
						for _, id := range ids {
							completed[id]++
						}
					})
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			if len(completed) != messages {
				t.Fatalf("%d messages completed, want %d", len(completed), messages)
			}
			for id, n := range completed {
				if n != 1 {
					t.Fatalf("message %d completed %d times", id, n)
				}
			}
			if n, err := setup.Count(ctx, store.CountReclaims.SQL); err != nil || n != 0 {
				t.Fatalf("claims beyond the first: %d, %v", n, err)
			}
			if n, err := setup.Count(ctx, store.CountUnprocessed.SQL); err != nil || n != 0 {
				t.Fatalf("unprocessed: %d, %v", n, err)
			}
		})
	}
}

// drainProcess is one process of the fetch-ahead shape, small: the fetcher
// fetches up to the free workers' count, the workers take one message at
// a time from a channel, and the completer completes what they finished in
// batches of up to 8, until a fetch finds nothing.
func drainProcess(ctx context.Context, fetcher *store.Fetcher, completer *store.Completer, workers int, onCompleted func([]int64)) error {
	work := make(chan store.ClaimedMessage, workers)
	finished := make(chan store.ClaimedMessage, workers)
	free := make(chan struct{}, workers)
	for range workers {
		free <- struct{}{}
	}
	var fetchErr, completeErr error
	go func() { // the fetcher
		defer close(work)
		for {
			<-free
			limit := 1
		more:
			for limit < workers {
				select {
				case <-free:
					limit++
				default:
					break more
				}
			}
			b, err := fetcher.Fetch(ctx, benchStart, time.Hour, limit)
			if err != nil {
				fetchErr = err
				return
			}
			for range limit - len(b.Messages) {
				free <- struct{}{}
			}
			if len(b.Messages) == 0 {
				return
			}
			for _, m := range b.Messages {
				work <- m
			}
		}
	}()
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for m := range work {
				finished <- m
				free <- struct{}{}
			}
		}()
	}
	go func() {
		wg.Wait()
		close(finished)
	}()
	var batch []store.ClaimedMessage
	flush := func() {
		if len(batch) == 0 || completeErr != nil {
			return
		}
		f, err := completer.Complete(ctx, batch, benchStart)
		if err == nil && len(f.Rejected) > 0 {
			err = fmt.Errorf("completion refused %v", f.Rejected)
		}
		completeErr = err
		onCompleted(f.Finalized)
		batch = batch[:0]
	}
	for m := range finished {
		if batch = append(batch, m); len(batch) == 8 {
			flush()
		}
	}
	flush()
	if fetchErr != nil {
		return fetchErr
	}
	return completeErr
}

// TestFetchAheadMistakeDropsOnlyTheGuard: River's status-only completion
// is the fenced completion less its two guard lines, on both engines, and
// is declared as the mistake that replaces it.
func TestFetchAheadMistakeDropsOnlyTheGuard(t *testing.T) {
	t.Parallel()
	lesson, m := store.FetchAheadComplete, store.FetchAheadCompleteIfProcessing
	if m.Replaces == nil || m.Replaces.Name != lesson.Name || m.Mistake == "" || !strings.Contains(m.Name, "MISTAKE") {
		t.Fatalf("%q must be a mistake that replaces %q", m.Name, lesson.Name)
	}
	guard := strings.NewReplacer("\n  AND OutboxMessages.LockedBy = :worker", "", "\n  AND OutboxMessages.ClaimToken = Done.Token", "")
	for _, text := range []struct{ lesson, mistake string }{{lesson.SQL, m.SQL}, {lesson.Postgres, m.Postgres}} {
		if got := guard.Replace(text.lesson); got != text.mistake {
			t.Errorf("the mistake is not the lesson less its guard:\n%s\n---\n%s", got, text.mistake)
		}
	}
	if store.FetchAhead.Fetch != store.FetchAheadStatusOnly.Fetch {
		t.Error("the mistake design must fetch as the lesson's does")
	}
}

// failAtCommit makes every transaction that updates OutboxMessages fail
// at COMMIT, after its statements succeeded and its rows were read: an
// update inserts a row whose deferred foreign key has no parent.
func failAtCommit(t *testing.T, engine store.Engine, setup *store.DB) {
	t.Helper()
	m := store.Migration{Name: "test: fail at commit", SQL: `
CREATE TABLE NoParent (Id INTEGER PRIMARY KEY);
CREATE TABLE FailAtCommit (ParentId INTEGER REFERENCES NoParent (Id) DEFERRABLE INITIALLY DEFERRED);
CREATE TRIGGER FailAtCommitOnUpdate AFTER UPDATE ON OutboxMessages
BEGIN INSERT INTO FailAtCommit VALUES (-1); END;`}
	if engine == store.Postgres {
		m.SQL = `
CREATE TABLE NoParent (Id integer PRIMARY KEY);
CREATE TABLE FailAtCommit (ParentId integer REFERENCES NoParent (Id) DEFERRABLE INITIALLY DEFERRED);
CREATE FUNCTION fail_at_commit() RETURNS trigger LANGUAGE plpgsql
  AS 'BEGIN INSERT INTO FailAtCommit VALUES (-1); RETURN NULL; END';
CREATE TRIGGER FailAtCommitOnUpdate AFTER UPDATE ON OutboxMessages
  FOR EACH STATEMENT EXECUTE FUNCTION fail_at_commit();`
	}
	if err := setup.Migrate(context.Background(), m); err != nil {
		t.Fatal(err)
	}
}

// TestClaimFailedAtCommitHoldsNoMessages: a fetch or claim whose
// statement read its rows and whose COMMIT then failed claimed nothing;
// it returns its error and no messages, so a caller that gives back a
// slot per message missing from a batch (the bench's fetcher) gives back
// them all. Before the fix the rolled-back rows came back with the error.
func TestClaimFailedAtCommitHoldsNoMessages(t *testing.T) {
	tests := []struct {
		name  string
		claim func(t *testing.T, db *store.DB) (store.ClaimedBatch, error)
	}{
		{"Fetch", func(t *testing.T, db *store.DB) (store.ClaimedBatch, error) {
			return newFetcher(t, db, "Process-A", store.FetchAhead).Fetch(context.Background(), benchStart, time.Minute, 3)
		}},
		{"ClaimOne", func(t *testing.T, db *store.DB) (store.ClaimedBatch, error) {
			return newClaimer(t, db, "Worker-A", store.IndexedScale).Claim(context.Background(), benchStart, time.Minute, 1)
		}},
		{"ClaimBatch", func(t *testing.T, db *store.DB) (store.ClaimedBatch, error) {
			return newClaimer(t, db, "Worker-A", store.IndexedScale).Claim(context.Background(), benchStart, time.Minute, 3)
		}},
	}
	for _, engine := range fetchAheadEngines {
		for _, tt := range tests {
			t.Run(string(engine)+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				setup, open := fetchAheadBacklog(t, engine, 5)
				failAtCommit(t, engine, setup)
				b, err := tt.claim(t, open())
				if err == nil || len(b.Messages) != 0 {
					t.Fatalf("claim failing at COMMIT: %v, %d messages %+v; want an error and no messages", err, len(b.Messages), b.Messages)
				}
				if n, err := setup.Count(context.Background(), store.CountUnprocessed.SQL); err != nil || n != 5 {
					t.Fatalf("unprocessed %d, %v; want 5", n, err)
				}
			})
		}
	}
}
