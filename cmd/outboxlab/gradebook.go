package main

import (
	"encoding/csv"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/outboxlab/outboxlab/reports"
)

// gradeFormatFlag is grade's --format: the table, a gradebook or JSON.
var gradeFormatFlag = &cli.StringFlag{Name: "format", Value: "text", Usage: "output `FORMAT`: text (a table), csv (a gradebook) or json (see above)"}

// gradeFormatUsage documents grade's csv and json output, as its help
// prints it.
const gradeFormatUsage = `Output (--format):
  text  a table: student, file, verdict, each failed check with its reason; then where the summary is
  csv   a gradebook, one row per file under a header row: student, exercise, file, verdict (passed, failed,
        refused, or not judged when the lab failed or the grade was interrupted), failed_checks (their names,
        separated by "; "), reason (why the file was refused, in the sandbox's words, or each failed check
        as "name: expected X, observed Y"), report (the lesson's report of the file), page (its HTML page,
        with --html). A cell that a spreadsheet would read as a formula (=, +, -, @) starts with a quote (').
  json  one JSON object per line and file: student, exercise, file, verdict (as in csv), passed, reason,
        checks (every check of the lesson, and of the explorer as "explore: NAME", each with name,
        expected, observed, passed and, where the explorer found one, counterexample), failed_checks,
        report, explore_report, page and explore_page (with --html), error (why it was not judged) and
        report_error (why its report could not be written)`

// checkGradeFormat is grade's --format, which also takes csv.
func checkGradeFormat(c *cli.Context) (string, error) {
	switch f := c.String("format"); f {
	case "text", "json", "csv":
		return f, nil
	default:
		return "", usagef("--format must be text, csv or json, not %q", f)
	}
}

// gradeCheck is one check of a file's runs, as grade's JSON gives it.
type gradeCheck struct {
	Name           string `json:"name"` // the explorer's start with "explore: "
	Expected       string `json:"expected"`
	Observed       string `json:"observed"`
	Passed         bool   `json:"passed"`
	Counterexample string `json:"counterexample,omitempty"`
}

// Gradebook verdicts, as csv and json give them.
const (
	verdictPassed    = "passed"
	verdictFailed    = "failed"
	verdictRefused   = "refused"    // the file's fault: refused, or its statements failed or ran too long
	verdictNotJudged = "not judged" // the lab failed, or the grade was interrupted
)

// settle sets g's gradebook verdict and reason from what judging it found.
func (g *grade) settle() {
	switch {
	case g.fault == fileFault:
		g.Verdict, g.Reason = verdictRefused, strings.TrimPrefix(g.Error, "refused: ")
	case g.Error != "":
		g.Verdict, g.Reason = verdictNotJudged, g.Error
	case g.Passed:
		g.Verdict = verdictPassed
	default:
		g.Verdict = verdictFailed
		why := make([]string, len(g.FailedChecks))
		for i, name := range g.FailedChecks {
			why[i] = name + ": " + g.reasons[i]
		}
		g.Reason = strings.Join(why, "; ")
	}
	if g.Checks == nil {
		g.Checks = []gradeCheck{}
	}
}

// writeGradebook writes grades as CSV: a header row, then one row per file.
func writeGradebook(w io.Writer, grades []grade) error {
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"student", "exercise", "file", "verdict", "failed_checks", "reason", "report", "page"}); err != nil {
		return err
	}
	for _, g := range grades {
		row := []string{cell(g.Student), g.Exercise, cell(g.File), g.Verdict, strings.Join(g.FailedChecks, "; "), cell(g.Reason), cell(g.Report), cell(g.Page)}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// cell makes a student's text safe in a gradebook: escaped, so a row is
// one line of printable text, and quoted when a spreadsheet would read it
// as a formula.
func cell(s string) string {
	s = reports.Printable(s)
	if s != "" && strings.ContainsRune("=+-@", rune(s[0])) {
		return "'" + s
	}
	return s
}
