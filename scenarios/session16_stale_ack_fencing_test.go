package scenarios

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/outboxlab/outboxlab/store"
)

// TestStaleAckChecksCanFail breaks the check no session-16 variant breaks:
// a claim that ignores the delivered flag takes the delivered event again.
func TestStaleAckChecksCanFail(t *testing.T) {
	ops := fencingOpsFor("")
	ops.claim = func(ctx context.Context, db *store.DB, worker string, now, leaseUntil int64) (store.EventClaim, error) {
		c, err := db.ClaimEvent(ctx, s16EventID, worker, now, leaseUntil)
		if c.Outcome == store.Done { // the mistake: delivered rows are claimable too
			c.Outcome, c.Rows = store.Claimed, 1
		}
		return c, err
	}
	env := &Env{Scenario: &staleAckFencing, Dir: t.TempDir()}
	r, err := runStaleAckFencing(context.Background(), env, ops)
	if err != nil {
		t.Fatal(err)
	}
	if failed := r.FailedChecks(); !slices.Contains(failed, "reclaim_after_delivery_rows") {
		t.Fatalf("failed checks %v, want reclaim_after_delivery_rows among them", failed)
	}
}

// TestStaleAckDatabaseErrorIsNotMeasured: when Worker-A's ack statement
// fails, the run must not report "0 rows" for it. The failure goes to the
// failed-ack ledger as database-error and stale_ack_rows stays unmeasured,
// so its check fails.
func TestStaleAckDatabaseErrorIsNotMeasured(t *testing.T) {
	ops := fencingOpsFor("")
	ack := ops.ack
	ops.ack = func(ctx context.Context, db *store.DB, token, now int64) (store.Fenced, error) {
		if token == 1 { // Worker-A's stale token
			return store.Fenced{}, errors.New("store: ack E-41 with token 1: disk I/O error")
		}
		return ack(ctx, db, token, now)
	}
	env := &Env{Scenario: &staleAckFencing, Dir: t.TempDir()}
	r, err := runStaleAckFencing(context.Background(), env, ops)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Metric("stale_ack_rows"); ok {
		t.Fatal("stale_ack_rows was reported although the ack statement failed")
	}
	if got, _ := r.Metric("failed_acks_database_error"); got != 1 {
		t.Fatalf("failed_acks_database_error = %v, want 1", got)
	}
	var observed string
	for _, c := range r.Checks {
		if c.Name == "stale_ack_rows" {
			observed = c.Observed
		}
	}
	if failed := r.FailedChecks(); !slices.Contains(failed, "stale_ack_rows") || observed != "not measured" {
		t.Fatalf("failed checks %v, stale_ack_rows observed %q; want it failed as not measured", failed, observed)
	}
}

// TestStaleAckFigures pins the figures LESSONS.md gives and the ledgers
// behind them.
func TestStaleAckFigures(t *testing.T) {
	tests := []struct {
		variant string
		want    map[string]float64
	}{
		{"", map[string]float64{"stale_ack_rows": 0, "current_ack_rows": 1, "reclaim_after_delivery_rows": 0, "distinct_tokens": 2,
			"failed_acks_lease_lost": 1, "failed_acks_database_error": 0, "delivered_events": 1}},
		{variantAckByEventID, map[string]float64{"stale_ack_rows": 1, "current_ack_rows": 0, "distinct_tokens": 2, "failed_acks_lease_lost": 0}},
		{variantReusedToken, map[string]float64{"stale_ack_rows": 1, "current_ack_rows": 0, "distinct_tokens": 1, "failed_acks_lease_lost": 0}},
	}
	for _, tt := range tests {
		t.Run("variant="+tt.variant, func(t *testing.T) {
			r := mustExecute(t, &staleAckFencing, tt.variant)
			for k, want := range tt.want {
				if got, ok := r.Metric(k); !ok || got != want {
					t.Errorf("%s = %v (measured %v), want %v", k, got, ok, want)
				}
			}
		})
	}
}

func TestClassifyZeroRowAck(t *testing.T) {
	tests := []struct {
		name  string
		ev    store.Event
		found bool
		token int64
		want  string
	}{
		{"NewerClaim", store.Event{Token: 2, LockedBy: "Worker-B"}, true, 1, reasonLeaseLost},
		{"NewerClaimAndDelivered", store.Event{Token: 2, Delivered: true}, true, 1, reasonLeaseLost},
		{"DeliveredUnderOurToken", store.Event{Token: 2, Delivered: true}, true, 2, reasonAlreadyDelivered},
		{"Missing", store.Event{}, false, 1, reasonDatabaseError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, _ := classifyZeroRowAck(tt.ev, tt.found, tt.token); got != tt.want {
				t.Fatalf("reason = %s, want %s", got, tt.want)
			}
		})
	}
}
