package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/reports"
	"github.com/outboxlab/outboxlab/scenarios"
)

// TestReportsFitAPage runs every scenario and every variant SQLite can
// make and renders its text report: no line, tables and lanes included, is
// wider than reports.MaxLine columns, and the verdict and the checks table
// open within the first screen (verdictBy and checksBy lines).
// verdictBy and checksBy are the lines by which a report's verdict and
// its checks table open: a student reads them on the first screen.
const (
	verdictBy = 20
	checksBy  = 60
)

// forEachSQLiteRun calls check, in a parallel subtest of its own, with
// the run of every lesson and every variant SQLite can make, each run once
// per test binary (executeLesson) and the explorer to bound 3: its
// report's shape, in a fraction of the default's time.
func forEachSQLiteRun(t *testing.T, check func(t *testing.T, r *lab.Result)) {
	for _, sc := range scenarios.All() {
		variants := []string{""}
		for _, v := range sc.Variants {
			if v.Engine == "" {
				variants = append(variants, v.Name)
			}
		}
		for _, variant := range variants {
			t.Run(strings.TrimSuffix(sc.Name+"/"+variant, "/"), func(t *testing.T) {
				t.Parallel()
				check(t, executeLesson(t, sc, variant, 3))
			})
		}
	}
}

func TestReportsFitAPage(t *testing.T) {
	t.Parallel()
	forEachSQLiteRun(t, func(t *testing.T, r *lab.Result) {
		var b bytes.Buffer
		if err := reports.Text(&b, r, reports.RunInfo{}); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(b.String(), "\n")
		for _, top := range []struct {
			heading string
			by      int
		}{{"== Verdict ", verdictBy}, {"== Checks ", checksBy}} {
			if i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, top.heading) }); i < 0 || i+1 > top.by {
				t.Errorf("%q opens on line %d, want within the first %d lines", top.heading, i+1, top.by)
			}
		}
		for i, line := range lines {
			if n := len([]rune(line)); n > reports.MaxLine {
				t.Errorf("line %d is %d columns wide: %q", i+1, n, line)
			}
		}
	})
}
