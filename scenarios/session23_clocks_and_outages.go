package scenarios

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/clock"
	"github.com/outboxlab/outboxlab/instance"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/store"
)

// Session 23's mistake variants.
const (
	variantWorkerClockLeases = "worker-clock-leases"
	variantOutageAsLeaseLoss = "outage-as-lease-loss"
	s23RenewByEventID        = "renew-by-event-id"
)

// Session 23's cast and figures. Time is milliseconds on the database's
// clock from cast.ClockStart (10:00:00.000Z); every lease is 500 ms.
const (
	s23Lease    = 500
	s23WorkerS  = "Worker-S" // its clock reads behind the database's
	s23WorkerF  = "Worker-F" // its clock reads ahead
	s23WorkerN  = "Worker-N" // its clock agrees
	s23BatchJob = "Batch-Job"
	s23Trials   = 200
	s23RaceAt   = 5000 // the race's instant: every trial's lease ends here
)

var clocksAndOutages = Scenario{
	Name:    "session-23-clocks-and-outages",
	Session: "Session-23",
	FileTag: "Clocks-And-Outages",
	Title:   "Session 23: whose clock is it? Skewed workers, a database outage at the ack, and renewal racing a reclaim",
	Design:  lab.Safe,
	Teaches: "Three things a lease's tests leave out, on the database's clock (t in ms from 10:00:00.000Z), lease 500 ms. " +
		"Part 1: Worker-S's clock reads 300 ms behind the database's, Worker-F's 300 ms ahead (--skew-slow, --skew-fast). " +
		"Every lease instant comes from the database's clock: the claim, the ack and the renewal call db_now() (on SQLite " +
		"a function of the lab's connections that the scenario clock drives), and a worker holds its lease as 500 ms from " +
		"the claim's answer on its own clock, never as an instant. Worker-S claims e1 at t=0; Worker-F's claim at t=100 is " +
		"blocked; Worker-S works until t=400 and acks inside its lease. " +
		"Part 2: Worker-N sends e2 and its ack fails with a database error: a batch job holds the lock past the ack's " +
		"one-second busy timeout. A database error says nothing about ownership, so Worker-N retries the fenced ack, which succeeds. " +
		"Worker-N sends e3 and stalls past its lease; Worker-F reclaims and acks e3; Worker-N's late ack changes 0 rows. " +
		"The ack ledger records each failed ack with its reason, and the operational view keeps database errors and lost " +
		"leases apart. Part 3: Worker-S's renewal and Worker-F's claim meet at exactly the lease end, 200 times, each on " +
		"its own connection: never both win. A lease that ends at t is over at t, so the renewal loses whatever the order: " +
		"first, it finds the lease ended; after the claim, its token is stale.",
	OnPostgres: "On PostgreSQL db_now() is a function in the run's schema reading the server's clock, a one-row table " +
		"(db_clock) that the lab moves, the same for every connection; the outage is the batch job's lock on e2's row, " +
		"and the ack sets lock_timeout to 1 s, SQLite's busy timeout.",
	DoesNotSolve: "A lease held as a duration on the worker's own clock survives any offset between clocks, not a clock " +
		"that runs fast or slow, nor a pause the worker cannot see (GC, SIGSTOP): a worker must stop before its lease " +
		"ends by a margin for drift and pauses, and only the fencing token stops a late write. The database's clock can " +
		"jump too (an NTP step on the server). A database error at the ack may hide an ack that did commit (a connection " +
		"lost after the commit): the retry is safe because the ack is fenced and idempotent, but an effect already sent " +
		"stays sent, so consumers still need the inbox (session 18).",
	Statements: []store.Stmt{store.ClaimOnDatabaseClock, store.AckOnDatabaseClock, store.RenewOnDatabaseClock},
	Checks: []CheckDoc{
		{Name: "live_lease_claims", About: "claims that took a lease live on the database's clock"},
		{Name: "work_after_lease_end_ms", About: "ms of work past the lease end its claim stored"},
		{Name: "e1_processing_attempts", About: "processing attempts on e1: Worker-S's only"},
		{Name: "ack_failures_database_error", About: "failed acks recorded as database error (e2's)"},
		{Name: "ack_failures_lease_lost", About: "failed acks recorded as lease lost (e3's)"},
		{Name: "acks_retried_after_outage", About: "acks that succeeded on retry after a database error"},
		{Name: "duplicate_sends", About: "sends of an event given up while its lease was live"},
		{Name: "race_trials", About: "race trials that met at exactly the lease end"},
		{Name: "race_both_won", About: "trials in which the renewal and the claim both won"},
	},
	Variants: []Variant{
		{Name: variantWorkerClockLeases, Swaps: []store.Stmt{store.ClaimOnWorkerClock},
			Mistake: "the claim compares and writes lease instants on each worker's own clock (:now) instead of the " +
				"database's: each worker's idea of a lease's end is stored where the others read it",
			Breaks: []string{"live_lease_claims", "work_after_lease_end_ms", "e1_processing_attempts"},
			Shows: "At t=0 Worker-S, reading 09:59:59.700, stores a lease on e1 until 10:00:00.200; at t=100 Worker-F, " +
				"reading 10:00:00.400, finds that lease over and takes e1, so two workers work on it at once. Worker-S, " +
				"whose own clock says its lease runs to its 10:00:00.200, works on to t=400, 200 ms past the lease it " +
				"stored, and its ack is fenced out. Processes that share a lease must measure it on one clock."},
		{Name: variantOutageAsLeaseLoss,
			Mistake: "the relay treats every failed ack as a lost lease: the database error at e2's ack is recorded as " +
				"lease-lost and e2 is given up instead of retried",
			Breaks: []string{"ack_failures_database_error", "ack_failures_lease_lost", "acks_retried_after_outage", "duplicate_sends"},
			Shows: "Worker-N gives e2 up while its token is current and its lease live until 10:00:01.500; after the " +
				"lease runs out Worker-F claims e2 and sends it again, a duplicate nothing else caused. The operational " +
				"view counts two lost leases and no outage, so no one looks at the database. A database error says " +
				"nothing about ownership: the relay retries the fenced ack, and its 0 or 1 row says."},
		{Name: s23RenewByEventID, Swaps: []store.Stmt{store.RenewOnDatabaseClockByEventID},
			Mistake: "the renewal drops the token: a renewal that commits after another worker's claim finds that " +
				"worker's new lease live and extends it",
			Breaks: []string{"race_both_won"},
			Shows: "In each trial where Worker-F's claim commits first, Worker-S's renewal at the same instant still " +
				"changes 1 row: both believe they own e4, Worker-S by its renewal and Worker-F by its claim. With the " +
				"token, the late renewal changes 0 rows, and at exactly the lease end the renewal loses whatever the order."},
	},
	Run: func(ctx context.Context, env *Env) (*lab.Result, error) {
		return runClocksAndOutages(ctx, env, statementSet(env, store.ClockLesson))
	},
}

