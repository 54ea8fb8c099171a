package bench_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/outboxlab/outboxlab/bench"
	"github.com/outboxlab/outboxlab/internal/pgtest"
	"github.com/outboxlab/outboxlab/lab"
)

// TestRunOnPostgres runs a tiny bench on the test server: both of
// PostgreSQL's claims at batch 1 and 8, fetch-ahead, and River, two
// workers each; every row drains its backlog with no error, duplicate or
// lost message, all counted in the database. Rates are measured, never
// asserted.
func TestRunOnPostgres(t *testing.T) {
	url := pgtest.URL(t)
	cfg := bench.DefaultConfig()
	cfg.Database, cfg.River = url, true
	cfg.Messages, cfg.Workers, cfg.Batches = []int{200}, []int{2}, []int{1, 8}
	cfg.Claims = []string{"indexed", "skip-locked", bench.FetchAheadClaim}
	cfg.CeilingRounds, cfg.CeilingRound = 2, 20*time.Millisecond
	rep, err := bench.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Engine != "postgres" || rep.Machine.Postgres == "" || rep.RiverAbout == "" || rep.Ceiling.TxPerS <= 0 {
		t.Fatalf("report header %+v", rep)
	}
	if len(rep.Rows) != 6 {
		t.Fatalf("%d rows, want 2 claims × 2 batches, fetch-ahead and River", len(rep.Rows))
	}
	for _, r := range rep.Rows {
		if r.Errors != 0 || r.Duplicates != 0 || r.Lost != 0 || r.Rejected != 0 || r.MsgsPerS <= 0 {
			t.Errorf("%+v: want every message drained once, without errors", r)
		}
	}
	if fa, last := rep.Rows[4], rep.Rows[5]; fa.Claim != bench.FetchAheadClaim || last.Claim != bench.RiverClaim || !last.Peer {
		t.Errorf("last rows %+v %+v, want fetch-ahead's and River's", fa, last)
	}
}

// TestFetchAheadOnPostgres: fetch-ahead with several workers, beside River,
// on the test server: each drains once, fetch-ahead's batches and lag
// reported.
func TestFetchAheadOnPostgres(t *testing.T) {
	cfg := bench.DefaultConfig()
	cfg.Database, cfg.River = pgtest.URL(t), true
	cfg.Messages, cfg.Workers, cfg.Claims = []int{300}, []int{1, 4}, []string{bench.FetchAheadClaim}
	cfg.CeilingRounds, cfg.CeilingRound = 2, 20*time.Millisecond
	checkFetchAheadAndPeers(t, cfg, []string{bench.FetchAheadClaim, bench.FetchAheadClaim, bench.RiverClaim, bench.RiverClaim})
}

// TestServerActivityPerRow: on PostgreSQL every row and both ceilings say
// what the server did meanwhile; with Checkpoint a CHECKPOINT ran before
// each (the test server's login may), without it none did.
func TestServerActivityPerRow(t *testing.T) {
	url := pgtest.URL(t)
	for _, forced := range []bool{true, false} {
		t.Run(fmt.Sprintf("checkpoint=%v", forced), func(t *testing.T) {
			cfg := bench.DefaultConfig()
			cfg.Database, cfg.Checkpoint = url, forced
			cfg.Messages, cfg.Workers, cfg.Claims = []int{100}, []int{2}, []string{"skip-locked"}
			// Rounds long enough that each ceiling writes WAL even on a
			// loaded machine (20 ms rounds once wrote none there).
			cfg.CeilingRounds, cfg.CeilingRound = 2, 100*time.Millisecond
			rep, err := bench.Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range []*lab.BenchServer{rep.Ceiling.Server, rep.CeilingAfter.Server, rep.Rows[0].Server} {
				if s == nil || s.CheckpointForced != forced || s.CheckpointRefused != "" || s.WALMB <= 0 {
					t.Fatalf("server activity %+v, want a forced checkpoint %v and some WAL", s, forced)
				}
			}
		})
	}
}

// TestRelayBenchOnPostgres drains a small backlog end to end through an
// embedded JetStream on the test server: every message finalized under
// its token, the stream holding each, none lost.
func TestRelayBenchOnPostgres(t *testing.T) {
	cfg := bench.RelayConfig{Dir: t.TempDir(), Database: pgtest.URL(t), Messages: 200, Workers: []int{2}, Batch: 8, Broker: "nats"}
	rep, err := bench.RunRelay(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Engine != "PostgreSQL" || len(rep.Rows) != 2 {
		t.Fatalf("report %+v", rep)
	}
	for _, r := range rep.Rows {
		if r.Finalized != 200 || r.Refused != 0 || r.Lost != 0 || (r.Broker != "none" && r.Stored != 200) {
			t.Errorf("%+v: want every message finalized once and stored, none lost", r)
		}
	}
}
