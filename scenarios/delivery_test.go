package scenarios

import (
	"testing"

	"github.com/outboxlab/outboxlab/lesson/lessontest"
)

// TestDeliveryFigures asserts sessions 18 to 20's LESSONS.md figures from
// their metrics, with the default options.
func TestDeliveryFigures(t *testing.T) {
	tests := []struct {
		scenario string
		want     map[string]float64
	}{
		{"session-18-lease-expiry-after-send", map[string]float64{"broker_offers": 2, "stale_completion_rows": 0, "published": 1,
			"inbox_credit_cents": 1000, "consumed_event_rows": 1, "naive_credit_cents": 2000}},
		{"session-19-failure-classes", map[string]float64{"rows_passed": 6}},
		{"session-20-inbox-retention", map[string]float64{"credit_short_retention_cents": 2000, "credit_long_retention_cents": 1000,
			"broker_dropped_within_window": 1, "broker_passed_after_window": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.scenario, func(t *testing.T) {
			sc, err := Lookup(tt.scenario)
			if err != nil {
				t.Fatal(err)
			}
			r := lessontest.Must(t, sc, "")
			for key, want := range tt.want {
				if got, ok := r.Metric(key); !ok || got != want {
					t.Errorf("%s = %v (measured %v), want %v", key, got, ok, want)
				}
			}
		})
	}
}
