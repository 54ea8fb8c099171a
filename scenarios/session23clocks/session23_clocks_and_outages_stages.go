package session23clocks

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/instance"
	"github.com/outboxlab/outboxlab/internal/progress"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/store"
)

// Session 23's later stages: the database outage at the ack and the
// renewal racing a reclaim at the lease end.

// outage is part 2: Worker-N's ack of e2 meets a batch job's lock past its
// busy timeout and is retried (or, under the mistake, given up and sent
// again by Worker-F); Worker-N stalls after sending e3, Worker-F reclaims
// and acks e3, and Worker-N's late ack changes 0 rows.
func (run *clockRun) outage(ctx context.Context) error {
	n, f, sc := run.n, run.f, &Script{}
	var c2, c3 store.EventClaim
	var held *store.Held
	defer func() { held.Abandon() }() // a step that fails between the lock and its release
	claimed := func(w *SkewedWorker, id string, into *store.EventClaim) error {
		c, err := run.stage.Claim(ctx, 2, w, id)
		if err == nil && c.Outcome != store.Claimed {
			err = fmt.Errorf("session 23: %s's claim of %s was %s, want claimed", w.Name, id, c.Outcome)
		}
		*into = c
		return err
	}
	deliver := func(w *SkewedWorker, id string, c store.EventClaim, t int64) {
		sc.At(t, func() error { return run.send(ctx, w, id) })
		sc.At(t+50, func() error { _, err := run.stage.Ack(ctx, 2, w, id, c.Token); return err })
	}
	lock := "the database's write lock"
	if run.env.Engine() == store.Postgres {
		lock = "e2's row lock"
	}
	sc.At(1000, func() error { return run.insert(ctx, "e2") })
	sc.At(1000, func() error { return claimed(n, "e2", &c2) })
	sc.At(1050, func() error { return run.send(ctx, n, "e2") })
	sc.At(1100, func() error {
		var err error
		held, err = run.batch.Hold(ctx, "e2")
		run.stage.Event(lab.KindNote, s23BatchJob, "locks e2", "a long batch transaction rewrites e2's row and stays open: it holds "+lock)
		return err
	})
	sc.At(1100, func() error {
		a, err := run.stage.Ack(ctx, 2, n, "e2", c2.Token)
		if a.Retry {
			sc.At(1200, func() error { _, err := run.stage.Ack(ctx, 2, n, "e2", c2.Token); return err })
		} else if a.Rows == 0 {
			sc.At(c2.LeaseUntil, func() error {
				run.stage.Add(lab.Event{Kind: lab.KindExpiry, Subject: "e2", Actor: "clock", Action: "lease expires",
					Detail: "Worker-N's lease on e2 has run out, never acked: e2 is claimable again"})
				return nil
			})
		}
		return err
	})
	sc.At(1150, func() error {
		run.stage.Event(lab.KindNote, s23BatchJob, "unlocks e2", "the batch transaction commits: the outage is over")
		return held.Release()
	})
	sc.At(1600, func() error {
		c, err := run.stage.Claim(ctx, 2, f, "e2")
		if err == nil && c.Outcome == store.Claimed {
			deliver(f, "e2", c, 1650)
		}
		return err
	})
	sc.At(2000, func() error { return run.insert(ctx, "e3") })
	sc.At(2000, func() error { return claimed(n, "e3", &c3) })
	sc.At(2050, func() error { return run.send(ctx, n, "e3") })
	sc.At(2050, func() error {
		how, err := run.relays[s23WorkerN].Stall(s23Time(run.stage.Now), "its send of e3")
		run.stage.Add(lab.Event{Kind: lab.KindStall, Subject: "e3", Actor: n.Actor(), Action: "stalls",
			Detail: instance.WithHow("a long GC pause after its send: Worker-N still believes it owns e3", how)})
		return err
	})
	sc.At(2500, func() error {
		run.stage.Add(lab.Event{Kind: lab.KindExpiry, Subject: "e3", Actor: "clock", Action: "lease expires",
			Detail: "Worker-N's lease on e3 ran until " + s23Time(c3.LeaseUntil) + ": e3 is claimable"})
		return nil
	})
	sc.At(2600, func() error {
		var c store.EventClaim
		err := claimed(f, "e3", &c)
		deliver(f, "e3", c, 2650)
		return err
	})
	sc.At(2800, func() error {
		how, err := run.relays[s23WorkerN].Wake(s23Time(run.stage.Now), "its ack of e3")
		if err != nil {
			return err
		}
		run.stage.Add(lab.Event{Kind: lab.KindWake, Subject: "e3", Actor: n.Actor(), Action: "wakes",
			Detail: instance.WithHow("the pause ends; it acks e3 with the token it remembers", how)})
		_, err = run.stage.Ack(ctx, 2, n, "e3", c3.Token)
		return err
	})
	// e5: Worker-N stalls past its lease and nobody reclaims e5, so its
	// token is still current when it acks late: only the lease end can
	// refuse the ack.
	var c5 store.EventClaim
	sc.At(3000, func() error { return run.insert(ctx, "e5") })
	sc.At(3000, func() error { return claimed(n, "e5", &c5) })
	sc.At(3050, func() error { return run.send(ctx, n, "e5") })
	sc.At(3050, func() error {
		how, err := run.relays[s23WorkerN].Stall(s23Time(run.stage.Now), "its send of e5")
		run.stage.Add(lab.Event{Kind: lab.KindStall, Subject: "e5", Actor: n.Actor(), Action: "stalls",
			Detail: instance.WithHow("another long pause after its send: Worker-N still believes it owns e5", how)})
		return err
	})
	sc.At(3500, func() error {
		run.stage.Add(lab.Event{Kind: lab.KindExpiry, Subject: "e5", Actor: "clock", Action: "lease expires",
			Detail: "Worker-N's lease on e5 ran until " + s23Time(c5.LeaseUntil) + "; nobody reclaims e5"})
		return nil
	})
	sc.At(3700, func() error {
		how, err := run.relays[s23WorkerN].Wake(s23Time(run.stage.Now), "its ack of e5")
		if err != nil {
			return err
		}
		run.stage.Add(lab.Event{Kind: lab.KindWake, Subject: "e5", Actor: n.Actor(), Action: "wakes",
			Detail: instance.WithHow("the pause ends; it acks e5 with the token it remembers, still the current one", how)})
		a, err := run.stage.Ack(ctx, 2, n, "e5", c5.Token)
		run.expiredAckRows = a.Rows
		return err
	})
	return sc.Play(ctx, run.at)
}

