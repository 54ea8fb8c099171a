package scenarios

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/outboxlab/outboxlab/lab"
)

// TestScenariosPass runs every registered scenario as designed: every check
// passes, and the checks are exactly the documented ones, in order.
func TestScenariosPass(t *testing.T) {
	for _, sc := range All() {
		t.Run(sc.Name, func(t *testing.T) {
			r := mustExecute(t, sc, "")
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
		})
	}
}

// TestVariantsFail shows every check can fail: each variant fails exactly
// the checks it documents, and every check of a scenario with variants is
// broken by at least one of them or by a test named in checkBrokenByTest.
func TestVariantsFail(t *testing.T) {
	for _, sc := range All() {
		for _, v := range sc.Variants {
			t.Run(sc.Name+"/"+v.Name, func(t *testing.T) {
				r := mustExecute(t, sc, v.Name)
				failed := r.FailedChecks()
				if r.Passed() {
					t.Fatal("variant passed every check")
				}
				for _, name := range v.Breaks {
					if !slices.Contains(failed, name) {
						t.Errorf("check %s did not fail (failed: %v)", name, failed)
					}
				}
			})
		}
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
	"session-15-outbox-leasing/failed":                            "store.TestAuditQueries",
	"session-15-outbox-leasing/duplicate_rows":                    "store.TestAuditQueries",
	"session-15-outbox-leasing/outbox_pending":                    "store.TestAuditQueries",
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
	r, err := Execute(context.Background(), sc, variant, DefaultOptions(), false)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
