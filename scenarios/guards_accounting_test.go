package scenarios

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/outboxlab/outboxlab/store"
)

// moreTaughtGuards are the guards of the claims and the reused fencing
// writes: with taughtGuards, every guard a lesson's own run decides, or
// the reason it cannot.
var moreTaughtGuards = func() []taughtGuard {
	lease, renewal := outboxLeasing.Name, leaseRenewal.Name
	return []taughtGuard{
		{scenario: lease, stmt: store.ClaimUpdate, guard: claimableOutbox,
			breaks: []string{"claims_of_owned_messages", "recovery_ok"}},
		{scenario: staleAckFencing.Name, stmt: store.ClaimEvent, guard: "delivered = 0",
			breaks: []string{"reclaim_after_delivery_rows"}},
		{scenario: renewal, stmt: store.ClaimEvent, guard: claimableEvent,
			breaks: []string{"steps_as_expected", "step_5_claim_blocked_by_live_lease", "step_6_renew_at_expiry_refused"}},
		{scenario: renewal, stmt: store.RenewLease, guard: "delivered = 0",
			breaks: []string{"renewal_after_delivery_rows"}}, // Worker-B's renewal after its ack, after the nine steps
		{scenario: leaseExpiryAfterSend.Name, stmt: store.CompleteWithToken, guard: "claim_token = :token",
			breaks: []string{"stale_completion_rows"}},
		{scenario: failureClasses.Name, stmt: store.CompleteWithToken, guard: "claim_token = :token",
			breaks: []string{"row_2_stale_completion_rejected", "rows_passed"}},
		{scenario: claimsAtScale.Name, stmt: store.IndexedClaimOne, guard: "ProcessedAtUtc IS NULL", gap: takeAfterSelect},
		{scenario: claimsAtScale.Name, stmt: store.IndexedClaimOne, guard: claimableOutbox, gap: takeAfterSelect},
		{scenario: claimsAtScale.Name, stmt: store.ScaleFinalize, guard: "Status = 'Processing'",
			breaks: []string{"retake_retried_finalize_rows"}},
		{scenario: batchCompletion.Name, stmt: store.FetchAheadComplete, guard: "OutboxMessages.Status = 'Processing'",
			breaks: []string{"retried_flush_rows"}},
		{scenario: heartbeatAndShutdown.Name, stmt: store.RenewWithinDeadline, guard: "delivered = 0",
			swap: heartbeatRenewal, breaks: []string{"renewals_after_delivery_rows"}},
		{scenario: clocksAndOutages.Name, stmt: store.ClaimOnDatabaseClock, guard: "(lease_until IS NULL OR lease_until <= db_now())",
			breaks: []string{"live_lease_claims", "e1_processing_attempts"}},
		{scenario: clocksAndOutages.Name, stmt: store.RenewOnDatabaseClock, guard: "claim_token = :token",
			breaks: []string{"race_both_won"}},
		{scenario: clocksAndOutages.Name, stmt: store.RenewOnDatabaseClock, guard: "lease_until > db_now()",
			breaks: []string{"race_renewal_won"}},
		{scenario: clocksAndOutages.Name, stmt: store.AckOnDatabaseClock, guard: "lease_until > db_now()",
			breaks: []string{"expired_ack_rows", "ack_failures_lease_lost"}}, // Worker-N's late ack of e5, nobody reclaiming it
	}
}()

// reusedGuards are the guards of statements a lesson runs but another
// lesson teaches: the teacher's own run decides each.
var reusedGuards = func() []taughtGuard {
	var out []taughtGuard
	reused := func(stmt store.Stmt, taughtBy map[string]string, scenarios ...string) {
		for _, sc := range scenarios {
			for guard, teacher := range taughtBy {
				out = append(out, taughtGuard{scenario: sc, stmt: stmt, guard: guard, taughtBy: teacher})
			}
		}
	}
	lease, late, ack, renewal := outboxLeasing.Name, lateFinalize.Name, staleAckFencing.Name, leaseRenewal.Name
	expiry, classes, retention, hb := leaseExpiryAfterSend.Name, failureClasses.Name, inboxRetention.Name, heartbeatAndShutdown.Name
	reused(store.FinalizeOwned, map[string]string{"Status = 'Processing'": late, "LockedBy = :worker": late}, lease)
	reused(store.ClaimUpdate, map[string]string{claimableOutbox: lease}, late)
	reused(store.ClaimEvent, map[string]string{claimableEvent: renewal}, ack)
	reused(store.ClaimEvent, map[string]string{"delivered = 0": ack}, renewal)
	reused(store.ClaimEvent, map[string]string{"delivered = 0": ack, claimableEvent: renewal}, expiry, classes, retention)
	reused(store.ClaimStampingClaimedAt, map[string]string{"delivered = 0": ack, claimableEvent: renewal}, hb)
	reused(store.ClaimOnDatabaseClock, map[string]string{"delivered = 0": ack}, clocksAndOutages.Name)
	// Session 23 keeps the tokens of sessions 16 to 18 (LESSONS.md); its
	// own guards are the database's clock.
	reused(store.AckOnDatabaseClock, map[string]string{"claim_token = :token": ack, "delivered = 0": ack}, clocksAndOutages.Name)
	reused(store.RenewOnDatabaseClock, map[string]string{"delivered = 0": hb}, clocksAndOutages.Name)
	reused(store.CompleteWithToken, map[string]string{"delivered = 0": ack}, expiry, classes)
	reused(store.CompleteWithToken, map[string]string{"claim_token = :token": ack, "delivered = 0": ack}, retention, hb)
	reused(store.AckDelivery, map[string]string{"delivery_count = :receipt": expiry}, classes, retention)
	return out
}()

