package session23clocks

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/store"
)

// This file holds session 23's actors: relays whose clocks disagree with
// the database's, on a stage that keeps the database's time, the timeline
// and the ledgers of their claims, work and acks. Time is t, milliseconds
// on the database's clock from [cast.ClockStart]; a report prints it as clock
// time with the tick beside it, 10:00:00.500 (t=500) ([cast.DatabaseTicks]); a
// worker's clock reads t + its skew.

// ClockRelay is what a session-23 relay instance does on its own
// connection; now is the database's time.
type ClockRelay interface {
	Claim(ctx context.Context, eventID string, now, lease int64) (store.EventClaim, error)
	Ack(ctx context.Context, eventID string, token, now int64) (store.Fenced, error)
	EventByID(ctx context.Context, eventID string) (store.Event, bool, error)
}

// SkewedWorker is a relay with a clock of its own, Skew ms off the
// database's (behind when negative).
type SkewedWorker struct {
	Name  string
	Skew  int64
	Relay ClockRelay
}

// Actor is the worker's timeline name with its clock's offset beside it,
// so the lanes show each worker's clock against the database's.
func (w *SkewedWorker) Actor() string { return fmt.Sprintf("%s %+dms", w.Name, w.Skew) }

// Reads is what the worker's clock reads at t on the database's.
func (w *SkewedWorker) Reads(t int64) string { return cast.DatabaseTicks.Time(t + w.Skew) }

// AckPolicy is what a relay does when an ack fails.
type AckPolicy int

const (
	// RetryOnDatabaseError keeps the event after a database error and
	// retries the fenced ack; only a lost lease gives it up.
	RetryOnDatabaseError AckPolicy = iota
	// EveryFailureIsLeaseLost is the mistake: every failed ack is recorded
	// as a lost lease and the event given up.
	EveryFailureIsLeaseLost
)

// Why an ack did not complete its event, as the relay records it.
const (
	AckLeaseLost        = "lease-lost"        // 0 rows: a newer token holds the event, or the lease ran out
	AckDatabaseError    = "database-error"    // no answer: the statement failed, ownership unknown
	AckAlreadyDelivered = "already-delivered" // 0 rows: our token is current, the event is done
)

// ClockStage is where session 23's workers act: the database's time, as
// the lab moves it, the timeline and the ledgers.
type ClockStage struct {
	Now      int64 // the database's clock
	Timeline lab.Timeline
	Policy   AckPolicy
	Lease    int64
	// LockWait is how long an ack waits for a lock before it fails: the
	// busy timeout of the workers' connections (lock_timeout on
	// PostgreSQL). It passes on the wall clock; the database's stands.
	LockWait time.Duration
	// AckStmt is the ack statement the workers run, whose guards alone can
	// have refused an ack (see [cast.EventRefusal]).
	AckStmt  store.Stmt
	Claims   []ClockClaim
	Attempts []WorkAttempt
	Acks     []ClockAck
	GaveUp   []GiveUp

	observer *store.ClockRelay // the lab's reads
}

// NewClockStage returns a stage at t=0 whose leases last lease ms;
// observer is the lab's connection, for what the lab reads to measure.
func NewClockStage(observer *store.ClockRelay, lease int64, policy AckPolicy) *ClockStage {
	return &ClockStage{observer: observer, Lease: lease, Policy: policy}
}

// ClockClaim is one claim attempt in part Part; LeaseUntil is what the
// claim stored, or the holder's lease when blocked.
type ClockClaim struct {
	Seq, Part  int
	At         int64
	Worker     string
	Reads      int64 // the worker's own clock
	Event      string
	Outcome    store.ClaimOutcome
	Token      int64
	LeaseUntil int64
}

// WorkAttempt is one processing attempt on an event: from Began to Ended
// on the database's clock, under the lease its claim stored (LeaseEnd)
// and the deadline the worker holds on its own clock (Deadline).
type WorkAttempt struct {
	Worker, Event      string
	Token              int64
	Began, Ended       int64
	LeaseEnd, Deadline int64
}

