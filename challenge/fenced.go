package challenge

import (
	"context"
	"fmt"
	"math"
	"strconv"
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

// fencedLease is the lease hello's settings give the fenced relays.
const fencedLease = 300 * time.Millisecond

// fencedEvents are the events the fenced relay challenge seeds.
var fencedEvents = []store.NewEvent{
	{ID: "E-1", Type: "PaymentCreated", Payload: `{"key":"PAY-001","amountCents":2500}`},
	{ID: "E-2", Type: "PaymentCreated", Payload: `{"key":"PAY-002","amountCents":4200}`},
	{ID: "E-3", Type: "PaymentCreated", Payload: `{"key":"PAY-003","amountCents":1999}`},
	{ID: "E-4", Type: "PaymentCreated", Payload: `{"key":"PAY-004","amountCents":12000}`},
	{ID: "E-5", Type: "PaymentCreated", Payload: `{"key":"PAY-005","amountCents":750}`},
	{ID: "E-6", Type: "PaymentCreated", Payload: `{"key":"PAY-006","amountCents":3100}`},
}

// FencedRelay is the fenced relay: claim an event with a lease and a fencing
// token, send it to the broker, complete it with the token, so a relay whose
// lease ended and was taken over completes nothing.
var FencedRelay = Challenge{
	Name:   "fenced-relay",
	Title:  "The fenced relay: claim, send, complete with a fencing token",
	Lesson: "session-16-stale-ack-fencing",
	Brief: "Six events wait in outbox_events (session 16's table; its times are integer ticks, the replies' tick: " +
		"milliseconds since 2026-01-15T09:00:00.000Z). Each instance loops: claim the oldest event not delivered whose " +
		"lease is free or has ended (lease_until IS NULL OR lease_until <= tick), in one transaction that takes it " +
		"only with the same predicate, adds 1 to claim_token and sets locked_by and lease_until = tick + lease_ms, " +
		"and reads back the token it took; commit; send the event to the broker (op send, its event_id and payload); " +
		"then, in a transaction, set delivered = 1 and delivered_at only WHERE claim_token is still the token it " +
		"took, and commit only if that changed a row. A send that fails is tried again while the claim holds. With " +
		"nothing to claim it waits (op wait) and tries again; it never stops on its own.",
	Tables:   []string{"outbox_events"},
	Schema:   []store.Migration{store.RelayEvents},
	Settings: map[string]any{"lease_ms": fencedLease.Milliseconds()},
	Horizon:  time.Minute,
	Explored: "two-relays",
	Checks: []lesson.CheckDoc{
		{Name: "events_delivered", About: "events marked delivered: every event the sequence lets be finished was completed"},
		{Name: "events_not_delivered", About: "events left undelivered"},
		{Name: "events_never_sent", About: "events delivered that the broker never received: lost"},
		{Name: "unsent_completions", About: "completions committed before the broker had received the event (complete before send)"},
		{Name: "claims_of_owned_events", About: "claims that took an event another instance held under a live lease, or one already delivered"},
		{Name: "stale_writes", About: "writes committed to an event by an instance that no longer held its latest claim (a stale completion)"},
		{Name: "duplicate_sends", About: "events the broker received more than once, in a sequence where no fault makes the lab take work over"},
	},
	OnceChecks: []string{"duplicate_sends"},
	Sequences: []Sequence{
		{Name: "two-relays", About: "Relay-A and Relay-B, each its own process and connection, relay the outbox together",
			Instances: []string{"Relay-A", "Relay-B"}},
		{Name: "three-relays", About: "three instances relay the outbox together",
			Instances: []string{"Relay-A", "Relay-B", "Relay-C"}},
		{Name: "crash-after-claim", About: "the first relay to commit a claim is killed (SIGKILL) right after it; its event must be sent and completed once its lease ends",
			Instances: []string{"Relay-A", "Relay-B"}, AtLeastOnce: true,
			Faults: []Fault{{At: Boundary{Op: relayproto.OpCommit, Commits: "claim", Nth: 1}, Do: Kill}}},
		{Name: "expiry-after-send", About: "the first send is stored but its reply held for four leases: another relay takes the event over and sends it again, and the late completion must change nothing",
			Instances: []string{"Relay-A", "Relay-B"}, AtLeastOnce: true,
			Faults: []Fault{{At: Boundary{Op: relayproto.OpSend, Nth: 1}, Do: Hold, For: 4 * fencedLease}}},
		{Name: "crash-after-send", About: "the first relay to send is killed (SIGKILL) right after it, before it completes: the event is sent again and completed by another",
			Instances: []string{"Relay-A", "Relay-B"}, AtLeastOnce: true,
			Faults: []Fault{{At: Boundary{Op: relayproto.OpSend, Nth: 1}, Do: Kill}}},
		{Name: "crash-after-completion", About: "the first relay to commit a completion is killed (SIGKILL) right after it",
			Instances: []string{"Relay-A", "Relay-B"}, AtLeastOnce: true,
			Faults: []Fault{{At: Boundary{Op: relayproto.OpCommit, Commits: "completion", Nth: 1}, Do: Kill}}},
		{Name: "frozen-after-claim", About: "the first relay to commit a claim is frozen (SIGSTOP) for four leases right after it, then continued (SIGCONT)",
			Instances: []string{"Relay-A", "Relay-B"}, AtLeastOnce: true,
			Faults: []Fault{{At: Boundary{Op: relayproto.OpCommit, Commits: "claim", Nth: 1}, Do: Stop, For: 4 * fencedLease}}},
	},
	world: newFencedWorld,
}

// fencedWorld is the fenced relay challenge's world: the seeded events,
// the lab's broker, and the tracker that reads the audit.
type fencedWorld struct {
	db     *store.DB // the lab's connection: the seed, the broker, the audits
	broker *store.LabBroker
	mu     sync.Mutex // guards live: the instances commit and send from their own goroutines
	live   fencedTracker
}

func newFencedWorld(ctx context.Context, env *lesson.Env, seq Sequence) (rules, []lab.Event, error) {
	db, err := env.Open(ctx, env.DatabasePath())
	if err != nil {
		return nil, nil, err
	}
	if err := db.Migrate(ctx, store.RelayEvents, store.BrokerInbox, store.LabAudit, store.AuditRelay); err != nil {
		db.Close()
		return nil, nil, err
	}
	var seeded []lab.Event
	relay := store.NewRelay(db, store.RelayLesson)
	for i, e := range fencedEvents {
		if ms, ok := seq.WorkMs[e.ID]; ok { // its own length of work, in its payload
			e.Payload = strings.TrimSuffix(e.Payload, "}") + fmt.Sprintf(`,"work_ms":%d}`, ms)
		}
		at := int64(i-len(fencedEvents)) * 1000 // created a second apart, before the relays start
		if err := relay.Insert(ctx, e, at); err != nil {
			db.Close()
			return nil, nil, err
		}
		seeded = append(seeded, lab.Event{At: clock.Format(cast.LessonStart.Add(time.Duration(at) * time.Millisecond)), Kind: lab.KindCommit,
			Subject: e.ID, Actor: cast.Checkout, Action: "write event", Detail: e.ID + " " + e.Type + ": written with its business change"})
	}
	if _, err := db.TagAudit(ctx, cast.Checkout, clock.Format(cast.LessonStart)); err != nil {
		db.Close()
		return nil, nil, err
	}
	return &fencedWorld{db: db, broker: store.NewBroker(db, store.BrokerLesson), live: newFencedTracker()}, seeded, nil
}

func (fw *fencedWorld) close() error { return fw.db.Close() }

func (fw *fencedWorld) summary(m func(string) string) string {
	return fmt.Sprintf("%s events delivered, each sent before its completion (%s offers at the broker), %s stale writes, %s claims of owned events",
		m("events_delivered"), m("offers"), m("stale_writes"), m("claims_of_owned_events"))
}

func (fw *fencedWorld) providerStatus(string, string) (string, string, bool) { return "", "", false }

func (fw *fencedWorld) send(ctx context.Context, instance, eventID, payload string, now time.Time) (int64, error) {
	o, err := fw.broker.Offer(ctx, eventID, payload, instance, now, 0)
	if err == nil {
		fw.mu.Lock()
		fw.live.offered[eventID] = true
		fw.mu.Unlock()
	}
	return o.OfferID, err
}

// classify: a claim raises an event's token, a completion delivers it.
func (fw *fencedWorld) classify(c store.AuditEntry) string {
	switch {
	case c.Table != "outbox_events" || c.Op != "UPDATE":
		return ""
	case c.NewToken > c.OldToken:
		return "claim"
	case c.OldState == "0" && c.NewState == "1":
		return "completion"
	}
	return ""
}

// done: every event is delivered.
func (fw *fencedWorld) done(ctx context.Context) (bool, error) {
	n, err := fw.db.Count(ctx, store.CountUndeliveredEvents.SQL)
	return n == 0, err
}

func (fw *fencedWorld) describe(changes []store.AuditEntry) []lab.Event {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	var out []lab.Event
	for _, c := range changes {
		if e, ok := fw.live.apply(c); ok {
			out = append(out, e)
		}
	}
	return out
}

func (fw *fencedWorld) expected(seq Sequence) map[string]float64 {
	return map[string]float64{"events_delivered": float64(len(fencedEvents)), "events_not_delivered": 0, "events_never_sent": 0,
		"unsent_completions": 0, "claims_of_owned_events": 0, "stale_writes": 0, "duplicate_sends": 0}
}

// judge measures the sequence from the database: the events' final rows,
// the broker's offers, and the audit of committed changes in commit order.
func (fw *fencedWorld) judge(ctx context.Context, w *world, r *lab.Result) error {
	events, err := store.NewRelay(fw.db, store.RelayLesson).Events(ctx)
	if err != nil {
		return err
	}
	offers, err := fw.broker.Offers(ctx)
	if err != nil {
		return err
	}
	entries, err := fw.db.Audit(ctx)
	if err != nil {
		return err
	}
	t := newFencedTracker()
	for _, e := range entries {
		t.apply(e)
	}
	sent := map[string][]store.BrokerOffer{}
	for _, o := range offers {
		sent[o.EventID] = append(sent[o.EventID], o)
	}
	delivered, neverSent, dup := 0, 0, 0
	for _, e := range events {
		if e.Delivered {
			delivered++
			if len(sent[e.ID]) == 0 {
				neverSent++
			}
		}
		if len(sent[e.ID]) > 1 {
			dup++
		}
	}
	r.SetMetric("events_delivered", float64(delivered))
	r.SetMetric("events_not_delivered", float64(len(events)-delivered))
	r.SetMetric("events_never_sent", float64(neverSent))
	r.SetMetric("unsent_completions", float64(t.unsent))
	r.SetMetric("claims_of_owned_events", float64(t.steals))
	r.SetMetric("stale_writes", float64(t.stale))
	r.SetMetric("duplicate_sends", float64(dup))
	r.SetMetric("offers", float64(len(offers)))

	final := cast.OutboxEventsTableOnClock(events)
	final.VaryingColumns = []string{"claim_token", "locked_by", "lease_until", "delivered_at"}
	sends := lab.Table{Title: "Ledger: the broker's offers", Note: "Every send the lab's broker stored, in arrival order, read from broker_offers.",
		Columns: []string{"Offer", "Event", "Sent by", "At"}, VaryingColumns: []string{"Offer", "Sent by", "At"}, Interleaved: true}
	for _, o := range offers {
		sends.AddRow(o.OfferID, o.EventID, o.OfferedBy, o.OfferedAt)
	}
	r.Tables = append(r.Tables, final, sends, t.table(entries))
	return nil
}

// fencedTracker follows the committed changes to outbox_events and the
// broker's offers in commit order.
type fencedTracker struct {
	claimer map[string]string // event -> the instance whose claim is the latest
	token   map[string]int64  // event -> the latest claim's token
	until   map[string]int64  // event -> its lease's end (tick), -1 for none
	claimed map[string]int64  // event -> when its latest claim committed (tick)
	offered map[string]bool   // event -> the broker has stored a send of it
	claims  int
	steals  int
	stale   int
	unsent  int
}

func newFencedTracker() fencedTracker {
	return fencedTracker{claimer: map[string]string{}, token: map[string]int64{}, offered: map[string]bool{},
		until: map[string]int64{}, claimed: map[string]int64{}}
}

// tick reads an audited lease end (an integer, or a real a program
// wrote); -1 for none.
func tick(s string) int64 {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return -1
	}
	return int64(math.Ceil(f))
}

