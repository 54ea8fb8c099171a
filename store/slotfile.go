package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strings"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// slotLengthLimit is SQLITE_LIMIT_LENGTH on a connection that runs a slot
// file: no string or blob it makes may grow past it.
const slotLengthLimit = 8 << 20

// statementFault makes err a *SlotStatementError when it is the slot
// statement's own fault; which is "" outside a slot statement.
func statementFault(which string, err error) error {
	var se *sqlite.Error
	if which == "" || err == nil || errors.As(err, new(*SlotStatementError)) || !errors.As(err, &se) {
		return err
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_ERROR, sqlite3.SQLITE_AUTH, sqlite3.SQLITE_CONSTRAINT, sqlite3.SQLITE_MISMATCH,
		sqlite3.SQLITE_RANGE, sqlite3.SQLITE_TOOBIG, sqlite3.SQLITE_INTERRUPT:
		return &SlotStatementError{Statement: which, Err: err}
	case sqlite3.SQLITE_NOMEM:
		return &SlotStatementError{Statement: which, Err: fmt.Errorf("%w and was stopped: %w", errTooMuchMemory, err)}
	}
	return err
}

// errTooMuchMemory says a slot statement reached SQLite's heap limit.
var errTooMuchMemory = fmt.Errorf("needed more than the %d MiB of memory SQLite may hold while slot files run", SlotHeapLimit>>20)

// overtime makes err, from a slot statement that ran under timed (the
// [SlotStatementTimeout] bound of parent), the statement's own fault when
// that bound stopped it: the driver reports the context's error, not
// SQLite's. A stop of parent (the run's own timeout, Ctrl-C) is not the
// statement's fault.
func overtime(which string, err error, parent, timed context.Context) error {
	if which == "" || err == nil || err == io.EOF || parent.Err() != nil || !errors.Is(timed.Err(), context.DeadlineExceeded) ||
		errors.As(err, new(*SlotStatementError)) {
		return err
	}
	return &SlotStatementError{Statement: which, Err: fmt.Errorf("ran longer than %s and was stopped (a lesson's statement reads a handful of rows): %w", SlotStatementTimeout, err)}
}

