package cast

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/outboxlab/outboxlab/clock"
	"github.com/outboxlab/outboxlab/failpoint"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/natsbroker"
	"github.com/outboxlab/outboxlab/store"
)

// This file holds what sessions 18 to 20 and the explorer share: the relay →
// broker → consumer Pipeline (one database, its clock, its failpoint plan
// and its ledgers), the producer's commits and the observer's reads.
// Instances (relay.go, consumer.go) each run on their own connection.

// The pipeline's fixed settings.
const (
	RelayLease        = 30 * TickSecond // every relay claim's lease
	VisibilityTimeout = 30 * TickSecond // the broker redelivers an unacknowledged delivery after this
	MaxSendAttempts   = 2               // a relay resends once when the broker's ack is lost
)

// Names of the actors.
const (
	RelayA    = "Relay-A"
	RelayB    = "Relay-B"
	producer  = "checkout"
	Operator  = "operator"
	ClockName = "clock"
)

// Payload is an event the consumers read: a credit to an account, an
// entity's state at a version, or (in the explorer) both. The parts an
// event does not carry are left out of its JSON.
type Payload struct {
	Account     string `json:"account,omitempty"`
	CreditCents int64  `json:"credit_cents,omitempty"`
	Entity      string `json:"entity,omitempty"`
	Version     int64  `json:"version,omitempty"`
	State       string `json:"state,omitempty"`
}

// Credits says the event awards a credit.
func (pl Payload) Credits() bool { return pl.CreditCents != 0 }

// Pipeline is one database's world: an outbox, the lab's broker and the
// consumers' tables, a scenario clock, a failpoint plan and the ledgers.
// Instances append to the ledgers; they never read them.
type Pipeline struct {
	Label string // "row 3" when a report holds several pipelines; "" otherwise
	// concurrent says instances ran at the same time here, so the order of
	// the consumer ledgers varies from run to run.
	Concurrent bool
	Path       string
	Open       Opener
	Audit      *store.DB // the observer's connection: seeding and audits, never an actor
	Clock      *clock.Manual
	Faults     *failpoint.Plan
	Timeline   *lab.Timeline

	// SQL is what the relays and the broker run; the zero value means
	// DeliveryLesson. A lesson (or a test) may swap one statement of it.
	SQL DeliverySQL

	// NewBroker, when set, is the broker as the connection db reaches it:
	// the broker seam ([store.Broker]). nil is the lab's own broker
	// ([store.NewBroker]) running SQL's broker statements. It reaches the
	// instances in the lab's process only: [Pipeline.Settings], what a
	// child process's instances are given, cannot carry it yet, and
	// refuses to.
	NewBroker func(db *store.DB) store.Broker
	// BrokerName, with NewBroker, names the broker dropped in, as the
	// report's broker tables say whose record they are ("NATS JetStream").
	BrokerName string
	// jetStream, set by [Pipeline.UseJetStream], is the real broker the
	// pipeline runs on, and where its server is: [FinishDelivery] reports
	// its answers.
	jetStream      *natsbroker.Broker
	jetStreamWhere string

	BrokerWindow   int64 // the broker's dedup window in ticks; 0: none
	EventIDPerSend bool  // mistake: the relay mints a new message id per send

	// BeforeCrash, when set, runs as an instance is about to crash at a
	// failpoint, before its CRASH line: in a child process it reports the
	// crash to the parent, which kills the child there, so it never
	// returns. An error it returns ends the instance's step.
	BeforeCrash func(CrashReport) error
	// BeforeStall, when set, runs as a relay instance is about to stall
	// past its lease at a failpoint (fault LeaseExpiry), with the same
	// report: in a child process it reports the stall to the parent, which
	// freezes the child there (SIGSTOP), tells the stall on its timeline,
	// moves the clock, and lets the child go on later (SIGCONT).
	BeforeStall func(CrashReport) error

	mu            sync.Mutex
	claims        []pipeClaimEntry
	sends         []pipeSendEntry
	outageRetries int // sends retried while the broker was unavailable (OutageRetries)
	completions   []pipeCompletionEntry
	effects       []EffectEntry
	acks          []AckEntry
}

