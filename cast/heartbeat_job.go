package cast

import (
	"context"
	"errors"
	"fmt"

	"github.com/outboxlab/outboxlab/lab"

	"github.com/outboxlab/outboxlab/store"
)

// HeartbeatJob is one claimed event a relay works on: its token and lease,
// the heartbeat goroutine that keeps the lease, and the work's context,
// which the heartbeat cancels when a renewal changes 0 rows.
type HeartbeatJob struct {
	relay      *HeartbeatRelay
	Event      string
	payload    string
	Token      int64
	ClaimedAt  int64
	LeaseUntil int64 // the lease as the job last confirmed it
	nextBeat   int64

	work        context.Context
	cancelCause context.CancelCauseFunc
	beats       chan int64    // the stage hands the heartbeat its slot
	answers     chan error    // and waits for its answer
	stopped     chan struct{} // closed when the heartbeat goroutine ends
	hung        chan struct{} // closed when hung work returns; nil unless Hang
	beating     bool          // false once a renewal failed: the heartbeat stops
	sent        bool
	// completesAtBeat: the work's completion falls on its next tick's slot
	// (see [HeartbeatJob.CompleteAtNextBeat]).
	completesAtBeat bool
}

// startJob starts the heartbeat of a fresh claim.
func (r *HeartbeatRelay) startJob(ctx context.Context, c store.EventClaim, now int64) *HeartbeatJob {
	work, cancel := context.WithCancelCause(context.Background())
	j := &HeartbeatJob{relay: r, Event: c.EventID, payload: c.Payload, Token: c.Token, ClaimedAt: now, LeaseUntil: c.LeaseUntil,
		nextBeat: c.LeaseUntil - r.policy.Margin + r.policy.Delay, work: work, cancelCause: cancel,
		beats: make(chan int64), answers: make(chan error), stopped: make(chan struct{}), beating: true}
	r.held = append(r.held, j)
	r.stage.jobs = append(r.stage.jobs, j)
	r.stage.all = append(r.stage.all, j)
	go j.heartbeat(ctx)
	return j
}

// heartbeat is the job's heartbeat goroutine: one renewal per slot the
// stage hands it, until the stage stops it.
func (j *HeartbeatJob) heartbeat(ctx context.Context) {
	defer close(j.stopped)
	for at := range j.beats {
		j.answers <- j.renew(ctx, at)
	}
}

// beat fires the heartbeat at the current time and waits for its answer.
// A job whose work completes at this tick completes first; its relay
// tells the heartbeat to stop only after the tick's renewal.
func (j *HeartbeatJob) beat(ctx context.Context) error {
	if j.completesAtBeat {
		j.completesAtBeat = false
		defer j.finish()
		if _, err := j.complete(ctx); err != nil {
			return err
		}
	}
	j.beats <- j.relay.stage.Now()
	err := <-j.answers
	if !j.beating {
		j.stopHeartbeat()
	}
	return err
}

// stopHeartbeat ends the heartbeat goroutine; the stage fires it no more.
func (j *HeartbeatJob) stopHeartbeat() {
	if j.beats == nil {
		return
	}
	close(j.beats)
	<-j.stopped
	j.beats = nil
	s := j.relay.stage
	for i, o := range s.jobs {
		if o == j {
			s.jobs = append(s.jobs[:i], s.jobs[i+1:]...)
			break
		}
	}
}

