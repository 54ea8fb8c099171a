package session16fencing

import (
	"slices"

	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/store"
)

// guards are every guard of the statements the lesson runs that update
// a row ([lesson.Guard]): those its own run decides, its known gaps, and
// those it reuses from the lessons that teach them.
func guards() []lesson.Guard {
	complete := func(g store.Stmt) func(any) any {
		return lesson.SwapOf(func(s store.RelaySQL) store.RelaySQL { s.Complete = g; return s })
	}
	return slices.Concat([]lesson.Guard{
		{Stmt: store.CompleteWithToken, Guard: "claim_token = :token", Swap: complete, Breaks: []string{"stale_ack_rows", "current_ack_rows", "failed_acks_lease_lost"}},
		{Stmt: store.CompleteWithToken, Guard: "delivered = 0", Swap: complete, Breaks: []string{"retried_ack_rows"}},
		{Stmt: store.ClaimEvent, Guard: "delivered = 0", Breaks: []string{"reclaim_after_delivery_rows"}},
	},
		lesson.Reused(store.ClaimEvent, map[string]string{lesson.ClaimableEvent: "session-17-lease-renewal"}),
	)
}

// processes is what a run of the lesson with Options.Processes starts
// ([lesson.Processes]).
var processes = lesson.Processes{SameChecks: true, Children: lesson.Always(
	lesson.Child{Phase: s16WorkerA, Role: "relay-instance", Stalled: true}, lesson.Child{Phase: s16WorkerB, Role: "relay-instance"})}
