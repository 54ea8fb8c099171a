package bench_test

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outboxlab/outboxlab/bench"
)

// smallConfig is a matrix small enough for the race detector.
func smallConfig(t *testing.T) bench.Config {
	t.Helper()
	cfg := bench.DefaultConfig()
	cfg.Messages = []int{150}
	cfg.Workers = []int{1, 3}
	cfg.Claims = []string{"lesson", "indexed"}
	cfg.Batches = []int{1, 16}
	cfg.CeilingRounds, cfg.CeilingRound = 2, 20*time.Millisecond
	cfg.Dir = t.TempDir()
	return cfg
}

// TestRunDrainsEveryCell runs a small matrix: every cell drains its whole
// backlog with no error, duplicate or lost message, and leaves no file
// behind. Rates are measured, never asserted.
func TestRunDrainsEveryCell(t *testing.T) {
	for _, retry := range []string{bench.RetryLab, bench.RetrySQLite} {
		t.Run(retry, func(t *testing.T) {
			cfg := smallConfig(t)
			cfg.Retry = retry
			var progress strings.Builder
			cfg.Progress = &progress
			rep, err := bench.Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Rows) != 8 {
				t.Fatalf("%d rows, want 2 claims × 2 batches × 1 size × 2 worker counts", len(rep.Rows))
			}
			if rep.Ceiling.TxPerS <= 0 || rep.Ceiling.MsgsPerS != rep.Ceiling.TxPerS/2 || len(rep.Ceiling.Rounds) != 2 || rep.CeilingAfter.TxPerS <= 0 {
				t.Fatalf("ceiling %+v", rep.Ceiling)
			}
			if rep.Machine.CPUs < 1 || rep.Machine.SQLite == "" || rep.Machine.GoVersion == "" || rep.RetryAbout == "" || rep.PeakMemory == "" {
				t.Fatalf("report header %+v", rep)
			}
			for _, r := range rep.Rows {
				if r.Errors != 0 || r.Duplicates != 0 || r.Lost != 0 || r.Rejected != 0 {
					t.Errorf("%+v: want 0 errors, duplicates, lost, rejected", r)
				}
				if r.MsgsPerS <= 0 || r.CeilingMsgsPerS != rep.Ceiling.MsgsPerS || r.CeilingRatio <= 0 || r.PeakRSSMB <= 0 || r.P99Ms < r.P50Ms {
					t.Errorf("%+v: incomplete measurement", r)
				}
				sum := 0.0
				for _, s := range r.WorkerShares {
					sum += s
				}
				if len(r.WorkerShares) != r.Workers || math.Abs(sum-1) > 1e-9 {
					t.Errorf("worker shares %v for %d workers", r.WorkerShares, r.Workers)
				}
			}
			if !strings.Contains(progress.String(), "bench: ") || strings.Contains(progress.String(), "\r") { // a buffer is not a terminal: plain lines
				t.Errorf("no progress line: %q", progress.String())
			}
			left, err := os.ReadDir(cfg.Dir)
			if err != nil || len(left) != 0 {
				t.Fatalf("files left in the bench folder: %v %v", left, err)
			}
		})
	}
}

