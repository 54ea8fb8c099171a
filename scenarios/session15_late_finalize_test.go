package scenarios

import (
	"testing"

	"github.com/outboxlab/outboxlab/store"
)

// TestLateFinalizeChecksCanFail runs the late-finalize sequence with one
// statement replaced. An expiry-blind claim keeps Worker-B from reclaiming,
// so the message is worked on once: processing_attempts fails.
func TestLateFinalizeChecksCanFail(t *testing.T) {
	t.Parallel()
	r := executeSwapped(t, &lateFinalize, func(s store.OutboxSQL) store.OutboxSQL {
		s.Claim = store.ExpiryBlindClaim
		return s
	})
	assertFails(t, r, "processing_attempts", "owner_result_kept")
}

// TestOutboxLeasingOwnershipViolationsCanFail runs session 15 AFTER with
// the split claim and a finalization by Id alone: both workers take the same
// message, and the one that no longer owns it commits its finalization.
func TestOutboxLeasingOwnershipViolationsCanFail(t *testing.T) {
	t.Parallel()
	r := executeSwapped(t, &outboxLeasing, func(s store.OutboxSQL) store.OutboxSQL {
		s.Claim, s.Finalize = store.UnguardedClaim, store.CompleteByID
		return s
	})
	assertFails(t, r, "ownership_violations")
}
