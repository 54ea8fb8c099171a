package bench

import (
	"context"
	"time"

	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/store"
)

// This file watches the PostgreSQL server around each measurement, so a
// row's figures can be read beside what the server did in the background:
// a checkpoint that writes every dirty buffer of the cells before it to
// the same disk that every commit flushes its log to, autovacuum, the
// write-ahead log. By default it also forces a checkpoint before each
// measurement (after the cell's seeding, before its drain), so every cell
// starts from the same state: nothing dirty left by the cells before it,
// and no checkpoint begun before it still writing (the next timed one is
// checkpoint_timeout away).

// serverWatch is the bench's own connection to the server (no schema), or
// nil on SQLite, where every method does nothing.
type serverWatch struct {
	db         *store.DB
	checkpoint bool   // force a CHECKPOINT before each measurement
	refused    string // why the server refused it, once it has
	forcedMs   float64
	before     store.ServerActivity
}

// newServerWatch connects to cfg.Database; nil on SQLite.
func newServerWatch(ctx context.Context, cfg Config) (*serverWatch, error) {
	if cfg.Database == "" {
		return nil, nil
	}
	db, err := store.OpenPostgres(ctx, cfg.Database, "", store.Config{})
	if err != nil {
		return nil, err
	}
	return &serverWatch{db: db, checkpoint: cfg.Checkpoint}, nil
}

func (w *serverWatch) close() {
	if w != nil {
		w.db.Close()
	}
}

// begin forces a checkpoint (unless told not to, or the server refused
// one before) and reads the server's activity.
func (w *serverWatch) begin(ctx context.Context) error {
	if w == nil {
		return nil
	}
	w.forcedMs = 0
	pre, err := w.db.ServerActivity(ctx)
	if err != nil {
		return err
	}
	w.before = pre
	if !w.checkpoint || w.refused != "" {
		return nil
	}
	start := time.Now()
	if err := w.db.Checkpoint(ctx); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		w.refused = err.Error() // no pg_checkpoint role: measure without, and say so
		return nil
	}
	w.forcedMs = float64(time.Since(start).Microseconds()) / 1000
	// The checkpointer wakes the CHECKPOINT's caller before it reports the
	// checkpoint to the statistics: wait (a little) until it has, so the
	// forced checkpoint is not counted as one that ran during the drain.
	for range 200 {
		if w.before, err = w.db.ServerActivity(ctx); err != nil || w.before.CheckpointsRequested > pre.CheckpointsRequested {
			return err
		}
		if err := sleepCtx(ctx, time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// sleepCtx sleeps d, or less if ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// end reads the server's activity again and returns what it did since
// begin; nil on SQLite.
func (w *serverWatch) end(ctx context.Context) (*lab.BenchServer, error) {
	if w == nil {
		return nil, nil
	}
	now, err := w.db.ServerActivity(ctx)
	if err != nil {
		return nil, err
	}
	d := now.Since(w.before)
	return &lab.BenchServer{
		CheckpointForced:  w.forcedMs > 0,
		CheckpointMs:      w.forcedMs,
		CheckpointRefused: w.refused,
		Checkpoints:       d.CheckpointsTimed + d.CheckpointsRequested,
		BuffersCheckpoint: d.BuffersCheckpoint,
		BuffersBackend:    d.BuffersBackend,
		WALMB:             float64(d.WALBytes) / (1 << 20),
		Autovacuums:       d.Autovacuums,
		CatalogDeadTuples: d.CatalogDeadTuples,
	}, nil
}
