package session22heartbeat

import (
	"context"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/instance"
)

// Session 22's acts after the first beats: the pauses, the deadline, the
// ended lease, the race with a completion and the shutdown.

// pause is act 2: Relay-A freezes holding e2, Relay-B reclaims it after
// the expiry, and Relay-A resumes to a renewal that changes 0 rows.
func (run *heartbeatRun) pause(ctx context.Context) error {
	var ja, jb instance.HeartbeatJob
	return run.script(ctx, []cast.Step{
		cast.At(100, func() error { return run.commit(ctx, hbPaused) }),
		cast.At(101, func() (err error) { ja, err = claimWith(ctx, run.a); return err }),
		cast.At(105, func() error { return run.a.Freeze(ctx, "a stop-the-world pause (a frozen VM): no heartbeat, no work") }),
		cast.At(131, func() error { run.stage.LeaseExpired(hbPaused, hbRelayA); return nil }),
		cast.At(132, func() (err error) { jb, err = claimWith(ctx, run.b); return err }), // Relay-B reclaims e2
		cast.At(134, func() error { _, err := jb.Send(ctx); return err }),
		cast.At(140, func() error { return run.a.Resume(ctx) }),
		cast.At(141, func() error { _, err := ja.Send(ctx); return err }),
		cast.At(142, func() error { _, err := ja.Complete(ctx); return err }),
		cast.At(143, func() error { _, err := jb.Complete(ctx); return err }),
	})
}

// pauseAfterSend is act 2's second pause: Relay-C sends e8 and freezes
// before its completion; Relay-B reclaims e8 after the expiry, sends and
// completes it; Relay-C resumes to a renewal that changes 0 rows after
// its send, so its work is cancelled with the send already made.
func (run *heartbeatRun) pauseAfterSend(ctx context.Context) error {
	var jc instance.HeartbeatJob
	return run.script(ctx, []cast.Step{
		cast.At(150, func() error { return run.commit(ctx, hbSentFirst) }),
		cast.At(151, func() (err error) { jc, err = claimWith(ctx, run.c); return err }),
		cast.At(153, func() error { _, err := jc.Send(ctx); return err }),
		cast.At(155, func() error { return run.c.Freeze(ctx, "a stop-the-world pause after the send, before the completion") }),
		cast.At(181, func() error { run.stage.LeaseExpired(hbSentFirst, hbRelayC); return nil }),
		cast.At(182, func() error { return run.pollAndDeliver(ctx, run.b, 182) }),
		cast.At(190, func() error { return run.c.Resume(ctx) }),
		cast.At(191, func() error { _, err := jc.Complete(ctx); return err }),
	})
}

// deadline is act 3: Relay-C's work on e3 never ends; its renewals are
// refused once the lease would pass claimed_at + the maximum processing
// time, and Relay-B delivers e3 after the lease ends.
func (run *heartbeatRun) deadline(ctx context.Context) error {
	return run.script(ctx, []cast.Step{
		cast.At(200, func() error { return run.commit(ctx, hbStuck) }),
		cast.At(201, func() error {
			j, err := claimWith(ctx, run.c)
			if err != nil {
				return err
			}
			return j.Hang(ctx, "a call to the payment gateway that never answers; only the work's context can end it")
		}),
		cast.At(280, func() error {
			return run.c.Freeze(ctx, "a stop-the-world pause (a long garbage collection): no heartbeat until it resumes")
		}),
		cast.At(280+hbStuckPause/cast.TickSecond, func() error { return run.c.Resume(ctx) }),
		cast.At(322, func() error { return run.pollAndDeliver(ctx, run.b, 322) }),
	})
}

// expiry closes act 3 with the live-lease guard alone: Relay-B freezes
// holding e9 while no other relay polls, its lease runs out and nobody
// reclaims e9, so its overdue renewal under its still-current token is
// refused by lease_until > :now; Relay-A delivers e9 later.
func (run *heartbeatRun) expiry(ctx context.Context) error {
	var jb instance.HeartbeatJob
	return run.script(ctx, []cast.Step{
		cast.At(330, func() error { return run.commit(ctx, hbExpired) }),
		cast.At(331, func() (err error) { jb, err = claimWith(ctx, run.b); return err }),
		cast.At(335, func() error { return run.b.Freeze(ctx, "a stop-the-world pause, and no other relay polls meanwhile") }),
		cast.At(361, func() error { run.stage.LeaseExpired(hbExpired, hbRelayB); return nil }),
		cast.At(370, func() error { return run.b.Resume(ctx) }),
		cast.At(371, func() error { _, err := jb.Send(ctx); return err }),
		cast.At(372, func() error { _, err := jb.Complete(ctx); return err }),
		cast.At(375, func() error { return run.pollAndDeliver(ctx, run.a, 375) }),
	})
}

// doneRace closes act 3 with the delivered guard alone: Relay-B's work on
// e10 ends at the instant its heartbeat's first tick falls due, so the
// tick renews after the completion commits, under the still-current token
// with the lease live, and only delivered = 0 refuses it: already done.
func (run *heartbeatRun) doneRace(ctx context.Context) error {
	var jb instance.HeartbeatJob
	return run.script(ctx, []cast.Step{
		cast.At(378, func() error { return run.commit(ctx, hbDone) }),
		cast.At(378, func() (err error) {
			if jb, err = claimWith(ctx, run.b); err == nil {
				err = jb.CompleteAtNextBeat(ctx)
			}
			return err
		}),
		cast.At(396, func() error { _, err := jb.Send(ctx); return err }),
		cast.At(399, func() error { return nil }), // the clock reaching the tick completes e10, then renews
	})
}

// shutdown is act 4: Relay-D claims e4, e5 and e6 at second 401 and
// sends e4 at 405; at 406 it gets its stop signal (a real SIGTERM when it
// is a child process), while the producer commits e7; its poll at 407 is
// skipped, it completes e4 at 408 within the grace period, and at 409 its
// process ends, holding the events it did not finish. After the restart
// a fresh relay recovers what it left.
func (run *heartbeatRun) shutdown(ctx context.Context) error {
	var d, fresh instance.HeartbeatRelay
	var jobs []instance.HeartbeatJob
	open := func(name string, r *instance.HeartbeatRelay) (err error) {
		*r, err = run.relays.Open(ctx, run.env.DatabasePath(), name, run.hc.sqls, run.hc.policy)
		return err
	}
	return run.script(ctx, []cast.Step{
		cast.At(400, func() error { return run.commit(ctx, "e4", "e5", "e6") }),
		cast.At(400, func() error { return open(hbRelayD, &d) }),
		cast.At(401, func() error {
			for range 3 {
				j, err := claimWith(ctx, d)
				if err != nil {
					return err
				}
				jobs = append(jobs, j)
			}
			return nil
		}),
		cast.At(405, func() error { _, err := jobs[0].Send(ctx); return err }),
		cast.At(406, func() error { return d.Stop(ctx, hbGrace) }),
		cast.At(406, func() error { return run.commit(ctx, "e7") }),
		cast.At(407, func() error { _, err := d.Poll(ctx); return err }),
		cast.At(408, func() error { _, err := jobs[0].Complete(ctx); return err }),
		cast.At(409, func() (err error) { run.heldAtExit, err = d.Exit(ctx); return err }),
		cast.At(409, func() error { return d.Close(ctx) }),
		cast.At(410, func() error { return open(hbRelayFresh, &fresh) }),
		cast.At(410, func() error { return run.pollAndDeliver(ctx, fresh, 410) }),
		cast.At(432, func() error { return run.pollAndDeliver(ctx, fresh, 432) }),
	})
}
