package scenarios

import (
	"context"
	"slices"
	"testing"

	"github.com/outboxlab/outboxlab/store"
)

// TestLeaseRenewalChecksCanFail breaks the session-17 checks no variant
// breaks, each with a deliberately wrong claim or renewal, or a missing step.
func TestLeaseRenewalChecksCanFail(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(ops *renewalOps)
		steps []renewalStep
		want  []string
	}{
		{name: "ClaimNeverSucceeds",
			edit: func(ops *renewalOps) {
				ops.claim = func(ctx context.Context, db *store.DB, worker string, now, until int64) (store.EventClaim, error) {
					return store.EventClaim{Outcome: store.Blocked, EventID: s17EventID}, nil
				}
			},
			want: []string{"step_1_claim_succeeds", "step_7_claim_after_expiry"}},
		{name: "RenewalRefusesEverything",
			edit: func(ops *renewalOps) {
				ops.renew = func(context.Context, *store.DB, int64, int64, int64) (store.Fenced, error) {
					return store.Fenced{}, nil
				}
			},
			want: []string{"step_4_renew_extends", "step_9_new_owner_renews"}},
		{name: "ClaimClockRunsAhead", // the claim ignores the live lease
			edit: func(ops *renewalOps) {
				claim := ops.claim
				ops.claim = func(ctx context.Context, db *store.DB, worker string, now, until int64) (store.EventClaim, error) {
					return claim(ctx, db, worker, now+1000, until)
				}
			},
			want: []string{"step_5_claim_blocked_by_live_lease"}},
		{name: "StepMissing", steps: leaseRenewalSteps[:8],
			want: []string{"steps", "steps_as_expected", "step_9_new_owner_renews"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ops := renewalOpsFor("")
			if tt.edit != nil {
				tt.edit(&ops)
			}
			steps := tt.steps
			if steps == nil {
				steps = leaseRenewalSteps
			}
			env := &Env{Scenario: &leaseRenewal, Dir: t.TempDir()}
			r, err := runLeaseRenewal(context.Background(), env, ops, steps)
			if err != nil {
				t.Fatal(err)
			}
			failed := r.FailedChecks()
			for _, name := range tt.want {
				if !slices.Contains(failed, name) {
					t.Errorf("check %s did not fail (failed: %v)", name, failed)
				}
			}
		})
	}
}
