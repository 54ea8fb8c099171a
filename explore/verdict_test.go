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
