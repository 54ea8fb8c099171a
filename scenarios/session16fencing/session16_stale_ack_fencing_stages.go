package session16fencing

import (
	"context"
	"fmt"
	"strconv"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/instance"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/store"
)

// Session 16's stages: each claim and each ack, with what the row read
// back says of a 0-row write.

// claim runs one claim for worker and records it in the claim ledger.
func (run *staleAckRun) claim(ctx context.Context, relay instance.Relay, worker string, now, leaseUntil int64) (store.EventClaim, error) {
	c, err := relay.Claim(ctx, s16EventID, now, store.EventLease{Owner: worker, Until: leaseUntil})
	if err != nil {
		return c, err
	}
	var detail string
	switch c.Outcome {
	case store.Claimed:
		detail = fmt.Sprintf("%s claimed: %s, token %d, lease until %s", c.EventID, lab.Rows(c.Rows), c.Token, s16Time(c.LeaseUntil))
	case store.Done:
		detail = fmt.Sprintf("%s is delivered: the claim changed 0 rows", c.EventID)
	case store.Blocked:
		detail = fmt.Sprintf("%s is under %s's live lease until %s: 0 rows", c.EventID, c.HeldBy, s16Time(c.LeaseUntil))
	default:
		detail = fmt.Sprintf("%s: %s, %d rows", c.EventID, c.Outcome, c.Rows)
	}
	e := lab.Event{At: s16At(now), Kind: run.claimKind(worker, c, now), Subject: s16EventID, Actor: worker,
		Action: "claim " + string(c.Outcome), Detail: detail, Rows: lab.RowsOf(c.Rows)}
	if c.Outcome == store.Claimed {
		e.Until = s16At(c.LeaseUntil)
	}
	seq := run.timeline.Add(e)
	run.claims = append(run.claims, fencedClaimEntry{seq: seq, at: now, worker: worker, outcome: c.Outcome, rows: c.Rows,
		token: c.Token, leaseUntil: c.LeaseUntil, heldBy: c.HeldBy, busy: c.Stats.BusyRetries})
	return c, nil
}

// claimKind is what worker's claim c at now was, from its outcome and, for
// a claim that took the event, the ledgers: it stole the event when the
// ack ledger shows it delivered, or the claim ledger's last claim, another
// worker's, held a lease live at now.
func (run *staleAckRun) claimKind(worker string, c store.EventClaim, now int64) lab.Kind {
	switch c.Outcome {
	case store.Claimed:
		if run.delivered() {
			return lab.KindSteal // it took an event already delivered
		}
		if n := len(run.claimed()); n > 0 {
			if last := run.claimed()[n-1]; last.worker != worker && last.leaseUntil > now {
				return lab.KindSteal
			}
		}
		return lab.KindClaim
	case store.Done:
		return lab.KindDone
	case store.Blocked:
		return lab.KindBlocked
	}
	return lab.KindEmpty
}

// claimed is the claim ledger's successful claims, in order.
func (run *staleAckRun) claimed() []fencedClaimEntry {
	var out []fencedClaimEntry
	for _, c := range run.claims {
		if c.outcome == store.Claimed {
			out = append(out, c)
		}
	}
	return out
}

// lastClaimer is the worker of the ledger's last successful claim.
func (run *staleAckRun) lastClaimer() string {
	last := ""
	for _, c := range run.claimed() {
		last = c.worker
	}
	return last
}

// delivered says the ack ledger holds an ack that changed the row.
func (run *staleAckRun) delivered() bool {
	for _, a := range run.acks {
		if a.rows == 1 {
			return true
		}
	}
	return false
}

