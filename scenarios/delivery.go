package scenarios

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/outboxlab/outboxlab/clock"
	"github.com/outboxlab/outboxlab/failpoint"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/store"
)

// This file holds what sessions 18 to 20 share: the relay → broker →
// consumer pipeline, its instances (each its own connection), the
// failpoints they pass and their separate ledgers.
//
// Time: the relay's outbox_events table (shared with sessions 16 and 17)
// keeps logical int64 ticks. In sessions 18 to 20 a tick is one millisecond
// since lessonStart (2026-01-15T09:00:00.000Z), so durations read naturally
// (a 30 s lease is 30000 ticks) and every tick prints as a clock.Layout
// instant. The broker's and the consumers' tables store that same instant as
// UTC text; the pipeline hands the store its clock's time.Time for them.

// Tick lengths.
const (
	tickSecond int64 = 1000
	tickMinute       = 60 * tickSecond
	tickHour         = 60 * tickMinute
	tickDay          = 24 * tickHour
)

// ticksOf converts a duration to ticks.
func ticksOf(d time.Duration) int64 { return d.Milliseconds() }

// tickSpan converts ticks to a duration, for the store's broker API.
func tickSpan(t int64) time.Duration { return time.Duration(t) * time.Millisecond }

// tickClock prints tick t as an instant on the scenario clock.
func tickClock(t int64) string { return clock.Format(lessonStart.Add(tickSpan(t))) }

// tickOfClock reads an instant the broker stored (clock text) back as a tick.
func tickOfClock(s string) (int64, error) {
	t, err := clock.Parse(s)
	if err != nil {
		return 0, fmt.Errorf("read stored time %q: %w", s, err)
	}
	return t.Sub(lessonStart).Milliseconds(), nil
}

// windowText prints a dedup window: "off" when there is none.
func windowText(t int64) string {
	if t <= 0 {
		return "off"
	}
	return durationText(t)
}

// durationText prints a tick count as a duration: whole days of two or
// more as "7d" (the CLI accepts d), the rest as a Go duration without
// trailing zero units ("24h", "2m", "7d1m30s").
func durationText(t int64) string {
	days, rest := t/tickDay, t%tickDay
	if days < 2 {
		days, rest = 0, t
	}
	s := ""
	if days > 0 {
		s = fmt.Sprintf("%dd", days)
	}
	if rest != 0 || s == "" {
		r := (time.Duration(rest) * time.Millisecond).String()
		if strings.HasSuffix(r, "m0s") {
			r = strings.TrimSuffix(r, "0s")
		}
		if strings.HasSuffix(r, "h0m") {
			r = strings.TrimSuffix(r, "0m")
		}
		s += r
	}
	return s
}

// The pipeline's fixed settings.
const (
	relayLease        = 30 * tickSecond // every relay claim's lease
	visibilityTimeout = 30 * tickSecond // the broker redelivers an unacknowledged delivery after this
	maxSendAttempts   = 2               // a relay resends once when the broker's ack is lost
)

// Names of the actors.
const (
	relayA    = "Relay-A"
	relayB    = "Relay-B"
	producer  = "checkout"
	operator  = "operator"
	clockName = "clock"
)

// creditPayload is an event that awards a credit.
type creditPayload struct {
	Account     string `json:"account"`
	CreditCents int64  `json:"credit_cents"`
}

// versionPayload is an event that carries an entity's state at a version.
type versionPayload struct {
	Entity  string `json:"entity"`
	Version int64  `json:"version"`
	State   string `json:"state"`
}

// consumerDesign is how a consumer applies a delivery.
type consumerDesign string

const (
	// inboxDesign: inbox insert ON CONFLICT DO NOTHING and the credit in one transaction.
	inboxDesign consumerDesign = "inbox (one transaction)"
	// naiveDesign: unconditional increment.
	naiveDesign consumerDesign = "naive (no inbox)"
	// splitDesign: the effect-outside-inbox-tx mistake.
	splitDesign consumerDesign = "effect outside inbox tx (MISTAKE)"
	// versionedDesign: projection that ignores older versions.
	versionedDesign consumerDesign = "versioned projection"
	// unversionedDesign: projection without a version check (MISTAKE).
	unversionedDesign consumerDesign = "projection without version (MISTAKE)"
)

// pipeline is one database's world: an outbox, the lab's broker and the
// consumers' tables, a scenario clock, a failpoint plan and the ledgers.
// Instances append to the ledgers; they never read them.
type pipeline struct {
	label string // "row 3" when a report holds several pipelines; "" otherwise
	// concurrent says instances ran at the same time here, so the order of
	// the consumer ledgers varies from run to run.
	concurrent bool
	path       string
	audit      *store.DB // the observer's connection: seeding and audits, never an actor
	clk        *clock.Manual
	faults     *failpoint.Plan
	timeline   *lab.Timeline

	brokerWindow         int64 // the broker's dedup window in ticks; 0: none
	completeWithoutToken bool  // mistake: completion by event id alone
	eventIDPerSend       bool  // mistake: the relay mints a new message id per send

	mu          sync.Mutex
	claims      []pipeClaimEntry
	sends       []pipeSendEntry
	completions []pipeCompletionEntry
	effects     []pipeEffectEntry
	acks        []pipeAckEntry
}

