package store

import (
	"context"
	"database/sql"
	"fmt"
)

// claimOne runs a one-statement claim ([ClaimSQL.OneStatement]) in
// one transaction: the statement takes the oldest claimable message and
// returns its Id. No row is Empty; more than one is Overreach, rolled back
// as a two-statement claim's UPDATE of several rows is. between (if not
// nil) runs after the statement, inside the transaction: the lesson's
// pause between select and update has nothing to split here, so the
// worker holds its claim's transaction instead. On PostgreSQL it then
// watches for claims waiting on its row lock, as the two-statement claim
// does between its select and its update ([Outbox.WatchLockWaits]).
//
// With target > 0 (a targeted claim, [Outbox.ClaimMessage]) the statement
// runs inside a savepoint, and when it took a message other than target
// that is rolled back: a one-statement claim cannot name its message, so
// the recovery demo's "can Worker-B take PAY-001 now?" keeps only a claim
// of PAY-001. took is false then and the caller reads target's state. An
// error inside the savepoint is returned, never swallowed: on PostgreSQL
// it has aborted the whole transaction, which the caller rolls back.
func (o *Outbox) claimOne(ctx context.Context, tx *sql.Tx, args []any, target int64, between func(), claim *Claim) (took bool, err error) {
	o.db.ledger.omit(o.sql.Claim.Update)
	if target > 0 {
		if _, err := tx.ExecContext(ctx, targetedClaimSavepoint.SQL); err != nil {
			return false, err
		}
	}
	ids, err := scanIDs(tx.QueryContext(ctx, o.sql.Claim.SelectNext.SQL, args...))
	if err != nil {
		return false, err
	}
	claim.Rows = int64(len(ids))
	switch {
	case len(ids) == 0:
		claim.Outcome = Empty
		return target == 0, nil
	case len(ids) > 1:
		claim.Outcome = Overreach
		return false, errOverreach
	case target > 0 && ids[0] != target:
		claim.Rows = 0
		if _, err := tx.ExecContext(ctx, targetedClaimRollback.SQL); err != nil {
			return false, err
		}
		_, err := tx.ExecContext(ctx, targetedClaimRelease.SQL)
		return false, err
	}
	if between != nil {
		between()
	}
	if claim.LockWaiters, err = o.lockWaiters(ctx, tx); err != nil {
		return false, err
	}
	m, err := messageByID(ctx, tx, ids[0])
	if err != nil {
		return false, &SlotStatementError{Statement: "the statement", Err: fmt.Errorf("it returned Id %d, but no message has that Id afterwards: %w", ids[0], err)}
	}
	claim.Outcome, claim.Message = Claimed, m
	return true, nil
}

// The savepoint a targeted one-statement claim runs in, and its rollback
// when the statement took another message.
var (
	targetedClaimSavepoint = audit("lab: a savepoint before a one-statement claim of a named message", `SAVEPOINT targeted_claim`)
	targetedClaimRollback  = audit("lab: undo a one-statement claim that took another message than the one named",
		`ROLLBACK TO SAVEPOINT targeted_claim`)
	targetedClaimRelease = audit("lab: end the targeted claim's savepoint", `RELEASE SAVEPOINT targeted_claim`)
)
