package store_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"slices"
	"strings"
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

// TestScaleClaimsSameSemantics: on the same rows (Pending, an expired
// lease, a live lease, a processed one) the lesson and the indexed claims
// take the same messages in the same order; the pending-only mistake does
// not take the expired lease.
func TestScaleClaimsSameSemantics(t *testing.T) {
	tests := []struct {
		claim store.ScaleClaim
		want  []int64
	}{
		{store.LessonScaleClaim, []int64{2, 4, 5, 6}},
		{store.IndexedScaleClaim, []int64{2, 4, 5, 6}},
		{store.PendingOnlyScaleClaim, []int64{4, 5, 6}},
	}
	for _, tt := range tests {
		t.Run(tt.claim.Name, func(t *testing.T) {
			ctx := context.Background()
			db, _ := openBacklog(t, 6)
			setup := newClaimer(t, db, "setup", store.IndexedScaleClaim)
			b, err := setup.Claim(ctx, benchStart, time.Hour, 3)
			if err != nil || len(b.Messages) != 3 {
				t.Fatalf("setup claim: %v, %d", err, len(b.Messages))
			}
			if f, err := setup.Finalize(ctx, b.Messages[:1], benchStart); err != nil || len(f.Finalized) != 1 {
				t.Fatalf("finalize 1: %v %+v", err, f)
			}
			// After setup's leases expire, 2 is re-leased briefly and 3 for a day.
			t0 := benchStart.Add(2 * time.Hour)
			for _, lease := range []struct {
				worker string
				length time.Duration
				want   int64
			}{{"short", time.Minute, 2}, {"long", 24 * time.Hour, 3}} {
				got, err := newClaimer(t, db, lease.worker, store.IndexedScaleClaim).Claim(ctx, t0, lease.length, 1)
				if err != nil || len(got.Messages) != 1 || got.Messages[0].ID != lease.want {
					t.Fatalf("%s lease: %v %+v", lease.worker, err, got.Messages)
				}
			}
			// An hour later: 1 Processed, 2 under an expired lease, 3 under a live one, 4 to 6 Pending.
			cl := newClaimer(t, db, "w", tt.claim)
			ids := claimIDs(t, cl, t0.Add(time.Hour))
			if !slices.Equal(ids, tt.want) {
				t.Fatalf("claimed %v, want %v", ids, tt.want)
			}
		})
	}
}

// TestClaimTokens: every claim increments the message's token, and the
// token is what finalize checks.
func TestClaimTokens(t *testing.T) {
	ctx := context.Background()
	db, _ := openBacklog(t, 1)
	a := newClaimer(t, db, "Worker-A", store.IndexedScaleClaim)
	b := newClaimer(t, db, "Worker-B", store.IndexedScaleClaim)
	ca, err := a.Claim(ctx, benchStart, time.Minute, 1)
	if err != nil || len(ca.Messages) != 1 || ca.Messages[0].Token != 1 {
		t.Fatalf("first claim: %v %+v", err, ca.Messages)
	}
	if busy, err := b.Claim(ctx, benchStart.Add(30*time.Second), time.Minute, 1); err != nil || len(busy.Messages) != 0 {
		t.Fatalf("claim under a live lease: %v %+v", err, busy.Messages)
	}
	cb, err := b.Claim(ctx, benchStart.Add(2*time.Minute), time.Minute, 1)
	if err != nil || len(cb.Messages) != 1 || cb.Messages[0].Token != 2 || cb.Messages[0].ID != ca.Messages[0].ID {
		t.Fatalf("reclaim after expiry: %v %+v", err, cb.Messages)
	}
	t.Run("StaleTokenRejected", func(t *testing.T) {
		f, err := a.Finalize(ctx, ca.Messages, benchStart.Add(3*time.Minute))
		if err != nil || len(f.Finalized) != 0 || len(f.Rejected) != 1 {
			t.Fatalf("stale finalize: %v %+v", err, f)
		}
	})
	t.Run("CurrentTokenFinalizes", func(t *testing.T) {
		f, err := b.Finalize(ctx, cb.Messages, benchStart.Add(3*time.Minute))
		if err != nil || len(f.Finalized) != 1 || len(f.Rejected) != 0 {
			t.Fatalf("current finalize: %v %+v", err, f)
		}
	})
	t.Run("ProcessedNotClaimable", func(t *testing.T) {
		if c, err := a.Claim(ctx, benchStart.Add(time.Hour), time.Minute, 1); err != nil || len(c.Messages) != 0 {
			t.Fatalf("claim after finalize: %v %+v", err, c.Messages)
		}
	})
}