// TestRowJSONKeys: the JSON of a row has exactly the bench's documented keys.
func TestRowJSONKeys(t *testing.T) {
	b, err := json.Marshal(bench.Row{WorkerShares: []float64{1}, LongestWaitMs: 3})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	want := []string{"batch", "busy_retries", "ceiling_msgs_per_s", "ceiling_ratio", "claim", "complete_lag_p50_ms", "complete_lag_p99_ms",
		"duplicates", "errors", "lost", "messages", "msgs_per_s", "p50_ms", "p99_ms", "peak_rss_mb", "refused", "workers"}
	if !slices.Equal(keys, want) {
		t.Fatalf("keys %v, want %v", keys, want)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*bench.Config)
		err    string // "" for valid
	}{
		{"OK", func(*bench.Config) {}, ""},
		{"OKFull", func(c *bench.Config) { c.Synchronous = "full" }, ""},
		{"ErrNoMessages", func(c *bench.Config) { c.Messages = nil }, "--messages"},
		{"ErrZeroWorkers", func(c *bench.Config) { c.Workers = []int{0} }, "--workers 0"},
		{"ErrBatch", func(c *bench.Config) { c.Batches = []int{-1} }, "--batch -1"},
		{"ErrClaim", func(c *bench.Config) { c.Claims = []string{"pending-only"} }, `--claim "pending-only"`},
		{"OKFetchAheadAndPeers", func(c *bench.Config) { c.Claims, c.River, c.Goqite = []string{"indexed", "fetch-ahead"}, true, true }, ""},
		{"OKCompleteAtOnce", func(c *bench.Config) { c.CompleteInterval = 0 }, ""},
		{"OKCompleteBatchUnused", func(c *bench.Config) { c.CompleteBatch = 0 }, ""},
		{"ErrCompleteBatch", func(c *bench.Config) { c.Claims, c.CompleteBatch = []string{"fetch-ahead"}, 0 }, "--complete-batch 0"},
		{"ErrCompleteInterval", func(c *bench.Config) { c.Claims, c.CompleteInterval = []string{"fetch-ahead"}, time.Minute }, "--complete-interval 1m0s"},
		{"ErrSynchronous", func(c *bench.Config) { c.Synchronous = "off" }, `--synchronous "off"`},
		{"ErrRetry", func(c *bench.Config) { c.Retry = "forever" }, `--retry "forever"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := bench.DefaultConfig()
			tt.change(&cfg)
			err := cfg.Validate()
			if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
				t.Fatalf("Validate() = %v, want %q", err, tt.err)
			}
		})
	}
}

func TestRunNeedsFolder(t *testing.T) {
	cfg := smallConfig(t)
	cfg.Dir = ""
	if _, err := bench.Run(context.Background(), cfg); err == nil {
		t.Fatal("Run without a folder must fail")
	}
}

// TestValidatePostgresSettings: skip-locked needs a PostgreSQL server,
// goqite runs on SQLite only, and --db takes only a postgres:// URL.
func TestValidatePostgresSettings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		edit func(*bench.Config)
		msg  string // "" when valid
	}{
		{"SkipLockedOnSQLite", func(c *bench.Config) { c.Claims = []string{"skip-locked"} }, "runs on PostgreSQL only"},
		{"RiverOnSQLite", func(c *bench.Config) { c.River = true }, ""},
		{"GoqiteOnPostgres", func(c *bench.Config) { c.Database, c.Goqite = "postgres://localhost/lab", true }, "--goqite runs goqite on SQLite"},
		{"NotPostgres", func(c *bench.Config) { c.Database = "file:bench.db" }, "want a postgres:// or postgresql:// URL"},
		{"SkipLockedOnPostgres", func(c *bench.Config) {
			c.Database, c.Claims, c.River = "postgres://localhost/lab", []string{"indexed", "skip-locked", "fetch-ahead"}, true
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := bench.DefaultConfig()
			tt.edit(&cfg)
			err := cfg.Validate()
			if tt.msg == "" && err != nil || tt.msg != "" && (err == nil || !strings.Contains(err.Error(), tt.msg)) {
				t.Fatalf("Validate = %v, want %q", err, tt.msg)
			}
		})
	}
}

// TestRunFetchAheadAndPeers runs fetch-ahead, River's SQLite driver and
// goqite on SQLite: each drains its backlog once, with no error,
// duplicate, lost message or refused completion; fetch-ahead reports its
// fetch and completion batches and its completion lag. Rates are
// measured, never asserted.
func TestRunFetchAheadAndPeers(t *testing.T) {
	cfg := smallConfig(t)
	cfg.Claims, cfg.River, cfg.Goqite = []string{bench.FetchAheadClaim}, true, true
	checkFetchAheadAndPeers(t, cfg, []string{bench.FetchAheadClaim, bench.FetchAheadClaim, bench.RiverClaim, bench.RiverClaim, bench.GoqiteClaim, bench.GoqiteClaim})
	left, err := os.ReadDir(cfg.Dir)
	if err != nil || len(left) != 0 {
		t.Fatalf("files left in the bench folder: %v %v", left, err)
	}
}

// checkFetchAheadAndPeers runs cfg and checks its rows are claims, in
// order, each drained once.
func checkFetchAheadAndPeers(t *testing.T, cfg bench.Config, claims []string) {
	t.Helper()
	rep, err := bench.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rep.Rows {
		got = append(got, r.Claim)
		if r.Errors != 0 || r.Duplicates != 0 || r.Lost != 0 || r.Rejected != 0 || r.MsgsPerS <= 0 {
			t.Errorf("%+v: want every message drained once, without errors", r)
		}
		switch r.Claim {
		case bench.FetchAheadClaim:
			if r.Peer || r.Batch != 0 || r.MeanFetch < 1 || r.MeanFetch > float64(r.Workers) || r.MeanCompletion < 1 ||
				r.MeanCompletion > float64(cfg.CompleteBatch) || r.CompleteP50Ms <= 0 || r.CompleteP99Ms < r.CompleteP50Ms || len(r.WorkerShares) != r.Workers {
				t.Errorf("fetch-ahead row %+v", r)
			}
		case bench.RiverClaim, bench.GoqiteClaim:
			if !r.Peer {
				t.Errorf("peer row %+v not marked", r)
			}
		}
	}
	if !slices.Equal(got, claims) {
		t.Fatalf("rows %v, want %v", got, claims)
	}
	if rep.FetchAheadAbout == "" || rep.RiverAbout == "" || (rep.Engine == "sqlite") != (rep.GoqiteAbout != "") {
		t.Fatalf("report header %+v", rep)
	}
}
