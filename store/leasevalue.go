package store

import (
	"database/sql"
	"time"

	"github.com/outboxlab/outboxlab/clock"
)

// Lease is what a claim asks of a row, or a renewal proposes for it: the
// owner the row is taken for, the fencing token a renewal presents (a
// claim takes a new one, so its Token is 0), and when the lease ends, on
// the row's own time convention T: time.Time for the payments outbox
// (LockedUntilUtc, UTC text with milliseconds) and int64 for outbox_events
// (lease_until, milliseconds of the scenario clock). Every claim and
// renewal of either table takes one, and binds it in one place: a claim
// its owner (:worker or :relay) and end (:until), a renewal its token
// (:token) and proposed end (:proposed).
//
// Session 23's claims and renewals on the database's clock take a lease
// length instead ([ClockRelay]): there the database, not the worker,
// decides when the lease ends, which is the lesson.
type Lease[T time.Time | int64] struct {
	Owner string
	Token int64
	Until T
}

// OutboxLease is a lease on a payments-outbox message (OutboxMessages).
type OutboxLease = Lease[time.Time]

// EventLease is a lease on an outbox event (outbox_events).
type EventLease = Lease[int64]

// OutboxLeaseFor is the lease owner takes at now for d.
func OutboxLeaseFor(owner string, now time.Time, d time.Duration) OutboxLease {
	return OutboxLease{Owner: owner, Until: now.Add(d)}
}

// EventLeaseFor is the lease owner takes at now (ticks) for d ticks.
func EventLeaseFor(owner string, now, d int64) EventLease {
	return EventLease{Owner: owner, Until: now + d}
}

// until is the lease's end as its table stores it.
func (l Lease[T]) until() any {
	if t, ok := any(l.Until).(time.Time); ok {
		return clock.Format(t)
	}
	return l.Until
}

// claimArgs binds a claim's lease: its owner as owner's parameter
// (:worker on the payments outbox, :relay on outbox_events) and its end as
// :until.
func (l Lease[T]) claimArgs(owner string) []any {
	return []any{sql.Named(owner, l.Owner), sql.Named("until", l.until())}
}

// renewalArgs binds a renewal's lease: the token it presents as :token and
// the end it proposes as :proposed. A token of 0 is bound as it is: a
// renewal without the token is a lesson's step (session 17's second),
// which the statement's guard refuses.
func (l Lease[T]) renewalArgs() []any {
	return []any{sql.Named("token", l.Token), sql.Named("proposed", l.until())}
}

// heartbeatArgs binds a heartbeat's renewal of lease at now: the token as
// :token, and the end it proposes as the lease length :lease from :now,
// which is how the heartbeat's statement writes it.
func heartbeatArgs(now int64, lease EventLease) []any {
	return []any{sql.Named("token", lease.Token), sql.Named("now", now), sql.Named("lease", lease.Until-now)}
}
