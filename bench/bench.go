// Package bench measures session 21's claim paths at scale: first the
// ceiling of a write transaction on this machine, then a matrix of backlog
// sizes × workers × claims × batch sizes, each worker its own connection,
// on SQLite files or on a PostgreSQL server (and there River beside them).
package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outboxlab/outboxlab/clock"
	"github.com/outboxlab/outboxlab/internal/progress"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/store"
)

// Retry modes: how a worker waits for the write lock.
const (
	// RetryLab turns SQLite's busy handler off and retries after a short
	// jittered pause that never grows ([store.DefaultRetry]).
	RetryLab = "lab"
	// RetrySQLite leaves the waiting to SQLite's busy handler (1 s timeout,
	// sleeps of 1 to 100 ms), then retries: the unfair baseline.
	RetrySQLite = "sqlite"
)

// Config is one bench run.
type Config struct {
	Messages    []int    // backlog sizes
	Workers     []int    // worker counts; each worker opens its own connection
	Claims      []string // "lesson", "indexed", "skip-locked" (PostgreSQL), "fetch-ahead"
	Batches     []int    // messages per claim and per finalize transaction (fetch-ahead: not used)
	Synchronous string   // NORMAL or FULL
	Retry       string   // RetryLab (default) or RetrySQLite
	// Dir is an existing folder for the database files, which the bench
	// deletes after each cell. The caller makes it (os.MkdirTemp) and removes it.
	Dir string
	// Lease is every claim's lease; long enough that none expires in a run.
	Lease time.Duration
	// CeilingRounds × CeilingRound is how long the ceiling is measured; the
	// median round counts.
	CeilingRounds int
	CeilingRound  time.Duration
	// Progress receives a progress line (carriage returns, no newline until
	// done) for long runs; nil for none. Meant for stderr.
	Progress io.Writer
	// Database, when set, is a postgres:// URL: every cell drains in a
	// schema of its own on that server (dropped afterwards) instead of a
	// file in Dir. Synchronous and Retry are SQLite's and do not apply.
	Database string
	// River also drains each backlog size with River, for each worker
	// count, beside the lab's claims: with its pgx v5 driver on PostgreSQL,
	// with its SQLite driver (riversqlite) on SQLite.
	River bool
	// Goqite also drains each backlog size with goqite (SQLite only), for
	// each worker count.
	Goqite bool
	// CompleteBatch and CompleteInterval are when the fetch-ahead
	// completer flushes: once it holds CompleteBatch finished messages, or
	// CompleteInterval after the first of them finished, whichever comes
	// first (0: as soon as it is free to).
	CompleteBatch    int
	CompleteInterval time.Duration
	// Checkpoint, on PostgreSQL, forces a CHECKPOINT before the ceiling
	// and before every cell's drain, so each starts with nothing dirty
	// and no checkpoint of earlier cells still writing (see server.go).
	// Every row reports the server's background activity either way.
	Checkpoint bool
}

// DefaultConfig is `outboxlab bench` without flags.
func DefaultConfig() Config {
	return Config{
		Messages: []int{1_000, 10_000, 100_000}, Workers: []int{1, 2, 4},
		Claims: []string{"indexed"}, Batches: []int{1},
		Synchronous: "NORMAL", Retry: RetryLab,
		CompleteBatch: DefaultCompleteBatch, CompleteInterval: DefaultCompleteInterval, Checkpoint: true,
		Lease: 10 * time.Minute, CeilingRounds: 8, CeilingRound: 250 * time.Millisecond,
	}
}