// CheckSlotFile runs each statement of f once, in order, in a transaction
// it rolls back, on a private in-memory database holding the slot's
// schema and check rows, through a connection guarded as every connection
// that runs f is (see [Config.SlotFile]), with the slot's sample values
// bound to the parameters. A statement may use only its shape's named
// parameters (none positional). SQLite's authorizer decides the rest: a
// SELECT may only read, an UPDATE may also update its shape's table, an
// INSERT may also insert into (and, as an upsert, update) its shape's
// table, and none may ATTACH, DETACH, PRAGMA, VACUUM, begin or end a
// transaction, define or drop anything, write another table or load an
// extension; an UPDATE or INSERT must compile to one. A refusal is a
// *[SlotFileError]. Nothing is written to disk.
func CheckSlotFile(ctx context.Context, f SlotFile) error {
	if err := f.valid(); err != nil {
		return err
	}
	base, err := sqlite.NewConnector(":memory:")
	if err != nil {
		return fmt.Errorf("store: slot file check: %w", err)
	}
	sdb := oneConnection(&guardConnector{base: base, file: &f})
	defer sdb.Close()
	db := &DB{sql: sdb}
	if err := db.Migrate(ctx, f.Slot.Schema...); err != nil {
		return fmt.Errorf("store: slot file check: %w", err)
	}
	if f.Slot.CheckRows != "" {
		if _, err := sdb.ExecContext(ctx, f.Slot.CheckRows); err != nil {
			return fmt.Errorf("store: slot file check: %w", err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, SlotStatementTimeout)
	defer cancel()
	conn, err := sdb.Conn(ctx)
	if err != nil {
		return fmt.Errorf("store: slot file check: %w", err)
	}
	defer conn.Close()
	var g *guardConn
	if err := conn.Raw(func(dc any) error {
		g, _ = dc.(*guardConn)
		return nil
	}); err != nil || g == nil {
		return fmt.Errorf("store: slot file check: no guarded connection (%v)", err)
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: slot file check: %w", err)
	}
	defer tx.Rollback()
	for i, text := range f.Texts {
		if err := checkSQLiteStatement(ctx, tx, g, f.Slot, i, text); err != nil {
			return err
		}
	}
	return nil
}

// checkSQLiteStatement judges statement i of a file of slot on tx (see
// [CheckSlotFile]).
func checkSQLiteStatement(ctx context.Context, tx *sql.Tx, g *guardConn, slot Slot, i int, text string) error {
	which, shape := slot.statementName(i), slot.Shapes[i]
	// text is one statement already: cut again, it gives its parameters
	// as SQLite's tokenizer reads them.
	stmts, err := SplitStatements(text)
	if err != nil || len(stmts) != 1 {
		return &SlotFileError{which, fmt.Sprintf("must be one statement (%v)", err)}
	}
	if stmts[0].Positional {
		return &SlotFileError{which, shape.paramRefusal("#1")}
	}
	for _, p := range stmts[0].Params {
		if !shape.allows(p) {
			return &SlotFileError{which, shape.paramRefusal(p)}
		}
	}
	// Every parameter of the shape is bound; SQLite ignores a named
	// argument the statement does not use.
	var args []any
	for _, p := range shape.Params {
		args = append(args, sql.Named(p, slot.sample(p)))
	}
	g.seen = nil
	if shape.Kind == KindSelect {
		return checkSelect(ctx, tx, g, which, shape, text, args)
	}
	if shape.ReturnsID {
		if err := checkReturns(ctx, tx, g, which, shape, text, args); err != nil {
			return err
		}
	} else if _, err := tx.ExecContext(ctx, text, args...); err != nil {
		return g.refusal(which, shape, err)
	}
	action, word := sqlite.AuthUpdate, "update"
	if shape.Kind == KindInsert {
		action, word = sqlite.AuthInsert, "insert"
	}
	if !g.saw(action) {
		return &SlotFileError{which, fmt.Sprintf("must be an %s %s %s; SQLite compiled it to no %s", shape.Kind, preposition(shape.Kind), shape.Table, word)}
	}
	return nil
}

// preposition makes "an UPDATE of t", "an INSERT into t".
func preposition(kind string) string {
	if kind == KindInsert {
		return "into"
	}
	return "of"
}

func checkSelect(ctx context.Context, tx *sql.Tx, g *guardConn, which string, shape Shape, text string, args []any) error {
	if err := checkReturns(ctx, tx, g, which, shape, text, args); err != nil {
		return err
	}
	if !g.saw(sqlite.AuthSelect) {
		return &SlotFileError{which, "must be a read-only SELECT; SQLite compiled it to something else"}
	}
	return nil
}

// checkReturns runs the statement and reads its first row, as the run
// does; with shape.ReturnsID it must return one integer column.
func checkReturns(ctx context.Context, tx *sql.Tx, g *guardConn, which string, shape Shape, text string, args []any) error {
	rows, err := tx.QueryContext(ctx, text, args...)
	if err != nil {
		return g.refusal(which, shape, err)
	}
	cols, err := rows.Columns()
	if err == nil && shape.ReturnsID && len(cols) != 1 {
		rows.Close()
		return &SlotFileError{which, fmt.Sprintf("must %s one column, the message's Id; it %ss %d", returnVerb(shape), returnVerb(shape), len(cols))}
	}
	if rows.Next() { // the run reads one row, and so does the check
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			rows.Close()
			return g.refusal(which, shape, err)
		}
		if _, ok := vals[0].(int64); shape.ReturnsID && !ok {
			rows.Close()
			return &SlotFileError{which, fmt.Sprintf("must %s the message's Id, an integer; it %sed %v", returnVerb(shape), returnVerb(shape), vals[0])}
		}
	}
	if err := rows.Close(); err != nil {
		return g.refusal(which, shape, err)
	}
	if err := rows.Err(); err != nil {
		return g.refusal(which, shape, err)
	}
	return nil
}

// returnVerb is how a refusal says a statement of shape gives its rows:
// a SELECT selects them, a write returns them (RETURNING).
func returnVerb(shape Shape) string {
	if shape.Kind == KindSelect {
		return "select"
	}
	return "return"
}

// guardConnector opens connections that may run a slot file: each gets
// the slot file authorizer and limits before it is used.
type guardConnector struct {
	base    driver.Connector
	file    *SlotFile
	program *ProgramSandbox
}

func (c *guardConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.base.Connect(ctx)
	if err != nil {
		return nil, err
	}
	limitHeap()
	g := &guardConn{connBase: connBase{conn}, file: c.file, program: c.program}
	if err := g.install(ctx); err != nil {
		conn.Close()
		return nil, fmt.Errorf("store: guard a slot file connection: %w", err)
	}
	return g, nil
}

func (c *guardConnector) Driver() driver.Driver { return c.base.Driver() }

// guardMode is which policy the authorizer applies to what is compiling.
type guardMode int

const (
	modeLab     guardMode = iota // the lab's own statements: everything but ATTACH and DETACH
	modeSlot                     // a statement of the slot file: what its shape allows
	modeUnknown                  // a text that is neither the file's nor the lab's: nothing
	modeProgram                  // a user's program's statement: what its sandbox allows
)

// guardConn is one connection that may run a slot file. It applies the
// policy of statement stmt's shape while SQLite compiles that statement of
// the file, and the lab policy otherwise. database/sql uses a connection
// from one goroutine at a time, so the mode needs no lock.
type guardConn struct {
	connBase
	file    *SlotFile
	program *ProgramSandbox // a user's program's sandbox, or nil
	mode    guardMode
	stmt    int                           // under modeSlot, the file's statement compiling
	denied  string                        // what the authorizer last refused, for the error
	seen    []sqlite.AuthorizerActionCode // actions compiled under modeSlot since the last reset
}

// install registers the authorizer and sets the limits.
func (g *guardConn) install(ctx context.Context) error {
	reg, ok := g.base.(sqlite.AuthorizerRegisterer)
	if !ok {
		return fmt.Errorf("driver connection %T has no authorizer", g.base)
	}
	if err := reg.RegisterAuthorizer(g.authorize); err != nil {
		return err
	}
	return setSlotLimits(ctx, g.base)
}

// enter sets the mode for query and returns the function that resets it.
func (g *guardConn) enter(ctx context.Context, query string) func() {
	g.mode = modeUnknown
	switch i := g.file.statement(query); {
	case g.program != nil && ctx.Value(programStatement{}) != nil:
		// A program's statement is the program's whatever its text: one
		// that copies a lab statement's text gets no lab rights.
		g.mode = modeProgram
	case i >= 0:
		g.mode, g.stmt = modeSlot, i
	case g.labOwn(query):
		g.mode = modeLab
	case g.program != nil:
		g.mode = modeProgram
	}
	g.denied = ""
	return func() { g.mode = modeLab }
}

// labOwn reports whether query is the lab's own: a statement the catalogue
// names, or the slot's schema or check rows (the lab's, as the slot is).
// A text from anywhere else is allowed nothing.
func (g *guardConn) labOwn(query string) bool {
	if _, ok := catalogue[query]; ok {
		return true
	}
	if g.file == nil {
		return false
	}
	if query == g.file.Slot.CheckRows {
		return true
	}
	for _, m := range g.file.Slot.Schema {
		if query == m.SQL {
			return true
		}
	}
	return false
}

// authorize is SQLite's authorizer callback. For most actions arg1 names
// the object (the table, the PRAGMA, the attached file); for
// [sqlite.AuthFunction], arg1 is NULL and arg2 is the function's name.
func (g *guardConn) authorize(action sqlite.AuthorizerActionCode, arg1, arg2, dbName, trigger string) sqlite.AuthorizerReturnCode {
	if action == sqlite.AuthFunction {
		arg1 = arg2 // so the rules and the refusal name the function
	}
	if g.mode == modeProgram {
		if reason := g.program.refuses(action, arg1, dbName, trigger); reason != "" {
			g.denied = reason
			return sqlite.AuthorizerDeny
		}
		return sqlite.AuthorizerOK
	}
	if g.mode == modeLab {
		if action == sqlite.AuthAttach || action == sqlite.AuthDetach {
			g.denied = actionName(action, arg1)
			return sqlite.AuthorizerDeny
		}
		return sqlite.AuthorizerOK
	}
	if g.mode == modeUnknown {
		g.denied = actionName(action, arg1) + " in a statement the lab does not know"
		return sqlite.AuthorizerDeny
	}
	g.seen = append(g.seen, action)
	shape := g.file.Slot.Shapes[g.stmt]
	own := shape.Table != "" && strings.EqualFold(arg1, shape.Table) && dbName == "main"
	switch action {
	case sqlite.AuthSelect, sqlite.AuthRead:
		return sqlite.AuthorizerOK
	case sqlite.AuthFunction:
		if strings.EqualFold(arg1, "load_extension") {
			break
		}
		return sqlite.AuthorizerOK
	case sqlite.AuthUpdate:
		// An INSERT's upsert (ON CONFLICT DO UPDATE) updates its own table.
		if own && (shape.Kind == KindUpdate || shape.Kind == KindInsert) {
			return sqlite.AuthorizerOK
		}
	case sqlite.AuthInsert:
		if own && shape.Kind == KindInsert {
			return sqlite.AuthorizerOK
		}
	}
	g.denied = actionName(action, arg1)
	return sqlite.AuthorizerDeny
}

// statement names the file's statement compiling or running now, "" for
// the lab's own.
func (g *guardConn) statement() string {
	if g.mode == modeProgram {
		return "the program's statement"
	}
	if g.mode != modeSlot {
		return ""
	}
	return g.file.Slot.statementName(g.stmt)
}

func (g *guardConn) saw(action sqlite.AuthorizerActionCode) bool {
	for _, a := range g.seen {
		if a == action {
			return true
		}
	}
	return false
}

// refusal explains err from running the file's statement which, of shape.
func (g *guardConn) refusal(which string, shape Shape, err error) error {
	if g.denied != "" {
		return &SlotFileError{which, fmt.Sprintf("must be %s; SQLite's authorizer refused %s", shape.want(), g.denied)}
	}
	if errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "interrupted") {
		return &SlotFileError{which, fmt.Sprintf("took longer than %s on the check's few rows and was stopped: a lesson's statement must read a handful of rows", SlotStatementTimeout)}
	}
	if errors.Is(err, errTooMuchMemory) {
		return &SlotFileError{which, errTooMuchMemory.Error() + " on the check's few rows, and was stopped: a lesson's statement must read a handful of rows"}
	}
	return &SlotFileError{which, "SQLite could not run it: " + strings.TrimPrefix(err.Error(), "SQL logic error: ")}
}

