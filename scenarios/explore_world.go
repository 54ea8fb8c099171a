package scenarios

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/outboxlab/outboxlab/clock"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/store"
)

// This file holds one ordering of the interleaving explorer: its world (a
// fresh database, the relays, the consumer, the scenario clock), the steps
// its actions run through the store, the drain that follows and the
// judgement of the invariants on durable state. The alphabet, the events
// and the invariants are in explore_model.go.

// exploreStepRecord is one step of an ordering or of its drain: the
// action, the timeline events it produced, and the violations it showed.
type exploreStepRecord struct {
	label     string // "1", "2", … for the ordering; "drain 1", … for the drain
	action    string
	at        string
	events    []lab.Event
	violation []string
}

// exploreViolation is one invariant broken in one ordering.
type exploreViolation struct {
	inv    exploreInvariant
	detail string
}

// orderingResult is what one ordering did and showed.
type orderingResult struct {
	actions    []exploreAction
	enabled    []exploreAction // at the end of the ordering, before the drain
	steps      []exploreStepRecord
	violations []exploreViolation
	violated   [numExploreInvariants]bool
	// guards are the guards that turned a write away (0 rows) during the
	// ordering or its drain.
	guards guardSet
	// drainReused says the drain was not run: an earlier ordering had
	// drained from the same key, and this one took its verdict.
	drainReused bool
}

// exploreRelay is a relay of the ordering: an instance (opened on its first
// step) and what it holds in memory.
type exploreRelay struct {
	name    string
	inst    *relayInstance
	holding bool // it holds a claim it has not finished
	sent    bool
	done    bool // completed
	crashed bool
}

// exploreConsumer is the consumer instance and the delivery it holds.
type exploreConsumer struct {
	name     string
	db       *store.DB
	held     store.Delivery // Found is false when it holds nothing
	consumed bool
}

// exploreWorld is one ordering's world.
type exploreWorld struct {
	p          *pipeline
	design     exploreDesign
	relays     [2]*exploreRelay
	consumer   *exploreConsumer
	crashes    int
	res        *orderingResult
	maxVersion int64 // the highest projection version observed so far
}

// newExploreWorld opens the observer on a fresh database at path.
func newExploreWorld(ctx context.Context, path string, design exploreDesign, tl *lab.Timeline) (*exploreWorld, error) {
	audit, err := openWorker(ctx, path)
	if err != nil {
		return nil, err
	}
	p := &pipeline{path: path, audit: audit, clk: clock.NewManual(lessonStart), timeline: tl, completeWithoutToken: design.completeWithoutToken}
	return &exploreWorld{
		p:        p,
		design:   design,
		relays:   [2]*exploreRelay{{name: relayA}, {name: relayB}},
		consumer: &exploreConsumer{name: exploreConsumerName},
		res:      &orderingResult{},
	}, nil
}

// close closes every connection still open.
func (w *exploreWorld) close() {
	for _, r := range w.relays {
		if r.inst != nil {
			r.inst.close()
		}
	}
	w.consumer.close()
	w.p.close()
}

// discard throws the ordering's scratch database away. Its files are
// unlinked before the connections close where the system allows it (on
// Windows it does not), so SQLite's checkpoint on the last close (it copies
// the WAL into the database file and syncs it) costs no disk sync. Only for
// scratch files: a database meant to be read again is closed with close.
func (w *exploreWorld) discard() error {
	early := store.RemoveFiles(w.p.path)
	w.close()
	if early != nil {
		return store.RemoveFiles(w.p.path)
	}
	return nil
}

func (c *exploreConsumer) close() {
	if c.db != nil {
		c.db.Close()
		c.db = nil
	}
}

// outboxSnapshot is what durable outbox state says about the relays' options.
type outboxSnapshot struct {
	claimable bool // an unpublished event with no live lease
	liveLease bool // an unpublished event with a live lease
}

// outboxState reads it on the observer's connection.
func (w *exploreWorld) outboxState(ctx context.Context) (outboxSnapshot, error) {
	evs, err := w.p.audit.Events(ctx)
	return w.outboxFrom(evs), err
}

