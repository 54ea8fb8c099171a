package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/outboxlab/outboxlab/internal/pgtest"
)

const (
	pgWhere  = "(Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now))"
	pgSelect = "SELECT Id FROM OutboxMessages WHERE " + pgWhere + " ORDER BY CreatedAtUtc, Id LIMIT 1"
	pgUpdate = "UPDATE OutboxMessages SET Status = 'Processing', LockedBy = :worker, LockedUntilUtc = :until WHERE Id = :id AND " + pgWhere
)

// TestClaimFileOnPostgres: PostgreSQL's own parser judges a claim file in
// the run's database: syntax SQLite reads otherwise ([...] as an array,
// U&"..." names, dollar quotes, E'...' strings, nested comments), functions
// with side effects however they are reached, statements that are not
// queries, writes hidden in a WITH, other schemas' objects. After each,
// the server's other schemas, sequences, large objects, roles and
// databases are as they were.
func TestClaimFileOnPostgres(t *testing.T) {
	t.Parallel()
	url, victim, r := graderSandbox(t)
	ctx := context.Background()
	before := pgtest.ServerState(t, url, victim)
	sel := func(cond string) string {
		return "SELECT Id FROM OutboxMessages WHERE " + pgWhere + " AND " + cond + " ORDER BY CreatedAtUtc, Id LIMIT 1"
	}
	for _, tt := range []struct {
		name, select_, update, want string // want "" accepts
	}{
		{"Lesson", pgSelect, pgUpdate, ""},
		{"ForUpdateSkipLocked", pgSelect + " FOR UPDATE SKIP LOCKED", pgUpdate, ""},
		{"CastsAndArrays", "SELECT Id FROM OutboxMessages WHERE Status = ANY(ARRAY['Pending']::text[]) OR LockedUntilUtc::text <= :now ORDER BY Id LIMIT 1", pgUpdate, ""},
		{"Random", pgSelect[:len(pgSelect)-len(" ORDER BY CreatedAtUtc, Id LIMIT 1")] + " ORDER BY random() LIMIT 1", pgUpdate, ""},
		{"ArrayAliasNextval", "SELECT m.Id FROM OutboxMessages m, (SELECT ARRAY [nextval('outboxmessages_id_seq')] FROM (SELECT 1 AS ARRAY) a) b LIMIT 1", pgUpdate, "calls nextval(regclass)"},
		{"ArrayAliasOtherSchema", "SELECT m.Id FROM OutboxMessages m, (SELECT ARRAY [nextval('" + victim + ".s')] FROM (SELECT 1 AS ARRAY) a) b LIMIT 1", pgUpdate, "does not exist"},
		{"NextvalRegclassCast", sel("nextval('outboxmessages_id_seq'::regclass) > 0"), pgUpdate, "calls nextval(regclass)"},
		{"NextvalComputedName", sel("nextval(('outboxmessages' || '_id_seq')::regclass) > 0"), pgUpdate, "calls nextval(regclass)"},
		{"NextvalUnicodeName", sel(`U&"\006eextval"('outboxmessages_id_seq') > 0`), pgUpdate, "calls nextval(regclass)"},
		{"NextvalInUpdate", pgSelect, "UPDATE OutboxMessages SET LockedBy = nextval('outboxmessages_id_seq')::text WHERE Id = :id", "calls nextval(regclass)"},
		{"Setval", sel("setval('outboxmessages_id_seq', 1000) > 0"), pgUpdate, "calls setval(regclass,bigint)"},
		{"Currval", sel("currval('outboxmessages_id_seq') > 0"), pgUpdate, "calls currval(regclass)"},
		{"PgSleep", sel("pg_sleep(5) IS NOT NULL"), pgUpdate, "calls pg_sleep(double precision)"},
		{"SetConfig", pgSelect, "UPDATE OutboxMessages SET LockedBy = set_config('search_path', 'public', false) WHERE Id = :id", "calls set_config(text,text,boolean)"},
		{"LoFromBytea", sel("lo_from_bytea(0, 'x') > 0"), pgUpdate, "calls lo_from_bytea(oid,bytea)"},
		{"LoImport", sel("lo_import('/etc/passwd') > 0"), pgUpdate, "calls lo_import(text)"},
		{"AdvisoryLock", sel("pg_advisory_lock(42) IS NOT NULL"), pgUpdate, "calls pg_advisory_lock(bigint)"},
		{"Notify", sel("pg_notify('outbox', 'x') IS NOT NULL"), pgUpdate, "calls pg_notify(text,text)"},
		{"TxidCurrent", sel("txid_current() > 0"), pgUpdate, "calls txid_current() (it assigns a transaction id)"},
		{"CurrentXactID", sel("pg_current_xact_id() IS NOT NULL"), pgUpdate, "calls pg_current_xact_id() (it assigns a transaction id)"},
		{"TerminateBackend", sel("pg_terminate_backend(pg_backend_pid())"), pgUpdate, "calls pg_terminate_backend(integer,bigint)"},
		{"ReadFile", sel("pg_read_file('/etc/passwd') <> ''"), pgUpdate, "calls pg_read_file(text)"},
		{"Dblink", sel("dblink_exec('dbname=postgres', 'DROP TABLE x') IS NOT NULL"), pgUpdate, "dblink_exec(unknown, unknown) does not exist"},
		{"VolatileOperatorFunction", sel("(SELECT nextval('outboxmessages_id_seq')) > 0"), pgUpdate, "calls nextval(regclass)"},
		{"DollarQuotedString", "SELECT Id FROM OutboxMessages WHERE Payload <> $$ ;-- $$ AND lo_from_bytea(0, 'x') > 0 LIMIT 1", pgUpdate, "calls lo_from_bytea"},
		{"NestedComment", "SELECT Id FROM OutboxMessages /* a /* b */ WHERE lo_from_bytea(0, 'x') > 0 LIMIT 1", pgUpdate, "unterminated /* comment"},
		{"NestedCommentClosed", "SELECT Id FROM OutboxMessages /* a /* b */ */ WHERE lo_from_bytea(0, 'x') > 0 LIMIT 1", pgUpdate, "calls lo_from_bytea"},
		{"EscapeString", `SELECT Id FROM OutboxMessages WHERE Payload <> E'\'' AND lo_from_bytea(0, 'x') > 0 LIMIT 1`, pgUpdate, "calls lo_from_bytea"},
		{"TwoStatementsInOne", "SELECT Id FROM OutboxMessages LIMIT 1; SELECT nextval('outboxmessages_id_seq')", pgUpdate, "more than one statement"},
		{"CopyToProgram", "COPY (SELECT 1) TO PROGRAM 'touch /tmp/outboxlab-pwned'", pgUpdate, "PostgreSQL reads it as COPY"},
		{"DoBlock", "DO 'BEGIN PERFORM set_config(''search_path'', ''public'', false); END'", pgUpdate, "PostgreSQL reads it as DO"},
		{"Call", "CALL pg_catalog.pg_sleep(1)", pgUpdate, "is not a procedure"},
		{"SetRole", pgSelect, "SET ROLE postgres", "PostgreSQL reads it as SET"},
		{"WritableWithInSelect", "WITH gone AS (DELETE FROM Payments RETURNING Id) SELECT Id FROM OutboxMessages LIMIT 1", pgUpdate, "SELECT with DELETE"},
		{"WritableWithInUpdate", pgSelect, "WITH paid AS (UPDATE Payments SET PaymentStatus = 'Paid' RETURNING Id) " + pgUpdate, "an UPDATE with UPDATE"},
		{"UpdateOtherTable", pgSelect, "UPDATE Payments SET PaymentStatus = 'Paid' WHERE Id = :id", "an UPDATE of payments"},
		{"ForUpdateOtherSchema", "SELECT m.Id FROM OutboxMessages m, " + victim + ".t v LIMIT 1 FOR UPDATE", pgUpdate, "does not exist"},
		{"ForUpdateCatalog", "SELECT c.oid::bigint FROM pg_catalog.pg_class c LIMIT 1 FOR UPDATE", pgUpdate, "names pg_class"},
		{"ReadActivity", "SELECT count(*) FROM pg_stat_activity", pgUpdate, "names pg_stat_activity"},
		{"ReadActivityFunction", "SELECT count(*)::int FROM pg_stat_get_activity(NULL)", pgUpdate, "calls pg_stat_get_activity(integer) (it reads the server's sessions)"},
		{"BackendActivity", sel("pg_stat_get_backend_activity(1) IS NOT NULL"), pgUpdate, "calls pg_stat_get_backend_activity(integer) (it reads the server's sessions)"},
		// STABLE functions that read relations the statement does not
		// name, and VOLATILE ones that run the SQL text they are given.
		{"SchemaToXML", sel("length(schema_to_xml('pg_catalog', true, false, '')::text) > 0"), pgUpdate, "calls schema_to_xml(name,boolean,boolean,text) (it reads relations by name"},
		{"SchemaToXMLSchema", sel("length(schema_to_xmlschema('pg_catalog', true, false, '')::text) > 0"), pgUpdate, "calls schema_to_xmlschema(name,boolean,boolean,text) (it reads relations by name"},
		{"SchemaToXMLAndSchema", sel("length(schema_to_xml_and_xmlschema('pg_catalog', true, false, '')::text) > 0"), pgUpdate, "calls schema_to_xml_and_xmlschema(name,boolean,boolean,text) (it reads relations by name"},
		{"TableToXML", sel("length(table_to_xml('pg_catalog.pg_class', true, false, '')::text) > 0"), pgUpdate, "calls table_to_xml(regclass,boolean,boolean,text) (it reads relations by name"},
		{"TableToXMLSchema", sel("length(table_to_xmlschema('pg_class', true, false, '')::text) > 0"), pgUpdate, "calls table_to_xmlschema(regclass,boolean,boolean,text) (it reads relations by name"},
		{"TableToXMLAndSchemaInUpdate", pgSelect, "UPDATE OutboxMessages SET LockedBy = left(table_to_xml_and_xmlschema('pg_class', true, false, '')::text, 10) WHERE Id = :id", "calls table_to_xml_and_xmlschema(regclass,boolean,boolean,text) (it reads relations by name"},
		{"DatabaseToXML", sel("length(database_to_xml(true, false, '')::text) > 0"), pgUpdate, "calls database_to_xml(boolean,boolean,text) (it reads relations by name"},
		{"DatabaseToXMLSchema", sel("length(database_to_xmlschema(true, false, '')::text) > 0"), pgUpdate, "calls database_to_xmlschema(boolean,boolean,text) (it reads relations by name"},
		{"DatabaseToXMLAndSchema", sel("length(database_to_xml_and_xmlschema(true, false, '')::text) > 0"), pgUpdate, "calls database_to_xml_and_xmlschema(boolean,boolean,text) (it reads relations by name"},
		{"QueryToXML", sel("length(query_to_xml('SELECT * FROM pg_class', true, false, '')::text) > 0"), pgUpdate, "calls query_to_xml(text,boolean,boolean,text) (PostgreSQL marks it VOLATILE)"},
		{"QueryToXMLSchema", sel("length(query_to_xmlschema('SELECT 1', true, false, '')::text) > 0"), pgUpdate, "calls query_to_xmlschema(text,boolean,boolean,text)"},
		{"QueryToXMLAndSchema", sel("length(query_to_xml_and_xmlschema('SELECT 1', true, false, '')::text) > 0"), pgUpdate, "calls query_to_xml_and_xmlschema(text,boolean,boolean,text)"},
		{"CursorToXML", sel("length(cursor_to_xml('c'::refcursor, 1, false, false, '')::text) > 0"), pgUpdate, "calls cursor_to_xml(refcursor,integer,boolean,boolean,text)"},
		{"CursorToXMLSchema", sel("length(cursor_to_xmlschema('c'::refcursor, false, false, '')::text) > 0"), pgUpdate, "calls cursor_to_xmlschema(refcursor,boolean,boolean,text)"},
		{"TsStat", "SELECT Id FROM OutboxMessages, ts_stat('SELECT to_tsvector(relname) FROM pg_class') s LIMIT 1", pgUpdate, "calls ts_stat(text)"},
		{"TsRewriteQuery", sel("ts_rewrite('a'::tsquery, 'SELECT ''a''::tsquery, ''b''::tsquery') IS NOT NULL"), pgUpdate, "calls ts_rewrite(tsquery,text)"},
		{"XPath", sel("xpath('/a/text()', '<a>x</a>'::xml) IS NOT NULL"), pgUpdate, ""},
		{"SetToDefault", pgSelect, "UPDATE OutboxMessages SET Id = DEFAULT WHERE Id = :id", "sets a column to its DEFAULT"},
		{"Recursive", "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c LIMIT 1", pgUpdate, "recursive WITH"},
		{"PositionalParameter", sel("Id > ?"), pgUpdate, "a positional parameter ?"},
		{"UnknownParameter", sel("LockedBy <> :secret"), pgUpdate, "uses :secret"},
		{"IDInSelect", sel("Id = :id"), pgUpdate, "uses :id"},
		{"NotInteger", "SELECT Payload FROM OutboxMessages LIMIT 1", pgUpdate, "it selects a text"},
		{"TwoColumns", "SELECT Id, Status FROM OutboxMessages LIMIT 1", pgUpdate, "one column"},
		{"SelectAsUpdate", pgSelect, pgSelect, "PostgreSQL parses it as SELECT"},
		{"UpdateAsSelect", "UPDATE OutboxMessages SET LockedBy = :worker WHERE Id = 0", pgUpdate, "PostgreSQL parses it as UPDATE"},
		{"SlowOnFourRows", sel("(SELECT count(*) FROM generate_series(1, 20000) a, generate_series(1, 20000) b) > 0"), pgUpdate, "took longer than 2s"},
		{"SortsAGigabyte", "SELECT count(*) FROM (SELECT repeat('x', 8000000) || g AS b FROM generate_series(1, 127) g GROUP BY b) s", pgUpdate, "first statement: "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := r.CheckSlotFile(ctx, SlotFile{Slot: ClaimSlot, Texts: []string{tt.select_, tt.update}})
			var cfe *SlotFileError
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.want != "" && (!errors.As(err, &cfe) || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("err = %v, want a refusal saying %q", err, tt.want)
			}
			if after := pgtest.ServerState(t, url, victim); after != before {
				t.Errorf("the server changed:\n%s", lineDiffs(before, after))
			}
		})
	}
}

