package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// A user's program on PostgreSQL. Confinement, the guarantee: the run is a
// [GraderRole]'s (a fresh login role, in a database of its own), and the
// program's connections log in as that role, which [GraderRole.GrantProgram]
// gives USAGE on the run's schema and SELECT, INSERT, UPDATE and DELETE on
// the challenge's tables, nothing else: no CREATE anywhere, no right on the
// lab's audit (its triggers write it with the lab's rights, SECURITY
// DEFINER, their search path pinned to the run's schema, temporary tables
// last). What the server's rights cannot refuse, the lab does before the
// statement runs ([ProgramTx]): a text with a second statement in it (the
// simple protocol would run both), and any statement but a query or a
// change of rows (COMMIT, SET, LOCK, COPY, DO, ALTER ROLE, ...), read past
// comments as PostgreSQL's lexer reads them; and after it, a savepoint
// proves the transaction the lab opened for the program is still open.

// pgProgramStatements are the first keywords of the statements a program
// may send on PostgreSQL: queries and changes of rows.
var pgProgramStatements = []string{"SELECT", "INSERT", "UPDATE", "DELETE", "WITH", "VALUES", "TABLE", "MERGE"}

// SQLSTATEs of a program's statements: a right the role lacks, and a
// savepoint outside a transaction block.
const (
	pgInsufficientPrivilege = "42501"
	pgNoActiveTransaction   = "25P01"
)

// Statements of the program's transactions on PostgreSQL.
var (
	currentXactSQL = audit("lab: the program transaction's id, before its commit",
		"SELECT txid_current_if_assigned()")
	// TagCommitted names, as the login in --db, the audited changes of
	// the program transaction that committed as xid.
	TagCommitted = audit("lab: name the instance that made the committed transaction's changes",
		`UPDATE lab_audit SET actor = :actor, at = :at, tx = :tx WHERE actor IS NULL AND xid = :xid
RETURNING `+auditColumns)
	grantProgramSchemaSQL = audit("lab: let the program's role use the run's schema, and create nothing in it",
		"GRANT USAGE ON SCHEMA %s TO %s")
	grantProgramTablesSQL = audit("lab: let the program's role read and write the challenge's tables, and no other",
		"GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE %s TO %s")
	auditFunctionsSQL = audit("lab: the audit's trigger functions in the run's schema",
		`SELECT p.oid::regprocedure::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = $1 AND p.proname LIKE 'lab\_audit\_%' ORDER BY 1`)
	pinAuditFunctionSQL = audit("lab: an audit function finds the run's tables first and temporary tables last",
		"ALTER FUNCTION %s SET search_path = %s, pg_temp")
)

// GrantProgram gives the role what a user's program may use in schema, one
// of the run's: USAGE on the schema and SELECT, INSERT, UPDATE and DELETE on
// tables (named as in the lesson's SQL; PostgreSQL folds them to lower
// case), and nothing else; and pins the search path of the audit's
// functions in schema to it, temporary tables last.
func (r *GraderRole) GrantProgram(ctx context.Context, schema string, tables []string) error {
	db, err := OpenPostgres(ctx, r.adminDB, "", Config{})
	if err != nil {
		return err
	}
	defer db.Close()
	role := pgx.Identifier{r.Name}.Sanitize()
	names := make([]string, len(tables))
	for i, t := range tables {
		names[i] = pgx.Identifier{schema, strings.ToLower(t)}.Sanitize()
	}
	// A SECURITY DEFINER function searches pg_temp first unless told
	// otherwise; the role may not make temporary tables in the run's
	// database, and the audit's functions do not rely on that alone.
	functions, err := strings1(ctx, db, auditFunctionsSQL.SQL, schema)
	if err != nil {
		return fmt.Errorf("store: %s: %w", auditFunctionsSQL.Name, err)
	}
	type step struct {
		s   Stmt
		sql string
	}
	steps := []step{
		{grantProgramSchemaSQL, fmt.Sprintf(grantProgramSchemaSQL.SQL, pgx.Identifier{schema}.Sanitize(), role)},
		{grantProgramTablesSQL, fmt.Sprintf(grantProgramTablesSQL.SQL, strings.Join(names, ", "), role)},
	}
	for _, f := range functions {
		steps = append(steps, step{pinAuditFunctionSQL, fmt.Sprintf(pinAuditFunctionSQL.SQL, f, pgx.Identifier{schema}.Sanitize())})
	}
	for _, q := range steps {
		if _, err := db.sql.ExecContext(ctx, q.sql); err != nil {
			return fmt.Errorf("store: %s %s to %s: %w", q.s.Name, schema, r.Name, err)
		}
	}
	return nil
}

// guard bounds a program's statement on PostgreSQL: one statement, a query
// or a change of rows, under [SlotStatementTimeout]. On SQLite the
// authorizer judges it as it compiles (see [ProgramSandbox]) and the slot
// files' limits bound it.
func (t *ProgramTx) guard(ctx context.Context, text string) (context.Context, context.CancelFunc, error) {
	if t.engine != Postgres {
		return ctx, func() {}, nil
	}
	if refused := pgProgramRefuses(text); refused != "" {
		return ctx, nil, &SandboxError{Refused: refused, Tables: t.tables()}
	}
	ctx, cancel := context.WithTimeout(ctx, SlotStatementTimeout)
	return ctx, cancel, nil
}

