package session18expiry

import (
	"slices"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/store"
)

// completeLeavingUndelivered is a completion no variant runs: it accepts
// the current token (1 row) but never sets delivered, so the row is never
// published.
var completeLeavingUndelivered = store.Stmt{Name: "test: completion that stamps delivered_at but leaves delivered = 0", SQL: `UPDATE outbox_events
SET delivered_at = :now
WHERE event_id = :id
  AND claim_token = :token
  AND delivered = 0`}

// breakers are the lesson's [lesson.Breaker]s: statements no variant runs,
// each breaking checks no variant breaks.
func breakers() []lesson.Breaker {
	return []lesson.Breaker{
		{Name: completeLeavingUndelivered.Name, Swap: lesson.SwapOf(func(s cast.DeliverySQL) cast.DeliverySQL { s.Relay.Complete = completeLeavingUndelivered; return s }),
			Breaks: []string{"published"}}}
}

// guards are every guard of the statements the lesson runs that update
// a row ([lesson.Guard]): those its own run decides, its known gaps, and
// those it reuses from the lessons that teach them.
func guards() []lesson.Guard {
	brokerAck := func(g store.Stmt) func(any) any {
		return lesson.SwapOf(func(s cast.DeliverySQL) cast.DeliverySQL { s.Broker.Ack = g; return s })
	}
	return slices.Concat([]lesson.Guard{
		// Without the receipt, Inbox-Consumer-1's late ack acknowledges the
		// redelivery Inbox-Consumer-2 still holds, whose own ack then finds
		// it acked.
		{Stmt: store.AckDelivery, Guard: "delivery_count = :receipt", Swap: brokerAck, Breaks: []string{"stale_receipt_ack_rows", "redelivery_ack_rows"}},
		{Stmt: store.CompleteWithToken, Guard: "claim_token = :token", Breaks: []string{"stale_completion_rows"}},
	},
		lesson.Reused(store.ClaimEvent, map[string]string{"delivered = 0": "session-16-stale-ack-fencing", lesson.ClaimableEvent: "session-17-lease-renewal"}),
		lesson.Reused(store.CompleteWithToken, map[string]string{"delivered = 0": "session-16-stale-ack-fencing"}),
	)
}

// processes is what a run of the lesson with Options.Processes starts
// ([lesson.Processes]).
var processes = lesson.Processes{SameChecks: true, Children: lesson.Always(
	lesson.Child{Phase: cast.RelayA, Role: "pipeline-relay", Stalled: true}, lesson.Child{Phase: cast.RelayB, Role: "pipeline-relay"},
	lesson.Child{Phase: s18InboxFirst, Role: "pipeline-consumer"}, lesson.Child{Phase: s18InboxSecond, Role: "pipeline-consumer"},
	lesson.Child{Phase: "Naive-Consumer", Role: "pipeline-consumer"})}
