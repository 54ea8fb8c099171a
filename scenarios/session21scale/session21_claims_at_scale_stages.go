package session21scale

// The stages of session-21-claims-at-scale that follow a drain's seed: the
// crashed and the stalled worker, the stalled worker's late finalize, and
// the re-take of a stalled worker's message by a second claimer.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/clock"
	"github.com/outboxlab/outboxlab/failpoint"
	"github.com/outboxlab/outboxlab/instance"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/store"
)

// crash is Worker-A: it claims the oldest message and dies with it, its
// claim committed: its connection closes, or its child process is killed
// by SIGKILL once its claim has returned.
func (run *scaleRun) crash(ctx context.Context, path string, cfg store.ClaimerConfig, d *ScaleDrain) error {
	w, err := run.env.Instances.ScaleWorker(ctx, path, d.Label(), s21Crashed, cfg)
	if err != nil {
		return err
	}
	b, err := w.Claim(ctx, run.clk.Now(), s21Lease, 1)
	if err == nil && len(b.Messages) > 0 {
		// The lab's instrument, not the worker's: on PostgreSQL its reads
		// reach the server's counters before the drain is measured, not as
		// it exits.
		err = w.FlushStats(ctx)
	}
	if err != nil {
		return errors.Join(err, w.Close(ctx))
	}
	death, err := w.Crash(ctx, failpoint.AfterClaim)
	if err != nil {
		return err
	}
	if death != "" {
		death = fmt.Sprintf(": %s; its claim had committed", death)
	}
	d.RecordClaim(s21Crashed, b)
	if len(b.Messages) == 0 {
		// Measured, not hidden: expired_reclaimed then falls short.
		run.event(lab.KindEmpty, s21Crashed, "claim", "claimed nothing: no forced expiry of a crashed worker's message in this drain"+death)
		return nil
	}
	m := b.Messages[0]
	d.Expiries = append(d.Expiries, ScaleExpiry{Holder: s21Crashed, ID: m.ID, Token: m.Token, Late: "-"})
	run.add(lab.Event{Kind: lab.KindCrash, Subject: m.AggregateKey, Actor: s21Crashed, Action: "CRASH",
		Detail: fmt.Sprintf("died holding message %d (token %d), lease until %s%s", m.ID, m.Token, m.LockedUntil, death)})
	return nil
}

// stall is Worker-B: it claims the next message, processes it, and stalls
// before finalizing. The caller closes the worker.
func (run *scaleRun) stall(ctx context.Context, path string, cfg store.ClaimerConfig, d *ScaleDrain) (w instance.ScaleWorker, held store.ClaimedBatch, err error) {
	if w, err = run.env.Instances.ScaleWorker(ctx, path, d.Label(), s21Stalled, cfg); err != nil {
		return nil, held, err
	}
	defer func() {
		if err != nil {
			err, w = errors.Join(err, w.Close(ctx)), nil
		}
	}()
	if held, err = w.Claim(ctx, run.clk.Now(), s21Lease, 1); err != nil {
		return w, held, err
	}
	d.RecordClaim(s21Stalled, held)
	if err := w.FlushStats(ctx); err != nil { // see crash
		return w, held, err
	}
	if len(held.Messages) != 1 {
		run.event(lab.KindEmpty, s21Stalled, "claim", "claimed nothing: no stalled worker's message and no late finalize in this drain")
		return w, held, nil
	}
	m := held.Messages[0]
	how, err := w.Stall(clock.Format(run.clk.Now()), "its claim and its processing")
	if err != nil {
		return w, held, err
	}
	run.add(lab.Event{Kind: lab.KindClaim, Subject: m.AggregateKey, Until: m.LockedUntil, Rows: lab.RowsOf(1), Actor: s21Stalled, Action: "claim, process, stall",
		Detail: instance.WithHow(fmt.Sprintf("message %d (token %d), lease until %s; a long GC pause begins before its finalize", m.ID, m.Token, m.LockedUntil), how)})
	return w, held, nil
}

