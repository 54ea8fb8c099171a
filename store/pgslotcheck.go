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

// slotCheckSchema is the schema, in a grade's own database, where
// PostgreSQL judges a slot file before the run.
const slotCheckSchema = "outboxlab_claim_check"

// slotCheckTimeout bounds the whole PostgreSQL check of one slot file.
const slotCheckTimeout = 30 * time.Second

// deniedStableFunctions are functions PostgreSQL marks STABLE (or that a
// server could) that a slot file's statement still must not call, by name, with why:
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
	"ts_rewrite":                    whyRunsSQL, // ts_rewrite(tsquery, query text); the 3-argument form runs none, and no lesson needs it
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

// Statements of the PostgreSQL check of a slot file.
var (
	createCheckSchemaSQL = audit("lab: the schema where PostgreSQL judges a slot file",
		"CREATE SCHEMA IF NOT EXISTS "+slotCheckSchema)
	checkTimeoutSQL = audit("lab: bound the slot check's statements",
		fmt.Sprintf("SET LOCAL statement_timeout = %d", SlotStatementTimeout.Milliseconds()))
	paramTypesSQL = audit("lab: the types PostgreSQL gave a slot file's statement's parameters",
		"SELECT format_type(t, NULL) FROM unnest($1::oid[]) WITH ORDINALITY AS u(t, i) ORDER BY i")
	slotWrapperSQL = audit("lab: have PostgreSQL parse a slot file's statement as a function body, to read what it does",
		"CREATE FUNCTION "+slotCheckSchema+".%s(%s) RETURNS void LANGUAGE sql BEGIN ATOMIC\n%s\n; END")
	slotBodySQL = audit("lab: the slot file's statement as PostgreSQL parsed it", `SELECT p.oid, p.prosqlbody::text FROM pg_proc p
JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1 AND p.proname = $2`)
	slotFunctionsSQL = audit("lab: the functions a slot file's statement calls that may change something or read beyond it, and whether VOLATILE",
		`SELECT p.oid::regprocedure::text, p.proname::text, p.provolatile = 'v'
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE p.oid = ANY($1) AND (p.provolatile = 'v' AND NOT (n.nspname = 'pg_catalog' AND p.proname = ANY($3)) OR p.proname = ANY($2))
ORDER BY 1`)
	slotOperatorsSQL = audit("lab: the functions behind a slot file's statement's operators that may change something or read beyond it, and whether VOLATILE",
		`SELECT o.oid::regoperator::text || ' (' || p.oid::regprocedure::text || ')', p.proname::text, p.provolatile = 'v'
FROM pg_operator o JOIN pg_proc p ON p.oid = o.oprcode JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE o.oid = ANY($1) AND (p.provolatile = 'v' AND NOT (n.nspname = 'pg_catalog' AND p.proname = ANY($3)) OR p.proname = ANY($2))
ORDER BY 1`)
	slotRelationsSQL = audit("lab: the relations a slot file's statement names, and whether each is the run's own",
		`SELECT c.oid::regclass::text, n.nspname = $2
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.oid = ANY($1) OR c.oid IN (SELECT refobjid FROM pg_depend WHERE classid = 'pg_proc'::regclass AND objid = $3 AND refclassid = 'pg_class'::regclass)
ORDER BY 1`)
)