// TestPostgresConfinesWithoutTheCheck: confinement does not rest on the
// check. Run as the grader role in its database with no check at all,
// the statements the check refuses change nothing outside that database.
func TestPostgresConfinesWithoutTheCheck(t *testing.T) {
	t.Parallel()
	url, victim, r := graderSandbox(t)
	ctx := context.Background()
	conn := graderConn(t, r, "run")
	if _, err := conn.Exec(ctx, postgresDDL(PaymentsOutbox.SQL)+";"+postgresDDL(OutboxLeasing.SQL)+";"+claimCheckRows); err != nil {
		t.Fatal(err)
	}
	var adminPID int
	if err := conn.QueryRow(ctx, "SELECT 0").Scan(&adminPID); err != nil {
		t.Fatal(err)
	}
	before := pgtest.ServerState(t, url, victim)
	for _, q := range []string{
		"SELECT nextval('outboxmessages_id_seq')",
		"SELECT setval('outboxmessages_id_seq', 1000)",
		"SELECT nextval('" + victim + ".s')",
		"SELECT lo_from_bytea(0, 'x')",
		"SELECT lo_import('/etc/passwd')",
		"SELECT set_config('search_path', 'public', false)",
		"SELECT pg_advisory_lock(42)",
		fmt.Sprintf("SELECT pg_try_advisory_lock(%d, 1)", graderLockSpace),
		"SELECT pg_notify('outbox', 'x')",
		"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename <> current_user",
		"CREATE EXTENSION dblink",
		"INSERT INTO " + victim + ".t VALUES ('planted')",
		"SELECT v FROM postgres." + victim + ".t",
		"WITH gone AS (DELETE FROM Payments RETURNING Id) SELECT count(*) FROM gone",
		"COPY (SELECT 1) TO PROGRAM 'true'",
		"DO 'BEGIN PERFORM lo_from_bytea(0, ''y''); END'",
	} {
		_, _ = conn.Exec(ctx, q) // refused or not: what counts is what changed
		if after := pgtest.ServerState(t, url, victim); after != before {
			t.Errorf("%s changed the server:\n%s", q, lineDiffs(before, after))
		}
	}
}