// outboxFrom reads it from the outbox rows.
func (w *exploreWorld) outboxFrom(evs []store.Event) outboxSnapshot {
	var s outboxSnapshot
	now := w.p.now()
	for _, e := range evs {
		if e.Delivered {
			continue
		}
		// The claim's predicate: lease_until IS NULL OR lease_until <= now
		// (a NULL lease reads as 0).
		if e.LeaseUntil <= now {
			s.claimable = true
		} else {
			s.liveLease = true
		}
	}
	return s
}

// brokerSnapshot is what durable broker state says about the consumer's options.
type brokerSnapshot struct {
	deliverable bool // an accepted offer never delivered to the consumer, or ready again
	inFlight    []store.BrokerDelivery
}

// brokerState reads it on the observer's connection.
func (w *exploreWorld) brokerState(ctx context.Context) (brokerSnapshot, error) {
	offers, err := w.p.audit.Offers(ctx)
	if err != nil {
		return brokerSnapshot{}, err
	}
	ds, err := w.p.audit.Deliveries(ctx)
	return brokerFrom(offers, ds), err
}

// brokerFrom reads it from the broker's rows.
func brokerFrom(offers []store.BrokerOffer, ds []store.BrokerDelivery) brokerSnapshot {
	var s brokerSnapshot
	state := map[int64]string{}
	for _, d := range ds {
		if d.Consumer != exploreConsumerGroup {
			continue
		}
		state[d.OfferID] = d.State
		if d.State == "in_flight" {
			s.inFlight = append(s.inFlight, d)
		}
	}
	for _, o := range offers {
		if st, ok := state[o.OfferID]; !o.Dropped && (!ok || st == "ready") {
			s.deliverable = true
		}
	}
	return s
}

// enabled lists the actions that make sense now, in alphabet order.
func (w *exploreWorld) enabled(s outboxSnapshot, b brokerSnapshot) []exploreAction {
	var out []exploreAction
	for i, r := range w.relays {
		base := actClaimA + exploreAction(i)*relayActions
		if r.crashed {
			continue
		}
		if !r.holding && s.claimable {
			out = append(out, base+actClaimA)
		}
		sendReady, completeReady := !r.sent, r.sent && !r.done
		if w.design.completeBeforeSend {
			sendReady, completeReady = r.done && !r.sent, !r.done
		}
		if r.holding && sendReady {
			out = append(out, base+actSendA)
		}
		if r.holding && completeReady {
			out = append(out, base+actCompleteA)
		}
		if r.holding && w.crashes < maxExploreCrashes {
			out = append(out, base+actCrashA)
		}
	}
	if s.liveLease {
		out = append(out, actExpire)
	}
	c := w.consumer
	if !c.held.Found && b.deliverable {
		out = append(out, actDeliver)
	}
	if c.held.Found && !c.consumed {
		out = append(out, actConsume)
	}
	if c.held.Found && c.consumed {
		out = append(out, actAck, actAckLost)
	}
	if len(b.inFlight) > 0 {
		out = append(out, actRedeliver)
	}
	return out
}

// beginStep starts recording a step; the clock moves one step forward.
func (w *exploreWorld) beginStep(label, action string) int {
	w.p.setNow(w.p.now() + exploreStep)
	w.res.steps = append(w.res.steps, exploreStepRecord{label: label, action: action})
	return len(w.p.timeline.Events())
}

// endStep attaches the timeline events the step produced, and the clock
// as the step left it.
func (w *exploreWorld) endStep(from int) {
	st := &w.res.steps[len(w.res.steps)-1]
	st.events = w.p.timeline.Events()[from:]
	st.at = tickClock(w.p.now())
}

// violate records a broken invariant at the current step.
func (w *exploreWorld) violate(inv exploreInvariant, detail string) {
	i := len(w.res.steps) - 1
	w.res.steps[i].violation = append(w.res.steps[i].violation, fmt.Sprintf("VIOLATED %q: %s", invariantInfo[inv].name, detail))
	w.res.violations = append(w.res.violations, exploreViolation{inv: inv, detail: detail})
	w.res.violated[inv] = true
}