// DeliverySQL is the statements of the pipeline's relays and broker, one
// value, so that a mistake is the same value with one statement swapped.
type DeliverySQL struct {
	Relay  store.RelaySQL
	Broker store.BrokerSQL
}

// DeliveryLesson is the pipeline of sessions 18 to 20 as the lessons teach it.
var DeliveryLesson = DeliverySQL{Relay: store.RelayLesson, Broker: store.BrokerLesson}

// sql is the statements the pipeline runs: p.SQL, or DeliveryLesson if unset.
func (p *Pipeline) sql() DeliverySQL {
	if p.SQL == (DeliverySQL{}) {
		return DeliveryLesson
	}
	return p.SQL
}

// NewPipeline creates a fresh database at path with the relay and broker
// schema, and a scenario clock at tick 0.
func NewPipeline(ctx context.Context, open Opener, path, label string, tl *lab.Timeline, faults *failpoint.Plan) (*Pipeline, error) {
	db, err := open(ctx, path)
	if err != nil {
		return nil, err
	}
	if err := db.Migrate(ctx, store.RelayEvents, store.BrokerInbox); err != nil {
		db.Close()
		return nil, err
	}
	return &Pipeline{Label: label, Path: path, Open: open, Audit: db, Clock: clock.NewManual(LessonStart), Faults: faults, Timeline: tl, SQL: DeliveryLesson}, nil
}

// Close closes the observer's connection, if it has one.
func (p *Pipeline) Close() {
	if p.Audit != nil {
		p.Audit.Close()
	}
}

// Broker is the broker's service on the observer's connection: its
// redelivery job, and the reads of its own record.
func (p *Pipeline) Broker() store.Broker { return p.brokerOn(p.Audit) }

// brokerOn is the broker as the connection db reaches it: a relay's
// sends, a consumer's deliveries and acknowledgements.
func (p *Pipeline) brokerOn(db *store.DB) store.Broker {
	if p.NewBroker != nil {
		return p.NewBroker(db)
	}
	return store.NewBroker(db, p.sql().Broker)
}

// Consumers is the consumers' tables on the observer's connection: the
// seeding of accounts, the purge job and the reads.
func (p *Pipeline) Consumers() *store.Consumer {
	return store.NewConsumer(p.Audit, store.ConsumerLesson)
}

// Now is the scenario clock in ticks.
func (p *Pipeline) Now() int64 { return p.Clock.Now().Sub(LessonStart).Milliseconds() }

// SetNow moves the clock forward to tick t (never backward).
func (p *Pipeline) SetNow(t int64) {
	if t > p.Now() {
		p.Clock.Set(LessonStart.Add(time.Duration(t) * time.Millisecond))
	}
}

// SetClock moves the clock forward to t (never backward): the lab's time,
// as a child process's pipeline learns it when the lab lets it go on.
func (p *Pipeline) SetClock(t time.Time) { p.SetNow(t.Sub(LessonStart).Milliseconds()) }

// Event adds a timeline line of kind at the current tick and returns its
// number.
func (p *Pipeline) Event(kind lab.Kind, actor, action, detail string) int {
	return p.Add(lab.Event{Kind: kind, Actor: actor, Action: action, Detail: detail})
}

// Add adds e to the timeline at the current tick (after the pipeline's
// label, if any) and returns its number.
func (p *Pipeline) Add(e lab.Event) int {
	e.At = TickClock(p.Now())
	if p.Label != "" {
		e.At = p.Label + " " + e.At
	}
	return p.Timeline.Add(e)
}

// CommitCredit is the producer's transaction: the event awarding cents to
// account enters the outbox.
func (p *Pipeline) CommitCredit(ctx context.Context, eventID, account string, cents int64) error {
	return p.Commit(ctx, eventID, "CreditAwarded", Payload{Account: account, CreditCents: cents},
		fmt.Sprintf("award %d cents to %s", cents, account))
}

