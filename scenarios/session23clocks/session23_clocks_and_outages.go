// Package session23clocks is the lesson session-23-clocks-and-outages: its
// Lesson (the sequence, the checks, the variants and what the registry's
// tests read to prove it), the stages and actors only it uses, its proofs
// (proofs.go) and its tests.
package session23clocks

import (
	"context"
	"fmt"
	"time"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/clock"
	"github.com/outboxlab/outboxlab/instance"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/store"
)

// Session 23's mistake variants.
const (
	variantWorkerClockLeases = "worker-clock-leases"
	variantOutageAsLeaseLoss = "outage-as-lease-loss"
	s23RenewByEventID        = "renew-by-event-id"
)

// Session 23's cast and figures. Time is milliseconds on the database's
// clock from ClockStart (10:00:00.000Z); every lease is 500 ms.
const (
	s23Lease    = 500
	s23WorkerS  = "Worker-S" // its clock reads behind the database's
	s23WorkerF  = "Worker-F" // its clock reads ahead
	s23WorkerN  = "Worker-N" // its clock agrees
	s23BatchJob = "Batch-Job"
	s23Trials   = 200
	s23RaceAt   = 5000 // the race's instant: every trial's lease ends here
)

// Lesson is session-23-clocks-and-outages, as the registry lists it: "Session
// 23: whose clock is it? Skewed workers, a database outage at the ack, and
// renewal racing a reclaim".
var Lesson = lesson.Scenario{
	Name:    "session-23-clocks-and-outages",
	Session: "Session-23",
	FileTag: "Clocks-And-Outages",
	Title:   "Session 23: whose clock is it? Skewed workers, a database outage at the ack, and renewal racing a reclaim",
	Design:  lab.Safe,
	Figures: map[string]float64{
		"live_lease_claims": 0, "work_after_lease_end_ms": 0, "e1_processing_attempts": 1,
		"ack_failures_database_error": 1, "ack_failures_lease_lost": 2, "expired_ack_rows": 0,
		"acks_retried_after_outage": 1, "duplicate_sends": 0, "race_trials": 200, "race_both_won": 0,
	},
	Teaches: "Three things a lease's tests leave out, on the database's clock (UTC from {clock_start}; each time in the " +
		"report has its tick, ms from then, beside it), lease {lease}. " +
		"Part 1: {@slow_worker}'s clock reads {skew_slow} behind the database's, {@fast_worker}'s {skew_fast} ahead " +
		"(--skew-slow, --skew-fast; the Clocks table gives this run's). " +
		"Every lease instant comes from the database's clock: the claim, the ack and the renewal call db_now() (on SQLite " +
		"a function of the lab's connections that the scenario clock drives), and a worker holds its lease as {lease} from " +
		"the claim's answer on its own clock, never as an instant. {@slow_worker} claims {@skewed_event} at " +
		"{skewed_claim_at}; {@fast_worker} tries to claim it at {fast_claim_at}, while that lease is live; {@slow_worker} " +
		"works until {slow_work_ends} and acks it.\n\n" +
		"Part 2: {@steady_worker} sends {@outage_event} and its ack meets a batch job holding the lock past the ack's " +
		"busy timeout ({busy_timeout}, waited on the wall clock while the database's clock stands). A database error says " +
		"nothing about ownership, so the relay retries the fenced ack. " +
		"{@steady_worker} sends {@reclaimed_event} and stalls past its lease; {@fast_worker} reclaims and acks it; " +
		"{@steady_worker}'s late ack is fenced.\n\n" +
		"{@steady_worker} then sends {@expired_event} and stalls past its lease with nobody reclaiming it: its token is " +
		"still current, yet the lease ran out (lease_until > db_now() refuses its late ack), and the relay records that " +
		"as lease lost. The ack ledger records each failed ack with its reason, and the operational view keeps database " +
		"errors and lost leases apart.\n\nPart 3: {@race_owner}'s renewal and {@race_claimer}'s claim meet at exactly the " +
		"lease end, {race_trials} times, each on its own connection. A lease that ends at t is over at t, so the " +
		"renewal loses whatever the order: first, it finds the lease ended; after the claim, its token is stale.",
	OnPostgres: "On PostgreSQL db_now() is a function in the run's schema reading the server's clock, a one-row table " +
		"(db_clock) that the lab moves, the same for every connection; the outage is the batch job's lock on the " +
		"outage event's row, and the ack bounds its wait with SET LOCAL lock_timeout (see its statement) as SQLite's busy " +
		"timeout, {busy_timeout}, bounds it there.",
	DoesNotSolve: "A lease held as a duration on the worker's own clock survives any offset between clocks, not a clock " +
		"that runs fast or slow, nor a pause the worker cannot see (GC, SIGSTOP): a worker must stop before its lease " +
		"ends by a margin for drift and pauses, and only the fencing token stops a late write. The database's clock can " +
		"jump too (an NTP step on the server). A database error at the ack may hide an ack that did commit (a connection " +
		"lost after the commit): the retry is safe because the ack is fenced and idempotent, but an effect already sent " +
		"stays sent, so consumers still need the inbox (session 18).",
	Statements: []store.Stmt{store.ClaimOnDatabaseClock, store.AckOnDatabaseClock, store.RenewOnDatabaseClock},
	Settings:   clocksSettings,
	Set:        store.ClockLesson,
	Options: []lesson.Option{
		{Flag: "skew-slow", Usage: "how far Worker-S's clock reads behind the database's, a `DURATION`",
			Duration: func(o *lesson.Options) *time.Duration { return &o.SkewSlow }},
		{Flag: "skew-fast", Usage: "how far Worker-F's clock reads ahead of the database's, a `DURATION`",
			Duration: func(o *lesson.Options) *time.Duration { return &o.SkewFast }},
	},
	Checks: []lesson.CheckDoc{
		{Name: "live_lease_claims", About: "claims that took a lease live on the database's clock"},
		{Name: "work_after_lease_end_ms", About: "ms of work past the lease end its claim stored"},
		{Name: "e1_processing_attempts", About: "processing attempts on {@skewed_event}, which {@skewed_owner} claimed " +
			"first"},
		{Name: "ack_failures_database_error", About: "failed acks of the outage part the relay recorded as database error"},
		{Name: "ack_failures_lease_lost", About: "failed acks of the outage part the relay recorded as lease lost"},
		{Name: "expired_ack_rows", About: "rows changed by {@steady_worker}'s late ack of {@expired_event}, its lease " +
			"run out with nobody reclaiming it"},
		{Name: "acks_retried_after_outage", About: "acks that succeeded on retry after a database error"},
		{Name: "duplicate_sends", About: "sends of an event given up while its lease was live"},
		{Name: "race_trials", About: "race trials that met at exactly the lease end", Measure: true},
		{Name: "race_both_won", About: "trials in which the renewal and the claim both won"},
		{Name: "race_renewal_won", About: "trials in which the renewal alone won: a renewal at exactly the lease end " +
			"changed the ended lease"},
	},
	Variants: []lesson.Variant{
		{Name: variantWorkerClockLeases, Swaps: []store.Stmt{store.ClaimOnWorkerClock},
			Mistake: "the claim compares and writes lease instants on each worker's own clock (:now) instead of the " +
				"database's: each worker's idea of a lease's end is stored where the others read it",
			Breaks: []string{"live_lease_claims", "work_after_lease_end_ms", "e1_processing_attempts"},
			Shows: "Each claim stores a lease end on its own worker's clock: {@slow_worker}'s, read {skew_slow} behind the " +
				"database's, ends early; {@fast_worker}'s, read {skew_fast} ahead, finds a live lease over. In this run the " +
				"claims that took a lease the database's clock said was live: {live_lease_claims}; processing attempts on " +
				"{@skewed_event}: {e1_processing_attempts}; work past the lease its claim stored: {work_after_lease_end_ms} " +
				"ms. Processes that share a lease must measure it on one clock."},
		{Name: variantOutageAsLeaseLoss,
			Changes: "the relay's ack policy (EveryFailureIsLeaseLost): every failed ack, an error as well as 0 rows, " +
				"is recorded as lease-lost and its event given up; the statements are the lesson's",
			Mistake: "the relay treats every failed ack as a lost lease: the database error at the outage's ack is recorded as " +
				"lease-lost and its event is given up instead of retried",
			Breaks: []string{"ack_failures_database_error", "ack_failures_lease_lost", "acks_retried_after_outage", "duplicate_sends"},
			Shows: "In this run {@outage_acker} gives {@outage_event} up while its token is current and its lease live until " +
				"{outage_lease_end}; after the lease runs out {@resender} claims {@outage_event} and sends it again, a " +
				"duplicate nothing else caused (duplicate sends: {duplicate_sends}). The operational view counts lost " +
				"leases: {ack_failures_lease_lost}, outages: {ack_failures_database_error}, so no one looks at the database. " +
				"A database error says nothing about ownership: the relay retries the fenced ack, and the rows it changes say."},
		{Name: s23RenewByEventID, Swaps: []store.Stmt{store.RenewOnDatabaseClockByEventID},
			Mistake: "the renewal drops the token: a renewal that commits after another worker's claim finds that " +
				"worker's new lease live and extends it",
			Breaks: []string{"race_both_won"},
			Shows: "In each trial where {@race_claimer}'s claim commits first, {@race_owner}'s renewal at the same instant " +
				"still changes the row: both believe they own {@race_event}, {@race_owner} by its renewal and {@race_claimer} " +
				"by its claim; in this run both won in {race_both_won} of {race_trials} trials. (On PostgreSQL only a " +
				"renewal that starts after the claim's commit sees the new lease; one that starts earlier reads the old, " +
				"ended one.) With the token, the late renewal changes no row, and at exactly the lease end the renewal " +
				"loses whatever the order."},
	},
	Breakers:  breakers(),
	Guards:    guards(),
	Processes: processes,
	Run: func(ctx context.Context, env *lesson.Env) (*lab.Result, error) {
		return runClocksAndOutages(ctx, env, lesson.StatementSet(env, store.ClockLesson))
	},
}