// Validate reports the first malformed setting in one line.
func (c Config) Validate() error {
	switch {
	case len(c.Messages) == 0:
		return errors.New("bench: no backlog size (--messages)")
	case len(c.Workers) == 0:
		return errors.New("bench: no worker count (--workers)")
	case len(c.Claims) == 0:
		return errors.New("bench: no claim (--claim)")
	case len(c.Batches) == 0:
		return errors.New("bench: no batch size (--batch)")
	}
	for _, n := range c.Messages {
		if n < 1 || n > 100_000_000 {
			return fmt.Errorf("bench: --messages %d: want 1 to 100,000,000", n)
		}
	}
	for _, w := range c.Workers {
		if w < 1 || w > 64 {
			return fmt.Errorf("bench: --workers %d: want 1 to 64", w)
		}
	}
	for _, b := range c.Batches {
		if b < 1 || b > 10_000 {
			return fmt.Errorf("bench: --batch %d: want 1 to 10,000", b)
		}
	}
	for _, name := range c.Claims {
		if name == FetchAheadClaim {
			continue
		}
		s, ok := store.ScaleClaimNamed(name)
		if !ok {
			return fmt.Errorf("bench: --claim %q: want lesson, indexed, skip-locked or fetch-ahead", name)
		}
		if s.PostgresOnly && c.Database == "" {
			return fmt.Errorf("bench: --claim %s runs on PostgreSQL only: give --db with a postgres:// URL", name)
		}
	}
	if c.Goqite && c.Database != "" {
		return errors.New("bench: --goqite runs goqite on SQLite: leave out --db")
	}
	if slices.Contains(c.Claims, FetchAheadClaim) {
		if c.CompleteBatch < 1 || c.CompleteBatch > 10_000 {
			return fmt.Errorf("bench: --complete-batch %d: want 1 to 10,000", c.CompleteBatch)
		}
		if c.CompleteInterval < 0 || c.CompleteInterval > 10*time.Second {
			return fmt.Errorf("bench: --complete-interval %v: want 0 to 10s", c.CompleteInterval)
		}
	}
	if c.Database != "" && !store.IsPostgresURL(c.Database) {
		return fmt.Errorf("bench: --db %q: want a postgres:// or postgresql:// URL", store.RedactURL(c.Database))
	}
	switch strings.ToUpper(c.Synchronous) {
	case "NORMAL", "FULL":
	default:
		return fmt.Errorf("bench: --synchronous %q: want normal or full", c.Synchronous)
	}
	switch c.Retry {
	case "", RetryLab, RetrySQLite:
	default:
		return fmt.Errorf("bench: --retry %q: want lab or sqlite", c.Retry)
	}
	return nil
}

// The bench's results are plain data in package lab, so reports can render
// them without depending on the engine (or on SQLite).
type (
	// Report is everything one bench run measured.
	Report = lab.BenchReport
	// Machine is what the run ran on.
	Machine = lab.BenchMachine
	// Ceiling is the reference rate every ratio uses.
	Ceiling = lab.BenchCeiling
	// Row is one cell of the matrix.
	Row = lab.BenchRow
)

// Run measures the ceiling, then every cell of cfg's matrix in order:
// claims, then batch sizes, then backlog sizes, then worker counts.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Dir == "" && cfg.Database == "" {
		return nil, errors.New("bench: no folder for the database files")
	}
	def := DefaultConfig()
	if cfg.Retry == "" {
		cfg.Retry = RetryLab
	}
	if cfg.Lease <= 0 {
		cfg.Lease = def.Lease
	}
	if cfg.CeilingRounds <= 0 {
		cfg.CeilingRounds = def.CeilingRounds
	}
	if cfg.CeilingRound <= 0 {
		cfg.CeilingRound = def.CeilingRound
	}
	cfg.Synchronous = strings.ToUpper(cfg.Synchronous)
	rep := &Report{Engine: string(store.SQLite), Synchronous: cfg.Synchronous, Retry: cfg.Retry, RetryAbout: retryAbout(cfg.Retry), PeakMemory: peakMemorySource()}
	if cfg.Database != "" {
		rep.Engine, rep.Server, rep.Synchronous, rep.Retry = string(store.Postgres), store.RedactURL(cfg.Database), "", ""
		rep.RetryAbout = postgresRetryAbout()
	}

	p := progress.New(cfg.Progress, "bench")
	defer p.Finish()
	watch, err := newServerWatch(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer watch.close()
	ceiling, machine, err := measureCeiling(ctx, cfg, p, watch)
	if err != nil {
		return nil, err
	}
	rep.Ceiling, rep.Machine = ceiling, machine
	if slices.Contains(cfg.Claims, FetchAheadClaim) {
		rep.FetchAheadAbout = fetchAheadAbout(cfg, rep.Engine)
	}

	cells := 0
	for _, claim := range cfg.Claims {
		cells += len(batchesOf(cfg, claim)) * len(cfg.Messages) * len(cfg.Workers)
	}
	for _, claim := range cfg.Claims {
		for _, batch := range batchesOf(cfg, claim) {
			for _, n := range cfg.Messages {
				for _, w := range cfg.Workers {
					p.SetCell(fmt.Sprintf("[%d/%d] %s claim, batch %d, %d messages, %d workers", len(rep.Rows)+1, cells, claim, batch, n, w))
					row, err := runCell(ctx, cfg, cell{claim: claim, batch: batch, messages: n, workers: w}, p, watch)
					if err == nil {
						err = ctx.Err() // an interrupted drain measured nothing
					}
					if err != nil {
						return rep, err
					}
					row.CeilingMsgsPerS = ceiling.MsgsPerS
					if ceiling.MsgsPerS > 0 {
						row.CeilingRatio = row.MsgsPerS / ceiling.MsgsPerS
					}
					rep.Rows = append(rep.Rows, row)
				}
			}
		}
	}
	if cfg.River {
		if err := runRiver(ctx, cfg, rep, p, watch); err != nil {
			return rep, err
		}
	}
	if cfg.Goqite {
		if err := runGoqite(ctx, cfg, rep, p); err != nil {
			return rep, err
		}
	}
	if rep.CeilingAfter, _, err = measureCeiling(ctx, cfg, p, watch); err != nil {
		return rep, err
	}
	return rep, nil
}