type pipeClaimEntry struct {
	seq     int
	tick    int64
	relay   string
	event   string
	outcome store.ClaimOutcome
	token   int64
	until   int64
	heldBy  string
}

type pipeSendEntry struct {
	seq     int
	tick    int64
	relay   string
	event   string
	sentAs  string // the message id the broker saw
	token   int64
	offerID int64
	answer  string
}

type pipeCompletionEntry struct {
	seq    int
	tick   int64
	relay  string
	event  string
	token  int64
	guard  string
	rows   int64
	result string
}

type pipeEffectEntry struct {
	seq      int
	tick     int64
	instance string
	consumer string
	design   consumerDesign
	offerID  int64
	receipt  int64
	event    string
	applied  bool
	result   string
	busy     int
}

type pipeAckEntry struct {
	seq      int
	tick     int64
	instance string
	offerID  int64
	receipt  int64
	result   string
}

// newPipeline creates a fresh database at path with the relay and broker
// schema, and a scenario clock at tick 0.
func newPipeline(ctx context.Context, path, label string, tl *lab.Timeline, faults *failpoint.Plan) (*pipeline, error) {
	db, err := openWorker(ctx, path)
	if err != nil {
		return nil, err
	}
	if err := db.Migrate(ctx, store.RelayEvents, store.BrokerInbox); err != nil {
		db.Close()
		return nil, err
	}
	return &pipeline{label: label, path: path, audit: db, clk: clock.NewManual(lessonStart), faults: faults, timeline: tl}, nil
}

func (p *pipeline) close() { p.audit.Close() }

// now is the scenario clock in ticks.
func (p *pipeline) now() int64 { return p.clk.Now().Sub(lessonStart).Milliseconds() }

// setNow moves the clock forward to tick t (never backward).
func (p *pipeline) setNow(t int64) {
	if t > p.now() {
		p.clk.Set(lessonStart.Add(time.Duration(t) * time.Millisecond))
	}
}

// event adds a timeline line at the current tick.
func (p *pipeline) event(actor, action, detail string) int {
	at := tickClock(p.now())
	if p.label != "" {
		at = p.label + " " + at
	}
	return p.timeline.Add(at, actor, action, detail)
}

// commitCredit is the producer's transaction: the event awarding cents to
// account enters the outbox.
func (p *pipeline) commitCredit(ctx context.Context, eventID, account string, cents int64) error {
	return p.commit(ctx, eventID, "CreditAwarded", creditPayload{Account: account, CreditCents: cents},
		fmt.Sprintf("award %d cents to %s", cents, account))
}

// commitVersion is the producer's transaction for a state change at a version.
func (p *pipeline) commitVersion(ctx context.Context, eventID, entity string, version int64, state string) error {
	return p.commit(ctx, eventID, "AccountStateChanged", versionPayload{Entity: entity, Version: version, State: state},
		fmt.Sprintf("%s becomes %s at version %d", entity, state, version))
}

func (p *pipeline) commit(ctx context.Context, eventID, typ string, payload any, what string) error {
	b, err := json.Marshal(payload)
	if err != nil {
		return err
	}
	if err := p.audit.InsertEvent(ctx, store.NewEvent{ID: eventID, Type: typ, Payload: string(b)}, p.now()); err != nil {
		return err
	}
	p.event(producer, "commit "+eventID, "outbox event committed: "+what)
	return nil
}

// openAccount opens a consumer's account row.
func (p *pipeline) openAccount(ctx context.Context, consumer, account string) error {
	return p.audit.OpenAccount(ctx, accountID(consumer, account))
}

// accountID is the accounts row a consumer credits: each consumer keeps
// its own, so the naive and the inbox consumer can be compared side by side.
func accountID(consumer, account string) string { return consumer + ":" + account }

// expireLeases moves the clock to the latest live lease deadline of an
// undelivered event, and reports whether it had to.
func (p *pipeline) expireLeases(ctx context.Context) (bool, error) {
	evs, err := p.audit.Events(ctx)
	if err != nil {
		return false, err
	}
	var until int64
	var holders []string
	for _, e := range evs {
		if !e.Delivered && e.LeaseUntil > p.now() {
			until = max(until, e.LeaseUntil)
			holders = append(holders, fmt.Sprintf("%s (%s, token %d)", e.ID, e.LockedBy, e.Token))
		}
	}
	if until == 0 {
		return false, nil
	}
	p.setNow(until)
	p.event(clockName, "lease expiry", fmt.Sprintf("the clock reaches %s: the lease on %s has expired", tickClock(until), strings.Join(holders, ", ")))
	return true, nil
}

// count runs one audit query on the observer's connection.
func (p *pipeline) count(ctx context.Context, query string, args ...any) (int64, error) {
	n, err := p.audit.Count(ctx, query, args...)
	return int64(n), err
}