// clockRun is one session-23 run: the lab's connections, the broker, the
// three workers and the stage that keeps the database's time and the
// ledgers.
type clockRun struct {
	env     *Env
	sqls    store.ClockSQL
	dbs     []*store.DB
	setup   *store.DB
	lab     *store.ClockRelay // the producer's and the lab's own statements
	batch   *store.ClockRelay // the batch job's connection
	broker  *store.Broker
	s, f, n *cast.SkewedWorker
	relays  map[string]instance.ClockRelay
	stage   *cast.ClockStage
	race    s23RaceTally
}

// s23RaceTally is what the race's trials did.
type s23RaceTally struct {
	met, renewalOnly, claimOnly, both, neither int
}

// runClocksAndOutages runs session 23 with the statements sqls.
func runClocksAndOutages(ctx context.Context, env *Env, sqls store.ClockSQL) (*lab.Result, error) {
	run := &clockRun{env: env, sqls: sqls, relays: map[string]instance.ClockRelay{}}
	var workers instance.Set
	defer run.close()
	defer workers.Close(ctx)
	if err := run.seed(ctx, &workers); err != nil {
		return nil, err
	}
	for _, part := range []func(context.Context) error{run.skewedClocks, run.outage, run.raceAtLeaseEnd} {
		if err := part(ctx); err != nil {
			return nil, err
		}
	}
	if err := workers.Close(ctx); err != nil {
		return nil, err
	}
	r := &lab.Result{}
	if err := run.measure(ctx, r); err != nil {
		return nil, err
	}
	expectDocumented(r, env.Scenario.Checks, map[string]float64{
		"live_lease_claims": 0, "work_after_lease_end_ms": 0, "e1_processing_attempts": 1, "ack_failures_database_error": 1,
		"ack_failures_lease_lost": 1, "acks_retried_after_outage": 1, "duplicate_sends": 0, "race_trials": s23Trials, "race_both_won": 0,
	})
	r.Verdict = clocksVerdict(r, env.Variant)
	return r, nil
}

