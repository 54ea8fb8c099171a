package store

import (
	"context"
	"database/sql"
	"fmt"
)

// HoldExclusiveLock makes this connection keep SQLite's exclusive lock
// until it is closed, as another process's long job would, so tests can
// show what opening a locked database looks like.
func (db *DB) HoldExclusiveLock(ctx context.Context) error {
	if _, err := db.sql.ExecContext(ctx, "PRAGMA locking_mode = EXCLUSIVE"); err != nil {
		return fmt.Errorf("store: hold lock: %w", err)
	}
	_, err := db.InTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS lab_lock_probe (x); DROP TABLE lab_lock_probe")
		return err
	})
	if err != nil {
		return fmt.Errorf("store: hold lock: %w", err)
	}
	return nil
}