// relayInstance is one relay instance: its own connection and, in memory, its
// current claim. A crash closes the one and drops the other.
type relayInstance struct {
	p     *pipeline
	name  string
	db    *store.DB
	claim store.EventClaim
}

func (p *pipeline) startRelay(ctx context.Context, name string) (*relayInstance, error) {
	db, err := openWorker(ctx, p.path)
	if err != nil {
		return nil, err
	}
	p.event(name, "start", "relay instance on its own connection")
	return &relayInstance{p: p, name: name, db: db}, nil
}

func (r *relayInstance) close() {
	if r.db != nil {
		r.db.Close()
		r.db = nil
	}
}

// crash kills the instance mid-step: connection closed, claim forgotten.
func (r *relayInstance) crash(point failpoint.Point) error {
	r.p.event(r.name, "CRASH", fmt.Sprintf("at %s holding %s with token %d; connection closed, memory dropped", point, r.claim.EventID, r.claim.Token))
	r.close()
	r.claim = store.EventClaim{}
	return failpoint.ErrCrashed
}

// fire consults the plan at point and carries out a crash or a lease
// expiry (the relay stalls until the clock reaches its lease deadline).
func (r *relayInstance) fire(point failpoint.Point) (failpoint.Fault, error) {
	f := r.p.faults.Fire(point, r.name, r.claim.EventID)
	switch f {
	case failpoint.Crash:
		return f, r.crash(point)
	case failpoint.LeaseExpiry:
		r.p.event(r.name, "stalls", fmt.Sprintf("at %s (a pause: GC, a slow network, a suspended VM) while holding %s with token %d", point, r.claim.EventID, r.claim.Token))
		r.p.setNow(r.claim.LeaseUntil)
		r.p.event(clockName, "lease expiry", fmt.Sprintf("the clock reaches %s: %s's lease on %s has expired; it does not know", tickClock(r.claim.LeaseUntil), r.name, r.claim.EventID))
	}
	return f, nil
}

// claimNext claims the oldest claimable event with a lease of relayLease.
func (r *relayInstance) claimNext(ctx context.Context) (store.ClaimOutcome, error) {
	if r.db == nil {
		return "", failpoint.ErrCrashed
	}
	now := r.p.now()
	c, err := r.db.ClaimNextEvent(ctx, r.name, now, now+relayLease)
	if err != nil {
		return "", err
	}
	var detail string
	switch c.Outcome {
	case store.Claimed:
		detail = fmt.Sprintf("%s with token %d, lease until %s", c.EventID, c.Token, tickClock(c.LeaseUntil))
	case store.Empty:
		detail = "nothing claimable"
	default:
		detail = fmt.Sprintf("%s: %s", c.EventID, c.Outcome)
	}
	seq := r.p.event(r.name, "claim "+string(c.Outcome), detail)
	r.p.mu.Lock()
	r.p.claims = append(r.p.claims, pipeClaimEntry{seq: seq, tick: now, relay: r.name, event: c.EventID, outcome: c.Outcome, token: c.Token, until: c.LeaseUntil, heldBy: c.HeldBy})
	r.p.mu.Unlock()
	if c.Outcome != store.Claimed {
		return c.Outcome, nil
	}
	r.claim = c
	_, err = r.fire(failpoint.AfterClaim)
	return c.Outcome, err
}

// send offers the claimed event to the broker. acked is false when the
// broker's acknowledgement was lost: the relay cannot tell whether the
// offer arrived.
func (r *relayInstance) send(ctx context.Context) (acked bool, err error) {
	if r.db == nil {
		return false, failpoint.ErrCrashed
	}
	now := r.p.now()
	sentAs := r.claim.EventID
	r.p.mu.Lock()
	if r.p.eventIDPerSend {
		sentAs = fmt.Sprintf("%s-send-%d", r.claim.EventID, len(r.p.sends)+1)
	}
	r.p.mu.Unlock()
	o, err := r.db.Offer(ctx, sentAs, r.claim.Payload, r.name, r.p.clk.Now(), tickSpan(r.p.brokerWindow))
	if err != nil {
		return false, err
	}
	answer := fmt.Sprintf("broker stored offer %d", o.OfferID)
	if o.Dropped {
		answer = fmt.Sprintf("broker dropped it as a duplicate within its %s window (offer %d recorded as dropped)", durationText(r.p.brokerWindow), o.OfferID)
	}
	f, err := r.fire(failpoint.BrokerAck)
	if err != nil {
		r.recordSend(now, sentAs, o.OfferID, answer+"; relay crashed before the ack arrived")
		return false, err
	}
	if f == failpoint.AckLost {
		r.recordSend(now, sentAs, o.OfferID, answer+"; the broker's ack was LOST: the relay believes the send failed")
		return false, nil
	}
	r.recordSend(now, sentAs, o.OfferID, answer+"; ack received")
	_, err = r.fire(failpoint.AfterSendBeforeComplete)
	return true, err
}

