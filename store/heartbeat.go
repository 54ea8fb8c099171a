package store

import (
	"context"
	"database/sql"
	"fmt"
)

// LeaseKeeper is the heartbeat's service on outbox_events (session 22):
// the deadline-bounded renewal and the relay's shutdown step. Claims,
// sends' completions and reads go through a [Relay] built with
// [HeartbeatSQL.Relay].
type LeaseKeeper struct {
	db  *DB
	sql HeartbeatSQL
}

// NewLeaseKeeper returns the heartbeat's service on db running the
// statements s.
func NewLeaseKeeper(db *DB, s HeartbeatSQL) *LeaseKeeper { return &LeaseKeeper{db: db, sql: s} }

// Renew extends the lease of eventID to lease.Until, presenting
// lease.Token (the Renew statement, which writes :now + :lease: the
// heartbeat renews for one lease length from now). The lesson's statement
// requires the current token, the pending state, a live lease, and
// lease.Until <= claimed_at + maxProcessing; otherwise Rows is 0, an
// expected value.
func (k *LeaseKeeper) Renew(ctx context.Context, eventID string, now int64, lease EventLease, maxProcessing int64) (Fenced, error) {
	f, err := k.db.execRows(ctx, k.sql.Renew.SQL, append(heartbeatArgs(now, lease), sql.Named("id", eventID),
		sql.Named("max_processing", maxProcessing))...)
	if err != nil {
		return f, fmt.Errorf("store: heartbeat renewal of %s: %w", eventID, err)
	}
	return f, nil
}

// AtShutdown runs the shutdown step for relay at now (the AtShutdown
// statement) and returns the events it marked delivered. The lesson's
// step has no statement and marks none.
func (k *LeaseKeeper) AtShutdown(ctx context.Context, relay string, now int64) ([]string, error) {
	if k.sql.AtShutdown.SQL == "" {
		return nil, nil
	}
	var marked []string
	_, err := k.db.InTx(ctx, func(tx *sql.Tx) error {
		marked = nil
		rows, err := tx.QueryContext(ctx, k.sql.AtShutdown.SQL, sql.Named("relay", relay), sql.Named("now", now))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			marked = append(marked, id)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("store: shutdown step of %s: %w", relay, err)
	}
	return marked, nil
}
