package lesson

import (
	"fmt"
	"strings"

	"github.com/outboxlab/outboxlab/lab"
)

// variantVerdict opens a variant run's verdict with what the run measured:
// the invariants its failed checks prove broken; where only checks of what
// the lesson measures failed, that every invariant held and what the
// mistake changed; for a broken design's lesson, that the breakage was not
// reproduced. A run that failed no check gets "" here: [exposeMistake]
// says so instead.
func variantVerdict(r *lab.Result, v Variant) string {
	var broke, measured, unmeasured []string
	for _, c := range r.Checks {
		if c.Passed {
			continue
		}
		what := fmt.Sprintf("%s (%s: expected %s, observed %s)", c.About, c.Name, c.Expected, c.Observed)
		switch {
		case c.Observed == lab.NotMeasured:
			unmeasured = append(unmeasured, c.Name)
		case c.Measure || r.Design == lab.Broken:
			measured = append(measured, what)
		default:
			broke = append(broke, what)
		}
	}
	notMeasured := ""
	if len(unmeasured) > 0 {
		notMeasured = "Not measured in this run, so neither held nor broken: " + strings.Join(unmeasured, ", ") + "."
	}
	switch {
	case len(broke) > 0:
		verdict := fmt.Sprintf("DESIGN BROKEN by the %q mistake. Did not hold: %s.", v.Name, strings.Join(broke, "; "))
		if len(measured) > 0 {
			verdict += " It changed what the lesson measures too: " + strings.Join(measured, "; ") + "."
		}
		return joinSentences(verdict, notMeasured)
	case len(measured) > 0 && r.Design == lab.Broken:
		return joinSentences(fmt.Sprintf("BREAKAGE NOT REPRODUCED under the %q mistake: the design stays unsafe, but this run "+
			"hides it. Not shown: %s.", v.Name, strings.Join(measured, "; ")), notMeasured)
	case len(measured) > 0:
		return joinSentences(fmt.Sprintf("INVARIANTS HELD under the %q mistake: every check of an invariant passed. What it "+
			"changed is what the lesson measures: %s.", v.Name, strings.Join(measured, "; ")), notMeasured)
	case notMeasured != "":
		return fmt.Sprintf("NOT SHOWN under the %q mistake: no check failed on a figure the run measured.", v.Name) + " " + notMeasured
	}
	return ""
}

// defaultShows is "What this run shows" for a variant that does not say:
// the mistake as the run filled it (r.Mistake), and what its failed checks
// are.
func defaultShows(r *lab.Result) string {
	if !r.BrokeInvariant() && !r.Passed() {
		return "What happens when " + r.Mistake + ". The checks that FAIL below measure what the lesson shows, not an " +
			"invariant: every invariant held, and the mistake changed what the run measured."
	}
	return "What happens when " + r.Mistake + ". The checks that FAIL below are the invariants this mistake breaks; " +
		"the lesson as designed keeps every one of them."
}

// joinSentences joins the texts that are not empty with a space.
func joinSentences(texts ...string) string {
	var parts []string
	for _, t := range texts {
		if t != "" {
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, " ")
}

// variantStatements are the statements v itself puts in place of the
// lesson's: its swaps, then what each of its consumer designs changes,
// with the consumers that run them.
func variantStatements(v Variant) []lab.VariantStatement {
	var out []lab.VariantStatement
	for _, s := range v.Swaps {
		out = append(out, lab.VariantStatement{Name: s.Name})
	}
	for _, m := range v.Migrations {
		out = append(out, lab.VariantStatement{Name: m.Stmt().Name})
	}
	for _, d := range v.Designs {
		for _, s := range d.Changed() {
			out = append(out, lab.VariantStatement{Name: s.Name, By: "the consumers of the " + d.Replaces + " design, now " + d.Name})
		}
	}
	return out
}
