package cast

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/outboxlab/outboxlab/failpoint"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/store"
)

// This file holds the consumer instance of sessions 18 to 20 and the
// explorer: its designs (statement sets), and the steps it takes on a
// delivery: deliver, apply (credit, project), acknowledge. ConsumeNext
// takes them in a row; the explorer takes them one action at a time.

// ConsumerDesign is how a consumer applies a delivery: the statements it
// runs, and the name the effect ledger prints. A mistake is the lesson's
// statement set with one statement replaced (or, with [store.NoInbox], left
// out); the effect-outside-inbox-tx mistake is the set with a Check
// statement, which the lesson has none of.
type ConsumerDesign struct {
	Name string
	SQL  store.ConsumerSQL
	// Replaces, for a mistake's design, names the lesson's design it
	// stands in for.
	Replaces string
}

// lessonWith is the lesson's consumer statements with change applied.
func lessonWith(change func(s *store.ConsumerSQL)) store.ConsumerSQL {
	s := store.ConsumerLesson
	change(&s)
	return s
}

// The consumer designs of sessions 18 to 20.
var (
	// InboxDesign: inbox insert ON CONFLICT DO NOTHING and the credit in one transaction.
	InboxDesign = ConsumerDesign{Name: "inbox (one transaction)", SQL: store.ConsumerLesson}
	// NaiveDesign: unconditional increment.
	NaiveDesign = ConsumerDesign{Name: "naive (no inbox)", SQL: lessonWith(func(s *store.ConsumerSQL) { s.Record = store.NoInbox }),
		Replaces: InboxDesign.Name}
	// SplitDesign: the effect-outside-inbox-tx mistake.
	SplitDesign = ConsumerDesign{Name: "effect outside inbox tx (MISTAKE)", SQL: lessonWith(func(s *store.ConsumerSQL) { s.Check = store.CheckInboxFirst }),
		Replaces: InboxDesign.Name}
	// VersionedDesign: projection that ignores older versions.
	VersionedDesign = ConsumerDesign{Name: "versioned projection", SQL: store.ConsumerLesson}
	// UnversionedDesign: projection without a version check (MISTAKE).
	UnversionedDesign = ConsumerDesign{Name: "projection without version (MISTAKE)", SQL: lessonWith(func(s *store.ConsumerSQL) { s.Project = store.ProjectLastWriteWins }),
		Replaces: VersionedDesign.Name}
)

// keepsInbox says the design writes the inbox row (the naive one does not).
func (d ConsumerDesign) keepsInbox() bool { return !d.SQL.Record.Omitted() }

// splitsEffect says the design checks the inbox, credits and records the
// inbox row in three transactions (the effect-outside-inbox-tx mistake).
func (d ConsumerDesign) splitsEffect() bool { return d.SQL.Check.SQL != "" }

// ConsumerInstance is one consumer instance: its own connection and, in memory, the
// delivery it is working on. group is the consumer name the broker and the
// inbox know; several instances may share it.
type ConsumerInstance struct {
	p      *Pipeline
	name   string
	group  string
	design ConsumerDesign
	db     *store.DB
	// BeforeEffect, when set, runs once the instance has decided to apply a
	// delivery (for the split mistake: after its inbox check), with the
	// instance's own context; an error stops the delivery. Session 19 puts a
	// barrier there.
	BeforeEffect func(ctx context.Context) error

	delivery store.Delivery
	fired    bool // the after-effect failpoint was passed for this delivery
	ackLost  bool // the ack of this delivery will be lost
}

// OpenConsumer opens a consumer instance of group on its own connection,
// applying deliveries by design, without a timeline line: the explorer
// words its own.
func (p *Pipeline) OpenConsumer(ctx context.Context, name, group string, design ConsumerDesign) (*ConsumerInstance, error) {
	db, err := p.Open(ctx, p.Path)
	if err != nil {
		return nil, err
	}
	return &ConsumerInstance{p: p, name: name, group: group, design: design, db: db}, nil
}

// Consumer is a consumer instance as a lesson's script drives it: a
// [*ConsumerInstance] in the lab's process, or a stand-in for one that
// acts in a child process on its own connection.
type Consumer interface {
	Name() string
	Group() string
	ConsumeNext(ctx context.Context) (bool, error)
	// HoldBeforeEffect has the lab run hold each time the consumer has
	// decided to apply a delivery, before its effect (a barrier, say).
	HoldBeforeEffect(hold func(ctx context.Context) error)
	// Close ends the instance: its connection closed (once); a child
	// process's end reports whether it exited 0.
	Close(ctx context.Context) error
}

// Name is the instance's name, e.g. Consumer-1.
func (c *ConsumerInstance) Name() string { return c.name }

