package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/outboxlab/outboxlab/store"
	"github.com/outboxlab/outboxlab/store/storetest"
)

// benchStart is when the benchmark backlogs begin.
var benchStart = time.Date(2026, 1, 15, 8, 0, 0, 0, time.UTC)

// openBacklog opens a fresh database under tb.TempDir() with session 21's
// schema and n Pending messages.
func openBacklog(tb testing.TB, n int) (*store.DB, string) {
	tb.Helper()
	return openBacklogWith(tb, n, store.DefaultConfig)
}

// openBacklogWith is [openBacklog] with cfg, such as a statement ledger.
func openBacklogWith(tb testing.TB, n int, cfg store.Config) (*store.DB, string) {
	tb.Helper()
	db, path := storetest.Fresh(tb, cfg, store.PaymentsOutbox, store.OutboxLeasing, store.OutboxFencing, store.ClaimsAtScale)
	if err := store.SeedBacklog(context.Background(), db, store.Backlog{Messages: n, First: benchStart, Spacing: time.Millisecond}); err != nil {
		tb.Fatal(err)
	}
	return db, path
}

// newClaimer prepares worker's claimer of design s on db, closed at cleanup.
func newClaimer(tb testing.TB, db *store.DB, worker string, s store.ScaleSQL) *store.Claimer {
	tb.Helper()
	cl, err := store.NewClaimer(context.Background(), db, worker, store.ClaimerConfig{SQL: s, Retry: store.DefaultRetry})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cl.Close() })
	return cl
}

// BenchmarkCeiling is the reference transaction: a prepared single-row
// UPDATE of an unindexed column by primary key, one BEGIN IMMEDIATE each.
func BenchmarkCeiling(b *testing.B) {
	db, _ := openBacklog(b, 0)
	ctx := context.Background()
	p, err := store.NewCeilingProbe(ctx, db, store.DefaultRetry)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	for b.Loop() {
		if _, err := p.Update(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkClaim claims one message per transaction from a backlog of
// each size, with the lesson's statement and the indexed one. The lesson's
// cost per claim grows with the backlog; the indexed one stays flat.
func BenchmarkClaim(b *testing.B) {
	for _, c := range []store.ScaleSQL{store.LessonScale, store.IndexedScale} {
		for _, n := range []int{1_000, 10_000, 100_000} {
			if c.Name == "lesson" && n > 10_000 && testing.Short() {
				continue
			}
			b.Run(fmt.Sprintf("%s/backlog=%d", c.Name, n), func(b *testing.B) {
				benchmarkClaims(b, c, n, 1)
			})
		}
	}
}

// BenchmarkBatchClaim claims up to 64 messages per transaction.
func BenchmarkBatchClaim(b *testing.B) {
	for _, k := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("indexed/batch=%d", k), func(b *testing.B) {
			benchmarkClaims(b, store.IndexedScale, 100_000, k)
		})
	}
}

// benchmarkClaims times claims of k messages each from a backlog of n.
// Each claim's clock is an hour past the previous one's lease, so the
// previous claim has expired and the backlog never shrinks: every
// iteration claims the k oldest messages again, at the same backlog size.
func benchmarkClaims(b *testing.B, s store.ScaleSQL, n, k int) {
	db, _ := openBacklog(b, n)
	cl := newClaimer(b, db, "bench", s)
	ctx := context.Background()
	claimed := 0
	now := benchStart.Add(time.Hour)
	for b.Loop() {
		got, err := cl.Claim(ctx, now, time.Minute, k)
		if err != nil {
			b.Fatal(err)
		}
		if len(got.Messages) != min(k, n) {
			b.Fatalf("claimed %d, want %d", len(got.Messages), min(k, n))
		}
		claimed += len(got.Messages)
		now = now.Add(time.Hour)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(max(claimed, 1)), "ns/msg")
}

// BenchmarkCycle times a message's whole trip at batch 1 and 64: claim,
// then finalize, as a worker drains a backlog of 100,000.
func BenchmarkCycle(b *testing.B) {
	for _, k := range []int{1, 64} {
		b.Run(fmt.Sprintf("indexed/batch=%d", k), func(b *testing.B) {
			db, _ := openBacklog(b, 100_000)
			cl := newClaimer(b, db, "bench", store.IndexedScale)
			ctx := context.Background()
			now := benchStart.Add(time.Hour)
			done := 0
			for b.Loop() {
				got, err := cl.Claim(ctx, now, time.Hour, k)
				if err != nil {
					b.Fatal(err)
				}
				if len(got.Messages) == 0 {
					b.StopTimer()
					if err := store.SeedBacklog(ctx, db, store.Backlog{Messages: 100_000, First: benchStart, Spacing: time.Millisecond}); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					continue
				}
				f, err := cl.Finalize(ctx, got.Messages, now)
				if err != nil || len(f.Rejected) > 0 {
					b.Fatalf("finalize: %v, %d rejected", err, len(f.Rejected))
				}
				done += len(f.Finalized)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(max(done, 1)), "ns/msg")
		})
	}
}

// BenchmarkFinalize times the token-guarded finalize, one message per
// transaction and 64 per transaction. Messages are claimed off the clock,
// thousands at a time.
func BenchmarkFinalize(b *testing.B) {
	for _, k := range []int{1, 64} {
		b.Run(fmt.Sprintf("batch=%d", k), func(b *testing.B) {
			db, _ := openBacklog(b, 0)
			cl := newClaimer(b, db, "bench", store.IndexedScale)
			ctx := context.Background()
			now := benchStart.Add(time.Hour)
			var queue []store.ClaimedMessage
			done := 0
			for b.Loop() {
				if len(queue) < k {
					b.StopTimer()
					queue = refill(b, db, cl, now)
					b.StartTimer()
				}
				f, err := cl.Finalize(ctx, queue[:k], now)
				if err != nil || len(f.Finalized) != k {
					b.Fatalf("finalize: %v, %d of %d", err, len(f.Finalized), k)
				}
				queue = queue[k:]
				done += k
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(max(done, 1)), "ns/msg")
		})
	}
}

// refill seeds 10,000 more messages and claims them all in one batch.
func refill(b *testing.B, db *store.DB, cl *store.Claimer, now time.Time) []store.ClaimedMessage {
	ctx := context.Background()
	if err := store.SeedBacklog(ctx, db, store.Backlog{Messages: 10_000, First: benchStart, Spacing: time.Millisecond}); err != nil {
		b.Fatal(err)
	}
	got, err := cl.Claim(ctx, now, time.Hour, 10_000)
	if err != nil {
		b.Fatal(err)
	}
	return got.Messages
}
