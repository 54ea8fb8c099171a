package explore

import (
	"strings"
	"testing"

	"github.com/outboxlab/outboxlab/lab"
)

// TestFailedVerdictShape asserts a failed exploration without a variant
// says the design did not hold this run, naming the failed checks, and one
// with a variant names the mistake.
func TestFailedVerdictShape(t *testing.T) {
	r := &lab.Result{Checks: []lab.Check{{Name: "some_check", Passed: false}}}
	if got := exploreVerdict("", &explorer{}, r); !strings.HasPrefix(got, "NOT SHOWN: the design did not hold this run") || !strings.Contains(got, "some_check") {
		t.Errorf("as designed: %q", got)
	}
	if got := exploreVerdict("some-mistake", &explorer{}, r); !strings.HasPrefix(got, `DESIGN BROKEN by the "some-mistake" mistake`) {
		t.Errorf("variant: %q", got)
	}
}
