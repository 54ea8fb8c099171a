package cast

import (
	"context"
	"fmt"
	"sort"

	"github.com/outboxlab/outboxlab/failpoint"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/store"
)

// This file holds what the reports of sessions 18 to 20 show about a
// pipeline: its ledgers, its durable state, the injected faults and the
// statements a lesson teaches.

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

// EffectEntry is one line of the consumer effect ledger: a delivery an
// instance applied, and whether a business effect committed.
type EffectEntry struct {
	Seq      int
	Tick     int64
	Instance string
	Consumer string
	Design   string // the consumer design's name
	OfferID  int64
	Receipt  int64
	Event    string
	Applied  bool
	Result   string
	Busy     int
}

// AckEntry is one line of the consumer acknowledgement ledger.
type AckEntry struct {
	Seq      int
	Tick     int64
	Instance string
	OfferID  int64
	Receipt  int64
	Rows     *int64 // what the ack changed at the broker; nil: it never got there
	Result   string
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

func (l rowLabels) cells(p *Pipeline, c ...any) []any {
	if l {
		return append([]any{p.Label}, c...)
	}
	return c
}

// DeliveryLedgers renders the ledgers of one or more pipelines, each kind
// in its own table; with several pipelines, a first column names the row.
func DeliveryLedgers(ps []*Pipeline) []lab.Table {
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
			claims.AddRow(l.cells(p, c.seq, TickClock(c.tick), c.relay, c.event, string(c.outcome), tokenCell(c.token), clockCell(c.until), c.heldBy)...)
		}
		for _, s := range p.sends {
			sends.AddRow(l.cells(p, s.seq, TickClock(s.tick), s.relay, s.event, s.token, s.sentAs, s.offerID, s.answer)...)
		}
		for _, c := range p.completions {
			completions.AddRow(l.cells(p, c.seq, TickClock(c.tick), c.relay, c.event, c.token, c.guard, c.rows, c.result)...)
		}
		for _, e := range p.effects {
			effects.AddRow(l.cells(p, e.Seq, TickClock(e.Tick), e.Instance, e.Consumer, e.Design, e.OfferID, e.Receipt, e.Event, e.Applied, e.Result, e.Busy)...)
		}
		for _, a := range p.acks {
			acks.AddRow(l.cells(p, a.Seq, TickClock(a.Tick), a.Instance, a.OfferID, a.Receipt, a.Result)...)
		}
		p.mu.Unlock()
	}
	for _, p := range ps {
		effects.Interleaved = effects.Interleaved || p.Concurrent
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
	return TickClock(t)
}

// storedTickCell prints an outbox_events time, which that table keeps as a
// logical tick: the clock time, then the integer the sqlite3 shell shows;
// "-" when the column is NULL (set is false).
func storedTickCell(t int64, set bool) any {
	if !set {
		return nil
	}
	return fmt.Sprintf("%s (%d)", TickClock(t), t)
}

