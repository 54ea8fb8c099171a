// Package session16fencing is the lesson session-16-stale-ack-fencing: its
// Lesson (the sequence, the checks, the variants and what the registry's
// tests read to prove it), the stages and actors only it uses, its proofs
// (proofs.go) and its tests.
package session16fencing

import (
	"context"
	"fmt"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/instance"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/store"
)

// The mistake variants of session-16-stale-ack-fencing.
const (
	variantAckByEventID = "ack-by-event-id"
	variantReusedToken  = "reused-token"
)

// reusedWorkerToken is what the reused-token mistake stamps on every claim:
// the worker's configured number, the same for every replica of the relay
// and for every claim attempt.
const reusedWorkerToken = 1

// Why an ack changed no row, as the failed-ack ledger records it.
const (
	reasonLeaseLost        = "lease-lost"        // a newer claim holds the event: our token is stale
	reasonAlreadyDelivered = "already-delivered" // our token is current but someone completed the event
	reasonDatabaseError    = "database-error"    // the statement itself failed; nothing is known about ownership
)

// The session-16 timeline in logical ticks (milliseconds from
// cast.LessonStart, printed as clock time): A's lease runs out at 130.
const (
	s16ClaimA       = 100
	s16LeaseA       = 130
	s16ClaimB       = 140
	s16LeaseB       = 170
	s16AckA         = 150
	s16AckB         = 160
	s16RetryB       = 165 // Worker-B's ack sent again, as after a lost reply
	s16ClaimDone    = 200
	s16WorkerA      = "Worker-A"
	s16WorkerB      = "Worker-B"
	s16EventID      = "E-41"
	s16EventType    = "PaymentSettled"
	s16EventPayload = `{"paymentKey":"PAY-041","amountCents":4100}`
)

