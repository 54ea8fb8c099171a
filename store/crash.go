package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"

	"github.com/outboxlab/outboxlab/failpoint"
)

// ErrCrashed reports that a failpoint killed the application instance in
// the middle of an operation: its connection was closed under it, SQLite
// discarded whatever was uncommitted, and the [DB] is closed for good. Only
// what was committed before the failpoint survives. It is the store's form
// of [failpoint.ErrCrashed] and wraps it, so errors.Is(err,
// failpoint.ErrCrashed) recognises a crash whichever layer carried it out.
var ErrCrashed = fmt.Errorf("store: crashed at failpoint: %w", failpoint.ErrCrashed)

// ownConn is this instance's driver connection, held for one operation
// that may die mid-step: its transactions are begun and committed on the
// connection itself, so that a crash can close it between two statements
// with no COMMIT or ROLLBACK, as a process death would.
type ownConn struct {
	c    driver.Conn
	dead bool
}

// onOwnConn runs fn on the instance's driver connection. When fn killed the
// connection (see [ownConn.die]), database/sql discards it, the DB is
// closed and onOwnConn returns [ErrCrashed].
func (db *DB) onOwnConn(ctx context.Context, fn func(c *ownConn) error) error {
	conn, err := db.sql.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var oc *ownConn
	err = conn.Raw(func(dc any) error {
		c, ok := dc.(driver.Conn)
		if !ok {
			return errors.New("not a driver connection")
		}
		oc = &ownConn{c: c}
		ferr := fn(oc)
		if oc.dead {
			return driver.ErrBadConn // database/sql discards the dead connection
		}
		return ferr
	})
	if oc != nil && oc.dead {
		conn.Close()
		db.sql.Close()
		return ErrCrashed
	}
	return err
}

// tx runs fn between BEGIN (IMMEDIATE, from the connection's settings) and
// COMMIT. An error rolls back, unless the connection died; SQLITE_BUSY
// rolls back and runs the transaction again after a backoff, counted in
// stats, until ctx ends.
func (c *ownConn) tx(ctx context.Context, stats *TxStats, fn func() error) error {
	s, _, err := retryBusy(ctx, backoff, nil, func() (bool, error) {
		err := c.tryTx(ctx, fn)
		return !c.dead, err
	})
	stats.BusyRetries += s.BusyRetries
	stats.Waited += s.Waited
	return err
}

func (c *ownConn) tryTx(ctx context.Context, fn func() error) error {
	begin, ok := c.c.(driver.ConnBeginTx)
	if !ok {
		return errors.New("driver connection cannot begin a transaction")
	}
	tx, err := begin.BeginTx(ctx, driver.TxOptions{})
	if err != nil {
		return err
	}
	if err := fn(); err != nil {
		if !c.dead {
			_ = tx.Rollback()
		}
		return err
	}
	if err := tx.Commit(); err != nil {
		_ = tx.Rollback()
		return err
	}
	return nil
}

// exec runs s with named arguments (sql.Named values).
func (c *ownConn) exec(ctx context.Context, s Stmt, args []any) error {
	exec, ok := c.c.(driver.ExecerContext)
	if !ok {
		return errors.New("driver connection cannot execute")
	}
	values := make([]driver.NamedValue, len(args))
	for i, a := range args {
		n, ok := a.(sql.NamedArg)
		if !ok {
			return fmt.Errorf("argument %d of %q is not named", i+1, s.Name)
		}
		values[i] = driver.NamedValue{Name: n.Name, Ordinal: i + 1, Value: n.Value}
	}
	_, err := exec.ExecContext(ctx, s.SQL, values)
	return err
}

// die is the crash: the connection closes now, in whatever state it is
// (mid-transaction included), and the instance is gone. It returns
// [ErrCrashed].
func (c *ownConn) die() error {
	closer, ok := c.c.(io.Closer)
	if !ok {
		return errors.New("driver connection cannot be closed")
	}
	if err := closer.Close(); err != nil {
		return err
	}
	c.dead = true
	return ErrCrashed
}