// renew runs one heartbeat renewal at and acts on its row count: 1 row
// schedules the next beat; 0 rows stops the heartbeat and, under the
// CancelWork policy, cancels the work.
func (j *HeartbeatJob) renew(ctx context.Context, at int64) error {
	r, s, p := j.relay, j.relay.stage, j.relay.policy
	f, err := r.keeper.Renew(ctx, j.Event, at, store.EventLease{Token: j.Token, Until: at + p.Lease}, p.MaxProcessing)
	if err != nil {
		return err
	}
	e := RenewalEntry{At: at, Relay: r.Name, Event: j.Event, Token: j.Token, LeaseUntil: at + p.Lease, Rows: f.Rows, Sent: j.sent}
	if f.Rows == 1 {
		j.LeaseUntil, j.nextBeat = e.LeaseUntil, e.LeaseUntil-p.Margin+p.Delay
		detail := fmt.Sprintf("renewed under token %d: 1 row, lease until %s (next beat %s)", j.Token, ShortClock(j.LeaseUntil), ShortClock(j.nextBeat))
		if j.LeaseUntil == j.ClaimedAt+p.MaxProcessing {
			detail += fmt.Sprintf(": exactly the processing deadline, claimed_at %s + %s, which the renewal allows (<=)",
				ShortClock(j.ClaimedAt), DurationText(p.MaxProcessing))
		}
		e.Seq = s.Add(lab.Event{Kind: lab.KindRenew, Subject: j.Event, Until: TickClock(j.LeaseUntil), Rows: lab.RowsOf(1),
			Actor: r.Name, Action: "heartbeat " + j.Event, Detail: detail})
		s.Renewals = append(s.Renewals, e)
		return nil
	}
	j.beating = false
	if e.Reason, e.Why, err = j.whyRefused(ctx, at); err != nil {
		return err
	}
	kind, refusal := lab.KindFenced, renewalRefusals[e.Reason] // a newer token, an ended lease or the deadline turned it away
	if e.Reason == RenewalDelivered {
		kind, refusal = lab.KindNoOp, ""
	}
	e.Seq = s.Add(lab.Event{Kind: kind, Refusal: refusal, Subject: j.Event, Rows: lab.RowsOf(0), Actor: r.Name,
		Action: "heartbeat " + j.Event + " refused", Detail: fmt.Sprintf("token %d: 0 rows; %s", j.Token, e.Why)})
	s.Renewals = append(s.Renewals, e)
	switch {
	case e.Reason == RenewalDelivered:
		s.Add(lab.Event{Kind: lab.KindNote, Subject: j.Event, Actor: r.Name, Action: "heartbeat stops", Detail: fmt.Sprintf(
			"the tick fired before the relay, back from its completion, told its heartbeat to stop: %s is delivered under "+
				"token %d, its own, so the work is already done, not a lost lease; nothing is cancelled", j.Event, j.Token)})
	case p.OnLeaseLost == LogOnly:
		s.Event(lab.KindNote, r.Name, "logs", "renewal of "+j.Event+" failed: logged; the work goes on")
	case e.Reason == RenewalDeadline:
		j.cancelWork(ErrProcessingDeadline, "the lease is not renewed again; it ends at "+ShortClock(j.LeaseUntil))
	case j.sent:
		j.cancelWork(leaseLossCause(e.Reason), "after its send: the send stands (the broker holds it), the completion is not attempted")
	default:
		j.cancelWork(leaseLossCause(e.Reason), "before its send: nothing sent, nothing written")
	}
	return nil
}

// leaseLossCause is the cancellation cause of a renewal refused for
// reason: an expired lease under the relay's own token, or a lost one.
func leaseLossCause(reason string) error {
	if reason == RenewalExpired {
		return ErrLeaseExpired
	}
	return ErrLeaseLost
}

// whyRefused tells why a renewal changed no row, from the event as the
// database holds it: a newer token, delivery under the job's own token
// (already done: delivered = 0 refused it), or expiry (the token still
// the job's: lease_until > :now refused it); when none holds, only the
// processing deadline refused it.
func (j *HeartbeatJob) whyRefused(ctx context.Context, at int64) (reason, why string, err error) {
	ev, ok, err := j.relay.relay.EventByID(ctx, j.Event)
	p := j.relay.policy
	pastDeadline := at+p.Lease > j.ClaimedAt+p.MaxProcessing
	switch {
	case err != nil:
		return "", "", err
	case !ok:
		return RenewalLeaseLost, "the event row is gone", nil
	case ev.Token != j.Token:
		return RenewalLeaseLost, fmt.Sprintf("lease lost: %s holds %s with token %d", ev.LockedBy, j.Event, ev.Token), nil
	case ev.Delivered:
		which, cmp := "only delivered = 0 refused it", ">"
		if also := alsoRefusedBy(ev.LeaseUntil <= at, pastDeadline); also != "" {
			which = "delivered = 0 refused it, and so would " + also
		}
		if ev.LeaseUntil <= at {
			cmp = "<="
		}
		return RenewalDelivered, fmt.Sprintf("already done: %s (read back: token %d still current, delivered at %s, "+
			"lease_until %s %s now %s)", which, ev.Token, ShortClock(ev.DeliveredAt), ShortClock(ev.LeaseUntil), cmp, ShortClock(at)), nil
	case ev.LeaseUntil <= at:
		which := "only lease_until > :now refused it"
		if pastDeadline {
			which = "lease_until > :now refused it, and so would the processing deadline"
		}
		return RenewalExpired, fmt.Sprintf("lease expired: %s (read back: token %d still current, not delivered, lease_until %s <= now %s)",
			which, ev.Token, ShortClock(ev.LeaseUntil), ShortClock(at)), nil
	}
	verb := "would pass"
	if at+p.Lease == j.ClaimedAt+p.MaxProcessing {
		verb = "would end exactly at"
	}
	return RenewalDeadline, fmt.Sprintf("processing deadline: a lease until %s %s claimed_at %s + %s = %s", ShortClock(at+p.Lease),
		verb, ShortClock(j.ClaimedAt), DurationText(p.MaxProcessing), ShortClock(j.ClaimedAt+p.MaxProcessing)), nil
}

