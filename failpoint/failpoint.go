// Package failpoint names the points in a relay's or a consumer's step where
// a scenario injects a fault (a crash, a lost acknowledgement, a lease expiry)
// and keeps the plan of which fault fires where, and the record of those that did.
//
// The package only decides and records; the instance that reaches a point
// carries the fault out. A crash closes that instance's own database
// connection and drops its in-memory state (its claim, its current delivery)
// mid-step, so durable state is all that survives, as with a real process
// death. A lost acknowledgement means the ack crossing the point never
// arrives: the sender goes on believing the work was not acknowledged. A
// lease expiry means the instance stalls at the point until the scenario
// clock has reached its lease deadline.
package failpoint

import (
	"errors"
	"sync"
)

// Point is a named place in a step where a fault can be injected.
type Point string

// The named points, in the order a message meets them.
const (
	// BetweenOutboxWrites is session 14's point: the payment row has
	// committed and the outbox row, written in a second transaction, has not.
	BetweenOutboxWrites Point = "between-outbox-writes"
	// BetweenClaimSelectAndUpdate is session 15's point: a worker's claim
	// has selected the message and not yet updated it (in the claim's
	// transaction, or between the split claim's two). The lesson holds
	// both workers there with a barrier, to open the mistake's window.
	BetweenClaimSelectAndUpdate Point = "between-claim-select-and-update"
	// AfterClaim: the relay holds a fresh claim and has sent nothing.
	AfterClaim Point = "after-claim"
	// BrokerAck: the broker has stored the relay's send and its
	// acknowledgement is on the way back to the relay.
	BrokerAck Point = "broker-ack"
	// AfterSendBeforeComplete: the relay has the broker's acknowledgement
	// and has not completed (published) the outbox row.
	AfterSendBeforeComplete Point = "after-send-before-complete"
	// BeforeEffect is session 19's point: a consumer has decided to apply
	// a delivery and has not begun its effect. The lesson holds two
	// consumers there with a barrier, so their effects start together.
	BeforeEffect Point = "before-effect"
	// AfterEffectBeforeAck: the consumer's effect has committed and it has
	// not acknowledged the delivery to the broker.
	AfterEffectBeforeAck Point = "after-effect-before-ack"
)

// RelayPoints are the points a relay passes, in order.
var RelayPoints = []Point{AfterClaim, BrokerAck, AfterSendBeforeComplete}

// ConsumerPoints are the points a consumer passes, in order.
var ConsumerPoints = []Point{AfterEffectBeforeAck}

// Fault is what happens at a point.
type Fault string

// The faults a plan can inject. None is the zero value: nothing happens.
const (
	None Fault = ""
	// Crash kills the instance: its connection is closed and its memory
	// dropped; it does not finish the step.
	Crash Fault = "crash"
	// AckLost loses the acknowledgement crossing the point (the broker's
	// ack of a send at BrokerAck, the consumer's ack of a delivery at
	// AfterEffectBeforeAck).
	AckLost Fault = "ack-lost"
	// LeaseExpiry stalls the instance at the point until its lease has
	// expired on the scenario clock; then it carries on, unaware.
	LeaseExpiry Fault = "lease-expiry"
)

// ErrCrashed is what a step returns after a crash was injected into it: the
// instance is gone, and only a fresh instance may continue its work.
var ErrCrashed = errors.New("failpoint: instance crashed")

// Rule arms one fault at one point. Actor and Subject narrow it to one
// instance (Relay-A) and one message (e42); empty matches any. Times is how
// often it fires; 0 means once.
type Rule struct {
	Point   Point
	Actor   string
	Subject string
	Fault   Fault
	Times   int
}

// Firing is one fault that fired, in firing order.
type Firing struct {
	Seq     int
	Point   Point
	Actor   string
	Subject string
	Fault   Fault
}

// Plan is the set of armed rules of one run, safe for concurrent use by the
// instances that consult it. A nil *Plan injects nothing.
type Plan struct {
	mu    sync.Mutex
	rules []Rule
	fired []Firing
}

// NewPlan returns a plan with the given rules armed.
func NewPlan(rules ...Rule) *Plan {
	p := &Plan{}
	for _, r := range rules {
		p.Arm(r)
	}
	return p
}

// Arm adds a rule. Rules are matched in the order they were armed.
func (p *Plan) Arm(r Rule) {
	if r.Times <= 0 {
		r.Times = 1
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = append(p.rules, r)
}

// Fire is called by actor when it reaches point while working on subject.
// It returns the fault of the first matching armed rule, using up one of
// its firings and recording it, or None.
func (p *Plan) Fire(point Point, actor, subject string) Fault {
	if p == nil {
		return None
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range p.rules {
		r := &p.rules[i]
		if r.Times == 0 || r.Point != point || r.Actor != "" && r.Actor != actor || r.Subject != "" && r.Subject != subject {
			continue
		}
		r.Times--
		p.fired = append(p.fired, Firing{Seq: len(p.fired) + 1, Point: point, Actor: actor, Subject: subject, Fault: r.Fault})
		return r.Fault
	}
	return None
}

// RulesFor returns the rules still armed for actor (those naming it, or
// any actor), with the firings they have left: what an instance acting in
// another process arms in a plan of its own.
func (p *Plan) RulesFor(actor string) []Rule {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var rules []Rule
	for _, r := range p.rules {
		if r.Times > 0 && (r.Actor == "" || r.Actor == actor) {
			rules = append(rules, r)
		}
	}
	return rules
}

// Fired returns the faults that fired so far, in order.
func (p *Plan) Fired() []Firing {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Firing(nil), p.fired...)
}