func (run *clockRun) close() {
	for _, db := range run.dbs {
		db.Close()
	}
}

// seed opens the lab's connections on the database's clock (the
// producer's, the broker's and the batch job's), creates the schema, starts the clock at
// t=0 and starts the three workers, each an instance on its own connection.
func (run *clockRun) seed(ctx context.Context, workers *instance.Set) error {
	clocked := store.WithDatabaseClock(ctx, store.NewDatabaseClock())
	for range 3 {
		db, err := run.env.Open(clocked, run.env.DatabasePath())
		if err != nil {
			return err
		}
		run.dbs = append(run.dbs, db)
	}
	run.setup = run.dbs[0]
	if err := run.setup.Migrate(ctx, store.RelayEvents, store.BrokerInbox); err != nil {
		return err
	}
	if err := run.setup.InstallDatabaseClock(ctx, 0); err != nil {
		return err
	}
	run.lab, run.broker = store.NewClockRelay(run.setup, run.sqls), store.NewBroker(run.dbs[1], store.BrokerLesson)
	run.batch = store.NewClockRelay(run.dbs[2], run.sqls)
	policy := cast.RetryOnDatabaseError
	if run.env.Is(variantOutageAsLeaseLoss) {
		policy = cast.EveryFailureIsLeaseLost
	}
	run.stage = cast.NewClockStage(run.lab, s23Lease, policy)
	o := run.env.Options
	for _, w := range []struct {
		into **cast.SkewedWorker
		name string
		skew int64
	}{{&run.s, s23WorkerS, -o.SkewSlow.Milliseconds()}, {&run.f, s23WorkerF, o.SkewFast.Milliseconds()}, {&run.n, s23WorkerN, 0}} {
		relay, err := run.env.Instances.ClockRelay(ctx, run.env.DatabasePath(), w.name, w.skew, run.sqls)
		if err != nil {
			return err
		}
		workers.Add(relay)
		run.relays[w.name] = relay
		*w.into = &cast.SkewedWorker{Name: w.name, Skew: w.skew, Relay: relay}
	}
	return nil
}

// at moves the database's clock to t.
func (run *clockRun) at(ctx context.Context, t int64) error {
	run.stage.Now = t
	return run.setup.MoveDatabaseClock(ctx, t)
}

// s23Script is what a part does, each step at a time on the database's
// clock; a step may schedule more.
type s23Script struct{ steps []s23Step }

type s23Step struct {
	at int64
	do func() error
}

// at schedules do at t.
func (sc *s23Script) at(t int64, do func() error) { sc.steps = append(sc.steps, s23Step{t, do}) }

// play runs the script's steps in time order, steps at the same time in
// the order they were scheduled.
func (run *clockRun) play(ctx context.Context, sc *s23Script) error {
	for len(sc.steps) > 0 {
		next := 0
		for i, s := range sc.steps {
			if s.at < sc.steps[next].at {
				next = i
			}
		}
		s := sc.steps[next]
		sc.steps = append(sc.steps[:next], sc.steps[next+1:]...)
		if err := run.at(ctx, s.at); err != nil {
			return err
		}
		if err := s.do(); err != nil {
			return err
		}
	}
	return nil
}