// ClockAck is one ack attempt: the database's answer (rows, or the error)
// and, for a failure, the reason the relay recorded and whether it retries.
type ClockAck struct {
	Seq, Part     int
	At            int64
	Worker, Event string
	Token, Rows   int64
	Err           string
	Reason, Why   string
	Retry         bool
}

// GiveUp is an event a relay gave up after a failed ack, and whether the
// database still held it for that relay then (its token current, its
// lease live, not delivered).
type GiveUp struct {
	Event, Worker string
	At            int64
	Held          bool
}

// Event adds a timeline line of kind at the database's now and returns
// its number.
func (s *ClockStage) Event(kind lab.Kind, actor, action, detail string) int {
	return s.Add(lab.Event{Kind: kind, Actor: actor, Action: action, Detail: detail})
}

// Add adds e to the timeline at the database's now and returns its
// number.
func (s *ClockStage) Add(e lab.Event) int {
	e.At = cast.DatabaseTicks.At(s.Now)
	return s.Timeline.Add(e)
}

// claimKind is what claim c of id, now, was, read off the database's
// answer and the claims ledger: a claim that took a lease another claim
// had stored and the database's clock said was live is a steal.
func (s *ClockStage) claimKind(id string, c store.EventClaim) lab.Kind {
	switch c.Outcome {
	case store.Claimed:
		if s.liveLeaseAt(id, s.Now, len(s.Claims)) {
			return lab.KindSteal
		}
		return lab.KindClaim
	case store.Blocked:
		return lab.KindBlocked
	case store.Done:
		return lab.KindDone
	default:
		return lab.KindEmpty
	}
}

// ackKind is what ack a was, read off the database's answer: a failure is
// an error, a changed row the owner's finalize (or a stale write, when the
// lease its claim stored had ended), and no row changed a fence or, for a
// current owner whose event was already done, a no-op.
func (s *ClockStage) ackKind(a ClockAck) lab.Kind {
	switch {
	case a.Err != "":
		return lab.KindError
	case a.Rows > 0:
		for _, c := range slices.Backward(s.Claims) {
			if c.Event == a.Event && c.Outcome == store.Claimed && c.Token == a.Token {
				if c.LeaseUntil <= a.At {
					return lab.KindStale
				}
				break
			}
		}
		return lab.KindFinalize
	case a.Reason == AckAlreadyDelivered:
		return lab.KindNoOp
	default:
		return lab.KindFenced
	}
}

// Claim has w claim id for one lease, now, in part, and records it.
func (s *ClockStage) Claim(ctx context.Context, part int, w *SkewedWorker, id string) (store.EventClaim, error) {
	c, err := w.Relay.Claim(ctx, id, s.Now, s.Lease)
	if err != nil {
		return c, err
	}
	its := "its clock reads " + w.Reads(s.Now)
	var action, detail string
	switch c.Outcome {
	case store.Claimed:
		whose := "db_now() + lease"
		if off := c.LeaseUntil - s.Now - s.Lease; off != 0 {
			whose = fmt.Sprintf("%+d ms off db_now() + lease", off)
		}
		action, detail = "claim claimed", fmt.Sprintf("%s claimed: 1 row, token %d, lease until %s (%s); %s, so it holds "+
			"the lease until its own %s, %d ms from this answer", id, c.Token, cast.DatabaseTicks.Time(c.LeaseUntil), whose, its, w.Reads(s.Now+s.Lease), s.Lease)
	case store.Blocked:
		action, detail = "claim blocked", fmt.Sprintf("%s is under %s's live lease until %s: 0 rows; %s", id, c.HeldBy, cast.DatabaseTicks.Time(c.LeaseUntil), its)
	default:
		action, detail = "claim "+string(c.Outcome), fmt.Sprintf("%s is %s: 0 rows; %s", id, c.Outcome, its)
	}
	e := lab.Event{Kind: s.claimKind(id, c), Subject: id, Actor: w.Actor(), Action: action, Detail: detail, Rows: lab.RowsOf(0)}
	if c.Outcome == store.Claimed {
		e.Rows, e.Until = lab.RowsOf(1), cast.DatabaseTicks.At(c.LeaseUntil)
	}
	seq := s.Add(e)
	s.Claims = append(s.Claims, ClockClaim{Seq: seq, Part: part, At: s.Now, Worker: w.Name, Reads: s.Now + w.Skew, Event: id, Outcome: c.Outcome, Token: c.Token, LeaseUntil: c.LeaseUntil})
	return c, nil
}