// lateFinalize is Worker-B waking up: it finalizes with the token it was given.
func (run *scaleRun) lateFinalize(ctx context.Context, stalled instance.ScaleWorker, held store.ClaimedBatch, d *ScaleDrain) error {
	if len(held.Messages) != 1 {
		return nil
	}
	m := held.Messages[0]
	how, err := stalled.Wake(clock.Format(run.clk.Now()), "its finalize")
	if err != nil {
		return err
	}
	if how != "" {
		run.add(lab.Event{Kind: lab.KindWake, Subject: m.AggregateKey, Actor: s21Stalled, Action: "wakes", Detail: how + "; it finalizes with the token it was given"})
	}
	f, err := stalled.Finalize(ctx, held.Messages, run.clk.Now())
	if err != nil {
		return err
	}
	d.RecordFinal(s21Stalled, m.Token, f)
	late := fmt.Sprintf("%d row", len(f.Finalized))
	if len(f.Finalized) != 1 {
		late += "s"
	}
	d.Expiries = append(d.Expiries, ScaleExpiry{Holder: s21Stalled, ID: m.ID, Token: m.Token, Late: late, Refused: len(f.Finalized) == 0})
	outcome, kind := "changed 0 rows: the message was reclaimed under a newer token (lease lost)", lab.KindFenced
	if len(f.Finalized) == 1 {
		outcome, kind = "changed 1 row: a stale owner completed a message it no longer owned", lab.KindStale
	}
	run.add(lab.Event{Kind: kind, Refusal: tokenRefusal(kind, claimedSince(d, m)), Subject: m.AggregateKey,
		Rows:  lab.RowsOf(int64(len(f.Finalized))),
		Actor: s21Stalled, Action: "late finalize",
		Detail: fmt.Sprintf("message %d with stale token %d %s", m.ID, m.Token, outcome)})
	return nil
}

// tokenRefusal is the guard that refused a late finalize (kind
// KindFenced): the token, where the ledgers hold a newer claim of its
// message (newer); "" otherwise.
func tokenRefusal(kind lab.Kind, newer bool) lab.Refusal {
	if kind != lab.KindFenced || !newer {
		return ""
	}
	return lab.RefusedByToken
}

// claimedSince says the drain's claims ledger holds a claim of m under a
// newer token than m's.
func claimedSince(d *ScaleDrain, m store.ClaimedMessage) bool {
	return slices.ContainsFunc(d.Claims, func(c ScaleClaim) bool { return c.ID == m.ID && c.Token > m.Token })
}

