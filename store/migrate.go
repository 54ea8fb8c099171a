package store

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
)

// schema/postgres holds a file's PostgreSQL text where the SQLite one does
// not translate by [postgresDDL] alone (the audit's triggers).
//
//go:embed schema/*.sql schema/postgres/*.sql
var schemaFiles embed.FS

// Migration is one embedded .sql file of the lab's schema.
type Migration struct {
	Name string // file name under store/schema
	SQL  string
}

func mustMigration(name string) Migration {
	b, err := schemaFiles.ReadFile("schema/" + name)
	if err != nil {
		panic("store: missing embedded schema " + name) // a build mistake, caught by every test
	}
	pg := postgresDDL(string(b))
	if own, err := schemaFiles.ReadFile("schema/postgres/" + name); err == nil {
		pg = string(own)
	}
	register(Stmt{Name: "schema: " + name, SQL: string(b), Postgres: pg, Audit: true})
	return Migration{Name: name, SQL: string(b)}
}

// The lessons' schema steps, in the order a course applies them.
var (
	// PaymentsOutbox is Day 14's schema: Payments and OutboxMessages.
	PaymentsOutbox = mustMigration("014_payments_outbox.sql")
	// OutboxLeasing is Day 15's migration: the LockedBy and LockedUntilUtc lease columns.
	OutboxLeasing = mustMigration("015_outbox_leasing.sql")
	// OutboxFencing is session 16's migration on OutboxMessages: the ClaimToken fencing token.
	OutboxFencing = mustMigration("017_outbox_fencing.sql")
	// ClaimsAtScale is session 21's migration: the unprocessed-messages index of the indexed claim.
	ClaimsAtScale = mustMigration("021_claims_at_scale.sql")
)

// Migrate applies the migrations in order, all in one transaction.
func (db *DB) Migrate(ctx context.Context, steps ...Migration) error {
	_, err := db.InTx(ctx, func(tx *sql.Tx) error {
		for _, m := range steps {
			if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
				return fmt.Errorf("store: migrate %s: %w", m.Name, err)
			}
		}
		return nil
	})
	return err
}

// Stmt is the catalogue's statement of m's text, by which the statement
// ledger names m when it runs (Name "" for text the catalogue lacks).
func (m Migration) Stmt() Stmt {
	if s, ok := catalogue[m.SQL]; ok {
		return *s
	}
	return Stmt{SQL: m.SQL}
}