// Begin records w's processing attempt on the event its claim c took,
// from now until ended, and returns it.
func (s *ClockStage) Begin(w *SkewedWorker, c store.EventClaim, ended int64) WorkAttempt {
	a := WorkAttempt{Worker: w.Name, Event: c.EventID, Token: c.Token, Began: s.Now, Ended: ended, LeaseEnd: c.LeaseUntil,
		Deadline: s.Now + w.Skew + s.Lease}
	s.Attempts = append(s.Attempts, a)
	s.Add(lab.Event{Kind: lab.KindWork, Subject: c.EventID, Actor: w.Actor(), Action: "works", Detail: fmt.Sprintf("%s: processing attempt %d begins, %d ms of work; its clock reads %s",
		c.EventID, len(s.Attempts), ended-s.Now, w.Reads(s.Now))})
	return a
}

// Ack has w ack id under token, now, in part, and records the database's
// answer and, for a failure, the reason the relay gives it under its
// policy: a database error is retried, a lost lease is not.
func (s *ClockStage) Ack(ctx context.Context, part int, w *SkewedWorker, id string, token int64) (ClockAck, error) {
	f, ackErr := w.Relay.Ack(ctx, id, token, s.Now)
	a := ClockAck{Part: part, At: s.Now, Worker: w.Name, Event: id, Token: token, Rows: f.Rows}
	detail := fmt.Sprintf("with token %d: %s changed", token, lab.Rows(f.Rows))
	var refusal lab.Refusal
	switch {
	case ackErr != nil:
		a.Err, a.Reason, a.Why = ackErr.Error(), AckDatabaseError, "ownership unknown"
		detail = fmt.Sprintf("with token %d: no answer after its lock wait (%s of wall-clock time; the database's clock "+
			"stands): %s", token, s.LockWait, ackErr)
	case f.Rows == 0:
		ev, ok, err := w.Relay.EventByID(ctx, id)
		if err != nil {
			return a, err
		}
		a.Reason, a.Why = zeroRowAckReason(ev, ok, token, s.Now)
		refusal = cast.EventRefusal(s.AckStmt, ev, ok, token, s.Now)
	}
	kind := s.ackKind(a) // from the database's answer, before the relay's policy names the failure
	action := "ack"
	switch {
	case a.Reason == "":
		detail += "; " + id + " delivered"
	case s.Policy == EveryFailureIsLeaseLost:
		a.Reason, a.Why = AckLeaseLost, ""
		action, detail = "ack failed", detail+"; recorded as "+a.Reason+": it gives "+id+" up"
	default:
		a.Retry = a.Reason == AckDatabaseError
		then := "it gives " + id + " up"
		if a.Retry {
			then = "it keeps " + id + " and retries the fenced ack"
		}
		action, detail = "ack failed", detail+"; recorded as "+a.Reason+": "+a.Why+", "+then
	}
	e := lab.Event{Kind: kind, Subject: id, Actor: w.Actor(), Action: action, Detail: detail + "; its clock reads " + w.Reads(s.Now)}
	if kind == lab.KindFenced {
		e.Refusal = refusal
	}
	if a.Err == "" {
		e.Rows = lab.RowsOf(a.Rows)
	}
	a.Seq = s.Add(e)
	s.Acks = append(s.Acks, a)
	if a.Reason != "" && !a.Retry {
		return a, s.giveUp(ctx, w, id, token)
	}
	return a, nil
}

