package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"strings"
)

// errNoContextAPI means the SQLite driver lacks a context method the ledger
// relies on; modernc.org/sqlite has them all.
var errNoContextAPI = errors.New("store: sqlite driver lacks a context-aware method")

// connBase is what every wrapping connection of this package holds: the
// driver's own connection, and the session methods that only pass through
// to it. Unwrap lets the driver's helpers (limits, authorizers) look
// through the wrappers.
type connBase struct{ base driver.Conn }

func (c connBase) Unwrap() driver.Conn { return c.base }

func (c connBase) ResetSession(ctx context.Context) error {
	if r, ok := c.base.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c connBase) IsValid() bool {
	if v, ok := c.base.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

func (c connBase) Ping(ctx context.Context) error {
	if p, ok := c.base.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

// recordingConnector opens the SQLite driver's connections wrapped so that
// every statement they execute is written to a [Ledger]. It is the one
// place every statement of a run passes, whatever code issued it.
type recordingConnector struct {
	base   driver.Connector
	ledger *Ledger
}

func (c *recordingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.base.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &recordingConn{connBase: connBase{conn}, ledger: c.ledger}, nil
}

func (c *recordingConnector) Driver() driver.Driver { return c.base.Driver() }

// recordingConn is one connection: it records each statement and, while a
// transaction is open, which statements ran in it.
type recordingConn struct {
	connBase
	ledger *Ledger
	open   bool     // a transaction is open
	inTx   []string // statement texts of the open transaction
}

func (c *recordingConn) note(query string) {
	if c.open {
		c.inTx = append(c.inTx, query)
	}
}

func (c *recordingConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *recordingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	p, ok := c.base.(driver.ConnPrepareContext)
	if !ok {
		return nil, errNoContextAPI
	}
	s, err := p.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	return &recordingStmt{base: s, conn: c, query: query}, nil
}

// Close closes the connection. A transaction still open is rolled back by
// SQLite, as at a process death, and the ledger says so.
func (c *recordingConn) Close() error {
	if c.open {
		c.ledger.recordTx(c.inTx, false)
		c.open, c.inTx = false, nil
	}
	return c.base.Close()
}

func (c *recordingConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *recordingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	b, ok := c.base.(driver.ConnBeginTx)
	if !ok {
		return nil, errNoContextAPI
	}
	tx, err := b.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	c.open, c.inTx = true, nil
	return &recordingTx{base: tx, conn: c}, nil
}

func (c *recordingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	e, ok := c.base.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	res, err := e.ExecContext(ctx, query, args)
	c.recordExec(query, res, err)
	return res, err
}

func (c *recordingConn) recordExec(query string, res driver.Result, err error) {
	if errors.Is(err, driver.ErrSkip) {
		return // database/sql runs it again another way, and that run is recorded
	}
	var rows int64
	if err == nil && changesRows(query) {
		rows, _ = res.RowsAffected()
	}
	c.ledger.record(query, rows, err)
	c.note(query)
}

// changesRows reports whether a statement can change rows. SQLite's count
// of changed rows is that of the connection's last INSERT, UPDATE or
// DELETE, so a PRAGMA or DDL statement would otherwise inherit it.
func changesRows(query string) bool {
	for _, line := range strings.Split(query, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "--") {
			continue
		}
		switch strings.ToUpper(f[0]) {
		case "INSERT", "UPDATE", "DELETE", "REPLACE", "WITH":
			return true
		}
		return false
	}
	return false
}

func (c *recordingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := c.base.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	rows, err := q.QueryContext(ctx, query, args)
	if errors.Is(err, driver.ErrSkip) {
		return nil, err
	}
	c.ledger.record(query, 0, err)
	c.note(query)
	if err != nil {
		return nil, err
	}
	return &countingRows{Rows: rows, ledger: c.ledger, query: query}, nil
}

// recordingTx tells the ledger how a transaction ended.
type recordingTx struct {
	base driver.Tx
	conn *recordingConn
}

func (t *recordingTx) Commit() error {
	err := t.base.Commit()
	t.end(err == nil)
	return err
}

func (t *recordingTx) Rollback() error {
	err := t.base.Rollback()
	t.end(false)
	return err
}

func (t *recordingTx) end(committed bool) {
	if !t.conn.open {
		return
	}
	t.conn.ledger.recordTx(t.conn.inTx, committed)
	t.conn.open, t.conn.inTx = false, nil
}

// recordingStmt records each execution of a prepared statement.
type recordingStmt struct {
	base  driver.Stmt
	conn  *recordingConn
	query string
}

func (s *recordingStmt) Close() error  { return s.base.Close() }
func (s *recordingStmt) NumInput() int { return s.base.NumInput() }

func (s *recordingStmt) Exec(args []driver.Value) (driver.Result, error) {
	return s.ExecContext(context.Background(), ordinalArgs(args))
}

func (s *recordingStmt) Query(args []driver.Value) (driver.Rows, error) {
	return s.QueryContext(context.Background(), ordinalArgs(args))
}

func (s *recordingStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	e, ok := s.base.(driver.StmtExecContext)
	if !ok {
		return nil, errNoContextAPI
	}
	res, err := e.ExecContext(ctx, args)
	s.conn.recordExec(s.query, res, err)
	return res, err
}

func (s *recordingStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := s.base.(driver.StmtQueryContext)
	if !ok {
		return nil, errNoContextAPI
	}
	rows, err := q.QueryContext(ctx, args)
	s.conn.ledger.record(s.query, 0, err)
	s.conn.note(s.query)
	if err != nil {
		return nil, err
	}
	return &countingRows{Rows: rows, ledger: s.conn.ledger, query: s.query}, nil
}

func ordinalArgs(args []driver.Value) []driver.NamedValue {
	out := make([]driver.NamedValue, len(args))
	for i, a := range args {
		out[i] = driver.NamedValue{Ordinal: i + 1, Value: a}
	}
	return out
}

// countingRows counts the rows a read returned, and adds them to the
// ledger when the rows are closed.
type countingRows struct {
	driver.Rows
	ledger *Ledger
	query  string
	n      int64
}

func (r *countingRows) Next(dest []driver.Value) error {
	err := r.Rows.Next(dest)
	if err == nil {
		r.n++
	}
	return err
}

func (r *countingRows) Close() error {
	r.ledger.addRows(r.query, r.n)
	r.n = 0
	return r.Rows.Close()
}

var _ io.Closer = (*recordingConn)(nil)