// Group is the consumer group the instance belongs to.
func (c *ConsumerInstance) Group() string { return c.group }

// ConsumerStart is the timeline's word for a consumer instance's start.
func ConsumerStart(group string, design ConsumerDesign) string {
	return fmt.Sprintf("consumer %s, %s, on its own connection", group, design.Name)
}

// StartConsumer starts a consumer instance of group on its own connection,
// applying deliveries by design.
func (p *Pipeline) StartConsumer(ctx context.Context, name, group string, design ConsumerDesign) (*ConsumerInstance, error) {
	c, err := p.OpenConsumer(ctx, name, group, design)
	if err != nil {
		return nil, err
	}
	p.Event(lab.KindNote, name, "start", ConsumerStart(group, design))
	return c, nil
}

// store is the consumer service on the instance's connection, running the
// statements of its design.
func (c *ConsumerInstance) store() *store.Consumer { return store.NewConsumer(c.db, c.design.SQL) }

// Close closes the instance's connection (once).
func (c *ConsumerInstance) Close(context.Context) error {
	if c.db == nil {
		return nil
	}
	err := c.db.Close()
	c.db = nil
	return err
}

// HoldBeforeEffect sets BeforeEffect: hold runs each time the instance has
// decided to apply a delivery, before its effect.
func (c *ConsumerInstance) HoldBeforeEffect(hold func(ctx context.Context) error) {
	c.BeforeEffect = hold
}

// crash kills the instance mid-step: connection closed, delivery
// forgotten. In a child process the pipeline's BeforeCrash reports it first.
func (c *ConsumerInstance) crash(point failpoint.Point) error {
	held := fmt.Sprintf("at %s with offer %d (%s) in memory", point, c.delivery.OfferID, c.delivery.EventID)
	if err := c.p.beforeCrash(c.name, point, c.delivery.EventID, held); err != nil {
		return err
	}
	c.p.Add(lab.Event{Kind: lab.KindCrash, Subject: c.delivery.EventID, Actor: c.name, Action: "CRASH", Detail: held + "; connection closed, memory dropped"})
	_ = c.Close(context.Background()) // a crash reports nothing
	c.delivery = store.Delivery{}
	return failpoint.ErrCrashed
}

// afterEffect passes the after-effect-before-ack point once per delivery.
func (c *ConsumerInstance) afterEffect() error {
	if c.fired {
		return nil
	}
	c.fired = true
	switch c.p.Faults.Fire(failpoint.AfterEffectBeforeAck, c.name, c.delivery.EventID) {
	case failpoint.Crash:
		return c.crash(failpoint.AfterEffectBeforeAck)
	case failpoint.AckLost:
		c.ackLost = true
	}
	return nil
}

// ConsumeNext takes the next delivery, applies it and acknowledges it. It
// reports false when the broker had nothing for this consumer.
func (c *ConsumerInstance) ConsumeNext(ctx context.Context) (bool, error) {
	d, err := c.Deliver(ctx)
	if err != nil || !d.Found {
		return false, err
	}
	if err := c.apply(ctx); err != nil {
		return true, err
	}
	if err := c.afterEffect(); err != nil {
		return true, err
	}
	if c.ackLost {
		c.RecordAck(nil, "", "ack LOST on the way to the broker")
		return true, nil
	}
	rows, err := c.Ack(ctx)
	if err != nil {
		return true, err
	}
	result, refusal := "acked", lab.Refusal("")
	if rows == 0 {
		if result, refusal, err = c.refusedAck(ctx); err != nil {
			return true, err
		}
	}
	c.RecordAck(&rows, refusal, result)
	return true, nil
}

// refusedAck says why the ack of the held delivery changed 0 rows, from
// the delivery read back on the instance's connection: the receipt no
// longer names a delivery in flight (redelivered, acked or given up), or
// the broker holds no such delivery.
func (c *ConsumerInstance) refusedAck(ctx context.Context) (string, lab.Refusal, error) {
	d := c.delivery
	cur, ok, err := c.p.brokerOn(c.db).DeliveryOf(ctx, c.group, d.OfferID)
	switch {
	case err != nil:
		return "", "", fmt.Errorf("ack offer %d: read back: %w", d.OfferID, err)
	case !ok:
		return "refused (0 rows): the broker holds no such delivery", lab.RefusedByGone, nil
	case cur.State == "in_flight" && cur.DeliveryCount != d.Receipt:
		return fmt.Sprintf("refused (0 rows): stale receipt %d; the row reads in_flight, delivery_count %d: "+
			"the broker redelivered offer %d", d.Receipt, cur.DeliveryCount, d.OfferID), lab.RefusedByReceipt, nil
	}
	return fmt.Sprintf("refused (0 rows): no longer in flight; the row reads %s, delivery_count %d", cur.State, cur.DeliveryCount),
		lab.RefusedByReceipt, nil
}