// CommitVersion is the producer's transaction for a state change at a version.
func (p *Pipeline) CommitVersion(ctx context.Context, eventID, entity string, version int64, state string) error {
	return p.Commit(ctx, eventID, "AccountStateChanged", Payload{Entity: entity, Version: version, State: state},
		fmt.Sprintf("%s becomes %s at version %d", entity, state, version))
}

// Commit is the producer's transaction: the event enters the outbox with
// payload as JSON; what says what it does, for the timeline.
func (p *Pipeline) Commit(ctx context.Context, eventID, typ string, payload any, what string) error {
	b, err := json.Marshal(payload)
	if err != nil {
		return err
	}
	if err := store.NewRelay(p.Audit, store.RelayLesson).Insert(ctx, store.NewEvent{ID: eventID, Type: typ, Payload: string(b)}, p.Now()); err != nil {
		return err
	}
	p.Add(lab.Event{Kind: lab.KindCommit, Subject: eventID, Actor: producer, Action: "commit " + eventID, Detail: "outbox event committed: " + what})
	return nil
}

// OpenAccount opens a consumer's account row.
func (p *Pipeline) OpenAccount(ctx context.Context, consumer, account string) error {
	return p.Consumers().OpenAccount(ctx, AccountID(consumer, account))
}

// AccountID is the accounts row a consumer credits: each consumer keeps
// its own, so the naive and the inbox consumer can be compared side by side.
func AccountID(consumer, account string) string { return consumer + ":" + account }

// ExpireLeases moves the clock to the latest live lease deadline of an
// undelivered event, and reports whether it had to.
func (p *Pipeline) ExpireLeases(ctx context.Context) (bool, error) {
	evs, err := store.NewRelay(p.Audit, store.RelayLesson).Events(ctx)
	if err != nil {
		return false, err
	}
	var until int64
	var holders []string
	for _, e := range evs {
		if !e.Delivered && e.LeaseUntil > p.Now() {
			until = max(until, e.LeaseUntil)
			holders = append(holders, fmt.Sprintf("%s (%s, token %d)", e.ID, e.LockedBy, e.Token))
		}
	}
	if until == 0 {
		return false, nil
	}
	p.SetNow(until)
	p.Event(lab.KindExpiry, ClockName, "lease expiry", fmt.Sprintf("the clock reaches %s: the lease on %s has expired", TickClock(until), strings.Join(holders, ", ")))
	return true, nil
}

// Count runs one audit query on the observer's connection.
func (p *Pipeline) Count(ctx context.Context, query string, args ...any) (int64, error) {
	n, err := p.Audit.Count(ctx, query, args...)
	return int64(n), err
}

// IsCrash reports whether err is an injected crash (an expected outcome):
// a relay's or consumer's crash (failpoint.ErrCrashed) or a checkout's
// crash inside the store (store.ErrCrashed, which wraps it).
func IsCrash(err error) bool {
	return errors.Is(err, failpoint.ErrCrashed) || errors.Is(err, store.ErrCrashed)
}

// UnlessCrash returns err, except an injected crash: a script goes on
// without the dead instance, whose later steps return the crash again.
func UnlessCrash(err error) error {
	if IsCrash(err) {
		return nil
	}
	return err
}

// CompletionRows returns the rows of relay's first completion of event.
func (p *Pipeline) CompletionRows(relay, event string) (int64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.completions {
		if c.relay == relay && c.event == event {
			return c.rows, true
		}
	}
	return 0, false
}

// AckRows returns the rows instance's first ack of offer under receipt
// changed at the broker; ok is false when no such ack reached it.
func (p *Pipeline) AckRows(instance string, offer, receipt int64) (int64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range p.acks {
		if a.Instance == instance && a.OfferID == offer && a.Receipt == receipt && a.Rows != nil {
			return *a.Rows, true
		}
	}
	return 0, false
}

