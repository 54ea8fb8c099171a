package session22heartbeat

import (
	"testing"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/lesson/lessontest"
)

// TestFailedVerdictShape: the lesson words a failed run as every lesson
// does (see [lessontest.CheckFailedVerdictShape]).
func TestFailedVerdictShape(t *testing.T) {
	lessontest.CheckFailedVerdictShape(t, func(r *lab.Result, v string) string {
		return (&heartbeatRun{env: &lesson.Env{Variant: v}}).verdict(r)
	})
}

// TestCompletedByNewOwner asserts every committed completion of e2 counts:
// the figure is 1 only for exactly one, by Relay-B.
func TestCompletedByNewOwner(t *testing.T) {
	done := func(relay string, rows int64) cast.HeartbeatCompletion {
		return cast.HeartbeatCompletion{Relay: relay, Event: hbPaused, Rows: rows}
	}
	tests := []struct {
		name      string
		in        []cast.HeartbeatCompletion
		committed int
		want      int
	}{
		{"one by Relay-B", []cast.HeartbeatCompletion{done(hbRelayA, 0), done(hbRelayB, 1)}, 1, 1},
		{"one by Relay-A", []cast.HeartbeatCompletion{done(hbRelayA, 1), done(hbRelayB, 0)}, 1, 0},
		{"both committed", []cast.HeartbeatCompletion{done(hbRelayA, 1), done(hbRelayB, 1)}, 2, 2},
		{"none", []cast.HeartbeatCompletion{done(hbRelayB, 0)}, 0, 0},
		{"another event", []cast.HeartbeatCompletion{{Relay: hbRelayB, Event: "e1", Rows: 1}, done(hbRelayB, 1)}, 1, 1},
	}
	for _, tt := range tests {
		committed, got := completedOnceBy(tt.in, hbPaused, hbRelayB)
		if committed != tt.committed || got != tt.want {
			t.Errorf("%s: committed %d, figure %d; want %d, %d", tt.name, committed, got, tt.committed, tt.want)
		}
	}
}