// batchesOf is the batch sizes claim runs at: every --batch, except for
// fetch-ahead, whose fetcher takes what its workers have room for and
// whose completer flushes at --complete-batch: one cell, batch 0.
func batchesOf(cfg Config, claim string) []int {
	if claim == FetchAheadClaim {
		return []int{0}
	}
	return cfg.Batches
}

// source opens the connections of one cell's database: a file in cfg.Dir,
// or a schema of its own on cfg.Database's server.
type source struct {
	open    func(ctx context.Context) (*store.DB, error)
	cleanup func() // removes the file, or drops the schema
}

// newSource makes the database of the cell called name.
func newSource(ctx context.Context, cfg Config, name string) (source, error) {
	if cfg.Database == "" {
		path := filepath.Join(cfg.Dir, name+".db")
		return source{
			open:    func(ctx context.Context) (*store.DB, error) { return store.Open(ctx, path, openConfig(cfg)) },
			cleanup: func() { _ = store.RemoveFiles(path) },
		}, nil
	}
	schema := randomSchema()
	if err := store.CreateSchema(ctx, cfg.Database, schema, store.Config{}); err != nil {
		return source{}, err
	}
	return source{
		open: func(ctx context.Context) (*store.DB, error) {
			return store.OpenPostgres(ctx, cfg.Database, schema, store.Config{})
		},
		cleanup: func() { _ = store.DropSchema(context.Background(), cfg.Database, schema, store.Config{}) },
	}, nil
}

// retryFor is the store retry a bench worker uses.
func retryFor(mode string) store.Retry {
	if mode == RetrySQLite {
		return store.Retry{BusyHandler: store.BusyHandlerOneSecond, Pause: time.Millisecond}
	}
	return store.DefaultRetry
}

// randomSchema names a bench cell's schema on the server:
// outboxlab_bench_<random>.
func randomSchema() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "outboxlab_bench_" + hex.EncodeToString(b[:])
}

func postgresRetryAbout() string {
	return fmt.Sprintf("PostgreSQL, READ COMMITTED: a claim waits for no row lock (it skips locked rows); a transaction that "+
		"fails with a serialization failure, a deadlock or an unavailable lock is retried after a jittered pause of at most %v",
		store.DefaultRetry.Pause)
}

func retryAbout(mode string) string {
	r := retryFor(mode)
	if mode == RetrySQLite {
		return "sqlite: SQLite's busy handler waits up to 1s (sleeps of 1 to 100 ms), then the worker retries"
	}
	return fmt.Sprintf("lab: SQLite's busy handler off; after SQLITE_BUSY a worker retries after a jittered pause of at most %v "+
		"that never grows, and shorter still once it has waited %v", r.Pause, 8*r.Pause)
}

func openConfig(cfg Config) store.Config {
	return store.Config{BusyTimeout: 5 * time.Second, Synchronous: cfg.Synchronous}
}

