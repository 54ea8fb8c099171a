package session23clocks

import (
	"context"
	"testing"
	"time"

	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/lesson/lessontest"
)

// TestSession23Figures pins the figures LESSONS.md gives, as designed and
// under each variant, and the ones behind them: a variant moves only its
// own part's figures.
func TestSession23Figures(t *testing.T) {
	t.Parallel()
	lesson := map[string]float64{"live_lease_claims": 0, "work_after_lease_end_ms": 0, "e1_processing_attempts": 1,
		"ack_failures_database_error": 1, "ack_failures_lease_lost": 2, "expired_ack_rows": 0, "acks_retried_after_outage": 1, "duplicate_sends": 0,
		"race_trials": 200, "race_both_won": 0, "race_claim_won": 200, "race_renewal_won": 0, "race_neither_won": 0}
	with := func(changes map[string]float64) map[string]float64 {
		out := map[string]float64{}
		for k, v := range lesson {
			out[k] = v
		}
		for k, v := range changes {
			out[k] = v
		}
		return out
	}
	tests := []struct {
		variant string
		want    map[string]float64
	}{
		{"", lesson},
		{variantWorkerClockLeases, with(map[string]float64{"live_lease_claims": 1, "work_after_lease_end_ms": 200, "e1_processing_attempts": 2})},
		{variantOutageAsLeaseLoss, with(map[string]float64{"ack_failures_database_error": 0, "ack_failures_lease_lost": 3,
			"acks_retried_after_outage": 0, "duplicate_sends": 1})},
	}
	for _, tt := range tests {
		t.Run("variant="+tt.variant, func(t *testing.T) {
			t.Parallel()
			r := lessontest.Must(t, &Lesson, tt.variant)
			for key, want := range tt.want {
				if got, ok := r.Metric(key); !ok || got != want {
					t.Errorf("%s = %v (measured %v), want %v", key, got, ok, want)
				}
			}
		})
	}
	t.Run("variant="+s23RenewByEventID, func(t *testing.T) {
		t.Parallel()
		r := lessontest.Must(t, &Lesson, s23RenewByEventID)
		both, _ := r.Metric("race_both_won")
		claims, _ := r.Metric("race_claim_won")
		renewals, _ := r.Metric("race_renewal_won")
		// A renewal that commits first finds the lease over; one that
		// commits after the claim extends the claimer's lease.
		if both == 0 || renewals != 0 || both+claims != 200 {
			t.Errorf("both won %v, the claim alone %v, the renewal alone %v: want both above 0, the renewal alone never", both, claims, renewals)
		}
	})
}

// TestSession23SkewFlags: the skews are options; a fast clock too close to
// the database's to pass Worker-S's stored lease end hides the live-lease
// claim, and the variant still fails on the work past the lease end.
func TestSession23SkewFlags(t *testing.T) {
	t.Parallel()
	opts := lesson.DefaultOptions()
	opts.TempRoot, opts.SkewFast = t.TempDir(), 50*time.Millisecond
	r, err := lesson.Execute(context.Background(), &Lesson, variantWorkerClockLeases, opts, false)
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]float64{"live_lease_claims": 0, "e1_processing_attempts": 1, "work_after_lease_end_ms": 200} {
		if got, _ := r.Metric(key); got != want {
			t.Errorf("with Worker-F 50 ms fast: %s = %v, want %v", key, got, want)
		}
	}
	lessontest.AssertFails(t, r, "work_after_lease_end_ms")
}
