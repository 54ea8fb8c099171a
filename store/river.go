package store

import (
	"context"
	"fmt"
)

// RiverOutcome is what River's own table, river_job, says after the
// bench drained a backlog with River: the same figures as a lab cell's,
// counted in the database.
type RiverOutcome struct {
	Completed    int64 // jobs in state completed
	Retried      int64 // attempts beyond each job's first: a job worked twice
	Errored      int64 // jobs with an error recorded
	NotCompleted int64 // jobs in any other state after the drain: lost
}

// RiverJobOutcome reads a [RiverOutcome] from the river_job table of db's
// schema (PostgreSQL) or file (SQLite, where River keeps errors as JSON).
var RiverJobOutcome = auditOn("audit: River's jobs after a drain: completed, attempts beyond the first, with errors, not completed", `SELECT count(*) FILTER (WHERE state = 'completed'),
       coalesce(sum(attempt - 1) FILTER (WHERE attempt > 1), 0),
       count(*) FILTER (WHERE coalesce(json_array_length(errors), 0) > 0),
       count(*) FILTER (WHERE state <> 'completed')
FROM river_job`, `SELECT count(*) FILTER (WHERE state = 'completed'),
       coalesce(sum(attempt - 1) FILTER (WHERE attempt > 1), 0),
       count(*) FILTER (WHERE cardinality(errors) > 0),
       count(*) FILTER (WHERE state <> 'completed')
FROM river_job`)

// RiverOutcome reads what River's river_job table says in db's schema,
// or in db's file on SQLite.
func (db *DB) RiverOutcome(ctx context.Context) (RiverOutcome, error) {
	var o RiverOutcome
	err := db.sql.QueryRowContext(ctx, RiverJobOutcome.SQL).Scan(&o.Completed, &o.Retried, &o.Errored, &o.NotCompleted)
	if err != nil {
		return o, fmt.Errorf("store: river outcome: %w", err)
	}
	return o, nil
}
