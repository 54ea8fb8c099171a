package session18expiry

import (
	"context"
	"slices"
	"testing"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/failpoint"
	"github.com/outboxlab/outboxlab/lesson/lessontest"
)

// TestLeaseExpiryAfterSendChecksCanFail injects a fault the lesson does not:
// Relay-B also crashes after its send, before completing. Nothing is
// published until a recovery relay comes, and the published check says so.
func TestLeaseExpiryAfterSendChecksCanFail(t *testing.T) {
	sc := &Lesson
	env := lessontest.NewEnv(t, sc)
	plan := failpoint.NewPlan(failpoint.Rule{Point: failpoint.AfterSendBeforeComplete, Actor: cast.RelayB, Fault: failpoint.Crash})
	r, err := playLeaseExpiryAfterSend(context.Background(), env, plan)
	if err != nil {
		t.Fatal(err)
	}
	if failed := r.FailedChecks(); !slices.Equal(failed, []string{"published"}) {
		t.Fatalf("failed checks %v, want [published]; metrics %v", failed, r.Metrics)
	}
}