// clockRun is one session-23 run: the lab's connections, the broker, the
// three workers and the stage that keeps the database's time and the
// ledgers.
type clockRun struct {
	env     *lesson.Env
	sqls    store.ClockSQL
	dbs     []*store.DB
	setup   *store.DB
	lab     *store.ClockRelay // the producer's and the lab's own statements
	batch   *store.ClockRelay // the batch job's connection
	broker  store.Broker
	s, f, n *SkewedWorker
	relays  map[string]instance.ClockRelay
	stage   *ClockStage
	race    RaceTally
	// expiredAckRows are the rows Worker-N's late ack of e5 changed.
	expiredAckRows int64
	// raceOwner, raceClaimer and raceEvent are who renewed and who claimed
	// which event in part 3's trials.
	raceOwner, raceClaimer, raceEvent string
}

// runClocksAndOutages runs session 23 with the statements sqls.
func runClocksAndOutages(ctx context.Context, env *lesson.Env, sqls store.ClockSQL) (*lab.Result, error) {
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
	lesson.ExpectDocumented(r, env.Scenario.Checks, map[string]float64{
		"live_lease_claims": 0, "work_after_lease_end_ms": 0, "e1_processing_attempts": 1, "ack_failures_database_error": 1,
		"ack_failures_lease_lost": 2, "expired_ack_rows": 0, "acks_retried_after_outage": 1, "duplicate_sends": 0, "race_trials": s23Trials, "race_both_won": 0,
		"race_renewal_won": 0,
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
// producer's, the broker's and the batch job's), creates the schema,
// starts the clock at t=0 and starts the three workers, each an instance
// on its own connection.
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
	policy := RetryOnDatabaseError
	if run.env.Is(variantOutageAsLeaseLoss) {
		policy = EveryFailureIsLeaseLost
	}
	run.stage = NewClockStage(run.lab, s23Lease, policy)
	run.stage.LockWait = store.DefaultConfig.BusyTimeout // every connection's, as lesson.Env.Open and the children open them
	run.stage.AckStmt = run.sqls.Ack
	o := run.env.Options
	for _, w := range []struct {
		into **SkewedWorker
		name string
		skew int64
	}{{&run.s, s23WorkerS, -o.SkewSlow.Milliseconds()}, {&run.f, s23WorkerF, o.SkewFast.Milliseconds()}, {&run.n, s23WorkerN, 0}} {
		relay, err := run.env.Instances.ClockRelay(ctx, run.env.DatabasePath(), w.name, w.skew, run.sqls)
		if err != nil {
			return err
		}
		workers.Add(relay)
		run.relays[w.name] = relay
		*w.into = &SkewedWorker{Name: w.name, Skew: w.skew, Relay: relay}
	}
	return nil
}

// at moves the database's clock to t.
func (run *clockRun) at(ctx context.Context, t int64) error {
	run.stage.Now = t
	return run.setup.MoveDatabaseClock(ctx, t)
}

// insert commits event id now, as the producer's business transaction would.
func (run *clockRun) insert(ctx context.Context, id string) error {
	if err := run.lab.Insert(ctx, store.NewEvent{ID: id, Type: "PaymentSettled", Payload: fmt.Sprintf(`{"event":%q}`, id)}, run.stage.Now); err != nil {
		return err
	}
	run.stage.Add(lab.Event{Kind: lab.KindCommit, Subject: id, Actor: "producer", Action: "commit", Detail: id + " committed with its business change"})
	return nil
}

// send has w send id to the broker now.
func (run *clockRun) send(ctx context.Context, w *SkewedWorker, id string) error {
	o, err := run.broker.Offer(ctx, id, fmt.Sprintf(`{"event":%q}`, id), w.Name, cast.DatabaseTicks.Instant(run.stage.Now), 0)
	if err != nil {
		return err
	}
	run.stage.Add(lab.Event{Kind: lab.KindOffer, Subject: id, Offer: o.OfferID, Actor: w.Actor(), Action: "send",
		Detail: fmt.Sprintf("%s sent: the broker stored offer %d; its clock reads %s", id, o.OfferID, w.Reads(run.stage.Now))})
	return nil
}

// skewedClocks is part 1: Worker-S claims e1 at t=0 and works until t=400;
// Worker-F tries to claim e1 at t=100 and, if it takes it, works until
// t=450. Each acks when its work ends, unless its own clock says its
// lease is over.
func (run *clockRun) skewedClocks(ctx context.Context) error {
	sc := &Script{}
	work := func(w *SkewedWorker, ends int64) error {
		c, err := run.stage.Claim(ctx, 1, w, "e1")
		if err != nil || c.Outcome != store.Claimed {
			return err
		}
		a := run.stage.Begin(w, c, ends)
		if c.LeaseUntil < ends {
			sc.At(max(c.LeaseUntil, a.Began), func() error {
				for _, later := range run.stage.Claims {
					if later.Event == "e1" && later.Outcome == store.Claimed && later.At > a.Began && later.Worker != w.Name {
						// Not an expiry of a lease its owner held: the lease was taken.
						run.stage.Event(lab.KindNote, "clock", "lease end passes", fmt.Sprintf("the end %s's claim stored for "+
							"e1, %s, passes; %s took e1 at %s, while that lease was live", w.Name, s23Time(c.LeaseUntil),
							later.Worker, s23Time(later.At)))
						return nil
					}
				}
				run.stage.Add(lab.Event{Kind: lab.KindExpiry, Subject: "e1", Actor: "clock", Action: "lease expires", Detail: fmt.Sprintf("%s's lease on e1 as its claim stored it: over at %s on the "+
					"database's clock; %s's own clock reads %s, its own deadline is %s, so it works on", w.Name,
					s23Time(c.LeaseUntil), w.Name, w.Reads(run.stage.Now), s23Time(a.Deadline))})
				return nil
			})
		}
		sc.At(ends, func() error {
			if ends+w.Skew >= a.Deadline {
				return nil // its own clock says the lease is over: it stops, unacked
			}
			_, err := run.stage.Ack(ctx, 1, w, "e1", c.Token)
			return err
		})
		return nil
	}
	sc.At(0, func() error { return run.insert(ctx, "e1") })
	sc.At(0, func() error { return work(run.s, 400) })
	sc.At(100, func() error { return work(run.f, 450) })
	return sc.Play(ctx, run.at)
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
		if a.Part == 2 && a.Reason == AckDatabaseError {
			dbErrors++
		}
		if a.Part == 2 && a.Reason == AckLeaseLost {
			lost++
		}
	}
	r.SetMetric("ack_failures_database_error", float64(dbErrors))
	r.SetMetric("ack_failures_lease_lost", float64(lost))
	r.SetMetric("expired_ack_rows", float64(run.expiredAckRows))
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
	rc, all := run.race, run.race.All()
	for _, kv := range []struct {
		key string
		n   int
	}{{"race_trials", rc.Met}, {"race_both_won", all.Both}, {"race_claim_won", all.ClaimOnly}, {"race_renewal_won", all.RenewalOnly},
		{"race_neither_won", all.Neither}} {
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
	run.castRoles(r, offers)
	r.Tables = append(append(append([]lab.Table{run.clocksTable()}, st.Tables(2)...), sends, rc.Table(s23Spread, "e4", s23WorkerS, s23WorkerF)), cast.OutboxEventsTable(events, cast.DatabaseTicks))
	return nil
}

// s23Sends is the broker's offers as a table, and the duplicate sends
// among them: sends of an event after a relay gave it up while the
// database still held it for that relay.
func s23Sends(offers []store.BrokerOffer, gaveUp []GiveUp) (lab.Table, int, error) {
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
		t.AddRow(o.OfferID, o.EventID, o.OfferedBy, s23Time(tick), after)
	}
	return t, dup, nil
}

// clocksTable puts each worker's clock beside the database's.
func (run *clockRun) clocksTable() lab.Table {
	t := lab.Table{Title: "Clocks: the database's and each worker's",
		Note: "t is milliseconds on the database's clock from " + cast.DatabaseTicks.Clock(0) + "Z. db_now() decides every " +
			"lease instant in the lesson's statements; a worker's own clock only measures how long it has held its lease (" +
			fmt.Sprint(s23Lease) + " ms from the claim's answer), and no offset between clocks stretches or shortens a duration.",
		Columns: []string{"Clock", "Offset", "At the database's t=0 it reads"}}
	t.AddRow("the database's: db_now()", "0 ms", s23Time(0))
	for _, w := range []*SkewedWorker{run.s, run.f, run.n} {
		t.AddRow(w.Name+"'s", fmt.Sprintf("%+d ms", w.Skew), w.Reads(0))
	}
	return t
}

// clocksVerdict says what the checks showed.
func clocksVerdict(r *lab.Result, variant string) string {
	m := lesson.MetricsOf(r)
	switch {
	case r.Passed():
		return r.Fill(fmt.Sprintf("SAFE DESIGN held. On the database's clock no claim took a live lease (%s) and no work ran past its "+
			"lease (%s ms); processing attempts on {@skewed_event}: %s. At the outage the ack of {@outage_event} failed with a "+
			"database error (%s), was retried and acked (%s); the lost leases on {@reclaimed_event} and {@expired_event} were "+
			"recorded apart (%s), and no event was sent again because a relay gave it up (%s). In %s trials at exactly the "+
			"lease end the renewal and the claim never both won (%s): the claim won %s, the renewal %s. The clocks decide "+
			"when a lease ends; the fencing token decides who may write.",
			m("live_lease_claims"), m("work_after_lease_end_ms"), m("e1_processing_attempts"), m("ack_failures_database_error"),
			m("acks_retried_after_outage"), m("ack_failures_lease_lost"), m("duplicate_sends"), m("race_trials"), m("race_both_won"),
			m("race_claim_won"), m("race_renewal_won")))
	case variant != "":
		return "" // lesson.Execute opens a variant's verdict with what its checks measured
	default:
		return fmt.Sprintf("NOT SHOWN: the design did not hold this run; failed checks %v.", r.FailedChecks())
	}
}

// s23Time is tick t on the database's clock as a student reads it: the
// clock time, the tick beside it.
func s23Time(t int64) string { return cast.DatabaseTicks.Time(t) }

// clocksSettings are the settings session 23's texts quote, as opts set
// them: the skews, the lease, the busy timeout of every connection (the
// store's config, which lesson.Env.Open and the workers' processes use) and the
// instant the database's clock starts.
func clocksSettings(opts lesson.Options) map[string]string {
	return map[string]string{
		"skew_slow":    fmt.Sprintf("%d ms", opts.SkewSlow.Milliseconds()),
		"skew_fast":    fmt.Sprintf("%d ms", opts.SkewFast.Milliseconds()),
		"lease":        fmt.Sprintf("%d ms", s23Lease),
		"busy_timeout": store.DefaultConfig.BusyTimeout.String(),
		"clock_start":  cast.DatabaseTicks.Clock(0) + "Z",
	}
}

// castRoles records who played each role and the instants the texts
// quote, read from the ledgers and the broker: the slow, fast and steady
// workers are the ones the run started with those clocks; the skewed
// event and its owner, part 1's first successful claim; the outage event
// and its acker, part 2's ack whose statement failed; the resender, a
// worker other than that acker that sent the outage event; the reclaimed
// event, one of part 2 whose first owner's ack changed no row after a
// second worker claimed it; the expired event, one whose owner's ack changed
// no row and that nobody else claimed; the race's owner and claimer, the
// workers whose connections renewed and claimed in part 3.
func (run *clockRun) castRoles(r *lab.Result, offers []store.BrokerOffer) {
	st := run.stage
	r.SetCast("slow_worker", run.s.Name)
	r.SetCast("fast_worker", run.f.Name)
	r.SetCast("steady_worker", run.n.Name)
	r.SetCast("race_owner", run.raceOwner)
	r.SetCast("race_claimer", run.raceClaimer)
	r.SetCast("race_event", run.raceEvent)
	claimers := map[string][]ClockClaim{} // each part 2 event's successful claims
	for _, c := range st.Claims {
		if c.Outcome != store.Claimed {
			if c.Part == 1 && r.Cast["skewed_owner"] != "" && c.Worker != r.Cast["skewed_owner"] && r.Settings["fast_claim_at"] == "" {
				r.SetSetting("fast_claim_at", s23Time(c.At))
			}
			continue
		}
		switch {
		case c.Part == 1 && r.Cast["skewed_owner"] == "":
			r.SetCast("skewed_event", c.Event)
			r.SetCast("skewed_owner", c.Worker)
			r.SetSetting("skewed_claim_at", s23Time(c.At))
		case c.Part == 1 && r.Settings["fast_claim_at"] == "" && c.Worker != r.Cast["skewed_owner"]:
			r.SetSetting("fast_claim_at", s23Time(c.At))
		case c.Part == 2:
			claimers[c.Event] = append(claimers[c.Event], c)
		}
	}
	for _, a := range st.Attempts {
		if a.Worker == r.Cast["skewed_owner"] && a.Event == r.Cast["skewed_event"] {
			r.SetSetting("slow_work_ends", s23Time(a.Ended))
			break
		}
	}
	for _, a := range st.Acks {
		if a.Part != 2 {
			continue
		}
		claims := claimers[a.Event]
		switch {
		case a.Err != "" && r.Cast["outage_event"] == "":
			r.SetCast("outage_event", a.Event)
			r.SetCast("outage_acker", a.Worker)
			for _, c := range claims {
				if c.Worker == a.Worker {
					r.SetSetting("outage_lease_end", s23Time(c.LeaseUntil))
				}
			}
		case a.Err == "" && a.Rows == 0 && len(claims) > 1 && claims[0].Worker == a.Worker:
			r.SetCast("reclaimed_event", a.Event)
		case a.Err == "" && a.Rows == 0 && len(claims) == 1 && claims[0].Worker == a.Worker:
			r.SetCast("expired_event", a.Event)
		}
	}
	for _, o := range offers {
		if o.EventID == r.Cast["outage_event"] && o.OfferedBy != r.Cast["outage_acker"] {
			r.SetCast("resender", o.OfferedBy)
		}
	}
}
