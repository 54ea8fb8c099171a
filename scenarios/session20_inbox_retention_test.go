package scenarios

import (
	"github.com/outboxlab/outboxlab/cast"
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

func init() {
	checkBreakers = append(checkBreakers,
		checkBreaker{"session-20-inbox-retention", offerWithEndlessWindow.Name,
			swapOf(func(s cast.DeliverySQL) cast.DeliverySQL { s.Broker.Offer = offerWithEndlessWindow; return s }),
			// Part 1's replay is dropped as well: its inbox is never put to the test.
			[]string{"broker_passed_after_window", "credit_short_retention_cents"}})
}
