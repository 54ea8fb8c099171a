package natsbroker

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxlab/outboxlab/store"
)

// The headers every offer carries, so any process reading the stream
// knows what a message is without this adapter's ledger. Nats-Msg-Id
// (jetstream.MsgIDHeader) carries the event id when a window applies.
const (
	headerEventID   = "Outboxlab-Event-Id"
	headerOfferedBy = "Outboxlab-Offered-By"
	headerOfferedAt = "Outboxlab-Offered-At"
	// The headers of a dead letter in the dead-letter stream.
	headerConsumer     = "Outboxlab-Consumer"
	headerStreamSeq    = "Outboxlab-Stream-Seq"
	headerDeliveries   = "Outboxlab-Deliveries"
	headerDeadLettered = "Outboxlab-Dead-Lettered-At"
)

// minDuplicateWindow is the shortest duplicate window JetStream accepts
// (a shorter non-zero one is refused; 0 means its default, 2 minutes).
const minDuplicateWindow = 100 * time.Millisecond

// Config is what a [Broker] needs before its first operation. The
// lessons must pass their visibility timeout and maximum deliveries here:
// JetStream applies them (as each consumer's AckWait and MaxDeliver) from
// the consumer's creation, at its first delivery, while the lab's broker
// reads them from each RedeliverUnacked call. A call of RedeliverUnacked
// with other values updates the consumer, which JetStream applies from
// then on (recorded in [Answers.Notes]).
type Config struct {
	// RunID names the run's streams, OUTBOXLAB_<RunID> and
	// OUTBOXLAB_<RunID>_DLQ, and their subjects outboxlab.<RunID>.events and
	// outboxlab.<RunID>.dlq, so runs sharing one server do not collide.
	// Letters, digits, '-' and '_' only. A run id used before on the same
	// server finds that run's messages (their offers unknown to this
	// ledger, OfferID 0): use a fresh one, or [Broker.Remove] the old run.
	RunID string
	// Window is the lesson's dedup window (scenario time), the stream's
	// duplicate window from the start; each Offer's window rules after.
	// Pass the longest window the lesson will use: [Timing]'s threshold
	// covers it from the first call (a longer one met later raises the
	// threshold from then on only).
	Window time.Duration
	// Visibility is the lesson's visibility timeout (scenario time), each
	// consumer's AckWait. 0 means 30 scenario seconds.
	Visibility time.Duration
	// MaxDeliveries is each consumer's MaxDeliver; 0 means no limit.
	MaxDeliveries int64
	// Timing maps the scenario clock to the real one; a zero Scale or
	// Jump takes [DefaultTiming]'s.
	Timing Timing
	// AnswerWait bounds how long (real) the broker waits for an answer
	// JetStream gives by advisory: an ack metric, a max-deliveries
	// advisory, a redelivery due. 0 means 500 ms.
	AnswerWait time.Duration
	// RequestTimeout bounds each request to the server (real). 0 means 2 s.
	RequestTimeout time.Duration
}

var validRunID = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// withDefaults fills the zero fields.
func (c Config) withDefaults() Config {
	if c.Visibility <= 0 {
		c.Visibility = 30 * time.Second
	}
	if c.Timing.Scale <= 0 {
		c.Timing.Scale = DefaultTiming.Scale
	}
	if c.Timing.Jump <= 0 {
		c.Timing.Jump = DefaultTiming.Jump
	}
	c.Timing = c.Timing.Cover(c.Window).Cover(c.Visibility)
	if c.AnswerWait <= 0 {
		c.AnswerWait = 500 * time.Millisecond
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 2 * time.Second
	}
	return c
}

// Broker is a [store.Broker] on NATS JetStream: one stream for the
// offers, one durable pull consumer per consumer name, a dead-letter
// stream, and a ledger of JetStream's answers that the record methods
// (Offers, Deliveries, DeadLetters, CountOffers, DeliveryOf) and
// [Broker.Answers] read. Safe for concurrent use: one Broker serves every
// instance of a run.
type Broker struct {
	nc        *nats.Conn
	ownsConn  bool
	js        jetstream.JetStream
	cfg       Config
	clock     *scenarioClock
	stream    string
	dlqStream string
	subject   string
	dlqSubj   string
	subs      []*nats.Subscription

	// creating serializes the creation of durable consumers: a second
	// create of one durable is answered as soon as the server knows it,
	// before the first create has it listen for fetches, and a fetch then
	// finds no responders. Only the first create's answer says it listens.
	creating sync.Mutex

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced when an advisory arrives
	window   time.Duration // the stream's duplicate window (real)
	scenWin  time.Duration // the scenario window it stands for
	consumer map[string]*consumerState
	ledger
}

var _ store.Broker = (*Broker)(nil)

