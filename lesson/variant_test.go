package lesson

import (
	"strings"
	"testing"

	"github.com/outboxlab/outboxlab/lab"
)

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
