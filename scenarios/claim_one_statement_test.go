package scenarios

import (
	"context"
	"strings"
	"testing"

	"github.com/outboxlab/outboxlab/internal/pgtest"
	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/store"
)

// oneStatementClaim is the claim in one statement, as `describe` shows
// the production form, without PostgreSQL's row lock: an UPDATE of the
// oldest claimable message that returns its Id.
const oneStatementClaim = `UPDATE OutboxMessages
SET Status = 'Processing', LockedBy = :worker, LockedUntilUtc = :until
WHERE Id = (SELECT Id FROM OutboxMessages
            WHERE (Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now))
            ORDER BY CreatedAtUtc, Id
            LIMIT 1%s)
RETURNING Id`

// TestClaimInOneStatement: the claim slot takes the one-statement claim
// (UPDATE ... WHERE Id = (SELECT ...) RETURNING Id) as well as the
// lesson's two, and the lesson's checks grade it: the production form
// holds on both engines, and the classic mistakes written in one
// statement fail by name.
func TestClaimInOneStatement(t *testing.T) {
	t.Parallel()
	x, err := LookupExercise("claim")
	if err != nil {
		t.Fatal(err)
	}
	production := strings.Replace(oneStatementClaim, "%s", "", 1)
	for _, tt := range []struct {
		name, db, text string
		fails          []string
	}{
		{name: "production form", text: production},
		{name: "production form on PostgreSQL", db: "postgres",
			text: strings.Replace(oneStatementClaim, "%s", "\n            FOR UPDATE SKIP LOCKED", 1)},
		// Without a row lock PostgreSQL's READ COMMITTED lets the second
		// claim, which waited on the first's row, re-check only Id =
		// (its subquery's first answer) and take the same message.
		{name: "production form without SKIP LOCKED on PostgreSQL", db: "postgres", text: production,
			fails: []string{"processing_attempts", "processed_more_than_once", "status_checks", "claims_of_owned_messages", "claim_lock_waits"}},
		{name: "pending only", text: strings.Replace(production, "(Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now))",
			"Status = 'Pending'", 1), fails: []string{"processing_attempts", "unique_messages", "status_checks", "paid",
			"outbox_processed", "outbox_processing", "recovery_ok"}},
		// Without LIMIT 1 the claim takes every claimable message: each
		// run is an overreach, rolled back, and nothing is ever processed.
		{name: "every claimable message", text: strings.NewReplacer("WHERE Id = (", "WHERE Id IN (", "\n            LIMIT 1", "").Replace(production),
			fails: []string{"processing_attempts", "unique_messages", "status_checks", "paid", "failed", "outbox_processed",
				"outbox_pending", "recovery_ok", "claims_bounded"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db := ""
			if tt.db == "postgres" {
				db = pgtest.URL(t)
			}
			f, err := store.ParseSlotFile(x.Slot(), tt.text)
			if err != nil {
				t.Fatal(err)
			}
			if db == "" {
				if err := store.CheckSlotFile(context.Background(), f); err != nil {
					t.Fatal(err)
				}
			}
			opts := lesson.DefaultOptions()
			opts.TempRoot, opts.Database = t.TempDir(), db
			opts.Submission = x.Submit("claim.sql", f)
			r, err := lesson.Execute(context.Background(), x.Scenario(), "", opts, false)
			if err != nil {
				t.Fatal(err)
			}
			if got := r.FailedChecks(); !sameSet(got, tt.fails) {
				t.Errorf("failed %v, want %v", got, tt.fails)
			}
		})
	}
}
