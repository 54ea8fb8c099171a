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
	Outcome string   // the rows changed and the row as the writer read it back
}

// RetryNote says, at the head of a retried write's timeline detail, what
// the lab did: it sent what (e.g. "#20", "the same batch") again as a retry
// policy does after a lost COMMIT reply, without injecting any fault.
func RetryNote(what string) string {
	return "the lab sends " + what + " again, as a retry policy does when the reply to a COMMIT is lost (no reply was " +
		"lost here: the lab repeats the statement); "
}

// RetryWrite has worker send its finalize (or batch completion) of msgs
// again at now, under the same name and tokens, after it had committed at
// done, as a client's retry policy sends a statement again when its
// COMMIT's reply was lost; then worker reads each row back (read) to learn
// what the retry did. 0 rows on a row Processed under its own name and
// token is work it had done (a no-op: of the lesson's guards, the row as
// read back fails only Status = 'Processing'); 0 rows on another's row is a fence; a changed row was
// completed again, its ProcessedAtUtc re-stamped (only a mistake lets it).
func RetryWrite(ctx context.Context, worker string, msgs []store.ClaimedMessage, done string, now time.Time,
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
		case r.Rows == 0 && st.DoneBy(worker, m.Token):
			r.Kind, r.Outcome = lab.KindNoOp, "0 rows; "+back+": LockedBy and ClaimToken match and Status is not "+
				"'Processing', so of the lesson's guards only Status = 'Processing' turns the row away; its own write had "+
				"committed, so it counts the work as done"
		case r.Rows == 0:
			r.Kind, r.Outcome = lab.KindFenced, "0 rows; "+back
		default:
			r.Kind, r.Outcome = lab.KindStale, fmt.Sprintf("1 row changed; %s: the row it had completed at %s was completed "+
				"again, ProcessedAtUtc re-stamped", back, done)
		}
		out = append(out, r)
	}
	return out, nil
}
