package store

// The reads of a PostgreSQL server's background activity ([ServerActivity])
// and the checkpoint the bench forces between its cells.
var (
	// ReadServerVersionNum reads the server's version as a number (150018).
	ReadServerVersionNum = audit("lab: read the PostgreSQL server's version number", `SHOW server_version_num`)

	// ReadCheckpoints reads the checkpoint counters, the buffers written
	// by checkpoints and by backends, and the WAL position in bytes
	// (PostgreSQL 16 and earlier).
	ReadCheckpoints = audit("audit: checkpoints, buffers written, WAL position (pg_stat_bgwriter)", `SELECT checkpoints_timed, checkpoints_req, buffers_checkpoint, buffers_backend,
       (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint
FROM pg_stat_bgwriter`)

	// ReadCheckpoints17 is [ReadCheckpoints] on PostgreSQL 17 and later,
	// where the counters moved to pg_stat_checkpointer and backends'
	// writes to pg_stat_io (not read: 0).
	ReadCheckpoints17 = audit("audit: checkpoints, buffers written, WAL position (pg_stat_checkpointer)", `SELECT num_timed, num_requested, buffers_written, 0::bigint,
       (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint
FROM pg_stat_checkpointer`)

	// ReadAutovacuum reads how many times autovacuum and autoanalyze have
	// run on this database's tables, and the dead row versions they hold,
	// in all and in the system catalogs (which every CREATE SCHEMA and
	// DROP SCHEMA of the bench's cells writes to).
	ReadAutovacuum = audit("audit: autovacuum and autoanalyze runs, dead row versions (pg_stat_all_tables)", `SELECT coalesce(sum(autovacuum_count + autoanalyze_count), 0)::bigint,
       coalesce(sum(n_dead_tup), 0)::bigint,
       coalesce(sum(n_dead_tup) FILTER (WHERE schemaname = 'pg_catalog'), 0)::bigint
FROM pg_stat_all_tables`)

	// ForceCheckpoint makes the server write every dirty buffer now and
	// start a new checkpoint cycle.
	ForceCheckpoint = audit("lab: force a checkpoint (PostgreSQL)", `CHECKPOINT`)
)
