package scenarios

import (
	"context"
	"testing"

	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/store"
)

// runSession22 runs session 22 with hc in a fresh folder.
func runSession22(t *testing.T, hc heartbeatCast) *lab.Result {
	t.Helper()
	env := newTestEnv(t, &heartbeatAndShutdown)
	r, err := runHeartbeatAndShutdown(context.Background(), env, hc)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// claimKeepingToken is a claim no variant runs: it takes an expired lease
// without advancing the fencing token, so the new owner holds the old
// owner's token. Relay-A's overdue renewal after its pause then changes 1
// row, its work goes on, and it completes e2 before its new owner can.
var claimKeepingToken = store.Stmt{Name: "test: claim that does not advance the fencing token", SQL: `UPDATE outbox_events
SET locked_by   = :relay,
    lease_until = :until,
    claimed_at  = :now
WHERE event_id = :id
  AND delivered = 0
  AND (lease_until IS NULL OR lease_until <= :now)`}

func init() {
	checkBreakers = append(checkBreakers,
		checkBreaker{"session-22-heartbeat-and-shutdown", claimKeepingToken.Name,
			swapOf(func(hc heartbeatCast) heartbeatCast { hc.sqls.Relay.Claim = claimKeepingToken; return hc }),
			[]string{"completed_by_new_owner", "zero_row_renewals", "cancelled_on_lease_loss"}})
}

// TestSession22VariantFigures pins what each variant does to the figures
// its mistake is about, beyond failing its checks.
func TestSession22VariantFigures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		variant string
		want    map[string]float64
	}{
		{"", map[string]float64{"renewals_one_row": 7, "stale_sends": 0, "recovered_after_restart": 2}},
		{variantRenewalFailureOnlyLogged, map[string]float64{"stale_sends": 1, "cancelled_on_lease_loss": 0, "zero_row_renewals": 1, "completed_by_new_owner": 1}},
		{variantNoDeadline, map[string]float64{"deadline_refusals": 0, "lost_events": 1, "recovered_after_restart": 2}},
		{variantShutdownMarksComplete, map[string]float64{"lost_events": 2, "completed_without_send": 2, "recovered_after_restart": 0}},
		{variantRenewWithoutMargin, map[string]float64{"zero_row_renewals": 2, "cancelled_on_lease_loss": 2, "stale_sends": 0}},
	}
	for _, tt := range tests {
		t.Run("variant="+tt.variant, func(t *testing.T) {
			t.Parallel()
			r := runSession22(t, lessonHeartbeatCast(&Env{Scenario: &heartbeatAndShutdown, Variant: tt.variant}))
			for key, want := range tt.want {
				if got, ok := r.Metric(key); !ok || got != want {
					t.Errorf("%s = %v (measured %v), want %v", key, got, ok, want)
				}
			}
		})
	}
}