// s23Spread is the widest gap between the two requests of a race trial.
const s23Spread = 4 * time.Millisecond

// raceAtLeaseEnd is part 3: 200 trials in which Worker-S's renewal of e4
// and Worker-F's claim of it meet at exactly the lease end on the
// database's clock, each on its own connection (a process each with
// --processes). Both are released together at a barrier; the one that does
// not lead, the claim and the renewal in turn, is sent after a gap swept
// from 0 to s23Spread across the trials, so the race covers every arrival
// order, from simultaneous to one well after the other commits.
func (run *clockRun) raceAtLeaseEnd(ctx context.Context) error {
	if err := run.at(ctx, s23RaceAt); err != nil {
		return err
	}
	if err := run.insert(ctx, "e4"); err != nil {
		return err
	}
	owner, claimer, barrier := run.relays[s23WorkerS], run.relays[s23WorkerF], cast.NewBarrier(2)
	run.raceOwner, run.raceClaimer, run.raceEvent = s23WorkerS, s23WorkerF, "e4"
	side := func(err *error, wait time.Duration, do func() error) func() {
		return func() {
			if *err = barrier.Wait(ctx); *err == nil {
				time.Sleep(wait)
				*err = do()
			}
		}
	}
	line := progress.New(run.env.Options.Progress, "session 23")
	line.Phase("race trials", 0, s23Trials)
	defer line.Finish()
	for i := range s23Trials {
		line.Set(int64(i))
		token, until, err := run.lab.Stage(ctx, "e4", s23WorkerS)
		if err != nil {
			return err
		}
		lead, gap := i%2, time.Duration(i/2)*s23Spread/(s23Trials/2)
		waits := [2]time.Duration{gap, 0} // the renewal's, the claim's: the claim leads
		if lead == RenewalLeads {
			waits = [2]time.Duration{0, gap}
		}
		var renewed store.Fenced
		var claim store.EventClaim
		var errs [2]error
		var wg sync.WaitGroup
		wg.Go(side(&errs[0], waits[0], func() (err error) { renewed, err = owner.Renew(ctx, "e4", token, s23RaceAt, s23Lease); return err }))
		wg.Go(side(&errs[1], waits[1], func() (err error) { claim, err = claimer.Claim(ctx, "e4", s23RaceAt, s23Lease); return err }))
		wg.Wait()
		if err := errors.Join(errs[:]...); err != nil {
			return err
		}
		run.race.Add(lead, until == s23RaceAt, renewed.Rows == 1, claim.Outcome == store.Claimed)
	}
	line.Set(s23Trials)
	all := run.race.All()
	renewals := fmt.Sprintf("0 rows in all %d trials", s23Trials)
	if won := all.RenewalOnly + all.Both; won > 0 {
		renewals = fmt.Sprintf("1 row in %d of %d trials", won, s23Trials)
	}
	run.stage.Event(lab.KindNote, run.s.Actor(), "renew", fmt.Sprintf("e4 at exactly its lease end, %d trials (before each, the lab staged e4 as "+
		"Worker-S's under a new token, its lease ending now): %s", s23Trials, renewals))
	run.stage.Event(lab.KindNote, run.f.Actor(), "claim", fmt.Sprintf("e4 at the same instant in each trial: 1 row in %d of %d trials, each a new "+
		"token, lease until %s", all.ClaimOnly+all.Both, s23Trials, s23Time(s23RaceAt+s23Lease)))
	return nil
}