// zeroRowAckReason tells why an ack changed no row, from the event as the
// database holds it after the ack.
func zeroRowAckReason(ev store.Event, found bool, token, now int64) (reason, why string) {
	switch {
	case !found:
		return AckDatabaseError, "the event row is missing"
	case ev.Token != token:
		return AckLeaseLost, fmt.Sprintf("the current token is %d (held by %s), ours is stale", ev.Token, ev.LockedBy)
	case ev.Delivered:
		return AckAlreadyDelivered, "our token is current, but the event is done"
	case ev.LeaseUntil <= now:
		return AckLeaseLost, "our lease ran out at " + cast.DatabaseTicks.Time(ev.LeaseUntil) + " on the database's clock"
	default:
		return AckDatabaseError, "the token is current and the lease live, yet no row changed"
	}
}

// giveUp records that w gave id up, reading from the database whether it
// still held it then.
func (s *ClockStage) giveUp(ctx context.Context, w *SkewedWorker, id string, token int64) error {
	ev, ok, err := s.observer.EventByID(ctx, id)
	if err != nil {
		return err
	}
	held := ok && ev.Token == token && !ev.Delivered && ev.LeaseUntil > s.Now
	s.GaveUp = append(s.GaveUp, GiveUp{Event: id, Worker: w.Name, At: s.Now, Held: held})
	return nil
}

// LiveLeaseClaims counts the claims that took a lease the database's clock
// said was live: an earlier claim's stored lease had not ended, and no ack
// had completed the event since.
func (s *ClockStage) LiveLeaseClaims() int {
	n := 0
	for i, c := range s.Claims {
		if c.Outcome == store.Claimed && s.liveLeaseAt(c.Event, c.At, i) {
			n++
		}
	}
	return n
}

// liveLeaseAt reports whether one of the first n claims stored a lease on
// event that was live at at on the database's clock, with no ack having
// completed the event since.
func (s *ClockStage) liveLeaseAt(event string, at int64, n int) bool {
	for _, prev := range s.Claims[:n] {
		if prev.Event == event && prev.Outcome == store.Claimed && prev.LeaseUntil > at && !s.ackedBetween(event, prev.At, at) {
			return true
		}
	}
	return false
}

// ackedBetween reports whether an ack completed event from from to to.
func (s *ClockStage) ackedBetween(event string, from, to int64) bool {
	for _, a := range s.Acks {
		if a.Event == event && a.Rows == 1 && a.At >= from && a.At <= to {
			return true
		}
	}
	return false
}

// RetriedAfterOutage counts part's acks that changed their row after an
// earlier ack of the same worker, event and token had failed with an
// error (no answer from the database).
func (s *ClockStage) RetriedAfterOutage(part int) int {
	n := 0
	for _, a := range s.Acks {
		if a.Part == part && a.Rows == 1 && s.failedEarlier(a) {
			n++
		}
	}
	return n
}

// failedEarlier reports whether an ack of the same worker, event and token
// as done failed with an error before it.
func (s *ClockStage) failedEarlier(done ClockAck) bool {
	for _, a := range s.Acks {
		if a.Worker == done.Worker && a.Event == done.Event && a.Token == done.Token && a.Err != "" && a.Seq < done.Seq {
			return true
		}
	}
	return false
}