// CheckSlotFile has PostgreSQL judge f, as the role, in the run's own
// database, before the run: the server's parser, not SQLite's, reads
// what the server will run. In a transaction it rolls back, on the slot's
// schema holding its check rows (the Day 15 tables and four messages for
// the claim), it parses each statement (one statement, exactly the text
// the run sends, parameters numbered: only its shape's named ones), has
// the server parse it again as the body of a function and reads that
// parse tree: the kind of each statement in it, every function and
// operator it calls and every relation it names. A statement must be of
// its shape's kind with no other command but SELECTs in it (no
// data-modifying WITH): a SELECT reads only (with ReturnsID, one integer
// column), an UPDATE the server plans as an UPDATE of its shape's table,
// an INSERT as an INSERT into its shape's table (an upsert of it, ON
// CONFLICT DO NOTHING or DO UPDATE, included). None may call a function
// PostgreSQL marks VOLATILE (those are the ones that can change
// something: nextval, setval, set_config, pg_sleep, lo_from_bytea,
// pg_advisory_lock, pg_notify, pg_terminate_backend, dblink...) or one of
// [deniedStableFunctions] (a transaction id; table_to_xml and the like,
// which read relations the statement does not name), name a relation
// outside the run's tables, or recurse. A SELECT or UPDATE may not take a
// sequence's next value or set a column to its DEFAULT; an INSERT may,
// since a DEFAULT it leaves or names is its own table's (an INTEGER
// PRIMARY KEY's is that table's own sequence), in the run's own database:
// a lesson's INSERT into such a table takes one, and must pass.
// Then it runs each once, in order, bounded by [SlotStatementTimeout]. A
// refusal is a *[SlotFileError]. The run's own database is what confines
// the file (see [GraderRole]); this check says why a file will not do.
func (r *GraderRole) CheckSlotFile(ctx context.Context, f SlotFile) error {
	if err := f.valid(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, slotCheckTimeout)
	defer cancel()
	admin, err := OpenPostgres(ctx, r.adminDB, "", Config{})
	if err != nil {
		return err
	}
	defer admin.Close()
	if _, err := admin.sql.ExecContext(ctx, createCheckSchemaSQL.SQL); err != nil {
		return fmt.Errorf("store: %s: %w", createCheckSchemaSQL.Name, err)
	}
	if err := r.GrantSchema(ctx, slotCheckSchema); err != nil {
		return err
	}
	pc, err := postgresConfig(r.url, slotCheckSchema)
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
		return fmt.Errorf("store: slot file check: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	setup := []string{checkTimeoutSQL.SQL}
	for _, m := range f.Slot.Schema {
		setup = append(setup, postgresDDL(m.SQL))
	}
	if f.Slot.CheckRows != "" {
		setup = append(setup, f.Slot.CheckRows)
	}
	for _, q := range setup {
		if _, err := tx.Exec(ctx, q); err != nil {
			return fmt.Errorf("store: slot file check: %w", err)
		}
	}
	for i, text := range f.Texts {
		if err := checkPostgresStatement(ctx, conn, f.Slot, i, text); err != nil {
			return err
		}
	}
	return nil
}

// checkPostgresStatement judges statement i of a file of slot on conn,
// inside the check's transaction (see [GraderRole.CheckSlotFile]).
func checkPostgresStatement(ctx context.Context, conn *pgx.Conn, slot Slot, i int, text string) error {
	which, shape := slot.statementName(i), slot.Shapes[i]
	refuse := func(format string, args ...any) error { return &SlotFileError{which, fmt.Sprintf(format, args...)} }
	want := shape.want()
	sql, params := numberParams(text)
	var args []any
	for _, p := range params {
		if !shape.allows(p) {
			return refuse("%s", shape.paramRefusal(p))
		}
		args = append(args, slot.sample(p))
	}
	sd, err := conn.PgConn().Prepare(ctx, "", sql, nil)
	if err != nil {
		if pgCode(err) == "42601" && strings.Contains(err.Error(), "multiple commands") {
			return refuse("PostgreSQL reads more than one statement in it (a ';' that SQLite takes for part of a name or a string); a lesson's statement is one")
		}
		return refuse("PostgreSQL could not compile it: %s", pgMessage(err))
	}
	tree, err := parseTree(ctx, conn, i, which, want, sql, sd.ParamOIDs)
	if err != nil {
		return err
	}
	kinds := tree.kinds()
	writes := shape.Kind != KindSelect
	switch {
	case len(kinds) == 0:
		return refuse("must be %s; PostgreSQL parsed no statement in it", want)
	case !writes && (kinds[0] != KindSelect || len(kinds) > 1):
		return refuse("must be %s; PostgreSQL parses it as %s", want, strings.Join(kinds, " with "))
	case writes && kinds[0] != shape.Kind:
		return refuse("must be %s; PostgreSQL parses it as %s", want, kinds[0])
	case writes && len(kinds) > 1:
		return refuse("must be %s; PostgreSQL parses it as an %s with %s (a data-modifying WITH)", want, shape.Kind, strings.Join(kinds[1:], ", "))
	case tree.nextValue && shape.Kind != KindInsert:
		return refuse("takes a sequence's next value (an identity column's DEFAULT); a lesson's %s changes no sequence", shape.Kind)
	case tree.recursive:
		return refuse("must not use a recursive WITH: a lesson's statement reads a handful of rows")
	case tree.setsDefault && shape.Kind != KindInsert:
		return refuse("sets a column to its DEFAULT, which the server computes when it runs (an Id's takes a sequence's next value); an UPDATE writes its own values")
	}
	if err := tree.checkCalls(ctx, conn, slot, refuse); err != nil {
		return err
	}
	if writes {
		if err := checkWriteTarget(ctx, conn, shape, sql, args, refuse); err != nil {
			return err
		}
	}
	return runOnce(ctx, conn, sql, args, sd, shape, refuse)
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

// statementTree is what PostgreSQL's parse tree of a slot file's statement says
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
func parseTree(ctx context.Context, conn *pgx.Conn, i int, which, want, sql string, paramOIDs []uint32) (*statementTree, error) {
	rows, err := conn.Query(ctx, paramTypesSQL.SQL, paramOIDs)
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", paramTypesSQL.Name, err)
	}
	types, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", paramTypesSQL.Name, err)
	}
	name := "slot_statement_" + strconv.Itoa(i+1)
	create := fmt.Sprintf(slotWrapperSQL.SQL, name, strings.Join(types, ", "), sql)
	// The extended protocol takes one statement only: sql, which the
	// server has read as one, cannot end the function and add another.
	if _, err := conn.PgConn().ExecParams(ctx, create, nil, nil, nil, nil).Close(); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && strings.HasSuffix(pe.Message, unsupportedInBody) {
			return nil, &SlotFileError{which, fmt.Sprintf("must be %s; PostgreSQL reads it as %s", want, strings.TrimSuffix(pe.Message, unsupportedInBody))}
		}
		return nil, &SlotFileError{which, fmt.Sprintf("must be %s; PostgreSQL could not read it as one: %s", want, pgMessage(err))}
	}
	t := &statementTree{}
	var body string
	if err := conn.QueryRow(ctx, slotBodySQL.SQL, slotCheckSchema, name).Scan(&t.fn, &body); err != nil {
		return nil, fmt.Errorf("store: %s: %w", slotBodySQL.Name, err)
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

// commandNames are PostgreSQL's CmdType values as a refusal
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
func (t *statementTree) checkCalls(ctx context.Context, conn *pgx.Conn, slot Slot, refuse func(string, ...any) error) error {
	denied := make([]string, 0, len(deniedStableFunctions))
	for name := range deniedStableFunctions {
		denied = append(denied, name)
	}
	var changing []string
	for _, q := range []struct {
		s    Stmt
		oids []uint32
	}{{slotFunctionsSQL, t.functions}, {slotOperatorsSQL, t.ops}} {
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
		return refuse("calls %s; a lesson's statement may call only functions PostgreSQL marks IMMUTABLE or STABLE, which neither change the database or the server nor wait, "+
			"and none that runs SQL text or reads beyond the relations the statement names",
			strings.Join(changing, ", "))
	}
	rows, err := conn.Query(ctx, slotRelationsSQL.SQL, t.rels, slotCheckSchema, t.fn)
	if err != nil {
		return fmt.Errorf("store: %s: %w", slotRelationsSQL.Name, err)
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
		return fmt.Errorf("store: %s: %w", slotRelationsSQL.Name, err)
	}
	if len(foreign) > 0 {
		return refuse("names %s; a file reads only the run's own tables (%s)", strings.Join(foreign, ", "), strings.Join(slot.tables(), ", "))
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

// checkWriteTarget has PostgreSQL plan the UPDATE or INSERT (it calls
// nothing that changes anything, so planning is safe) and requires the
// plan to update, or insert into, the shape's table in the check's
// schema. An upsert's ON CONFLICT DO UPDATE can update only the table it
// inserts into, so the plan's one ModifyTable says all it writes.
func checkWriteTarget(ctx context.Context, conn *pgx.Conn, shape Shape, sql string, args []any, refuse func(string, ...any) error) error {
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
		return fmt.Errorf("store: read the slot statement's plan: %v", err)
	}
	p := plans[0].Plan
	if p.NodeType != "ModifyTable" || !strings.EqualFold(p.Operation, shape.Kind) || !strings.EqualFold(p.Relation, shape.Table) || p.Schema != slotCheckSchema {
		return refuse("must be %s; PostgreSQL plans it as %s", shape.want(), planned(p.NodeType, p.Operation, p.Relation))
	}
	return nil
}

// planned says what a plan's top node does, for a refusal.
func planned(node, operation, relation string) string {
	if node != "ModifyTable" {
		return "a " + node
	}
	op := strings.ToUpper(operation)
	switch op {
	case KindInsert:
		return "an INSERT into " + relation
	case "DELETE":
		return "a DELETE from " + relation
	}
	return "an " + op + " of " + relation
}

// integerTypes are the column types the run can read as a message's Id.
var integerTypes = map[uint32]bool{20: true, 21: true, 23: true} // int8, int2, int4

// runOnce runs the statement once on the check's rows, as the run will,
// under the check's statement_timeout; a statement of shape.ReturnsID
// must return one integer column.
func runOnce(ctx context.Context, conn *pgx.Conn, sql string, args []any, sd *pgconn.StatementDescription, shape Shape, refuse func(string, ...any) error) error {
	failed := func(err error) error {
		if pgCode(err) == "57014" || errors.Is(err, context.DeadlineExceeded) {
			return refuse("took longer than %s on the check's few rows and was stopped: a lesson's statement must read a handful of rows", SlotStatementTimeout)
		}
		return refuse("PostgreSQL could not run it: %s", pgMessage(err))
	}
	if !shape.ReturnsID {
		if shape.Kind != KindSelect {
			if _, err := conn.Exec(ctx, sql, args...); err != nil {
				return failed(err)
			}
			return nil
		}
		return readOne(ctx, conn, sql, args, failed)
	}
	verb := returnVerb(shape)
	if len(sd.Fields) != 1 {
		return refuse("must %s one column, the message's Id; it %ss %d", verb, verb, len(sd.Fields))
	}
	if oid := sd.Fields[0].DataTypeOID; !integerTypes[oid] {
		var name string
		if err := conn.QueryRow(ctx, "SELECT format_type($1, NULL)", oid).Scan(&name); err != nil {
			name = "OID " + strconv.FormatUint(uint64(oid), 10)
		}
		return refuse("must %s the message's Id, an integer; it %ss a %s", verb, verb, name)
	}
	return readOne(ctx, conn, sql, args, failed)
}

// readOne runs a SELECT and reads its first row, as the run does.
func readOne(ctx context.Context, conn *pgx.Conn, sql string, args []any, failed func(error) error) error {
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
