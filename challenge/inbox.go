package challenge

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/clock"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/relayproto"
	"github.com/outboxlab/outboxlab/store"
)

// The inbox consumer challenge's setup: the service its instances share,
// the account they credit, how long a delivery stays invisible before the
// broker hands it out again.
const (
	inboxService    = "credits"
	inboxAccount    = "ACC-1"
	inboxVisibility = time.Second
)

// inboxEvents are the credits the broker holds for the consumers: each
// event's payload names the account and the amount.
var inboxEvents = []struct {
	id     string
	amount int64
}{{"E-1", 2500}, {"E-2", 4200}, {"E-3", 1999}, {"E-4", 12000}, {"E-5", 750}, {"E-6", 3100}}

// InboxConsumer is the inbox consumer: apply each event's credit at most
// once, however often the broker delivers it, by recording the event in the
// inbox in the transaction of the effect, and acknowledge it after.
var InboxConsumer = Challenge{
	Name:   "inbox-consumer",
	Title:  "The inbox consumer: an effect at most once under redelivery",
	Lesson: "session-18-lease-expiry-after-send",
	Brief: "The broker holds credits for account ACC-1 (payload {\"account\":\"ACC-1\",\"amountCents\":N}); the " +
		"instances are one service (hello's settings: service), sharing its inbox, consumed_events (session 18's " +
		"table). Each instance loops: receive the next delivery (op receive; none: wait and try again); in one " +
		"transaction, record (service, event_id) in consumed_events and, only if that inserted a row, add the amount " +
		"to accounts.credit_cents; commit; then ack the delivery (op ack, its offer). The broker delivers again a " +
		"delivery not acked within visibility_ms, to any instance: an event's effect must still happen once. It " +
		"never stops on its own.",
	Tables:   []string{"consumed_events", "accounts"},
	Schema:   []store.Migration{store.BrokerInbox},
	Settings: map[string]any{"service": inboxService, "visibility_ms": inboxVisibility.Milliseconds()},
	Horizon:  time.Minute,
	Explored: "two-consumers",
	Checks: []lesson.CheckDoc{
		{Name: "credit_cents", About: "the account's credit: every event's amount, each once"},
		{Name: "events_recorded", About: "events in the service's inbox"},
		{Name: "effects_applied_twice", About: "events whose credit was applied more than once"},
		{Name: "effects_without_inbox", About: "credits committed in a transaction that recorded no event in the inbox"},
		{Name: "deliveries_not_acked", About: "deliveries the broker still waits an ack for when the run ends"},
		{Name: "redeliveries", About: "deliveries made again, in a sequence where no fault makes the broker deliver again"},
	},
	OnceChecks: []string{"redeliveries"},
	Sequences: []Sequence{
		{Name: "two-consumers", About: "Consumer-A and Consumer-B, each its own process and connection, consume the service's deliveries",
			Instances: []string{"Consumer-A", "Consumer-B"}},
		{Name: "crash-after-effect", About: "the first consumer to commit an effect is killed (SIGKILL) right after it, before its ack: the broker delivers the event again",
			Instances: []string{"Consumer-A", "Consumer-B"}, AtLeastOnce: true,
			Faults: []Fault{{At: Boundary{Op: relayproto.OpCommit, Commits: "effect", Nth: 1}, Do: Kill}}},
		{Name: "crash-after-ack", About: "the first consumer to ack is killed (SIGKILL) right after its ack reaches the broker",
			Instances: []string{"Consumer-A", "Consumer-B"}, AtLeastOnce: true,
			Faults: []Fault{{At: Boundary{Op: relayproto.OpAck, Nth: 1}, Do: Kill}}},
		{Name: "lost-ack", About: "the first ack never reaches the broker (its reply says the outcome is unknown): the broker delivers the event again",
			Instances: []string{"Consumer-A", "Consumer-B"}, AtLeastOnce: true,
			Faults: []Fault{{At: Boundary{Op: relayproto.OpAck, Nth: 1}, Do: DropRequest}}},
		{Name: "concurrent-duplicate", About: "the first receive is held past the visibility timeout: the broker hands the same event to the other consumer while the first still holds it",
			Instances: []string{"Consumer-A", "Consumer-B"}, AtLeastOnce: true,
			Faults: []Fault{{At: Boundary{Op: relayproto.OpReceive, Nth: 1}, Do: Hold, For: 2 * inboxVisibility}}},
	},
	world: newInboxWorld,
}

