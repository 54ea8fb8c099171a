package scenarios

import "github.com/outboxlab/outboxlab/store"

// Statements no variant runs, for breaking the checks no variant breaks.
var (
	// claimNeverSucceeds changes no row, ever.
	claimNeverSucceeds = store.Stmt{Name: "test: claim that never changes a row", SQL: `UPDATE outbox_events
SET claim_token = claim_token + 1,
    locked_by   = :relay,
    lease_until = :until
WHERE event_id = :id
  AND 0`}
	// renewNeverSucceeds refuses every renewal.
	renewNeverSucceeds = store.Stmt{Name: "test: renewal that never changes a row", SQL: `UPDATE outbox_events
SET lease_until = :proposed
WHERE event_id = :id
  AND claim_token = :token
  AND 0`}
	// renewOffByOne changes the row the lesson's renewal would, 1 row, but
	// writes a deadline one tick past the proposed one: only the read-back
	// of the lease end can tell.
	renewOffByOne = store.Stmt{Name: "test: renewal that writes another deadline", SQL: `UPDATE outbox_events
SET lease_until = :proposed + 1
WHERE event_id = :id
  AND claim_token = :token
  AND delivered = 0
  AND lease_until > :now
  AND lease_until < :proposed`}
	// claimIgnoringLease takes the event under someone's live lease.
	claimIgnoringLease = store.Stmt{Name: "test: claim that ignores the live lease", SQL: `UPDATE outbox_events
SET claim_token = claim_token + 1,
    locked_by   = :relay,
    lease_until = :until
WHERE event_id = :id
  AND delivered = 0`}
)

func init() {
	relay := func(f func(s *store.RelaySQL)) func(any) any {
		return swapOf(func(s store.RelaySQL) store.RelaySQL { f(&s); return s })
	}
	const name = "session-17-lease-renewal"
	checkBreakers = append(checkBreakers,
		checkBreaker{name, claimNeverSucceeds.Name, relay(func(s *store.RelaySQL) { s.Claim = claimNeverSucceeds }),
			[]string{"steps_as_expected", "step_1_claim_succeeds", "step_7_claim_after_expiry"}},
		checkBreaker{name, renewNeverSucceeds.Name, relay(func(s *store.RelaySQL) { s.Renew = renewNeverSucceeds }),
			[]string{"steps_as_expected", "step_4_renew_extends", "step_9_new_owner_renews"}},
		checkBreaker{name, claimIgnoringLease.Name, relay(func(s *store.RelaySQL) { s.Claim = claimIgnoringLease }),
			[]string{"steps_as_expected", "step_5_claim_blocked_by_live_lease"}},
		checkBreaker{name, renewOffByOne.Name, relay(func(s *store.RelaySQL) { s.Renew = renewOffByOne }),
			[]string{"steps_as_expected", "step_4_renew_extends", "step_9_new_owner_renews"}},
	)
}