// insert commits event id now, as the producer's business transaction would.
func (run *clockRun) insert(ctx context.Context, id string) error {
	if err := run.lab.Insert(ctx, store.NewEvent{ID: id, Type: "PaymentSettled", Payload: fmt.Sprintf(`{"event":%q}`, id)}, run.stage.Now); err != nil {
		return err
	}
	run.stage.Note("producer", "commit", id+" committed with its business change")
	return nil
}

// send has w send id to the broker now.
func (run *clockRun) send(ctx context.Context, w *cast.SkewedWorker, id string) error {
	o, err := run.broker.Offer(ctx, id, fmt.Sprintf(`{"event":%q}`, id), w.Name, cast.ClockInstant(run.stage.Now), 0)
	if err != nil {
		return err
	}
	run.stage.Note(w.Actor(), "send", fmt.Sprintf("%s sent: the broker stored offer %d; its clock reads %s", id, o.OfferID, w.Reads(run.stage.Now)))
	return nil
}

// skewedClocks is part 1: Worker-S claims e1 at t=0 and works until t=400;
// Worker-F tries to claim e1 at t=100 and, if it takes it, works until
// t=450. Each acks when its work ends, unless its own clock says its
// lease is over.
func (run *clockRun) skewedClocks(ctx context.Context) error {
	sc := &s23Script{}
	work := func(w *cast.SkewedWorker, ends int64) error {
		c, err := run.stage.Claim(ctx, 1, w, "e1")
		if err != nil || c.Outcome != store.Claimed {
			return err
		}
		a := run.stage.Begin(w, c, ends)
		if c.LeaseUntil < ends {
			sc.at(max(c.LeaseUntil, a.Began), func() error {
				run.stage.Note("clock", "lease expires", fmt.Sprintf("%s's lease on e1 as its claim stored it: over at %s on the "+
					"database's clock; %s's own clock reads %s, its own deadline is t=%d, so it works on", w.Name,
					clock.Logical(c.LeaseUntil), w.Name, w.Reads(run.stage.Now), a.Deadline))
				return nil
			})
		}
		sc.at(ends, func() error {
			if ends+w.Skew >= a.Deadline {
				return nil // its own clock says the lease is over: it stops, unacked
			}
			_, err := run.stage.Ack(ctx, 1, w, "e1", c.Token)
			return err
		})
		return nil
	}
	sc.at(0, func() error { return run.insert(ctx, "e1") })
	sc.at(0, func() error { return work(run.s, 400) })
	sc.at(100, func() error { return work(run.f, 450) })
	return run.play(ctx, sc)
}