// RefusedAck is why the ack of the held delivery changed 0 rows, read
// back from the broker (see [ConsumerInstance.RecordAck]).
func (c *ConsumerInstance) RefusedAck(ctx context.Context) (string, lab.Refusal, error) {
	return c.refusedAck(ctx)
}

// Deliver is a step: the instance takes the next delivery the broker has
// for its group (the oldest accepted offer it never received, or one ready
// again) and holds it. Found is false when the broker had nothing.
func (c *ConsumerInstance) Deliver(ctx context.Context) (store.Delivery, error) {
	if c.db == nil {
		return store.Delivery{}, failpoint.ErrCrashed
	}
	d, err := c.p.brokerOn(c.db).DeliverNext(ctx, c.group, c.p.Clock.Now())
	if err != nil || !d.Found {
		return d, err
	}
	c.delivery, c.fired, c.ackLost = d, false, false
	return d, nil
}

// Held is the delivery the instance holds; Found is false when it holds none.
func (c *ConsumerInstance) Held() store.Delivery { return c.delivery }

// HeldPayload decodes the held delivery's payload.
func (c *ConsumerInstance) HeldPayload() (Payload, error) {
	var pl Payload
	if err := json.Unmarshal([]byte(c.delivery.Payload), &pl); err != nil {
		return pl, fmt.Errorf("consumer %s: offer %d: %w", c.name, c.delivery.OfferID, err)
	}
	return pl, nil
}

// Credit is a step: the held delivery's credit, run with the design's
// statements: the inbox insert and the credit in one transaction, the credit
// only when the insert added a row (a design with no inbox credits every
// time). It returns the account it credited.
func (c *ConsumerInstance) Credit(ctx context.Context, pl Payload) (string, store.Effect, error) {
	account := AccountID(c.group, pl.Account)
	e, err := c.store().CreditWithInbox(ctx, c.group, c.delivery.EventID, account, pl.CreditCents, c.p.Clock.Now())
	return account, e, err
}

// Project is a step: the held delivery's state at its version, run with
// the design's projection statement. Rows 0 is an expected outcome: the
// lesson's statement ignores a version that is not newer.
func (c *ConsumerInstance) Project(ctx context.Context, pl Payload) (store.Fenced, error) {
	return c.store().Project(ctx, pl.Entity, pl.Version, pl.State, c.p.Clock.Now())
}

// Ack is a step: the instance acknowledges its held delivery under the
// delivery's receipt. Rows 0 is an expected outcome: the delivery was no
// longer in flight under that receipt.
func (c *ConsumerInstance) Ack(ctx context.Context) (int64, error) {
	d := c.delivery
	f, err := c.p.brokerOn(c.db).Ack(ctx, c.group, d.OfferID, d.Receipt, c.p.Clock.Now())
	return f.Rows, err
}

// RecordAck adds what became of the held delivery's acknowledgement to the
// acknowledgement ledger and the timeline: rows is what the ack changed at
// the broker, nil when it never got there (lost on the way: an event of
// kind KindAckLost). An ack that changed 0 rows was turned away by the
// statement's guards, refusal as read back (a stale receipt, or a
// delivery no longer in flight). The instance then holds nothing.
func (c *ConsumerInstance) RecordAck(rows *int64, refusal lab.Refusal, result string) {
	d := c.delivery
	kind := lab.KindAck
	switch {
	case rows == nil:
		kind, refusal = lab.KindAckLost, ""
	case *rows == 0:
		kind = lab.KindFenced
	default:
		refusal = ""
	}
	seq := c.p.Add(lab.Event{Kind: kind, Refusal: refusal, Subject: d.EventID, Offer: d.OfferID, Rows: rows, Actor: c.name, Action: "ack",
		Detail: fmt.Sprintf("offer %d delivery %d: %s", d.OfferID, d.Receipt, result)})
	c.p.AddAck(AckEntry{Seq: seq, Tick: c.p.Now(), Instance: c.name, OfferID: d.OfferID, Receipt: d.Receipt, Rows: rows, Result: result})
	c.delivery = store.Delivery{}
}

