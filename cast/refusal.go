package cast

import (
	"strings"

	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/store"
)

// EventGuards are the predicates of an outbox_events write's WHERE clause
// that its row, read back, can show to have refused it, in the order
// [EventRefusal] asks them: the fencing token, the delivered flag, the
// lease end.
var EventGuards = []struct {
	Refusal   lab.Refusal
	Predicate string
}{
	{lab.RefusedByToken, "claim_token = :token"},
	{lab.RefusedByStatus, "delivered = 0"},
	{lab.RefusedByLease, "lease_until > "},
}

// EventRefusal is the guard of stmt, the write that ran, that turned it
// away under token at now on an outbox_events row, read off the row as its
// writer read it back after the write changed 0 rows (found false: no row
// has the id): a newer token, then the delivered flag, then the lease end,
// each only where stmt's WHERE clause holds it (a mistake without the
// token is never FENCED by one). It is "" when the row explains nothing (a
// guard on the write's own parameters, a processing deadline or a shorter
// proposed lease, refused it: the caller knows which).
func EventRefusal(stmt store.Stmt, ev store.Event, found bool, token, now int64) lab.Refusal {
	if !found {
		return lab.RefusedByGone
	}
	refuses := map[lab.Refusal]bool{
		lab.RefusedByToken:  ev.Token != token,
		lab.RefusedByStatus: ev.Delivered,
		lab.RefusedByLease:  ev.LeaseUntil <= now,
	}
	for _, g := range EventGuards {
		if refuses[g.Refusal] && strings.Contains(stmt.SQL, g.Predicate) {
			return g.Refusal
		}
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
