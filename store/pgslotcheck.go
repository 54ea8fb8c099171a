package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// claimCheckSchema is the schema, in a grade's own database, where
// PostgreSQL judges the claim file before the run.
const claimCheckSchema = "outboxlab_claim_check"

// claimCheckTimeout bounds the whole PostgreSQL check of one claim file.
const claimCheckTimeout = 30 * time.Second

// deniedStableFunctions are functions PostgreSQL marks STABLE (or that a
// server could) that a claim still must not call, by name, with why:
// some change the server, others run SQL text or read relations the
// statement does not name, which the check of the relations it names
// cannot see.
var deniedStableFunctions = map[string]string{
	// Each assigns the transaction an id, moving the server's transaction
	// counter.
	"txid_current":       whyTransactionID,
	"pg_current_xact_id": whyTransactionID,
	// Each reads every row of a relation, a schema or the database it is
	// given by name (STABLE), or runs the query or reads the cursor it is
	// given (VOLATILE today).
	"table_to_xml":                  whyReadsRelations,
	"table_to_xmlschema":            whyReadsRelations,
	"table_to_xml_and_xmlschema":    whyReadsRelations,
	"schema_to_xml":                 whyReadsRelations,
	"schema_to_xmlschema":           whyReadsRelations,
	"schema_to_xml_and_xmlschema":   whyReadsRelations,
	"database_to_xml":               whyReadsRelations,
	"database_to_xmlschema":         whyReadsRelations,
	"database_to_xml_and_xmlschema": whyReadsRelations,
	"query_to_xml":                  whyRunsSQL,
	"query_to_xmlschema":            whyRunsSQL,
	"query_to_xml_and_xmlschema":    whyRunsSQL,
	"cursor_to_xml":                 whyRunsSQL,
	"cursor_to_xmlschema":           whyRunsSQL,
	"ts_stat":                       whyRunsSQL, // ts_stat(query text)
	"ts_rewrite":                    whyRunsSQL, // ts_rewrite(tsquery, query text); the 3-argument form runs none, and no claim needs it
	// Each reads the server's sessions, what the pg_stat_activity view
	// shows (a relation the check refuses by name).
	"pg_stat_get_activity":         whyReadsSessions,
	"pg_stat_get_backend_activity": whyReadsSessions,
}

// Why a function of [deniedStableFunctions] is refused, as the refusal says it.
const (
	whyTransactionID  = "it assigns a transaction id"
	whyReadsRelations = "it reads relations by name, beyond the run's tables"
	whyRunsSQL        = "it runs SQL text it is given"
	whyReadsSessions  = "it reads the server's sessions"
)

// allowedVolatileFunctions are functions PostgreSQL marks VOLATILE that
// change nothing but the session's random state: they read the clock or
// draw a random number.
var allowedVolatileFunctions = []string{"random", "clock_timestamp", "timeofday", "gen_random_uuid"}

// Statements of the PostgreSQL check of a claim file.
var (
	createCheckSchemaSQL = audit("lab: the schema where PostgreSQL judges the claim file",
		"CREATE SCHEMA IF NOT EXISTS "+claimCheckSchema)
	checkTimeoutSQL = audit("lab: bound the claim check's statements",
		fmt.Sprintf("SET LOCAL statement_timeout = %d", ClaimStatementTimeout.Milliseconds()))
	paramTypesSQL = audit("lab: the types PostgreSQL gave a claim statement's parameters",
		"SELECT format_type(t, NULL) FROM unnest($1::oid[]) WITH ORDINALITY AS u(t, i) ORDER BY i")
	claimWrapperSQL = audit("lab: have PostgreSQL parse a claim statement as a function body, to read what it does",
		"CREATE FUNCTION "+claimCheckSchema+".%s(%s) RETURNS void LANGUAGE sql BEGIN ATOMIC\n%s\n; END")
	claimBodySQL = audit("lab: the claim statement as PostgreSQL parsed it", `SELECT p.oid, p.prosqlbody::text FROM pg_proc p
JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1 AND p.proname = $2`)
	claimFunctionsSQL = audit("lab: the functions a claim statement calls that may change something or read beyond it, and whether VOLATILE",
		`SELECT p.oid::regprocedure::text, p.proname::text, p.provolatile = 'v'
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE p.oid = ANY($1) AND (p.provolatile = 'v' AND NOT (n.nspname = 'pg_catalog' AND p.proname = ANY($3)) OR p.proname = ANY($2))
ORDER BY 1`)
	claimOperatorsSQL = audit("lab: the functions behind a claim statement's operators that may change something or read beyond it, and whether VOLATILE",
		`SELECT o.oid::regoperator::text || ' (' || p.oid::regprocedure::text || ')', p.proname::text, p.provolatile = 'v'
FROM pg_operator o JOIN pg_proc p ON p.oid = o.oprcode JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE o.oid = ANY($1) AND (p.provolatile = 'v' AND NOT (n.nspname = 'pg_catalog' AND p.proname = ANY($3)) OR p.proname = ANY($2))
ORDER BY 1`)
	claimRelationsSQL = audit("lab: the relations a claim statement names, and whether each is the run's own",
		`SELECT c.oid::regclass::text, n.nspname = $2
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.oid = ANY($1) OR c.oid IN (SELECT refobjid FROM pg_depend WHERE classid = 'pg_proc'::regclass AND objid = $3 AND refclassid = 'pg_class'::regclass)
ORDER BY 1`)
)

