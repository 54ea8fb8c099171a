package cast

import (
	"testing"

	"github.com/outboxlab/outboxlab/store"
)

// TestOwnershipViolations checks the ledger-based detector on hand-made
// ledgers: a claim over a live foreign lease or of a finalized message
// counts; a claim after expiry or after finalization-free expiry does not.
func TestOwnershipViolations(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		claims []claimEntry
		finals []finalEntry
		want   int
	}{
		{"OneOwner", []claimEntry{{seq: 1, at: "09:00:00.000", worker: WorkerA, id: 1, until: "09:00:00.500"}}, nil, 0},
		{"StolenLiveLease", []claimEntry{
			{seq: 1, at: "09:00:00.000", worker: WorkerA, id: 1, until: "09:00:00.500"},
			{seq: 2, at: "09:00:00.100", worker: WorkerB, id: 1, until: "09:00:00.600"},
		}, nil, 1},
		{"ReclaimedAfterExpiry", []claimEntry{
			{seq: 1, at: "09:00:00.000", worker: WorkerA, id: 1, until: "09:00:00.500"},
			{seq: 2, at: "09:00:00.600", worker: WorkerB, id: 1, until: "09:00:01.100"},
		}, nil, 0},
		{"ClaimedAfterFinalized", []claimEntry{
			{seq: 1, at: "09:00:00.000", worker: WorkerA, id: 1, until: "09:00:00.500"},
			{seq: 3, at: "09:00:00.100", worker: WorkerB, id: 1, until: "09:00:00.600"},
		}, []finalEntry{{seq: 2, worker: WorkerA, id: 1, committed: true}}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := NewDay15(Day15Mistakes{})
			for _, c := range tt.claims {
				c.outcome = store.Claimed
				d.claims = append(d.claims, c)
			}
			d.finals = tt.finals
			if got := d.OwnershipViolations(); got != tt.want {
				t.Fatalf("violations = %d, want %d", got, tt.want)
			}
		})
	}
}
