package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// pgSlotConnector opens PostgreSQL connections that may run a slot file.
// It confines nothing itself: the connection logs in as a [GraderRole],
// whose privileges do (checked when the DB opens). Like SQLite's guard, it
// bounds each run of one of the file's statements by
// [SlotStatementTimeout] and makes the statement's own failures a
// *[SlotStatementError]. It sits outside the dialect's connector, so it
// sees the file's text as the file wrote it.
type pgSlotConnector struct {
	base driver.Connector
	file *SlotFile
}

func (c *pgSlotConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.base.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &pgSlotConn{connBase: connBase{conn}, file: c.file}, nil
}

func (c *pgSlotConnector) Driver() driver.Driver { return c.base.Driver() }

type pgSlotConn struct {
	connBase
	file *SlotFile
}

// statement names the file's statement query is, "" for the lab's own.
func (c *pgSlotConn) statement(query string) string {
	if i := c.file.statement(query); i >= 0 {
		return c.file.Slot.statementName(i)
	}
	return ""
}

// bound is ctx with the slot statement's time limit, for a claim
// statement; the lab's own statements keep ctx.
func bound(ctx context.Context, which string) (context.Context, context.CancelFunc) {
	if which == "" {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, SlotStatementTimeout)
}

// pgStatementFault makes err a *SlotStatementError when it is the claim
// statement's own fault: the server refused or could not run its text
// (syntax, a missing column or right, a data error, a constraint), or it
// ran past its time limit (timed is its context, parent the caller's). A
// lost connection or a serialization failure is not.
func pgStatementFault(which string, err error, parent, timed context.Context) error {
	if which == "" || err == nil || errors.As(err, new(*SlotStatementError)) {
		return err
	}
	if parent.Err() == nil && errors.Is(timed.Err(), context.DeadlineExceeded) {
		return &SlotStatementError{Statement: which, Err: fmt.Errorf("ran longer than %s and was stopped (a lesson's statement reads a handful of rows): %w", SlotStatementTimeout, err)}
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || len(pe.Code) != 5 {
		return err
	}
	switch pe.Code[:2] {
	case "0A", "21", "22", "23", "25", "2F", "38", "39", "42", "44", "54", "P0":
		return &SlotStatementError{Statement: which, Err: err}
	}
	switch pe.Code {
	case "57014", // query_canceled: the role's statement_timeout
		"53200", // out_of_memory: the statement's own needs
		"53400": // configuration_limit_exceeded: the role's temp_file_limit
		return &SlotStatementError{Statement: which, Err: err}
	}
	return err
}

func (c *pgSlotConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *pgSlotConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	which := c.statement(query)
	tctx, cancel := bound(ctx, which)
	defer cancel()
	s, err := c.base.(driver.ConnPrepareContext).PrepareContext(tctx, query)
	if err != nil {
		return nil, pgStatementFault(which, err, ctx, tctx)
	}
	return &pgSlotStmt{base: s, which: which}, nil
}

func (c *pgSlotConn) Close() error { return c.base.Close() }

func (c *pgSlotConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *pgSlotConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return c.base.(driver.ConnBeginTx).BeginTx(ctx, opts)
}

func (c *pgSlotConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	which := c.statement(query)
	tctx, cancel := bound(ctx, which)
	defer cancel()
	res, err := c.base.(driver.ExecerContext).ExecContext(tctx, query, args)
	return res, pgStatementFault(which, err, ctx, tctx)
}

func (c *pgSlotConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	which := c.statement(query)
	tctx, cancel := bound(ctx, which)
	r, err := c.base.(driver.QueryerContext).QueryContext(tctx, query, args)
	if err != nil {
		cancel()
		return nil, pgStatementFault(which, err, ctx, tctx)
	}
	if which == "" {
		cancel()
		return r, nil
	}
	return &pgSlotRows{Rows: r, which: which, parent: ctx, timed: tctx, cancel: cancel}, nil
}

// CheckNamedValue passes to the dialect's connection, which takes :name
// arguments.
func (c *pgSlotConn) CheckNamedValue(v *driver.NamedValue) error {
	if nc, ok := c.base.(driver.NamedValueChecker); ok {
		return nc.CheckNamedValue(v)
	}
	return driver.ErrSkip
}

// pgSlotRows are a slot statement's rows: an error stepping them is the
// statement's, and closing them ends its time limit.
type pgSlotRows struct {
	driver.Rows
	which         string
	parent, timed context.Context
	cancel        context.CancelFunc
}

func (r *pgSlotRows) Next(dest []driver.Value) error {
	return pgStatementFault(r.which, r.Rows.Next(dest), r.parent, r.timed)
}

func (r *pgSlotRows) Close() error {
	err := r.Rows.Close()
	r.cancel()
	return err
}

// pgSlotStmt is a statement prepared on a slot file's connection.
type pgSlotStmt struct {
	base  driver.Stmt
	which string
}

func (s *pgSlotStmt) Close() error  { return s.base.Close() }
func (s *pgSlotStmt) NumInput() int { return s.base.NumInput() }

func (s *pgSlotStmt) Exec(args []driver.Value) (driver.Result, error) {
	return s.ExecContext(context.Background(), ordinalArgs(args))
}

func (s *pgSlotStmt) Query(args []driver.Value) (driver.Rows, error) {
	return s.QueryContext(context.Background(), ordinalArgs(args))
}

func (s *pgSlotStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	tctx, cancel := bound(ctx, s.which)
	defer cancel()
	res, err := s.base.(driver.StmtExecContext).ExecContext(tctx, args)
	return res, pgStatementFault(s.which, err, ctx, tctx)
}

func (s *pgSlotStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	tctx, cancel := bound(ctx, s.which)
	r, err := s.base.(driver.StmtQueryContext).QueryContext(tctx, args)
	if err != nil {
		cancel()
		return nil, pgStatementFault(s.which, err, ctx, tctx)
	}
	if s.which == "" {
		cancel()
		return r, nil
	}
	return &pgSlotRows{Rows: r, which: s.which, parent: ctx, timed: tctx, cancel: cancel}, nil
}
