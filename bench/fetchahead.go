package bench

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outboxlab/outboxlab/clock"
	"github.com/outboxlab/outboxlab/internal/progress"
	"github.com/outboxlab/outboxlab/store"
)

// This file drains a cell in River's shape, fenced (`--claim fetch-ahead`):
// one process with one fetcher, the cell's workers and one completer. The
// fetcher claims up to the free workers' count with one statement, each
// message with its own fencing token and lease ([store.Fetcher]); the
// workers take messages one at a time from a channel and do the (empty)
// work; the completer marks what they finished Processed with one
// statement, each row under its own owner and token ([store.Completer]),
// when it holds CompleteBatch of them or CompleteInterval after the first
// of them finished.

// FetchAheadClaim is the Claim of a fetch-ahead row.
const FetchAheadClaim = "fetch-ahead"

// The completer's defaults, measured (docs/bench.md, "Fetch-ahead's
// completer"): a flush every 64 finished messages, or 2 ms after the first
// of a batch finished.
const (
	DefaultCompleteBatch    = 64
	DefaultCompleteInterval = 2 * time.Millisecond
)

// fetchAheadOwner is the LockedBy of every message the cell's one process
// claims.
const fetchAheadOwner = "Process-1"

// fetchAheadAbout says how a fetch-ahead cell runs on engine, with the
// completer's settings.
func fetchAheadAbout(cfg Config, engine string) string {
	conns := "the fetcher and the completer share the process's one connection (SQLite has one writer)"
	if engine == string(store.Postgres) {
		conns = "the fetcher and the completer each have a connection"
	}
	return fmt.Sprintf("River's shape, fenced: one process (owner %s): one fetcher claims up to the free workers' count in one statement, "+
		"each message with its own fencing token and lease; the workers take one message at a time; one completer "+
		"completes finished messages in one statement, each row guarded by owner and token, at --complete-batch %d "+
		"or --complete-interval %v after the first finished, whichever comes first; %s.",
		fetchAheadOwner, cfg.CompleteBatch, cfg.CompleteInterval, conns)
}

// finishedMessage is a message a worker has finished, on its way to the
// completer.
type finishedMessage struct {
	msg   store.ClaimedMessage
	ended time.Time // when its work ended
}

// fetchAheadProcess is one process of the fetch-ahead shape: its services
// and the channels between its goroutines.
type fetchAheadProcess struct {
	cfg         Config
	fetcher     *store.Fetcher
	completer   *store.Completer
	free        chan struct{} // one token per idle worker
	work        chan store.ClaimedMessage
	finished    chan finishedMessage // to the completer
	claims      []atomic.Uint32
	completed   *atomic.Int64
	fetchT      workerTally // the fetcher's: fetch latencies, retries, errors
	fetchErr    error       // why the fetcher gave up, after maxConsecutiveErrors failed fetches
	fetches     int         // fetch statements that claimed messages
	completions int         // completion statements run (batches flushed)
	completeT   workerTally // the completer's: completion lags, retries, refusals
}

// drainFetchAhead drains the cell's database with one fetch-ahead process
// of c.workers workers. On SQLite the fetcher and the completer share the
// process's one connection (SQLite has one writer; River's SQLite driver
// and goqite ask for one connection too), on PostgreSQL each has its own.
// Statements are prepared before the clock starts. The drain fails, with
// what it measured, when the fetcher gave up on a fetch that kept failing.
func drainFetchAhead(ctx context.Context, cfg Config, c cell, src source, claims []atomic.Uint32, p *progress.Line) ([]workerTally, cellDrain, error) {
	fetchDB, err := src.open(ctx)
	if err != nil {
		return nil, cellDrain{}, err
	}
	defer fetchDB.Close()
	completeDB := fetchDB
	if fetchDB.Engine() == store.Postgres {
		if completeDB, err = src.open(ctx); err != nil {
			return nil, cellDrain{}, err
		}
		defer completeDB.Close()
	}
	fc := store.FetchAheadConfig{SQL: store.FetchAhead, Retry: retryFor(cfg.Retry)}
	fetcher, err := store.NewFetcher(ctx, fetchDB, fetchAheadOwner, fc)
	if err != nil {
		return nil, cellDrain{}, err
	}
	defer fetcher.Close()
	completer, err := store.NewCompleter(ctx, completeDB, fetchAheadOwner, fc)
	if err != nil {
		return nil, cellDrain{}, err
	}
	defer completer.Close()

	var completed atomic.Int64
	pr := &fetchAheadProcess{
		cfg: cfg, fetcher: fetcher, completer: completer,
		free:     make(chan struct{}, c.workers),
		work:     make(chan store.ClaimedMessage, c.workers),
		finished: make(chan finishedMessage, 2*cfg.CompleteBatch+c.workers),
		claims:   claims, completed: &completed,
	}
	for range c.workers {
		pr.free <- struct{}{}
	}
	pr.fetchT.latencies = make([]int32, 0, c.messages/c.workers+16)
	pr.completeT.lags = make([]int32, 0, c.messages+16)
	tallies := make([]workerTally, c.workers)

	p.Phase("draining", 0, int64(c.messages))
	stopTicker := p.Follow(&completed)
	began := time.Now()
	var wg sync.WaitGroup
	wg.Add(c.workers)
	go pr.fetch(ctx)
	for i := range c.workers {
		go func() {
			defer wg.Done()
			pr.workLoop(&tallies[i])
		}()
	}
	go func() {
		wg.Wait()
		close(pr.finished)
	}()
	pr.complete(ctx)
	d := cellDrain{elapsed: time.Since(began), finalized: completed.Load(), process: &pr.fetchT,
		fetches: pr.fetches, completions: pr.completions}
	stopTicker()
	pr.fetchT.busy += pr.completeT.busy
	pr.fetchT.errors += pr.completeT.errors
	pr.fetchT.rejected += pr.completeT.rejected
	pr.fetchT.longest = max(pr.fetchT.longest, pr.completeT.longest)
	pr.fetchT.lags = pr.completeT.lags
	if pr.fetchErr != nil {
		return tallies, d, fmt.Errorf("bench: %s fetcher stopped after %d failed fetches in a row: %w",
			FetchAheadClaim, maxConsecutiveErrors, pr.fetchErr)
	}
	return tallies, d, nil
}