// measureCeiling runs the ceiling transaction for CeilingRounds rounds on
// its own file in cfg.Dir (or its own schema on the server), migrated like
// the bench's, and keeps the median round; watch sees the server meanwhile.
func measureCeiling(ctx context.Context, cfg Config, p *progress.Line, watch *serverWatch) (Ceiling, Machine, error) {
	src, err := newSource(ctx, cfg, "ceiling")
	if err != nil {
		return Ceiling{}, Machine{}, err
	}
	defer src.cleanup()
	db, err := src.open(ctx)
	if err != nil {
		return Ceiling{}, Machine{}, err
	}
	defer db.Close()
	if err := db.Migrate(ctx, benchSchema...); err != nil {
		return Ceiling{}, Machine{}, err
	}
	m := machine()
	if db.Engine() == store.Postgres {
		m.Postgres, err = db.ServerVersion(ctx)
	} else {
		m.SQLite, err = db.SQLiteVersion(ctx)
	}
	if err != nil {
		return Ceiling{}, Machine{}, err
	}
	probe, err := store.NewCeilingProbe(ctx, db, retryFor(cfg.Retry))
	if err != nil {
		return Ceiling{}, Machine{}, err
	}
	defer probe.Close()
	var c Ceiling
	for range 200 { // warm up: the file, the cache and the WAL exist
		if _, err := probe.Update(ctx); err != nil {
			return c, m, err
		}
	}
	p.SetCell("ceiling (single-row UPDATE by primary key)")
	if err := watch.begin(ctx); err != nil {
		return c, m, err
	}
	for r := range cfg.CeilingRounds {
		p.Phase("round", int64(r), int64(cfg.CeilingRounds))
		start := time.Now()
		n := 0
		for time.Since(start) < cfg.CeilingRound {
			if _, err := probe.Update(ctx); err != nil {
				return c, m, err
			}
			n++
		}
		c.Transactions += n
		c.Rounds = append(c.Rounds, float64(n)/time.Since(start).Seconds())
	}
	c.TxPerS = lab.Median(c.Rounds)
	c.MsgsPerS = c.TxPerS / 2
	c.Server, err = watch.end(ctx)
	return c, m, err
}

// benchSchema is session 21's schema, on which every bench file runs.
var benchSchema = []store.Migration{store.PaymentsOutbox, store.OutboxLeasing, store.OutboxFencing, store.ClaimsAtScale}

type cell struct {
	claim    string
	batch    int
	messages int
	workers  int
}

// workerTally is what one worker (or the fetch-ahead fetcher or
// completer) measured; only that goroutine writes it.
type workerTally struct {
	latencies []int32 // claim (fetch) latencies in microseconds
	lags      []int32 // completion lag of each completed message, in microseconds
	busy      int64
	errors    int64
	longest   time.Duration
	finalized int64 // messages this worker finalized (fetch-ahead: worked)
	rejected  int64
}

// maxConsecutiveErrors stops a worker that keeps failing, so a broken
// database ends the cell (and shows as errors and lost) instead of hanging.
const maxConsecutiveErrors = 20

// runCell seeds a fresh file and drains it with cell.workers workers;
// watch sees the server during the drain.
func runCell(ctx context.Context, cfg Config, c cell, p *progress.Line, watch *serverWatch) (Row, error) {
	row := Row{Messages: c.messages, Workers: c.workers, Claim: c.claim, Batch: c.batch}
	src, err := newSource(ctx, cfg, fmt.Sprintf("bench-%s-b%d-%d-w%d", c.claim, c.batch, c.messages, c.workers))
	if err != nil {
		return row, err
	}
	defer src.cleanup()

	runtime.GC()
	debug.FreeOSMemory()
	_ = resetPeakRSS() // a refusal is said in the report header (peakMemorySource)

	setup, err := seedCell(ctx, c, src, p)
	if err != nil {
		return row, err
	}
	defer setup.Close()
	claims := make([]atomic.Uint32, c.messages+1) // successful claims per message Id (1..n)
	drainFn := drainCell
	if c.claim == FetchAheadClaim {
		drainFn = drainFetchAhead
	}
	if err := watch.begin(ctx); err != nil {
		return row, err
	}
	tallies, drained, err := drainFn(ctx, cfg, c, src, claims, p)
	row.Drain = drained.elapsed
	if err != nil {
		return row, err
	}
	if row.Server, err = watch.end(ctx); err != nil {
		return row, err
	}
	row.MsgsPerS = float64(drained.finalized) / row.Drain.Seconds()
	if drained.fetches > 0 && drained.completions > 0 {
		row.MeanFetch = float64(drained.finalized) / float64(drained.fetches)
		row.MeanCompletion = float64(drained.finalized) / float64(drained.completions)
	}
	tallyRow(&row, tallies, c.messages, drained.process)
	// Duplicates and lost messages are counted in the database: every
	// claim increments the message's fencing token, and no lease expires
	// during a cell, so a token above 1 is a second claim. The workers' own
	// tally must agree; the larger count is reported.
	reclaims, err := setup.Count(ctx, store.CountReclaims.SQL)
	if err != nil {
		return row, err
	}
	var tallied int64
	for i := range claims {
		if n := claims[i].Load(); n > 1 {
			tallied += int64(n - 1)
		}
	}
	row.Duplicates = max(int64(reclaims), tallied)
	lost, err := setup.Count(ctx, store.CountUnprocessed.SQL)
	if err != nil {
		return row, err
	}
	row.Lost = int64(lost)
	row.PeakRSSMB = peakRSSMB()
	return row, nil
}