func (r *relayInstance) recordSend(now int64, sentAs string, offerID int64, answer string) {
	detail := fmt.Sprintf("%s (token %d) as message id %s: %s", r.claim.EventID, r.claim.Token, sentAs, answer)
	seq := r.p.event(r.name, "send", detail)
	r.p.mu.Lock()
	defer r.p.mu.Unlock()
	r.p.sends = append(r.p.sends, pipeSendEntry{seq: seq, tick: now, relay: r.name, event: r.claim.EventID, sentAs: sentAs, token: r.claim.Token, offerID: offerID, answer: answer})
}

// complete marks the claimed event published: under its token, or (the
// mistake) by event id alone. 0 rows is an expected outcome.
func (r *relayInstance) complete(ctx context.Context) (int64, error) {
	if r.db == nil {
		return 0, failpoint.ErrCrashed
	}
	now := r.p.now()
	id, token := r.claim.EventID, r.claim.Token
	var f store.Fenced
	var err error
	guard := fmt.Sprintf("claim_token = %d", token)
	if r.p.completeWithoutToken {
		guard = "event id only (MISTAKE)"
		f, err = r.db.AckByEventID(ctx, id, now)
	} else {
		f, err = r.db.AckWithToken(ctx, id, token, now)
	}
	if err != nil {
		return 0, err
	}
	result := "published (1 row)"
	if f.Rows == 0 {
		result = "0 rows"
		if e, ok, err := r.db.EventByID(ctx, id); err == nil && ok {
			switch {
			case e.Token != token:
				result = fmt.Sprintf("fenced out (0 rows): stale token %d, current %d; lease lost", token, e.Token)
			case e.Delivered:
				result = "0 rows: already delivered"
			}
		}
	} else if r.p.completeWithoutToken {
		if e, ok, err := r.db.EventByID(ctx, id); err == nil && ok && e.Token != token {
			result = fmt.Sprintf("published (1 row) by a STALE owner: token %d, current %d", token, e.Token)
		}
	}
	seq := r.p.event(r.name, "complete", fmt.Sprintf("%s WHERE %s: %s", id, guard, result))
	r.p.mu.Lock()
	r.p.completions = append(r.p.completions, pipeCompletionEntry{seq: seq, tick: now, relay: r.name, event: id, token: token, guard: guard, rows: f.Rows, result: result})
	r.p.mu.Unlock()
	return f.Rows, nil
}

// runOnce is the relay's loop body: claim the next event, send it
// (resending while the broker's ack is lost, up to maxSendAttempts), then
// complete it. It reports whether it claimed anything.
func (r *relayInstance) runOnce(ctx context.Context) (bool, error) {
	out, err := r.claimNext(ctx)
	if err != nil || out != store.Claimed {
		return false, err
	}
	acked := false
	for attempt := 0; attempt < maxSendAttempts && !acked; attempt++ {
		if acked, err = r.send(ctx); err != nil {
			return true, err
		}
	}
	if !acked {
		r.p.event(r.name, "gives up", r.claim.EventID+": no broker ack; the lease will expire and another relay will resend")
		return true, nil
	}
	_, err = r.complete(ctx)
	return true, err
}

// drainRelays is recovery: a fresh relay instance runs until every
// committed event is published, letting the leases of stalled or crashed
// owners expire on the clock first.
func (p *pipeline) drainRelays(ctx context.Context, name string) error {
	r, err := p.startRelay(ctx, name)
	if err != nil {
		return err
	}
	defer r.close()
	for range 1000 {
		claimed, err := r.runOnce(ctx)
		if err != nil {
			return err
		}
		if claimed {
			continue
		}
		waited, err := p.expireLeases(ctx)
		if err != nil || !waited {
			return err
		}
	}
	return fmt.Errorf("relay %s did not drain the outbox", name)
}

// consumerInstance is one consumer instance: its own connection and, in memory, the
// delivery it is working on. group is the consumer name the broker and the
// inbox know; several instances may share it.
type consumerInstance struct {
	p      *pipeline
	name   string
	group  string
	design consumerDesign
	db     *store.DB
	// beforeEffect, when set, runs once the instance has decided to apply a
	// delivery (for the split mistake: after its inbox check), with the
	// instance's own context; an error stops the delivery. Session 19 puts a
	// barrier there.
	beforeEffect func(ctx context.Context) error

	delivery store.Delivery
	fired    bool // the after-effect failpoint was passed for this delivery
	ackLost  bool // the ack of this delivery will be lost
}

func (p *pipeline) startConsumer(ctx context.Context, name, group string, design consumerDesign) (*consumerInstance, error) {
	db, err := openWorker(ctx, p.path)
	if err != nil {
		return nil, err
	}
	p.event(name, "start", fmt.Sprintf("consumer %s, %s, on its own connection", group, design))
	return &consumerInstance{p: p, name: name, group: group, design: design, db: db}, nil
}

