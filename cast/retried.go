package cast

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/store"
)

// RetriedRow is one message of a retried write: whether the retry changed
// its row, and what its writer made of that (see [RetryWrite]).
type RetriedRow struct {
	Message store.ClaimedMessage
	Rows    int      // the rows the retry changed: 0 or 1
	Kind    lab.Kind // KindNoOp (done), KindFenced or KindStale
	// Refusal, with KindFenced, is the guard the row as read back names.
	Refusal lab.Refusal
	Outcome string // the rows changed and the row as the writer read it back
}

// RetryNote says, at the head of a retried write's timeline detail, what
// the lab did: it sent what (e.g. "#20", "the same batch") again as a retry
// policy does after a lost COMMIT reply, without injecting any fault.
func RetryNote(what string) string {
	return "the lab sends " + what + " again, as a retry policy does when the reply to a COMMIT is lost (no reply was " +
		"lost here: the lab repeats the statement); "
}

// Mark is what a committed write leaves on its row, as its writer knows it
// (its name, its fencing token, the time it stamped) or as it reads the
// row back. By is "" and Token 0 where the lesson's row keeps no owner or
// no token.
type Mark struct {
	Done  bool // the row is in the state the write puts it in (Processed, delivered)
	By    string
	Token int64
	At    string // the time the write stamped (ProcessedAtUtc, delivered_at)
}

// FirstWriteStands is how every retried write of the lab tells work it
// had done from a fence: a retry that changed 0 rows finds its first send
// standing when that send committed and the row read back (back) is done
// under the writer's own name and token with the time the first send
// stamped (mine). Anything else turned it away: another's claim, an
// expired lease, a row finished by someone else or at another time.
func FirstWriteStands(firstCommitted bool, mine, back Mark) bool {
	return firstCommitted && back.Done && back.By == mine.By && back.Token == mine.Token && back.At == mine.At
}

// RetryWrite has worker send its finalize (or batch completion) of msgs
// again at now, under the same name and tokens, after first had committed
// at done, as a client's retry policy sends a statement again when its
// COMMIT's reply was lost; then worker reads each row back (read) to learn
// what the retry did. 0 rows on a row whose first write stands
// ([FirstWriteStands]: Processed under its own name and token at done) is
// work it had done (a no-op: of the lesson's guards, the row as read back
// fails only Status = 'Processing'); 0 rows on any other row is a fence; a
// changed row was completed again, its ProcessedAtUtc re-stamped (only a
// mistake lets it).
func RetryWrite(ctx context.Context, worker string, msgs []store.ClaimedMessage, first store.FinalizedBatch, done string, now time.Time,
	write func(context.Context, []store.ClaimedMessage, time.Time) (store.FinalizedBatch, error),
	read func(context.Context, int64) (store.MessageState, error)) ([]RetriedRow, error) {
	f, err := write(ctx, msgs, now)
	if err != nil {
		return nil, err
	}
	out := make([]RetriedRow, 0, len(msgs))
	for _, m := range msgs {
		st, err := read(ctx, m.ID)
		if err != nil {
			return out, err
		}
		r := RetriedRow{Message: m}
		if slices.Contains(f.Finalized, m.ID) {
			r.Rows = 1
		}
		back := fmt.Sprintf("read back, message %d is gone", m.ID)
		if st.Found {
			back = fmt.Sprintf("read back, message %d is %s since %s, LockedBy %s, token %d", m.ID, st.Status, st.ProcessedAt, st.LockedBy, st.Token)
		}
		switch {
		case r.Rows == 0 && FirstWriteStands(slices.Contains(first.Finalized, m.ID),
			Mark{Done: true, By: worker, Token: m.Token, At: done},
			Mark{Done: st.Found && st.Status == "Processed", By: st.LockedBy, Token: st.Token, At: st.ProcessedAt}):
			r.Kind, r.Outcome = lab.KindNoOp, "0 rows; "+back+": LockedBy and ClaimToken match and Status is not "+
				"'Processing', so of the lesson's guards only Status = 'Processing' turns the row away; its own write had "+
				"committed at "+done+", the row's ProcessedAtUtc, so it counts the work as done"
		case r.Rows == 0:
			r.Kind, r.Outcome = lab.KindFenced, "0 rows; "+back
			r.Refusal = MessageRefusal(st.Found, st.Status, st.LockedBy, st.Token, worker, m.Token)
		default:
			r.Kind, r.Outcome = lab.KindStale, fmt.Sprintf("1 row changed; %s: the row it had completed at %s was completed "+
				"again, ProcessedAtUtc re-stamped", back, done)
		}
		out = append(out, r)
	}
	return out, nil
}