// CheckClaimFile has PostgreSQL judge cf, as the role, in the run's own
// database, before the run: the server's parser, not SQLite's, reads
// what the server will run. In a transaction it rolls back, on the Day 15
// tables with the four messages SQLite's check uses, it parses each
// statement (one statement, exactly the text the run sends, parameters
// numbered), has the server parse it again as the body of a function and
// reads that parse tree: the kind of each statement in it, every function
// and operator it calls and every relation it names. The first statement
// must be a read-only SELECT of one integer column, the second an UPDATE
// of OutboxMessages that writes nothing else; neither may call a function
// PostgreSQL marks VOLATILE (those are the ones that can change
// something: nextval, setval, set_config, pg_sleep, lo_from_bytea,
// pg_advisory_lock, pg_notify, pg_terminate_backend, dblink...) or one of
// [deniedStableFunctions] (a transaction id; table_to_xml and the like,
// which read relations the statement does not name), or name a relation
// outside the run's tables.
// Then it runs each once, bounded by [ClaimStatementTimeout]. A refusal
// is a *[ClaimFileError]. The run's own database is what confines the
// file (see [GraderRole]); this check says why a file will not do.
func (r *GraderRole) CheckClaimFile(ctx context.Context, cf ClaimFile) error {
	ctx, cancel := context.WithTimeout(ctx, claimCheckTimeout)
	defer cancel()
	admin, err := OpenPostgres(ctx, r.adminDB, "", Config{})
	if err != nil {
		return err
	}
	defer admin.Close()
	if _, err := admin.sql.ExecContext(ctx, createCheckSchemaSQL.SQL); err != nil {
		return fmt.Errorf("store: %s: %w", createCheckSchemaSQL.Name, err)
	}
	if err := r.GrantSchema(ctx, claimCheckSchema); err != nil {
		return err
	}
	pc, err := postgresConfig(r.url, claimCheckSchema)
	if err != nil {
		return err
	}
	conn, err := pgx.ConnectConfig(ctx, pc)
	if err != nil {
		return unreachable(r.url, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	tx, err := conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("store: claim file check: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	for _, q := range []string{checkTimeoutSQL.SQL, postgresDDL(PaymentsOutbox.SQL), postgresDDL(OutboxLeasing.SQL), claimCheckRows} {
		if _, err := tx.Exec(ctx, q); err != nil {
			return fmt.Errorf("store: claim file check: %w", err)
		}
	}
	if err := checkPostgresStatement(ctx, conn, "first statement", cf.Select, false); err != nil {
		return err
	}
	return checkPostgresStatement(ctx, conn, "second statement", cf.Update, true)
}

// claimParams are the parameters a claim statement may use, with the
// values the check binds; :id only in the UPDATE.
var claimParams = map[string]any{"now": "2026-01-15T09:00:00.000Z", "worker": "Worker-A", "until": "2026-01-15T09:00:01.000Z", "id": int64(1)}

// checkPostgresStatement judges one claim statement on conn, inside the
// check's transaction (see [GraderRole.CheckClaimFile]).
func checkPostgresStatement(ctx context.Context, conn *pgx.Conn, which, text string, update bool) error {
	refuse := func(format string, args ...any) error { return &ClaimFileError{which, fmt.Sprintf(format, args...)} }
	want := "a read-only SELECT"
	if update {
		want = "an UPDATE of OutboxMessages that writes nothing else"
	}
	sql, params := numberParams(text)
	var args []any
	for _, p := range params {
		v, ok := claimParams[p]
		if !ok || p == "id" && !update {
			name := ":" + p
			if strings.HasPrefix(p, "#") {
				name = "a positional parameter ?"
			}
			return refuse("uses %s; a claim gets only :now, :worker and :until, and :id in the UPDATE", name)
		}
		args = append(args, v)
	}
	sd, err := conn.PgConn().Prepare(ctx, "", sql, nil)
	if err != nil {
		if pgCode(err) == "42601" && strings.Contains(err.Error(), "multiple commands") {
			return refuse("PostgreSQL reads more than one statement in it (a ';' that SQLite takes for part of a name or a string); a claim statement is one")
		}
		return refuse("PostgreSQL could not compile it: %s", pgMessage(err))
	}
	tree, err := parseTree(ctx, conn, which, want, sql, sd.ParamOIDs)
	if err != nil {
		return err
	}
	kinds := tree.kinds()
	switch {
	case len(kinds) == 0:
		return refuse("must be %s; PostgreSQL parsed no statement in it", want)
	case !update && (kinds[0] != "SELECT" || len(kinds) > 1):
		return refuse("must be %s; PostgreSQL parses it as %s", want, strings.Join(kinds, " with "))
	case update && kinds[0] != "UPDATE":
		return refuse("must be %s; PostgreSQL parses it as %s", want, kinds[0])
	case update && len(kinds) > 1:
		return refuse("must be %s; PostgreSQL parses it as an UPDATE with %s (a data-modifying WITH)", want, strings.Join(kinds[1:], ", "))
	case tree.nextValue:
		return refuse("takes a sequence's next value (an identity column's DEFAULT); a claim changes no sequence")
	case tree.recursive:
		return refuse("must not use a recursive WITH: a claim reads a handful of rows")
	case tree.setsDefault:
		return refuse("sets a column to its DEFAULT, which the server computes when it runs (Id's takes a sequence's next value); a claim writes its own values")
	}
	if err := tree.checkCalls(ctx, conn, refuse); err != nil {
		return err
	}
	if update {
		if err := checkUpdateTarget(ctx, conn, sql, args, refuse); err != nil {
			return err
		}
	}
	return runOnce(ctx, conn, sql, args, sd, update, refuse)
}

// pgMessage is a PostgreSQL error's message and SQLSTATE, without the
// driver's wording.
func pgMessage(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return fmt.Sprintf("%s (SQLSTATE %s)", pe.Message, pe.Code)
	}
	return err.Error()
}

// statementTree is what PostgreSQL's parse tree of a claim statement says
// it does: the command type of each query in it (the statement's own
// first), the functions, operators and relations it refers to by OID,
// and whether it takes a sequence's next value.
type statementTree struct {
	fn                   uint32 // the wrapper function, whose dependencies pg_depend holds
	commands             []int
	functions, ops, rels []uint32
	nextValue, recursive bool
	setsDefault          bool // SET col = DEFAULT, expanded only when the statement runs
}

// The fields of PostgreSQL's node trees (nodes/*.h, as pg_node_tree
// prints them) that name what a statement runs and reads. A field is
// always " :name value"; a name or string of the statement's own is
// printed with its blanks and colons escaped, so it cannot pass for one.
var (
	commandField  = regexp.MustCompile(` :commandType (\d+)`)
	functionField = regexp.MustCompile(` :(?:funcid|aggfnoid|winfnoid|tsmhandler|opfuncid|hashfuncid|negfuncid) (\d+)`)
	operatorField = regexp.MustCompile(` :(?:opno|sortop|eqop) (\d+)`)
	operatorsList = regexp.MustCompile(` :opnos \(o((?: \d+)*)\)`)
	relationField = regexp.MustCompile(` :relid (\d+)`)
)

// parseTree has PostgreSQL parse sql as the body of a function (a
// function with an SQL-standard body keeps its parse tree) with the
// parameter types the server inferred, and reads the tree.
func parseTree(ctx context.Context, conn *pgx.Conn, which, want, sql string, paramOIDs []uint32) (*statementTree, error) {
	rows, err := conn.Query(ctx, paramTypesSQL.SQL, paramOIDs)
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", paramTypesSQL.Name, err)
	}
	types, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", paramTypesSQL.Name, err)
	}
	name := "claim_" + strings.ReplaceAll(which, " ", "_")
	create := fmt.Sprintf(claimWrapperSQL.SQL, name, strings.Join(types, ", "), sql)
	// The extended protocol takes one statement only: sql, which the
	// server has read as one, cannot end the function and add another.
	if _, err := conn.PgConn().ExecParams(ctx, create, nil, nil, nil, nil).Close(); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && strings.HasSuffix(pe.Message, unsupportedInBody) {
			return nil, &ClaimFileError{which, fmt.Sprintf("must be %s; PostgreSQL reads it as %s", want, strings.TrimSuffix(pe.Message, unsupportedInBody))}
		}
		return nil, &ClaimFileError{which, fmt.Sprintf("must be %s; PostgreSQL could not read it as one: %s", want, pgMessage(err))}
	}
	t := &statementTree{}
	var body string
	if err := conn.QueryRow(ctx, claimBodySQL.SQL, claimCheckSchema, name).Scan(&t.fn, &body); err != nil {
		return nil, fmt.Errorf("store: %s: %w", claimBodySQL.Name, err)
	}
	for _, m := range commandField.FindAllStringSubmatch(body, -1) {
		n, _ := strconv.Atoi(m[1])
		t.commands = append(t.commands, n)
	}
	t.functions = oids(functionField, body)
	t.ops = oids(operatorField, body)
	for _, m := range operatorsList.FindAllStringSubmatch(body, -1) {
		for _, f := range strings.Fields(m[1]) {
			if n, err := strconv.ParseUint(f, 10, 32); err == nil && n != 0 {
				t.ops = append(t.ops, uint32(n))
			}
		}
	}
	t.rels = oids(relationField, body)
	t.nextValue = strings.Contains(body, "{NEXTVALUEEXPR")
	t.recursive = strings.Contains(body, " :cterecursive true")
	t.setsDefault = strings.Contains(body, "{SETTODEFAULT")
	return t, nil
}

