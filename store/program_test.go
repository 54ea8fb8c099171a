package store_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/outboxlab/outboxlab/internal/pgtest"
	"github.com/outboxlab/outboxlab/store"
	"github.com/outboxlab/outboxlab/store/storetest"
)

// programSandbox is the Day 15 challenges' sandbox.
var programSandbox = store.ProgramSandbox{Tables: []string{"Payments", "OutboxMessages"}}

// programDB is a Day 15 database with its audit, as a challenge's run
// has it: the lab's connection and a program's.
type programDB struct {
	engine           store.Engine
	lab, prg         *store.DB
	adminURL, schema string // on PostgreSQL: the lab's login in the run's database, and the schema
}

// programEngines are the engines a program's tests run on: SQLite, and
// PostgreSQL where the tests have a server.
func programEngines(t *testing.T) []store.Engine {
	if os.Getenv(pgtest.EnvVar) == "" {
		t.Log("the PostgreSQL half skipped: no " + pgtest.EnvVar)
		return []store.Engine{store.SQLite}
	}
	return []store.Engine{store.SQLite, store.Postgres}
}

// openProgram opens a Day 15 database with its audit and a program's
// connection to it: on PostgreSQL, in a grader role's database, the
// program logging in as the role, granted the challenge's tables.
func openProgram(t *testing.T, engine store.Engine) programDB {
	t.Helper()
	steps := []store.Migration{store.PaymentsOutbox, store.OutboxLeasing, store.LabAudit, store.AuditDay15}
	cfg := store.DefaultConfig
	cfg.Program = &programSandbox
	if engine == store.SQLite {
		lab, path := storetest.Fresh(t, store.DefaultConfig, steps...)
		return programDB{engine: engine, lab: lab, prg: storetest.Open(t, path, cfg)}
	}
	ctx := context.Background()
	role, err := store.CreateGraderRole(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = role.Drop(context.Background(), false) })
	schema := "outboxlab_programtest"
	if err := store.CreateSchema(ctx, role.AdminURL(), schema, store.Config{}); err != nil {
		t.Fatal(err)
	}
	lab, err := store.OpenPostgres(ctx, role.AdminURL(), schema, store.DefaultConfig)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lab.Close() })
	if err := lab.Migrate(ctx, steps...); err != nil {
		t.Fatal(err)
	}
	if err := role.GrantProgram(ctx, schema, programSandbox.Tables); err != nil {
		t.Fatal(err)
	}
	prg, err := store.OpenPostgres(ctx, role.URL(), schema, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prg.Close() })
	return programDB{engine: engine, lab: lab, prg: prg, adminURL: role.AdminURL(), schema: schema}
}

// seedMessage is the one message the program tests start from, PAY-1's.
const seedMessage = `INSERT INTO OutboxMessages (MessageType, AggregateKey, Payload, CreatedAtUtc) VALUES ('PaymentCreated', 'PAY-1', '{}', 't0')`

