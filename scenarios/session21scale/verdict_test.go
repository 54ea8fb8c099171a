package session21scale

import (
	"testing"

	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/lesson/lessontest"
)

// TestFailedVerdictShape: the lesson words a failed run as every lesson
// does (see [lessontest.CheckFailedVerdictShape]).
func TestFailedVerdictShape(t *testing.T) {
	lessontest.CheckFailedVerdictShape(t, func(r *lab.Result, v string) string {
		return (&scaleRun{env: &lesson.Env{Variant: v}}).verdict(r, s21SmallBacklog*s21Growth)
	})
}
