package session22heartbeat

import (
	"slices"
	"strings"

	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/store"
)

// claimKeepingToken is a claim no variant runs: it takes an expired lease
// without advancing the fencing token, so the new owner holds the old
// owner's token. Relay-A's overdue renewal after its pause then changes 1
// row, its work goes on, and it completes e2 before its new owner can.
var claimKeepingToken = store.Stmt{Name: "test: claim that does not advance the fencing token", SQL: `UPDATE outbox_events
SET locked_by   = :relay,
    lease_until = :until,
    claimed_at  = :now
WHERE event_id = :id
  AND delivered = 0
  AND (lease_until IS NULL OR lease_until <= :now)`}

// renewBeforeDeadline is the lesson's renewal with its deadline guard one
// step stricter, < for <=, cut from the lesson's own text so it cannot
// drift: a lease may no longer end exactly at the deadline, so Relay-C's
// renewal of e3 to claimed_at + 2 min changes 0 rows.
var renewBeforeDeadline = func() store.Stmt {
	const guard = "AND :now + :lease <= claimed_at + :max_processing"
	sql := store.RenewWithinDeadline.SQL
	if strings.Count(sql, guard) != 1 || store.RenewWithinDeadline.Postgres != "" {
		panic("session 22's renewal has no single " + guard + ", or a PostgreSQL text of its own")
	}
	return store.Stmt{Name: "test: renewal whose deadline guard is < instead of <=",
		SQL: strings.Replace(sql, guard, strings.Replace(guard, "<=", "<", 1), 1)}
}()

// renewWhileLeaseLive is a renewal no variant runs: it asks only for a live
// lease, whoever holds it, so a relay that lost its lease renews its new
// owner's (Relay-C's overdue renewal of e8 after its send changes 1 row,
// though Relay-B has delivered e8), a delivered event's lease moves
// (Relay-B's tick on e10), and no deadline stops it.
var renewWhileLeaseLive = store.Stmt{Name: "test: renewal guarded by a live lease only", SQL: `UPDATE outbox_events
SET lease_until = :now + :lease
WHERE event_id = :id
  AND lease_until > :now`}

// breakers are the lesson's [lesson.Breaker]s: statements no variant runs,
// each breaking checks no variant breaks.
func breakers() []lesson.Breaker {
	renew := func(s store.Stmt) func(any) any {
		return lesson.SwapOf(func(hc heartbeatCast) heartbeatCast { hc.sqls.Renew = s; return hc })
	}
	return []lesson.Breaker{
		{Name: claimKeepingToken.Name, Swap: lesson.SwapOf(func(hc heartbeatCast) heartbeatCast { hc.sqls.Relay.Claim = claimKeepingToken; return hc }),
			Breaks: []string{"completed_by_new_owner", "zero_row_renewals", "cancelled_on_lease_loss"}},
		{Name: renewBeforeDeadline.Name, Swap: renew(renewBeforeDeadline),
			Breaks: []string{"renewal_to_deadline_rows"}},
		{Name: renewWhileLeaseLive.Name, Swap: renew(renewWhileLeaseLive),
			Breaks: []string{"zero_row_renewals", "cancelled_on_lease_loss", "cancelled_after_send", "deadline_refusals", "lost_events",
				"renewals_after_delivery_rows"}},
	}
}

// guards are every guard of the statements the lesson runs that update
// a row ([lesson.Guard]): those its own run decides, its known gaps, and
// those it reuses from the lessons that teach them.
func guards() []lesson.Guard {
	renewal := func(g store.Stmt) func(any) any { // the cast's renewal, which no generic swap reaches
		return lesson.SwapOf(func(hc heartbeatCast) heartbeatCast { hc.sqls.Renew = g; return hc })
	}
	return slices.Concat([]lesson.Guard{
		{Stmt: store.RenewWithinDeadline, Guard: "claim_token = :token", Swap: renewal, Breaks: []string{"zero_row_renewals", "cancelled_on_lease_loss"}},
		{Stmt: store.RenewWithinDeadline, Guard: "lease_until > :now", Swap: renewal, Breaks: []string{"expired_renewals_refused", "cancelled_on_expiry"}},
		{Stmt: store.RenewWithinDeadline, Guard: ":now + :lease <= claimed_at + :max_processing", Swap: renewal, Breaks: []string{"deadline_refusals", "lost_events"}},
		{Stmt: store.RenewWithinDeadline, Guard: "delivered = 0", Swap: renewal, Breaks: []string{"renewals_after_delivery_rows"}},
	},
		lesson.Reused(store.ClaimStampingClaimedAt, map[string]string{"delivered = 0": "session-16-stale-ack-fencing", lesson.ClaimableEvent: "session-17-lease-renewal"}),
		lesson.Reused(store.CompleteWithToken, map[string]string{"claim_token = :token": "session-16-stale-ack-fencing", "delivered = 0": "session-16-stale-ack-fencing"}),
	)
}

// processes is what a run of the lesson with Options.Processes starts
// ([lesson.Processes]).
var processes = lesson.Processes{Elsewhere: "TestProcessesShutdown"}
