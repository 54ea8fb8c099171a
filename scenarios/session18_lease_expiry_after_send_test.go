package scenarios

import (
	"github.com/outboxlab/outboxlab/cast"
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

func init() {
	checkBreakers = append(checkBreakers,
		checkBreaker{"session-18-lease-expiry-after-send", completeLeavingUndelivered.Name,
			swapOf(func(s cast.DeliverySQL) cast.DeliverySQL { s.Relay.Complete = completeLeavingUndelivered; return s }),
			[]string{"published"}})
}
