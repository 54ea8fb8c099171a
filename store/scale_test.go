package store_test

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxlab/outboxlab/store"
)

// claimIDs claims one message at a time until nothing is claimable and
// returns the Ids in claim order.
func claimIDs(t *testing.T, cl *store.Claimer, now time.Time) []int64 {
	t.Helper()
	var ids []int64
	for {
		b, err := cl.Claim(context.Background(), now, time.Minute, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Messages) == 0 {
			return ids
		}
		ids = append(ids, b.Messages[0].ID)
	}
}

// claimN claims limit messages for cl at now and fails unless it got want.
func claimN(t *testing.T, cl *store.Claimer, now time.Time, lease time.Duration, limit, want int) []store.ClaimedMessage {
	t.Helper()
	b, err := cl.Claim(context.Background(), now, lease, limit)
	if err != nil || len(b.Messages) != want {
		t.Fatalf("claim %d: %v, got %+v, want %d messages", limit, err, b.Messages, want)
	}
	return b.Messages
}

// TestScaleClaimsSameSemantics: on the same rows (Pending, an expired
// lease, a live lease, a processed one) the lesson and the indexed claims
// take the same messages in the same order; the pending-only mistake does
// not take the expired lease.
func TestScaleClaimsSameSemantics(t *testing.T) {
	t.Parallel()
	tests := []struct {
		claim store.ScaleSQL
		want  []int64
	}{
		{store.LessonScale, []int64{2, 4, 5, 6}},
		{store.IndexedScale, []int64{2, 4, 5, 6}},
		{store.PendingOnlyScale, []int64{4, 5, 6}},
	}
	for _, tt := range tests {
		t.Run(tt.claim.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db, _ := openBacklog(t, 6)
			setup := newClaimer(t, db, "setup", store.IndexedScale)
			msgs := claimN(t, setup, benchStart, time.Hour, 3, 3)
			if f, err := setup.Finalize(ctx, msgs[:1], benchStart); err != nil || len(f.Finalized) != 1 {
				t.Fatalf("finalize 1: %v %+v", err, f)
			}
			// After setup's leases expire, 2 is re-leased briefly and 3 for a day.
			t0 := benchStart.Add(2 * time.Hour)
			if got := claimN(t, newClaimer(t, db, "short", store.IndexedScale), t0, time.Minute, 1, 1); got[0].ID != 2 {
				t.Fatalf("short lease took %d, want 2", got[0].ID)
			}
			if got := claimN(t, newClaimer(t, db, "long", store.IndexedScale), t0, 24*time.Hour, 1, 1); got[0].ID != 3 {
				t.Fatalf("long lease took %d, want 3", got[0].ID)
			}
			// An hour later: 1 Processed, 2 under an expired lease, 3 under a live one, 4 to 6 Pending.
			ids := claimIDs(t, newClaimer(t, db, "w", tt.claim), t0.Add(time.Hour))
			if !slices.Equal(ids, tt.want) {
				t.Fatalf("claimed %v, want %v", ids, tt.want)
			}
		})
	}
}

// whereOf is a select's WHERE clause, whitespace folded.
func whereOf(sqlText string) string {
	f := strings.Join(strings.Fields(sqlText), " ")
	_, after, _ := strings.Cut(f, " WHERE ")
	before, _, _ := strings.Cut(after, " ORDER BY ")
	return before
}

// TestScaleDesignsAskOneQuestion: within a design, the claim of one, the
// batch claim and the query plan ask the select's question, so the lesson
// and a mistake each differ from the indexed claim in one place.
func TestScaleDesignsAskOneQuestion(t *testing.T) {
	t.Parallel()
	for _, s := range []store.ScaleSQL{store.LessonScale, store.IndexedScale, store.PendingOnlyScale} {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			where := whereOf(s.SelectNext.SQL)
			for _, st := range []store.Stmt{s.ClaimOne, s.ClaimBatch, s.PlanNext} {
				if !strings.Contains(strings.Join(strings.Fields(st.SQL), " "), where) {
					t.Errorf("%q does not ask %q", st.Name, where)
				}
			}
			if got := strings.TrimPrefix(s.PlanNext.SQL, "EXPLAIN QUERY PLAN\n"); got != s.SelectNext.SQL {
				t.Errorf("%q is not EXPLAIN QUERY PLAN of %q", s.PlanNext.Name, s.SelectNext.Name)
			}
			if !s.PlanNext.Audit || s.SelectNext.Audit {
				t.Errorf("the plan must be the lab's read, the select an actor's statement")
			}
		})
	}
	for _, m := range []store.Stmt{store.PendingOnlySelectNext, store.PendingOnlyClaimOne, store.PendingOnlyClaimBatch,
		store.ScaleFinalizeByID, store.ScaleFinalizeBatchByID, store.DropClaimIndex} {
		if m.Replaces == nil || m.Mistake == "" || !strings.Contains(m.Name, "MISTAKE") {
			t.Errorf("%q must be a mistake naming what it replaces and what it changes", m.Name)
		}
	}
}

