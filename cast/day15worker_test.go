package cast

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/outboxlab/outboxlab/store"
)

// TestClaimsOfOwnedMessages checks the ledger-based detector on hand-made
// ledgers: a claim over a live foreign lease or of a finalized message
// counts; a claim after expiry or after finalization-free expiry does not.
func TestClaimsOfOwnedMessages(t *testing.T) {
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
			if got := d.ClaimsOfOwnedMessages(); got != tt.want {
				t.Fatalf("claims of owned messages = %d, want %d", got, tt.want)
			}
		})
	}
}

// TestOwnershipViolations checks Day 15's metric on hand-made ledgers: a
// finalization that committed while another worker held the latest claim
// counts; the owner's own, and a rejected one, do not.
func TestOwnershipViolations(t *testing.T) {
	t.Parallel()
	claims := []claimEntry{
		{seq: 1, worker: WorkerA, id: 1, outcome: store.Claimed},
		{seq: 2, worker: WorkerB, id: 1, outcome: store.Claimed},
	}
	tests := []struct {
		name   string
		finals []finalEntry
		want   int
	}{
		{"OwnerFinalizes", []finalEntry{{seq: 3, worker: WorkerB, id: 1, committed: true}}, 0},
		{"StaleRejected", []finalEntry{{seq: 3, worker: WorkerB, id: 1, committed: true}, {seq: 4, worker: WorkerA, id: 1}}, 0},
		{"StaleCommitted", []finalEntry{{seq: 3, worker: WorkerB, id: 1, committed: true}, {seq: 4, worker: WorkerA, id: 1, committed: true}}, 1},
		{"BeforeTheReclaim", []finalEntry{{seq: 1, worker: WorkerA, id: 1, committed: true}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := NewDay15(Day15Mistakes{})
			d.claims = claims
			d.finals = tt.finals
			if got := d.OwnershipViolations(); got != tt.want {
				t.Fatalf("violations = %d, want %d", got, tt.want)
			}
		})
	}
}

// TestFakeSuccesses compares payments with the provider's own record: a
// worker-invented transaction id is as fake as a dropped one.
func TestFakeSuccesses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "lab.db"), store.DefaultConfig)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Migrate(ctx, store.PaymentsOutbox, store.OutboxLeasing); err != nil {
		t.Fatal(err)
	}
	d := NewDay15(Day15Mistakes{})
	d.Payments = SeedPayments[:3]
	if err := d.Seed(ctx, db); err != nil {
		t.Fatal(err)
	}
	out := store.NewOutbox(db, store.OutboxLesson)
	msgs, err := out.Messages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	assigned, _ := d.Provider.AssignedID("PAY-001")
	outcomes := []store.Outcome{
		{Key: "PAY-001", Status: "Paid", TransactionID: assigned}, // honest
		{Key: "PAY-002", Status: "Paid", TransactionID: "TXN-INVENTED"},
		{Key: "PAY-003", Status: "Failed", TransactionID: "TXN-0003"},
	}
	for i, o := range outcomes {
		if _, err := store.NewOutbox(db, store.OutboxSQL{Finalize: store.CompleteByID, ApplyOutcome: store.OutboxLesson.ApplyOutcome}).Finalize(ctx, msgs[i].ID, WorkerA, o, LessonStart); err != nil {
			t.Fatal(err)
		}
	}
	fakes, err := d.fakeSuccesses(ctx, db)
	if err != nil || fakes != 2 {
		t.Fatalf("fake successes = %d, %v; want 2 (an invented id and a Failed payment with an id)", fakes, err)
	}
}

// TestLoadedBeforeProcessing judges the barrier on the ledgers' own order,
// with processing counted from its start (before the provider call): a
// worker that began processing before the other had loaded breaks it.
func TestLoadedBeforeProcessing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		loads    []loadEntry
		attempts []attemptEntry
		want     bool
	}{
		{"BothLoadedFirst", []loadEntry{{worker: WorkerA, order: 1}, {worker: WorkerB, order: 2}}, []attemptEntry{{start: 3}, {start: 4}}, true},
		{"ProcessingBeganBetweenTheLoads", []loadEntry{{worker: WorkerA, order: 1}, {worker: WorkerB, order: 3}}, []attemptEntry{{start: 2}, {start: 4}}, false},
		{"OneNeverLoaded", []loadEntry{{worker: WorkerA, order: 1}}, []attemptEntry{{start: 2}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := NewDay15(Day15Mistakes{})
			d.loads, d.attempts = tt.loads, tt.attempts
			if got := d.LoadedBeforeProcessing(WorkerA, WorkerB); got != tt.want {
				t.Fatalf("LoadedBeforeProcessing = %v, want %v", got, tt.want)
			}
		})
	}
}