// Lesson is session-16-stale-ack-fencing, as the registry lists it: "Session
// 16: a fencing token turns a stale owner's ack into 0 rows".
var Lesson = lesson.Scenario{
	Name:    "session-16-stale-ack-fencing",
	Session: "Session-16",
	FileTag: "Stale-Ack-Fencing",
	Title:   "Session 16: a fencing token turns a stale owner's ack into 0 rows",
	Design:  lab.Safe,
	Figures: map[string]float64{
		"stale_ack_rows": 0, "current_ack_rows": 1, "reclaim_after_delivery_rows": 0, "distinct_tokens": 2,
		"failed_acks_lease_lost": 1,
	},
	Teaches: "Every successful claim increments the event's claim_token and hands that token to the claimer. " +
		"The ack is UPDATE … WHERE event_id = :id AND claim_token = :token AND delivered = 0, so only the current " +
		"owner's ack changes a row. {@stale_owner} claims {@event} with token {stale_token} and stalls past its lease, " +
		"which ends at {stale_lease_end}; {@current_owner} reclaims it at {reclaimed_at} with token {current_token}. " +
		"In this run {@stale_owner}'s late ack changed {stale_ack_changed} (the design records a 0-row ack as " +
		"lease-lost: an expected outcome, not a database error), {@current_owner}'s ack changed {current_ack_changed}, " +
		"and {@prober}'s claim of the delivered event changed {reclaim_changed}. Then the lab sends " +
		"{@retrier}'s ack again with token {current_token}, as a client's retry policy does when the reply to its COMMIT " +
		"is lost: the token is still current, so only delivered = 0 refuses the retry, and the worker, reading the event " +
		"back (delivered under its token at its first ack's time), counts the retry as done, not as a lost lease. " +
		"Without that guard the retry changes the row again and re-stamps delivered_at.",
	DoesNotSolve: "Fencing protects the database row, not the world outside it: if {@stale_owner} had already " +
		"published {@event} before its lease ran out, the broker holds that message and {@current_owner} publishes it " +
		"again. The token rejects the late write; it cannot un-send a message. The duplicate broker " +
		"message is expected, and consumers must absorb it (the inbox, session 18).",
	Statements: []store.Stmt{
		store.ClaimEvent,
		store.CompleteWithToken,
		store.EventByID,
	},
	Set: store.RelayLesson,
	Checks: []lesson.CheckDoc{
		{Name: "stale_ack_rows", About: "rows changed by {@stale_owner}'s ack under the token of its superseded claim"},
		{Name: "current_ack_rows", About: "rows changed by {@current_owner}'s ack under the current token"},
		{Name: "reclaim_after_delivery_rows", About: "rows changed by {@prober}'s claim of {@event} after its delivery"},
		{Name: "distinct_tokens", About: "distinct tokens the lease claims of {@event} got, one per claim"},
		{Name: "failed_acks_lease_lost", About: "failed-ack ledger entries with reason lease-lost"},
		{Name: "retried_ack_rows", About: "rows changed by {@retrier}'s ack sent again, with the same token, after it had committed"},
	},
	Variants: []lesson.Variant{
		{Name: variantAckByEventID, Swaps: []store.Stmt{store.CompleteByEventID}, Mistake: "the ack updates WHERE event_id = :id AND delivered = 0, without the token: " +
			"a stale owner's ack completes the event and the current owner's ack finds it already delivered",
			Breaks: []string{"stale_ack_rows", "current_ack_rows", "failed_acks_lease_lost"},
			Shows: "In this run {@stale_owner}, whose lease ended at {stale_lease_end} and which {@current_owner} reclaimed at " +
				"{reclaimed_at}, acks {@event} at {stale_ack_at} and its ack changes {stale_ack_changed}; the current owner's " +
				"ack changes {current_ack_changed}. Only the holder of the current fencing token may complete an event; without the token in the " +
				"WHERE clause a paused worker's late write wins."},
		{Name: "claim-ignores-delivery", Swaps: []store.Stmt{store.ClaimIgnoringDelivery},
			Mistake: "the claim drops AND delivered = 0 and checks only the lease: once the last lease has run out, an event " +
				"already delivered is claimed again",
			Breaks: []string{"reclaim_after_delivery_rows"},
			Shows: "At {reclaim_at}, after {@deliverer}'s ack delivered {@event} at {delivered_at} and the last lease ran out " +
				"at {last_lease_end}, {@prober}'s claim changes {reclaim_changed} and takes the delivered event under token " +
				"{reclaim_token}: a relay would now send it again. The lease " +
				"says who may work on an event; the pending guard (delivered = false) says whether any work is left, and the claim needs both."},
		{Name: variantReusedToken, Swaps: []store.Stmt{store.ClaimWithFixedToken}, Mistake: fmt.Sprintf("the claim sets claim_token to the worker's fixed number (%d, the "+
			"same on every replica of the relay) instead of incrementing it, so the token names a worker, not a claim attempt", reusedWorkerToken),
			Breaks: []string{"stale_ack_rows", "current_ack_rows", "distinct_tokens", "failed_acks_lease_lost"},
			Shows: "In this run {@stale_owner} holds token {stale_token} and {@current_owner} token {current_token} for {@event}, so the " +
				"token guard cannot tell the stale ack from the current owner's: {@stale_owner}'s ack at {stale_ack_at} " +
				"changes {stale_ack_changed} and {@current_owner}'s changes {current_ack_changed}. A " +
				"fencing token must name one claim and grow with every claim, so that an old claim's token is always " +
				"smaller than the current one."},
	},
	Guards:    guards(),
	Processes: processes,
	Run: func(ctx context.Context, env *lesson.Env) (*lab.Result, error) {
		return runStaleAckFencing(ctx, env, lesson.StatementSet(env, store.RelayLesson))
	},
}

// staleAckRun is one session-16 run: the workers' relays, what they got,
// and the timeline and separate ledgers, appended to as each action happens.
type staleAckRun struct {
	sqls  store.RelaySQL // the statements the workers run
	setup *store.Relay   // the producer's own connection
	a, b  instance.Relay // each worker, on its own connection (a child process with --processes)

	ca, cb, cd                     store.EventClaim // A's claim, B's claim, A's claim after delivery
	staleRows, currentRows         int64
	staleMeasured, currentMeasured bool
	retryRows                      int64 // B's ack sent again
	retryMeasured                  bool

	timeline   lab.Timeline
	claims     []fencedClaimEntry
	acks       []ackEntry
	failedAcks []failedAckEntry
}

type fencedClaimEntry struct {
	seq        int
	at         int64
	worker     string
	outcome    store.ClaimOutcome
	rows       int64
	token      int64
	leaseUntil int64
	heldBy     string
	busy       int
}

type ackEntry struct {
	seq    int
	at     int64
	worker string
	token  int64
	rows   int64
	err    string
	busy   int
	// retryOf, when not 0, is the timeline number of the ack this one
	// sends again; done, that it changed 0 rows because that ack had
	// committed, as the event read back says.
	retryOf int
	done    bool
}

type failedAckEntry struct {
	seq    int
	at     int64
	worker string
	token  int64
	reason string
	detail string
}

