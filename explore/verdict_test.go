package explore

import (
	"strings"
	"testing"

	"github.com/outboxlab/outboxlab/lab"
)

// TestFailedVerdictShape asserts a failed exploration without a variant
// says the design did not hold this run, naming the failed checks, and one
// with a variant adds only what the run found (Execute opens a variant's
// verdict with the mistake and its failed checks): nothing when no
// counterexample was found.
func TestFailedVerdictShape(t *testing.T) {
	r := &lab.Result{Checks: []lab.Check{{Name: "some_check", Passed: false}}}
	cases := []struct {
		variant string
		ok      func(string) bool
		want    string
	}{
		{"", func(got string) bool {
			return strings.HasPrefix(got, "NOT SHOWN: the design did not hold this run") && strings.Contains(got, "some_check")
		}, "NOT SHOWN ... some_check"},
		{"some-mistake", func(got string) bool { return got == "" }, `"" (Execute opens a variant's verdict)`},
	}
	for _, c := range cases {
		if got := exploreVerdict(c.variant, &explorer{}, r); !c.ok(got) {
			t.Errorf("variant %q: verdict %q, want %s", c.variant, got, c.want)
		}
	}
}

// TestCastCounterexampleRelays checks the relays the Shows texts name,
// read from each invariant's shortest counterexample: the relay that
// completed and never sent, the relay that sent and never completed, and
// the relay whose claim came last before another relay's stale
// completion; none where the ordering holds no such action.
func TestCastCounterexampleRelays(t *testing.T) {
	cases := []struct {
		name    string
		inv     exploreInvariant
		actions []exploreAction
		role    string
		want    string
	}{
		{"CompletedNeverSent", invAtLeastOnce, []exploreAction{actClaimA, actCompleteA}, "early_completer", "Relay-A"},
		{"CompletedThenSent", invAtLeastOnce, []exploreAction{actClaimA, actCompleteA, actSendA}, "early_completer", ""},
		{"SentNeverCompleted", invEffectAtMostOnce, []exploreAction{actClaimB, actSendB}, "stopped_sender", "Relay-B"},
		{"SentThenCompleted", invEffectAtMostOnce, []exploreAction{actClaimA, actSendA, actCompleteA}, "stopped_sender", ""},
		{"NewerClaimer", invStaleCompletion, []exploreAction{actClaimA, actSendA, actExpire, actClaimB, actCompleteA}, "newer_claimer", "Relay-B"},
		{"NoOtherClaim", invStaleCompletion, []exploreAction{actClaimA, actSendA, actCompleteA}, "newer_claimer", ""},
	}
	for _, c := range cases {
		x := &explorer{}
		x.shortest[c.inv] = &orderingResult{actions: c.actions}
		r := &lab.Result{}
		castCounterexampleRelays(x, r)
		if got := r.Cast[c.role]; got != c.want {
			t.Errorf("%s: %s cast as %q, want %q", c.name, c.role, got, c.want)
		}
	}
}