// actionName says in words what an authorizer action was.
func actionName(a sqlite.AuthorizerActionCode, arg1 string) string {
	on := ""
	if arg1 != "" {
		on = " " + arg1
	}
	if strings.HasPrefix(strings.ToLower(arg1), "sqlite_") && (a == sqlite.AuthInsert || a == sqlite.AuthDelete || a == sqlite.AuthUpdate) {
		return "a schema change (CREATE, DROP or ALTER)"
	}
	switch a {
	case sqlite.AuthAttach:
		return "ATTACH of a database" + on
	case sqlite.AuthDetach:
		return "DETACH" + on
	case sqlite.AuthPragma:
		return "PRAGMA" + on
	case sqlite.AuthInsert:
		return "an INSERT into" + on
	case sqlite.AuthDelete:
		return "a DELETE from" + on
	case sqlite.AuthUpdate:
		return "an UPDATE of" + on
	case sqlite.AuthTransaction:
		return "a transaction statement" + on
	case sqlite.AuthSavepoint:
		return "a SAVEPOINT" + on
	case sqlite.AuthRecursive:
		return "a recursive query"
	case sqlite.AuthFunction:
		return "the function" + on
	case sqlite.AuthAnalyze, sqlite.AuthReindex:
		return "ANALYZE or REINDEX" + on
	}
	return "a schema change (CREATE, DROP or ALTER)" + on
}