// unsupportedInBody ends the server's refusal of a statement that is not a
// query (DROP TABLE, DO, SET, COPY, ...) as a function's body; the
// statement's kind comes first.
const unsupportedInBody = " is not yet supported in unquoted SQL function body"

// oids are the non-zero values of field in tree.
func oids(field *regexp.Regexp, tree string) []uint32 {
	var out []uint32
	for _, m := range field.FindAllStringSubmatch(tree, -1) {
		if n, err := strconv.ParseUint(m[1], 10, 32); err == nil && n != 0 {
			out = append(out, uint32(n))
		}
	}
	return out
}

// commandNames are PostgreSQL's CmdType values as a claim's refusal
// names them.
var commandNames = map[int]string{1: "SELECT", 2: "UPDATE", 3: "INSERT", 4: "DELETE", 5: "MERGE", 6: "a utility statement"}

// kinds names the command of each query in the tree, the statement's own
// first, then each other one that is not a SELECT.
func (t *statementTree) kinds() []string {
	var out []string
	for i, c := range t.commands {
		name, ok := commandNames[c]
		if !ok {
			name = "command " + strconv.Itoa(c)
		}
		if i == 0 || c != 1 {
			out = append(out, name)
		}
	}
	return out
}

// checkCalls refuses a statement that calls a function that may change
// something, runs SQL text or reads relations it is given by name (see
// [deniedStableFunctions]), or names a relation that is not the run's own.
func (t *statementTree) checkCalls(ctx context.Context, conn *pgx.Conn, refuse func(string, ...any) error) error {
	denied := make([]string, 0, len(deniedStableFunctions))
	for name := range deniedStableFunctions {
		denied = append(denied, name)
	}
	var changing []string
	for _, q := range []struct {
		s    Stmt
		oids []uint32
	}{{claimFunctionsSQL, t.functions}, {claimOperatorsSQL, t.ops}} {
		if len(q.oids) == 0 {
			continue
		}
		rows, err := conn.Query(ctx, q.s.SQL, q.oids, denied, allowedVolatileFunctions)
		if err != nil {
			return fmt.Errorf("store: %s: %w", q.s.Name, err)
		}
		var name, proname string
		var volatile bool
		_, err = pgx.ForEachRow(rows, []any{&name, &proname, &volatile}, func() error {
			why := deniedStableFunctions[proname]
			if volatile {
				why = "PostgreSQL marks it VOLATILE"
			}
			if call := name + " (" + why + ")"; !contains(changing, call) {
				changing = append(changing, call)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("store: %s: %w", q.s.Name, err)
		}
	}
	if len(changing) > 0 {
		sort.Strings(changing)
		return refuse("calls %s; a claim may call only functions PostgreSQL marks IMMUTABLE or STABLE, which neither change the database or the server nor wait, "+
			"and none that runs SQL text or reads beyond the relations the statement names",
			strings.Join(changing, ", "))
	}
	rows, err := conn.Query(ctx, claimRelationsSQL.SQL, t.rels, claimCheckSchema, t.fn)
	if err != nil {
		return fmt.Errorf("store: %s: %w", claimRelationsSQL.Name, err)
	}
	var foreign []string
	var name string
	var own bool
	if _, err := pgx.ForEachRow(rows, []any{&name, &own}, func() error {
		if !own {
			foreign = append(foreign, name)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("store: %s: %w", claimRelationsSQL.Name, err)
	}
	if len(foreign) > 0 {
		return refuse("names %s; a claim reads only the run's own tables (OutboxMessages, Payments)", strings.Join(foreign, ", "))
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// checkUpdateTarget has PostgreSQL plan the UPDATE (it calls nothing that
// changes anything, so planning is safe) and requires the plan to update
// OutboxMessages in the check's schema.
func checkUpdateTarget(ctx context.Context, conn *pgx.Conn, sql string, args []any, refuse func(string, ...any) error) error {
	var plan string
	if err := conn.QueryRow(ctx, "EXPLAIN (VERBOSE, FORMAT JSON) "+sql, args...).Scan(&plan); err != nil {
		return refuse("PostgreSQL could not plan it: %s", pgMessage(err))
	}
	var plans []struct {
		Plan struct {
			NodeType  string `json:"Node Type"`
			Operation string `json:"Operation"`
			Relation  string `json:"Relation Name"`
			Schema    string `json:"Schema"`
		} `json:"Plan"`
	}
	if err := json.Unmarshal([]byte(plan), &plans); err != nil || len(plans) != 1 {
		return fmt.Errorf("store: read the claim UPDATE's plan: %v", err)
	}
	p := plans[0].Plan
	if p.NodeType != "ModifyTable" || p.Operation != "Update" || !strings.EqualFold(p.Relation, "outboxmessages") || p.Schema != claimCheckSchema {
		return refuse("must be an UPDATE of OutboxMessages that writes nothing else; PostgreSQL plans it as an UPDATE of %s", p.Relation)
	}
	return nil
}

// integerTypes are the column types the run can read as a message's Id.
var integerTypes = map[uint32]bool{20: true, 21: true, 23: true} // int8, int2, int4

// runOnce runs the statement once on the check's four messages, as the
// run will, under the check's statement_timeout.
func runOnce(ctx context.Context, conn *pgx.Conn, sql string, args []any, sd *pgconn.StatementDescription, update bool, refuse func(string, ...any) error) error {
	failed := func(err error) error {
		if pgCode(err) == "57014" || errors.Is(err, context.DeadlineExceeded) {
			return refuse("took longer than %s on a table of four messages and was stopped: a claim must read a handful of rows", ClaimStatementTimeout)
		}
		return refuse("PostgreSQL could not run it: %s", pgMessage(err))
	}
	if update {
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			return failed(err)
		}
		return nil
	}
	if len(sd.Fields) != 1 {
		return refuse("must select one column, the message's Id; it selects %d", len(sd.Fields))
	}
	if oid := sd.Fields[0].DataTypeOID; !integerTypes[oid] {
		var name string
		if err := conn.QueryRow(ctx, "SELECT format_type($1, NULL)", oid).Scan(&name); err != nil {
			name = "OID " + strconv.FormatUint(uint64(oid), 10)
		}
		return refuse("must select the message's Id, an integer; it selects a %s", name)
	}
	rows, err := conn.Query(ctx, sql, args...)
	if err != nil {
		return failed(err)
	}
	rows.Next() // the run reads one row, and so does the check
	rows.Close()
	if err := rows.Err(); err != nil {
		return failed(err)
	}
	return nil
}
