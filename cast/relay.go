package cast

import (
	"context"
	"fmt"

	"github.com/outboxlab/outboxlab/failpoint"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/store"
)

// This file holds the relay instance of sessions 18 to 20 and the
// explorer: claim, send and complete, each a step the failpoints can cut.

// Relay is a relay instance as a lesson's script drives it: a
// [*RelayInstance] in the lab's process, or a stand-in for one that acts
// in a child process on its own connection.
type Relay interface {
	Name() string
	ClaimNext(ctx context.Context) (store.ClaimOutcome, error)
	Send(ctx context.Context) (acked bool, err error)
	Complete(ctx context.Context) (int64, error)
	RunOnce(ctx context.Context) (bool, error)
	// Close ends the instance: its connection closed (once); a child
	// process's end reports whether it exited 0.
	Close(ctx context.Context) error
}

// RelayInstance is one relay instance: its own connection and, in memory, its
// current claim. A crash closes the one and drops the other.
type RelayInstance struct {
	p     *Pipeline
	name  string
	db    *store.DB
	Claim store.EventClaim
	sends int // offers this instance made, for the event-id-per-send mistake
}

// StartRelay starts a relay instance on its own connection.
func (p *Pipeline) StartRelay(ctx context.Context, name string) (*RelayInstance, error) {
	r, err := p.OpenRelay(ctx, name)
	if err != nil {
		return nil, err
	}
	p.Event(lab.KindNote, name, "start", RelayStart)
	return r, nil
}

// RelayStart is the timeline's word for a relay instance's start.
const RelayStart = "relay instance on its own connection"

// OpenRelay opens a relay instance on its own connection, without a
// timeline line: a child process's, whose start the lab tells.
func (p *Pipeline) OpenRelay(ctx context.Context, name string) (*RelayInstance, error) {
	db, err := p.Open(ctx, p.Path)
	if err != nil {
		return nil, err
	}
	return &RelayInstance{p: p, name: name, db: db}, nil
}

// Name is the instance's name, e.g. Relay-A.
func (r *RelayInstance) Name() string { return r.name }

// Close closes the instance's connection (once).
func (r *RelayInstance) Close(context.Context) error {
	if r.db == nil {
		return nil
	}
	err := r.db.Close()
	r.db = nil
	return err
}

// crash kills the instance mid-step: connection closed, claim forgotten.
// In a child process the pipeline's BeforeCrash reports it first.
func (r *RelayInstance) crash(point failpoint.Point) error {
	held := r.held(point)
	if err := r.p.beforeCrash(r.name, point, r.Claim.EventID, held); err != nil {
		return err
	}
	r.Crash(held + "; connection closed, memory dropped")
	return failpoint.ErrCrashed
}

// Crash kills the instance between steps: a CRASH line on the timeline
// saying detail, its connection closed, its claim forgotten.
func (r *RelayInstance) Crash(detail string) {
	r.p.Add(lab.Event{Kind: lab.KindCrash, Subject: r.Claim.EventID, Actor: r.name, Action: "CRASH", Detail: detail})
	_ = r.Close(context.Background()) // a crash reports nothing
	r.Claim = store.EventClaim{}
}

// fire consults the plan at point and carries out a crash or a lease
// expiry (the relay stalls until the clock reaches its lease deadline).
func (r *RelayInstance) fire(point failpoint.Point) (failpoint.Fault, error) {
	f := r.p.Faults.Fire(point, r.name, r.Claim.EventID)
	switch f {
	case failpoint.Crash:
		return f, r.crash(point)
	case failpoint.LeaseExpiry:
		if r.p.BeforeStall != nil {
			// In a child process: the lab stalls it there and tells it.
			return f, r.p.BeforeStall(r.p.faultReport(r.name, point, r.Claim.EventID, r.held(point)))
		}
		r.p.StallPastLease(r.name, point, r.Claim, "")
	}
	return f, nil
}

// held is where the instance stops and what it holds, for a CRASH line.
func (r *RelayInstance) held(point failpoint.Point) string {
	return fmt.Sprintf("at %s holding %s with token %d", point, r.Claim.EventID, r.Claim.Token)
}

// StallPastLease is relay name stalling at point, holding claim, until
// its lease has expired: the timeline says so (with how, where the stall
// is a real one: "" in-process) and the clock moves to the lease's end.
func (p *Pipeline) StallPastLease(name string, point failpoint.Point, claim store.EventClaim, how string) {
	detail := fmt.Sprintf("at %s (a pause: GC, a slow network, a suspended VM) while holding %s with token %d", point, claim.EventID, claim.Token)
	if how != "" {
		detail += "; " + how
	}
	p.Add(lab.Event{Kind: lab.KindStall, Subject: claim.EventID, Actor: name, Action: "stalls", Detail: detail})
	p.SetNow(claim.LeaseUntil)
	p.Add(lab.Event{Kind: lab.KindExpiry, Subject: claim.EventID, Actor: ClockName, Action: "lease expiry", Detail: fmt.Sprintf("the clock reaches %s: %s's lease on %s has expired; it does not know", TickClock(claim.LeaseUntil), name, claim.EventID)})
}

