package scenarios

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/outboxlab/outboxlab/lab"
)

// measuresTime names scenarios whose checks compare wall-clock
// measurements; they run alone, not beside other tests.
var measuresTime = map[string]bool{"session-21-claims-at-scale": true}

// TestScenariosAndVariants runs every registered scenario as designed and
// with each of its variants. As designed, every check passes and the checks
// are exactly the documented ones, in order. Each variant fails at least the
// checks it documents. For both, the report's SQL is the statement ledger's
// (see checkSQLTruth), and a variant's SQL differs from the lesson's exactly
// where its mistake lies (see checkMistakeDiff).
func TestScenariosAndVariants(t *testing.T) {
	for _, sc := range All() {
		t.Run(sc.Name, func(t *testing.T) {
			if !measuresTime[sc.Name] {
				t.Parallel()
			}
			r := mustExecute(t, sc, "")
			checkDesigned(t, sc, r)
			checkSQLTruth(t, r)
			for _, v := range sc.Variants {
				t.Run(v.Name, func(t *testing.T) {
					if !measuresTime[sc.Name] {
						t.Parallel()
					}
					vr := mustExecute(t, sc, v.Name)
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
					checkMistakeDiff(t, r, vr)
				})
			}
		})
	}
}

// checkDesigned asserts a run of the lesson as designed passed with its
// documented checks, in order, and is complete.
func checkDesigned(t *testing.T, sc *Scenario, r *lab.Result) {
	t.Helper()
	if !r.Passed() {
		t.Fatalf("failed checks %v\nmetrics %v", r.FailedChecks(), r.Metrics)
	}
	var got, want []string
	for _, c := range r.Checks {
		got = append(got, c.Name)
	}
	for _, c := range sc.Checks {
		want = append(want, c.Name)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("checks %v, documented %v", got, want)
	}
	if r.Verdict == "" || len(r.Schema) == 0 || len(r.Timeline) == 0 || len(r.Tables) == 0 {
		t.Fatalf("incomplete result: verdict %q, %d schema, %d events, %d tables", r.Verdict, len(r.Schema), len(r.Timeline), len(r.Tables))
	}
}

// checkBrokenByTest lists checks no variant breaks, with the test that
// makes each fail instead.
var checkBrokenByTest = map[string]string{
	"session-15-competing-workers-no-claim/loaded_a":              "TestNoClaimChecksCanFail",
	"session-15-competing-workers-no-claim/unique_messages":       "TestNoClaimChecksCanFail",
	"session-15-competing-workers-no-claim/outbox_processed":      "TestNoClaimChecksCanFail",
	"session-15-competing-workers-no-claim/outbox_pending":        "TestNoClaimChecksCanFail",
	"session-15-competing-workers-no-claim/paid":                  "TestNoClaimChecksCanFail",
	"session-15-competing-workers-no-claim/failed":                "TestNoClaimChecksCanFail",
	"session-15-competing-workers-no-claim/duplicate_rows":        "store.TestAuditQueries",
	"session-15-outbox-leasing/ownership_violations":              "TestOutboxLeasingOwnershipViolationsCanFail",
	"session-15-late-finalize/processing_attempts":                "TestLateFinalizeChecksCanFail",
	"session-15-outbox-leasing/failed":                            "store.TestAuditQueries",
	"session-15-outbox-leasing/duplicate_rows":                    "store.TestAuditQueries",
	"session-15-outbox-leasing/outbox_pending":                    "store.TestAuditQueries",
	"session-15-outbox-leasing/claims_bounded":                    "TestOutboxLeasingClaimsBounded",
	"session-14-transactional-outbox/orphans_before":              "TestTransactionalOutboxChecksCanFail",
	"session-14-transactional-outbox/outbox_rows_per_payment":     "TestTransactionalOutboxChecksCanFail",
	"session-16-stale-ack-fencing/reclaim_after_delivery_rows":    "TestStaleAckChecksCanFail",
	"session-17-lease-renewal/steps":                              "TestLeaseRenewalChecksCanFail",
	"session-17-lease-renewal/step_1_claim_succeeds":              "TestLeaseRenewalChecksCanFail",
	"session-17-lease-renewal/step_4_renew_extends":               "TestLeaseRenewalChecksCanFail",
	"session-17-lease-renewal/step_5_claim_blocked_by_live_lease": "TestLeaseRenewalChecksCanFail",
	"session-18-lease-expiry-after-send/published":                "TestLeaseExpiryAfterSendChecksCanFail",
	"session-19-failure-classes/rows":                             "TestFailureClassesChecksCanFail",
	"session-20-inbox-retention/broker_passed_after_window":       "store.TestOfferDedupWindow",
	"session-22-heartbeat-and-shutdown/completed_by_new_owner":    "TestSession22ChecksCanFail",

	// Session 14's guards on a real crash and on the provider's ledger.
	"session-14-transactional-outbox/crashes_injected":              "TestTransactionalOutboxChecksCanFail",
	"session-14-transactional-outbox/keys_not_created_exactly_once": "TestTransactionalOutboxChecksCanFail",
}

func TestEveryCheckCanFail(t *testing.T) {
	for _, sc := range All() {
		broken := map[string]bool{}
		for _, v := range sc.Variants {
			for _, name := range v.Breaks {
				broken[name] = true
			}
		}
		for _, c := range sc.Checks {
			if !broken[c.Name] && checkBrokenByTest[sc.Name+"/"+c.Name] == "" {
				t.Errorf("%s: check %s is broken by no variant and no listed test", sc.Name, c.Name)
			}
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
	opts := DefaultOptions()
	opts.TempRoot = t.TempDir()
	r, err := Execute(context.Background(), sc, variant, opts, false)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// executeSwapped runs sc as designed with its statement set passed through
// swap first: one statement replaced, as a variant would, to show a check
// no variant breaks can fail.
func executeSwapped[T any](t *testing.T, sc *Scenario, swap func(T) T) *lab.Result {
	t.Helper()
	opts := DefaultOptions()
	opts.TempRoot = t.TempDir()
	opts.swap = func(set any) any { return swap(set.(T)) }
	r, err := Execute(context.Background(), sc, "", opts, false)
	if err != nil {
		t.Fatal(err)
	}
	return r
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