// TestClaimTokens: every claim increments the message's token, and the
// token is what finalize checks.
func TestClaimTokens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := openBacklog(t, 1)
	a := newClaimer(t, db, "Worker-A", store.IndexedScale)
	b := newClaimer(t, db, "Worker-B", store.IndexedScale)
	ca := claimN(t, a, benchStart, time.Minute, 1, 1)
	if ca[0].Token != 1 {
		t.Fatalf("first claim: %+v", ca)
	}
	claimN(t, b, benchStart.Add(30*time.Second), time.Minute, 1, 0) // under a live lease
	cb := claimN(t, b, benchStart.Add(2*time.Minute), time.Minute, 1, 1)
	if cb[0].Token != 2 || cb[0].ID != ca[0].ID {
		t.Fatalf("reclaim after expiry: %+v", cb)
	}
	steps := []struct {
		name          string
		cl            *store.Claimer
		msgs          []store.ClaimedMessage
		wantFinalized int
	}{
		{"StaleTokenRejected", a, ca, 0},
		{"CurrentTokenFinalizes", b, cb, 1},
	}
	for _, s := range steps { // in order: the second depends on the first
		f, err := s.cl.Finalize(ctx, s.msgs, benchStart.Add(3*time.Minute))
		if err != nil || len(f.Finalized) != s.wantFinalized || len(f.Finalized)+len(f.Rejected) != 1 {
			t.Fatalf("%s: %v %+v", s.name, err, f)
		}
	}
	claimN(t, a, benchStart.Add(time.Hour), time.Minute, 1, 0) // Processed is not claimable
}

// TestStaleFinalizeSameWorkerName: Worker-A claims, stalls past its lease,
// and Worker-A (restarted under the same name, on another connection)
// reclaims. The stalled Worker-A's finalize passes the owner guard, so
// only the token guard refuses it, for one message and for a batch.
// Removing the token guard from the fenced finalize fails this test.
func TestStaleFinalizeSameWorkerName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		finals  store.ScaleSQL
		batch   int
		wantNew int // messages the stalled worker's finalize completes
	}{
		{"Fenced/One", store.IndexedScale, 1, 0},
		{"Fenced/Batch", store.IndexedScale, 3, 0},
		{"ByID/One", byID(store.IndexedScale), 1, 1},
		{"ByID/Batch", byID(store.IndexedScale), 3, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db, path := openBacklog(t, tt.batch)
			stalled := newClaimer(t, db, "Worker-A", tt.finals)
			old := claimN(t, stalled, benchStart, time.Minute, tt.batch, tt.batch)
			again, err := store.Open(ctx, path, store.DefaultConfig)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { again.Close() })
			restarted := newClaimer(t, again, "Worker-A", tt.finals)
			later := benchStart.Add(2 * time.Minute)
			fresh := claimN(t, restarted, later, time.Hour, tt.batch, tt.batch)
			for i := range fresh {
				if fresh[i].Token != old[i].Token+1 {
					t.Fatalf("reclaim tokens %+v after %+v", fresh, old)
				}
			}
			f, err := stalled.Finalize(ctx, old, later)
			if err != nil || len(f.Finalized) != tt.wantNew || len(f.Finalized)+len(f.Rejected) != tt.batch {
				t.Fatalf("stale finalize: %v %+v, want %d finalized", err, f, tt.wantNew)
			}
		})
	}
}

// byID is design s with the finalize-by-id mistake swapped in.
func byID(s store.ScaleSQL) store.ScaleSQL {
	s.Finalize, s.FinalizeBatch = store.ScaleFinalizeByID, store.ScaleFinalizeBatchByID
	return s
}