// outage is part 2: Worker-N's ack of e2 meets a batch job's lock past its
// busy timeout and is retried (or, under the mistake, given up and sent
// again by Worker-F); Worker-N stalls after sending e3, Worker-F reclaims
// and acks e3, and Worker-N's late ack changes 0 rows.
func (run *clockRun) outage(ctx context.Context) error {
	n, f, sc := run.n, run.f, &s23Script{}
	var c2, c3 store.EventClaim
	var held *store.Held
	claimed := func(w *cast.SkewedWorker, id string, into *store.EventClaim) error {
		c, err := run.stage.Claim(ctx, 2, w, id)
		if err == nil && c.Outcome != store.Claimed {
			err = fmt.Errorf("session 23: %s's claim of %s was %s, want claimed", w.Name, id, c.Outcome)
		}
		*into = c
		return err
	}
	deliver := func(w *cast.SkewedWorker, id string, c store.EventClaim, t int64) {
		sc.at(t, func() error { return run.send(ctx, w, id) })
		sc.at(t+50, func() error { _, err := run.stage.Ack(ctx, 2, w, id, c.Token); return err })
	}
	lock := "the database's write lock"
	if run.env.Engine() == store.Postgres {
		lock = "e2's row lock"
	}
	sc.at(1000, func() error { return run.insert(ctx, "e2") })
	sc.at(1000, func() error { return claimed(n, "e2", &c2) })
	sc.at(1050, func() error { return run.send(ctx, n, "e2") })
	sc.at(1100, func() error {
		var err error
		held, err = run.batch.Hold(ctx, "e2")
		run.stage.Note(s23BatchJob, "locks e2", "a long batch transaction rewrites e2's row and stays open: it holds "+lock)
		return err
	})
	sc.at(1100, func() error {
		a, err := run.stage.Ack(ctx, 2, n, "e2", c2.Token)
		if a.Retry {
			sc.at(1200, func() error { _, err := run.stage.Ack(ctx, 2, n, "e2", c2.Token); return err })
		} else if a.Rows == 0 {
			sc.at(c2.LeaseUntil, func() error {
				run.stage.Note("clock", "lease expires", "Worker-N's lease on e2 has run out, never acked: e2 is claimable again")
				return nil
			})
		}
		return err
	})
	sc.at(1150, func() error {
		run.stage.Note(s23BatchJob, "unlocks e2", "the batch transaction commits: the outage is over")
		return held.Release()
	})
	sc.at(1600, func() error {
		c, err := run.stage.Claim(ctx, 2, f, "e2")
		if err == nil && c.Outcome == store.Claimed {
			deliver(f, "e2", c, 1650)
		}
		return err
	})
	sc.at(2000, func() error { return run.insert(ctx, "e3") })
	sc.at(2000, func() error { return claimed(n, "e3", &c3) })
	sc.at(2050, func() error { return run.send(ctx, n, "e3") })
	sc.at(2050, func() error {
		how, err := run.relays[s23WorkerN].Stall(clock.Logical(run.stage.Now), "its send of e3")
		run.stage.Note(n.Actor(), "stalls", instance.WithHow("a long GC pause after its send: Worker-N still believes it owns e3", how))
		return err
	})
	sc.at(2500, func() error {
		run.stage.Note("clock", "lease expires", "Worker-N's lease on e3 ran until "+clock.Logical(c3.LeaseUntil)+": e3 is claimable")
		return nil
	})
	sc.at(2600, func() error {
		var c store.EventClaim
		err := claimed(f, "e3", &c)
		deliver(f, "e3", c, 2650)
		return err
	})
	sc.at(2800, func() error {
		how, err := run.relays[s23WorkerN].Wake(clock.Logical(run.stage.Now), "its ack of e3")
		if err != nil {
			return err
		}
		run.stage.Note(n.Actor(), "wakes", instance.WithHow("the pause ends; it acks e3 with the token it remembers", how))
		_, err = run.stage.Ack(ctx, 2, n, "e3", c3.Token)
		return err
	})
	return run.play(ctx, sc)
}