// runStaleAckFencing runs session 16 with the relay statements sqls.
func runStaleAckFencing(ctx context.Context, env *lesson.Env, sqls store.RelaySQL) (*lab.Result, error) {
	run := &staleAckRun{sqls: sqls}
	// The producer and each worker are application instances, each on its
	// own connection.
	setup, err := env.Open(ctx, env.DatabasePath())
	if err != nil {
		return nil, err
	}
	defer setup.Close()
	run.setup = store.NewRelay(setup, sqls)
	if err := run.seed(ctx, setup); err != nil {
		return nil, err
	}
	var workers instance.Set
	defer workers.Close(ctx)
	for _, w := range []struct {
		name string
		into *instance.Relay
	}{{s16WorkerA, &run.a}, {s16WorkerB, &run.b}} {
		if *w.into, err = env.Instances.Relay(ctx, env.DatabasePath(), w.name, sqls); err != nil {
			return nil, err
		}
		workers.Add(*w.into)
	}
	if err := run.play(ctx); err != nil {
		return nil, err
	}
	if err := workers.Close(ctx); err != nil {
		return nil, err
	}
	r := &lab.Result{}
	if err := run.measure(ctx, r, setup); err != nil {
		return nil, err
	}
	lesson.ExpectDocumented(r, env.Scenario.Checks, map[string]float64{
		"stale_ack_rows": 0, "current_ack_rows": 1, "reclaim_after_delivery_rows": 0, "distinct_tokens": 2, "failed_acks_lease_lost": 1,
		"retried_ack_rows": 0,
	})
	r.Verdict = run.verdict(r, env.Variant)
	return r, nil
}

// seed creates the schema and the one event, E-41.
func (run *staleAckRun) seed(ctx context.Context, setup *store.DB) error {
	if err := setup.Migrate(ctx, store.RelayEvents); err != nil {
		return err
	}
	if err := run.setup.Insert(ctx, store.NewEvent{ID: s16EventID, Type: s16EventType, Payload: s16EventPayload}, 0); err != nil {
		return err
	}
	run.timeline.Add(lab.Event{At: s16At(0), Kind: lab.KindCommit, Subject: s16EventID, Actor: "producer", Action: "insert event",
		Detail: s16EventID + " committed with its business change; claim_token 0"})
	return nil
}

// play is the lesson's story: A claims and stalls past its lease, B
// reclaims, A acks late, B acks, and A tries to claim the delivered event.
func (run *staleAckRun) play(ctx context.Context) error {
	var err error
	if run.ca, err = run.claim(ctx, run.a, s16WorkerA, s16ClaimA, s16LeaseA); err != nil {
		return err
	}
	how, err := run.a.Stall(s16Time(s16ClaimA), "its claim")
	if err != nil {
		return err
	}
	run.timeline.Add(lab.Event{At: s16At(s16ClaimA), Kind: lab.KindStall, Subject: s16EventID, Actor: s16WorkerA, Action: "stalls",
		Detail: instance.WithHow("a long GC pause / slow publish: Worker-A still believes it owns "+s16EventID, how)})
	run.timeline.Add(lab.Event{At: s16At(run.ca.LeaseUntil), Kind: lab.KindExpiry, Subject: s16EventID, Actor: "clock", Action: "lease expires",
		Detail: fmt.Sprintf("%s's lease ran until %s; from now on %s is claimable", run.claims[0].worker, s16Time(run.ca.LeaseUntil), s16EventID)})
	if run.cb, err = run.claim(ctx, run.b, s16WorkerB, s16ClaimB, s16LeaseB); err != nil {
		return err
	}
	if run.ca.Outcome != store.Claimed || run.cb.Outcome != store.Claimed {
		return fmt.Errorf("session 16: claims were %s and %s, want both claimed", run.ca.Outcome, run.cb.Outcome)
	}
	if how, err = run.a.Wake(s16Time(s16AckA), "its ack"); err != nil {
		return err
	}
	if how != "" {
		run.timeline.Add(lab.Event{At: s16At(s16AckA), Kind: lab.KindWake, Subject: s16EventID, Actor: s16WorkerA, Action: "wakes",
			Detail: how + "; it acks with the token it remembers"})
	}
	// An ack whose statement failed is recorded (reason database-error) and
	// leaves its metric unset: its check fails as "not measured".
	run.staleRows, run.staleMeasured = run.ack(ctx, run.a, s16WorkerA, run.ca.Token, s16AckA, nil)
	run.currentRows, run.currentMeasured = run.ack(ctx, run.b, s16WorkerB, run.cb.Token, s16AckB, nil)
	// Worker-B sends its ack again under the same token, as a client's
	// retry policy does when the reply to its COMMIT is lost.
	first := run.acks[len(run.acks)-1]
	run.retryRows, run.retryMeasured = run.ack(ctx, run.b, s16WorkerB, run.cb.Token, s16RetryB, &first)
	run.cd, err = run.claim(ctx, run.a, s16WorkerA, s16ClaimDone, s16ClaimDone+30)
	return err
}

