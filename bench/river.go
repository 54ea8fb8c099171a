package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/outboxlab/outboxlab/internal/progress"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/store"
)

// This file runs River (riverqueue/river) beside the lab's claims, so
// they can be read beside a production job queue measured in the same
// run: with its pgx v5 driver on the bench's server, with its SQLite
// driver (riversqlite) on a file of the bench's folder; the same backlogs,
// the same worker counts, no-op work, and the outcome counted in River's
// own table.

// RiverClaim is the Claim of a River row.
const RiverClaim = "river"

// riverVersion is the River release the bench runs (go.mod's).
const riverVersion = "v0.51.2"

// riverIdle is how long a River drain may go without completing a job
// before the bench stops it and counts what is left as lost.
const riverIdle = 30 * time.Second

// noopArgs is a River job that does nothing: the bench measures the queue.
type noopArgs struct{}

func (noopArgs) Kind() string { return "outboxlab_noop" }

func riverAbout(engine string) string {
	where := "riverpgxv5: one client (one process) with one pgxpool of workers+2 connections (River's notifier holds " +
		"one for LISTEN), jobs inserted with InsertManyFast (COPY) before the client starts, in a schema of their own"
	if engine == string(store.SQLite) {
		where = "riversqlite on modernc.org/sqlite: one client (one process) with one *sql.DB of one connection, as the " +
			"driver's documentation asks, on a file of its own with the lab's settings (WAL, the same synchronous), jobs " +
			"inserted with InsertManyFast (one row at a time in this driver) before the client starts"
	}
	return fmt.Sprintf("River %s (%s), queue %q with MaxWorkers = workers, FetchCooldown %v (River's minimum; its "+
		"default is 100 ms), jobs of a kind that does nothing. msgs/s: jobs completed from Start to the last JobCompleted "+
		"event. Dup: attempts beyond a job's first, Lost: jobs not completed, Errors: jobs with an error recorded, all "+
		"from river_job. River fetches up to its free workers in one statement and completes in batches (every 50 ms "+
		"once 100 are waiting, else every 250 ms) by id and state = 'running', without a fencing token: no fencing.",
		riverVersion, where, river.QueueDefault, river.FetchCooldownMin)
}