// TestBatchFinalizeGuardsEachRow: in a batch, the one row whose lease was
// taken over is refused and the others commit.
func TestBatchFinalizeGuardsEachRow(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name          string
		design        store.ScaleSQL
		wantFinalized int
	}{
		{"Fenced", store.IndexedScale, 4},
		{"ByID", byID(store.IndexedScale), 5},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db, _ := openBacklog(t, 5)
			a := newClaimer(t, db, "Worker-A", tt.design)
			batch := claimN(t, a, benchStart, time.Minute, 64, 5)
			for i, m := range batch {
				if m.ID != int64(i+1) || m.Token != 1 {
					t.Fatalf("batch not oldest first with token 1: %+v", batch)
				}
			}
			// Worker-B takes over message 1 after A's leases expire.
			later := benchStart.Add(2 * time.Minute)
			if got := claimN(t, newClaimer(t, db, "Worker-B", store.IndexedScale), later, time.Hour, 1, 1); got[0].ID != 1 {
				t.Fatalf("took over %d, want 1", got[0].ID)
			}
			f, err := a.Finalize(ctx, batch, later)
			if err != nil || len(f.Finalized) != tt.wantFinalized || len(f.Finalized)+len(f.Rejected) != 5 {
				t.Fatalf("batch finalize: %v %+v", err, f)
			}
		})
	}
}

// TestWithoutClaimIndexScans: the indexed claim walks its index; without
// it, the same statement scans the table, like the lesson's.
func TestWithoutClaimIndexScans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := openBacklog(t, 10)
	plan := func(s store.ScaleSQL) string {
		p, err := store.ClaimPlan(ctx, db, s, benchStart)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(p, " / ")
	}
	if p := plan(store.IndexedScale); !strings.Contains(p, "USING INDEX IX_OutboxMessages_Unprocessed_CreatedAtUtc_Id") || strings.Contains(p, "TEMP B-TREE") {
		t.Fatalf("indexed plan = %q", p)
	}
	if p := plan(store.LessonScale); !strings.HasPrefix(p, "SCAN OutboxMessages /") {
		t.Fatalf("lesson plan = %q", p)
	}
	if err := db.Migrate(ctx, store.WithoutClaimIndex); err != nil {
		t.Fatal(err)
	}
	if p := plan(store.IndexedScale); !strings.HasPrefix(p, "SCAN OutboxMessages /") {
		t.Fatalf("plan without the index = %q", p)
	}
}

// TestPageReadsCountTheScan: the lesson claim reads more pages on a bigger
// table; the indexed claim does not. The figures are the same on a
// connection that records into a statement ledger.
func TestPageReadsCountTheScan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pagesFor := func(t *testing.T, cfg store.Config, s store.ScaleSQL, n int) int64 {
		db, _ := openBacklogWith(t, n, cfg)
		cl := newClaimer(t, db, "w", s)
		before, err := db.PageReads(ctx)
		if err != nil {
			t.Fatal(err)
		}
		claimN(t, cl, benchStart, time.Minute, 1, 1)
		after, err := db.PageReads(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return after - before
	}
	recorded := store.DefaultConfig
	recorded.Ledger = &store.Ledger{}
	for _, tt := range []struct {
		name string
		cfg  store.Config
	}{{"Plain", store.DefaultConfig}, {"Recorded", recorded}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			lessonSmall, lessonLarge := pagesFor(t, tt.cfg, store.LessonScale, 100), pagesFor(t, tt.cfg, store.LessonScale, 3000)
			indexedSmall, indexedLarge := pagesFor(t, tt.cfg, store.IndexedScale, 100), pagesFor(t, tt.cfg, store.IndexedScale, 3000)
			if lessonLarge < 5*lessonSmall {
				t.Errorf("lesson claim read %d then %d pages; want it to grow with the table", lessonSmall, lessonLarge)
			}
			if indexedLarge > indexedSmall+2 {
				t.Errorf("indexed claim read %d then %d pages; want it flat", indexedSmall, indexedLarge)
			}
		})
	}
}