// tables are the sandbox's tables, for its errors.
func (t *ProgramTx) tables() []string {
	if t.sandbox == nil {
		return nil
	}
	return t.sandbox.Tables
}

// fault names a program's statement's error on PostgreSQL: a right the
// role lacks is the sandbox's refusal, a statement stopped by its time
// limit says so. On SQLite the guard has named it already.
func (t *ProgramTx) fault(ctx context.Context, err error) error {
	if err == nil || t.engine != Postgres {
		return err
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == pgInsufficientPrivilege {
		return &SandboxError{Refused: "what the server's rights do not allow (" + pe.Message + ")", Tables: t.tables()}
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("the statement ran longer than %s and was stopped (a relay's statement reads a handful of rows): %w",
			SlotStatementTimeout, err)
	}
	return err
}

// commitPostgres reads the transaction's id, commits, and names its
// audited changes through lab.
func (t *ProgramTx) commitPostgres(ctx context.Context, lab *DB, actor, at string, n int64) ([]AuditEntry, error) {
	var xid sql.NullInt64
	if err := t.tx.QueryRowContext(ctx, currentXactSQL.SQL).Scan(&xid); err != nil {
		_ = t.tx.Rollback()
		return nil, fmt.Errorf("store: %s: %w", currentXactSQL.Name, err)
	}
	if err := t.tx.Commit(); err != nil {
		return nil, err
	}
	if !xid.Valid {
		return nil, nil // it wrote nothing
	}
	// Committed: name its changes even when the run is being stopped, so
	// no committed change goes unnamed (or is answered as failed).
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	rows, err := lab.sql.QueryContext(ctx, TagCommitted.SQL, sql.Named("actor", actor), sql.Named("at", at),
		sql.Named("tx", n), sql.Named("xid", xid.Int64))
	if err != nil {
		return nil, fmt.Errorf("store: name the transaction's changes: %w", err)
	}
	changes, err := scanAudit(rows)
	if err != nil {
		return nil, fmt.Errorf("store: name the transaction's changes: %w", err)
	}
	slices.SortFunc(changes, func(a, b AuditEntry) int { return cmp.Compare(a.Seq, b.Seq) })
	return changes, nil
}

// pgProgramRefuses says what the lab refuses of a program's statement text
// on PostgreSQL before it runs, "" when it may run: a semicolon anywhere
// but at the end (the server would run what follows as a second
// statement; the lab does not try to tell one inside a string from one
// outside), or a statement that is not a query or a change of rows.
func pgProgramRefuses(text string) string {
	body := strings.TrimRightFunc(text, unicode.IsSpace)
	body = strings.TrimRightFunc(strings.TrimSuffix(body, ";"), unicode.IsSpace)
	if strings.Contains(body, ";") {
		return "a text with a semicolon before its end: send one statement per request, and values as parameters"
	}
	word := strings.ToUpper(firstKeyword(body))
	if slices.Contains(pgProgramStatements, word) {
		return ""
	}
	if word == "" {
		return "a text that does not start with a statement's keyword"
	}
	article := "a"
	if strings.ContainsRune("AEIOU", rune(word[0])) {
		article = "an"
	}
	return fmt.Sprintf("%s %s statement: a program sends queries and changes of rows (%s), and opens and ends its "+
		"transactions with the protocol's begin, commit and rollback", article, word, strings.Join(pgProgramStatements, ", "))
}

// firstKeyword is the first word of a statement, after blanks, opening
// parentheses and comments, which PostgreSQL nests (/* /* */ */).
func firstKeyword(text string) string {
	i := 0
	for i < len(text) {
		switch c := text[i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' || c == '(':
			i++
		case strings.HasPrefix(text[i:], "--"):
			// PostgreSQL's lexer ends a comment at a carriage return
			// too: "--\rCOMMIT" is a COMMIT.
			j := strings.IndexAny(text[i:], "\n\r")
			if j < 0 {
				return ""
			}
			i += j + 1
		case strings.HasPrefix(text[i:], "/*"):
			depth := 0
			for i < len(text) {
				if strings.HasPrefix(text[i:], "/*") {
					depth++
					i += 2
				} else if strings.HasPrefix(text[i:], "*/") {
					depth--
					i += 2
					if depth == 0 {
						break
					}
				} else {
					i++
				}
			}
			if depth > 0 {
				return ""
			}
		default:
			j := i
			for j < len(text) && (text[j] == '_' || unicode.IsLetter(rune(text[j]))) {
				j++
			}
			return text[i:j] // "" where no word starts: no statement PostgreSQL knows starts so
		}
	}
	return ""
}

// stillOpenSQL asks whether the program's statement left the transaction
// the lab opened open: a savepoint is refused outside one.
var stillOpenSQL = audit("lab: is the program's transaction still open", "SAVEPOINT lab_still_open")

// stillOpen checks, on PostgreSQL, that a program's statement that ran
// left the lab's transaction open: one that ended it got past the lab's
// check of the text, and is the sandbox's refusal.
func (t *ProgramTx) stillOpen(ctx context.Context) error {
	if t.engine != Postgres {
		return nil
	}
	if _, err := t.tx.ExecContext(ctx, stillOpenSQL.SQL); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == pgNoActiveTransaction {
			return &SandboxError{Refused: "a statement that ended the transaction the lab opened", Tables: t.tables()}
		}
		return err
	}
	return nil
}