// inboxWorld is the inbox consumer challenge's world: the offers, the
// lab's broker and its consumers' receipts.
type inboxWorld struct {
	db     *store.DB
	broker *store.LabBroker
	mu     sync.Mutex
	// receipts: instance -> offer -> the delivery number it received,
	// which its ack presents.
	receipts     map[string]map[int64]int64
	redeliveries int64
	// never and twice are the events the judge found credited never and
	// more than once.
	never, twice []string
}

func newInboxWorld(ctx context.Context, env *lesson.Env, _ Sequence) (rules, []lab.Event, error) {
	db, err := env.Open(ctx, env.DatabasePath())
	if err != nil {
		return nil, nil, err
	}
	fail := func(err error) (rules, []lab.Event, error) { db.Close(); return nil, nil, err }
	if err := db.Migrate(ctx, store.RelayEvents, store.BrokerInbox, store.LabAudit, store.AuditInbox); err != nil {
		return fail(err)
	}
	if err := store.NewConsumer(db, store.ConsumerLesson).OpenAccount(ctx, inboxAccount); err != nil {
		return fail(err)
	}
	broker := store.NewBroker(db, store.BrokerLesson)
	var seeded []lab.Event
	for i, e := range inboxEvents {
		at := cast.LessonStart.Add(time.Duration(i-len(inboxEvents)) * time.Second)
		payload := fmt.Sprintf(`{"account":%q,"amountCents":%d}`, inboxAccount, e.amount)
		o, err := broker.Offer(ctx, e.id, payload, "Relay", at, 0)
		if err != nil {
			return fail(err)
		}
		seeded = append(seeded, lab.Event{At: clock.Format(at), Kind: lab.KindOffer, Subject: e.id, Actor: "Relay", Action: "send",
			Offer: o.OfferID, Detail: fmt.Sprintf("the relay sent %s (%d cents for %s): offer %d", e.id, e.amount, inboxAccount, o.OfferID)})
	}
	if _, err := db.TagAudit(ctx, cast.Checkout, clock.Format(cast.LessonStart)); err != nil {
		return fail(err)
	}
	return &inboxWorld{db: db, broker: broker, receipts: map[string]map[int64]int64{}}, seeded, nil
}

func (iw *inboxWorld) close() error { return iw.db.Close() }

func (iw *inboxWorld) providerStatus(string, string) (string, string, bool) { return "", "", false }

func (iw *inboxWorld) send(context.Context, string, string, string, time.Time) (int64, error) {
	return 0, errNoBroker
}

// receive first makes the service's deliveries whose visibility has run
// out ready again, then hands instance the next one.
func (iw *inboxWorld) receive(ctx context.Context, instance string, now time.Time) (*relayproto.Delivery, error) {
	r, err := iw.broker.RedeliverUnacked(ctx, inboxService, now, inboxVisibility, 1000)
	if err != nil {
		return nil, err
	}
	d, err := iw.broker.DeliverNext(ctx, inboxService, now)
	if err != nil || !d.Found {
		return nil, err
	}
	iw.mu.Lock()
	defer iw.mu.Unlock()
	iw.redeliveries += r.Ready
	if iw.receipts[instance] == nil {
		iw.receipts[instance] = map[int64]int64{}
	}
	iw.receipts[instance][d.OfferID] = d.Receipt
	return &relayproto.Delivery{Offer: d.OfferID, EventID: d.EventID, Payload: d.Payload, Attempt: int(d.Receipt)}, nil
}