// TestClaimerStatementsRecorded: a claimer's prepared statements are
// recorded by the ledger under their names, each run counted.
func TestClaimerStatementsRecorded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := store.DefaultConfig
	cfg.Ledger = &store.Ledger{}
	db, _ := openBacklogWith(t, 4, cfg)
	cl := newClaimer(t, db, "w", store.IndexedScale)
	one := claimN(t, cl, benchStart, time.Minute, 1, 1)
	batch := claimN(t, cl, benchStart, time.Minute, 8, 3)
	for _, msgs := range [][]store.ClaimedMessage{one, batch} {
		if f, err := cl.Finalize(ctx, msgs, benchStart); err != nil || len(f.Finalized) != len(msgs) {
			t.Fatalf("finalize: %v %+v", err, f)
		}
	}
	runs := map[string]int{}
	for _, e := range cfg.Ledger.Entries() {
		if e.Stmt.Name == "" {
			t.Errorf("unnamed statement ran: %.60q", e.Stmt.SQL)
		}
		runs[e.Stmt.Name] = e.Runs
	}
	s := store.IndexedScale
	for _, st := range []store.Stmt{s.SelectNext, s.ClaimOne, s.ClaimBatch, s.Finalize, s.FinalizeBatch, store.SeedBacklogMessage, store.BusyHandlerOff} {
		if runs[st.Name] == 0 {
			t.Errorf("the ledger never saw %q (saw %v)", st.Name, runs)
		}
	}
}

// TestRetryNeverFails: while another connection holds the write lock, a
// claim with the busy handler off retries (and counts it) until the lock
// is released, and then succeeds. The holder releases the lock once the
// claimer has met SQLITE_BUSY: a handshake, not a sleep.
func TestRetryNeverFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, path := openBacklog(t, 3)
	holder, err := store.Open(ctx, path, store.DefaultConfig)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	w, err := store.Open(ctx, path, store.DefaultConfig)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	release := make(chan struct{})
	var once sync.Once
	retry := store.WithBusyHook(store.Retry{Pause: 100 * time.Microsecond}, func() { once.Do(func() { close(release) }) })
	cl, err := store.NewClaimer(ctx, w, "w", store.ClaimerConfig{SQL: store.IndexedScale, Retry: retry})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	locked := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := holder.InTx(ctx, func(tx *sql.Tx) error {
			close(locked)
			<-release
			return nil
		})
		done <- err
	}()
	<-locked
	b, err := cl.Claim(ctx, benchStart, time.Minute, 1)
	if err != nil || len(b.Messages) != 1 {
		t.Fatalf("claim: %v %+v", err, b)
	}
	if b.Stats.BusyRetries == 0 || b.Held >= b.Stats.Waited {
		t.Fatalf("stats = %+v, held %v: want retries while the lock was held", b.Stats, b.Held)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestSeedBacklogAndCeiling: seeding streams in chunks with progress,
// pads payloads and spaces creation times; the ceiling probe commits.
func TestSeedBacklogAndCeiling(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := openBacklog(t, 0)
	var progress []int
	err := store.SeedBacklog(ctx, db, store.Backlog{Messages: 2500, First: benchStart, Spacing: time.Second, Chunk: 1000, PayloadBytes: 200,
		Progress: func(done int) { progress = append(progress, done) }})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(progress, []int{1000, 2000, 2500}) {
		t.Fatalf("progress %v", progress)
	}
	if n, err := db.Count(ctx, store.CountUnprocessed.SQL); err != nil || n != 2500 {
		t.Fatalf("unprocessed = %d, %v", n, err)
	}
	first := claimN(t, newClaimer(t, db, "w", store.IndexedScale), benchStart, time.Minute, 2, 2)
	if len(first[0].Payload) < 190 || first[1].CreatedAt != "2026-01-15T08:00:01.000Z" || first[1].AggregateKey != "MSG-0000002" {
		t.Fatalf("seeded messages %+v", first)
	}
	p, err := store.NewCeilingProbe(ctx, db, store.DefaultRetry)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for range 3 {
		if _, err := p.Update(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := db.Count(ctx, store.CeilingHits.SQL); err != nil || n != 3 {
		t.Fatalf("ceiling hits = %d, %v", n, err)
	}
}

func TestScaleClaimNamed(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		ok   bool
	}{{"lesson", true}, {"indexed", true}, {"skip-locked", true}, {"pending-only", false}, {"fastest", false}} {
		c, ok := store.ScaleClaimNamed(tt.name)
		if ok != tt.ok || (ok && c.Name != tt.name) {
			t.Errorf("ScaleClaimNamed(%q) = %q, %v; want ok %v (the bench never selects a mistake)", tt.name, c.Name, ok, tt.ok)
		}
	}
}