func (g *guardConn) Prepare(query string) (driver.Stmt, error) {
	return g.PrepareContext(context.Background(), query)
}

func (g *guardConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	p, ok := g.base.(driver.ConnPrepareContext)
	if !ok {
		return nil, errNoContextAPI
	}
	defer g.enter(ctx, query)()
	s, err := p.PrepareContext(ctx, query)
	if err != nil {
		return nil, g.sandboxFault(statementFault(g.statement(), err))
	}
	return &guardStmt{base: s, conn: g, query: query}, nil
}

func (g *guardConn) Close() error { return g.base.Close() }

func (g *guardConn) Begin() (driver.Tx, error) {
	return g.BeginTx(context.Background(), driver.TxOptions{})
}

func (g *guardConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	b, ok := g.base.(driver.ConnBeginTx)
	if !ok {
		return nil, errNoContextAPI
	}
	return b.BeginTx(ctx, opts)
}

func (g *guardConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	e, ok := g.base.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	defer g.enter(ctx, query)()
	if g.mode == modeLab {
		res, err := e.ExecContext(ctx, query, args)
		return res, statementFault(g.statement(), err)
	}
	b := newTimeLimit(ctx)
	defer b.cancel()
	res, err := e.ExecContext(b.timed, query, args)
	return res, g.sandboxFault(b.fault(g.statement(), err))
}

func (g *guardConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := g.base.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	defer g.enter(ctx, query)()
	if g.mode == modeLab {
		r, err := q.QueryContext(ctx, query, args)
		return g.rows(r, err, nil)
	}
	b := newTimeLimit(ctx)
	r, err := q.QueryContext(b.timed, query, args)
	r, err = g.rows(r, err, b)
	return r, g.sandboxFault(err)
}

// timeLimit is a slot statement's time limit: timed ends
// [SlotStatementTimeout] after the statement starts, or with parent.
type timeLimit struct {
	parent, timed context.Context
	cancel        context.CancelFunc
}

