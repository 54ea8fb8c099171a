package scenarios

import (
	"strings"
	"testing"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/lab"
)

// failedResult is a result whose one check failed.
func failedResult() *lab.Result {
	return &lab.Result{Checks: []lab.Check{{Name: "some_check", Passed: false}}}
}

// TestFailedVerdictShape asserts every verdict of sessions 17 to 23 (and session 21's batch completion) words a
// failed run the same way: without a variant, "NOT SHOWN: the design did
// not hold this run" naming the failed checks; with one, "DESIGN BROKEN by"
// the variant.
func TestFailedVerdictShape(t *testing.T) {
	verdicts := map[string]func(variant string) string{
		"session 17": func(v string) string { return leaseRenewalVerdict(failedResult(), v) },
		"session 18": func(v string) string {
			return leaseExpiryAfterSendVerdict(failedResult(), &Env{Scenario: &leaseExpiryAfterSend, Variant: v})
		},
		"session 19": func(v string) string {
			return failureClassesVerdict(failedResult(), &Env{Variant: v}, lab.Table{})
		},
		"session 20": func(v string) string {
			return retentionVerdict(failedResult(), &Env{Variant: v}, flagsOf(DefaultOptions()), map[string]retentionOutcome{})
		},
		"session 21": func(v string) string {
			return (&scaleRun{env: &Env{Variant: v}}).verdict(failedResult(), s21SmallBacklog*s21Growth)
		},
		"session 21, batch completion": func(v string) string {
			return (&batchRun{env: &Env{Variant: v}}).verdict(failedResult())
		},
		"session 22": func(v string) string { return (&heartbeatRun{env: &Env{Variant: v}}).verdict(failedResult()) },
		"session 23": func(v string) string { return clocksVerdict(failedResult(), v) },
	}
	for name, verdict := range verdicts {
		t.Run(name, func(t *testing.T) {
			if got := verdict(""); !strings.HasPrefix(got, "NOT SHOWN: the design did not hold this run") || !strings.Contains(got, "some_check") {
				t.Errorf("as designed: %q", got)
			}
			if got := verdict("some-mistake"); !strings.HasPrefix(got, `DESIGN BROKEN by the "some-mistake" mistake`) {
				t.Errorf("variant: %q", got)
			}
		})
	}
}

// TestCompletedByNewOwner asserts every committed completion of e2 counts:
// the figure is 1 only for exactly one, by Relay-B.
func TestCompletedByNewOwner(t *testing.T) {
	done := func(relay string, rows int64) cast.HeartbeatCompletion {
		return cast.HeartbeatCompletion{Relay: relay, Event: hbPaused, Rows: rows}
	}
	tests := []struct {
		name      string
		in        []cast.HeartbeatCompletion
		committed int
		want      int
	}{
		{"one by Relay-B", []cast.HeartbeatCompletion{done(hbRelayA, 0), done(hbRelayB, 1)}, 1, 1},
		{"one by Relay-A", []cast.HeartbeatCompletion{done(hbRelayA, 1), done(hbRelayB, 0)}, 1, 0},
		{"both committed", []cast.HeartbeatCompletion{done(hbRelayA, 1), done(hbRelayB, 1)}, 2, 2},
		{"none", []cast.HeartbeatCompletion{done(hbRelayB, 0)}, 0, 0},
		{"another event", []cast.HeartbeatCompletion{{Relay: hbRelayB, Event: "e1", Rows: 1}, done(hbRelayB, 1)}, 1, 1},
	}
	for _, tt := range tests {
		committed, got := cast.CompletedOnceBy(tt.in, hbPaused, hbRelayB)
		if committed != tt.committed || got != tt.want {
			t.Errorf("%s: committed %d, figure %d; want %d, %d", tt.name, committed, got, tt.committed, tt.want)
		}
	}
}
