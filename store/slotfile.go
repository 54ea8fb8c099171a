package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// ClaimFile is an engineer's claim, two statements from outside the lab,
// to be run as untrusted input: Select picks the oldest claimable
// message's Id, Update takes message :id. Parameters: :now, :worker,
// :until, and :id in the Update.
type ClaimFile struct {
	Select string // must compile to a read-only SELECT
	Update string // must compile to an UPDATE of OutboxMessages that writes nothing else
}

// ClaimStatementTimeout bounds one run of a claim file's statement: a
// claim takes a handful of rows and must be cheap, so a statement that
// computes for longer (a cross join of a CTE, a sort spilling to disk) is
// interrupted instead of pinning a CPU or filling TMPDIR.
const ClaimStatementTimeout = 2 * time.Second

// claimCheckRows gives the private copy a claim file is checked on one
// message in each state a claim must tell apart, so the check runs the
// statements over rows as the run will: Pending, Processing under an expired
// lease, Processing under a live one, and Processed.
var claimCheckRows = audit("lab: the claim check's four messages, one in each state", `INSERT INTO OutboxMessages (MessageType, AggregateKey, Payload, Status, CreatedAtUtc, LockedBy, LockedUntilUtc, ProcessedAtUtc) VALUES
 ('PaymentCreated', 'PAY-1', '{}', 'Pending',    '2026-01-15T08:59:00.000Z', NULL,       NULL,                       NULL),
 ('PaymentCreated', 'PAY-2', '{}', 'Processing', '2026-01-15T08:59:01.000Z', 'Worker-B', '2026-01-15T08:59:30.000Z', NULL),
 ('PaymentCreated', 'PAY-3', '{}', 'Processing', '2026-01-15T08:59:02.000Z', 'Worker-B', '2026-01-15T09:00:30.000Z', NULL),
 ('PaymentCreated', 'PAY-4', '{}', 'Processed',  '2026-01-15T08:59:03.000Z', NULL,       NULL,                       '2026-01-15T08:59:10.000Z')`).SQL

// MaxClaimFileSize is the most bytes a claim file may hold.
const MaxClaimFileSize = 1 << 20

// claimLengthLimit is SQLITE_LIMIT_LENGTH on a connection that runs a claim
// file: no string or blob it makes may grow past it.
const claimLengthLimit = 8 << 20

// ClaimFileError says why a claim file was refused.
type ClaimFileError struct {
	Statement string // "first statement", "second statement" or "file"
	Reason    string
}

func (e *ClaimFileError) Error() string {
	if e.Statement == "file" {
		return e.Reason
	}
	return e.Statement + ": " + e.Reason
}

// ClaimStatementError is a claim file's statement that failed while a run
// used it: SQLite could not compile it, refused what it did, or stopped it
// (a syntax error, an unknown column, a constraint, an integer overflow).
// It is the file's fault, not the lab's; a busy database, a full disk or
// an I/O error is not one.
type ClaimStatementError struct {
	Statement string // "first statement" or "second statement"
	Err       error  // SQLite's error
}

func (e *ClaimStatementError) Error() string { return e.Err.Error() }
func (e *ClaimStatementError) Unwrap() error { return e.Err }

// statementFault makes err a *ClaimStatementError when it is the claim
// statement's own fault; which is "" outside a claim statement.
func statementFault(which string, err error) error {
	var se *sqlite.Error
	if which == "" || err == nil || errors.As(err, new(*ClaimStatementError)) || !errors.As(err, &se) {
		return err
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_ERROR, sqlite3.SQLITE_AUTH, sqlite3.SQLITE_CONSTRAINT, sqlite3.SQLITE_MISMATCH,
		sqlite3.SQLITE_RANGE, sqlite3.SQLITE_TOOBIG, sqlite3.SQLITE_INTERRUPT:
		return &ClaimStatementError{Statement: which, Err: err}
	case sqlite3.SQLITE_NOMEM:
		return &ClaimStatementError{Statement: which, Err: fmt.Errorf("%w and was stopped: %w", errTooMuchMemory, err)}
	}
	return err
}

// errTooMuchMemory says a claim statement reached SQLite's heap limit.
var errTooMuchMemory = fmt.Errorf("needed more than the %d MiB of memory SQLite may hold while claim files run", ClaimHeapLimit>>20)