// apply runs the instance's design on the held delivery and records the
// effect: a credit, or else the state at a version.
func (c *ConsumerInstance) apply(ctx context.Context) error {
	pl, err := c.HeldPayload()
	switch {
	case err != nil:
		return err
	case !pl.Credits():
		return c.applyVersion(ctx, pl)
	case c.design.splitsEffect():
		return c.applySplit(ctx, pl)
	}
	if err := c.runBeforeEffect(ctx); err != nil {
		return err
	}
	account, e, err := c.Credit(ctx, pl)
	if err != nil {
		return err
	}
	result := fmt.Sprintf("credited %d cents to %s", pl.CreditCents, account)
	switch {
	case c.design.keepsInbox() && e.Applied:
		result += " (inbox row added in the same transaction)"
	case c.design.keepsInbox():
		result = "duplicate: the inbox insert added 0 rows, no credit"
	}
	c.RecordEffect(e.Applied, result, e.Stats.BusyRetries)
	return nil
}

// applySplit is the effect-outside-inbox-tx mistake: check the inbox, apply
// the credit, then record the inbox row, each in its own transaction.
func (c *ConsumerInstance) applySplit(ctx context.Context, pl Payload) error {
	d := c.delivery
	account := AccountID(c.group, pl.Account)
	seen, err := c.store().Check(ctx, c.group, d.EventID)
	if err != nil {
		return err
	}
	if seen {
		c.RecordEffect(false, "duplicate: the inbox check found the row, no credit", 0)
		return nil
	}
	if err := c.runBeforeEffect(ctx); err != nil {
		return err
	}
	e, err := c.store().Credit(ctx, account, pl.CreditCents)
	if err != nil {
		return err
	}
	c.RecordEffect(true, fmt.Sprintf("credited %d cents to %s (inbox row NOT yet written)", pl.CreditCents, account), e.Stats.BusyRetries)
	if err := c.afterEffect(); err != nil {
		return err
	}
	r, err := c.store().Record(ctx, c.group, d.EventID, c.p.Clock.Now())
	if err != nil {
		return err
	}
	c.p.Add(lab.Event{Kind: lab.KindNote, Subject: d.EventID, Rows: lab.RowsOf(r.InboxRows), Actor: c.name, Action: "inbox insert",
		Detail: fmt.Sprintf("%s: %s added, in a transaction of its own", d.EventID, lab.Rows(int64(r.InboxRows)))})
	return nil
}

func (c *ConsumerInstance) applyVersion(ctx context.Context, pl Payload) error {
	if err := c.runBeforeEffect(ctx); err != nil {
		return err
	}
	f, err := c.Project(ctx, pl)
	if err != nil {
		return err
	}
	result := fmt.Sprintf("%s set to %s at version %d", pl.Entity, pl.State, pl.Version)
	if f.Rows == 0 {
		result = fmt.Sprintf("version %d (%s) ignored: the stored version is newer (0 rows)", pl.Version, pl.State)
	}
	c.RecordEffect(f.Rows == 1, result, f.Stats.BusyRetries)
	return nil
}

func (c *ConsumerInstance) runBeforeEffect(ctx context.Context) error {
	if c.BeforeEffect == nil {
		return nil
	}
	return c.BeforeEffect(ctx)
}

// RecordEffect adds what the held delivery did to the business state to
// the effect ledger and the timeline: applied says an effect committed.
func (c *ConsumerInstance) RecordEffect(applied bool, result string, busy int) {
	d := c.delivery
	detail := fmt.Sprintf("offer %d delivery %d of %s: %s", d.OfferID, d.Receipt, d.EventID, result)
	if busy > 0 {
		detail += fmt.Sprintf(" (after %d %s retries)", busy, c.db.Engine().RetriedError())
	}
	e := lab.Event{Kind: lab.KindEffect, Subject: d.EventID, Offer: d.OfferID, Actor: c.name, Service: c.group, Action: "effect", Detail: detail}
	if !applied {
		e.Kind, e.Action = lab.KindDedup, "no effect"
	}
	seq := c.p.Add(e)
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	c.p.effects = append(c.p.effects, EffectEntry{Seq: seq, Tick: c.p.Now(), Instance: c.name, Consumer: c.group, Design: c.design.Name,
		OfferID: d.OfferID, Receipt: d.Receipt, Event: d.EventID, Applied: applied, Result: result, Busy: busy})
}

// Changed lists the statements d runs in place of the lesson consumer's
// ([store.ConsumerLesson]): for a mistake's design, what its mistake is.
func (d ConsumerDesign) Changed() []store.Stmt {
	var out []store.Stmt
	mine, lesson := reflect.ValueOf(d.SQL), reflect.ValueOf(store.ConsumerLesson)
	for i := range mine.NumField() {
		s, ok := mine.Field(i).Interface().(store.Stmt)
		if ok && s.Name != lesson.Field(i).Interface().(store.Stmt).Name {
			out = append(out, s)
		}
	}
	return out
}