// do runs one action of the ordering as step n.
func (w *exploreWorld) do(ctx context.Context, n int, a exploreAction) error {
	from := w.beginStep(fmt.Sprint(n), a.String())
	defer w.endStep(from)
	if i := a.relay(); i >= 0 {
		r := w.relays[i]
		switch a - exploreAction(i)*relayActions {
		case actClaimA:
			return w.claim(ctx, r)
		case actSendA:
			return w.send(ctx, r)
		case actCompleteA:
			return w.complete(ctx, r)
		case actCrashA:
			return w.crash(r)
		}
	}
	switch a {
	case actExpire:
		expired, err := w.p.expireLeases(ctx)
		if err == nil && !expired {
			err = fmt.Errorf("explore: expire chosen with no live lease")
		}
		return err
	case actDeliver:
		return w.deliver(ctx, w.consumer)
	case actConsume:
		return w.consume(ctx, w.consumer)
	case actAck:
		return w.ack(ctx, w.consumer)
	case actAckLost:
		return w.loseAck(w.consumer)
	case actRedeliver:
		return w.redeliver(ctx)
	}
	return fmt.Errorf("explore: unknown action %d", a)
}

func (w *exploreWorld) claim(ctx context.Context, r *exploreRelay) error {
	if r.inst == nil {
		inst, err := w.p.startRelay(ctx, r.name)
		if err != nil {
			return err
		}
		r.inst = inst
	}
	out, err := r.inst.claimNext(ctx)
	if err != nil {
		return err
	}
	if out != store.Claimed {
		// The explorer chose the claim because durable state showed a
		// claimable event: the store disagreeing is a bug, not an outcome.
		return fmt.Errorf("explore: %s's claim was %s although an event was claimable", r.name, out)
	}
	r.holding, r.sent, r.done = true, false, false
	return nil
}

func (w *exploreWorld) send(ctx context.Context, r *exploreRelay) error {
	if _, err := r.inst.send(ctx); err != nil {
		return err
	}
	r.sent = true
	if w.design.completeBeforeSend {
		r.holding = false // its last step for this claim
	}
	return nil
}

// complete runs the relay's completion between two reads of the row, so
// the stale-completion invariant is judged on durable state: the token the
// row held just before, and whether the completion published it.
func (w *exploreWorld) complete(ctx context.Context, r *exploreRelay) error {
	id, token := r.inst.claim.EventID, r.inst.claim.Token
	before, _, err := w.p.audit.EventByID(ctx, id)
	if err != nil {
		return err
	}
	rows, err := r.inst.complete(ctx)
	if err != nil {
		return err
	}
	if rows == 0 {
		w.res.guards |= guardCompletion
	}
	after, _, err := w.p.audit.EventByID(ctx, id)
	if err != nil {
		return err
	}
	if !before.Delivered && after.Delivered && token != before.Token {
		w.violate(invStaleCompletion, fmt.Sprintf("%s published %s with token %d while the row's latest token was %d", r.name, id, token, before.Token))
	}
	r.done = true
	if !w.design.completeBeforeSend {
		r.holding = false
	}
	return nil
}

// crash kills the relay mid-step: connection closed, memory dropped.
func (w *exploreWorld) crash(r *exploreRelay) error {
	progress := "claimed, not sent"
	switch {
	case r.sent && !r.done:
		progress = "sent, not completed"
	case r.done && !r.sent:
		progress = "completed, not sent"
	}
	c := r.inst.claim
	w.p.event(r.name, "CRASH", fmt.Sprintf("holding %s with token %d (%s); connection closed, memory dropped", c.EventID, c.Token, progress))
	r.inst.close()
	r.inst.claim = store.EventClaim{}
	r.holding, r.crashed = false, true
	w.crashes++
	return nil
}

func (w *exploreWorld) deliver(ctx context.Context, c *exploreConsumer) error {
	if c.db == nil {
		db, err := openWorker(ctx, w.p.path)
		if err != nil {
			return err
		}
		c.db = db
		w.p.event(c.name, "start", fmt.Sprintf("consumer %s (%s), on its own connection", exploreConsumerGroup, w.design.consumerDesign()))
	}
	d, err := c.db.DeliverNext(ctx, exploreConsumerGroup, w.p.clk.Now())
	if err != nil {
		return err
	}
	if !d.Found {
		return fmt.Errorf("explore: the broker delivered nothing to %s although an offer was deliverable", c.name)
	}
	c.held, c.consumed = d, false
	w.p.event("broker", "deliver", fmt.Sprintf("offer %d (%s) to %s: delivery %d", d.OfferID, d.EventID, c.name, d.Receipt))
	return nil
}

