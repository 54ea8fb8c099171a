package scenarios

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outboxlab/outboxlab/internal/pgtest"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/lesson/lessontest"
	"github.com/outboxlab/outboxlab/scenarios/explorer"
	"github.com/outboxlab/outboxlab/store"
)

// TestScenariosAndVariants runs every registered scenario as designed and
// with each of its variants. As designed, every check passes and the checks
// are exactly the documented ones, in order. Each variant fails at least the
// checks it documents. For both, the report's SQL is the statement ledger's
// (see lessontest.CheckSQLTruth), and a variant's SQL differs from the lesson's exactly
// where its mistake lies (see lessontest.CheckMistakeDiff).
func TestScenariosAndVariants(t *testing.T) { testScenariosAndVariants(t, "") }

// TestScenariosAndVariantsOnPostgres is the same on PostgreSQL, the
// PostgreSQL-only variants included.
func TestScenariosAndVariantsOnPostgres(t *testing.T) { testScenariosAndVariants(t, pgtest.URL(t)) }

func testScenariosAndVariants(t *testing.T, db string) {
	t.Parallel()
	engine := lesson.Options{Database: db}.Engine()
	for _, sc := range All() {
		t.Run(sc.Name, func(t *testing.T) {
			t.Parallel() // every check is on the database or the ledgers, never on wall-clock time
			r := lessontest.On(t, db, sc, "", 0)
			checkDesigned(t, sc, r, engine)
			lessontest.CheckSQLTruth(t, r)
			checkEventsAgreeWithLedgers(t, r)
			checkTextsFromTheRun(t, sc, r)
			for _, v := range sc.Variants {
				if v.Engine != "" && v.Engine != engine {
					continue // a mistake of another engine's, run by that engine's test
				}
				t.Run(v.Name, func(t *testing.T) {
					t.Parallel()
					vr := lessontest.On(t, db, sc, v.Name, lessontest.Bound(sc, v.Name))
					failed := vr.FailedChecks()
					if vr.Passed() {
						t.Fatal("variant passed every check")
					}
					for _, name := range v.Breaks {
						if !slices.Contains(failed, name) {
							t.Errorf("check %s did not fail (failed: %v)", name, failed)
						}
					}
					lessontest.CheckSQLTruth(t, vr)
					checkEventsAgreeWithLedgers(t, vr)
					checkTextsFromTheRun(t, sc, vr)
					lesson := r
					if b := lessontest.Bound(sc, v.Name); b != 0 && b != explorer.DefaultExploreBound {
						// Compare with the lesson explored to the same bound.
						lesson = lessontest.On(t, db, sc, "", b)
					}
					lessontest.CheckMistakeDiff(t, lesson, vr)
				})
			}
		})
	}
}

// checkDesigned asserts a run of the lesson as designed passed with its
// documented checks, in order, and is complete.
func checkDesigned(t *testing.T, sc *lesson.Scenario, r *lab.Result, engine store.Engine) {
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
func checkFacts(t *testing.T, sc *lesson.Scenario, r *lab.Result) {
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

// TestEveryCheckCanFail runs every lesson's breakers ([lesson.Breaker]):
// each makes the checks it names fail. With the variants (run by
// TestScenariosAndVariants), the guards' removals (TestEveryTaughtGuardDecides)
// and the named tests, they break every check (TestEveryLessonIsComplete).
func TestEveryCheckCanFail(t *testing.T) {
	t.Parallel()
	for _, sc := range All() {
		for _, b := range sc.Breakers {
			t.Run(sc.Name+"/"+b.Name, func(t *testing.T) {
				t.Parallel()
				opts := lesson.DefaultOptions()
				opts.Swap = b.Swap
				lessontest.AssertFails(t, lessontest.Execute(t, sc, "", opts), b.Breaks...)
			})
		}
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
	_, err := lesson.Execute(context.Background(), sc, "no-such-mistake", lesson.DefaultOptions(), false)
	var unknown *lesson.UnknownVariantError
	if !errors.As(err, &unknown) {
		t.Fatalf("err = %v, want lesson.UnknownVariantError", err)
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
	opts := lesson.DefaultOptions()
	opts.TempRoot, opts.BrokerWindow = t.TempDir(), 10*time.Second
	r, err := lesson.Execute(context.Background(), sc, "broker-dedup-window", opts, false)
	if err != nil {
		t.Fatal(err)
	}
	if failed := r.FailedChecks(); !slices.Equal(failed, []string{"mistake_exposed"}) || !strings.HasPrefix(r.Verdict, "MISTAKE NOT EXPOSED") {
		t.Fatalf("failed %v, verdict %q", failed, r.Verdict)
	}
}