// heartbeatRenewal swaps a guardless renewal into session 22's cast, whose
// statements no generic swap reaches.
func heartbeatRenewal(g store.Stmt) func(any) any {
	return swapOf(func(hc heartbeatCast) heartbeatCast { hc.sqls.Renew = g; return hc })
}

// The claimable predicates, as the claims write them.
const (
	claimableOutbox = "(Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now))"
	claimableEvent  = "(lease_until IS NULL OR lease_until <= :now)"
)

// takeAfterSelect is why the indexed claim's repeated predicate never
// decides alone.
const takeAfterSelect = "the claimer selects the message with the same predicate in the same transaction, holding the " +
	"write lock (BEGIN IMMEDIATE; FOR UPDATE on PostgreSQL), so the take never meets a row its select did not vouch " +
	"for, and the claimer stops the run if the take ever changes other than one row"

// guardLine matches one top-level conjunct of a WHERE clause, as the
// store writes them: a line that opens with two spaces and AND.
var guardLine = regexp.MustCompile(`\n  AND ([^\n]*)`)

// brokerModel are the statements of the lab's stand-in for a broker:
// lessons run them to deliver and redeliver, and teach none of their
// guards but the receipt (session 18).
var brokerModel = map[string][]string{
	store.RedeliverExpired.Name: {"state = 'in_flight'", "delivered_at <= :timeout_cutoff"},
	store.AckDelivery.Name:      {"consumer = :consumer", "state = 'in_flight'"},
}

// TestEveryGuardIsAccountedFor walks every statement that updates (an
// UPDATE, a WITH ... UPDATE, an upsert's DO UPDATE) every lesson runs and
// asserts that each top-level guard of its WHERE clause (a line of its
// own, "  AND ..."; a subquery's predicates choose rows, they guard none)
// is decided by the lesson's
// own run, or listed as a gap with its reason (TestEveryTaughtGuardDecides
// runs both), or taught by another lesson whose run it decides, or part of
// the lab's broker. The explorer is left out: its invariants judge its
// statements, whatever ordering breaks them.
func TestEveryGuardIsAccountedFor(t *testing.T) {
	all := append(allTaughtGuards(), reusedGuards...)
	find := func(match func(taughtGuard) bool) (taughtGuard, bool) {
		if i := slices.IndexFunc(all, match); i >= 0 {
			return all[i], true
		}
		return taughtGuard{}, false
	}
	for _, sc := range All() {
		if sc.Name == interleavingExplorer.Name {
			continue
		}
		for _, st := range sc.Statements {
			if !strings.Contains(st.SQL, "UPDATE") { // an UPDATE, a WITH ... UPDATE, an upsert's DO UPDATE
				continue
			}
			for _, m := range guardLine.FindAllStringSubmatch(st.SQL, -1) {
				guard := m[1]
				if slices.Contains(brokerModel[st.Name], guard) {
					continue
				}
				g, ok := find(func(g taughtGuard) bool {
					return g.scenario == sc.Name && g.stmt.SQL == st.SQL && g.guard == guard
				})
				if !ok {
					t.Errorf("%s, %q: guard %q is accounted for nowhere: list it in taughtGuards", sc.Name, st.Name, guard)
					continue
				}
				if g.taughtBy == "" {
					continue
				}
				if _, ok := find(func(t taughtGuard) bool {
					return t.scenario == g.taughtBy && t.guard == guard && t.taughtBy == "" && len(t.breaks) > 0
				}); !ok {
					t.Errorf("%s, %q: guard %q is taught by %s, whose run does not decide it", sc.Name, st.Name, guard, g.taughtBy)
				}
			}
		}
	}
}