// renewalRefusals is the guard each reason [HeartbeatJob.whyRefused]
// reads off the row names: a lost lease is a newer token (or the row
// gone), an expired one the lease end, the deadline the processing limit.
var renewalRefusals = map[string]lab.Refusal{
	RenewalLeaseLost: lab.RefusedByToken,
	RenewalExpired:   lab.RefusedByLease,
	RenewalDeadline:  lab.RefusedByDeadline,
}

// alsoRefusedBy names the other guards that would refuse a renewal: the
// live lease's when the lease has ended, the deadline's when it is past.
func alsoRefusedBy(ended, pastDeadline bool) string {
	switch {
	case ended && pastDeadline:
		return "lease_until > :now and the processing deadline"
	case ended:
		return "lease_until > :now"
	case pastDeadline:
		return "the processing deadline"
	}
	return ""
}

// cancelWork cancels the job's work with cause, waits for a hung work to
// return, and records the cancellation.
func (j *HeartbeatJob) cancelWork(cause error, detail string) {
	if j.work.Err() != nil {
		return
	}
	j.cancelCause(cause)
	if j.hung != nil {
		<-j.hung
	}
	r, s := j.relay, j.relay.stage
	seq := s.Add(lab.Event{Kind: lab.KindNote, Subject: j.Event, Actor: r.Name, Action: "work cancelled", Detail: j.Event + ": " + cause.Error() + "; " + detail})
	s.Cancellations = append(s.Cancellations, Cancellation{Seq: seq, At: s.Now(), Relay: r.Name, Event: j.Event, Cause: cause, Sent: j.sent})
	j.beating = false
}

// Hang makes the job's work block on a call that never answers: only the
// cancellation of its context ends it.
func (j *HeartbeatJob) Hang(what string) {
	j.hung = make(chan struct{})
	go func(done <-chan struct{}, hung chan<- struct{}) {
		<-done
		close(hung)
	}(j.work.Done(), j.hung)
	j.relay.stage.Add(lab.Event{Kind: lab.KindNote, Subject: j.Event, Actor: j.relay.Name, Action: "work hangs", Detail: j.Event + ": " + what})
}

// Send is the work's send to the broker. A cancelled work sends nothing.
func (j *HeartbeatJob) Send(ctx context.Context) (bool, error) {
	r, s, now := j.relay, j.relay.stage, j.relay.stage.Now()
	if cause := context.Cause(j.work); cause != nil {
		s.Event(lab.KindNote, r.Name, "send skipped", j.Event+": the work context is cancelled ("+cause.Error()+"): no send, no effect")
		return false, nil
	}
	o, err := s.broker.Offer(ctx, j.Event, j.payload, r.Name, s.Clock.Now(), 0)
	if err != nil {
		return false, err
	}
	j.sent = true
	seq := s.Add(lab.Event{Kind: lab.KindOffer, Subject: j.Event, Offer: o.OfferID, Actor: r.Name, Action: "send " + j.Event,
		Detail: fmt.Sprintf("token %d: the broker stored offer %d", j.Token, o.OfferID)})
	s.Sends = append(s.Sends, HeartbeatSend{Seq: seq, At: now, Relay: r.Name, Event: j.Event, Token: j.Token, OfferID: o.OfferID})
	return true, nil
}

// Complete ends the job: it completes the event under the job's token,
// unless the work was cancelled: then the completion is never attempted.
// The relay then stops the job's heartbeat.
func (j *HeartbeatJob) Complete(ctx context.Context) (bool, error) {
	defer j.finish()
	return j.complete(ctx)
}

// CompleteAtNextBeat has the job's work end at the slot of its
// heartbeat's next tick: when the clock reaches it, the completion
// commits first, and the tick, already due, renews before the relay,
// back from its completion, tells its heartbeat to stop. The heartbeat
// has not yet learned of the completion.
func (j *HeartbeatJob) CompleteAtNextBeat() {
	r, s := j.relay, j.relay.stage
	j.completesAtBeat = true
	s.Add(lab.Event{Kind: lab.KindWork, Subject: j.Event, Actor: r.Name, Action: "works", Detail: fmt.Sprintf("%s's work ends "+
		"at %s, the instant its heartbeat's next tick falls due: the lab has the relay send its completion first, and the "+
		"tick, already due, fire before the relay tells its heartbeat to stop; what each changed follows", j.Event,
		ShortClock(j.nextBeat))})
}