func (c *consumerInstance) close() {
	if c.db != nil {
		c.db.Close()
		c.db = nil
	}
}

func (c *consumerInstance) crash(point failpoint.Point) error {
	c.p.event(c.name, "CRASH", fmt.Sprintf("at %s with offer %d (%s) in memory; connection closed, memory dropped", point, c.delivery.OfferID, c.delivery.EventID))
	c.close()
	c.delivery = store.Delivery{}
	return failpoint.ErrCrashed
}

// afterEffect passes the after-effect-before-ack point once per delivery.
func (c *consumerInstance) afterEffect() error {
	if c.fired {
		return nil
	}
	c.fired = true
	switch c.p.faults.Fire(failpoint.AfterEffectBeforeAck, c.name, c.delivery.EventID) {
	case failpoint.Crash:
		return c.crash(failpoint.AfterEffectBeforeAck)
	case failpoint.AckLost:
		c.ackLost = true
	}
	return nil
}

// consumeNext takes the next delivery, applies it and acknowledges it. It
// reports false when the broker had nothing for this consumer.
func (c *consumerInstance) consumeNext(ctx context.Context) (bool, error) {
	if c.db == nil {
		return false, failpoint.ErrCrashed
	}
	d, err := c.db.DeliverNext(ctx, c.group, c.p.clk.Now())
	if err != nil || !d.Found {
		return false, err
	}
	c.delivery, c.fired, c.ackLost = d, false, false
	if err := c.apply(ctx, d); err != nil {
		return true, err
	}
	if err := c.afterEffect(); err != nil {
		return true, err
	}
	now := c.p.now()
	result := "acked"
	if c.ackLost {
		result = "ack LOST on the way to the broker"
	} else {
		f, err := c.db.AckDelivery(ctx, c.group, d.OfferID, d.Receipt, c.p.clk.Now())
		if err != nil {
			return true, err
		}
		if f.Rows == 0 {
			result = "late ack: 0 rows (no longer in flight under this receipt)"
		}
	}
	seq := c.p.event(c.name, "ack", fmt.Sprintf("offer %d delivery %d: %s", d.OfferID, d.Receipt, result))
	c.p.mu.Lock()
	c.p.acks = append(c.p.acks, pipeAckEntry{seq: seq, tick: now, instance: c.name, offerID: d.OfferID, receipt: d.Receipt, result: result})
	c.p.mu.Unlock()
	return true, nil
}

// apply runs the instance's design on one delivery and records the effect.
func (c *consumerInstance) apply(ctx context.Context, d store.Delivery) error {
	switch c.design {
	case versionedDesign, unversionedDesign:
		return c.applyVersion(ctx, d)
	}
	var pl creditPayload
	if err := json.Unmarshal([]byte(d.Payload), &pl); err != nil {
		return fmt.Errorf("consumer %s: offer %d: %w", c.name, d.OfferID, err)
	}
	account := accountID(c.group, pl.Account)
	var e store.Effect
	var err error
	switch c.design {
	case inboxDesign:
		if err := c.runBeforeEffect(ctx); err != nil {
			return err
		}
		e, err = c.db.ApplyCreditWithInbox(ctx, c.group, d.EventID, account, pl.CreditCents, c.p.clk.Now())
	case naiveDesign:
		if err := c.runBeforeEffect(ctx); err != nil {
			return err
		}
		e, err = c.db.CreditAccount(ctx, account, pl.CreditCents)
	case splitDesign:
		return c.applySplit(ctx, d, account, pl.CreditCents)
	default:
		return fmt.Errorf("consumer %s: unknown design %q", c.name, c.design)
	}
	if err != nil {
		return err
	}
	result := fmt.Sprintf("credited %d cents to %s", pl.CreditCents, account)
	switch {
	case c.design == inboxDesign && e.Applied:
		result += " (inbox row added in the same transaction)"
	case c.design == inboxDesign:
		result = "duplicate: the inbox insert added 0 rows, no credit"
	}
	c.recordEffect(d, e.Applied, result, e.Stats.BusyRetries)
	return nil
}

// applySplit is the effect-outside-inbox-tx mistake: check the inbox, apply
// the credit, then record the inbox row, each in its own transaction.
func (c *consumerInstance) applySplit(ctx context.Context, d store.Delivery, account string, cents int64) error {
	seen, err := c.db.HasConsumed(ctx, c.group, d.EventID)
	if err != nil {
		return err
	}
	if seen {
		c.recordEffect(d, false, "duplicate: the inbox check found the row, no credit", 0)
		return nil
	}
	if err := c.runBeforeEffect(ctx); err != nil {
		return err
	}
	e, err := c.db.CreditAccount(ctx, account, cents)
	if err != nil {
		return err
	}
	c.recordEffect(d, true, fmt.Sprintf("credited %d cents to %s (inbox row NOT yet written)", cents, account), e.Stats.BusyRetries)
	if err := c.afterEffect(); err != nil {
		return err
	}
	r, err := c.db.RecordConsumed(ctx, c.group, d.EventID, c.p.clk.Now())
	if err != nil {
		return err
	}
	c.p.event(c.name, "inbox insert", fmt.Sprintf("%s: %d row(s) added, in a transaction of its own", d.EventID, r.InboxRows))
	return nil
}