// Tables are the stage's ledgers for the report, and the operational view
// of part's failed acks.
func (s *ClockStage) Tables(part int) []lab.Table {
	claims := lab.Table{Title: "Ledger: claims (parts 1 and 2)",
		Note: "Every claim attempt at t on the database's clock and on the worker's own, its outcome and the lease end it " +
			"stored (or the lease that blocked it), on the database's clock. " + cast.DatabaseTicks.Note(),
		Columns: []string{"#", "Part", "Clock", "Worker", "Its clock", "Outcome", "Token", "Lease until"}}
	for _, c := range s.Claims {
		token, until := "-", "-"
		if c.Outcome == store.Claimed {
			token = fmt.Sprint(c.Token)
		}
		if c.LeaseUntil != 0 {
			until = cast.DatabaseTicks.Time(c.LeaseUntil)
		}
		claims.AddRow(c.Seq, c.Part, cast.DatabaseTicks.Time(c.At), c.Worker, cast.DatabaseTicks.Time(c.Reads), string(c.Outcome), token, until)
	}
	work := lab.Table{Title: "Ledger: processing attempts (part 1)",
		Note: "Each attempt on the database's clock, against the lease end its claim stored. The worker's own deadline is on " +
			"its own clock, " + fmt.Sprint(s.Lease) + " ms from the claim's answer. Work past the stored lease end is work on an event another " +
			"worker may already own.",
		Columns: []string{"Worker", "Event", "Token", "Began", "Ended", "Stored lease end", "Own deadline", "Work past it (ms)"}}
	for _, a := range s.Attempts {
		work.AddRow(a.Worker, a.Event, a.Token, cast.DatabaseTicks.Time(a.Began), cast.DatabaseTicks.Time(a.Ended), cast.DatabaseTicks.Time(a.LeaseEnd),
			cast.DatabaseTicks.Time(a.Deadline), max(0, a.Ended-a.LeaseEnd))
	}
	acks := lab.Table{Title: "Ledger: acks (parts 1 and 2)",
		Note: "Every ack attempt: the rows it changed, or none when the statement failed (no answer: the timeline quotes the " +
			"error), and for a failure the reason the relay recorded and what it did next.",
		Columns: []string{"#", "Part", "Clock", "Worker", "Event", "Token", "Rows", "Recorded as", "Then"}}
	for _, a := range s.Acks {
		var rows any = a.Rows
		if a.Err != "" {
			rows = "no answer"
		}
		then := "-"
		switch {
		case a.Retry:
			then = "retries"
		case a.Reason != "":
			then = "gives it up"
		}
		acks.AddRow(a.Seq, a.Part, cast.DatabaseTicks.Time(a.At), a.Worker, a.Event, a.Token, rows, a.Reason, then)
	}
	return []lab.Table{claims, work, acks, s.operationalView(part)}
}

// operationalView counts part's failed acks by the reason the relay
// recorded, as a dashboard would show them.
func (s *ClockStage) operationalView(part int) lab.Table {
	t := lab.Table{Title: "Operational view: failed acks by recorded reason (part 2)",
		Note: "What an operator sees. A database error (no answer) is an outage to look at and an ack to retry; a lost lease " +
			"(0 rows) is the fencing token at work: another worker owns the event, nothing to retry.",
		Columns: []string{"Recorded as", "Failed acks", "Retried, then acked", "What it means"}}
	for _, row := range []struct{ reason, means string }{
		{AckDatabaseError, "database error: no answer, ownership unknown"},
		{AckLeaseLost, "lease lost: 0 rows, another worker holds it"},
	} {
		failed, retried := 0, 0
		for _, a := range s.Acks {
			if a.Part == part && a.Reason == row.reason {
				failed++
				if a.Retry && s.ackedLater(a) {
					retried++
				}
			}
		}
		t.AddRow(row.reason, failed, retried, row.means)
	}
	return t
}

// ackedLater reports whether failed's worker later acked its event under
// the same token.
func (s *ClockStage) ackedLater(failed ClockAck) bool {
	for _, a := range s.Acks {
		if a.Worker == failed.Worker && a.Event == failed.Event && a.Token == failed.Token && a.Rows == 1 && a.Seq > failed.Seq {
			return true
		}
	}
	return false
}

