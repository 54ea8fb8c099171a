package scenarios

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/store"
)

// TestNoClaimChecksCanFail feeds the "before" scenario's own measurement a
// run that went wrong in ways no variant produces: one worker loaded and
// processed only five messages and stored every outcome the wrong way round.
// The checks that no variant breaks must fail.
func TestNoClaimChecksCanFail(t *testing.T) {
	ctx := context.Background()
	d := newDay15("")
	db, err := openWorker(ctx, filepath.Join(t.TempDir(), "lab.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Migrate(ctx, store.PaymentsOutbox); err != nil {
		t.Fatal(err)
	}
	if err := d.seed(ctx, db); err != nil {
		t.Fatal(err)
	}
	msgs, err := db.LoadPending(ctx)
	if err != nil {
		t.Fatal(err)
	}
	msgs = msgs[:5]
	d.recordLoad(workerA, msgs)
	d.recordLoad(workerB, msgs)
	for _, m := range msgs {
		o := d.process(workerA, m.ID, m.AggregateKey)
		if o.Status == "Paid" {
			o = store.Outcome{Key: o.Key, Status: "Failed"}
		} else {
			o = store.Outcome{Key: o.Key, Status: "Paid", TransactionID: "TXN-WRONG"}
		}
		if _, err := db.CompleteUnguarded(ctx, m.ID, o, d.clk.Now()); err != nil {
			t.Fatal(err)
		}
	}

	r := &lab.Result{}
	if err := d.audit(ctx, db, r); err != nil {
		t.Fatal(err)
	}
	r.SetMetric("loaded_a", 5)
	r.SetMetric("loaded_b", 5)
	want := map[string]float64{
		"loaded_a": 6, "loaded_b": 6, "processing_attempts": 12, "status_checks": 12, "unique_messages": 6,
		"processed_more_than_once": 6, "outbox_processed": 6, "outbox_pending": 0, "paid": 4, "failed": 2, "duplicate_rows": 0,
	}
	expectDocumented(r, competingWorkersNoClaim.Checks, want)
	failed := r.FailedChecks()
	for _, name := range []string{"loaded_a", "unique_messages", "outbox_processed", "outbox_pending", "paid", "failed"} {
		if !slices.Contains(failed, name) {
			t.Errorf("check %s did not fail; failed: %v", name, failed)
		}
	}
}

// TestOwnershipViolations checks the ledger-based detector on hand-made
// ledgers: a claim over a live foreign lease or of a finalized message
// counts; a claim after expiry or after finalization-free expiry does not.
func TestOwnershipViolations(t *testing.T) {
	tests := []struct {
		name   string
		claims []claimEntry
		finals []finalEntry
		want   int
	}{
		{"OneOwner", []claimEntry{{seq: 1, at: "09:00:00.000", worker: workerA, id: 1, until: "09:00:00.500"}}, nil, 0},
		{"StolenLiveLease", []claimEntry{
			{seq: 1, at: "09:00:00.000", worker: workerA, id: 1, until: "09:00:00.500"},
			{seq: 2, at: "09:00:00.100", worker: workerB, id: 1, until: "09:00:00.600"},
		}, nil, 1},
		{"ReclaimedAfterExpiry", []claimEntry{
			{seq: 1, at: "09:00:00.000", worker: workerA, id: 1, until: "09:00:00.500"},
			{seq: 2, at: "09:00:00.600", worker: workerB, id: 1, until: "09:00:01.100"},
		}, nil, 0},
		{"ClaimedAfterFinalized", []claimEntry{
			{seq: 1, at: "09:00:00.000", worker: workerA, id: 1, until: "09:00:00.500"},
			{seq: 3, at: "09:00:00.100", worker: workerB, id: 1, until: "09:00:00.600"},
		}, []finalEntry{{seq: 2, worker: workerA, id: 1, committed: true}}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDay15("")
			for _, c := range tt.claims {
				c.outcome = store.Claimed
				d.claims = append(d.claims, c)
			}
			d.finals = tt.finals
			if got := d.ownershipViolations(); got != tt.want {
				t.Fatalf("violations = %d, want %d", got, tt.want)
			}
		})
	}
}