// ack presents the receipt of instance's own delivery of offer: a
// delivery the broker has since handed out again is not taken.
func (iw *inboxWorld) ack(ctx context.Context, instance string, offer int64, now time.Time) (bool, error) {
	iw.mu.Lock()
	receipt := iw.receipts[instance][offer]
	iw.mu.Unlock()
	if receipt == 0 {
		return false, nil // never delivered to it
	}
	f, err := iw.broker.Ack(ctx, inboxService, offer, receipt, now)
	return f.Rows == 1, err
}

// classify: an effect is a credit.
func (iw *inboxWorld) classify(c store.AuditEntry) string {
	if c.Table == "accounts" && c.Op == "UPDATE" {
		return "effect"
	}
	return ""
}

// done: every offer is acked.
func (iw *inboxWorld) done(ctx context.Context) (bool, error) {
	ds, err := iw.broker.Deliveries(ctx)
	if err != nil {
		return false, err
	}
	acked := 0
	for _, d := range ds {
		if d.State == "acked" {
			acked++
		}
	}
	return acked == len(inboxEvents), nil
}

func (iw *inboxWorld) describe(changes []store.AuditEntry) []lab.Event {
	var out []lab.Event
	for _, c := range changes {
		switch {
		case c.Table == "consumed_events" && c.Op == "INSERT":
			out = append(out, lab.Event{Kind: lab.KindDedup, Subject: c.Key, Service: inboxService, Action: "inbox",
				Detail: fmt.Sprintf("recorded %s in %s's inbox", c.Key, c.NewOwner)})
		case c.Table == "accounts" && c.Op == "UPDATE":
			out = append(out, lab.Event{Kind: lab.KindEffect, Subject: c.Key, Service: inboxService, Action: "credit",
				Detail: fmt.Sprintf("%s's credit %s -> %s cents", c.Key, c.OldState, c.NewState)})
		default:
			out = append(out, lab.Event{Kind: lab.KindNote, Subject: c.Key, Action: c.Op, Detail: describeChange(c)})
		}
	}
	// A credit's event is the inbox row of its transaction.
	for i := range out {
		if out[i].Kind == lab.KindEffect {
			for _, o := range out {
				if o.Kind == lab.KindDedup {
					out[i].Subject = o.Subject
				}
			}
		}
	}
	return out
}

func (iw *inboxWorld) summary(m func(string) string) string {
	return fmt.Sprintf("credit %s cents, each of %s events once, %s redeliveries, %s deliveries left unacked",
		m("credit_cents"), m("events_recorded"), m("redeliveries"), m("deliveries_not_acked"))
}

func (iw *inboxWorld) expected(Sequence) map[string]float64 {
	var sum int64
	for _, e := range inboxEvents {
		sum += e.amount
	}
	return map[string]float64{"credit_cents": float64(sum), "events_recorded": float64(len(inboxEvents)), "effects_applied_twice": 0,
		"effects_without_inbox": 0, "deliveries_not_acked": 0, "redeliveries": 0}
}