// Script is what a part of session 23 does, each step at a time on the
// database's clock; a step may schedule more.
type Script struct{ steps []scriptStep }

type scriptStep struct {
	at int64
	do func() error
}

// At schedules do at t.
func (sc *Script) At(t int64, do func() error) { sc.steps = append(sc.steps, scriptStep{t, do}) }

// Play runs the steps in time order, steps at the same time in the order
// they were scheduled, moving the clock to each step's time first.
func (sc *Script) Play(ctx context.Context, moveTo func(ctx context.Context, t int64) error) error {
	for len(sc.steps) > 0 {
		next := 0
		for i, s := range sc.steps {
			if s.at < sc.steps[next].at {
				next = i
			}
		}
		s := sc.steps[next]
		sc.steps = append(sc.steps[:next], sc.steps[next+1:]...)
		if err := moveTo(ctx, s.at); err != nil {
			return err
		}
		if err := s.do(); err != nil {
			return err
		}
	}
	return nil
}

// Which request of a race trial is sent first.
const (
	RenewalLeads = iota
	ClaimLeads
)

// RaceTally is what the trials of a renewal racing a claim at the lease
// end did: how many met at exactly the lease end, and who won, by which
// request was sent first.
type RaceTally struct {
	Met    int
	ByLead [2]RaceOutcomes // RenewalLeads, ClaimLeads
}

// RaceOutcomes counts who won a set of trials.
type RaceOutcomes struct{ RenewalOnly, ClaimOnly, Both, Neither int }

// Add counts one trial: which request led, whether the two met at the
// lease end, and which changed a row.
func (t *RaceTally) Add(lead int, met, renewed, claimed bool) {
	if met {
		t.Met++
	}
	o := &t.ByLead[lead]
	switch {
	case renewed && claimed:
		o.Both++
	case renewed:
		o.RenewalOnly++
	case claimed:
		o.ClaimOnly++
	default:
		o.Neither++
	}
}

// All is the outcomes of every trial.
func (t RaceTally) All() RaceOutcomes {
	a, b := t.ByLead[RenewalLeads], t.ByLead[ClaimLeads]
	return RaceOutcomes{a.RenewalOnly + b.RenewalOnly, a.ClaimOnly + b.ClaimOnly, a.Both + b.Both, a.Neither + b.Neither}
}

// Table is the race's outcomes, by which request was sent first (the
// other after a gap swept from 0 to spread), between owner's renewal and
// claimer's claim of event.
func (t RaceTally) Table(spread time.Duration, event, owner, claimer string) lab.Table {
	r, c := t.ByLead[RenewalLeads], t.ByLead[ClaimLeads]
	trials := r.RenewalOnly + r.ClaimOnly + r.Both + r.Neither + c.RenewalOnly + c.ClaimOnly + c.Both + c.Neither
	tb := lab.Table{Title: "Race at the lease end (part 3): who won",
		Note: fmt.Sprintf("In %d of %d trials the two met at exactly the lease end, as read back from the database. The "+
			"renewal and the claim were sent first in turn, the other after a gap swept from 0 to %s. A lease that ends at "+
			"t is over at t: a renewal that commits first finds the lease ended (0 rows), one that comes after the claim "+
			"presents a stale token (0 rows).", t.Met, trials, spread),
		Columns: []string{"Outcome", "Renewal sent first", "Claim sent first", "Who believes it owns " + event}}
	tb.AddRow("the claim won, the renewal changed 0 rows", r.ClaimOnly, c.ClaimOnly, claimer)
	tb.AddRow("the renewal won, the claim changed 0 rows", r.RenewalOnly, c.RenewalOnly, owner)
	tb.AddRow("both won", r.Both, c.Both, claimer+" and "+owner+": two owners")
	tb.AddRow("neither won", r.Neither, c.Neither, "nobody")
	return tb
}