// New returns a broker on the connection nc: it creates (or updates) the
// run's two streams and subscribes to the consumers' advisories. Close
// leaves nc open.
func New(ctx context.Context, nc *nats.Conn, cfg Config) (*Broker, error) {
	if nc == nil {
		return nil, errors.New("natsbroker: no connection")
	}
	if !validRunID.MatchString(cfg.RunID) {
		return nil, fmt.Errorf("natsbroker: run id %q: letters, digits, '-' and '_' only", cfg.RunID)
	}
	if cfg.MaxDeliveries < 0 {
		return nil, fmt.Errorf("natsbroker: max deliveries %d is negative", cfg.MaxDeliveries)
	}
	cfg = cfg.withDefaults()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("natsbroker: jetstream: %w", err)
	}
	b := &Broker{
		nc: nc, js: js, cfg: cfg, clock: newScenarioClock(cfg.Timing),
		stream: "OUTBOXLAB_" + cfg.RunID, dlqStream: "OUTBOXLAB_" + cfg.RunID + "_DLQ",
		subject: "outboxlab." + cfg.RunID + ".events", dlqSubj: "outboxlab." + cfg.RunID + ".dlq",
		changed: make(chan struct{}), consumer: map[string]*consumerState{},
		ledger: newLedger(),
	}
	if err := b.createStreams(ctx); err != nil {
		return nil, err
	}
	if err := b.subscribeAdvisories(); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// Dial connects to url ([Connect]) and returns a broker on that
// connection, which Close closes.
func Dial(ctx context.Context, url string, cfg Config) (*Broker, error) {
	nc, err := Connect(url)
	if err != nil {
		return nil, err
	}
	b, err := New(ctx, nc, cfg)
	if err != nil {
		nc.Close()
		return nil, err
	}
	b.ownsConn = true
	return b, nil
}

// Close stops listening for advisories, and closes the connection when
// [Dial] opened it. The streams stay on the server ([Broker.Remove]).
func (b *Broker) Close() {
	for _, s := range b.subs {
		_ = s.Unsubscribe()
	}
	if b.ownsConn {
		b.nc.Close()
	}
}

// Remove deletes the run's two streams (and so its consumers) from the
// server: for a run on a shared external server.
func (b *Broker) Remove(ctx context.Context) error {
	for _, name := range []string{b.stream, b.dlqStream} {
		rctx, cancel := context.WithTimeout(ctx, b.cfg.RequestTimeout)
		err := b.js.DeleteStream(rctx, name)
		cancel()
		if err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			return b.outage("delete stream "+name, err)
		}
	}
	return nil
}

// StreamName and DeadLetterStreamName name the run's streams.
func (b *Broker) StreamName() string { return b.stream }

// DeadLetterStreamName is the dead-letter stream's name.
func (b *Broker) DeadLetterStreamName() string { return b.dlqStream }

func (b *Broker) createStreams(ctx context.Context) error {
	real := max(b.cfg.Timing.Real(b.cfg.Window), minDuplicateWindow)
	for _, sc := range []jetstream.StreamConfig{
		{Name: b.stream, Subjects: []string{b.subject}, Storage: jetstream.FileStorage, Duplicates: real},
		{Name: b.dlqStream, Subjects: []string{b.dlqSubj}, Storage: jetstream.FileStorage, Duplicates: minDuplicateWindow},
	} {
		rctx, cancel := context.WithTimeout(ctx, b.cfg.RequestTimeout)
		_, err := b.js.CreateOrUpdateStream(rctx, sc)
		cancel()
		if err != nil {
			return b.outage("create stream "+sc.Name, err)
		}
	}
	b.window, b.scenWin = real, b.cfg.Window
	return nil
}

// setWindow makes the stream's duplicate window the real duration of the
// scenario window w, updating the stream when it differs. Lock not held.
func (b *Broker) setWindow(ctx context.Context, w time.Duration) error {
	b.clock.cover(w)
	real := max(b.clock.current().Real(w), minDuplicateWindow)
	b.mu.Lock()
	same := real == b.window
	b.mu.Unlock()
	if same {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, b.cfg.RequestTimeout)
	defer cancel()
	s, err := b.js.Stream(rctx, b.stream)
	if err != nil {
		return b.outage("read stream "+b.stream, err)
	}
	sc := s.CachedInfo().Config
	sc.Duplicates = real
	if _, err := b.js.UpdateStream(rctx, sc); err != nil {
		return b.outage("update the duplicate window of "+b.stream, err)
	}
	b.mu.Lock()
	b.window, b.scenWin = real, w
	b.note(fmt.Sprintf("duplicate window set to %s real for the scenario's %s", real, w))
	b.mu.Unlock()
	return nil
}

// requestCtx bounds one request by the configured timeout.
func (b *Broker) requestCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, b.cfg.RequestTimeout)
}