// complete is Complete without stopping the heartbeat.
func (j *HeartbeatJob) complete(ctx context.Context) (bool, error) {
	r, s, now := j.relay, j.relay.stage, j.relay.stage.Now()
	if cause := context.Cause(j.work); cause != nil {
		s.Event(lab.KindNote, r.Name, "no completion", j.Event+": the work was cancelled ("+cause.Error()+"): the completion is never attempted")
		return false, nil
	}
	f, err := r.relay.Complete(ctx, j.Event, j.Token, now)
	if err != nil {
		return false, err
	}
	detail, kind := fmt.Sprintf("under token %d: 1 row, %s delivered", j.Token, j.Event), lab.KindFinalize
	var refusal lab.Refusal
	if f.Rows == 0 {
		why, done, refusedBy, err := j.whyCompletionRefused(ctx)
		if err != nil {
			return false, err
		}
		detail, kind = fmt.Sprintf("under token %d: 0 rows, %s", j.Token, why), lab.KindFenced
		if done {
			kind = lab.KindNoOp
		} else {
			refusal = refusedBy
		}
	}
	seq := s.Add(lab.Event{Kind: kind, Refusal: refusal, Subject: j.Event, Rows: lab.RowsOf(f.Rows), Actor: r.Name, Action: "complete " + j.Event, Detail: detail})
	s.Completions = append(s.Completions, HeartbeatCompletion{Seq: seq, At: now, Relay: r.Name, Event: j.Event, Token: j.Token,
		Statement: r.sqls.Relay.Complete.Name, Rows: f.Rows, Sent: j.sent})
	return f.Rows == 1, nil
}

// whyCompletionRefused words why a completion changed no row, from the
// event as the database holds it after the attempt; done says the event
// was already delivered under the job's current token.
func (j *HeartbeatJob) whyCompletionRefused(ctx context.Context) (why string, done bool, refusal lab.Refusal, err error) {
	ev, ok, err := j.relay.relay.EventByID(ctx, j.Event)
	if err != nil {
		return "", false, "", fmt.Errorf("complete %s: read back: %w", j.Event, err)
	}
	refusal = EventRefusal(j.relay.sqls.Relay.Complete, ev, ok, j.Token, j.relay.stage.Now())
	switch {
	case !ok:
		return "the event row is gone", false, refusal, nil
	case ev.Token != j.Token:
		return fmt.Sprintf("fenced out (the token is stale: %s holds token %d)", ev.LockedBy, ev.Token), false, refusal, nil
	case ev.Delivered:
		return j.Event + " is already delivered", true, refusal, nil
	}
	return "the completion's guard turned it away (token current, not delivered)", false, refusal, nil
}

// finish stops the job's heartbeat and drops it from the relay's held jobs.
func (j *HeartbeatJob) finish() {
	j.stopHeartbeat()
	r := j.relay
	for i, o := range r.held {
		if o == j {
			r.held = append(r.held[:i], r.held[i+1:]...)
			break
		}
	}
}

// HeartbeatRecord is what a stage recorded, as it crosses the pipe from a
// relay that ran as a child process (on a stage of its own) to the lab's
// stage, which adopts it: its clock, timeline lines, ledgers and jobs.
type HeartbeatRecord struct {
	Now           int64
	Events        []lab.Event
	Claims        []HeartbeatClaim
	Renewals      []RenewalEntry
	Sends         []HeartbeatSend
	Completions   []HeartbeatCompletion
	Cancellations []RecordedCancellation
	Jobs          []RecordedJob
}

// RecordedCancellation is a [Cancellation] with its cause as text.
type RecordedCancellation struct {
	Seq   int
	At    int64
	Relay string
	Event string
	Cause string
	Sent  bool
}

// RecordedJob is a job as the lanes draw it.
type RecordedJob struct {
	Relay      string
	Event      string
	Token      int64
	ClaimedAt  int64
	LeaseUntil int64
}

