package cast

import (
	"fmt"

	"github.com/outboxlab/outboxlab/clock"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/store"
)

// OutboxEventsTable is the final state of outbox_events as sessions 16, 17
// and 23 print it: one row per event, read from the database, each stored
// tick (lease_until, delivered_at) as its clock time on origin's clock, the
// tick beside it.
func OutboxEventsTable(events []store.Event, origin TickOrigin) lab.Table {
	t := outboxEventsTable(events, origin.Time)
	t.Note += " " + origin.Note()
	return t
}

// OutboxEventsTableOnClock is [OutboxEventsTable] for a lesson whose
// timeline prints clock time: each stored tick as its clock time (see
// [TickClock]), the tick beside it.
func OutboxEventsTableOnClock(events []store.Event) lab.Table {
	t := outboxEventsTable(events, func(t int64) string { return fmt.Sprintf("%s (%d)", ShortClock(t), t) })
	t.Note += " outbox_events stores logical ticks (milliseconds since " + clock.Format(LessonStart) +
		"): each is shown as its clock time (UTC, on " + clock.Format(LessonStart)[:10] + "), the stored tick beside it in brackets."
	return t
}

func outboxEventsTable(events []store.Event, at func(int64) string) lab.Table {
	t := lab.Table{Title: "outbox_events: final state (from the database)",
		Note:    "Each event's row as the run left it, read back from the database.",
		Columns: []string{"event_id", "event_type", "claim_token", "locked_by", "lease_until", "delivered", "delivered_at"}}
	for _, e := range events {
		until, delivered := "-", "-"
		if e.LeaseUntil != 0 {
			until = at(e.LeaseUntil)
		}
		if e.Delivered {
			delivered = at(e.DeliveredAt)
		}
		t.AddRow(e.ID, e.Type, e.Token, e.LockedBy, until, e.Delivered, delivered)
	}
	return t
}
