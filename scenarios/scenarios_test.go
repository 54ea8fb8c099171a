package scenarios

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outboxlab/outboxlab/instance"
	"github.com/outboxlab/outboxlab/internal/pgtest"
	"github.com/outboxlab/outboxlab/internal/runcache"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/store"
)

// TestScenariosAndVariants runs every registered scenario as designed and
// with each of its variants. As designed, every check passes and the checks
// are exactly the documented ones, in order. Each variant fails at least the
// checks it documents. For both, the report's SQL is the statement ledger's
// (see checkSQLTruth), and a variant's SQL differs from the lesson's exactly
// where its mistake lies (see checkMistakeDiff).
func TestScenariosAndVariants(t *testing.T) { testScenariosAndVariants(t, "") }

// TestScenariosAndVariantsOnPostgres is the same on PostgreSQL, the
// PostgreSQL-only variants included.
func TestScenariosAndVariantsOnPostgres(t *testing.T) { testScenariosAndVariants(t, pgtest.URL(t)) }

func testScenariosAndVariants(t *testing.T, db string) {
	t.Parallel()
	engine := engineOf(Options{Database: db})
	for _, sc := range All() {
		t.Run(sc.Name, func(t *testing.T) {
			t.Parallel() // every check is on the database or the ledgers, never on wall-clock time
			r := executeOn(t, db, sc, "", 0)
			checkDesigned(t, sc, r, engine)
			checkSQLTruth(t, r)
			checkEventsAgreeWithLedgers(t, r)
			checkTextsFromTheRun(t, sc, r)
			for _, v := range sc.Variants {
				if v.Engine != "" && v.Engine != engine {
					continue // a mistake of another engine's, run by that engine's test
				}
				t.Run(v.Name, func(t *testing.T) {
					t.Parallel()
					vr := executeOn(t, db, sc, v.Name, variantBound(sc, v.Name))
					failed := vr.FailedChecks()
					if vr.Passed() {
						t.Fatal("variant passed every check")
					}
					for _, name := range v.Breaks {
						if !slices.Contains(failed, name) {
							t.Errorf("check %s did not fail (failed: %v)", name, failed)
						}
					}
					checkSQLTruth(t, vr)
					checkEventsAgreeWithLedgers(t, vr)
					checkTextsFromTheRun(t, sc, vr)
					lesson := r
					if b := variantBound(sc, v.Name); b != 0 && b != DefaultExploreBound {
						// Compare with the lesson explored to the same bound.
						lesson = executeOn(t, db, sc, "", b)
					}
					checkMistakeDiff(t, lesson, vr)
				})
			}
		})
	}
}

