package scenarios

import (
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/lesson/lessontest"
	"github.com/outboxlab/outboxlab/scenarios/explorer"
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
				continue // decided by its teacher's run (TestEveryGuardIsAccountedFor)
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

// TestEveryGuardIsAccountedFor walks every statement that updates (an
// UPDATE, a WITH ... UPDATE, an upsert's DO UPDATE) every lesson runs and
// asserts that each top-level guard of its WHERE clause (a line of its
// own, "  AND ..."; a subquery's predicates choose rows, they guard none)
// is among the lesson's Guards: decided by the lesson's own run, or a gap
// with its reason (TestEveryTaughtGuardDecides runs both), or taught by
// another lesson whose run decides it; or part of the lab's broker. The
// explorer is left out: its invariants judge its statements, whatever
// ordering breaks them.
func TestEveryGuardIsAccountedFor(t *testing.T) {
	for _, sc := range All() {
		if sc.Name == explorer.Lesson.Name {
			continue
		}
		for _, st := range sc.Statements {
			if !strings.Contains(st.SQL, "UPDATE") { // an UPDATE, a WITH ... UPDATE, an upsert's DO UPDATE
				continue
			}
			for _, m := range guardLine.FindAllStringSubmatch(st.SQL, -1) {
				guard := m[1]
				if slices.Contains(brokerModel[st.Name], guard) {
					continue
				}
				i := slices.IndexFunc(sc.Guards, func(g lesson.Guard) bool { return g.Stmt.SQL == st.SQL && g.Guard == guard })
				if i < 0 {
					t.Errorf("%s, %q: guard %q is accounted for nowhere: list it in the lesson's Guards", sc.Name, st.Name, guard)
					continue
				}
				g := sc.Guards[i]
				if g.TaughtBy == "" {
					continue
				}
				teacher, err := Lookup(g.TaughtBy)
				if err != nil {
					t.Errorf("%s, %q: guard %q is taught by %v", sc.Name, st.Name, guard, err)
					continue
				}
				if !slices.ContainsFunc(teacher.Guards, func(tg lesson.Guard) bool {
					return tg.Guard == guard && tg.TaughtBy == "" && len(tg.Breaks) > 0
				}) {
					t.Errorf("%s, %q: guard %q is taught by %s, whose run does not decide it", sc.Name, st.Name, guard, g.TaughtBy)
				}
			}
		}
	}
}
