package bench

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"maragu.dev/goqite"

	"github.com/outboxlab/outboxlab/internal/progress"
	"github.com/outboxlab/outboxlab/store"
)

// This file runs goqite (maragu.dev/goqite, a SQLite queue in the style of
// SQS) beside the lab's claims on SQLite: the same backlogs, the same
// worker counts, no-op work, the same file settings.

// GoqiteClaim is the Claim of a goqite row.
const GoqiteClaim = "goqite"

// goqiteVersion is the goqite release the bench runs (go.mod's).
const goqiteVersion = "v0.4.0"

// goqiteQueue is the name of the bench's goqite queue.
const goqiteQueue = "outboxlab"

func goqiteAbout(cfg Config) string {
	return fmt.Sprintf("goqite %s (maragu.dev/goqite) on modernc.org/sqlite: one *sql.DB of one connection, as goqite's "+
		"README sets it up, on a file of its own with the lab's settings (WAL, the same synchronous, BEGIN IMMEDIATE), "+
		"goqite's own schema; the workers are goroutines that each loop Receive (one UPDATE … RETURNING of the oldest "+
		"receivable message, its own transaction), the empty work, Delete (its own transaction), until Receive finds "+
		"nothing; message timeout %v (the lab's lease), MaxReceive 3. Dup: receives beyond a message's first, counted by "+
		"the workers; Lost: messages left in the table. goqite's receive has a timeout and a receive count, and its delete "+
		"goes by id alone: no fencing.", goqiteVersion, cfg.Lease)
}

// runGoqite drains every backlog size with goqite for every worker count,
// after the lab's cells, and adds one row each to rep.
func runGoqite(ctx context.Context, cfg Config, rep *Report, p *progress.Line) error {
	rep.GoqiteAbout = goqiteAbout(cfg)
	for _, n := range cfg.Messages {
		for _, w := range cfg.Workers {
			p.SetCell(fmt.Sprintf("goqite, %d messages, %d workers", n, w))
			row, err := goqiteCell(ctx, cfg, n, w, p)
			if err == nil {
				err = ctx.Err()
			}
			if err != nil {
				return err
			}
			addPeerRow(rep, row)
		}
	}
	return nil
}

// addPeerRow adds a peer's row, measured against the run's ceiling.
func addPeerRow(rep *Report, row Row) {
	row.CeilingMsgsPerS = rep.Ceiling.MsgsPerS
	if rep.Ceiling.MsgsPerS > 0 {
		row.CeilingRatio = row.MsgsPerS / rep.Ceiling.MsgsPerS
	}
	rep.Rows = append(rep.Rows, row)
}

// goqiteCell makes goqite's table in a fresh file, sends n messages, and
// drains them with w workers, then counts the outcome.
func goqiteCell(ctx context.Context, cfg Config, n, w int, p *progress.Line) (Row, error) {
	row := Row{Messages: n, Workers: w, Claim: GoqiteClaim, Peer: true}
	path := filepath.Join(cfg.Dir, fmt.Sprintf("goqite-%d-w%d.db", n, w))
	defer func() { _ = store.RemoveFiles(path) }()
	setup, err := store.Open(ctx, path, openConfig(cfg))
	if err != nil {
		return row, err
	}
	defer setup.Close()
	if err := setup.Migrate(ctx, store.GoqiteSchema); err != nil {
		return row, err
	}
	pool, err := store.OpenPeer(ctx, path, openConfig(cfg))
	if err != nil {
		return row, err
	}
	defer pool.Close()
	q := goqite.New(goqite.NewOpts{DB: pool, Name: goqiteQueue, Timeout: cfg.Lease})
	if err := sendGoqite(ctx, q, pool, n, p); err != nil {
		return row, err
	}

	received := make([]atomic.Uint32, n+1) // receives per message (1..n)
	var deleted, errs atomic.Int64
	p.Phase("draining", 0, int64(n))
	stopTicker := p.Follow(&deleted)
	began := time.Now()
	var wg sync.WaitGroup
	for range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			goqiteWorker(ctx, q, received, &deleted, &errs)
		}()
	}
	wg.Wait()
	row.Drain = time.Since(began)
	stopTicker()
	row.MsgsPerS = float64(deleted.Load()) / row.Drain.Seconds()
	row.Errors = errs.Load()
	for i := range received {
		if k := received[i].Load(); k > 1 {
			row.Duplicates += int64(k - 1)
		}
	}
	left, err := setup.Count(ctx, store.GoqiteLeft.SQL)
	if err != nil {
		return row, err
	}
	row.Lost = int64(left)
	row.PeakRSSMB = peakRSSMB()
	return row, nil
}

// goqiteWorker receives, "works" and deletes one message at a time until
// nothing is receivable.
func goqiteWorker(ctx context.Context, q *goqite.Queue, received []atomic.Uint32, deleted, errs *atomic.Int64) {
	failures := 0
	fail := func() bool {
		errs.Add(1)
		failures++
		return failures >= maxConsecutiveErrors || ctx.Err() != nil
	}
	for ctx.Err() == nil {
		m, err := q.Receive(ctx)
		if err != nil {
			if fail() {
				return
			}
			continue
		}
		if m == nil {
			return
		}
		if seq, err := strconv.Atoi(string(m.Body)); err == nil && seq >= 1 && seq < len(received) {
			received[seq].Add(1)
		}
		if err := q.Delete(ctx, m.ID); err != nil {
			if fail() {
				return
			}
			continue
		}
		failures = 0
		deleted.Add(1)
	}
}

// sendGoqite sends messages 1..n, each body its number, with goqite's own
// SendTx, in transactions of 10,000.
func sendGoqite(ctx context.Context, q *goqite.Queue, pool *sql.DB, n int, p *progress.Line) error {
	const chunk = 10_000
	p.Phase("sending", 0, int64(n))
	for done := 0; done < n; {
		tx, err := pool.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("bench: goqite send: %w", err)
		}
		end := min(done+chunk, n)
		for i := done; i < end; i++ {
			if err := q.SendTx(ctx, tx, goqite.Message{Body: []byte(strconv.Itoa(i + 1))}); err != nil {
				_ = tx.Rollback()
				return fmt.Errorf("bench: goqite send: %w", err)
			}
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("bench: goqite send: %w", err)
		}
		done = end
		p.Set(int64(done))
	}
	return nil
}