// consume applies the held delivery: the credit (inbox insert and credit in
// one transaction, or the naive credit), then the projection. The observer
// then reads the projection back, so monotonicity is judged on durable state.
func (w *exploreWorld) consume(ctx context.Context, c *exploreConsumer) error {
	d := c.held
	var pl exploreEventPayload
	if err := json.Unmarshal([]byte(d.Payload), &pl); err != nil {
		return fmt.Errorf("explore: offer %d: %w", d.OfferID, err)
	}
	now := w.p.clk.Now()
	if pl.CreditCents > 0 {
		account := accountID(exploreConsumerGroup, pl.Account)
		var e store.Effect
		var err error
		if w.design.naiveConsumer {
			e, err = c.db.CreditAccount(ctx, account, pl.CreditCents)
		} else {
			e, err = c.db.ApplyCreditWithInbox(ctx, exploreConsumerGroup, d.EventID, account, pl.CreditCents, now)
		}
		if err != nil {
			return err
		}
		result := fmt.Sprintf("credited %d cents to %s", pl.CreditCents, account)
		switch {
		case w.design.naiveConsumer:
			result += " (no inbox)"
		case e.Applied:
			result += " (inbox row added in the same transaction)"
		default:
			result = "duplicate: the inbox insert added 0 rows, no credit"
			w.res.guards |= guardInbox
		}
		w.recordEffect(c, d, e.Applied, result)
	}
	apply := c.db.ApplyProjection
	if w.design.unversionedProjection {
		apply = c.db.ApplyProjectionUnversioned
	}
	f, err := apply(ctx, pl.Entity, pl.Version, pl.State, now)
	if err != nil {
		return err
	}
	projected := fmt.Sprintf("projection %s set to %s at version %d", pl.Entity, pl.State, pl.Version)
	if f.Rows == 0 {
		w.res.guards |= guardVersion
		projected = fmt.Sprintf("projection unchanged: version %d (%s) is not newer (0 rows)", pl.Version, pl.State)
	}
	w.p.event(c.name, "project", fmt.Sprintf("offer %d delivery %d of %s: %s", d.OfferID, d.Receipt, d.EventID, projected))
	c.consumed = true

	projs, err := w.p.audit.Projections(ctx)
	if err != nil {
		return err
	}
	for _, pr := range projs {
		if pr.EntityID != exploreAccount {
			continue
		}
		if pr.Version < w.maxVersion {
			w.violate(invProjectionBackward, fmt.Sprintf("%s moved from version %d back to version %d (%s)", pr.EntityID, w.maxVersion, pr.Version, pr.State))
		}
		w.maxVersion = max(w.maxVersion, pr.Version)
	}
	return nil
}

func (w *exploreWorld) recordEffect(c *exploreConsumer, d store.Delivery, applied bool, result string) {
	detail := fmt.Sprintf("offer %d delivery %d of %s: %s", d.OfferID, d.Receipt, d.EventID, result)
	seq := w.p.event(c.name, map[bool]string{true: "effect", false: "no effect"}[applied], detail)
	w.p.effects = append(w.p.effects, pipeEffectEntry{seq: seq, tick: w.p.now(), instance: c.name, consumer: exploreConsumerGroup,
		design: w.design.consumerDesign(), offerID: d.OfferID, receipt: d.Receipt, event: d.EventID, applied: applied, result: result})
}

func (w *exploreWorld) ack(ctx context.Context, c *exploreConsumer) error {
	d := c.held
	f, err := c.db.AckDelivery(ctx, exploreConsumerGroup, d.OfferID, d.Receipt, w.p.clk.Now())
	if err != nil {
		return err
	}
	result := "acked (1 row)"
	if f.Rows == 0 {
		w.res.guards |= guardReceipt
		result = "late ack: 0 rows (no longer in flight under this receipt)"
	}
	w.recordAck(c, d, result)
	return nil
}