// raceAtLeaseEnd is part 3: 200 trials in which Worker-S's renewal of e4
// and Worker-F's claim of it start together at exactly the lease end, each
// on its own connection (a process each with --processes).
func (run *clockRun) raceAtLeaseEnd(ctx context.Context) error {
	if err := run.at(ctx, s23RaceAt); err != nil {
		return err
	}
	if err := run.insert(ctx, "e4"); err != nil {
		return err
	}
	owner, claimer, barrier := run.relays[s23WorkerS], run.relays[s23WorkerF], cast.NewBarrier(2)
	side := func(err *error, do func() error) func() {
		return func() {
			if *err = barrier.Wait(ctx); *err == nil {
				time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond) // each request arrives when it arrives
				*err = do()
			}
		}
	}
	for range s23Trials {
		token, until, err := run.lab.Stage(ctx, "e4", s23WorkerS)
		if err != nil {
			return err
		}
		var renewed store.Fenced
		var claim store.EventClaim
		var errs [2]error
		var wg sync.WaitGroup
		wg.Go(side(&errs[0], func() (err error) { renewed, err = owner.Renew(ctx, "e4", token, s23RaceAt, s23Lease); return err }))
		wg.Go(side(&errs[1], func() (err error) { claim, err = claimer.Claim(ctx, "e4", s23RaceAt, s23Lease); return err }))
		wg.Wait()
		if err := errors.Join(errs[:]...); err != nil {
			return err
		}
		run.race.add(until == s23RaceAt, renewed.Rows == 1, claim.Outcome == store.Claimed)
	}
	rc := run.race
	renewals := fmt.Sprintf("0 rows in all %d trials", s23Trials)
	if won := rc.renewalOnly + rc.both; won > 0 {
		renewals = fmt.Sprintf("1 row in %d of %d trials", won, s23Trials)
	}
	run.stage.Note(run.s.Actor(), "renew", fmt.Sprintf("e4 at exactly its lease end, %d trials (before each, the lab staged e4 as "+
		"Worker-S's under a new token, its lease ending now): %s", s23Trials, renewals))
	run.stage.Note(run.f.Actor(), "claim claimed", fmt.Sprintf("e4 at the same instant in each trial: 1 row in %d of %d trials, each a new "+
		"token, lease until %d", rc.claimOnly+rc.both, s23Trials, s23RaceAt+s23Lease))
	return nil
}

// add counts one trial: whether it met at the lease end, and who won.
func (t *s23RaceTally) add(met, renewed, claimed bool) {
	if met {
		t.met++
	}
	switch {
	case renewed && claimed:
		t.both++
	case renewed:
		t.renewalOnly++
	case claimed:
		t.claimOnly++
	default:
		t.neither++
	}
}

// measure sets the lesson's figures from the ledgers and the database.
func (run *clockRun) measure(ctx context.Context, r *lab.Result) error {
	st := run.stage
	r.SetMetric("live_lease_claims", float64(st.LiveLeaseClaims()))
	var after, onE1 int64
	for _, a := range st.Attempts {
		after += max(0, a.Ended-a.LeaseEnd)
		if a.Event == "e1" {
			onE1++
		}
	}
	r.SetMetric("work_after_lease_end_ms", float64(after))
	r.SetMetric("e1_processing_attempts", float64(onE1))
	var dbErrors, lost int
	for _, a := range st.Acks {
		if a.Part == 2 && a.Reason == cast.AckDatabaseError {
			dbErrors++
		}
		if a.Part == 2 && a.Reason == cast.AckLeaseLost {
			lost++
		}
	}
	r.SetMetric("ack_failures_database_error", float64(dbErrors))
	r.SetMetric("ack_failures_lease_lost", float64(lost))
	r.SetMetric("acks_retried_after_outage", float64(st.RetriedAfterOutage(2)))
	offers, err := run.broker.Offers(ctx)
	if err != nil {
		return err
	}
	sends, duplicates, err := s23Sends(offers, st.GaveUp)
	if err != nil {
		return err
	}
	r.SetMetric("duplicate_sends", float64(duplicates))
	rc := run.race
	for _, kv := range []struct {
		key string
		n   int
	}{{"race_trials", rc.met}, {"race_both_won", rc.both}, {"race_claim_won", rc.claimOnly}, {"race_renewal_won", rc.renewalOnly},
		{"race_neither_won", rc.neither}} {
		r.SetMetric(kv.key, float64(kv.n))
	}
	if r.Schema, err = run.setup.Schema(ctx); err != nil {
		return err
	}
	events, err := run.lab.Events(ctx)
	if err != nil {
		return err
	}
	r.Timeline = st.Timeline.Events()
	r.Tables = append(append(append([]lab.Table{run.clocksTable()}, st.Tables(2)...), sends, rc.table()), cast.OutboxEventsTable(events))
	return nil
}