// TestBatchFinalizeGuardsEachRow: in a batch, the one row whose lease was
// taken over is refused and the others commit.
func TestBatchFinalizeGuardsEachRow(t *testing.T) {
	for _, tt := range []struct {
		finalize      store.ScaleFinalize
		wantFinalized int
	}{
		{store.FencedFinalize, 4},
		{store.ByIDFinalize, 5},
	} {
		t.Run(tt.finalize.Name, func(t *testing.T) {
			ctx := context.Background()
			db, _ := openBacklog(t, 5)
			cfg := store.ClaimerConfig{Claim: store.IndexedScaleClaim, Finalize: tt.finalize, Retry: store.DefaultRetry}
			a, err := db.NewClaimer(ctx, "Worker-A", cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			batch, err := a.Claim(ctx, benchStart, time.Minute, 64)
			if err != nil || len(batch.Messages) != 5 {
				t.Fatalf("batch claim: %v, %d", err, len(batch.Messages))
			}
			for i, m := range batch.Messages {
				if m.ID != int64(i+1) || m.Token != 1 {
					t.Fatalf("batch not oldest first with token 1: %+v", batch.Messages)
				}
			}
			// Worker-B takes over message 1 after A's leases expire.
			b := newClaimer(t, db, "Worker-B", store.IndexedScaleClaim)
			later := benchStart.Add(2 * time.Minute)
			if got, err := b.Claim(ctx, later, time.Hour, 1); err != nil || len(got.Messages) != 1 || got.Messages[0].ID != 1 {
				t.Fatalf("take over: %v %+v", err, got.Messages)
			}
			f, err := a.Finalize(ctx, batch.Messages, later)
			if err != nil || len(f.Finalized) != tt.wantFinalized || len(f.Finalized)+len(f.Rejected) != 5 {
				t.Fatalf("batch finalize: %v %+v", err, f)
			}
		})
	}
}

// TestWithoutClaimIndexScans: the indexed claim walks its index; without
// it, the same statement scans the table, like the lesson's.
func TestWithoutClaimIndexScans(t *testing.T) {
	ctx := context.Background()
	db, _ := openBacklog(t, 10)
	plan := func() string {
		p, err := db.ClaimPlan(ctx, store.IndexedScaleClaim, benchStart)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(p, " / ")
	}
	if p := plan(); !strings.Contains(p, "USING INDEX IX_OutboxMessages_Unprocessed_CreatedAtUtc") || strings.Contains(p, "TEMP B-TREE") {
		t.Fatalf("indexed plan = %q", p)
	}
	if p, err := db.ClaimPlan(ctx, store.LessonScaleClaim, benchStart); err != nil || !slices.Contains(p, "SCAN OutboxMessages") {
		t.Fatalf("lesson plan = %q, %v", p, err)
	}
	if err := db.Migrate(ctx, store.WithoutClaimIndex); err != nil {
		t.Fatal(err)
	}
	if p := plan(); !strings.HasPrefix(p, "SCAN OutboxMessages /") {
		t.Fatalf("plan without the index = %q", p)
	}
}

// TestPageReadsCountTheScan: the lesson claim reads more pages on a bigger
// table; the indexed claim does not.
func TestPageReadsCountTheScan(t *testing.T) {
	ctx := context.Background()
	pagesFor := func(c store.ScaleClaim, n int) int64 {
		db, _ := openBacklog(t, n)
		cl := newClaimer(t, db, "w", c)
		before, err := db.PageReads(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cl.Claim(ctx, benchStart, time.Minute, 1); err != nil {
			t.Fatal(err)
		}
		after, err := db.PageReads(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return after - before
	}
	lessonSmall, lessonLarge := pagesFor(store.LessonScaleClaim, 100), pagesFor(store.LessonScaleClaim, 3000)
	indexedSmall, indexedLarge := pagesFor(store.IndexedScaleClaim, 100), pagesFor(store.IndexedScaleClaim, 3000)
	if lessonLarge < 5*lessonSmall {
		t.Errorf("lesson claim read %d then %d pages; want it to grow with the table", lessonSmall, lessonLarge)
	}
	if indexedLarge > indexedSmall+2 {
		t.Errorf("indexed claim read %d then %d pages; want it flat", indexedSmall, indexedLarge)
	}
}

// TestRetryNeverFails: while another connection holds the write lock, a
// claim with the busy handler off retries (and counts it) until the lock
// is released, and then succeeds.
func TestRetryNeverFails(t *testing.T) {
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
	cl, err := w.NewClaimer(ctx, "w", store.ClaimerConfig{Claim: store.IndexedScaleClaim, Retry: store.Retry{Pause: 100 * time.Microsecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	locked := make(chan struct{})
	release := make(chan struct{})
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
	go func() {
		time.Sleep(20 * time.Millisecond)
		close(release)
	}()
	b, err := cl.Claim(ctx, benchStart, time.Minute, 1)
	if err != nil || len(b.Messages) != 1 {
		t.Fatalf("claim: %v %+v", err, b)
	}
	if b.Stats.BusyRetries == 0 || b.Stats.Waited < 10*time.Millisecond || b.Held >= b.Stats.Waited {
		t.Fatalf("stats = %+v, held %v: want retries while the lock was held", b.Stats, b.Held)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestSeedBacklogAndCeiling(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "seed.db"), store.DefaultConfig)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Migrate(ctx, store.PaymentsOutbox, store.OutboxLeasing, store.OutboxFencing, store.ClaimsAtScale); err != nil {
		t.Fatal(err)
	}
	var progress []int
	err = db.SeedBacklog(ctx, store.Backlog{Messages: 2500, First: benchStart, Spacing: time.Second, Chunk: 1000, PayloadBytes: 200,
		Progress: func(done int) { progress = append(progress, done) }})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(progress, []int{1000, 2000, 2500}) {
		t.Fatalf("progress %v", progress)
	}
	if n, err := db.Count(ctx, store.CountUnprocessedSQL); err != nil || n != 2500 {
		t.Fatalf("unprocessed = %d, %v", n, err)
	}
	msgs, err := db.Messages(ctx)
	if err != nil || len(msgs) != 2500 || len(msgs[0].Payload) < 190 || msgs[1].CreatedAt != "2026-01-15T08:00:01.000Z" {
		t.Fatalf("messages: %v, %d, %+v", err, len(msgs), msgs[:2])
	}
	p, err := db.NewCeilingProbe(ctx, store.DefaultRetry)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for range 3 {
		if _, err := p.Update(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := db.Count(ctx, "SELECT Hits FROM BenchCeiling WHERE Id = 1"); err != nil || n != 3 {
		t.Fatalf("ceiling hits = %d, %v", n, err)
	}
}

func TestScaleClaimNamed(t *testing.T) {
	for _, name := range []string{"lesson", "indexed"} {
		if c, ok := store.ScaleClaimNamed(name); !ok || c.Name != name {
			t.Errorf("ScaleClaimNamed(%q) = %v, %v", name, c.Name, ok)
		}
	}
	if _, ok := store.ScaleClaimNamed("pending-only"); ok {
		t.Error("the mistake must not be selectable by the bench")
	}
}
