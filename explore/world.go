package explore

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/clock"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/store"
)

// This file holds one ordering of the interleaving explorer: its world (a
// fresh database, the relays, the consumer, the scenario clock), the steps
// its actions run through the store, the drain that follows and the
// judgement of the invariants on durable state. The alphabet, the events
// and the invariants are in model.go.

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
	// actor is the instance whose write broke the invariant, where one
	// write did (a stale completion's relay); "" otherwise.
	actor string
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

// Relay is a relay instance as the explorer drives it: in the lab's
// process, or a child process (see [Options.Relays]).
type Relay interface {
	cast.Relay
	// Holding is the claim the instance holds in memory.
	Holding() store.EventClaim
	// Crash kills the instance between two of its steps, holding what
	// held says, with a CRASH line on the timeline.
	Crash(held string) error
}

// RelayStarter starts relay name on p's database, with a start line on
// p's timeline.
type RelayStarter func(ctx context.Context, p *cast.Pipeline, name string) (Relay, error)

// StartInProcess starts the relay in the lab's process: its crash closes
// its connection and drops its memory.
func StartInProcess(ctx context.Context, p *cast.Pipeline, name string) (Relay, error) {
	inst, err := p.StartRelay(ctx, name)
	if err != nil {
		return nil, err
	}
	return inProcessRelay{inst}, nil
}

// inProcessRelay is a relay instance in the lab's process.
type inProcessRelay struct{ *cast.RelayInstance }

func (r inProcessRelay) Holding() store.EventClaim { return r.Claim }

func (r inProcessRelay) Crash(held string) error {
	r.RelayInstance.Crash(held + "; connection closed, memory dropped")
	return nil
}

// exploreRelay is a relay of the ordering: an instance (opened on its first
// step) and what it holds in memory.
type exploreRelay struct {
	name    string
	inst    Relay
	holding bool // it holds a claim it has not finished
	sent    bool
	done    bool // completed
	crashed bool
}

// exploreConsumer is a consumer of the ordering: the cast's consumer
// instance (opened on its first delivery), and whether it has applied the
// delivery it holds.
type exploreConsumer struct {
	name     string
	inst     *cast.ConsumerInstance
	consumed bool
}

// held is the delivery the consumer holds; Found is false when none.
func (c *exploreConsumer) held() store.Delivery {
	if c.inst == nil {
		return store.Delivery{}
	}
	return c.inst.Held()
}

// exploreWorld is one ordering's world.
type exploreWorld struct {
	p          *cast.Pipeline
	startRelay RelayStarter
	design     Design
	relays     [2]*exploreRelay
	consumer   *exploreConsumer
	crashes    int
	res        *orderingResult
	maxVersion int64 // the highest projection version observed so far
}

// newExploreWorld opens the observer on a fresh database at path; its
// relays start with start (nil: in the lab's process).
func newExploreWorld(ctx context.Context, open cast.Opener, path string, design Design, start RelayStarter, tl *lab.Timeline) (*exploreWorld, error) {
	audit, err := open(ctx, path)
	if err != nil {
		return nil, err
	}
	p := &cast.Pipeline{Path: path, Open: open, Audit: audit, Clock: clock.NewManual(cast.LessonStart), Timeline: tl}
	p.SQL = design.sql()
	if start == nil {
		start = StartInProcess
	}
	return &exploreWorld{
		p:          p,
		startRelay: start,
		design:     design,
		relays:     [2]*exploreRelay{{name: cast.RelayA}, {name: cast.RelayB}},
		consumer:   &exploreConsumer{name: exploreConsumerName},
		res:        &orderingResult{},
	}, nil
}

// close closes every connection still open.
func (w *exploreWorld) close() {
	for _, r := range w.relays {
		if r.inst != nil {
			_ = r.inst.Close(context.Background()) // a cleanup: a child's end was checked at the drain
		}
	}
	w.consumer.close()
	w.p.Close()
}

// discard throws the ordering's scratch database away. Its files are
// unlinked before the connections close where the system allows it (on
// Windows it does not), so SQLite's checkpoint on the last close (it copies
// the WAL into the database file and syncs it) costs no disk sync. Only for
// scratch files: a database meant to be read again is closed with close.
func (w *exploreWorld) discard() error {
	early := store.RemoveFiles(w.p.Path)
	w.close()
	if early != nil {
		return store.RemoveFiles(w.p.Path)
	}
	return nil
}

func (c *exploreConsumer) close() {
	if c.inst != nil {
		_ = c.inst.Close(context.Background()) // in the lab's process: closing its connection reports nothing to act on
	}
}