// measure sets the metrics and reads the final state for the report.
func (run *staleAckRun) measure(ctx context.Context, r *lab.Result, setup *store.DB) error {
	if run.staleMeasured {
		r.SetMetric("stale_ack_rows", float64(run.staleRows))
	}
	if run.currentMeasured {
		r.SetMetric("current_ack_rows", float64(run.currentRows))
	}
	if run.retryMeasured {
		r.SetMetric("retried_ack_rows", float64(run.retryRows))
	}
	r.SetMetric("reclaim_after_delivery_rows", float64(run.cd.Rows))
	r.SetMetric("distinct_tokens", float64(run.distinctTokens()))
	r.SetMetric("failed_acks_lease_lost", float64(run.failedAcksFor(reasonLeaseLost)))
	r.SetMetric("failed_acks_database_error", float64(run.failedAcksFor(reasonDatabaseError)))
	delivered, err := setup.Count(ctx, store.CountDeliveredEvents.SQL)
	if err != nil {
		return err
	}
	r.SetMetric("delivered_events", float64(delivered))
	if r.Schema, err = setup.Schema(ctx); err != nil {
		return err
	}
	events, err := run.setup.Events(ctx)
	if err != nil {
		return err
	}
	r.Timeline = run.timeline.Events()
	run.castRoles(r, events)
	r.Tables = append(r.Tables, cast.OutboxEventsTable(events, cast.LessonTicks))
	r.Tables = append(r.Tables, run.tables()...)
	return nil
}

// castRoles records who played each role, read from the ledgers, and the
// instants and row counts the lesson's texts quote: the stale owner is the
// worker of the first lease claim, which a later claim superseded; the
// current owner, that later claim's; the deliverer, the worker whose ack
// changed the row; the prober, the worker of the claim after delivery; the
// retrier, the worker whose ack the lab sent again. The event is the one
// row read back from outbox_events.
func (run *staleAckRun) castRoles(r *lab.Result, events []store.Event) {
	if len(events) > 0 {
		r.SetCast("event", events[0].ID)
	}
	var lease []fencedClaimEntry
	for _, c := range run.claimed() {
		if c.seq != run.proberSeq() {
			lease = append(lease, c)
		}
	}
	if len(lease) > 0 {
		last := lease[len(lease)-1]
		r.SetSetting("last_lease_end", s16Time(last.leaseUntil))
	}
	if len(lease) >= 2 {
		stale, current := lease[0], lease[1]
		r.SetCast("stale_owner", stale.worker)
		r.SetCast("current_owner", current.worker)
		r.SetSetting("stale_token", fmt.Sprint(stale.token))
		r.SetSetting("current_token", fmt.Sprint(current.token))
		r.SetSetting("stale_lease_end", s16Time(stale.leaseUntil))
		r.SetSetting("reclaimed_at", s16Time(current.at))
		for _, a := range run.acks {
			if a.retryOf != 0 || a.err != "" {
				continue
			}
			switch {
			case a.worker == stale.worker && a.token == stale.token:
				r.SetSetting("stale_ack_at", s16Time(a.at))
				r.SetSetting("stale_ack_changed", lab.Rows(a.rows))
			case a.worker == current.worker && a.token == current.token:
				r.SetSetting("current_ack_changed", lab.Rows(a.rows))
			}
		}
	}
	for _, a := range run.acks {
		if a.rows == 1 && a.err == "" {
			r.SetCast("deliverer", a.worker)
			r.SetSetting("delivered_at", s16Time(a.at))
			break
		}
	}
	for _, a := range run.acks {
		if a.retryOf != 0 {
			r.SetCast("retrier", a.worker)
		}
	}
	for _, c := range run.claims {
		if c.seq == run.proberSeq() {
			r.SetCast("prober", c.worker)
			r.SetSetting("reclaim_at", s16Time(c.at))
			r.SetSetting("reclaim_changed", lab.Rows(c.rows))
			r.SetSetting("reclaim_token", fmt.Sprint(c.token))
		}
	}
}

// proberSeq is the timeline number of the claim the lab sends after the
// acks, to see whether the delivered event can be claimed again: the claim
// ledger's last entry.
func (run *staleAckRun) proberSeq() int {
	if len(run.claims) < 3 {
		return -1
	}
	return run.claims[len(run.claims)-1].seq
}