// tickAt is a commit's lab clock as an integer tick.
func tickAt(at string) int64 {
	t, err := clock.Parse(at)
	if err != nil {
		return -1
	}
	return t.Sub(cast.LessonStart).Milliseconds()
}

func (t *fencedTracker) apply(c store.AuditEntry) (lab.Event, bool) {
	e := lab.Event{Subject: c.Key, Actor: c.Actor}
	if c.Actor == cast.Checkout {
		return e, false
	}
	if c.Table == "broker_offers" {
		t.offered[c.Key] = true
		return e, false // the send's own event says it
	}
	owner := t.claimer[c.Key]
	switch {
	case c.Op != "UPDATE":
		// No program may insert or delete an event: a write outside any
		// claim.
		t.stale++
		e.Kind, e.Action, e.Detail = lab.KindStale, c.Op, fmt.Sprintf("%s %s's row of %s", strings.ToLower(c.Op), c.Key, c.Table)
		return e, true
	case c.NewToken > c.OldToken:
		t.claims++
		live := c.OldState == "0" && owner != "" && owner != c.Actor && tick(c.OldUntil) > tickAt(c.At)
		t.claimer[c.Key], t.token[c.Key] = c.Actor, c.NewToken
		t.until[c.Key], t.claimed[c.Key] = tick(c.NewUntil), tickAt(c.At)
		e.Until = clock.Format(cast.LessonStart.Add(time.Duration(tick(c.NewUntil)) * time.Millisecond))
		if c.OldState == "1" || live {
			t.steals++
			e.Kind, e.Action = lab.KindSteal, "STEAL"
			e.Detail = fmt.Sprintf("claimed %s (token %d) from %s, whose lease ran to tick %s", c.Key, c.NewToken, cmpOr(owner, "nobody"), c.OldUntil)
			return e, true
		}
		e.Kind, e.Action = lab.KindClaim, "claim"
		e.Detail = fmt.Sprintf("claimed %s with token %d, lease until tick %s", c.Key, c.NewToken, c.NewUntil)
	case owner != c.Actor || c.NewToken != t.token[c.Key]:
		t.stale++
		e.Kind, e.Action = lab.KindStale, "STALE write"
		e.Detail = fmt.Sprintf("%s committed a write to %s (token %d) while %s held its latest claim (token %d)", c.Actor, c.Key,
			c.NewToken, cmpOr(owner, "no instance"), t.token[c.Key])
	case c.OldState == "0" && c.NewState == "1":
		if !t.offered[c.Key] {
			t.unsent++
			e.Kind, e.Action = lab.KindUnsent, "complete UNSENT"
			e.Detail = fmt.Sprintf("marked %s delivered (token %d) before the broker had received it", c.Key, c.NewToken)
			return e, true
		}
		e.Kind, e.Action, e.Detail = lab.KindFinalize, "complete", fmt.Sprintf("marked %s delivered with token %d", c.Key, c.NewToken)
	case c.NewUntil != c.OldUntil:
		t.until[c.Key] = tick(c.NewUntil)
		e.Kind, e.Action = lab.KindRenew, "lease"
		e.Detail = fmt.Sprintf("%s's lease now ends at tick %s", c.Key, cmpOr(c.NewUntil, "none"))
	default:
		e.Kind, e.Action, e.Detail = lab.KindNote, "update", fmt.Sprintf("updated %s", c.Key)
	}
	return e, true
}

