package scenarios

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/store"
)

// TestNoClaimChecksCanFail feeds the "before" scenario's own measurement a
// run that went wrong in ways no variant produces: one worker loaded and
// processed only five messages and stored every outcome the wrong way round.
// The checks that no variant breaks must fail.
func TestNoClaimChecksCanFail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := cast.NewDay15(cast.Day15Mistakes{})
	env := &Env{Ledger: &store.Ledger{}}
	db, err := env.Open(ctx, filepath.Join(t.TempDir(), "lab.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Migrate(ctx, store.PaymentsOutbox); err != nil {
		t.Fatal(err)
	}
	if err := d.Seed(ctx, db); err != nil {
		t.Fatal(err)
	}
	outbox := store.NewOutbox(db, noClaimSQL())
	msgs, err := outbox.LoadPending(ctx)
	if err != nil {
		t.Fatal(err)
	}
	msgs = msgs[:5]
	d.RecordLoad(cast.WorkerA, msgs)
	d.RecordLoad(cast.WorkerB, msgs)
	for _, m := range msgs {
		o := d.Process(cast.WorkerA, m.ID, m.AggregateKey)
		if o.Status == "Paid" {
			o = store.Outcome{Key: o.Key, Status: "Failed"}
		} else {
			o = store.Outcome{Key: o.Key, Status: "Paid", TransactionID: "TXN-WRONG"}
		}
		if _, err := outbox.Finalize(ctx, m.ID, cast.WorkerA, o, d.Clock.Now()); err != nil {
			t.Fatal(err)
		}
	}

	r := &lab.Result{}
	if err := d.Audit(ctx, db, r); err != nil {
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

// TestSession15StatementSets: each variant's statement set is the lesson's
// with exactly the statements of its mistake replaced, and each mistake
// names the lesson statement it replaces.
func TestSession15StatementSets(t *testing.T) {
	t.Parallel()
	tests := []struct {
		variant string
		got     store.OutboxSQL
		changed []store.Stmt // the mistakes, in SelectNext, Update, Finalize order
		split   bool
	}{
		{"", leasingSQL(""), nil, false},
		{variantPermanentLock, leasingSQL(variantPermanentLock), []store.Stmt{store.ClaimSelectPendingOnly, store.ClaimUpdatePendingOnly}, false},
		{variantUnguardedClaim, leasingSQL(variantUnguardedClaim), []store.Stmt{store.ClaimUpdateByID}, true},
		{variantPaidWithoutTxn, leasingSQL(variantPaidWithoutTxn), nil, false},
		{"no-claim", noClaimSQL(), []store.Stmt{store.CompleteByID}, false},
	}
	for _, tt := range tests {
		t.Run("Variant="+tt.variant, func(t *testing.T) {
			lesson := store.OutboxLesson
			var changed []store.Stmt
			pairs := [][2]store.Stmt{
				{lesson.Claim.SelectNext, tt.got.Claim.SelectNext},
				{lesson.Claim.Update, tt.got.Claim.Update},
				{lesson.Finalize, tt.got.Finalize},
				{lesson.ApplyOutcome, tt.got.ApplyOutcome},
				{lesson.Load, tt.got.Load},
			}
			for _, p := range pairs {
				if p[0].SQL == p[1].SQL {
					continue
				}
				changed = append(changed, p[1])
				if p[1].Replaces == nil || p[1].Replaces.SQL != p[0].SQL || p[1].Mistake == "" {
					t.Errorf("%q replaces %q without naming it as a mistake", p[1].Name, p[0].Name)
				}
			}
			if len(changed) != len(tt.changed) {
				t.Fatalf("changed %d statements, want %d", len(changed), len(tt.changed))
			}
			for i := range changed {
				if changed[i].SQL != tt.changed[i].SQL {
					t.Errorf("changed %q, want %q", changed[i].Name, tt.changed[i].Name)
				}
			}
			if tt.got.Claim.Split != tt.split {
				t.Errorf("split = %v, want %v", tt.got.Claim.Split, tt.split)
			}
		})
	}
}

// TestCustomClaimNamed: --claim-sql's statements are named for the report.
func TestCustomClaimNamed(t *testing.T) {
	t.Parallel()
	env := &Env{Ledger: &store.Ledger{}, Options: Options{Claim: &CustomClaim{Source: "mine.sql", Select: "-- my select\nSELECT 1", Update: "UPDATE x SET y = 1 WHERE Id = :id"}}}
	c := customClaim(env)
	if c.SelectNext.Name != "your claim: select (from mine.sql)" || c.Update.Name != "your claim: update (from mine.sql)" || c.Split {
		t.Fatalf("claim = %+v", c)
	}
	if c.SelectNext.SQL != "SELECT 1" {
		t.Fatalf("select = %q, want the comment line left out", c.SelectNext.SQL)
	}
}