// seed commits seedMessage as a program transaction of actor's, the first.
func (pd programDB) seed(t *testing.T, actor string) {
	t.Helper()
	ctx := context.Background()
	tx, err := pd.prg.BeginProgram(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, seedMessage, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(ctx, pd.lab, actor, "t0", 1); err != nil {
		t.Fatal(err)
	}
}

// TestProgramSandbox: a program's statement may read and write the
// challenge's tables and nothing else, on either engine: on SQLite the
// authorizer refuses the rest, on PostgreSQL the role's rights and the
// lab's check of the text before it runs.
func TestProgramSandbox(t *testing.T) {
	both := []struct {
		name, sql string
		refused   bool
	}{
		{"read a challenge table", "SELECT Id, Status FROM OutboxMessages", false},
		{"update it", "UPDATE OutboxMessages SET Status = 'Processing', LockedBy = 'me' WHERE Id = 1 RETURNING Id", false},
		{"read the lab's audit", "SELECT * FROM lab_audit", true},
		{"write the lab's audit", "INSERT INTO lab_audit (tbl, op, row_key) VALUES ('x', 'y', 'z') RETURNING seq", true},
		{"DDL", "CREATE TABLE mine (x INTEGER)", true},
		{"a transaction statement", "COMMIT", true},
		{"a recursive query of its tables", "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3) SELECT i FROM n", false},
		// A lab statement's text sent by a program gets no lab rights.
		{"the lab's read of the audit", store.ReadAudit.SQL, true},
		{"the lab's naming of the audit", store.TagAudit.SQL, true},
	}
	only := map[store.Engine][]struct {
		name, sql string
		refused   bool
	}{
		store.SQLite: {
			{"read the schema", "SELECT sql FROM sqlite_master", true},
			{"PRAGMA", "PRAGMA journal_mode", true},
			{"ATTACH", "ATTACH DATABASE 'other.db' AS other", true},
			{"drop a trigger", "DROP TRIGGER lab_audit_outbox_update", true},
			{"load_extension", "SELECT load_extension('x')", true},
		},
		store.Postgres: {
			{"a second statement", "SELECT 1; COMMIT", true},
			{"one statement and its semicolon", "SELECT Id FROM OutboxMessages;\n", false},
			{"SET", "SET search_path TO public", true},
			{"a statement behind a nested comment", "/* /* */ SELECT 1 */ COMMIT", true},
			{"a statement in parentheses", "(SELECT Id FROM OutboxMessages)", false},
			{"drop a trigger", "DROP TRIGGER lab_audit_outbox ON OutboxMessages", true},
			{"call the audit's function", "SELECT lab_audit_outbox()", true},
			{"the lab's naming by transaction", store.TagCommitted.SQL, true},
			{"DO", "DO $$ BEGIN COMMIT; END $$", true},
			{"DO without a semicolon", "DO $$ BEGIN END $$", true},
			// PostgreSQL ends a -- comment at a carriage return too: the
			// check of the text refuses it before it runs (the savepoint
			// after it would catch the COMMIT only once it had run).
			{"a statement after a comment's carriage return", "--\rCOMMIT /*\nSELECT */", true},
			{"ALTER ROLE after a comment's carriage return", "--\rALTER ROLE CURRENT_USER SET statement_timeout = 0 /*\nSELECT */", true},
		},
	}
	for _, engine := range programEngines(t) {
		db := openProgram(t, engine)
		ctx := context.Background()
		db.seed(t, "seed")
		for _, tt := range append(slices.Clone(both), only[engine]...) {
			t.Run(string(engine)+"/"+tt.name, func(t *testing.T) {
				tx, err := db.prg.BeginProgram(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer tx.Rollback()
				var params map[string]any
				if strings.Contains(tt.sql, ":actor") { // the lab's naming, forged
					params = map[string]any{"actor": "Worker-B", "at": "t9", "tx": 9, "xid": 1}
				}
				_, _, err = tx.Query(ctx, tt.sql, params)
				var se *store.SandboxError
				if got := errors.As(err, &se); got != tt.refused {
					t.Fatalf("%s: refused %v (err %v), want refused %v", tt.sql, got, err, tt.refused)
				}
				if strings.HasPrefix(tt.sql, "--\r") && !strings.Contains(err.Error(), "a COMMIT statement") && !strings.Contains(err.Error(), "an ALTER statement") {
					t.Errorf("%q was refused by %v, not by the check of its text", tt.sql, err)
				}
			})
		}
	}
}

// TestProgramAuditNamesTheCommitter: a program transaction's commit names
// its changes with the committing instance, and a rolled back one leaves
// no trace, on either engine.
func TestProgramAuditNamesTheCommitter(t *testing.T) {
	for _, engine := range programEngines(t) {
		t.Run(string(engine), func(t *testing.T) { testAuditNamesTheCommitter(t, openProgram(t, engine)) })
	}
}

func testAuditNamesTheCommitter(t *testing.T, pd programDB) {
	ctx := context.Background()
	db := pd.prg
	for _, step := range []struct{ actor, sql string }{
		{"checkout", seedMessage},
		{"Relay-A", "UPDATE OutboxMessages SET Status = 'Processing', LockedBy = 'Relay-A', LockedUntilUtc = 't2' WHERE Id = 1"},
	} {
		tx, err := db.BeginProgram(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := tx.Exec(ctx, step.sql, nil); err != nil || n != 1 {
			t.Fatalf("%s: %d rows, %v", step.sql, n, err)
		}
		changes, err := tx.Commit(ctx, pd.lab, step.actor, "t1", 2)
		if err != nil || len(changes) != 1 || changes[0].Actor != step.actor {
			t.Fatalf("%s committed %+v, %v; want its one change named %s", step.sql, changes, err, step.actor)
		}
	}
	rolled, _ := db.BeginProgram(ctx)
	if _, err := rolled.Exec(ctx, "UPDATE OutboxMessages SET Status = 'Processed'", nil); err != nil {
		t.Fatal(err)
	}
	rolled.Rollback()
	got, err := pd.lab.Audit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Actor != "checkout" || got[1].Actor != "Relay-A" || got[1].OldState != "Pending" ||
		got[1].NewState != "Processing" || got[1].NewOwner != "Relay-A" || got[1].Key != "PAY-1" {
		t.Fatalf("audit = %+v, want checkout's insert then Relay-A's claim, and no trace of the rolled back update", got)
	}
}

// TestProgramAuditNamesOnlyItsTransaction: on PostgreSQL, where the lab
// names a program transaction's changes after its commit, by transaction
// id, a change another transaction left unnamed stays so; and the audit's
// functions search temporary tables last.
func TestProgramAuditNamesOnlyItsTransaction(t *testing.T) {
	if os.Getenv(pgtest.EnvVar) == "" {
		t.Skip("no PostgreSQL: set " + pgtest.EnvVar)
	}
	ctx := context.Background()
	pd := openProgram(t, store.Postgres)
	pd.seed(t, "checkout")
	// Another transaction's change, which nobody names.
	pgtest.Exec(t, pd.adminURL, "SET search_path TO "+pd.schema, "UPDATE OutboxMessages SET Payload = '{\"x\":1}' WHERE Id = 1")
	tx, err := pd.prg.BeginProgram(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "UPDATE OutboxMessages SET Status = 'Processing', LockedBy = 'Relay-A' WHERE Id = 1", nil); err != nil {
		t.Fatal(err)
	}
	changes, err := tx.Commit(ctx, pd.lab, "Relay-A", "t1", 2)
	if err != nil || len(changes) != 1 || changes[0].NewOwner != "Relay-A" {
		t.Fatalf("committed %+v, %v; want Relay-A's one change only", changes, err)
	}
	got, err := pd.lab.Audit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[1].Actor != "" || got[2].Actor != "Relay-A" {
		t.Fatalf("audit = %+v, want checkout's insert, the unnamed update, Relay-A's claim", got)
	}
	for _, config := range pgtest.Strings(t, pd.adminURL, `SELECT coalesce(array_to_string(proconfig, ' '), '') FROM pg_proc p
JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1 AND p.proname LIKE 'lab\_audit\_%'`, pd.schema) {
		if config != "search_path="+pd.schema+", pg_temp" {
			t.Errorf("an audit function's settings are %q, want its search path pinned, pg_temp last", config)
		}
	}
}