// table is the audit as a ledger.
func (t *fencedTracker) table(entries []store.AuditEntry) lab.Table {
	tb := lab.Table{Title: "Ledger: committed changes (the lab's audit)",
		Note: "Every change to outbox_events the programs committed, and every offer the broker stored, in commit order, as " +
			"triggers recorded them; the checks of claims, stale writes and unsent completions read this ledger.",
		Columns: []string{"#", "Clock", "Instance", "Table", "Event", "Change", "Read as"}, VaryingColumns: []string{"#", "Clock", "Instance"},
		Interleaved: true}
	replay := newFencedTracker()
	for _, c := range entries {
		e, ok := replay.apply(c)
		kind := string(e.Kind)
		if c.Table == "broker_offers" {
			kind, ok = "offer", true
		}
		if !ok {
			continue
		}
		tb.AddRow(c.Seq, c.At, c.Actor, c.Table, c.Key, describeEventChange(c), kind)
	}
	return tb
}

func describeEventChange(c store.AuditEntry) string {
	if c.Table == "broker_offers" {
		return "offer " + c.NewState + " stored"
	}
	if c.Op != "UPDATE" {
		return strings.ToLower(c.Op)
	}
	var parts []string
	if c.OldToken != c.NewToken {
		parts = append(parts, fmt.Sprintf("token %d -> %d", c.OldToken, c.NewToken))
	}
	if c.OldOwner != c.NewOwner {
		parts = append(parts, fmt.Sprintf("%s -> %s", cmpOr(c.OldOwner, "NULL"), cmpOr(c.NewOwner, "NULL")))
	}
	if c.OldUntil != c.NewUntil {
		parts = append(parts, "until "+cmpOr(c.NewUntil, "NULL"))
	}
	if c.OldState != c.NewState {
		parts = append(parts, "delivered "+c.OldState+" -> "+c.NewState)
	}
	if len(parts) == 0 {
		return "rewritten, unchanged"
	}
	return strings.Join(parts, ", ")
}

func (fw *fencedWorld) receive(context.Context, string, time.Time) (*relayproto.Delivery, error) {
	return nil, errNoBroker
}

func (fw *fencedWorld) ack(context.Context, string, int64, time.Time) (bool, error) {
	return false, errNoBroker
}

func (fw *fencedWorld) work(string, string, int64, int64, int64) error { return errNoWork }

func (fw *fencedWorld) finished() string { return "every event is delivered" }
