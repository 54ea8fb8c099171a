package explorer

import (
	"strings"
	"testing"

	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/lesson/lessontest"
)

// TestProgressSaysHowFar: given somewhere to say it, the explorer's run
// says how many orderings it has explored at its bound, on the status
// line package progress draws, and its result is the same as without.
func TestProgressSaysHowFar(t *testing.T) {
	t.Parallel()
	var line strings.Builder
	opts := lesson.DefaultOptions()
	opts.ExploreBound, opts.Progress = 2, &line
	r := lessontest.Execute(t, &Lesson, "", opts)
	if !r.Passed() {
		t.Fatalf("failed %v", r.FailedChecks())
	}
	if got := line.String(); !strings.HasPrefix(got, "explore: bound 2: orderings explored 0\n") {
		t.Errorf("progress %q, want the explorer's status line", got)
	}
}