// overtime makes err, from a claim statement that ran under timed (the
// [ClaimStatementTimeout] bound of parent), the statement's own fault when
// that bound stopped it: the driver reports the context's error, not
// SQLite's. A stop of parent (the run's own timeout, Ctrl-C) is not the
// statement's fault.
func overtime(which string, err error, parent, timed context.Context) error {
	if which == "" || err == nil || err == io.EOF || parent.Err() != nil || !errors.Is(timed.Err(), context.DeadlineExceeded) ||
		errors.As(err, new(*ClaimStatementError)) {
		return err
	}
	return &ClaimStatementError{Statement: which, Err: fmt.Errorf("ran longer than %s and was stopped (a claim reads a handful of rows): %w", ClaimStatementTimeout, err)}
}

// ParseClaimFile splits a claim file's text into its two statements with
// [SplitStatements], without their comments, so what runs, what is
// checked and what a report prints is one text. It checks only their number; [CheckClaimFile] asks
// SQLite what they are. An UPDATE that ignores :id is not refused: the
// lesson's checks show what it does.
func ParseClaimFile(text string) (ClaimFile, error) {
	stmts, err := SplitStatements(text)
	if err != nil {
		return ClaimFile{}, &ClaimFileError{"file", strings.TrimPrefix(err.Error(), "store: ")}
	}
	if len(stmts) != 2 {
		return ClaimFile{}, &ClaimFileError{"file", fmt.Sprintf("must hold two statements separated by ';' (the SELECT of the next claimable Id, then the UPDATE of :id); found %d", len(stmts))}
	}
	for i, which := range []string{"first statement", "second statement"} {
		for _, line := range strings.Split(stmts[i].Code, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "--") {
				// A report (and the scenario) drops lines that start with
				// "--"; inside a string that would change what runs.
				return ClaimFile{}, &ClaimFileError{which, "a line inside a string or quoted name starts with '--'; start it otherwise"}
			}
		}
	}
	return ClaimFile{Select: stmts[0].Code, Update: stmts[1].Code}, nil
}