// fetch is the fetcher: it waits for a free worker, takes every worker
// that is free then, and claims that many messages with one statement,
// until a fetch finds nothing claimable, or maxConsecutiveErrors fetches
// in a row failed (pr.fetchErr says why). It closes the work channel.
func (pr *fetchAheadProcess) fetch(ctx context.Context) {
	defer close(pr.work)
	t := &pr.fetchT
	clk := clock.Real{}
	failures := 0
	for ctx.Err() == nil {
		select {
		case <-pr.free:
		case <-ctx.Done():
			return
		}
		limit := 1
		// Let the workers that have just been handed messages run first:
		// with short work they free their slots now, and one fetch takes
		// them all instead of one fetch each.
		runtime.Gosched()
	more:
		for limit < cap(pr.free) {
			select {
			case <-pr.free:
				limit++
			default:
				break more
			}
		}
		b, err := pr.fetcher.Fetch(ctx, clk.Now(), pr.cfg.Lease, limit)
		t.busy += int64(b.Stats.BusyRetries)
		t.longest = max(t.longest, b.Stats.Waited)
		if err != nil {
			// A failed fetch claimed nothing: every worker it took is
			// free again, whatever rows the rolled-back transaction read.
			for range limit {
				pr.free <- struct{}{}
			}
			t.errors++
			if failures++; failures >= maxConsecutiveErrors {
				pr.fetchErr = err
				return
			}
			continue
		}
		for range limit - len(b.Messages) {
			pr.free <- struct{}{}
		}
		failures = 0
		t.latencies = append(t.latencies, int32(min(b.Stats.Waited.Microseconds(), 1<<31-1)))
		if len(b.Messages) == 0 {
			return
		}
		pr.fetches++
		for _, m := range b.Messages {
			if m.ID >= 1 && m.ID < int64(len(pr.claims)) {
				pr.claims[m.ID].Add(1)
			}
			pr.work <- m
		}
	}
}

// workLoop is one worker: it takes one message at a time, does the
// (empty) work, hands the message to the completer and is free again.
func (pr *fetchAheadProcess) workLoop(t *workerTally) {
	for m := range pr.work {
		t.finalized++ // worked; the completer counts what committed
		pr.finished <- finishedMessage{msg: m, ended: time.Now()}
		pr.free <- struct{}{}
	}
}

// complete is the completer: it gathers finished messages and completes
// them with one statement once it holds CompleteBatch of them, or
// CompleteInterval after the first of them finished, and the rest when
// the workers are done.
func (pr *fetchAheadProcess) complete(ctx context.Context) {
	t := &pr.completeT
	clk := clock.Real{}
	batch := make([]store.ClaimedMessage, 0, pr.cfg.CompleteBatch)
	ended := make([]time.Time, 0, pr.cfg.CompleteBatch)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var due <-chan time.Time
	flush := func() {
		due = nil
		if len(batch) == 0 {
			return
		}
		pr.completions++
		f, err := pr.completer.Complete(ctx, batch, clk.Now())
		committed := time.Now()
		t.busy += int64(f.Stats.BusyRetries)
		t.longest = max(t.longest, f.Stats.Waited)
		if err != nil {
			// The batch stays Processing under its lease: the cell counts
			// it as lost, the error as an error.
			t.errors++
		} else {
			done := make(map[int64]bool, len(f.Finalized))
			for _, id := range f.Finalized {
				done[id] = true
			}
			for i, m := range batch {
				if done[m.ID] {
					t.lags = append(t.lags, int32(min(committed.Sub(ended[i]).Microseconds(), 1<<31-1)))
				}
			}
			t.rejected += int64(len(f.Rejected))
			pr.completed.Add(int64(len(f.Finalized)))
		}
		batch, ended = batch[:0], ended[:0]
	}
	for {
		select {
		case fm, ok := <-pr.finished:
			if !ok {
				flush()
				return
			}
			batch, ended = append(batch, fm.msg), append(ended, fm.ended)
			if len(batch) >= pr.cfg.CompleteBatch || pr.cfg.CompleteInterval <= 0 && len(pr.finished) == 0 {
				flush()
			} else if len(batch) == 1 {
				timer.Reset(pr.cfg.CompleteInterval)
				due = timer.C
			}
		case <-due:
			flush()
		}
	}
}
