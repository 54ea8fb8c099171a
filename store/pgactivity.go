package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
)

// ServerActivity is what a PostgreSQL server has done in the background,
// as its cumulative statistics count it: checkpoints, the buffers they
// and the backends wrote, the write-ahead log's position, and autovacuum.
// Read it before and after a piece of work and take [ServerActivity.Since]
// to see what the server did meanwhile, besides the work.
type ServerActivity struct {
	CheckpointsTimed     int64 // checkpoints started because checkpoint_timeout passed
	CheckpointsRequested int64 // checkpoints requested: max_wal_size reached, or CHECKPOINT
	BuffersCheckpoint    int64 // buffers the checkpointer wrote
	BuffersBackend       int64 // buffers backends wrote themselves to evict them (PostgreSQL 16 and earlier; 0 after)
	WALBytes             int64 // insert position of the write-ahead log, in bytes (flushed or not)
	Autovacuums          int64 // autovacuum and autoanalyze runs on this database's tables, catalogs included
	DeadTuples           int64 // dead row versions in this database's tables, catalogs included
	CatalogDeadTuples    int64 // of which in the system catalogs (pg_catalog)
}

// Since is a minus b for the counters, and a's own figures for the
// gauges (dead tuples).
func (a ServerActivity) Since(b ServerActivity) ServerActivity {
	return ServerActivity{
		CheckpointsTimed:     a.CheckpointsTimed - b.CheckpointsTimed,
		CheckpointsRequested: a.CheckpointsRequested - b.CheckpointsRequested,
		BuffersCheckpoint:    a.BuffersCheckpoint - b.BuffersCheckpoint,
		BuffersBackend:       a.BuffersBackend - b.BuffersBackend,
		WALBytes:             a.WALBytes - b.WALBytes,
		Autovacuums:          a.Autovacuums - b.Autovacuums,
		DeadTuples:           a.DeadTuples,
		CatalogDeadTuples:    a.CatalogDeadTuples,
	}
}

// ServerActivity reads the server's [ServerActivity] now, from
// pg_stat_bgwriter (PostgreSQL 16 and earlier) or pg_stat_checkpointer
// (17 and later), pg_current_wal_insert_lsn and pg_stat_all_tables. It flushes
// this connection's statistics first. PostgreSQL only.
func (db *DB) ServerActivity(ctx context.Context) (ServerActivity, error) {
	var a ServerActivity
	if db.Engine() != Postgres {
		return a, errors.New("store: server activity: PostgreSQL only")
	}
	var num string
	if err := db.sql.QueryRowContext(ctx, ReadServerVersionNum.SQL).Scan(&num); err != nil {
		return a, fmt.Errorf("store: server activity: %w", err)
	}
	stmt := ReadCheckpoints
	if v, _ := strconv.Atoi(num); v >= 170000 {
		stmt = ReadCheckpoints17
	}
	if err := db.FlushStats(ctx); err != nil {
		return a, err
	}
	if err := db.sql.QueryRowContext(ctx, stmt.SQL).Scan(&a.CheckpointsTimed, &a.CheckpointsRequested,
		&a.BuffersCheckpoint, &a.BuffersBackend, &a.WALBytes); err != nil {
		return a, fmt.Errorf("store: server activity: %w", err)
	}
	if err := db.sql.QueryRowContext(ctx, ReadAutovacuum.SQL).Scan(&a.Autovacuums, &a.DeadTuples, &a.CatalogDeadTuples); err != nil {
		return a, fmt.Errorf("store: server activity: %w", err)
	}
	return a, nil
}

// Checkpoint runs CHECKPOINT: the server writes every dirty buffer and
// starts a new checkpoint cycle now, so the work that follows does not
// share the disk with a checkpoint begun before it (a checkpoint begins
// again only after checkpoint_timeout, or max_wal_size of WAL).
// It needs the pg_checkpoint role or a superuser (PostgreSQL 15 and
// later; a superuser before). PostgreSQL only.
func (db *DB) Checkpoint(ctx context.Context) error {
	if db.Engine() != Postgres {
		return errors.New("store: checkpoint: PostgreSQL only")
	}
	if _, err := db.sql.ExecContext(ctx, ForceCheckpoint.SQL); err != nil {
		return fmt.Errorf("store: checkpoint: %w", err)
	}
	return nil
}