func (c *consumerInstance) applyVersion(ctx context.Context, d store.Delivery) error {
	var pl versionPayload
	if err := json.Unmarshal([]byte(d.Payload), &pl); err != nil {
		return fmt.Errorf("consumer %s: offer %d: %w", c.name, d.OfferID, err)
	}
	if err := c.runBeforeEffect(ctx); err != nil {
		return err
	}
	apply := c.db.ApplyProjection
	if c.design == unversionedDesign {
		apply = c.db.ApplyProjectionUnversioned
	}
	f, err := apply(ctx, pl.Entity, pl.Version, pl.State, c.p.clk.Now())
	if err != nil {
		return err
	}
	result := fmt.Sprintf("%s set to %s at version %d", pl.Entity, pl.State, pl.Version)
	if f.Rows == 0 {
		result = fmt.Sprintf("version %d (%s) ignored: the stored version is newer (0 rows)", pl.Version, pl.State)
	}
	c.recordEffect(d, f.Rows == 1, result, f.Stats.BusyRetries)
	return nil
}

func (c *consumerInstance) runBeforeEffect(ctx context.Context) error {
	if c.beforeEffect == nil {
		return nil
	}
	return c.beforeEffect(ctx)
}

func (c *consumerInstance) recordEffect(d store.Delivery, applied bool, result string, busy int) {
	detail := fmt.Sprintf("offer %d delivery %d of %s: %s", d.OfferID, d.Receipt, d.EventID, result)
	if busy > 0 {
		detail += fmt.Sprintf(" (after %d SQLITE_BUSY retries)", busy)
	}
	seq := c.p.event(c.name, map[bool]string{true: "effect", false: "no effect"}[applied], detail)
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	c.p.effects = append(c.p.effects, pipeEffectEntry{seq: seq, tick: c.p.now(), instance: c.name, consumer: c.group, design: c.design,
		offerID: d.OfferID, receipt: d.Receipt, event: d.EventID, applied: applied, result: result, busy: busy})
}

// drainConsumer has c take every delivery the broker has for its group;
// while deliveries stay unacknowledged, it lets their visibility timeout run
// out on the clock and the broker redeliver them (or dead-letter them after
// maxDeliveries; 0 means no limit).
func (p *pipeline) drainConsumer(ctx context.Context, c *consumerInstance, maxDeliveries int64) error {
	for range 1000 {
		found, err := c.consumeNext(ctx)
		if err != nil {
			return err
		}
		if found {
			continue
		}
		inFlight, err := p.inFlight(ctx, c.group)
		if err != nil || inFlight == 0 {
			return err
		}
		p.setNow(p.now() + visibilityTimeout)
		r, err := p.audit.RedeliverUnacked(ctx, c.group, p.clk.Now(), tickSpan(visibilityTimeout), maxDeliveries)
		if err != nil {
			return err
		}
		p.event("broker", "redeliver", fmt.Sprintf("%s: visibility timeout (%s) ran out on %d unacknowledged deliveries: %d ready again, %d dead-lettered",
			c.group, durationText(visibilityTimeout), inFlight, r.Ready, r.DeadLettered))
	}
	return fmt.Errorf("consumer %s did not drain its deliveries", c.name)
}

// inFlight counts a consumer group's unacknowledged deliveries.
func (p *pipeline) inFlight(ctx context.Context, group string) (int, error) {
	ds, err := p.audit.Deliveries(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, d := range ds {
		if d.Consumer == group && d.State == "in_flight" {
			n++
		}
	}
	return n, nil
}

// isCrash reports whether err is an injected crash (an expected outcome):
// a relay's or consumer's crash (failpoint.ErrCrashed) or a checkout's
// crash inside the store (store.ErrCrashed, which wraps it).
func isCrash(err error) bool {
	return errors.Is(err, failpoint.ErrCrashed) || errors.Is(err, store.ErrCrashed)
}

// unlessCrash returns err, except an injected crash: a script goes on
// without the dead instance, whose later steps return the crash again.
func unlessCrash(err error) error {
	if isCrash(err) {
		return nil
	}
	return err
}

// completionRows returns the rows of relay's first completion of event.
func (p *pipeline) completionRows(relay, event string) (int64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.completions {
		if c.relay == relay && c.event == event {
			return c.rows, true
		}
	}
	return 0, false
}

// effectsOf returns the effect ledger entries in order.
func (p *pipeline) effectsOf() []pipeEffectEntry {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]pipeEffectEntry(nil), p.effects...)
}

// rowLabels is how the tables of several pipelines are told apart: when a
// report holds more than one, a first column names the pipeline's row.
type rowLabels bool

func (l rowLabels) columns(c ...string) []string {
	if l {
		return append([]string{"Row"}, c...)
	}
	return c
}

