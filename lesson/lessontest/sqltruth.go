package lessontest

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/reports"
)

// CheckSQLTruth asserts the report's SQL section prints only statements the
// run's statement ledger saw, each as often as the ledger counted, and that
// every statement the run executed has a name. A statement's line wider
// than a report's page wraps, so statements compare with their blanks
// collapsed.
func CheckSQLTruth(t testing.TB, r *lab.Result) {
	t.Helper()
	if len(r.Statements) == 0 {
		t.Fatal("the ledger saw no statement")
	}
	saw := map[string]lab.Statement{}
	for _, s := range r.Statements {
		saw[blanksCollapsed(s.SQL)] = s
		if s.Name == "" {
			t.Errorf("unnamed statement ran %d times: %.80q", s.Runs, s.SQL)
		}
		if s.Runs == 0 && !s.Omitted {
			t.Errorf("statement %q is in the ledger with 0 runs", s.Name)
		}
		if s.Omitted && (s.Runs != 0 || s.Skipped == 0 || s.Mistake == "" || s.ReplacedSQL == "") {
			t.Errorf("omitted step %q: runs %d, skipped %d, mistake %q", s.Name, s.Runs, s.Skipped, s.Mistake)
		}
	}
	var buf bytes.Buffer
	if err := reports.Text(&buf, r, reports.RunInfo{Started: time.Unix(0, 0)}); err != nil {
		t.Fatal(err)
	}
	printed := printedStatements(buf.String())
	if len(printed) == 0 {
		t.Fatal("the report printed no statement")
	}
	for _, p := range printed {
		if _, ok := saw[blanksCollapsed(p)]; !ok {
			t.Errorf("the report prints a statement the ledger never saw:\n%s", p)
		}
	}
}

// blanksCollapsed is sql with every run of blanks one space.
func blanksCollapsed(sql string) string { return strings.Join(strings.Fields(sql), " ") }

// printedStatements extracts the statements of a report's SQL section: each
// block after a "-- name  [ran ...]" header, up to the blank line.
func printedStatements(report string) []string {
	start := strings.Index(report, "== SQL that ran")
	end := strings.Index(report, "== Transactions that ran")
	if end < 0 {
		end = strings.Index(report, "== Timeline")
	}
	if start < 0 || end < start {
		return nil
	}
	var out []string
	var block []string
	for _, line := range strings.Split(report[start:end], "\n") {
		switch {
		case strings.HasPrefix(line, "-- ") && strings.Contains(line, "[ran "):
			block = []string{}
		case block == nil || strings.HasPrefix(line, "--"):
		case strings.TrimSpace(line) == "":
			out = append(out, strings.TrimSuffix(strings.TrimSpace(strings.Join(block, "\n")), ";"))
			block = nil
		default:
			block = append(block, line)
		}
	}
	return out
}

// CheckMistakeDiff asserts a variant's SQL differs from the lesson's
// exactly where its mistake lies: every statement only the variant ran is a
// marked mistake, and every lesson statement the variant did not run was
// replaced by one of those mistakes.
func CheckMistakeDiff(t testing.TB, lesson, variant *lab.Result) {
	t.Helper()
	ls, vs := actorStatements(lesson), actorStatements(variant)
	replaced := map[string]bool{}
	for text, s := range vs {
		if _, ok := ls[text]; ok && !s.Omitted {
			continue
		}
		if s.Mistake == "" {
			t.Errorf("the variant ran %q, which the lesson does not run, without marking it a mistake", s.Name)
			continue
		}
		replaced[strings.TrimSpace(s.ReplacedSQL)] = true
	}
	for text, s := range ls {
		if _, ok := vs[text]; !ok && !replaced[text] {
			t.Errorf("the variant never ran the lesson's %q, and no mistake says it replaced it", s.Name)
		}
	}
	checkListedChangesDiffer(t, lesson, variant)
}

// checkListedChangesDiffer asserts that every statement "The mistake"
// lists as the variant's differs between the design's ledger and the
// variant's: the design never ran it, or ran (or left out) it fewer times.
// A statement the design's own broken actor runs as often in both runs is
// no change of the variant's. And the section never says both that the
// variant changed statements and that it changed none.
func checkListedChangesDiffer(t testing.TB, lesson, variant *lab.Result) {
	t.Helper()
	times := func(r *lab.Result, name string) int {
		n := 0
		for _, s := range r.Statements {
			if s.Name == name {
				n += s.Runs + s.Skipped
			}
		}
		return n
	}
	for _, v := range variant.VariantStatements {
		if slices.Contains(variant.MistakesNotRun, v.Name) {
			continue
		}
		if d, m := times(lesson, v.Name), times(variant, v.Name); m <= d {
			t.Errorf("The mistake lists %q, which the design's run ran %d times and the variant's %d: no change of the variant's", v.Name, d, m)
		}
	}
	text := reports.MistakeChanges(variant)
	if strings.Contains(text, "changes no SQL statement") && strings.Contains(text, "MISTAKE under") {
		t.Errorf("The mistake says both that the variant changed statements and that it changed none: %s", text)
	}
}

// actorStatements are the statements the lesson's actors ran (not the
// lab's own reads), by text.
func actorStatements(r *lab.Result) map[string]lab.Statement {
	out := map[string]lab.Statement{}
	for _, s := range r.Statements {
		switch {
		case s.Omitted:
			out["omitted: "+s.Name] = s
		case !s.Audit:
			out[strings.TrimSpace(s.SQL)] = s
		}
	}
	return out
}
