package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/outboxlab/outboxlab/store"
	"github.com/outboxlab/outboxlab/store/storetest"
)

// programSandbox is the Day 15 challenges' sandbox.
var programSandbox = store.ProgramSandbox{Tables: []string{"Payments", "OutboxMessages"}}

// openProgram opens a Day 15 database with its audit and a program's
// connection to it.
func openProgram(t *testing.T) *store.DB {
	t.Helper()
	_, path := storetest.Fresh(t, store.DefaultConfig, store.PaymentsOutbox, store.OutboxLeasing, store.LabAudit, store.AuditDay15)
	cfg := store.DefaultConfig
	cfg.Program = &programSandbox
	return storetest.Open(t, path, cfg)
}

func TestProgramSandbox(t *testing.T) {
	ctx := context.Background()
	db := openProgram(t)
	seed, err := db.BeginProgram(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := seed.Exec(ctx, `INSERT INTO OutboxMessages (MessageType, AggregateKey, Payload, CreatedAtUtc) VALUES ('PaymentCreated', 'PAY-1', '{}', 't0')`, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := seed.Commit(ctx, "seed", "t0", 1); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, sql string
		refused   bool
	}{
		{"read a challenge table", "SELECT Id, Status FROM OutboxMessages", false},
		{"update it", "UPDATE OutboxMessages SET Status = 'Processing', LockedBy = 'me' WHERE Id = 1", false},
		{"read the lab's audit", "SELECT * FROM lab_audit", true},
		{"write the lab's audit", "INSERT INTO lab_audit (tbl, op, row_key) VALUES ('x', 'y', 'z')", true},
		{"read the schema", "SELECT sql FROM sqlite_master", true},
		{"PRAGMA", "PRAGMA journal_mode", true},
		{"ATTACH", "ATTACH DATABASE 'other.db' AS other", true},
		{"DDL", "CREATE TABLE mine (x)", true},
		{"drop a trigger", "DROP TRIGGER lab_audit_outbox_update", true},
		{"a transaction statement", "COMMIT", true},
		{"load_extension", "SELECT load_extension('x')", true},
		{"a recursive query of its tables", "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3) SELECT i FROM n", false},
		// A lab statement's text sent by a program gets no lab rights.
		{"the lab's read of the audit", store.ReadAudit.SQL, true},
		{"the lab's naming of the audit", store.TagAudit.SQL, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tx, err := db.BeginProgram(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			_, _, err = tx.Query(ctx, tt.sql, nil)
			var se *store.SandboxError
			if got := errors.As(err, &se); got != tt.refused {
				t.Fatalf("%s: refused %v (err %v), want refused %v", tt.sql, got, err, tt.refused)
			}
		})
	}
}

func TestProgramAuditNamesTheCommitter(t *testing.T) {
	ctx := context.Background()
	db := openProgram(t)
	for _, step := range []struct{ actor, sql string }{
		{"checkout", `INSERT INTO OutboxMessages (MessageType, AggregateKey, Payload, CreatedAtUtc) VALUES ('PaymentCreated', 'PAY-1', '{}', 't0')`},
		{"Relay-A", "UPDATE OutboxMessages SET Status = 'Processing', LockedBy = 'Relay-A', LockedUntilUtc = 't2' WHERE Id = 1"},
	} {
		tx, err := db.BeginProgram(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := tx.Exec(ctx, step.sql, nil); err != nil || n != 1 {
			t.Fatalf("%s: %d rows, %v", step.sql, n, err)
		}
		changes, err := tx.Commit(ctx, step.actor, "t1", 2)
		if err != nil || len(changes) != 1 || changes[0].Actor != step.actor {
			t.Fatalf("%s committed %+v, %v; want its one change named %s", step.sql, changes, err, step.actor)
		}
	}
	rolled, _ := db.BeginProgram(ctx)
	if _, err := rolled.Exec(ctx, "UPDATE OutboxMessages SET Status = 'Processed'", nil); err != nil {
		t.Fatal(err)
	}
	rolled.Rollback()
	got, err := db.Audit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Actor != "checkout" || got[1].Actor != "Relay-A" || got[1].OldState != "Pending" ||
		got[1].NewState != "Processing" || got[1].NewOwner != "Relay-A" || got[1].Key != "PAY-1" {
		t.Fatalf("audit = %+v, want checkout's insert then Relay-A's claim, and no trace of the rolled back update", got)
	}
}
