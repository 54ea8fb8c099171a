package store

import (
	"context"
	"errors"
	"testing"

	"github.com/outboxlab/outboxlab/internal/pgtest"
)

// TestStillOpenCatchesAnEndedTransaction: a program's statement that ends
// the transaction the lab opened (had one got past the check of its text)
// is the sandbox's refusal, caught by the savepoint after it.
func TestStillOpenCatchesAnEndedTransaction(t *testing.T) {
	url := pgtest.URL(t)
	ctx := context.Background()
	db, err := OpenPostgres(ctx, url, "", Config{Program: &ProgramSandbox{Tables: []string{"outbox_events"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tx, err := db.BeginProgram(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if err := tx.stillOpen(ctx); err != nil {
		t.Fatalf("an open transaction: %v", err)
	}
	if _, err := tx.tx.ExecContext(ctx, "COMMIT"); err != nil { // past the check of the text, as if it had a hole
		t.Fatal(err)
	}
	var se *SandboxError
	if err := tx.stillOpen(ctx); !errors.As(err, &se) {
		t.Fatalf("after COMMIT: %v, want the sandbox's refusal", err)
	}
}