func (w *exploreWorld) loseAck(c *exploreConsumer) error {
	w.recordAck(c, c.held, "ack LOST on the way to the broker: the delivery stays in flight")
	return nil
}

func (w *exploreWorld) recordAck(c *exploreConsumer, d store.Delivery, result string) {
	seq := w.p.event(c.name, "ack", fmt.Sprintf("offer %d delivery %d: %s", d.OfferID, d.Receipt, result))
	w.p.acks = append(w.p.acks, pipeAckEntry{seq: seq, tick: w.p.now(), instance: c.name, offerID: d.OfferID, receipt: d.Receipt, result: result})
	c.held, c.consumed = store.Delivery{}, false
}

// redeliver lets the visibility timeout of every in-flight delivery run
// out on the clock; the broker makes them ready again.
func (w *exploreWorld) redeliver(ctx context.Context) error {
	s, err := w.brokerState(ctx)
	if err != nil {
		return err
	}
	if len(s.inFlight) == 0 {
		return fmt.Errorf("explore: redeliver chosen with nothing in flight")
	}
	for _, d := range s.inFlight {
		at, err := tickOfClock(d.DeliveredAt)
		if err != nil {
			return err
		}
		w.p.setNow(at + exploreVisibility)
	}
	r, err := w.p.audit.RedeliverUnacked(ctx, exploreConsumerGroup, w.p.clk.Now(), tickSpan(exploreVisibility), 0)
	if err != nil {
		return err
	}
	w.p.event("broker", "redeliver", fmt.Sprintf("the %s visibility timeout ran out on %d unacknowledged deliveries: %d ready again",
		durationText(exploreVisibility), len(s.inFlight), r.Ready))
	return nil
}

// drainStep is one step of the drain: a name for the step tables and what
// it runs.
type drainStep struct {
	name string
	run  func() error
}

// drain ends the ordering: every instance stops for good (what it held in
// memory is lost), then a recovery relay publishes whatever is left, letting
// leases expire on the clock, and a fresh consumer instance takes every
// delivery, letting unacknowledged ones be redelivered.
func (w *exploreWorld) drain(ctx context.Context) error {
	w.p.event("scenario", "end of ordering", "Relay-A, Relay-B and the consumer stop for good: what they held in memory is lost; the drain starts")
	for _, r := range w.relays {
		if r.inst != nil {
			r.inst.close()
		}
	}
	w.consumer.close()
	n := 0
	steps := func(ss ...drainStep) error {
		for _, st := range ss {
			n++
			from := w.beginStep(fmt.Sprintf("drain %d", n), st.name)
			err := st.run()
			w.endStep(from)
			if err != nil {
				return err
			}
		}
		return nil
	}

	rec := &exploreRelay{name: exploreRecoveryRelay}
	defer func() {
		if rec.inst != nil {
			rec.inst.close()
		}
	}()
	claim := drainStep{"recovery claim", func() error { return w.claim(ctx, rec) }}
	send := drainStep{"recovery send", func() error { return w.send(ctx, rec) }}
	complete := drainStep{"recovery complete", func() error { return w.complete(ctx, rec) }}
	publish := []drainStep{claim, send, complete}
	if w.design.completeBeforeSend {
		publish = []drainStep{claim, complete, send}
	}
	expire := drainStep{"expire", func() error { _, err := w.p.expireLeases(ctx); return err }}
	for range 100 {
		s, err := w.outboxState(ctx)
		if err != nil {
			return err
		}
		switch {
		case s.claimable:
			err = steps(publish...)
		case s.liveLease:
			err = steps(expire)
		default:
			return w.drainConsumer(ctx, steps)
		}
		if err != nil {
			return err
		}
	}
	return fmt.Errorf("explore: the recovery relay did not drain the outbox")
}

