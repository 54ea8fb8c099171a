package session19failures

import (
	"slices"

	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/store"
)

// guards are every guard of the statements the lesson runs that update
// a row ([lesson.Guard]): those its own run decides, its known gaps, and
// those it reuses from the lessons that teach them.
func guards() []lesson.Guard {
	return slices.Concat([]lesson.Guard{
		{Stmt: store.CompleteWithToken, Guard: "claim_token = :token", Breaks: []string{"row_2_stale_completion_rejected", "rows_passed"}},
	},
		lesson.Reused(store.ClaimEvent, map[string]string{"delivered = 0": "session-16-stale-ack-fencing", lesson.ClaimableEvent: "session-17-lease-renewal"}),
		lesson.Reused(store.CompleteWithToken, map[string]string{"delivered = 0": "session-16-stale-ack-fencing"}),
		lesson.Reused(store.AckDelivery, map[string]string{"delivery_count = :receipt": "session-18-lease-expiry-after-send"}),
	)
}

// processes is what a run of the lesson with Options.Processes starts
// ([lesson.Processes]).
var processes = lesson.Processes{Same: "Failure classes", SameChecks: true, Children: lesson.Always(failureRowChildren()...)}

// failureRowChildren are the rows' instances, each row with its own:
// Relay-A crashes after its send (row 1) and after its claim (row 6),
// stalls past its lease after its claim (row 2); Consumer-1 crashes after
// its effect (row 4).
func failureRowChildren() []lesson.Child {
	const relay, consumer = "pipeline-relay", "pipeline-consumer"
	return []lesson.Child{
		{Phase: "row 1: Relay-A", Role: relay, Point: "after-send-before-complete"}, {Phase: "row 1: Relay-B", Role: relay},
		{Phase: "row 1: Consumer-1", Role: consumer},
		{Phase: "row 2: Relay-A", Role: relay, Stalled: true}, {Phase: "row 2: Relay-B", Role: relay}, {Phase: "row 2: Consumer-1", Role: consumer},
		{Phase: "row 3: Relay-A", Role: relay}, {Phase: "row 3: Consumer-1", Role: consumer},
		{Phase: "row 4: Relay-A", Role: relay}, {Phase: "row 4: Consumer-1", Role: consumer, Point: "after-effect-before-ack"},
		{Phase: "row 4: Consumer-1 (restarted)", Role: consumer},
		{Phase: "row 5: Relay-A", Role: relay}, {Phase: "row 5: Consumer-1", Role: consumer}, {Phase: "row 5: Consumer-2", Role: consumer},
		{Phase: "row 5: Consumer-3", Role: consumer},
		{Phase: "row 6: Relay-A", Role: relay, Point: "after-claim"}, {Phase: "row 6: Relay-B", Role: relay},
		{Phase: "row 6: Projector-1", Role: consumer},
	}
}
