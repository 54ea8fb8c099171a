package main

import (
	"context"
	"testing"

	"github.com/outboxlab/outboxlab/internal/runcache"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/lesson"
)

// lessonRun names one run of a lesson on SQLite, in the lab's process,
// with default options otherwise.
type lessonRun struct {
	lesson, variant string
	bound           int // the explorer's bound; 0 for the default
}

// lessonRuns holds each run executeLesson made, so the tests that render
// the same run (the page-width and mark-count tests) share one. The
// results are read-only.
var lessonRuns runcache.Cache[lessonRun, *lab.Result]

// executeLesson runs sc's variant ("" for the design) once per test
// binary: later calls with the same key get the first run's result.
func executeLesson(t *testing.T, sc *lesson.Scenario, variant string, bound int) *lab.Result {
	t.Helper()
	if sc.Name != "explore" {
		bound = 0 // only the explorer has a bound: every other lesson shares one run
	}
	key := lessonRun{lesson: sc.Name, variant: variant, bound: bound}
	r, err := lessonRuns.Get(key, func() (*lab.Result, error) {
		opts := lesson.DefaultOptions()
		opts.TempRoot = t.TempDir() // the run removes its own folder when it ends
		opts.ExploreBound = bound
		return lesson.Execute(context.Background(), sc, variant, opts, false)
	})
	if err != nil {
		t.Fatalf("%s %q: %v", sc.Name, variant, err)
	}
	return r
}
