package session20inbox

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/outboxlab/outboxlab/lesson"
)

// TestInboxRetentionFollowsOptions runs session 20 with other retentions
// and windows: the figures change as the lesson predicts, and the checks
// (stated in terms of the options) still pass.
func TestInboxRetentionFollowsOptions(t *testing.T) {
	day := 24 * time.Hour
	tests := []struct {
		name string
		opts lesson.Options
		want map[string]float64
	}{
		{name: "Defaults", opts: lesson.DefaultOptions(),
			want: map[string]float64{"credit_short_retention_cents": 2000, "credit_long_retention_cents": 1000, "broker_dropped_within_window": 1, "broker_passed_after_window": 1}},
		{name: "InboxOutlivesReplay", opts: lesson.Options{InboxRetention: 4 * day, DLQRetention: 7 * day, BrokerWindow: 2 * time.Minute},
			want: map[string]float64{"credit_short_retention_cents": 1000, "credit_long_retention_cents": 1000, "broker_dropped_within_window": 1, "broker_passed_after_window": 1}},
		{name: "DLQPurgedBeforeReplay", opts: lesson.Options{InboxRetention: day, DLQRetention: 2 * day, BrokerWindow: 2 * time.Minute},
			want: map[string]float64{"credit_short_retention_cents": 1000, "credit_long_retention_cents": 1000, "broker_dropped_within_window": 1, "broker_passed_after_window": 0}},
		{name: "WindowShorterThanResend", opts: lesson.Options{InboxRetention: day, DLQRetention: 7 * day, BrokerWindow: 10 * time.Second},
			want: map[string]float64{"credit_short_retention_cents": 2000, "credit_long_retention_cents": 1000, "broker_dropped_within_window": 0, "broker_passed_after_window": 1}},
		{name: "WindowLongerThanReplay", opts: lesson.Options{InboxRetention: day, DLQRetention: 7 * day, BrokerWindow: 4 * day},
			want: map[string]float64{"credit_short_retention_cents": 2000, "credit_long_retention_cents": 1000, "broker_dropped_within_window": 1, "broker_passed_after_window": 0}},
		{name: "NoWindowZeroRetention", opts: lesson.Options{InboxRetention: 0, DLQRetention: 7 * day, BrokerWindow: 0},
			want: map[string]float64{"credit_short_retention_cents": 2000, "credit_long_retention_cents": 1000, "broker_dropped_within_window": 0, "broker_passed_after_window": 1}},
	}
	sc := &Lesson
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := lesson.Execute(context.Background(), sc, "", tt.opts, false)
			if err != nil {
				t.Fatal(err)
			}
			if !r.Passed() {
				t.Fatalf("failed checks %v", r.FailedChecks())
			}
			for key, want := range tt.want {
				if got, _ := r.Metric(key); got != want {
					t.Errorf("%s = %v, want %v", key, got, want)
				}
			}
		})
	}
}

// TestInboxRetentionVerdictFollowsMeasurements: the verdict is built from
// what each part measured, so flags that keep the lesson's breakage from
// happening say so plainly instead of repeating the lesson's text.
func TestInboxRetentionVerdictFollowsMeasurements(t *testing.T) {
	day := 24 * time.Hour
	tests := []struct {
		name      string
		variant   string
		opts      lesson.Options
		want, not []string
	}{
		// The resend, under its own message id, passes the broker and the
		// inbox: the verdict must not call part 2's 2000 cents single.
		{name: "EventIDPerSend", variant: s20EventIDPerSend, opts: lesson.DefaultOptions(),
			want: []string{"DESIGN BROKEN", "the inbox turned it away, yet the effect is not single", "(credit 2000 cents: the 1000-cent event applied 2 times)."},
			not:  []string{"kept it single"}},
		{name: "Defaults", opts: lesson.DefaultOptions(),
			want: []string{"SAFE DESIGN held", "with an inbox retention of 24h, not longer than the dedup record's age of 3d1m30s at the replay, the record was purged and the replay was applied again (credit 2000 cents: the 1000-cent event applied 2 times)",
				"with an inbox retention of 7d1m30s, longer than the dedup record's age of 3d1m30s at the replay, the replay was deduplicated (credit 1000 cents: one effect)",
				"the broker window (2m) dropped 1 resend 30s after the first send", "the replay 3d after the dead-lettering passed the broker (1 offer) and only the inbox kept it single (credit 1000 cents: one effect)"},
			not: []string{"not reproduced"}},
		{name: "LongInboxRetention", opts: lesson.Options{InboxRetention: 30 * day, DLQRetention: 7 * day, BrokerWindow: 2 * time.Minute},
			want: []string{"only partly reproduced", "with an inbox retention of 30d, longer than the dedup record's age of 3d1m30s at the replay, the replay was deduplicated (credit 1000 cents: one effect). The short-retention breakage was not reproduced."},
			not:  []string{"SAFE DESIGN held", "applied again"}},
		{name: "ShortDLQRetention", opts: lesson.Options{InboxRetention: day, DLQRetention: 2 * day, BrokerWindow: 2 * time.Minute},
			want: []string{"only partly reproduced", "nothing was replayed, because the DLQ retention of 2d purged the message first", "the replay-passes-the-broker part was not reproduced"},
			not:  []string{"passed the broker", "only the inbox kept"}},
		{name: "ShortBrokerWindow", opts: lesson.Options{InboxRetention: day, DLQRetention: 7 * day, BrokerWindow: 10 * time.Second},
			want: []string{"only partly reproduced", "the broker window (10s) let the resend 30s after the first send through (nothing dropped), so the within-window drop was not reproduced"}},
		{name: "LongBrokerWindow", opts: lesson.Options{InboxRetention: day, DLQRetention: 7 * day, BrokerWindow: 4 * day},
			want: []string{"only partly reproduced", "the window also dropped the replay 3d after the dead-lettering"}},
	}
	sc := &Lesson
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := lesson.Execute(context.Background(), sc, tt.variant, tt.opts, false)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(r.Verdict, w) {
					t.Errorf("verdict lacks %q:\n%s", w, r.Verdict)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(r.Verdict, n) {
					t.Errorf("verdict says %q:\n%s", n, r.Verdict)
				}
			}
		})
	}
}
