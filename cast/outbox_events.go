package cast

import (
	"fmt"

	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/store"
)

// OutboxEventsTable is the final state of outbox_events on logical time, as
// sessions 16 and 17 print it: one row per event, read from the database.
func OutboxEventsTable(events []store.Event) lab.Table {
	t := lab.Table{Title: "outbox_events: final state (from the database)",
		Note:    "Each event's row as the run left it, read back from the database: the owner, token and lease end the checks' read-backs compare with.",
		Columns: []string{"event_id", "event_type", "claim_token", "locked_by", "lease_until", "delivered", "delivered_at"}}
	for _, e := range events {
		until, at := "-", "-"
		if e.LeaseUntil != 0 {
			until = fmt.Sprint(e.LeaseUntil)
		}
		if e.Delivered {
			at = fmt.Sprint(e.DeliveredAt)
		}
		t.AddRow(e.ID, e.Type, e.Token, e.LockedBy, until, e.Delivered, at)
	}
	return t
}