// ClaimNext claims the oldest claimable event with a lease of RelayLease.
func (r *RelayInstance) ClaimNext(ctx context.Context) (store.ClaimOutcome, error) {
	if r.db == nil {
		return "", failpoint.ErrCrashed
	}
	now := r.p.Now()
	c, err := store.NewRelay(r.db, r.p.sql().Relay).ClaimNext(ctx, now, store.EventLease{Owner: r.name, Until: now + RelayLease})
	if err != nil {
		return "", err
	}
	var detail string
	switch c.Outcome {
	case store.Claimed:
		detail = fmt.Sprintf("%s with token %d, lease until %s", c.EventID, c.Token, TickClock(c.LeaseUntil))
	case store.Empty:
		detail = "nothing claimable"
	default:
		detail = fmt.Sprintf("%s: %s", c.EventID, c.Outcome)
	}
	e := lab.Event{Kind: claimKind(c.Outcome), Subject: c.EventID, Actor: r.name, Action: "claim " + string(c.Outcome), Detail: detail}
	if c.Outcome == store.Claimed {
		e.Until, e.Rows = TickClock(c.LeaseUntil), lab.RowsOf(1)
	}
	seq := r.p.Add(e)
	r.p.mu.Lock()
	r.p.claims = append(r.p.claims, pipeClaimEntry{seq: seq, tick: now, relay: r.name, event: c.EventID, outcome: c.Outcome, token: c.Token, until: c.LeaseUntil, heldBy: c.HeldBy})
	r.p.mu.Unlock()
	if c.Outcome != store.Claimed {
		return c.Outcome, nil
	}
	r.Claim = c
	_, err = r.fire(failpoint.AfterClaim)
	return c.Outcome, err
}

// Send offers the claimed event to the broker. acked is false when the
// broker's acknowledgement was lost: the relay cannot tell whether the
// offer arrived.
func (r *RelayInstance) Send(ctx context.Context) (acked bool, err error) {
	if r.db == nil {
		return false, failpoint.ErrCrashed
	}
	now := r.p.Now()
	sentAs := r.Claim.EventID
	r.sends++
	if r.p.EventIDPerSend {
		// A fresh id per send, as a relay minting a UUID would, from what
		// the instance alone knows: its name and its own sends.
		sentAs = fmt.Sprintf("%s-%s-send-%d", r.Claim.EventID, r.name, r.sends)
	}
	o, err := r.offer(ctx, sentAs)
	if err != nil {
		return false, err
	}
	who := "broker"
	if r.p.BrokerName != "" {
		who = r.p.BrokerName // a real broker's answer, as its publish acknowledgement said
	}
	answer := fmt.Sprintf("%s stored offer %d", who, o.OfferID)
	if o.Dropped {
		answer = fmt.Sprintf("%s dropped it as a duplicate within its %s window (offer %d recorded as dropped)", who, DurationText(r.p.BrokerWindow), o.OfferID)
	}
	f, err := r.fire(failpoint.BrokerAck)
	if err != nil {
		r.recordSend(now, sentAs, o.OfferID, false, answer+"; relay crashed before the ack arrived")
		return false, err
	}
	if f == failpoint.AckLost {
		r.recordSend(now, sentAs, o.OfferID, true, answer+"; the broker's ack was LOST: the relay believes the send failed")
		return false, nil
	}
	r.recordSend(now, sentAs, o.OfferID, false, answer+"; ack received")
	_, err = r.fire(failpoint.AfterSendBeforeComplete)
	return true, err
}

func (r *RelayInstance) recordSend(now int64, sentAs string, offerID int64, ackLost bool, answer string) {
	detail := fmt.Sprintf("%s (token %d) as message id %s: %s", r.Claim.EventID, r.Claim.Token, sentAs, answer)
	seq := r.p.Add(lab.Event{Kind: lab.KindOffer, AckLost: ackLost, Subject: r.Claim.EventID, Offer: offerID, Actor: r.name, Action: "send",
		Detail: detail})
	r.p.mu.Lock()
	defer r.p.mu.Unlock()
	r.p.sends = append(r.p.sends, pipeSendEntry{seq: seq, tick: now, relay: r.name, event: r.Claim.EventID, sentAs: sentAs, token: r.Claim.Token, offerID: offerID, answer: answer})
}

