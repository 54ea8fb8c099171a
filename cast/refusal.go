package cast

import (
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/store"
)

// EventRefusal is the guard that turned away a write under token at now
// on an outbox_events row, read off the row as its writer read it back
// after the write changed 0 rows (found false: no row has the id): a
// newer token, then the delivered flag, then the lease end. It is "" when
// the row explains nothing (a guard on the write's own parameters, a
// processing deadline or a shorter proposed lease, refused it: the
// caller knows which).
func EventRefusal(ev store.Event, found bool, token, now int64) lab.Refusal {
	switch {
	case !found:
		return lab.RefusedByGone
	case ev.Token != token:
		return lab.RefusedByToken
	case ev.Delivered:
		return lab.RefusedByStatus
	case ev.LeaseUntil <= now:
		return lab.RefusedByLease
	}
	return ""
}

// MessageRefusal is the guard that turned away worker's write under token
// on an OutboxMessages row, read off the row as read back after the write
// changed 0 rows: a newer token (where the lesson's rows carry one, token
// not 0), then another owner in LockedBy, then a Status other than
// 'Processing' (the work is done).
func MessageRefusal(found bool, status, lockedBy string, rowToken int64, worker string, token int64) lab.Refusal {
	switch {
	case !found:
		return lab.RefusedByGone
	case token != 0 && rowToken != token:
		return lab.RefusedByToken
	case lockedBy != worker:
		return lab.RefusedByOwner
	case status != "Processing":
		return lab.RefusedByStatus
	}
	return ""
}