// enabled lists the actions that make sense now, in alphabet order.
func (w *exploreWorld) enabled(s cast.OutboxState, b cast.BrokerState) []exploreAction {
	var out []exploreAction
	for i, r := range w.relays {
		base := actClaimA + exploreAction(i)*relayActions
		if r.crashed {
			continue
		}
		if !r.holding && s.Claimable {
			out = append(out, base+actClaimA)
		}
		sendReady, completeReady := !r.sent, r.sent && !r.done
		if w.design.CompleteBeforeSend {
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
	if s.LiveLease {
		out = append(out, actExpire)
	}
	c, held := w.consumer, w.consumer.held()
	if !held.Found && b.Deliverable {
		out = append(out, actDeliver)
	}
	if held.Found && !c.consumed {
		out = append(out, actConsume)
	}
	if held.Found && c.consumed {
		out = append(out, actAck, actAckLost)
	}
	if len(b.InFlight) > 0 {
		out = append(out, actRedeliver)
	}
	return out
}

// beginStep starts recording a step; the clock moves one step forward.
func (w *exploreWorld) beginStep(label, action string) int {
	w.p.SetNow(w.p.Now() + exploreStep)
	w.res.steps = append(w.res.steps, exploreStepRecord{label: label, action: action})
	return len(w.p.Timeline.Events())
}

// endStep attaches the timeline events the step produced, and the clock
// as the step left it.
func (w *exploreWorld) endStep(from int) {
	st := &w.res.steps[len(w.res.steps)-1]
	st.events = w.p.Timeline.Events()[from:]
	st.at = cast.TickClock(w.p.Now())
}

// violate records a broken invariant at the current step.
func (w *exploreWorld) violate(inv exploreInvariant, detail string) {
	w.violateBy(inv, "", detail)
}

// violateBy is [exploreWorld.violate] for a violation one instance's write
// made: actor names it.
func (w *exploreWorld) violateBy(inv exploreInvariant, actor, detail string) {
	i := len(w.res.steps) - 1
	w.res.steps[i].violation = append(w.res.steps[i].violation, fmt.Sprintf("VIOLATED %q: %s", invariantInfo[inv].name, detail))
	w.res.violations = append(w.res.violations, exploreViolation{inv: inv, detail: detail, actor: actor})
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
		expired, err := w.p.ExpireLeases(ctx)
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
		inst, err := w.startRelay(ctx, w.p, r.name)
		if err != nil {
			return err
		}
		r.inst = inst
	}
	// The explorer chose the claim because durable state showed a claimable
	// event: the store disagreeing is a bug, not an outcome.
	if err := cast.MustClaim(ctx, r.inst); err != nil {
		return err
	}
	r.holding, r.sent, r.done = true, false, false
	return nil
}

func (w *exploreWorld) send(ctx context.Context, r *exploreRelay) error {
	if _, err := r.inst.Send(ctx); err != nil {
		return err
	}
	r.sent = true
	if w.design.CompleteBeforeSend {
		r.holding = false // its last step for this claim
	}
	return nil
}

// complete runs the relay's completion between two reads of the row, so
// the stale-completion invariant is judged on durable state: the token the
// row held just before, and whether the completion published it.
func (w *exploreWorld) complete(ctx context.Context, r *exploreRelay) error {
	id, token := r.inst.Holding().EventID, r.inst.Holding().Token
	before, _, err := store.NewRelay(w.p.Audit, store.RelayLesson).EventByID(ctx, id)
	if err != nil {
		return err
	}
	rows, err := r.inst.Complete(ctx)
	if err != nil {
		return err
	}
	if rows == 0 {
		w.res.guards |= guardCompletion
	}
	after, _, err := store.NewRelay(w.p.Audit, store.RelayLesson).EventByID(ctx, id)
	if err != nil {
		return err
	}
	if !before.Delivered && after.Delivered && token != before.Token {
		w.violateBy(invStaleCompletion, r.name, fmt.Sprintf("%s published %s with token %d while the row's latest token was %d", r.name, id, token, before.Token))
	}
	r.done = true
	if !w.design.CompleteBeforeSend {
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
	c := r.inst.Holding()
	if err := r.inst.Crash(fmt.Sprintf("holding %s with token %d (%s)", c.EventID, c.Token, progress)); err != nil {
		return err
	}
	r.holding, r.crashed = false, true
	w.crashes++
	return nil
}

// deliver opens the consumer on its first delivery, then has it take the
// next delivery.
func (w *exploreWorld) deliver(ctx context.Context, c *exploreConsumer) error {
	if c.inst == nil {
		design := w.design.consumerDesign()
		inst, err := w.p.OpenConsumer(ctx, c.name, exploreConsumerGroup, design)
		if err != nil {
			return err
		}
		c.inst = inst
		w.p.Event(lab.KindNote, c.name, "start", fmt.Sprintf("consumer %s (%s), on its own connection", exploreConsumerGroup, design.Name))
	}
	d, err := c.inst.Deliver(ctx)
	if err != nil {
		return err
	}
	if !d.Found {
		return fmt.Errorf("explore: the broker delivered nothing to %s although an offer was deliverable", c.name)
	}
	c.consumed = false
	w.p.Add(lab.Event{Kind: lab.KindDeliver, Subject: d.EventID, Offer: d.OfferID, To: c.name, Actor: "broker", Action: "deliver",
		Detail: fmt.Sprintf("offer %d (%s) to %s: delivery %d", d.OfferID, d.EventID, c.name, d.Receipt)})
	return nil
}

// consume applies the held delivery: the credit (inbox insert and credit in
// one transaction, or the naive credit), then the projection. The observer
// then reads the projection back, so monotonicity is judged on durable state.
func (w *exploreWorld) consume(ctx context.Context, c *exploreConsumer) error {
	pl, err := c.inst.HeldPayload()
	if err != nil {
		return err
	}
	if pl.Credits() {
		if err := w.credit(ctx, c, pl); err != nil {
			return err
		}
	}
	if err := w.project(ctx, c, pl); err != nil {
		return err
	}
	c.consumed = true
	return w.judgeProjection(ctx)
}

// credit is the consume's credit, noting the inbox guard when it refused a
// duplicate.
func (w *exploreWorld) credit(ctx context.Context, c *exploreConsumer, pl cast.Payload) error {
	account, e, err := c.inst.Credit(ctx, pl)
	if err != nil {
		return err
	}
	result := fmt.Sprintf("credited %d cents to %s", pl.CreditCents, account)
	switch {
	case w.design.naiveConsumer():
		result += " (no inbox)"
	case e.Applied:
		result += " (inbox row added in the same transaction)"
	default:
		result = "duplicate: the inbox insert added 0 rows, no credit"
		w.res.guards |= guardInbox
	}
	c.inst.RecordEffect(e.Applied, result, e.Stats.BusyRetries)
	return nil
}

// project is the consume's projection, noting the version guard when it
// ignored an older version.
func (w *exploreWorld) project(ctx context.Context, c *exploreConsumer, pl cast.Payload) error {
	f, err := c.inst.Project(ctx, pl)
	if err != nil {
		return err
	}
	projected := fmt.Sprintf("projection %s set to %s at version %d", pl.Entity, pl.State, pl.Version)
	if f.Rows == 0 {
		w.res.guards |= guardVersion
		projected = fmt.Sprintf("projection unchanged: version %d (%s) is not newer (0 rows)", pl.Version, pl.State)
	}
	d := c.inst.Held()
	kind := lab.KindEffect
	if f.Rows == 0 {
		kind = lab.KindDedup
	}
	w.p.Add(lab.Event{Kind: kind, Subject: d.EventID, Offer: d.OfferID, Rows: lab.RowsOf(f.Rows), Actor: c.name, Action: "project",
		Detail: fmt.Sprintf("offer %d delivery %d of %s: %s", d.OfferID, d.Receipt, d.EventID, projected)})
	return nil
}

// judgeProjection reads the projection back on the observer's connection:
// its version must not be below the highest one seen before.
func (w *exploreWorld) judgeProjection(ctx context.Context) error {
	projs, err := w.p.Consumers().Projections(ctx)
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

// ack acknowledges the held delivery, noting the receipt guard when the
// ack came too late.
func (w *exploreWorld) ack(ctx context.Context, c *exploreConsumer) error {
	rows, err := c.inst.Ack(ctx)
	if err != nil {
		return err
	}
	result, refusal := "acked (1 row)", lab.Refusal("")
	if rows == 0 {
		w.res.guards |= guardReceipt
		if _, refusal, err = c.inst.RefusedAck(ctx); err != nil {
			return err
		}
		result = "late ack: 0 rows (no longer in flight under this receipt)"
	}
	c.inst.RecordAck(&rows, refusal, result)
	c.consumed = false
	return nil
}

// loseAck: the ack never reaches the broker; the consumer believes it
// acked and is free.
func (w *exploreWorld) loseAck(c *exploreConsumer) error {
	c.inst.RecordAck(nil, "", "ack LOST on the way to the broker: the delivery stays in flight")
	c.consumed = false
	return nil
}

// redeliver lets the visibility timeout of every in-flight delivery run
// out on the clock; the broker makes them ready again.
func (w *exploreWorld) redeliver(ctx context.Context) error {
	n, r, err := w.p.RedeliverInFlight(ctx, exploreConsumerGroup, exploreVisibility, 0)
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("explore: redeliver chosen with nothing in flight")
	}
	w.p.Event(lab.KindNote, "broker", "redeliver", fmt.Sprintf("the %s visibility timeout ran out on %d unacknowledged deliveries: %d ready again",
		cast.DurationText(exploreVisibility), n, r.Ready))
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
	w.p.Event(lab.KindNote, "scenario", "end of ordering", "Relay-A, Relay-B and the consumer stop for good: what they held in memory is lost; the drain starts")
	for _, r := range w.relays {
		if r.inst != nil {
			if err := r.inst.Close(ctx); err != nil {
				return err
			}
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
			_ = rec.inst.Close(ctx) // the drain's verdict stands; the run's end reaps a child anyway
		}
	}()
	claim := drainStep{"recovery claim", func() error { return w.claim(ctx, rec) }}
	send := drainStep{"recovery send", func() error { return w.send(ctx, rec) }}
	complete := drainStep{"recovery complete", func() error { return w.complete(ctx, rec) }}
	publish := []drainStep{claim, send, complete}
	if w.design.CompleteBeforeSend {
		publish = []drainStep{claim, complete, send}
	}
	expire := drainStep{"expire", func() error { _, err := w.p.ExpireLeases(ctx); return err }}
	err := w.p.DrainRelaysBy(ctx, func(m cast.RelayMove) error {
		if m == cast.Expire {
			return steps(expire)
		}
		return steps(publish...)
	})
	if err != nil {
		return err
	}
	return w.drainConsumer(ctx, steps)
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
	return w.p.DrainConsumerBy(ctx, exploreConsumerGroup, func(m cast.ConsumerMove) error {
		if m == cast.Redeliver {
			return steps(redeliver)
		}
		return steps(take...)
	})
}

// judgeFinal judges the invariants that need the drained, final state:
// at least once and effect at most once.
func (w *exploreWorld) judgeFinal(ctx context.Context) error {
	w.res.steps = append(w.res.steps, exploreStepRecord{label: "end", action: "judge durable state", at: cast.TickClock(w.p.Now())})
	evs, err := store.NewRelay(w.p.Audit, store.RelayLesson).Events(ctx)
	if err != nil {
		return err
	}
	offers, err := w.p.Broker().Offers(ctx)
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
			w.violate(invAtLeastOnce, fmt.Sprintf("%s: %s, published %s", e.ID, lab.Count(int64(accepted[e.ID]), "accepted broker offer", "accepted broker offers"), lab.Cell(e.Delivered)))
		}
	}
	for _, e := range exploreEvents {
		if e.payload.CreditCents == 0 {
			continue
		}
		account := cast.AccountID(exploreConsumerGroup, e.payload.Account)
		credit, err := w.p.Count(ctx, store.AccountCredit.SQL, account)
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
func runExploreOrdering(ctx context.Context, open cast.Opener, path string, template *store.Template, design Design, relays RelayStarter, actions []exploreAction, tl *lab.Timeline, cache *drainCache) (*orderingResult, *exploreWorld, error) {
	if err := template.Restore(ctx, open, path); err != nil {
		return nil, nil, fmt.Errorf("explore: %w", err)
	}
	w, err := newExploreWorld(ctx, open, path, design, relays, tl)
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
	evs, err := store.NewRelay(w.p.Audit, store.RelayLesson).Events(ctx)
	if err != nil {
		return err
	}
	offers, err := w.p.Broker().Offers(ctx)
	if err != nil {
		return err
	}
	ds, err := w.p.Broker().Deliveries(ctx)
	if err != nil {
		return err
	}
	w.res.enabled = w.enabled(w.p.OutboxStateOf(evs), cast.BrokerStateOf(exploreConsumerGroup, offers, ds))
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
		fmt.Fprintf(&b, "event %s token %d delivered %t live %t;", e.ID, e.Token, e.Delivered, !e.Delivered && e.LeaseUntil > w.p.Now())
	}
	for _, o := range offers {
		fmt.Fprintf(&b, "offer %d %s dropped %t;", o.OfferID, o.EventID, o.Dropped)
	}
	for _, d := range ds {
		fmt.Fprintf(&b, "delivery %d %s %s %d;", d.OfferID, d.Consumer, d.State, d.DeliveryCount)
	}
	inbox, err := w.p.Consumers().ConsumedEvents(ctx)
	if err != nil {
		return "", err
	}
	for _, c := range inbox {
		fmt.Fprintf(&b, "consumed %s %s;", c.Consumer, c.EventID)
	}
	accounts, err := w.p.Consumers().Accounts(ctx)
	if err != nil {
		return "", err
	}
	for _, a := range accounts {
		fmt.Fprintf(&b, "account %s %d;", a.ID, a.CreditCents)
	}
	projs, err := w.p.Consumers().Projections(ctx)
	if err != nil {
		return "", err
	}
	for _, pr := range projs {
		fmt.Fprintf(&b, "projection %s %d %s;", pr.EntityID, pr.Version, pr.State)
	}
	fmt.Fprintf(&b, "highest version seen %d", w.maxVersion)
	return b.String(), nil
}
