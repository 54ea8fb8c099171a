package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/outboxlab/outboxlab/reports"
	"github.com/outboxlab/outboxlab/scenarios"
)

// TestReportsFitAPage runs every scenario and every variant SQLite can
// make and renders its text report: no line, tables and lanes included, is
// wider than reports.MaxLine columns.
func TestReportsFitAPage(t *testing.T) {
	t.Parallel()
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
				r := executeLesson(t, sc, variant, 3) // bound 3: the explorer report's shape, in a fraction of the default's time
				var b bytes.Buffer
				if err := reports.Text(&b, r, reports.RunInfo{}); err != nil {
					t.Fatal(err)
				}
				for i, line := range strings.Split(b.String(), "\n") {
					if n := len([]rune(line)); n > reports.MaxLine {
						t.Errorf("line %d is %d columns wide: %q", i+1, n, line)
					}
				}
			})
		}
	}
}