// CheckClaimFile runs both statements of cf once, in a transaction it rolls
// back, on a private in-memory database holding the Day 15 schema, through
// a connection guarded as every connection that runs cf is (see
// [Config.ClaimFile]). SQLite's authorizer decides: the first statement
// must be a read-only SELECT, the second an UPDATE of OutboxMessages, and
// neither may ATTACH, DETACH, PRAGMA, VACUUM, define or drop anything, or
// write another table. A refusal is a *[ClaimFileError]. Nothing is
// written to disk.
func CheckClaimFile(ctx context.Context, cf ClaimFile) error {
	base, err := sqlite.NewConnector(":memory:")
	if err != nil {
		return fmt.Errorf("store: claim file check: %w", err)
	}
	sdb := oneConnection(&guardConnector{base: base, claim: &cf})
	defer sdb.Close()
	db := &DB{sql: sdb}
	if err := db.Migrate(ctx, PaymentsOutbox, OutboxLeasing); err != nil {
		return fmt.Errorf("store: claim file check: %w", err)
	}
	if _, err := sdb.ExecContext(ctx, claimCheckRows); err != nil {
		return fmt.Errorf("store: claim file check: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, ClaimStatementTimeout)
	defer cancel()
	conn, err := sdb.Conn(ctx)
	if err != nil {
		return fmt.Errorf("store: claim file check: %w", err)
	}
	defer conn.Close()
	var g *guardConn
	if err := conn.Raw(func(dc any) error {
		g, _ = dc.(*guardConn)
		return nil
	}); err != nil || g == nil {
		return fmt.Errorf("store: claim file check: no guarded connection (%v)", err)
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: claim file check: %w", err)
	}
	defer tx.Rollback()
	now := time.Date(2026, 1, 15, 9, 0, 0, 0, time.UTC)
	args := claimArgs("Worker-A", now, time.Second)
	if err := checkSelect(ctx, tx, g, cf.Select, args); err != nil {
		return err
	}
	g.seen = nil
	if _, err := tx.ExecContext(ctx, cf.Update, append(args, sql.Named("id", int64(1)))...); err != nil {
		return g.refusal("second statement", err)
	}
	if !g.saw(sqlite.AuthUpdate) {
		return &ClaimFileError{"second statement", "must be an UPDATE of OutboxMessages; SQLite compiled it to no update"}
	}
	return nil
}

func checkSelect(ctx context.Context, tx *sql.Tx, g *guardConn, text string, args []any) error {
	g.seen = nil
	rows, err := tx.QueryContext(ctx, text, args...)
	if err != nil {
		return g.refusal("first statement", err)
	}
	cols, err := rows.Columns()
	if err == nil && len(cols) != 1 {
		rows.Close()
		return &ClaimFileError{"first statement", fmt.Sprintf("must select one column, the message's Id; it selects %d", len(cols))}
	}
	if rows.Next() { // the run reads one row, and so does the check
		var id any
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return g.refusal("first statement", err)
		}
		if _, ok := id.(int64); !ok {
			rows.Close()
			return &ClaimFileError{"first statement", fmt.Sprintf("must select the message's Id, an integer; it selected %v", id)}
		}
	}
	if err := rows.Close(); err != nil {
		return g.refusal("first statement", err)
	}
	if err := rows.Err(); err != nil {
		return g.refusal("first statement", err)
	}
	if !g.saw(sqlite.AuthSelect) {
		return &ClaimFileError{"first statement", "must be a read-only SELECT; SQLite compiled it to something else"}
	}
	return nil
}

// guardConnector opens connections that may run a claim file: each gets
// the claim file authorizer and limits before it is used.
type guardConnector struct {
	base  driver.Connector
	claim *ClaimFile
}

func (c *guardConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.base.Connect(ctx)
	if err != nil {
		return nil, err
	}
	limitHeap()
	g := &guardConn{connBase: connBase{conn}, claim: c.claim}
	if err := g.install(ctx); err != nil {
		conn.Close()
		return nil, fmt.Errorf("store: guard a claim file connection: %w", err)
	}
	return g, nil
}

func (c *guardConnector) Driver() driver.Driver { return c.base.Driver() }

// claimMode is which policy the authorizer applies to what is compiling.
type claimMode int

const (
	modeLab     claimMode = iota // the lab's own statements: everything but ATTACH and DETACH
	modeSelect                   // the claim file's SELECT: reads only
	modeUpdate                   // the claim file's UPDATE: reads, and updates of OutboxMessages
	modeUnknown                  // a text that is neither the claim's nor in the catalogue: nothing
)

// guardConn is one connection that may run a claim file. It applies the
// claim policy while SQLite compiles one of the file's two statements, and
// the lab policy otherwise. database/sql uses a connection from one
// goroutine at a time, so the mode needs no lock.
type guardConn struct {
	connBase
	claim  *ClaimFile
	mode   claimMode
	denied string                        // what the authorizer last refused, for the error
	seen   []sqlite.AuthorizerActionCode // actions compiled under a claim mode since the last reset
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
	return setClaimLimits(ctx, g.base)
}

// enter sets the mode for query and returns the function that resets it.
func (g *guardConn) enter(query string) func() {
	switch query {
	case g.claim.Select:
		g.mode = modeSelect
	case g.claim.Update:
		g.mode = modeUpdate
	default:
		// Only the lab's own statements, which the catalogue names, get
		// the lab's policy: a text from anywhere else is allowed nothing.
		g.mode = modeUnknown
		if _, ok := catalogue[query]; ok {
			g.mode = modeLab
		}
	}
	g.denied = ""
	return func() { g.mode = modeLab }
}

// authorize is SQLite's authorizer callback. For most actions arg1 names
// the object (the table, the PRAGMA, the attached file); for
// [sqlite.AuthFunction], arg1 is NULL and arg2 is the function's name.
func (g *guardConn) authorize(action sqlite.AuthorizerActionCode, arg1, arg2, dbName, _ string) sqlite.AuthorizerReturnCode {
	if action == sqlite.AuthFunction {
		arg1 = arg2 // so the rules and the refusal name the function
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
	switch action {
	case sqlite.AuthSelect, sqlite.AuthRead:
		return sqlite.AuthorizerOK
	case sqlite.AuthFunction:
		if strings.EqualFold(arg1, "load_extension") {
			break
		}
		return sqlite.AuthorizerOK
	case sqlite.AuthUpdate:
		if g.mode == modeUpdate && strings.EqualFold(arg1, "OutboxMessages") && dbName == "main" {
			return sqlite.AuthorizerOK
		}
	}
	g.denied = actionName(action, arg1)
	return sqlite.AuthorizerDeny
}

// statement names the claim statement compiling or running now, "" for
// the lab's own.
func (g *guardConn) statement() string {
	switch g.mode {
	case modeSelect:
		return "first statement"
	case modeUpdate:
		return "second statement"
	}
	return ""
}

func (g *guardConn) saw(action sqlite.AuthorizerActionCode) bool {
	for _, a := range g.seen {
		if a == action {
			return true
		}
	}
	return false
}

// refusal explains err from running a claim statement.
func (g *guardConn) refusal(which string, err error) error {
	if g.denied != "" {
		want := "a read-only SELECT"
		if which == "second statement" {
			want = "an UPDATE of OutboxMessages that writes nothing else"
		}
		return &ClaimFileError{which, fmt.Sprintf("must be %s; SQLite's authorizer refused %s", want, g.denied)}
	}
	if errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "interrupted") {
		return &ClaimFileError{which, fmt.Sprintf("took longer than %s on a table of four messages and was stopped: a claim must read a handful of rows", ClaimStatementTimeout)}
	}
	if errors.Is(err, errTooMuchMemory) {
		return &ClaimFileError{which, errTooMuchMemory.Error() + " on a table of four messages, and was stopped: a claim must read a handful of rows"}
	}
	return &ClaimFileError{which, "SQLite could not run it: " + strings.TrimPrefix(err.Error(), "SQL logic error: ")}
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
	defer g.enter(query)()
	s, err := p.PrepareContext(ctx, query)
	if err != nil {
		return nil, statementFault(g.statement(), err)
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
	defer g.enter(query)()
	if g.mode == modeLab {
		res, err := e.ExecContext(ctx, query, args)
		return res, statementFault(g.statement(), err)
	}
	b := newTimeLimit(ctx)
	defer b.cancel()
	res, err := e.ExecContext(b.timed, query, args)
	return res, b.fault(g.statement(), err)
}

func (g *guardConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := g.base.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	defer g.enter(query)()
	if g.mode == modeLab {
		r, err := q.QueryContext(ctx, query, args)
		return g.rows(r, err, nil)
	}
	b := newTimeLimit(ctx)
	r, err := q.QueryContext(b.timed, query, args)
	return g.rows(r, err, b)
}

// timeLimit is a claim statement's time limit: timed ends
// [ClaimStatementTimeout] after the statement starts, or with parent.
type timeLimit struct {
	parent, timed context.Context
	cancel        context.CancelFunc
}

func newTimeLimit(parent context.Context) *timeLimit {
	timed, cancel := context.WithTimeout(parent, ClaimStatementTimeout)
	return &timeLimit{parent: parent, timed: timed, cancel: cancel}
}

// fault is err of the claim statement which, the statement's own when
// the limit stopped it or SQLite refused it.
func (b *timeLimit) fault(which string, err error) error {
	if b == nil {
		return statementFault(which, err)
	}
	return statementFault(which, overtime(which, err, b.parent, b.timed))
}

// rows marks a claim statement's rows (b is its time limit, nil for the
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

// guardRows are a claim statement's rows; closing them ends the
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

// guardStmt keeps the claim policy on while a claim statement prepared
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
	defer s.conn.enter(s.query)()
	if s.conn.mode == modeLab {
		res, err := e.ExecContext(ctx, args)
		return res, statementFault(s.conn.statement(), err)
	}
	b := newTimeLimit(ctx)
	defer b.cancel()
	res, err := e.ExecContext(b.timed, args)
	return res, b.fault(s.conn.statement(), err)
}

func (s *guardStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := s.base.(driver.StmtQueryContext)
	if !ok {
		return nil, errNoContextAPI
	}
	defer s.conn.enter(s.query)()
	if s.conn.mode == modeLab {
		r, err := q.QueryContext(ctx, args)
		return s.conn.rows(r, err, nil)
	}
	b := newTimeLimit(ctx)
	r, err := q.QueryContext(b.timed, args)
	return s.conn.rows(r, err, b)
}

// setClaimLimits sets, on a driver connection, no attached databases and
// a cap on string and blob length. The driver sets limits only through a
// *sql.Conn, so the connection is lent to a one-connection pool that does
// not close it.
func setClaimLimits(ctx context.Context, conn driver.Conn) error {
	db := sql.OpenDB(lentConnector{conn})
	defer db.Close()
	c, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	for _, l := range []struct{ id, val int }{
		{sqlite3.SQLITE_LIMIT_ATTACHED, 0},
		{sqlite3.SQLITE_LIMIT_LENGTH, claimLengthLimit},
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
