package session20inbox

import (
	"slices"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/store"
)

// offerWithEndlessWindow is a broker offer no variant runs: it drops every
// send of an event id the broker ever accepted, whatever its age, as if the
// dedup window never ended. The three-day replay is then dropped too.
var offerWithEndlessWindow = store.Stmt{Name: "test: offer dropped whenever the event id was ever accepted (an endless window)", SQL: `INSERT INTO broker_offers (event_id, payload, offered_by, offered_at, dropped)
VALUES (:event_id, :payload, :offered_by, :now,
        EXISTS (SELECT 1 FROM broker_offers
                WHERE event_id = :event_id
                  AND dropped = 0))
RETURNING offer_id, dropped`}

// breakers are the lesson's [lesson.Breaker]s: statements no variant runs,
// each breaking checks no variant breaks.
func breakers() []lesson.Breaker {
	return []lesson.Breaker{
		{Name: offerWithEndlessWindow.Name, Swap: lesson.SwapOf(func(s cast.DeliverySQL) cast.DeliverySQL { s.Broker.Offer = offerWithEndlessWindow; return s }),
			// Part 1's replay is dropped as well: its inbox is never put to the test.
			Breaks: []string{"broker_passed_after_window", "credit_short_retention_cents"}},
	}
}

// guards are every guard of the statements the lesson runs that update
// a row ([lesson.Guard]): those its own run decides, its known gaps, and
// those it reuses from the lessons that teach them.
func guards() []lesson.Guard {
	return slices.Concat([]lesson.Guard{},
		lesson.Reused(store.ClaimEvent, map[string]string{"delivered = 0": "session-16-stale-ack-fencing", lesson.ClaimableEvent: "session-17-lease-renewal"}),
		lesson.Reused(store.CompleteWithToken, map[string]string{"claim_token = :token": "session-16-stale-ack-fencing", "delivered = 0": "session-16-stale-ack-fencing"}),
		lesson.Reused(store.AckDelivery, map[string]string{"delivery_count = :receipt": "session-18-lease-expiry-after-send"}),
	)
}

// processes is what a run of the lesson with Options.Processes starts
// ([lesson.Processes]).
var processes = lesson.Processes{SameChecks: true, Children: lesson.Always(retentionChildren()...)}

// retentionChildren are the relays and consumers of the lesson's three
// parts; part 2's Relay-A stalls by SIGSTOP.
func retentionChildren() []lesson.Child {
	var out []lesson.Child
	for _, part := range []string{"part 1 short", "part 1 long", "part 2"} {
		out = append(out, lesson.Child{Phase: part + ": " + cast.RelayA, Role: "pipeline-relay", Stalled: part == "part 2"})
		if part == "part 2" {
			out = append(out, lesson.Child{Phase: part + ": " + cast.RelayB, Role: "pipeline-relay"})
		}
		out = append(out, lesson.Child{Phase: part + ": Consumer-1", Role: "pipeline-consumer"},
			lesson.Child{Phase: part + ": Consumer-2", Role: "pipeline-consumer"})
	}
	return out
}
