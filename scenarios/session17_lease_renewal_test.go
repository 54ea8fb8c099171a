package scenarios

import (
	"context"
	"slices"
	"testing"

	"github.com/outboxlab/outboxlab/store"
)

// Statements no variant runs, for breaking the checks no variant breaks.
var (
	// claimNeverSucceeds changes no row, ever.
	claimNeverSucceeds = store.Stmt{Name: "test: claim that never changes a row", SQL: `UPDATE outbox_events
SET claim_token = claim_token + 1,
    locked_by   = :relay,
    lease_until = :until
WHERE event_id = :id
  AND 0`}
	// renewNeverSucceeds refuses every renewal.
	renewNeverSucceeds = store.Stmt{Name: "test: renewal that never changes a row", SQL: `UPDATE outbox_events
SET lease_until = :proposed
WHERE event_id = :id
  AND claim_token = :token
  AND 0`}
	// renewOffByOne changes the row the lesson's renewal would, 1 row, but
	// writes a deadline one tick past the proposed one: only the read-back
	// of the lease end can tell.
	renewOffByOne = store.Stmt{Name: "test: renewal that writes another deadline", SQL: `UPDATE outbox_events
SET lease_until = :proposed + 1
WHERE event_id = :id
  AND claim_token = :token
  AND delivered = 0
  AND lease_until > :now
  AND lease_until < :proposed`}
	// claimIgnoringLease takes the event under someone's live lease.
	claimIgnoringLease = store.Stmt{Name: "test: claim that ignores the live lease", SQL: `UPDATE outbox_events
SET claim_token = claim_token + 1,
    locked_by   = :relay,
    lease_until = :until
WHERE event_id = :id
  AND delivered = 0`}
)

// TestLeaseRenewalChecksCanFail breaks the session-17 checks no variant
// breaks, each with a deliberately wrong claim or renewal, or a missing step.
func TestLeaseRenewalChecksCanFail(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		edit  func(s *store.RelaySQL)
		steps []renewalStep
		want  []string
	}{
		{name: "ClaimNeverSucceeds", edit: func(s *store.RelaySQL) { s.Claim = claimNeverSucceeds },
			want: []string{"step_1_claim_succeeds", "step_7_claim_after_expiry"}},
		{name: "RenewalRefusesEverything", edit: func(s *store.RelaySQL) { s.Renew = renewNeverSucceeds },
			want: []string{"step_4_renew_extends", "step_9_new_owner_renews"}},
		{name: "ClaimIgnoresTheLiveLease", edit: func(s *store.RelaySQL) { s.Claim = claimIgnoringLease },
			want: []string{"step_5_claim_blocked_by_live_lease"}},
		{name: "RenewalWritesAnotherDeadline", edit: func(s *store.RelaySQL) { s.Renew = renewOffByOne },
			want: []string{"steps_as_expected", "step_4_renew_extends", "step_9_new_owner_renews"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sqls := renewalSQL("")
			if tt.edit != nil {
				tt.edit(&sqls)
			}
			steps := tt.steps
			if steps == nil {
				steps = leaseRenewalSteps
			}
			env := &Env{Scenario: &leaseRenewal, Dir: t.TempDir()}
			r, err := runLeaseRenewal(context.Background(), env, sqls, steps)
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