// retake is a drain's last step, in which only the token can refuse a
// stale finalize: Worker-B claims one new message and stalls past its
// lease; Worker-B again (a second claimer under the same name) claims it
// under a newer token; the first claimer wakes and finalizes with its old
// token, finding the row Processing and LockedBy Worker-B; then the second
// claimer finalizes with its own and, a second later, sends that finalize
// again, as after a lost reply (see [cast.RetryWrite]).
func (run *scaleRun) retake(ctx context.Context, setup *store.DB, path string, cfg store.ClaimerConfig,
	first instance.ScaleWorker, workers *instance.Set, d *ScaleDrain) error {
	backlog := store.Backlog{Messages: 1, After: d.Backlog, First: run.clk.Now(), PayloadBytes: s21PayloadBytes}
	if err := store.SeedBacklog(ctx, setup, backlog); err != nil {
		return err
	}
	b, err := first.Claim(ctx, run.clk.Now(), s21Lease, 1)
	if err != nil || len(b.Messages) != 1 {
		return err // nothing claimed: the step did not run, and its check says so
	}
	m, rt := b.Messages[0], &d.Retake
	*rt = ScaleRetake{Worker: s21Stalled, ID: m.ID, Stale: m.Token, NewerRows: -1, RetryRows: -1}
	how, err := first.Stall(clock.Format(run.clk.Now()), "its claim of a new message")
	if err != nil {
		return err
	}
	run.add(lab.Event{Kind: lab.KindClaim, Subject: m.AggregateKey, Until: m.LockedUntil, Rows: lab.RowsOf(1), Actor: s21Stalled,
		Action: "re-take: claim, stall", Detail: instance.WithHow(fmt.Sprintf("a new message %d (token %d), lease until %s; "+
			"it stalls again before its finalize", m.ID, m.Token, m.LockedUntil), how)})
	run.clk.Advance(s21Lease + time.Second)
	run.event(lab.KindExpiry, "clock", "advance", fmt.Sprintf("scenario clock moves %v: %s's lease on message %d has expired", s21Lease+time.Second, rt.Worker, m.ID))
	second, err := run.env.Instances.ScaleWorker(ctx, path, d.Label(), s21Stalled, cfg)
	if err != nil {
		return err
	}
	workers.Add(second)
	nb, err := second.Claim(ctx, run.clk.Now(), s21Lease, 1)
	if err != nil {
		return err
	}
	if len(nb.Messages) == 1 && nb.Messages[0].ID == m.ID {
		n := nb.Messages[0]
		rt.Newer = n.Token
		lockedBy, err := lockedByOf(ctx, setup, n.ID)
		if err != nil {
			return err
		}
		run.add(lab.Event{Kind: lab.KindClaim, Subject: n.AggregateKey, Until: n.LockedUntil, Rows: lab.RowsOf(1), Actor: s21Stalled,
			Action: "re-take: claim again", Detail: fmt.Sprintf("its second claimer, under the same name, takes message %d again "+
				"(token %d): the row, read back, is Processing and LockedBy %s, under a newer token", n.ID, n.Token, lockedBy)})
	} else {
		run.event(lab.KindEmpty, s21Stalled, "re-take: claim again", fmt.Sprintf("its second claimer did not take message %d again", m.ID))
	}
	if how, err = first.Wake(clock.Format(run.clk.Now()), "its finalize"); err != nil {
		return err
	}
	f, err := first.Finalize(ctx, b.Messages, run.clk.Now())
	if err != nil {
		return err
	}
	rt.StaleRows = len(f.Finalized)
	outcome, kind := "changed 0 rows: Status and LockedBy matched, the token did not", lab.KindFenced
	if rt.StaleRows != 0 {
		outcome, kind = "changed 1 row: the stale claim completed a message its own newer claim held", lab.KindStale
	}
	run.add(lab.Event{Kind: kind, Refusal: tokenRefusal(kind, rt.Newer > m.Token), Subject: m.AggregateKey, Rows: lab.RowsOf(int64(rt.StaleRows)),
		Actor: s21Stalled, Action: "re-take: late finalize", Detail: instance.WithHow(fmt.Sprintf("its first claimer, with stale token %d, %s", m.Token, outcome), how)})
	if len(nb.Messages) == 0 {
		return nil
	}
	if f, err = second.Finalize(ctx, nb.Messages, run.clk.Now()); err != nil {
		return err
	}
	rt.NewerRows, kind = len(f.Finalized), lab.KindFinalize
	if rt.NewerRows == 0 {
		kind = lab.KindNoOp
	}
	run.add(lab.Event{Kind: kind, Subject: nb.Messages[0].AggregateKey, Rows: lab.RowsOf(int64(rt.NewerRows)), Actor: s21Stalled,
		Action: "re-take: finalize", Detail: fmt.Sprintf("its second claimer, with token %d, changed %d of 1 row", nb.Messages[0].Token, rt.NewerRows)})
	if rt.NewerRows != 1 {
		return nil
	}
	return run.retryFinalize(ctx, second, nb.Messages[0], f, rt)
}

// retryFinalize is the re-take's last step: the second claimer, its
// finalize (first) committed, sends it again a second later (cast.RetryWrite; the
// lab injects no fault). It runs after the drain's cost was read, on no
// drain worker's connection, so no cost figure counts it.
func (run *scaleRun) retryFinalize(ctx context.Context, w instance.ScaleWorker, m store.ClaimedMessage, first store.FinalizedBatch, rt *ScaleRetake) error {
	done := clock.Format(run.clk.Now())
	run.clk.Advance(time.Second)
	rows, err := cast.RetryWrite(ctx, s21Stalled, []store.ClaimedMessage{m}, first, done, run.clk.Now(), w.Finalize, w.Message)
	if err != nil {
		return err
	}
	r := rows[0]
	rt.RetryRows, rt.RetryDone = r.Rows, r.Kind == lab.KindNoOp
	run.add(lab.Event{Kind: r.Kind, Refusal: r.Refusal, Subject: m.AggregateKey, Rows: lab.RowsOf(int64(rt.RetryRows)), Actor: s21Stalled,
		Action: "retry finalize",
		Detail: cast.RetryNote(fmt.Sprintf("its second claimer's finalize (token %d)", m.Token)) + r.Outcome})
	return nil
}

// lockedByOf reads message id's LockedBy back from the database, for a
// timeline line that names the owner the row shows.
func lockedByOf(ctx context.Context, db *store.DB, id int64) (string, error) {
	rows, err := store.NewOutbox(db, store.OutboxLesson).Messages(ctx)
	if err != nil {
		return "", err
	}
	for _, m := range rows {
		if m.ID == id {
			return m.LockedBy, nil
		}
	}
	return "", fmt.Errorf("session 21: message %d not found", id)
}
