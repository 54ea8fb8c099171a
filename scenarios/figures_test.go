package scenarios

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/outboxlab/outboxlab/internal/pgtest"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/lesson/lessontest"
)

// TestCourseFigures proves the figures the course fixes
// ([lesson.Scenario.Figures]) against every lesson's run as designed, on
// SQLite and, where pgtest gives a server, on PostgreSQL: each figure is a
// metric of the run, with exactly the stated value. The runs are
// lessontest's, keyed as TestScenariosAndVariants keys its own, so the
// figures cost no run of their own. A lesson that fixes no figure must say
// why (NoFigures).
func TestCourseFigures(t *testing.T) {
	t.Parallel()
	for _, sc := range All() {
		if err := figuresDeclared(sc); err != nil {
			t.Errorf("%s: %v", sc.Name, err)
		}
	}
	engines := []struct {
		name string
		db   func(t *testing.T) string
	}{
		{"sqlite", func(*testing.T) string { return "" }},
		{"postgres", func(t *testing.T) string { return pgtest.URL(t) }},
	}
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			db := e.db(t)
			for _, sc := range All() {
				if len(sc.Figures) == 0 {
					continue
				}
				t.Run(sc.Name, func(t *testing.T) {
					t.Parallel()
					for _, d := range figureDiffs(sc.Figures, lessontest.On(t, db, sc, "", 0)) {
						t.Error(d)
					}
				})
			}
		})
	}
}

// figuresDeclared says what is wrong with sc's figures as declared: none
// and no reason why, or both.
func figuresDeclared(sc *lesson.Scenario) error {
	switch {
	case len(sc.Figures) == 0 && strings.TrimSpace(sc.NoFigures) == "":
		return fmt.Errorf("the course fixes no figure for it and NoFigures does not say why")
	case len(sc.Figures) > 0 && sc.NoFigures != "":
		return fmt.Errorf("it has figures and says why it has none (NoFigures %q)", sc.NoFigures)
	}
	return nil
}

// figureDiffs lists, in key order, each figure r does not show: missing
// from its metrics, or of another value.
func figureDiffs(figures map[string]float64, r *lab.Result) []string {
	var diffs []string
	for _, key := range slices.Sorted(maps.Keys(figures)) {
		got, ok := r.Metric(key)
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("figure %s: the run reports no such metric (want %v)", key, figures[key]))
		case got != figures[key] || math.IsNaN(got):
			diffs = append(diffs, fmt.Sprintf("figure %s: the run shows %v, the course fixes %v", key, got, figures[key]))
		}
	}
	return diffs
}

// TestFigureDiffs: a missing metric and another value are each reported,
// an equal one is not.
func TestFigureDiffs(t *testing.T) {
	t.Parallel()
	r := &lab.Result{}
	r.SetMetric("same", 1)
	r.SetMetric("other", 2)
	got := figureDiffs(map[string]float64{"same": 1, "other": 3, "absent": 0}, r)
	want := []string{
		"figure absent: the run reports no such metric (want 0)",
		"figure other: the run shows 2, the course fixes 3",
	}
	if !slices.Equal(got, want) {
		t.Errorf("figureDiffs = %q, want %q", got, want)
	}
	cases := []struct {
		sc   lesson.Scenario
		fail bool
	}{
		{lesson.Scenario{Figures: map[string]float64{"a": 1}}, false},
		{lesson.Scenario{NoFigures: "why"}, false},
		{lesson.Scenario{}, true},
		{lesson.Scenario{NoFigures: "  "}, true},
		{lesson.Scenario{Figures: map[string]float64{"a": 1}, NoFigures: "why"}, true},
	}
	for i, c := range cases {
		if err := figuresDeclared(&c.sc); (err != nil) != c.fail {
			t.Errorf("case %d: figuresDeclared = %v, want failure %v", i, err, c.fail)
		}
	}
}
