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
			if got := verdict("some-mistake"); strings.Contains(got, "DESIGN BROKEN") || strings.Contains(got, "some_check") {
				t.Errorf("variant: %q: Execute opens a variant's verdict with its failed checks, the lesson adds only what it measured", got)
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

// TestVariantVerdictFollowsTheChecks: a variant's verdict opens with what
// its failed checks measured: a broken invariant, only a measurement
// changed, or a broken design's breakage hidden.
func TestVariantVerdictFollowsTheChecks(t *testing.T) {
	invariant := lab.Check{Name: "stale_rows", About: "rows changed by the stale ack", Expected: "0", Observed: "1"}
	measured := lab.Check{Name: "cost_growth", About: "the claim's cost stays flat", Expected: "< 1.5", Observed: "4", Measure: true}
	passed := lab.Check{Name: "other", Expected: "1", Observed: "1", Passed: true}
	cases := []struct {
		name   string
		design lab.Design
		checks []lab.Check
		want   string
	}{
		{"an invariant broke", lab.Safe, []lab.Check{invariant, measured, passed},
			`DESIGN BROKEN by the "m" mistake. Did not hold: rows changed by the stale ack (stale_rows: expected 0, observed 1). ` +
				`It changed what the lesson measures too: the claim's cost stays flat (cost_growth: expected < 1.5, observed 4).`},
		{"only a measurement changed", lab.Safe, []lab.Check{measured, passed},
			`INVARIANTS HELD under the "m" mistake: every check of an invariant passed. What it changed is what the lesson ` +
				`measures: the claim's cost stays flat (cost_growth: expected < 1.5, observed 4).`},
		{"a broken design's breakage hidden", lab.Broken, []lab.Check{invariant, passed},
			`BREAKAGE NOT REPRODUCED under the "m" mistake: the design stays unsafe, but this run hides it. ` +
				`Not shown: rows changed by the stale ack (stale_rows: expected 0, observed 1).`},
		{"a check the run never measured", lab.Safe, []lab.Check{invariant, {Name: "retried", Expected: "0", Observed: lab.NotMeasured}},
			`DESIGN BROKEN by the "m" mistake. Did not hold: rows changed by the stale ack (stale_rows: expected 0, observed 1). ` +
				`Not measured in this run, so neither held nor broken: retried.`},
		{"nothing failed", lab.Safe, []lab.Check{passed}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := &lab.Result{Design: c.design, Checks: c.checks, Variant: "m"}
			if got := variantVerdict(r, Variant{Name: "m"}); got != c.want {
				t.Errorf("got  %q\nwant %q", got, c.want)
			}
		})
	}
}

// TestHiddenMistakeSaysSo: a variant whose options hid the mistake fails
// mistake_exposed, and its texts join without stray spaces.
func TestHiddenMistakeSaysSo(t *testing.T) {
	r := &lab.Result{Design: lab.Safe, Variant: "m", Checks: []lab.Check{{Name: "ok", Passed: true}}, MistakeShows: "The window dropped 0 sends."}
	r.Verdict = joinSentences(variantVerdict(r, Variant{Name: "m"}), "")
	exposeMistake(r, Variant{Name: "m", Breaks: []string{"ok"}})
	if r.Passed() || !strings.HasPrefix(r.Verdict, "MISTAKE NOT EXPOSED") {
		t.Errorf("passed %v, verdict %q", r.Passed(), r.Verdict)
	}
	for _, text := range []string{r.Verdict, r.MistakeShows} {
		if strings.HasPrefix(text, " ") || strings.HasSuffix(text, " ") || strings.Contains(text, "  ") {
			t.Errorf("stray spaces in %q", text)
		}
	}
	if !strings.HasSuffix(r.MistakeShows, "What this run measured: The window dropped 0 sends.") {
		t.Errorf("Shows %q: it must quote this run's measurements as this run's", r.MistakeShows)
	}
}
