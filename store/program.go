package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"modernc.org/sqlite"
)

// ProgramSandbox is what a user's program may do through a connection
// opened with [Config.Program]: read, insert, update and delete the rows of
// Tables, in statements the lab runs for it inside the transaction the
// program opened. Anything else (another table, the schema, PRAGMA,
// ATTACH, a transaction statement, load_extension) is refused by SQLite's
// authorizer before the statement runs, and each statement runs under the
// slot files' time limit.
type ProgramSandbox struct {
	Tables []string
}

// SandboxError is a program's statement the sandbox refused.
type SandboxError struct {
	Refused string // what SQLite's authorizer refused, in words
	Tables  []string
}

func (e *SandboxError) Error() string {
	return fmt.Sprintf("refused %s: a program may only read and write the challenge's tables (%s)", e.Refused, strings.Join(e.Tables, ", "))
}

// The lab's audit of the tables a relay challenge gives a program:
// LabAudit is lab_audit, where the triggers of AuditDay15 (Payments and
// OutboxMessages) and AuditRelay (outbox_events, and each offer the
// broker stores) record every committed change.
var (
	LabAudit   = mustMigration("899_lab_audit.sql")
	AuditDay15 = mustMigration("900_lab_audit_day15.sql")
	AuditRelay = mustMigration("901_lab_audit_relay.sql")
	AuditInbox = mustMigration("902_lab_audit_inbox.sql")
)

// The audit's statements: the lab names the instance and the clock of
// each transaction's changes just before it commits, and the checks read
// them in commit order.
var (
	TagAudit = audit("lab: name the instance that made the transaction's changes", `UPDATE lab_audit SET actor = :actor, at = :at, tx = :tx WHERE actor IS NULL
RETURNING `+auditColumns)
	// CountUndeliveredEvents is the fenced relay challenge's end: no
	// event of outbox_events left undelivered.
	CountUndeliveredEvents = audit("lab: count the events not delivered yet", "SELECT COUNT(*) FROM outbox_events WHERE delivered = 0")
	ReadAudit              = audit("lab: read the audit of the programs' changes", `SELECT `+auditColumns+`
FROM lab_audit ORDER BY seq`)
)

// auditColumns are an [AuditEntry]'s columns, in its fields' order.
const auditColumns = `seq, COALESCE(actor, ''), COALESCE(at, ''), COALESCE(tx, 0), tbl, op, row_key,
       COALESCE(old_state, ''), COALESCE(new_state, ''), COALESCE(old_owner, ''), COALESCE(new_owner, ''),
       COALESCE(old_until, ''), COALESCE(new_until, ''), COALESCE(old_token, 0), COALESCE(new_token, 0)`

// refuses says what the sandbox refuses of an action SQLite's authorizer
// asks about while a program's statement compiles, "" when it allows it.
// The lab's audit triggers (named lab_...) may do what they do.
func (p *ProgramSandbox) refuses(action sqlite.AuthorizerActionCode, arg1, dbName, trigger string) string {
	if strings.HasPrefix(trigger, "lab_") && action != sqlite.AuthAttach && action != sqlite.AuthDetach {
		return ""
	}
	allowed := dbName == "main" && slices.ContainsFunc(p.Tables, func(t string) bool { return strings.EqualFold(t, arg1) })
	switch action {
	case sqlite.AuthSelect, sqlite.AuthRecursive:
		return ""
	case sqlite.AuthFunction:
		if !strings.EqualFold(arg1, "load_extension") {
			return ""
		}
	case sqlite.AuthRead:
		if allowed {
			return ""
		}
		return "a read of " + arg1
	case sqlite.AuthInsert, sqlite.AuthUpdate, sqlite.AuthDelete:
		if allowed {
			return ""
		}
	}
	return actionName(action, arg1)
}

// sandboxFault makes err a *SandboxError when the program sandbox's
// authorizer refused what the statement compiling did.
func (g *guardConn) sandboxFault(err error) error {
	if err == nil || g.mode != modeProgram || g.denied == "" {
		return err
	}
	return &SandboxError{Refused: g.denied, Tables: g.program.Tables}
}

// AuditEntry is one row change a program's transaction made, as the audit
// triggers recorded it.
type AuditEntry struct {
	Seq                int64
	Actor, At          string
	Tx                 int64 // the program transaction's number, in commit order (0: the lab's own)
	Table, Op, Key     string
	OldState, NewState string
	OldOwner, NewOwner string
	OldUntil, NewUntil string
	OldToken, NewToken int64
}