func (l rowLabels) cells(p *pipeline, c ...any) []any {
	if l {
		return append([]any{p.label}, c...)
	}
	return c
}

// deliveryLedgers renders the ledgers of one or more pipelines, each kind
// in its own table; with several pipelines, a first column names the row.
func deliveryLedgers(ps []*pipeline) []lab.Table {
	l := rowLabels(len(ps) > 1)
	claims := lab.Table{Title: "Ledger: relay claims", Note: "Every claim attempt on outbox_events; a successful claim increments claim_token (the fencing token).",
		Columns: l.columns("#", "Clock", "Relay", "Event", "Outcome", "Token", "Lease until", "Held by")}
	sends := lab.Table{Title: "Ledger: relay sends", Note: "What each relay sent and what it learned back; the broker's own record is the broker offers table.",
		Columns: l.columns("#", "Clock", "Relay", "Event", "Token", "Sent as", "Offer", "Broker answer")}
	completions := lab.Table{Title: "Ledger: completions", Note: "Every completion attempt and its affected row count: 0 rows is an expected, recorded outcome.",
		Columns: l.columns("#", "Clock", "Relay", "Event", "Token", "Guard", "Rows", "Result")}
	effects := lab.Table{Title: "Ledger: consumer effects", Note: "Every delivery a consumer applied, and whether a business effect committed.",
		Columns: l.columns("#", "Clock", "Instance", "Consumer", "Design", "Offer", "Delivery", "Event", "Effect", "Result", "Busy retries")}
	acks := lab.Table{Title: "Ledger: consumer acknowledgements", Note: "Acks to the broker; a lost or never-sent ack makes the broker redeliver.",
		Columns: l.columns("#", "Clock", "Instance", "Offer", "Delivery", "Result")}
	for _, p := range ps {
		p.mu.Lock()
		for _, c := range p.claims {
			claims.AddRow(l.cells(p, c.seq, tickClock(c.tick), c.relay, c.event, string(c.outcome), tokenCell(c.token), clockCell(c.until), c.heldBy)...)
		}
		for _, s := range p.sends {
			sends.AddRow(l.cells(p, s.seq, tickClock(s.tick), s.relay, s.event, s.token, s.sentAs, s.offerID, s.answer)...)
		}
		for _, c := range p.completions {
			completions.AddRow(l.cells(p, c.seq, tickClock(c.tick), c.relay, c.event, c.token, c.guard, c.rows, c.result)...)
		}
		for _, e := range p.effects {
			effects.AddRow(l.cells(p, e.seq, tickClock(e.tick), e.instance, e.consumer, string(e.design), e.offerID, e.receipt, e.event, e.applied, e.result, e.busy)...)
		}
		for _, a := range p.acks {
			acks.AddRow(l.cells(p, a.seq, tickClock(a.tick), a.instance, a.offerID, a.receipt, a.result)...)
		}
		p.mu.Unlock()
	}
	for _, p := range ps {
		effects.Interleaved = effects.Interleaved || p.concurrent
		acks.Interleaved = effects.Interleaved
	}
	out := []lab.Table{claims, sends, completions, effects}
	if len(acks.Rows) > 0 {
		out = append(out, acks)
	}
	return out
}

// tokenCell prints a fencing token, "-" before any claim.
func tokenCell(v int64) any {
	if v == 0 {
		return nil
	}
	return v
}

// clockCell prints a tick as clock text, "-" when unset (0).
func clockCell(t int64) any {
	if t == 0 {
		return nil
	}
	return tickClock(t)
}

// storedTickCell prints an outbox_events time, which that table keeps as a
// logical tick: the clock time, then the integer the sqlite3 shell shows;
// "-" when the column is NULL (set is false).
func storedTickCell(t int64, set bool) any {
	if !set {
		return nil
	}
	return fmt.Sprintf("%s (%d)", tickClock(t), t)
}