// runRiver drains every backlog size with River for every worker count,
// after the lab's cells, and adds one row each to rep.
func runRiver(ctx context.Context, cfg Config, rep *Report, p *progress.Line, watch *serverWatch) error {
	rep.RiverAbout = riverAbout(rep.Engine)
	for _, n := range cfg.Messages {
		for _, w := range cfg.Workers {
			p.SetCell(fmt.Sprintf("River, %d messages, %d workers", n, w))
			cellFn := riverCell
			if cfg.Database == "" {
				cellFn = riverSQLiteCell
			}
			row, err := cellFn(ctx, cfg, n, w, p, watch)
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

// riverCell migrates River into a fresh schema on cfg.Database, inserts n
// no-op jobs and works them with one client of w workers, then counts the
// outcome.
func riverCell(ctx context.Context, cfg Config, n, w int, p *progress.Line, watch *serverWatch) (Row, error) {
	url := cfg.Database
	row := Row{Messages: n, Workers: w, Claim: RiverClaim, Peer: true}
	schema := randomSchema()
	if err := store.CreateSchema(ctx, url, schema, store.Config{}); err != nil {
		return row, err
	}
	defer func() { _ = store.DropSchema(context.Background(), url, schema, store.Config{}) }()

	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		return row, fmt.Errorf("bench: river: %w", err)
	}
	pc.MaxConns = int32(w + 2)
	pc.ConnConfig.RuntimeParams["application_name"] = "outboxlab-river"
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return row, fmt.Errorf("bench: river: %w", err)
	}
	defer pool.Close()
	d, err := driveRiver(ctx, riverpgxv5.New(pool), schema, n, w, p, watch)
	row.Drain = d.elapsed
	if err != nil {
		return row, err
	}
	row.MsgsPerS = float64(d.completed) / row.Drain.Seconds()
	row.Server = d.server

	db, err := store.OpenPostgres(ctx, url, schema, store.Config{})
	if err != nil {
		return row, err
	}
	defer db.Close()
	o, err := db.RiverOutcome(ctx)
	if err != nil {
		return row, err
	}
	row.Duplicates, row.Lost, row.Errors = o.Retried, o.NotCompleted, max(o.Errored, d.failed)
	row.PeakRSSMB = peakRSSMB()
	return row, nil
}

// riverSQLiteCell migrates River into a fresh file in cfg.Dir, inserts n
// no-op jobs and works them with one client of w workers on one
// connection, then counts the outcome.
func riverSQLiteCell(ctx context.Context, cfg Config, n, w int, p *progress.Line, _ *serverWatch) (Row, error) {
	row := Row{Messages: n, Workers: w, Claim: RiverClaim, Peer: true}
	path := filepath.Join(cfg.Dir, fmt.Sprintf("river-%d-w%d.db", n, w))
	defer func() { _ = store.RemoveFiles(path) }()
	pool, err := store.OpenPeer(ctx, path, openConfig(cfg))
	if err != nil {
		return row, err
	}
	d, err := driveRiver(ctx, riversqlite.New(pool), "", n, w, p, nil)
	pool.Close()
	row.Drain = d.elapsed
	if err != nil {
		return row, err
	}
	row.MsgsPerS = float64(d.completed) / row.Drain.Seconds()
	db, err := store.Open(ctx, path, openConfig(cfg))
	if err != nil {
		return row, err
	}
	defer db.Close()
	o, err := db.RiverOutcome(ctx)
	if err != nil {
		return row, err
	}
	row.Duplicates, row.Lost, row.Errors = o.Retried, o.NotCompleted, max(o.Errored, d.failed)
	row.PeakRSSMB = peakRSSMB()
	return row, nil
}

// riverDrain is what one River drain measured from its events.
type riverDrain struct {
	elapsed           time.Duration
	completed, failed int64
	server            *lab.BenchServer
}

// driveRiver migrates River's tables with driver (into schema, on
// PostgreSQL), inserts n no-op jobs, and works them with one client of w
// workers until all completed (or none completed for riverIdle), then
// stops the client; watch sees the server during the drain.
func driveRiver[TTx any](ctx context.Context, driver riverdriver.Driver[TTx], schema string, n, w int, p *progress.Line, watch *serverWatch) (riverDrain, error) {
	var d riverDrain
	quiet := slog.New(slog.DiscardHandler)
	migrator, err := rivermigrate.New(driver, &rivermigrate.Config{Schema: schema, Logger: quiet})
	if err != nil {
		return d, fmt.Errorf("bench: river migrate: %w", err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return d, fmt.Errorf("bench: river migrate: %w", err)
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(func(context.Context, *river.Job[noopArgs]) error { return nil }))
	client, err := river.NewClient(driver, &river.Config{
		Schema: schema, Logger: quiet, Workers: workers, FetchCooldown: river.FetchCooldownMin,
		Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: w}},
	})
	if err != nil {
		return d, fmt.Errorf("bench: river client: %w", err)
	}
	if err := insertRiverJobs(ctx, client, n, p); err != nil {
		return d, err
	}
	events, cancel := client.SubscribeConfig(&river.SubscribeConfig{ChanSize: n + 16,
		Kinds: []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed}})
	defer cancel()

	if err := watch.begin(ctx); err != nil {
		return d, err
	}
	p.Phase("draining", 0, int64(n))
	began := time.Now()
	if err := client.Start(ctx); err != nil {
		return d, fmt.Errorf("bench: river start: %w", err)
	}
	// From here every return stops the client: a running client keeps
	// its pool's connections checked out, and closing the pool would
	// wait for them for ever.
	d.completed, d.failed = waitRiver(ctx, events, n, p)
	d.elapsed = time.Since(began)
	d.server, err = watch.end(ctx)
	return d, errors.Join(err, stopRiver(client))
}

// riverStopTimeout bounds River's graceful stop after a drain.
const riverStopTimeout = 10 * time.Second

// stopRiver stops a started client, waiting at most riverStopTimeout for
// its jobs (no-ops) and its completer to finish.
func stopRiver[TTx any](client *river.Client[TTx]) error {
	ctx, cancel := context.WithTimeout(context.Background(), riverStopTimeout)
	defer cancel()
	if err := client.Stop(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("bench: river stop: %w", err)
	}
	return nil
}

// insertRiverJobs inserts n no-op jobs in chunks, with COPY.
func insertRiverJobs[TTx any](ctx context.Context, client *river.Client[TTx], n int, p *progress.Line) error {
	const chunk = 10_000
	p.Phase("inserting", 0, int64(n))
	params := make([]river.InsertManyParams, 0, min(n, chunk))
	for done := 0; done < n; {
		params = params[:0]
		for range min(chunk, n-done) {
			params = append(params, river.InsertManyParams{Args: noopArgs{}})
		}
		if _, err := client.InsertManyFast(ctx, params); err != nil {
			return fmt.Errorf("bench: river insert: %w", err)
		}
		done += len(params)
		p.Set(int64(done))
	}
	return nil
}

// waitRiver counts River's events until n jobs completed, ctx ends, or no
// job completes for riverIdle.
func waitRiver(ctx context.Context, events <-chan *river.Event, n int, p *progress.Line) (completed, failed int64) {
	idle := time.NewTimer(riverIdle)
	defer idle.Stop()
	for completed < int64(n) {
		select {
		case <-ctx.Done():
			return completed, failed
		case <-idle.C:
			return completed, failed
		case e, ok := <-events:
			if !ok {
				return completed, failed
			}
			if e.Kind == river.EventKindJobCompleted {
				completed++
				p.Set(completed)
			} else {
				failed++
			}
			idle.Reset(riverIdle)
		}
	}
	return completed, failed
}