// verdict says what the checks showed.
func (run *staleAckRun) verdict(r *lab.Result, variant string) string {
	switch {
	case r.Passed():
		return r.Fill("SAFE DESIGN held. {@stale_owner}'s late ack with token {stale_token} changed {stale_ack_changed} and was " +
			"recorded as " + reasonLeaseLost + "; {@current_owner}'s ack with token {current_token} changed {current_ack_changed}, " +
			"and the same ack sent again, as after a lost reply, changed " + lab.Rows(run.retryRows) + "; {@prober}'s claim of " +
			"the delivered event changed {reclaim_changed}. " +
			"Fencing protected the row; it does not stop the duplicate broker message a stale owner may already have sent.")
	case variant != "":
		return "" // lesson.Execute opens a variant's verdict with what its checks measured
	default:
		return fmt.Sprintf("NOT SHOWN: failed checks %v; %s failed with a database error (see the failed-ack ledger), so the fencing was not measured.",
			r.FailedChecks(), lab.Count(int64(run.failedAcksFor(reasonDatabaseError)), "ack", "acks"))
	}
}

// distinctTokens counts the distinct tokens of the lease claims, Worker-A's
// and Worker-B's; the claim of the delivered event that follows is a
// probe, judged by reclaim_after_delivery_rows.
func (run *staleAckRun) distinctTokens() int {
	seen := map[int64]bool{}
	for _, c := range run.claims {
		if c.outcome == store.Claimed && c.at < s16ClaimDone {
			seen[c.token] = true
		}
	}
	return len(seen)
}

func (run *staleAckRun) failedAcksFor(reason string) int {
	n := 0
	for _, f := range run.failedAcks {
		if f.reason == reason {
			n++
		}
	}
	return n
}

func (run *staleAckRun) tables() []lab.Table {
	claims := lab.Table{Title: "Ledger: claims and their fencing tokens",
		Note: "Every claim attempt, its affected rows and the token it got. A successful claim increments claim_token, so each gets a new one. " +
			cast.LessonTicks.Note(),
		Columns: []string{"#", "Time", "Worker", "Outcome", "Rows", "Token", "Lease until", "Held by", "Busy retries"}}
	for _, c := range run.claims {
		token, until := "-", "-"
		if c.outcome == store.Claimed {
			token, until = fmt.Sprint(c.token), s16Time(c.leaseUntil)
		}
		claims.AddRow(c.seq, s16Time(c.at), c.worker, string(c.outcome), c.rows, token, until, c.heldBy, c.busy)
	}
	acks := lab.Table{Title: "Ledger: acks",
		Note: "Every ack attempt with the token it presented and the rows the UPDATE changed. 0 rows is an expected outcome, not an error. " +
			"A retry sends an ack again with the same token; 0 rows there, with the event delivered under that token at the first " +
			"ack's time, means the first committed: the retry is done.",
		Columns: []string{"#", "Time", "Worker", "Attempt", "Token presented", "Rows", "Error", "Busy retries"}}
	for _, a := range run.acks {
		var rows any = a.rows
		if a.err != "" {
			rows = nil // the statement failed: no row count is known
		}
		attempt := "first"
		switch {
		case a.done:
			attempt = fmt.Sprintf("retry of #%d: done", a.retryOf)
		case a.retryOf != 0:
			attempt = fmt.Sprintf("retry of #%d", a.retryOf)
		}
		acks.AddRow(a.seq, s16Time(a.at), a.worker, attempt, a.token, rows, a.err, a.busy)
	}
	failed := lab.Table{Title: "Ledger: failed acks",
		Note: "Each ack that did not complete the event, with its reason: " + reasonLeaseLost + " (a newer claim holds the event), " +
			reasonAlreadyDelivered + " (someone completed it under our token) or " + reasonDatabaseError + " (the statement failed; ownership unknown).",
		Columns: []string{"#", "Time", "Worker", "Token presented", "Reason", "Why"}}
	for _, f := range run.failedAcks {
		failed.AddRow(f.seq, s16Time(f.at), f.worker, f.token, f.reason, f.detail)
	}
	return []lab.Table{claims, acks, failed}
}

// s16At is tick t as a timeline's clock time; s16Time, as a student reads
// it in a text or a ledger: the clock time, the tick beside it.
func s16At(t int64) string   { return cast.LessonTicks.At(t) }
func s16Time(t int64) string { return cast.LessonTicks.Time(t) }