// DeliveryState renders the durable state of one or more pipelines, read
// from their databases: outbox events, the broker's offers (its own
// ledger), deliveries, dead letters, the inbox, accounts and projections.
func DeliveryState(ctx context.Context, ps []*Pipeline) ([]lab.Table, error) {
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
	if name := ps[0].BrokerName; name != "" {
		// A real broker keeps no broker tables: these are its answers, as
		// the lab's adapter recorded them (dropped: the publish ack's
		// duplicate flag; delivery_count: the delivery count it reported).
		offers.Title, offers.Note = "Ledger: broker offers ("+name+"'s answers)", "Every send and "+name+"'s answer: accepted, or dropped as a duplicate by its own window."
		deliveries.Title, deliveries.Note = "Final state: deliveries ("+name+"'s answers)", "Per consumer: how often "+name+" delivered each offer and whether an ack took."
		dead.Title, dead.Note = "Final state: dead letters ("+name+")", "The dead-letter stream, after its retention purge."
	}
	inbox := lab.Table{Title: "Final state: consumed_events (the inbox)", Note: "One row per (consumer, event_id) whose effect committed, after any retention purge.",
		Columns: l.columns("consumer", "event_id", "consumed_at")}
	accounts := lab.Table{Title: "Final state: accounts", Note: "Each consumer credits its own row, so the designs can be compared.",
		Columns: l.columns("id", "credit_cents")}
	projections := lab.Table{Title: "Final state: projections", Note: "Each projection's row as the run left it: the version and state the consumers' updates reached.", Columns: l.columns("entity_id", "version", "state", "updated_at")}
	for _, p := range ps {
		db := p.Audit
		evs, err := store.NewRelay(db, store.RelayLesson).Events(ctx)
		if err != nil {
			return nil, err
		}
		for _, e := range evs {
			events.AddRow(l.cells(p, e.ID, storedTickCell(e.CreatedAt, true), e.Token, e.LockedBy,
				storedTickCell(e.LeaseUntil, e.LockedBy != ""), e.Delivered, storedTickCell(e.DeliveredAt, e.Delivered))...)
		}
		brokerOffers, err := p.Broker().Offers(ctx)
		if err != nil {
			return nil, err
		}
		for _, o := range brokerOffers {
			offers.AddRow(l.cells(p, o.OfferID, o.EventID, o.OfferedBy, o.OfferedAt, o.Dropped, o.Payload)...)
		}
		ds, err := p.Broker().Deliveries(ctx)
		if err != nil {
			return nil, err
		}
		for _, d := range ds {
			deliveries.AddRow(l.cells(p, d.OfferID, d.Consumer, d.State, d.DeliveryCount, d.DeliveredAt, d.AckedAt)...)
		}
		dls, err := p.Broker().DeadLetters(ctx)
		if err != nil {
			return nil, err
		}
		for _, d := range dls {
			dead.AddRow(l.cells(p, d.ID, d.OfferID, d.Consumer, d.EventID, d.DeliveryCount, d.DeadLetteredAt)...)
		}
		ces, err := p.Consumers().ConsumedEvents(ctx)
		if err != nil {
			return nil, err
		}
		for _, c := range ces {
			inbox.AddRow(l.cells(p, c.Consumer, c.EventID, c.ConsumedAt)...)
		}
		as, err := p.Consumers().Accounts(ctx)
		if err != nil {
			return nil, err
		}
		for _, a := range as {
			accounts.AddRow(l.cells(p, a.ID, a.CreditCents)...)
		}
		prs, err := p.Consumers().Projections(ctx)
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

// FaultTable lists the faults a plan injected, in order.
func FaultTable(plans map[string]*failpoint.Plan) lab.Table {
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

// PipelineSQL is the SQL of the relay → broker → consumer pipeline.
func PipelineSQL(extra ...store.Stmt) []store.Stmt {
	rel, b, c := store.RelayLesson, store.BrokerLesson, store.ConsumerLesson
	return append([]store.Stmt{rel.SelectNext, rel.Claim, rel.Complete, b.Offer, b.SelectNext, b.MarkDelivered,
		b.Ack, b.Redeliver, c.Record, c.Credit}, extra...)
}

// FinishDelivery fills in what every report of sessions 18 to 20 shows:
// schema, timeline, ledgers, durable state and injected faults.
func FinishDelivery(ctx context.Context, r *lab.Result, ps []*Pipeline, plans map[string]*failpoint.Plan) error {
	schema, err := ps[0].Audit.Schema(ctx)
	if err != nil {
		return err
	}
	r.Schema = schema
	r.Timeline = ps[0].Timeline.Events()
	r.Tables = append(r.Tables, DeliveryLedgers(ps)...)
	state, err := DeliveryState(ctx, ps)
	if err != nil {
		return err
	}
	r.Tables = append(r.Tables, state...)
	if ft := FaultTable(plans); len(ft.Rows) > 0 {
		r.Tables = append(r.Tables, ft)
	}
	jetStreamReport(r, ps)
	return nil
}