// Effects returns the effect ledger entries in order.
func (p *Pipeline) Effects() []EffectEntry {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]EffectEntry(nil), p.effects...)
}

// CreditService is the credit consumer group of sessions 19 and 20.
const CreditService = "credit-service"

// AddEffect appends e to the pipeline's effect ledger.
func (p *Pipeline) AddEffect(e EffectEntry) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.effects = append(p.effects, e)
}

// AddAck appends a to the pipeline's acknowledgement ledger.
func (p *Pipeline) AddAck(a AckEntry) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.acks = append(p.acks, a)
}

// CrashReport is an instance about to crash at a failpoint, before it
// closes its connection: what [Pipeline.BeforeCrash] receives. A child
// process sends it to its parent, which kills the child there.
type CrashReport struct {
	Instance string
	Point    failpoint.Point
	Subject  string // the event it worked on, as the plan's rule names it
	// Held is where it crashes and what it held, as its CRASH line says:
	// "at after-claim holding e6-v1 with token 1".
	Held string
	// Record is what the pipeline's instances recorded until then.
	Record Record
}

// beforeCrash runs p.BeforeCrash, if set, for instance about to crash at
// point.
func (p *Pipeline) beforeCrash(instance string, point failpoint.Point, subject, held string) error {
	if p.BeforeCrash == nil {
		return nil
	}
	return p.BeforeCrash(p.faultReport(instance, point, subject, held))
}

// faultReport is instance's report of a fault at point: what it recorded
// since the last report ([Pipeline.TakeRecord]).
func (p *Pipeline) faultReport(instance string, point failpoint.Point, subject, held string) CrashReport {
	return CrashReport{Instance: instance, Point: point, Subject: subject, Held: held, Record: p.TakeRecord()}
}

// Record is what a pipeline's instances wrote to its timeline and ledgers:
// what a child process's pipeline sends to its parent, which adds it to
// its own ([Pipeline.Adopt]). Seq numbers are the sending timeline's.
type Record struct {
	Events      []lab.Event
	Claims      []ClaimRecord
	Sends       []SendRecord
	Completions []CompletionRecord
	Effects     []EffectEntry
	Acks        []AckEntry
}

// FirstAndLastClaims are the claims of the ledger that took event with the
// lowest and the highest token: its stale owner and its current one (the
// same claim when only one took it), or nils when none did.
func (r Record) FirstAndLastClaims(event string) (first, last *ClaimRecord) {
	for i, c := range r.Claims {
		if c.Event != event || c.Outcome != store.Claimed {
			continue
		}
		if first == nil || c.Token < first.Token {
			first = &r.Claims[i]
		}
		if last == nil || c.Token > last.Token {
			last = &r.Claims[i]
		}
	}
	return first, last
}

// ClaimRecord is one line of the relay claim ledger, as it crosses a pipe.
type ClaimRecord struct {
	Seq     int
	Tick    int64
	Relay   string
	Event   string
	Outcome store.ClaimOutcome
	Token   int64
	Until   int64
	HeldBy  string
}

// SendRecord is one line of the relay send ledger, as it crosses a pipe.
type SendRecord struct {
	Seq     int
	Tick    int64
	Relay   string
	Event   string
	SentAs  string
	Token   int64
	OfferID int64
	Answer  string
}

// CompletionRecord is one line of the relay completion ledger, as it
// crosses a pipe.
type CompletionRecord struct {
	Seq    int
	Tick   int64
	Relay  string
	Event  string
	Token  int64
	Guard  string
	Rows   int64
	Result string
}

