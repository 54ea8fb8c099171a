// Package lessontest runs lessons for tests: each lesson once per test
// binary and key (see [Run]), with bounded waits on child processes, and
// reads what a run left (its tables, its timeline). The registry's tests
// and each lesson folder's tests share it.
package lessontest

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outboxlab/outboxlab/instance"
	"github.com/outboxlab/outboxlab/internal/runcache"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/store"
)

// ChildTimeout bounds each wait on a child in the tests: a child that
// never answers fails its test in seconds, not after
// [proc.DefaultTimeout]; no call of a lesson's child takes near that long,
// even from the race-built binary on a loaded machine.
const ChildTimeout = 5 * time.Second

// Key names one run of a lesson with default options otherwise: the
// variant ("" for the design), the database ("" for SQLite), the
// explorer's bound (0 for the default) and whether each instance is a
// child process.
type Key struct {
	Variant, Database string
	Bound             int
	Processes         bool
}

// cacheKey is a [Key] of one lesson.
type cacheKey struct {
	lesson string
	Key
}

// runs holds each run [Run] made, so the tests of one binary that read
// the same run (the registry tests, the figure tests, the guard and
// verdict tests) share one: each lesson runs once per key, not once per
// test. The results are read-only.
var runs runcache.Cache[cacheKey, *lab.Result]

// Run runs sc as key says, with default options otherwise, once per test
// binary: every later call of the same lesson and key gets the first
// run's result.
func Run(t testing.TB, sc *lesson.Scenario, key Key) *lab.Result {
	t.Helper()
	r, err := runs.Get(cacheKey{sc.Name, key}, func() (*lab.Result, error) {
		opts := lesson.DefaultOptions()
		opts.TempRoot = t.TempDir() // the run removes its own folder when it ends
		opts.ExploreBound = key.Bound
		opts.Database = key.Database
		if key.Processes {
			opts.Processes, opts.ChildTimeout = true, ChildTimeout
		}
		return lesson.Execute(context.Background(), sc, key.Variant, opts, false)
	})
	if err != nil {
		t.Fatalf("%s %q (%+v): %v", sc.Name, key.Variant, key, err)
	}
	return r
}

// On runs sc's variant ("" as designed) on db ("" for SQLite), the
// explorer to bound (0: its default), once per test binary.
func On(t testing.TB, db string, sc *lesson.Scenario, variant string, bound int) *lab.Result {
	t.Helper()
	return Run(t, sc, Key{Variant: variant, Database: db, Bound: bound})
}

// Must runs sc's variant ("" as designed) on SQLite, an explorer's
// variant at its shortest bound, once per test binary.
func Must(t testing.TB, sc *lesson.Scenario, variant string) *lab.Result {
	t.Helper()
	return On(t, "", sc, variant, Bound(sc, variant))
}

// Bound is the explorer's bound the tests run variant at
// ([lesson.Variant.ShortestBound]), or 0: the scenario's default.
func Bound(sc *lesson.Scenario, variant string) int {
	v, _ := sc.Variant(variant)
	return v.ShortestBound
}

// Execute runs sc's variant with opts in a folder of the test's, without
// the cache: for a run with options of its own (a swap, a setting).
func Execute(t testing.TB, sc *lesson.Scenario, variant string, opts lesson.Options) *lab.Result {
	t.Helper()
	if opts.TempRoot == "" {
		opts.TempRoot = t.TempDir()
	}
	if opts.Processes && opts.ChildTimeout == 0 {
		opts.ChildTimeout = ChildTimeout
	}
	r, err := lesson.Execute(context.Background(), sc, variant, opts, false)
	if err != nil {
		t.Fatalf("%s %q: %v", sc.Name, variant, err)
	}
	return r
}

// AssertFails asserts each named check failed in r.
func AssertFails(t testing.TB, r *lab.Result, checks ...string) {
	t.Helper()
	failed := r.FailedChecks()
	for _, c := range checks {
		if !slices.Contains(failed, c) {
			t.Errorf("check %s did not fail (failed: %v)", c, failed)
		}
	}
}

// NewEnv is an Env for a test that calls a lesson's parts directly: a
// fresh folder, a ledger of its own and the instances in the lab's
// process.
func NewEnv(t testing.TB, sc *lesson.Scenario) *lesson.Env {
	t.Helper()
	env := &lesson.Env{Scenario: sc, Dir: t.TempDir(), Options: lesson.DefaultOptions(), Ledger: &store.Ledger{}}
	env.Instances = instance.New(instance.Config{Open: env.Open, Ledger: env.Ledger})
	return env
}

// Table is r's table titled title; the test fails without one.
func Table(t testing.TB, r *lab.Result, title string) lab.Table {
	t.Helper()
	for _, tb := range r.Tables {
		if tb.Title == title {
			return tb
		}
	}
	t.Fatalf("%s: no %q table", r.Scenario, title)
	return lab.Table{}
}

// TimelineSays reports whether a row of r's timeline with action (any, if
// "") has a detail holding text.
func TimelineSays(r *lab.Result, action, text string) bool {
	for _, e := range r.Timeline {
		if (action == "" || e.Action == action) && strings.Contains(e.Detail, text) {
			return true
		}
	}
	return false
}

// CheckFailedVerdictShape asserts a lesson's verdict words a failed run
// the way every lesson's does: without a variant, "NOT SHOWN: the design
// did not hold this run" naming the failed check; with one, only what the
// lesson measured ([lesson.Execute] opens a variant's verdict with its
// failed checks). verdict is the lesson's verdict of a run whose one
// check, some_check, failed, with variant ("" for the design).
func CheckFailedVerdictShape(t *testing.T, verdict func(failed *lab.Result, variant string) string) {
	t.Helper()
	failed := func() *lab.Result { return &lab.Result{Checks: []lab.Check{{Name: "some_check", Passed: false}}} }
	if got := verdict(failed(), ""); !strings.HasPrefix(got, "NOT SHOWN: the design did not hold this run") || !strings.Contains(got, "some_check") {
		t.Errorf("as designed: %q", got)
	}
	if got := verdict(failed(), "some-mistake"); strings.Contains(got, "DESIGN BROKEN") || strings.Contains(got, "some_check") {
		t.Errorf("variant: %q: lesson.Execute opens a variant's verdict with its failed checks, the lesson adds only what it measured", got)
	}
}