// drainConsumer has a fresh consumer instance take every delivery, apply
// and acknowledge it; while deliveries stay in flight (acks lost, or
// abandoned by the ordering's consumer), the broker redelivers them.
func (w *exploreWorld) drainConsumer(ctx context.Context, steps func(...drainStep) error) error {
	c := &exploreConsumer{name: exploreRecoveryConsumer}
	defer c.close()
	take := []drainStep{
		{"deliver", func() error { return w.deliver(ctx, c) }},
		{"consume", func() error { return w.consume(ctx, c) }},
		{"ack", func() error { return w.ack(ctx, c) }},
	}
	redeliver := drainStep{"redeliver", func() error { return w.redeliver(ctx) }}
	for range 100 {
		s, err := w.brokerState(ctx)
		if err != nil {
			return err
		}
		switch {
		case s.deliverable:
			err = steps(take...)
		case len(s.inFlight) > 0:
			err = steps(redeliver)
		default:
			return nil
		}
		if err != nil {
			return err
		}
	}
	return fmt.Errorf("explore: the consumer did not drain the broker")
}

// judgeFinal judges the invariants that need the drained, final state:
// at least once and effect at most once.
func (w *exploreWorld) judgeFinal(ctx context.Context) error {
	w.res.steps = append(w.res.steps, exploreStepRecord{label: "end", action: "judge durable state", at: tickClock(w.p.now())})
	evs, err := w.p.audit.Events(ctx)
	if err != nil {
		return err
	}
	offers, err := w.p.audit.Offers(ctx)
	if err != nil {
		return err
	}
	accepted := map[string]int{}
	for _, o := range offers {
		if !o.Dropped {
			accepted[o.EventID]++
		}
	}
	for _, e := range evs {
		if accepted[e.ID] == 0 || !e.Delivered {
			w.violate(invAtLeastOnce, fmt.Sprintf("%s: %d accepted broker offer(s), published %s", e.ID, accepted[e.ID], lab.Cell(e.Delivered)))
		}
	}
	for _, e := range exploreEvents {
		if e.payload.CreditCents == 0 {
			continue
		}
		account := accountID(exploreConsumerGroup, e.payload.Account)
		credit, err := w.p.count(ctx, store.AccountCreditSQL, account)
		if err != nil {
			return err
		}
		// Each account is credited by one event only, so its credit counts
		// that event's committed effects.
		if n := credit / e.payload.CreditCents; n > 1 {
			w.violate(invEffectAtMostOnce, fmt.Sprintf("%s's %d-cent credit committed %d times: %s holds %d cents", e.id, e.payload.CreditCents, n, account, credit))
		}
	}
	return nil
}

// drainVerdict is what a drain and the final judgement added to an
// ordering: the violations they found and the guards that turned writes away.
type drainVerdict struct {
	violations []exploreViolation
	guards     guardSet
}

// drainCache holds the verdict of every drain that ran, by drain key, for
// orderings that may run at the same time. A nil cache runs every drain.
type drainCache struct {
	mu      sync.Mutex
	entries map[string]*drainEntry
}

// drainEntry is one key's drain: the first ordering to reach the key runs
// it; the others wait until it is ready and take its verdict.
type drainEntry struct {
	ready   chan struct{} // closed when the verdict is in, or the drain failed
	ok      bool
	verdict drainVerdict
}

func newDrainCache() *drainCache { return &drainCache{entries: map[string]*drainEntry{}} }

// claim returns key's entry, and true when the caller is the first to
// reach it and must run the drain and then call [drainCache.settle].
func (c *drainCache) claim(key string) (*drainEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[key]; ok {
		return e, false
	}
	e := &drainEntry{ready: make(chan struct{})}
	c.entries[key] = e
	return e, true
}

// settle publishes the claimed drain's verdict (ok false: it failed).
func (c *drainCache) settle(e *drainEntry, v drainVerdict, ok bool) {
	e.verdict, e.ok = v, ok
	close(e.ready)
}

// size is how many distinct drain keys were reached: each drained once.
func (c *drainCache) size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// runExploreOrdering runs one ordering against a fresh copy of the seeded
// template at path: its actions, then the drain, then the judgement. With
// a cache, a drain whose key was drained before is not run again: the
// ordering takes that drain's verdict (see [exploreWorld.drainKey]).
func runExploreOrdering(ctx context.Context, path string, template []byte, design exploreDesign, actions []exploreAction, tl *lab.Timeline, cache *drainCache) (*orderingResult, *exploreWorld, error) {
	if err := store.RemoveFiles(path); err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(path, template, 0o644); err != nil {
		return nil, nil, fmt.Errorf("explore: copy template: %w", err)
	}
	w, err := newExploreWorld(ctx, path, design, tl)
	if err != nil {
		return nil, nil, err
	}
	w.res.actions = actions
	if err := w.play(ctx, actions, cache); err != nil {
		w.close()
		return nil, nil, fmt.Errorf("explore: ordering [%s]: %w", orderingText(actions), err)
	}
	return w.res, w, nil
}