// seedCell opens the cell's database, migrates it and seeds its backlog;
// the caller closes the connection, which later counts the outcome.
func seedCell(ctx context.Context, c cell, src source, p *progress.Line) (*store.DB, error) {
	setup, err := src.open(ctx)
	if err != nil {
		return nil, err
	}
	if err := setup.Migrate(ctx, benchSchema...); err != nil {
		setup.Close()
		return nil, err
	}
	p.Phase("seeding", 0, int64(c.messages))
	err = store.SeedBacklog(ctx, setup, store.Backlog{
		Messages: c.messages, First: time.Date(2026, 1, 15, 8, 0, 0, 0, time.UTC), Spacing: time.Millisecond,
		Progress: func(done int) { p.Set(int64(done)) },
	})
	if err != nil {
		setup.Close()
		return nil, err
	}
	return setup, nil
}

// cellDrain is how long a cell's drain took and how many messages it
// finalized; process, for fetch-ahead, is what its fetcher and completer
// measured (claim latencies, completion lags, retries, refusals).
type cellDrain struct {
	elapsed     time.Duration
	finalized   int64
	process     *workerTally
	fetches     int // fetch statements run, fetch-ahead only
	completions int // completion statements run, fetch-ahead only
}

// drainCell drains the cell's database with c.workers workers. Every worker
// opens its connection and prepares its statements before the clock
// starts; then all start together.
func drainCell(ctx context.Context, cfg Config, c cell, src source, claims []atomic.Uint32, p *progress.Line) ([]workerTally, cellDrain, error) {
	if c.batch < 1 {
		return nil, cellDrain{}, fmt.Errorf("bench: %s claim: batch %d", c.claim, c.batch)
	}
	design, _ := store.ScaleClaimNamed(c.claim)
	tallies := make([]workerTally, c.workers)
	var finalized atomic.Int64
	start := make(chan struct{})
	ready := make(chan error, c.workers)
	var wg sync.WaitGroup
	clk := clock.Real{}
	for i := range c.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := &tallies[i]
			db, err := src.open(ctx)
			if err != nil {
				ready <- err
				return
			}
			defer db.Close()
			cl, err := store.NewClaimer(ctx, db, fmt.Sprintf("Worker-%d", i+1), store.ClaimerConfig{SQL: design, Retry: retryFor(cfg.Retry)})
			if err != nil {
				ready <- err
				return
			}
			defer cl.Close()
			t.latencies = make([]int32, 0, c.messages/c.batch/c.workers+16)
			t.lags = make([]int32, 0, c.messages/c.workers+16)
			ready <- nil
			<-start
			drain(ctx, cl, clk, cfg.Lease, c.batch, claims, t, &finalized)
		}()
	}
	var openErr error
	for range c.workers {
		openErr = errors.Join(openErr, <-ready)
	}
	p.Phase("draining", 0, int64(c.messages))
	stopTicker := p.Follow(&finalized)
	began := time.Now()
	close(start)
	wg.Wait()
	d := cellDrain{elapsed: time.Since(began), finalized: finalized.Load()}
	stopTicker()
	return tallies, d, openErr
}