// TakeRecord is what the stage recorded since its last TakeRecord, and
// every job it holds as it stands now.
func (s *HeartbeatStage) TakeRecord() HeartbeatRecord {
	events := s.timeline.Events()
	from := func(seq int) bool { return seq > s.taken }
	rec := HeartbeatRecord{Now: s.Now()}
	for _, e := range events {
		if from(e.Seq) {
			rec.Events = append(rec.Events, e)
		}
	}
	for _, c := range s.Claims {
		if from(c.Seq) {
			rec.Claims = append(rec.Claims, c)
		}
	}
	for _, e := range s.Renewals {
		if from(e.Seq) {
			rec.Renewals = append(rec.Renewals, e)
		}
	}
	for _, e := range s.Sends {
		if from(e.Seq) {
			rec.Sends = append(rec.Sends, e)
		}
	}
	for _, e := range s.Completions {
		if from(e.Seq) {
			rec.Completions = append(rec.Completions, e)
		}
	}
	for _, c := range s.Cancellations {
		if from(c.Seq) {
			rec.Cancellations = append(rec.Cancellations, RecordedCancellation{c.Seq, c.At, c.Relay, c.Event, c.Cause.Error(), c.Sent})
		}
	}
	for _, j := range s.all {
		rec.Jobs = append(rec.Jobs, RecordedJob{j.relay.Name, j.Event, j.Token, j.ClaimedAt, j.LeaseUntil})
	}
	if len(events) > 0 {
		s.taken = events[len(events)-1].Seq
	}
	return rec
}

// Adopt appends rec, recorded by a relay in another process, to the stage:
// its timeline lines (numbered on), its ledger entries and its jobs, whose
// lanes are drawn with the others'. The clock moves on to rec's.
func (s *HeartbeatStage) Adopt(rec HeartbeatRecord) {
	seq := map[int]int{}
	for _, e := range rec.Events {
		seq[e.Seq] = s.timeline.Add(e)
	}
	for _, c := range rec.Claims {
		c.Seq = seq[c.Seq]
		s.Claims = append(s.Claims, c)
	}
	for _, e := range rec.Renewals {
		e.Seq = seq[e.Seq]
		s.Renewals = append(s.Renewals, e)
	}
	for _, e := range rec.Sends {
		e.Seq = seq[e.Seq]
		s.Sends = append(s.Sends, e)
	}
	for _, e := range rec.Completions {
		e.Seq = seq[e.Seq]
		s.Completions = append(s.Completions, e)
	}
	for _, c := range rec.Cancellations {
		s.Cancellations = append(s.Cancellations, Cancellation{Seq: seq[c.Seq], At: c.At, Relay: c.Relay, Event: c.Event, Cause: causeNamed(c.Cause), Sent: c.Sent})
	}
	for _, rj := range rec.Jobs {
		s.adoptJob(rj)
	}
	s.setNow(max(s.Now(), rec.Now))
}

// adoptJob adds the job another process holds, or updates its lease: a
// job whose heartbeat and work ran there, drawn here.
func (s *HeartbeatStage) adoptJob(rj RecordedJob) {
	for _, j := range s.all {
		if j.relay.Name == rj.Relay && j.Event == rj.Event && j.Token == rj.Token {
			j.LeaseUntil = rj.LeaseUntil
			return
		}
	}
	r := s.AdoptedRelay(rj.Relay)
	work, cancel := context.WithCancelCause(context.Background())
	s.all = append(s.all, &HeartbeatJob{relay: r, Event: rj.Event, Token: rj.Token, ClaimedAt: rj.ClaimedAt, LeaseUntil: rj.LeaseUntil,
		work: work, cancelCause: cancel})
}

// AdoptedRelay is the relay named name of another process as the stage
// draws it: the relay of its adopted jobs. Freeze and ResumeBy on it mark
// its freeze on the lanes and the timeline, where the lab stops its
// process for real.
func (s *HeartbeatStage) AdoptedRelay(name string) *HeartbeatRelay {
	r := s.adopted[name]
	if r == nil {
		r = &HeartbeatRelay{Name: name, stage: s}
		if s.adopted == nil {
			s.adopted = map[string]*HeartbeatRelay{}
		}
		s.adopted[name] = r
	}
	return r
}

// causeNamed is the cancellation cause whose text is text.
func causeNamed(text string) error {
	for _, err := range []error{ErrLeaseLost, ErrLeaseExpired, ErrProcessingDeadline, ErrShuttingDown, ErrRunOver} {
		if err.Error() == text {
			return err
		}
	}
	return errors.New(text)
}

// Relay is the name of the relay that holds the job.
func (j *HeartbeatJob) Relay() string { return j.relay.Name }

// FrozenAt reports whether the job's relay was frozen at t.
func (j *HeartbeatJob) FrozenAt(t int64) bool { return j.relay.frozenAt(t) }
