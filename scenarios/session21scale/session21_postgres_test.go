package session21scale

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/outboxlab/outboxlab/internal/pgtest"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/lesson/lessontest"
)

// executeOnPostgres runs sc's variant ("" as designed) on the test server,
// each database file a schema of its own, dropped afterwards.
func executeOnPostgres(t *testing.T, url string, sc *lesson.Scenario, variant string) *lab.Result {
	t.Helper()
	r := lessontest.On(t, url, sc, variant, 0)
	if r.Engine != "postgres" {
		t.Fatalf("engine %q, want postgres", r.Engine)
	}
	for _, key := range []string{"lesson_cost_growth", "indexed_cost_growth"} {
		if x, ok := r.Metric(key); ok {
			t.Logf("%s %q: %s %s", sc.Name, variant, key, lab.FormatNumber(x))
		}
	}
	return r
}

// TestClaimsAtScaleOnPostgres: session 21 on PostgreSQL passes every check
// as designed with two drain workers claiming concurrently (no duplicates,
// none lost, the lesson claim's cost in rows read grows and the indexed
// claim's stays flat), its claims take the row lock, and each variant fails
// exactly the checks it names, the cost checks included.
func TestClaimsAtScaleOnPostgres(t *testing.T) {
	url := pgtest.URL(t)
	sc := &Lesson
	t.Run("designed", func(t *testing.T) {
		t.Parallel()
		r := executeOnPostgres(t, url, sc, "")
		if failed := r.FailedChecks(); len(failed) > 0 {
			t.Fatalf("failed checks %v\nmetrics %v", failed, r.Metrics)
		}
		lessontest.CheckSQLTruth(t, r)
		locked := 0
		for _, s := range r.Statements {
			if strings.Contains(s.Name, "claim: select") && strings.Contains(s.SQL, "FOR UPDATE SKIP LOCKED") {
				locked++
			}
		}
		if locked != 2 {
			t.Errorf("%d claim selects ran with FOR UPDATE SKIP LOCKED, want the lesson's and the indexed one's", locked)
		}
		// Each backlog was seeded with room for the drain's row versions:
		// the table keeps its pages, and the planner its plans.
		drained := 0
		for _, e := range r.Timeline {
			var before, after int
			if e.Action != "drained" {
				continue
			}
			i := strings.Index(e.Detail, "the table filled ")
			if i < 0 {
				t.Fatalf("drained: %q names no pages", e.Detail)
			}
			if _, err := fmt.Sscanf(e.Detail[i:], "the table filled %d pages before the drain and %d after", &before, &after); err != nil || before != after || before == 0 {
				t.Errorf("%q: %d pages before the drain, %d after (%v); want the same", e.Detail, before, after, err)
			}
			drained++
		}
		if drained != s21Drains {
			t.Errorf("%d drains named their pages, want %d", drained, s21Drains)
		}
		plans := r.Tables[1]
		if len(plans.Rows) != 2 || !strings.Contains(plans.Rows[0][1], "Seq Scan") ||
			!strings.Contains(plans.Rows[1][1], "Index Scan using ix_outboxmessages_unprocessed_createdatutc_id") {
			t.Errorf("plans %v: want the lesson's Seq Scan and the indexed claim's walk of the partial index", plans.Rows)
		}
	})
	for _, v := range sc.Variants {
		t.Run(v.Name, func(t *testing.T) {
			t.Parallel()
			r := executeOnPostgres(t, url, sc, v.Name)
			failed := slices.Sorted(slices.Values(r.FailedChecks()))
			if want := slices.Sorted(slices.Values(v.Breaks)); !slices.Equal(failed, want) {
				t.Errorf("failed checks %v, want %v\nmetrics %v", failed, want, r.Metrics)
			}
			lessontest.CheckSQLTruth(t, r)
		})
	}
}