// judge measures the run from the database: the account's credit, the
// inbox, the broker's deliveries, and the audit of committed changes: a
// commit's credits belong to the event its inbox row names.
func (iw *inboxWorld) judge(ctx context.Context, w *world, r *lab.Result) error {
	credit, err := iw.db.Count(ctx, store.AccountCredit.SQL, inboxAccount)
	if err != nil {
		return err
	}
	recorded, err := iw.db.Count(ctx, store.CountConsumedEvents.SQL, inboxService)
	if err != nil {
		return err
	}
	ds, err := iw.broker.Deliveries(ctx)
	if err != nil {
		return err
	}
	unacked := 0
	for _, d := range ds {
		if d.State != "acked" {
			unacked++
		}
	}
	entries, err := iw.db.Audit(ctx)
	if err != nil {
		return err
	}
	amounts := map[int64]string{} // amount -> event
	for _, e := range inboxEvents {
		amounts[e.amount] = e.id
	}
	applied := map[string]int{}
	without := 0
	commits := groupCommits(entries)
	for _, changes := range commits {
		inboxed := false
		for _, c := range changes {
			inboxed = inboxed || (c.Table == "consumed_events" && c.Op == "INSERT")
		}
		for _, c := range changes {
			if c.Table != "accounts" || c.Op != "UPDATE" {
				continue
			}
			if !inboxed {
				without++
			}
			var oldC, newC int64
			fmt.Sscan(c.OldState, &oldC)
			fmt.Sscan(c.NewState, &newC)
			applied[cmpOr(amounts[newC-oldC], fmt.Sprintf("%d cents", newC-oldC))]++
		}
	}
	twice := 0
	for _, n := range applied {
		if n > 1 {
			twice++
		}
	}
	iw.mu.Lock()
	redeliveries := iw.redeliveries
	iw.never, iw.twice = nil, nil
	for _, e := range inboxEvents {
		switch n := applied[e.id]; {
		case n == 0:
			iw.never = append(iw.never, e.id)
		case n > 1:
			iw.twice = append(iw.twice, fmt.Sprintf("%s (%d times)", e.id, n))
		}
	}
	iw.mu.Unlock()
	r.SetMetric("credit_cents", float64(credit))
	r.SetMetric("events_recorded", float64(recorded))
	r.SetMetric("effects_applied_twice", float64(twice))
	r.SetMetric("effects_without_inbox", float64(without))
	r.SetMetric("deliveries_not_acked", float64(unacked))
	r.SetMetric("redeliveries", float64(redeliveries))

	dt := lab.Table{Title: "The broker's deliveries (from the database)", Note: "Each offer's delivery to the service, as broker_deliveries holds it at the end.",
		Columns: []string{"Offer", "Service", "State", "Deliveries", "Delivered at", "Acked at"}, VaryingColumns: []string{"Delivered at", "Acked at"}}
	for _, d := range ds {
		dt.AddRow(d.OfferID, d.Consumer, d.State, d.DeliveryCount, d.DeliveredAt, d.AckedAt)
	}
	at := lab.Table{Title: "Ledger: committed changes (the lab's audit)",
		Note:    "Every inbox row and credit the programs committed, in commit order, as triggers recorded them.",
		Columns: []string{"#", "Clock", "Instance", "Table", "Key", "Change"}, VaryingColumns: []string{"#", "Clock", "Instance"}, Interleaved: true}
	for _, c := range entries {
		if c.Actor == cast.Checkout {
			continue
		}
		change := describeChange(c)
		if c.Table == "accounts" {
			change = "credit " + c.OldState + " -> " + c.NewState
		}
		at.AddRow(c.Seq, c.At, c.Actor, c.Table, c.Key, change)
	}
	r.Tables = append(r.Tables, dt, at)
	return nil
}

// groupCommits splits the audit into the programs' transactions, by the
// number the lab gave each commit.
func groupCommits(entries []store.AuditEntry) [][]store.AuditEntry {
	var out [][]store.AuditEntry
	at := map[int64]int{}
	for _, e := range entries {
		if e.Tx == 0 {
			continue // the lab's own
		}
		i, ok := at[e.Tx]
		if !ok {
			i = len(out)
			at[e.Tx] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], e)
	}
	return out
}

// explain names the events the audit shows credited never or more than
// once.
func (iw *inboxWorld) explain() string {
	iw.mu.Lock()
	defer iw.mu.Unlock()
	var parts []string
	if len(iw.never) > 0 {
		parts = append(parts, "never credited: "+strings.Join(iw.never, ", "))
	}
	if len(iw.twice) > 0 {
		parts = append(parts, "credited more than once: "+strings.Join(iw.twice, ", "))
	}
	if len(parts) == 0 {
		return ""
	}
	return "By the audit of committed credits, " + strings.Join(parts, "; ") + "."
}

func (iw *inboxWorld) work(string, string, int64, int64, int64) error { return errNoWork }

func (iw *inboxWorld) finished() string { return "every delivery is acked" }