// checkDesigned asserts a run of the lesson as designed passed with its
// documented checks, in order, and is complete.
func checkDesigned(t *testing.T, sc *Scenario, r *lab.Result, engine store.Engine) {
	t.Helper()
	if !r.Passed() {
		t.Fatalf("failed checks %v\nmetrics %v", r.FailedChecks(), r.Metrics)
	}
	var got, want []string
	for _, c := range r.Checks {
		got = append(got, c.Name)
	}
	for _, c := range sc.Checks {
		if c.Engine == "" || c.Engine == engine {
			want = append(want, c.Name)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("checks %v, documented %v", got, want)
	}
	checkFacts(t, sc, r)
	if r.Verdict == "" || len(r.Schema) == 0 || len(r.Timeline) == 0 || len(r.Tables) == 0 {
		t.Fatalf("incomplete result: verdict %q, %d schema, %d events, %d tables", r.Verdict, len(r.Schema), len(r.Timeline), len(r.Tables))
	}
}

// checkFacts asserts a run reported the scenario's documented facts, in
// order, each measured and kept among the metrics, and none as a check.
func checkFacts(t *testing.T, sc *Scenario, r *lab.Result) {
	t.Helper()
	if len(r.Facts) != len(sc.Facts) {
		t.Fatalf("facts %v, documented %v", r.Facts, sc.Facts)
	}
	for i, f := range r.Facts {
		if _, measured := r.Metric(f.Name); f.Name != sc.Facts[i].Name || !measured || f.Value == "not measured" {
			t.Errorf("fact %d: %+v, documented %s: it must be measured and kept among the metrics", i, f, sc.Facts[i].Name)
		}
		if slices.ContainsFunc(r.Checks, func(c lab.Check) bool { return c.Name == f.Name }) {
			t.Errorf("fact %s is also a check", f.Name)
		}
	}
}

// TestFactsAreNeverChecks: a figure the script fixes is documented as a
// fact or as a check, never both; no variant and no statement swap claims
// to break a fact; and everything a variant or a swap claims to break is a
// documented check, so TestEveryCheckCanFail counts only checks.
func TestFactsAreNeverChecks(t *testing.T) {
	for _, sc := range All() {
		checks, facts := map[string]bool{}, map[string]bool{}
		for _, c := range sc.Checks {
			checks[c.Name] = true
		}
		for _, f := range sc.Facts {
			if checks[f.Name] || facts[f.Name] {
				t.Errorf("%s: fact %s is documented twice, or as a check too", sc.Name, f.Name)
			}
			if f.About == "" || f.Why == "" {
				t.Errorf("%s: fact %s must say what it counts and why the script fixes it", sc.Name, f.Name)
			}
			facts[f.Name] = true
		}
		claimed := map[string]string{}
		for _, v := range sc.Variants {
			for _, name := range v.Breaks {
				claimed[name] = "variant " + v.Name
			}
		}
		for _, b := range checkBreakers {
			if b.scenario == sc.Name {
				for _, name := range b.breaks {
					claimed[name] = "swap " + b.name
				}
			}
		}
		for _, g := range allTaughtGuards() {
			if g.scenario == sc.Name {
				for _, name := range g.breaks {
					claimed[name] = "removing the guard " + g.guard
				}
			}
		}
		for name, by := range claimed {
			if !checks[name] {
				t.Errorf("%s: %s claims to break %s, which is no documented check (a fact cannot fail)", sc.Name, by, name)
			}
		}
	}
}

// checkBreaker runs a scenario as designed with one statement of its set
// replaced, the way a variant would, and names the checks that must then
// fail. It is the proof, for a check no variant breaks, that it can fail.
// Each lesson's test file registers its breakers in an init function.
type checkBreaker struct {
	scenario string
	name     string        // the replaced statement, in words
	swap     func(any) any // returns the lesson's set with one statement replaced
	breaks   []string
}

// checkBreakers are every lesson's breakers, registered by init functions.
var checkBreakers []checkBreaker

// swapOf adapts a typed swap of a lesson's statement set to a checkBreaker's.
func swapOf[T any](f func(T) T) func(any) any { return func(s any) any { return f(s.(T)) } }

// checkBrokenByNamedTest lists the checks that no statement swap can
// break, with the test that makes each fail instead and why.
var checkBrokenByNamedTest = map[string]string{
	// Session 14's crash is the failpoint plan and a closed connection, not a
	// statement: no swap can keep it from firing or from killing the
	// instance, and only a crash that did not happen sends a key to the
	// provider twice. The named test runs the lesson with a changed design.
	"session-14-transactional-outbox/crashes_injected":              "TestTransactionalOutboxChecksCanFail",
	"session-14-transactional-outbox/keys_not_created_exactly_once": "TestTransactionalOutboxChecksCanFail",
}

// TestEveryCheckCanFail shows every check of every scenario can fail: it
// is broken by a variant, or by a registered statement swap that this test
// runs and asserts, or by removing a taught guard (which
// TestEveryTaughtGuardDecides runs and asserts), or (where no swap can) by
// a named test.
func TestEveryCheckCanFail(t *testing.T) {
	t.Parallel()
	for _, sc := range All() {
		broken := map[string]bool{}
		for _, v := range sc.Variants {
			for _, name := range v.Breaks {
				broken[name] = true
			}
		}
		for _, b := range checkBreakers {
			if b.scenario == sc.Name {
				for _, name := range b.breaks {
					broken[name] = true
				}
			}
		}
		for _, g := range allTaughtGuards() {
			if g.scenario == sc.Name {
				for _, name := range g.breaks {
					broken[name] = true
				}
			}
		}
		for _, c := range sc.Checks {
			if !broken[c.Name] && checkBrokenByNamedTest[sc.Name+"/"+c.Name] == "" {
				t.Errorf("%s: check %s is broken by no variant, no statement swap and no named test", sc.Name, c.Name)
			}
		}
	}
	for _, b := range checkBreakers {
		t.Run(b.scenario+"/"+b.name, func(t *testing.T) {
			t.Parallel()
			sc, err := Lookup(b.scenario)
			if err != nil {
				t.Fatal(err)
			}
			opts := DefaultOptions()
			opts.TempRoot, opts.swap = t.TempDir(), b.swap
			r, err := Execute(context.Background(), sc, "", opts, false)
			if err != nil {
				t.Fatal(err)
			}
			assertFails(t, r, b.breaks...)
		})
	}
}

func TestLookup(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		sc, err := Lookup("session-15-outbox-leasing")
		if err != nil || sc.Name != "session-15-outbox-leasing" {
			t.Fatalf("Lookup = %v, %v", sc, err)
		}
	})
	t.Run("ErrUnknownSuggests", func(t *testing.T) {
		_, err := Lookup("session-15-outbox-leasin")
		var unknown *UnknownScenarioError
		if !errors.As(err, &unknown) || len(unknown.Suggestions) == 0 || unknown.Suggestions[0] != "session-15-outbox-leasing" {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("ErrUnknownFarOff", func(t *testing.T) {
		_, err := Lookup("zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz")
		var unknown *UnknownScenarioError
		if !errors.As(err, &unknown) || len(unknown.Suggestions) != 0 {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestExecuteUnknownVariant(t *testing.T) {
	sc, _ := Lookup("session-15-outbox-leasing")
	_, err := Execute(context.Background(), sc, "no-such-mistake", DefaultOptions(), false)
	var unknown *UnknownVariantError
	if !errors.As(err, &unknown) {
		t.Fatalf("err = %v, want UnknownVariantError", err)
	}
}

func TestRegistryNamesUnique(t *testing.T) {
	seen := map[string]bool{}
	for _, sc := range All() {
		if seen[sc.Name] {
			t.Fatalf("duplicate scenario %s", sc.Name)
		}
		seen[sc.Name] = true
		if sc.Session == "" || sc.FileTag == "" || sc.Title == "" || sc.Teaches == "" || sc.Run == nil {
			t.Errorf("%s: incomplete registration", sc.Name)
		}
	}
}

func mustExecute(t *testing.T, sc *Scenario, variant string) *lab.Result {
	t.Helper()
	return executeOn(t, "", sc, variant, variantBound(sc, variant))
}

// variantBound is the explorer's bound for a variant (see
// exploreVariantBound), or 0: the scenario's default.
func variantBound(sc *Scenario, variant string) int {
	if b, ok := exploreVariantBound[variant]; ok && sc == &interleavingExplorer {
		return b
	}
	return 0
}

// executeOn runs sc's variant ("" as designed) on db ("" for SQLite), the
// explorer to bound (0: its default).
func executeOn(t *testing.T, db string, sc *Scenario, variant string, bound int) *lab.Result {
	t.Helper()
	return executeRun(t, sc, runKey{variant: variant, database: db, bound: bound})
}

// executeRun runs sc as key says with default options otherwise, once per
// test binary: every later call of the same lesson and key gets the first
// run's result (see runs).
func executeRun(t *testing.T, sc *Scenario, key runKey) *lab.Result {
	t.Helper()
	key.lesson = sc.Name
	r, err := runs.Get(key, func() (*lab.Result, error) {
		opts := DefaultOptions()
		opts.TempRoot = t.TempDir() // the run removes its own folder when it ends
		opts.ExploreBound = key.bound
		opts.Database = key.database
		if key.processes {
			opts.Processes, opts.ChildTimeout = true, testChildTimeout
		}
		return Execute(context.Background(), sc, key.variant, opts, false)
	})
	if err != nil {
		t.Fatalf("%s %q (%+v): %v", sc.Name, key.variant, key, err)
	}
	return r
}

// runKey names one run of a lesson with default options otherwise: the
// lesson, the variant ("" for the design), the database ("" for SQLite),
// the explorer's bound (0 for the default) and whether each instance is a
// child process.
type runKey struct {
	lesson, variant, database string
	bound                     int
	processes                 bool
}

// runs holds each run executeOn made, so the tests of this binary that
// read the same run (the registry tests, the figure tests, the guard and
// verdict tests) share one: each lesson runs once per key, not once per
// test. The results are read-only.
var runs runcache.Cache[runKey, *lab.Result]

// exploreVariantBound runs each explorer variant at the shortest bound
// that holds its shortest counterexample (explore's
// TestExploreShortestCounterexampleIsMinimal proves each length), not at
// the default bound: under the race detector an exploration to the default
// bound costs about 11 s of CPU, one to bound 3 about 1.5 s. The lesson as
// designed still runs at the default bound.
var exploreVariantBound = map[string]int{
	"complete-before-send":       4, // claim A, complete A (at 3 no ordering reaches a redelivery, so the SQL differs by more than the mistake)
	"naive-consumer":             3, // claim A, send A
	"projection-without-version": 3, // claim A
	"complete-without-token":     5, // claim A, send A, expire, claim B, complete A
}

// assertFails asserts each named check failed in r.
func assertFails(t *testing.T, r *lab.Result, checks ...string) {
	t.Helper()
	failed := r.FailedChecks()
	for _, c := range checks {
		if !slices.Contains(failed, c) {
			t.Errorf("check %s did not fail (failed: %v)", c, failed)
		}
	}
}

// TestHiddenMistakeFails: options that hide a variant's mistake (a broker
// window shorter than the resend's delay) do not let the variant pass as a
// safe design: it fails mistake_exposed and says so.
func TestHiddenMistakeFails(t *testing.T) {
	t.Parallel()
	sc, err := Lookup("session-18-lease-expiry-after-send")
	if err != nil {
		t.Fatal(err)
	}
	opts := DefaultOptions()
	opts.TempRoot, opts.BrokerWindow = t.TempDir(), 10*time.Second
	r, err := Execute(context.Background(), sc, "broker-dedup-window", opts, false)
	if err != nil {
		t.Fatal(err)
	}
	if failed := r.FailedChecks(); !slices.Equal(failed, []string{"mistake_exposed"}) || !strings.HasPrefix(r.Verdict, "MISTAKE NOT EXPOSED") {
		t.Fatalf("failed %v, verdict %q", failed, r.Verdict)
	}
}

// newTestEnv is an Env for a test that calls a lesson's parts directly:
// a fresh folder, a ledger of its own and the instances in the lab's
// process.
func newTestEnv(t testing.TB, sc *Scenario) *Env {
	t.Helper()
	env := &Env{Scenario: sc, Dir: t.TempDir(), Options: DefaultOptions(), Ledger: &store.Ledger{}}
	env.Instances = instance.New(instance.Config{Open: env.Open, Ledger: env.Ledger})
	return env
}