// sentUnderClaim says the pipeline's sends ledger holds a send by r of
// the event it holds, under its claim's token.
func (r *RelayInstance) sentUnderClaim() bool {
	r.p.mu.Lock()
	defer r.p.mu.Unlock()
	for _, s := range r.p.sends {
		if s.relay == r.name && s.event == r.Claim.EventID && s.token == r.Claim.Token {
			return true
		}
	}
	return false
}

// Complete marks the claimed event published: under its token, or (the
// mistake) by event id alone. 0 rows is an expected outcome.
func (r *RelayInstance) Complete(ctx context.Context) (int64, error) {
	if r.db == nil {
		return 0, failpoint.ErrCrashed
	}
	now := r.p.Now()
	id, token := r.Claim.EventID, r.Claim.Token
	var f store.Fenced
	var err error
	guard := fmt.Sprintf("claim_token = %d", token)
	how := "WHERE " + guard
	statements := r.p.sql().Relay
	mistaken := statements.Complete.Replaces != nil
	if mistaken {
		guard = statements.Complete.Name
		how = "by " + guard
	}
	f, err = store.NewRelay(r.db, statements).Complete(ctx, id, token, now)
	if err != nil {
		return 0, err
	}
	result, kind, refusal := "published (1 row)", lab.KindFinalize, lab.Refusal("")
	if f.Rows == 0 {
		result, kind = "0 rows", lab.KindFenced
		e, ok, err := store.NewRelay(r.db, store.RelayLesson).EventByID(ctx, id)
		if err != nil {
			return 0, fmt.Errorf("complete %s: read back: %w", id, err)
		}
		refusal = EventRefusal(statements.Complete, e, ok, token, now)
		if ok {
			switch {
			case e.Token != token:
				result = fmt.Sprintf("fenced out (0 rows): stale token %d, current %d; lease lost", token, e.Token)
			case e.Delivered:
				result, kind = "0 rows: already delivered", lab.KindNoOp
			}
		}
	} else if mistaken {
		e, ok, err := store.NewRelay(r.db, store.RelayLesson).EventByID(ctx, id)
		if err != nil {
			return 0, fmt.Errorf("complete %s: read back: %w", id, err)
		}
		if ok && e.Token != token {
			result, kind = fmt.Sprintf("published (1 row) by a STALE owner: token %d, current %d", token, e.Token), lab.KindStale
		}
	}
	if kind != lab.KindFenced {
		refusal = ""
	}
	if kind == lab.KindFinalize && !r.sentUnderClaim() {
		kind = lab.KindUnsent // the sends ledger holds no send of this claim: a completion without a send
	}
	seq := r.p.Add(lab.Event{Kind: kind, Refusal: refusal, Subject: id, Rows: lab.RowsOf(f.Rows), Actor: r.name, Action: "complete",
		Detail: fmt.Sprintf("%s %s: %s", id, how, result)})
	r.p.mu.Lock()
	r.p.completions = append(r.p.completions, pipeCompletionEntry{seq: seq, tick: now, relay: r.name, event: id, token: token, guard: guard, rows: f.Rows, result: result})
	r.p.mu.Unlock()
	return f.Rows, nil
}

// RunOnce is the relay's loop body: claim the next event, send it
// (resending while the broker's ack is lost, up to MaxSendAttempts), then
// complete it. It reports whether it claimed anything.
func (r *RelayInstance) RunOnce(ctx context.Context) (bool, error) {
	out, err := r.ClaimNext(ctx)
	if err != nil || out != store.Claimed {
		return false, err
	}
	acked := false
	for attempt := 0; attempt < MaxSendAttempts && !acked; attempt++ {
		if acked, err = r.Send(ctx); err != nil {
			return true, err
		}
	}
	if !acked {
		r.p.Event(lab.KindNote, r.name, "gives up", r.Claim.EventID+": no broker ack; the lease will expire and another relay will resend")
		return true, nil
	}
	_, err = r.Complete(ctx)
	return true, err
}

// claimKind is what a relay's claim with outcome was. Its claim statement
// takes an event only if it is claimable (never leased, or its lease
// ended), so the database decided that a claimed event's lease was free.
func claimKind(outcome store.ClaimOutcome) lab.Kind {
	switch outcome {
	case store.Claimed:
		return lab.KindClaim
	case store.Blocked, store.Lost:
		return lab.KindBlocked
	case store.Done:
		return lab.KindDone
	case store.Refused:
		return lab.KindRefused
	}
	return lab.KindEmpty
}

// MustClaim has relay claim the next event and requires that it got it.
func MustClaim(ctx context.Context, r Relay) error {
	out, err := r.ClaimNext(ctx)
	if err != nil {
		return err
	}
	if out != store.Claimed {
		return fmt.Errorf("%s: claim was %s, want claimed", r.Name(), out)
	}
	return nil
}
