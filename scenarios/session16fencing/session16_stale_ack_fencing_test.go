package session16fencing

import (
	"context"
	"slices"
	"testing"

	"github.com/outboxlab/outboxlab/lesson/lessontest"
	"github.com/outboxlab/outboxlab/store"
)

// A statement no variant runs: a completion that fails as a statement.
var (
	// completeFailingForToken1 fails as a statement (malformed JSON) when
	// Worker-A presents its token 1, and completes normally otherwise.
	completeFailingForToken1 = store.Stmt{Name: "test: completion that fails for token 1", SQL: `UPDATE outbox_events
SET delivered = 1, delivered_at = :now
WHERE event_id = :id
  AND claim_token = :token
  AND delivered = 0
  AND json(CASE WHEN :token = 1 THEN 'disk I/O error' ELSE '1' END) = '1'`}
)

// TestStaleAckDatabaseErrorIsNotMeasured: when Worker-A's ack statement
// fails, the run must not report "0 rows" for it. The failure goes to the
// failed-ack ledger as database-error and stale_ack_rows stays unmeasured,
// so its check fails.
func TestStaleAckDatabaseErrorIsNotMeasured(t *testing.T) {
	t.Parallel()
	sqls := store.RelayLesson
	sqls.Complete = completeFailingForToken1
	env := lessontest.NewEnv(t, &Lesson)
	r, err := runStaleAckFencing(context.Background(), env, sqls)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Metric("stale_ack_rows"); ok {
		t.Fatal("stale_ack_rows was reported although the ack statement failed")
	}
	if got, _ := r.Metric("failed_acks_database_error"); got != 1 {
		t.Fatalf("failed_acks_database_error = %v, want 1", got)
	}
	if got, _ := r.Metric("current_ack_rows"); got != 1 {
		t.Fatalf("current_ack_rows = %v, want 1: only token 1's completion fails", got)
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
	t.Parallel()
	tests := []struct {
		variant string
		want    map[string]float64
	}{
		{"", map[string]float64{"stale_ack_rows": 0, "current_ack_rows": 1, "reclaim_after_delivery_rows": 0, "distinct_tokens": 2,
			"failed_acks_lease_lost": 1, "failed_acks_database_error": 0, "delivered_events": 1, "retried_ack_rows": 0}},
		{variantAckByEventID, map[string]float64{"stale_ack_rows": 1, "current_ack_rows": 0, "distinct_tokens": 2, "failed_acks_lease_lost": 0,
			"retried_ack_rows": 0}},
		{variantReusedToken, map[string]float64{"stale_ack_rows": 1, "current_ack_rows": 0, "distinct_tokens": 1, "failed_acks_lease_lost": 0,
			"retried_ack_rows": 0}},
	}
	for _, tt := range tests {
		t.Run("variant="+tt.variant, func(t *testing.T) {
			t.Parallel()
			r := lessontest.Must(t, &Lesson, tt.variant)
			for k, want := range tt.want {
				if got, ok := r.Metric(k); !ok || got != want {
					t.Errorf("%s = %v (measured %v), want %v", k, got, ok, want)
				}
			}
		})
	}
}

func TestClassifyZeroRowAck(t *testing.T) {
	t.Parallel()
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
			t.Parallel()
			if got, _ := classifyZeroRowAck(tt.ev, tt.found, tt.token); got != tt.want {
				t.Fatalf("reason = %s, want %s", got, tt.want)
			}
		})
	}
}