// lineDiffs lists the lines of before missing from after (-) and the
// lines of after missing from before (+).
func lineDiffs(before, after string) string {
	in := func(s, line string) bool {
		for _, l := range strings.Split(s, "\n") {
			if l == line {
				return true
			}
		}
		return false
	}
	var out []string
	for _, l := range strings.Split(before, "\n") {
		if !in(after, l) {
			out = append(out, "- "+l)
		}
	}
	for _, l := range strings.Split(after, "\n") {
		if !in(before, l) {
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out, "\n")
}

// graderConn is a connection as r to schema, created in r's database and
// granted to r, closed when t ends.
func graderConn(t *testing.T, r *GraderRole, schema string) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	if err := CreateSchema(ctx, r.AdminURL(), schema, Config{}); err != nil {
		t.Fatal(err)
	}
	if err := r.GrantSchema(ctx, schema); err != nil {
		t.Fatal(err)
	}
	pc, err := postgresConfig(r.URL(), schema)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.ConnectConfig(ctx, pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(ctx) })
	return conn
}

// graderSandbox is the test server at url, a victim schema on it for a
// hostile file to aim at, and a grader role with its own database, dropped
// when t ends.
func graderSandbox(t *testing.T) (url, victim string, r *GraderRole) {
	t.Helper()
	url = pgtest.URL(t)
	victim = pgtest.VictimSchema(t, url)
	r, err := CreateGraderRole(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Drop(context.Background(), false) })
	return url, victim, r
}