func newTimeLimit(parent context.Context) *timeLimit {
	timed, cancel := context.WithTimeout(parent, SlotStatementTimeout)
	return &timeLimit{parent: parent, timed: timed, cancel: cancel}
}

// fault is err of the slot statement which, the statement's own when
// the limit stopped it or SQLite refused it.
func (b *timeLimit) fault(which string, err error) error {
	if b == nil {
		return statementFault(which, err)
	}
	return statementFault(which, overtime(which, err, b.parent, b.timed))
}

// rows marks a slot statement's rows (b is its time limit, nil for the
// lab's own), so an error stepping them is the statement's own.
func (g *guardConn) rows(r driver.Rows, err error, b *timeLimit) (driver.Rows, error) {
	which := g.statement()
	if err != nil {
		if b != nil {
			defer b.cancel()
		}
		return nil, b.fault(which, err)
	}
	if which == "" && b == nil {
		return r, nil
	}
	return guardRows{Rows: r, which: which, bound: b}, nil
}

// guardRows are a slot statement's rows; closing them ends the
// statement's time limit.
type guardRows struct {
	driver.Rows
	which string
	bound *timeLimit
}

func (r guardRows) Close() error {
	err := r.Rows.Close()
	if r.bound != nil {
		r.bound.cancel()
	}
	return err
}

func (r guardRows) Next(dest []driver.Value) error {
	return r.bound.fault(r.which, r.Rows.Next(dest))
}

// guardStmt keeps the slot policy on while a slot statement prepared
// ahead runs, since SQLite may compile it again then.
type guardStmt struct {
	base  driver.Stmt
	conn  *guardConn
	query string
}

func (s *guardStmt) Close() error  { return s.base.Close() }
func (s *guardStmt) NumInput() int { return s.base.NumInput() }

func (s *guardStmt) Exec(args []driver.Value) (driver.Result, error) {
	return s.ExecContext(context.Background(), ordinalArgs(args))
}

func (s *guardStmt) Query(args []driver.Value) (driver.Rows, error) {
	return s.QueryContext(context.Background(), ordinalArgs(args))
}

func (s *guardStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	e, ok := s.base.(driver.StmtExecContext)
	if !ok {
		return nil, errNoContextAPI
	}
	defer s.conn.enter(ctx, s.query)()
	if s.conn.mode == modeLab {
		res, err := e.ExecContext(ctx, args)
		return res, statementFault(s.conn.statement(), err)
	}
	b := newTimeLimit(ctx)
	defer b.cancel()
	res, err := e.ExecContext(b.timed, args)
	return res, s.conn.sandboxFault(b.fault(s.conn.statement(), err))
}

func (s *guardStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := s.base.(driver.StmtQueryContext)
	if !ok {
		return nil, errNoContextAPI
	}
	defer s.conn.enter(ctx, s.query)()
	if s.conn.mode == modeLab {
		r, err := q.QueryContext(ctx, args)
		return s.conn.rows(r, err, nil)
	}
	b := newTimeLimit(ctx)
	r, err := q.QueryContext(b.timed, args)
	r, err = s.conn.rows(r, err, b)
	return r, s.conn.sandboxFault(err)
}

// setSlotLimits sets, on a driver connection, no attached databases and
// a cap on string and blob length. The driver sets limits only through a
// *sql.Conn, so the connection is lent to a one-connection pool that does
// not close it.
func setSlotLimits(ctx context.Context, conn driver.Conn) error {
	db := sql.OpenDB(lentConnector{conn})
	defer db.Close()
	c, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	for _, l := range []struct{ id, val int }{
		{sqlite3.SQLITE_LIMIT_ATTACHED, 0},
		{sqlite3.SQLITE_LIMIT_LENGTH, slotLengthLimit},
	} {
		if _, err := sqlite.Limit(c, l.id, l.val); err != nil {
			return err
		}
		if got, err := sqlite.Limit(c, l.id, -1); err != nil || got != l.val {
			return fmt.Errorf("limit %d is %d, want %d (%v)", l.id, got, l.val, err)
		}
	}
	return nil
}

// lentConnector hands out one connection it does not own.
type lentConnector struct{ conn driver.Conn }

func (l lentConnector) Connect(context.Context) (driver.Conn, error) { return lentConn{l.conn}, nil }
func (l lentConnector) Driver() driver.Driver                        { return lentDriver{} }

type lentConn struct{ driver.Conn }

func (lentConn) Close() error          { return nil }
func (l lentConn) Unwrap() driver.Conn { return l.Conn }

type lentDriver struct{}

func (lentDriver) Open(string) (driver.Conn, error) {
	return nil, errors.New("store: a lent connection opens nothing")
}
