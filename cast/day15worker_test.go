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

// TestDoubleClaim checks the roles a lesson casts from the claim ledger:
// the first message of the phase that both workers claimed, and the
// workers in the ledger's order; none when no message was claimed twice
// by different workers, or only in another phase.
func TestDoubleClaim(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name               string
		claims             []claimEntry
		key, first, second string
		ok                 bool
	}{
		{"NoDouble", []claimEntry{
			{seq: 1, worker: WorkerA, phase: "concurrent", id: 1, key: "PAY-001", outcome: store.Claimed},
			{seq: 2, worker: WorkerB, phase: "concurrent", id: 2, key: "PAY-002", outcome: store.Claimed},
		}, "", "", "", false},
		{"SameWorkerTwice", []claimEntry{
			{seq: 1, worker: WorkerA, phase: "concurrent", id: 1, key: "PAY-001", outcome: store.Claimed},
			{seq: 2, worker: WorkerA, phase: "concurrent", id: 1, key: "PAY-001", outcome: store.Claimed},
		}, "", "", "", false},
		{"OtherPhase", []claimEntry{
			{seq: 1, worker: WorkerA, phase: "recovery", id: 1, key: "PAY-001", outcome: store.Claimed},
			{seq: 2, worker: WorkerB, phase: "recovery", id: 1, key: "PAY-001", outcome: store.Claimed},
		}, "", "", "", false},
		{"BlockedIsNoClaim", []claimEntry{
			{seq: 1, worker: WorkerA, phase: "concurrent", id: 1, key: "PAY-001", outcome: store.Claimed},
			{seq: 2, worker: WorkerB, phase: "concurrent", id: 1, key: "PAY-001", outcome: store.Blocked},
		}, "", "", "", false},
		{"InLedgerOrder", []claimEntry{
			{seq: 3, worker: WorkerA, phase: "concurrent", id: 2, key: "PAY-002", outcome: store.Claimed},
			{seq: 1, worker: WorkerB, phase: "concurrent", id: 2, key: "PAY-002", outcome: store.Claimed},
		}, "PAY-002", WorkerB, WorkerA, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := NewDay15(Day15Mistakes{})
			d.claims = tt.claims
			key, first, second, ok := d.DoubleClaim("concurrent")
			if key != tt.key || first != tt.first || second != tt.second || ok != tt.ok {
				t.Fatalf("DoubleClaim = %q, %q, %q, %v; want %q, %q, %q, %v", key, first, second, ok, tt.key, tt.first, tt.second, tt.ok)
			}
		})
	}
}

// TestLoadOrder checks the loaders a lesson casts from the loads ledger:
// in the order their loads finished, each once, with what its last load
// returned.
func TestLoadOrder(t *testing.T) {
	t.Parallel()
	d := NewDay15(Day15Mistakes{})
	d.loads = []loadEntry{
		{order: 2, worker: WorkerA, keys: []string{"PAY-001", "PAY-002"}},
		{order: 1, worker: WorkerB, keys: []string{"PAY-001"}},
		{order: 3, worker: WorkerA, keys: nil},
	}
	if got := d.LoadOrder(); len(got) != 2 || got[0] != WorkerB || got[1] != WorkerA {
		t.Errorf("LoadOrder = %v, want [%s %s]", got, WorkerB, WorkerA)
	}
	tests := []struct {
		worker string
		n      int
		ok     bool
	}{{WorkerA, 0, true}, {WorkerB, 1, true}, {Checkout, 0, false}}
	for _, tt := range tests {
		if n, ok := d.LoadedBy(tt.worker); n != tt.n || ok != tt.ok {
			t.Errorf("LoadedBy(%s) = %d, %v; want %d, %v", tt.worker, n, ok, tt.n, tt.ok)
		}
	}
}
