package reports

import (
	"testing"

	"github.com/outboxlab/outboxlab/lab"
)

// TestLaneTextRefusedRenewal asserts a renewal a guard turned away (a
// heartbeat "refused", perhaps by the processing deadline) is labelled a
// refused renewal, and a 0-row completion under a stale token a fence.
func TestLaneTextRefusedRenewal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		action, detail, want string
	}{
		{"heartbeat e3 refused", "token 3: 0 rows; processing deadline: a lease until 09:05:36 would pass claimed_at", "REFUSED heartbeat"},
		{"complete", "e42 WHERE claim_token = 1: fenced out (0 rows): stale token 1, current 2; lease lost", "FENCED complete"},
	} {
		ev := lab.Event{Actor: "Relay-C", Action: tc.action, Detail: tc.detail}
		e := raceEvent{Event: ev, Kind: EventKind(ev)}
		if got := laneText(e, false); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.action, got, tc.want)
		}
	}
}
