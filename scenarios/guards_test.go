package scenarios

import (
	"regexp"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/lesson/lessontest"
	"github.com/outboxlab/outboxlab/store"
)

// swapAnywhere swaps guardless, a lesson statement without one guard, into
// every statement set that holds the statement, and counts the sets.
func swapAnywhere(guardless store.Stmt, swaps *atomic.Int32) func(any) any {
	return func(set any) any {
		out, err := store.Swap(set, guardless)
		if err != nil {
			return set // a set of the lesson that does not hold the statement
		}
		swaps.Add(1)
		return out
	}
}

// TestEveryTaughtGuardDecides: removing any guard a lesson's own run is
// said to decide ([lesson.Guard]) from its statement makes that run exit
// 1 (the named checks fail, and only they), or the guard is listed as a
// known gap with its reason, and then the run still passes.
func TestEveryTaughtGuardDecides(t *testing.T) {
	t.Parallel()
	for _, sc := range All() {
		for _, g := range sc.Guards {
			if g.TaughtBy != "" {
				continue // decided by its teacher's run (TestEveryLessonIsComplete checks it does)
			}
			t.Run(sc.Name+"/"+g.Stmt.Name+"/"+g.Guard, func(t *testing.T) {
				t.Parallel()
				if !slices.ContainsFunc(sc.Statements, func(s store.Stmt) bool { return s.SQL == g.Stmt.SQL }) {
					t.Fatalf("%s does not teach %q", sc.Name, g.Stmt.Name)
				}
				guardless, swaps := lessontest.WithoutGuard(t, g.Stmt, g.Guard), &atomic.Int32{}
				opts := lesson.DefaultOptions()
				opts.Swap = swapAnywhere(guardless, swaps)
				if g.Swap != nil {
					typed := g.Swap(guardless)
					opts.Swap = func(set any) any { swaps.Add(1); return typed(set) } // counted when the lesson runs it
				}
				r := lessontest.Execute(t, sc, "", opts)
				if swaps.Load() == 0 {
					t.Fatalf("no statement set of %s holds %q", sc.Name, g.Stmt.Name)
				}
				failed := r.FailedChecks()
				if g.Gap != "" {
					if !r.Passed() {
						t.Fatalf("known gap closed: without the guard the run fails %v; move the guard from Gap to Breaks", failed)
					}
					t.Logf("known gap: the guard never decides in this lesson's run: %s", g.Gap)
					return
				}
				if r.Passed() {
					t.Fatal("the run passed without the guard: the guard decides nothing in it")
				}
				want := slices.Clone(g.Breaks)
				slices.Sort(want)
				slices.Sort(failed)
				if !slices.Equal(failed, want) {
					t.Fatalf("failed checks %v, want %v", failed, want)
				}
			})
		}
	}
}

// guardLine matches one top-level conjunct of a WHERE clause, as the
// store writes them: a line that opens with two spaces and AND.
var guardLine = regexp.MustCompile(`\n  AND ([^\n]*)`)

// brokerModel are the statements of the lab's stand-in for a broker:
// lessons run them to deliver and redeliver, and teach none of their
// guards but the receipt (session 18).
var brokerModel = map[string][]string{
	store.RedeliverExpired.Name: {"state = 'in_flight'", "delivered_at <= :timeout_cutoff"},
	store.AckDelivery.Name:      {"consumer = :consumer", "state = 'in_flight'"},
}