// play runs the actions, notes what is enabled after them, then drains and
// judges (or takes a cached drain's verdict).
func (w *exploreWorld) play(ctx context.Context, actions []exploreAction, cache *drainCache) (err error) {
	for i, a := range actions {
		if err := w.do(ctx, i+1, a); err != nil {
			return err
		}
	}
	evs, err := w.p.audit.Events(ctx)
	if err != nil {
		return err
	}
	offers, err := w.p.audit.Offers(ctx)
	if err != nil {
		return err
	}
	ds, err := w.p.audit.Deliveries(ctx)
	if err != nil {
		return err
	}
	w.res.enabled = w.enabled(w.outboxFrom(evs), brokerFrom(offers, ds))
	if cache != nil {
		key, err := w.drainKey(ctx, evs, offers, ds)
		if err != nil {
			return err
		}
		e, first := cache.claim(key)
		if !first {
			select {
			case <-e.ready:
			case <-ctx.Done():
				return ctx.Err()
			}
			if !e.ok {
				return fmt.Errorf("explore: the drain from the same state failed")
			}
			w.res.drainReused = true
			w.res.guards |= e.verdict.guards
			for _, viol := range e.verdict.violations {
				w.res.violations = append(w.res.violations, viol)
				w.res.violated[viol.inv] = true
			}
			return nil
		}
		// The verdict is what the drain and the judgement add: their
		// violations, and the guards that refused a write during them.
		before, ordering := len(w.res.violations), w.res.guards
		w.res.guards = 0
		defer func() {
			v := drainVerdict{violations: append([]exploreViolation(nil), w.res.violations[before:]...), guards: w.res.guards}
			w.res.guards |= ordering
			cache.settle(e, v, err == nil)
		}()
	}
	if err := w.drain(ctx); err != nil {
		return err
	}
	return w.judgeFinal(ctx)
}

// drainKey is everything the drain and the judgement after it depend on:
// the durable rows, with clock times reduced to what the drain can tell
// (whether each lease is live; in-flight deliveries all become ready at
// the drain's first redelivery), and the highest projection version the
// observer saw. The ordering's instances stop before the drain, so their
// memory is not part of it. Two orderings with the same key get the same
// drain, step for step, but for the clock times it prints.
func (w *exploreWorld) drainKey(ctx context.Context, evs []store.Event, offers []store.BrokerOffer, ds []store.BrokerDelivery) (string, error) {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "event %s token %d delivered %t live %t;", e.ID, e.Token, e.Delivered, !e.Delivered && e.LeaseUntil > w.p.now())
	}
	for _, o := range offers {
		fmt.Fprintf(&b, "offer %d %s dropped %t;", o.OfferID, o.EventID, o.Dropped)
	}
	for _, d := range ds {
		fmt.Fprintf(&b, "delivery %d %s %s %d;", d.OfferID, d.Consumer, d.State, d.DeliveryCount)
	}
	inbox, err := w.p.audit.ConsumedEvents(ctx)
	if err != nil {
		return "", err
	}
	for _, c := range inbox {
		fmt.Fprintf(&b, "consumed %s %s;", c.Consumer, c.EventID)
	}
	accounts, err := w.p.audit.Accounts(ctx)
	if err != nil {
		return "", err
	}
	for _, a := range accounts {
		fmt.Fprintf(&b, "account %s %d;", a.ID, a.CreditCents)
	}
	projs, err := w.p.audit.Projections(ctx)
	if err != nil {
		return "", err
	}
	for _, pr := range projs {
		fmt.Fprintf(&b, "projection %s %d %s;", pr.EntityID, pr.Version, pr.State)
	}
	fmt.Fprintf(&b, "highest version seen %d", w.maxVersion)
	return b.String(), nil
}