// s23Sends is the broker's offers as a table, and the duplicate sends
// among them: sends of an event after a relay gave it up while the
// database still held it for that relay.
func s23Sends(offers []store.BrokerOffer, gaveUp []cast.GiveUp) (lab.Table, int, error) {
	t := lab.Table{Title: "Sends: the broker's offers (from the database)",
		Note:    "A send after a relay gave up an event it still held is a duplicate only the ack policy caused.",
		Columns: []string{"Offer", "Event", "Sent by", "At", "After its owner gave it up with a live lease"}}
	dup := 0
	for _, o := range offers {
		at, err := clock.Parse(o.OfferedAt)
		if err != nil {
			return t, 0, err
		}
		tick, after := at.Sub(cast.ClockStart).Milliseconds(), false
		for _, g := range gaveUp {
			after = after || (g.Held && g.Event == o.EventID && tick > g.At)
		}
		if after {
			dup++
		}
		t.AddRow(o.OfferID, o.EventID, o.OfferedBy, clock.Logical(tick), after)
	}
	return t, dup, nil
}

// clocksTable puts each worker's clock beside the database's.
func (run *clockRun) clocksTable() lab.Table {
	t := lab.Table{Title: "Clocks: the database's and each worker's",
		Note: "t is milliseconds on the database's clock from 10:00:00.000Z. db_now() decides every lease instant in the " +
			"lesson's statements; a worker's own clock only measures how long it has held its lease (500 ms from the " +
			"claim's answer), and no offset between clocks stretches or shortens a duration.",
		Columns: []string{"Clock", "Offset", "At the database's t=0 it reads"}}
	t.AddRow("the database's: db_now()", "0 ms", "t=0 (10:00:00.000)")
	for _, w := range []*cast.SkewedWorker{run.s, run.f, run.n} {
		t.AddRow(w.Name+"'s", fmt.Sprintf("%+d ms", w.Skew), fmt.Sprintf("%s (%s)", w.Reads(0), cast.ClockText(w.Skew)))
	}
	return t
}

// table is the race's outcomes.
func (t s23RaceTally) table() lab.Table {
	tb := lab.Table{Title: "Race at the lease end (part 3): who won",
		Note: fmt.Sprintf("In %d of %d trials the two met at exactly the lease end, as read back from the database. A lease that "+
			"ends at t is over at t: a renewal that commits first finds the lease ended (0 rows), one that commits after the claim "+
			"presents a stale token (0 rows).", t.met, s23Trials),
		Columns: []string{"Outcome", "Trials", "Who believes it owns e4"}}
	tb.AddRow("the claim won, the renewal changed 0 rows", t.claimOnly, "Worker-F")
	tb.AddRow("the renewal won, the claim changed 0 rows", t.renewalOnly, "Worker-S")
	tb.AddRow("both won", t.both, "Worker-F and Worker-S: two owners")
	tb.AddRow("neither won", t.neither, "nobody")
	return tb
}

// clocksVerdict says what the checks showed.
func clocksVerdict(r *lab.Result, variant string) string {
	m := metricsOf(r)
	switch {
	case r.Passed():
		return fmt.Sprintf("SAFE DESIGN held. On the database's clock no claim took a live lease (%s) and no work ran past its "+
			"lease (%s ms): e1 had %s processing attempt. At the outage the ack failed with a database error (%s), was "+
			"retried and acked (%s); the lost lease on e3 was recorded apart (%s), and no event was sent again because a "+
			"relay gave it up (%s). In %s trials at exactly the lease end the renewal and the claim never both won (%s): "+
			"the claim won %s, the renewal %s. The clocks decide when a lease ends; the fencing token decides who may write.",
			m("live_lease_claims"), m("work_after_lease_end_ms"), m("e1_processing_attempts"), m("ack_failures_database_error"),
			m("acks_retried_after_outage"), m("ack_failures_lease_lost"), m("duplicate_sends"), m("race_trials"), m("race_both_won"),
			m("race_claim_won"), m("race_renewal_won"))
	case variant != "":
		return fmt.Sprintf("DESIGN BROKEN by the %q mistake: failed checks %v.", variant, r.FailedChecks())
	default:
		return fmt.Sprintf("NOT SHOWN: the design did not hold this run; failed checks %v.", r.FailedChecks())
	}
}