// Audit reads the audit of the programs' committed changes, in commit order.
func (db *DB) Audit(ctx context.Context) ([]AuditEntry, error) {
	rows, err := db.sql.QueryContext(ctx, ReadAudit.SQL)
	if err != nil {
		return nil, fmt.Errorf("store: read the audit: %w", err)
	}
	out, err := scanAudit(rows)
	slices.SortFunc(out, func(a, b AuditEntry) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, err
}

// TagAudit names actor and the lab clock at on the audited changes no
// transaction has named yet (a lab actor's own writes, as checkout's seed)
// and returns them.
func (db *DB) TagAudit(ctx context.Context, actor, at string) ([]AuditEntry, error) {
	rows, err := db.sql.QueryContext(ctx, TagAudit.SQL, sql.Named("actor", actor), sql.Named("at", at), sql.Named("tx", 0))
	if err != nil {
		return nil, fmt.Errorf("store: name the audited changes: %w", err)
	}
	return scanAudit(rows)
}

// scanAudit reads audit rows and closes them.
func scanAudit(rows *sql.Rows) ([]AuditEntry, error) {
	defer rows.Close()
	var out []AuditEntry
	for rows.Next() {
		var e AuditEntry
		if err := rows.Scan(&e.Seq, &e.Actor, &e.At, &e.Tx, &e.Table, &e.Op, &e.Key, &e.OldState, &e.NewState,
			&e.OldOwner, &e.NewOwner, &e.OldUntil, &e.NewUntil, &e.OldToken, &e.NewToken); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// programStatement marks, on a statement's context, a statement a user's
// program sent: the guard judges it by the sandbox alone.
type programStatement struct{}

// asProgram marks ctx as a program's statement's.
func asProgram(ctx context.Context) context.Context {
	return context.WithValue(ctx, programStatement{}, true)
}

// ProgramTx is a transaction a user's program opened: its statements run
// one request at a time, as the program sends them, on the instance's own
// connection.
type ProgramTx struct {
	tx      *sql.Tx
	engine  Engine
	sandbox *ProgramSandbox
}

// BeginProgram opens a program's transaction (BEGIN IMMEDIATE on SQLite;
// on PostgreSQL READ COMMITTED, its default). A busy database is an error
// [IsBusy] recognizes, for the caller to retry.
func (db *DB) BeginProgram(ctx context.Context) (*ProgramTx, error) {
	tx, err := db.sql.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	return &ProgramTx{tx: tx, engine: db.engine, sandbox: db.program}, nil
}

// namedArgs binds a program's JSON parameters: a whole number (JSON has
// only floats) binds as an integer.
func namedArgs(params map[string]any) []any {
	names := make([]string, 0, len(params))
	for k := range params {
		names = append(names, k)
	}
	slices.Sort(names)
	args := make([]any, 0, len(params))
	for _, k := range names {
		v := params[k]
		if f, ok := v.(float64); ok && f == math.Trunc(f) && math.Abs(f) < 1<<53 {
			v = int64(f)
		}
		args = append(args, sql.Named(k, v))
	}
	return args
}

// Query runs a statement that returns rows and returns them, each value
// an int64, a float64, a string, a []byte as a string, or nil.
func (t *ProgramTx) Query(ctx context.Context, text string, params map[string]any) ([]string, [][]any, error) {
	ctx, done, err := t.guard(ctx, text)
	if err != nil {
		return nil, nil, err
	}
	defer done()
	cols, out, err := t.query(ctx, text, params)
	if err == nil {
		err = t.stillOpen(ctx)
	}
	return cols, out, t.fault(ctx, err)
}

func (t *ProgramTx) query(ctx context.Context, text string, params map[string]any) ([]string, [][]any, error) {
	rows, err := t.tx.QueryContext(asProgram(ctx), text, namedArgs(params)...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, nil, err
	}
	var out [][]any
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, nil, err
		}
		for i, v := range vals {
			if b, ok := v.([]byte); ok {
				vals[i] = string(b)
			}
		}
		out = append(out, vals)
	}
	return cols, out, rows.Err()
}

// Exec runs a statement that changes rows and returns how many it changed.
func (t *ProgramTx) Exec(ctx context.Context, text string, params map[string]any) (int64, error) {
	ctx, done, err := t.guard(ctx, text)
	if err != nil {
		return 0, err
	}
	defer done()
	res, err := t.tx.ExecContext(asProgram(ctx), text, namedArgs(params)...)
	if err == nil {
		err = t.stillOpen(ctx)
	}
	if err != nil {
		return 0, t.fault(ctx, err)
	}
	return res.RowsAffected()
}

// Commit names actor, the lab clock at and the transaction's number n on
// the transaction's audited changes and commits, and returns the changes
// it committed, in the order the transaction made them. On SQLite the
// names are written in the transaction itself, just before COMMIT; on
// PostgreSQL, where the program's role may not touch the audit, lab (the
// lab's own connection) names the rows the committed transaction wrote,
// by its transaction id, once it has committed.
func (t *ProgramTx) Commit(ctx context.Context, lab *DB, actor, at string, n int64) ([]AuditEntry, error) {
	if t.engine == Postgres {
		return t.commitPostgres(ctx, lab, actor, at, n)
	}
	rows, err := t.tx.QueryContext(ctx, TagAudit.SQL, sql.Named("actor", actor), sql.Named("at", at), sql.Named("tx", n))
	if err != nil {
		_ = t.tx.Rollback()
		return nil, fmt.Errorf("store: name the transaction's changes: %w", err)
	}
	changes, err := scanAudit(rows)
	if err != nil {
		_ = t.tx.Rollback()
		return nil, fmt.Errorf("store: name the transaction's changes: %w", err)
	}
	slices.SortFunc(changes, func(a, b AuditEntry) int { return cmp.Compare(a.Seq, b.Seq) })
	return changes, t.tx.Commit()
}

// Rollback rolls the transaction back; rolling back one already over is
// not an error.
func (t *ProgramTx) Rollback() error {
	if err := t.tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
		return err
	}
	return nil
}