// deliveryState renders the durable state of one or more pipelines, read
// from their databases: outbox events, the broker's offers (its own
// ledger), deliveries, dead letters, the inbox, accounts and projections.
func deliveryState(ctx context.Context, ps []*pipeline) ([]lab.Table, error) {
	l := rowLabels(len(ps) > 1)
	events := lab.Table{Title: "Final state: outbox_events", Note: "Read from the database. delivered = 1 means a relay completed (published) the event. " +
		"outbox_events keeps logical integer time (it is shared with sessions 16 and 17): each time shows the clock time and, in brackets, " +
		"the stored tick (milliseconds since 2026-01-15T09:00:00.000Z).",
		Columns: l.columns("event_id", "created_at", "claim_token", "locked_by", "lease_until", "delivered", "delivered_at")}
	offers := lab.Table{Title: "Ledger: broker offers (broker_offers)", Note: "The broker's own durable record of every send it received, accepted or dropped by its dedup window.",
		Columns: l.columns("offer_id", "event_id", "offered_by", "offered_at", "dropped", "payload")}
	deliveries := lab.Table{Title: "Final state: broker_deliveries", Note: "Per consumer: how often each offer was delivered and whether it was acknowledged.",
		Columns: l.columns("offer_id", "consumer", "state", "delivery_count", "delivered_at", "acked_at")}
	dead := lab.Table{Title: "Final state: broker_dead_letters", Note: "The dead-letter queue, after its retention purge.",
		Columns: l.columns("dead_letter_id", "offer_id", "consumer", "event_id", "delivery_count", "dead_lettered_at")}
	inbox := lab.Table{Title: "Final state: consumed_events (the inbox)", Note: "One row per (consumer, event_id) whose effect committed, after any retention purge.",
		Columns: l.columns("consumer", "event_id", "consumed_at")}
	accounts := lab.Table{Title: "Final state: accounts", Note: "Each consumer credits its own row, so the designs can be compared.",
		Columns: l.columns("id", "credit_cents")}
	projections := lab.Table{Title: "Final state: projections", Columns: l.columns("entity_id", "version", "state", "updated_at")}
	for _, p := range ps {
		db := p.audit
		evs, err := db.Events(ctx)
		if err != nil {
			return nil, err
		}
		for _, e := range evs {
			events.AddRow(l.cells(p, e.ID, storedTickCell(e.CreatedAt, true), e.Token, e.LockedBy,
				storedTickCell(e.LeaseUntil, e.LockedBy != ""), e.Delivered, storedTickCell(e.DeliveredAt, e.Delivered))...)
		}
		brokerOffers, err := db.Offers(ctx)
		if err != nil {
			return nil, err
		}
		for _, o := range brokerOffers {
			offers.AddRow(l.cells(p, o.OfferID, o.EventID, o.OfferedBy, o.OfferedAt, o.Dropped, o.Payload)...)
		}
		ds, err := db.Deliveries(ctx)
		if err != nil {
			return nil, err
		}
		for _, d := range ds {
			deliveries.AddRow(l.cells(p, d.OfferID, d.Consumer, d.State, d.DeliveryCount, d.DeliveredAt, d.AckedAt)...)
		}
		dls, err := db.DeadLetters(ctx)
		if err != nil {
			return nil, err
		}
		for _, d := range dls {
			dead.AddRow(l.cells(p, d.ID, d.OfferID, d.Consumer, d.EventID, d.DeliveryCount, d.DeadLetteredAt)...)
		}
		ces, err := db.ConsumedEvents(ctx)
		if err != nil {
			return nil, err
		}
		for _, c := range ces {
			inbox.AddRow(l.cells(p, c.Consumer, c.EventID, c.ConsumedAt)...)
		}
		as, err := db.Accounts(ctx)
		if err != nil {
			return nil, err
		}
		for _, a := range as {
			accounts.AddRow(l.cells(p, a.ID, a.CreditCents)...)
		}
		prs, err := db.Projections(ctx)
		if err != nil {
			return nil, err
		}
		for _, pr := range prs {
			projections.AddRow(l.cells(p, pr.EntityID, pr.Version, pr.State, pr.UpdatedAt)...)
		}
	}
	out := []lab.Table{events, offers, deliveries}
	for _, t := range []lab.Table{dead, inbox, accounts, projections} {
		if len(t.Rows) > 0 {
			out = append(out, t)
		}
	}
	return out, nil
}

// faultTable lists the faults a plan injected, in order.
func faultTable(plans map[string]*failpoint.Plan) lab.Table {
	t := lab.Table{Title: "Injected faults", Note: "The failpoints that fired: where, in whom, on which message, and what happened there.",
		Columns: []string{"Where", "#", "Point", "Actor", "Message", "Fault"}}
	labels := make([]string, 0, len(plans))
	for l := range plans {
		labels = append(labels, l)
	}
	sort.Strings(labels)
	for _, l := range labels {
		for _, f := range plans[l].Fired() {
			t.AddRow(l, f.Seq, string(f.Point), f.Actor, f.Subject, string(f.Fault))
		}
	}
	return t
}

// brokerStatements is the broker and consumer SQL sessions 18 to 20 run.
func brokerStatements(extra ...lab.Statement) []lab.Statement {
	base := []lab.Statement{
		{Name: "relay: claim (fencing token +1)", SQL: store.ClaimEventSQL},
		{Name: "relay: complete under the current token", SQL: store.AckWithTokenSQL},
		{Name: "broker: offer (with dedup window)", SQL: store.OfferSQL},
		{Name: "broker: deliver next", SQL: store.SelectNextDeliverySQL},
		{Name: "broker: mark delivered", SQL: store.MarkDeliveredSQL},
		{Name: "broker: ack a delivery", SQL: store.AckDeliverySQL},
		{Name: "broker: redeliver after the visibility timeout", SQL: store.RedeliverSQL},
		{Name: "inbox consumer: inbox insert (same transaction as the credit)", SQL: store.RecordConsumedSQL},
		{Name: "inbox consumer: credit, only when the insert added a row", SQL: store.CreditAccountSQL},
	}
	return append(base, extra...)
}