// Record is everything p's instances recorded so far.
func (p *Pipeline) Record() Record {
	rec := Record{Events: p.Timeline.Events()}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.claims {
		rec.Claims = append(rec.Claims, ClaimRecord{c.seq, c.tick, c.relay, c.event, c.outcome, c.token, c.until, c.heldBy})
	}
	for _, s := range p.sends {
		rec.Sends = append(rec.Sends, SendRecord{s.seq, s.tick, s.relay, s.event, s.sentAs, s.token, s.offerID, s.answer})
	}
	for _, c := range p.completions {
		rec.Completions = append(rec.Completions, CompletionRecord{c.seq, c.tick, c.relay, c.event, c.token, c.guard, c.rows, c.result})
	}
	rec.Effects = append(rec.Effects, p.effects...)
	rec.Acks = append(rec.Acks, p.acks...)
	return rec
}

// TakeRecord is what p's instances recorded since the last TakeRecord,
// which it forgets: a child process's pipeline sends it with each report,
// so that the parent adopts every line once.
func (p *Pipeline) TakeRecord() Record {
	rec := p.Record()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.Timeline = &lab.Timeline{}
	p.claims, p.sends, p.completions, p.effects, p.acks = nil, nil, nil, nil, nil
	return rec
}

// Adopt adds what another pipeline's instances recorded on the same
// database (a child process's) to p: its timeline lines after p's, and
// its ledger entries, renumbered to the lines of p's timeline.
func (p *Pipeline) Adopt(rec Record) {
	seq := map[int]int{}
	for _, e := range rec.Events {
		seq[e.Seq] = p.Timeline.Add(e)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range rec.Claims {
		p.claims = append(p.claims, pipeClaimEntry{seq[c.Seq], c.Tick, c.Relay, c.Event, c.Outcome, c.Token, c.Until, c.HeldBy})
	}
	for _, s := range rec.Sends {
		p.sends = append(p.sends, pipeSendEntry{seq[s.Seq], s.Tick, s.Relay, s.Event, s.SentAs, s.Token, s.OfferID, s.Answer})
	}
	for _, c := range rec.Completions {
		p.completions = append(p.completions, pipeCompletionEntry{seq[c.Seq], c.Tick, c.Relay, c.Event, c.Token, c.Guard, c.Rows, c.Result})
	}
	for _, e := range rec.Effects {
		e.Seq = seq[e.Seq]
		p.effects = append(p.effects, e)
	}
	for _, a := range rec.Acks {
		a.Seq = seq[a.Seq]
		p.acks = append(p.acks, a)
	}
}

// Settings is what instances acting on a pipeline's database from another
// process need of the pipeline: its label, its database, the scenario
// clock's tick, its statements and switches, and the faults to arm.
type Settings struct {
	Label          string
	Path           string
	Tick           int64
	SQL            DeliverySQL
	BrokerWindow   int64
	EventIDPerSend bool
	Rules          []failpoint.Rule
}

// Settings is p as another process's pipeline needs it, with rules armed
// there.
func (p *Pipeline) Settings(rules ...failpoint.Rule) Settings {
	if p.NewBroker != nil {
		// A programming error: the children would offer to the lab's own
		// broker while the lab's checks read the dropped-in one.
		panic("cast: a dropped-in broker (Pipeline.NewBroker) cannot reach a child process's instances")
	}
	return Settings{Label: p.Label, Path: p.Path, Tick: p.Now(), SQL: p.sql(), BrokerWindow: p.BrokerWindow,
		EventIDPerSend: p.EventIDPerSend, Rules: rules}
}

// Attach is a pipeline on a database another process created (see
// [NewPipeline]), for a child process's instances: they open their
// connections with open, the clock is at the settings' tick, the plan arms
// their rules, and the timeline is its own. It has no observer connection.
func Attach(open Opener, s Settings) *Pipeline {
	return &Pipeline{Label: s.Label, Path: s.Path, Open: open, Clock: clock.NewManual(LessonStart.Add(time.Duration(s.Tick) * time.Millisecond)),
		Faults: failpoint.NewPlan(s.Rules...), Timeline: &lab.Timeline{}, SQL: s.SQL, BrokerWindow: s.BrokerWindow, EventIDPerSend: s.EventIDPerSend}
}