// ack runs one ack and records it; a 0-row ack or a failed statement also
// goes to the failed-ack ledger with its reason. A database error is a
// recorded outcome too: the worker cannot know whether it still owns the
// event, so it must not treat the event as done. measured is false when the
// statement failed: then no row count is known, and none is reported.
//
// first, when set, is the ack this one sends again, with the same token, as
// a client's retry policy does when the reply to its COMMIT is lost (no
// reply is lost here: the lab repeats the statement, and the timeline says
// so). Such a retry that changes 0 rows is done, not failed, when the event
// read back is delivered under its token at the first ack's time: the first
// ack committed.
func (run *staleAckRun) ack(ctx context.Context, relay instance.Relay, worker string, token, now int64, first *ackEntry) (rows int64, measured bool) {
	f, ackErr := relay.Complete(ctx, s16EventID, token, now)
	e := ackEntry{at: now, worker: worker, token: token, rows: f.Rows, busy: f.Stats.BusyRetries}
	var reason, why string
	var refusal lab.Refusal
	switch {
	case ackErr != nil:
		e.err = ackErr.Error()
		reason, why = reasonDatabaseError, ackErr.Error()
	case f.Rows == 0:
		ev, ok, err := relay.EventByID(ctx, s16EventID)
		if err != nil {
			reason, why = reasonDatabaseError, "0 rows, and reading the event to tell why failed: "+err.Error()
			break
		}
		if first != nil && cast.FirstWriteStands(first.rows == 1 && first.err == "",
			// The relay's row names its owner by the token alone: an ack
			// writes no owner, so none is compared.
			cast.Mark{Done: true, Token: token, At: strconv.FormatInt(first.at, 10)},
			cast.Mark{Done: ok && ev.Delivered, Token: ev.Token, At: strconv.FormatInt(ev.DeliveredAt, 10)}) {
			e.done = true
			why = fmt.Sprintf("the event reads delivered under our token %d at %s, #%d's own, so the delivered guard turned "+
				"it away: that ack committed, and the retry is done, not failed", token, s16Time(ev.DeliveredAt), first.seq)
			break
		}
		reason, why = classifyZeroRowAck(ev, ok, token)
		refusal = cast.EventRefusal(run.sqls.Complete, ev, ok, token, now)
	}
	detail := fmt.Sprintf("with token %d: %s changed", token, lab.Rows(f.Rows))
	if ackErr != nil {
		detail = fmt.Sprintf("with token %d: the statement failed, no row count", token)
	}
	action := "ack"
	switch {
	case reason != "":
		action = "ack failed: " + reason
		detail += "; " + why
	case e.done:
		detail += "; " + why
	case first != nil && first.rows == 1:
		detail += fmt.Sprintf("; %s delivered again: delivered_at re-stamped from %s", s16EventID, s16Time(first.at))
	default:
		detail += "; " + s16EventID + " delivered"
	}
	if first != nil {
		e.retryOf = first.seq
		action = "retry " + action
		detail = cast.RetryNote(fmt.Sprintf("#%d", first.seq)) + detail
	}
	te := lab.Event{At: s16At(now), Kind: lab.KindFinalize, Subject: s16EventID, Actor: worker, Action: action, Detail: detail, Rows: lab.RowsOf(f.Rows)}
	switch {
	case e.done:
		te.Kind = lab.KindNoOp
	case reason == reasonDatabaseError:
		te.Kind, te.Rows = lab.KindError, nil
	case reason == reasonAlreadyDelivered:
		te.Kind = lab.KindNoOp
	case reason != "":
		te.Kind, te.Refusal = lab.KindFenced, refusal
	case run.lastClaimer() != worker:
		te.Kind = lab.KindStale // the ledger holds another worker's later claim: this ack's writer lost its lease
	}
	e.seq = run.timeline.Add(te)
	run.acks = append(run.acks, e)
	if reason != "" {
		run.failedAcks = append(run.failedAcks, failedAckEntry{seq: e.seq, at: now, worker: worker, token: token, reason: reason, detail: why})
	}
	return f.Rows, ackErr == nil
}

// classifyZeroRowAck tells why an ack changed no row, from the event as the
// database holds it after the ack.
func classifyZeroRowAck(ev store.Event, found bool, token int64) (reason, why string) {
	switch {
	case !found:
		return reasonDatabaseError, "the event row is missing"
	case ev.Token != token:
		return reasonLeaseLost, fmt.Sprintf("the current token is %d (held by %s): ours is stale", ev.Token, ev.LockedBy)
	case ev.Delivered:
		return reasonAlreadyDelivered, fmt.Sprintf("our token %d is current, but the event was already delivered at %s", token, s16Time(ev.DeliveredAt))
	default:
		return reasonDatabaseError, "the token is current and the event pending, yet no row changed"
	}
}
