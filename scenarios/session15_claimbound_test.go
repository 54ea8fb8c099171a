package scenarios

import (
	"context"
	"slices"
	"testing"

	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/store"
)

// TestOutboxLeasingClaimsBounded: a claim file whose UPDATE changes a row
// without taking it, or changes every row, ends as a report with failed,
// named checks rather than a hang or an error.
func TestOutboxLeasingClaimsBounded(t *testing.T) {
	t.Parallel()
	const pick = "SELECT Id FROM OutboxMessages WHERE Status = 'Pending' ORDER BY CreatedAtUtc, Id LIMIT 1"
	tests := []struct {
		name, update string
		fails        []string
	}{
		{"SelfAssign", "UPDATE OutboxMessages SET LockedBy = LockedBy WHERE Id = :id", []string{"claims_bounded", "recovery_ok"}},
		{"EveryRow", "UPDATE OutboxMessages SET Status = 'Processing', LockedBy = :worker, LockedUntilUtc = :until WHERE :id > 0", []string{"recovery_ok"}},
	}
	sc, err := Lookup("session-15-outbox-leasing")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			opts := lesson.DefaultOptions()
			opts.TempRoot = t.TempDir()
			claim, err := LookupExercise("claim")
			if err != nil {
				t.Fatal(err)
			}
			opts.Submission = claim.Submit(tt.name+".sql", store.SlotFile{Slot: claim.Slot(), Texts: []string{pick, tt.update}})
			res, err := lesson.Execute(context.Background(), sc, "", opts, false)
			if err != nil {
				t.Fatalf("the run ended in an error, want a report: %v", err)
			}
			failed := res.FailedChecks()
			for _, name := range tt.fails {
				if !slices.Contains(failed, name) {
					t.Errorf("failed checks %v lack %s", failed, name)
				}
			}
		})
	}
}