// tallyRow adds the workers' tallies (and the fetch-ahead process's
// fetcher and completer, if any) to row: latency and completion-lag
// percentiles, retries, errors, refusals, the longest wait and each
// worker's share.
func tallyRow(row *Row, tallies []workerTally, messages int, process *workerTally) {
	var lat, lags []int32
	var longest time.Duration
	add := func(t *workerTally) {
		lat = append(lat, t.latencies...)
		lags = append(lags, t.lags...)
		t.latencies, t.lags = nil, nil
		row.BusyRetries += t.busy
		row.Errors += t.errors
		row.Rejected += t.rejected
		longest = max(longest, t.longest)
	}
	for i := range tallies {
		add(&tallies[i])
		row.WorkerShares = append(row.WorkerShares, float64(tallies[i].finalized)/float64(max(messages, 1)))
	}
	if process != nil {
		add(process)
	}
	slices.Sort(lat)
	slices.Sort(lags)
	row.P50Ms, row.P99Ms = percentileMs(lat, 0.50), percentileMs(lat, 0.99)
	row.CompleteP50Ms, row.CompleteP99Ms = percentileMs(lags, 0.50), percentileMs(lags, 0.99)
	row.LongestWaitMs = float64(longest.Microseconds()) / 1000
}

// drain is one worker: claim up to batch messages, "process" them (the
// bench measures the claim path, so processing is empty), finalize them,
// until nothing is claimable.
func drain(ctx context.Context, cl *store.Claimer, clk clock.Clock, lease time.Duration, batch int,
	claims []atomic.Uint32, t *workerTally, finalized *atomic.Int64) {
	failures := 0
	fail := func() bool {
		t.errors++
		failures++
		return failures >= maxConsecutiveErrors || ctx.Err() != nil
	}
	for ctx.Err() == nil {
		b, err := cl.Claim(ctx, clk.Now(), lease, batch)
		t.busy += int64(b.Stats.BusyRetries)
		t.longest = max(t.longest, b.Stats.Waited)
		if err != nil {
			if fail() {
				return
			}
			continue
		}
		t.latencies = append(t.latencies, int32(min(b.Stats.Waited.Microseconds(), 1<<31-1)))
		if len(b.Messages) == 0 {
			return
		}
		for _, m := range b.Messages {
			if m.ID >= 1 && m.ID < int64(len(claims)) {
				claims[m.ID].Add(1)
			}
		}
		f, err := cl.Finalize(ctx, b.Messages, clk.Now())
		t.busy += int64(f.Stats.BusyRetries)
		t.longest = max(t.longest, f.Stats.Waited)
		if err != nil {
			if fail() {
				return
			}
			continue
		}
		failures = 0
		// The work was empty and ended when the finalize began: each
		// message's completion lag is the finalize transaction's time.
		lag := int32(min(f.Stats.Waited.Microseconds(), 1<<31-1))
		for range f.Finalized {
			t.lags = append(t.lags, lag)
		}
		t.finalized += int64(len(f.Finalized))
		t.rejected += int64(len(f.Rejected))
		finalized.Add(int64(len(f.Finalized)))
	}
}

// percentileMs is the nearest-rank q-quantile of latencies in microseconds,
// in milliseconds.
func percentileMs(sorted []int32, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := min(max(int(math.Ceil(q*float64(len(sorted))))-1, 0), len(sorted)-1)
	return float64(sorted[i]) / 1000
}

func machine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), OSArch: runtime.GOOS + "/" + runtime.GOARCH}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

// Peak memory: on Linux the kernel's high-water mark of the process's
// resident set (VmHWM), reset before each cell by writing 5 to
// /proc/self/clear_refs; it counts everything, SQLite's page caches
// included. Elsewhere, the Go runtime's own mapped memory, which misses
// memory SQLite allocates outside the Go heap.
const (
	statusFile    = "/proc/self/status"
	clearRefsFile = "/proc/self/clear_refs"
)

func peakMemorySource() string {
	if _, ok := readVmHWM(); ok && resetPeakRSS() == nil {
		return "VmHWM from /proc/self/status (peak resident set of the whole process, reset before each cell via /proc/self/clear_refs)"
	}
	if _, ok := readVmHWM(); ok {
		return "VmHWM from /proc/self/status (peak resident set of the whole process since it started: /proc/self/clear_refs cannot be written here)"
	}
	return "Go runtime MemStats.Sys (Go-managed memory only; /proc/self/status is not available here)"
}

// resetPeakRSS starts a new high-water mark; where the kernel refuses,
// [peakMemorySource] says the figure covers the whole process.
func resetPeakRSS() error { return os.WriteFile(clearRefsFile, []byte("5"), 0) }

func peakRSSMB() float64 {
	if kb, ok := readVmHWM(); ok {
		return float64(kb) / 1024
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.Sys) / (1 << 20)
}

func readVmHWM() (int64, bool) {
	b, err := os.ReadFile(statusFile)
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				return 0, false
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			return kb, err == nil
		}
	}
	return 0, false
}
