package bench

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxlab/outboxlab/clock"
	"github.com/outboxlab/outboxlab/natsbroker"
	"github.com/outboxlab/outboxlab/store"
)

// RelayConfig is the end-to-end relay bench (bench --broker nats): each
// worker claims a batch of messages (the indexed design's claim, a fencing
// token each), publishes every message of it to NATS JetStream with its Id
// as Nats-Msg-Id, asynchronously (the batch is the worker's window of
// publishes in flight), and finalizes the batch under its tokens only once
// JetStream acknowledged every publish of it;
// beside it, the same design with no broker (claim, finalize).
type RelayConfig struct {
	Dir         string // the bench's temporary folder: SQLite files, the embedded server's store
	Database    string // a postgres:// URL, or "" for SQLite files in Dir
	Synchronous string // SQLite's synchronous setting
	Messages    int
	Workers     []int
	Batch       int    // messages per claim, and so publishes in flight per worker
	Broker      string // "nats" (an embedded server in Dir) or a nats:// URL

	// skipPublish, set by a test, leaves the publish of a message out (a
	// relay that completes what it never sent): the bench must count it lost.
	skipPublish func(id int64) bool
}

// RelayRow is one drain: a worker count, with or without the broker.
type RelayRow struct {
	Workers  int
	Broker   string // "none" or "NATS JetStream"
	Messages int
	// Finalized counts the fenced finalizations that changed their row;
	// Refused those the token guard turned away (0 when no lease expires).
	Finalized, Refused int64
	Drain              time.Duration
	MsgsPerS           float64
	// AckP50Ms and AckP99Ms are publish-to-acknowledgement latencies.
	AckP50Ms, AckP99Ms float64
	// Duplicates are publishes JetStream answered as duplicates (its
	// window dropped them); Stored the messages the stream holds; Lost
	// the finalized messages whose Id the stream does not hold, read from
	// the stream itself.
	Duplicates, Stored, Lost int64
	PublishErrors            int64 // publishes that failed and were sent again
}

// RelayReport is the relay bench's result.
type RelayReport struct {
	Engine string // "SQLite" or "PostgreSQL"
	Server string // where the broker ran
	Rows   []RelayRow
}

// RunRelay runs the relay bench: for each worker count, the design with
// no broker, then through JetStream.
func RunRelay(ctx context.Context, cfg RelayConfig) (*RelayReport, error) {
	if cfg.Messages < 1 || len(cfg.Workers) == 0 || cfg.Batch < 1 {
		return nil, fmt.Errorf("bench: relay: messages %d, workers %v, batch %d: want each positive", cfg.Messages, cfg.Workers, cfg.Batch)
	}
	url, where := cfg.Broker, "the NATS JetStream server at "+natsbroker.Redacted(cfg.Broker)
	if cfg.Broker == "nats" {
		srv, err := natsbroker.Start(filepath.Join(cfg.Dir, "jetstream"))
		if err != nil {
			return nil, err
		}
		defer srv.Shutdown()
		url, where = srv.URL(), "an embedded NATS JetStream server (nats-server "+natsbroker.ServerVersion+", file storage)"
	}
	nc, err := natsbroker.Connect(url)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(publishTimeout))
	if err != nil {
		return nil, err
	}
	rep := &RelayReport{Engine: "SQLite", Server: where}
	if cfg.Database != "" {
		rep.Engine = "PostgreSQL"
	}
	for _, w := range cfg.Workers {
		for _, viaBroker := range []bool{false, true} {
			row, err := relayCell(ctx, cfg, js, w, viaBroker)
			if err != nil {
				return rep, err
			}
			rep.Rows = append(rep.Rows, row)
		}
	}
	return rep, nil
}

// relayCell drains a fresh backlog with w workers, through js or not.
func relayCell(ctx context.Context, cfg RelayConfig, js jetstream.JetStream, w int, viaBroker bool) (RelayRow, error) {
	row := RelayRow{Workers: w, Broker: "none", Messages: cfg.Messages}
	name := fmt.Sprintf("relay-w%d-%t", w, viaBroker)
	src, err := newSource(ctx, Config{Dir: cfg.Dir, Database: cfg.Database, Synchronous: cfg.Synchronous}, name)
	if err != nil {
		return row, err
	}
	defer src.cleanup()
	setup, err := seedCell(ctx, cell{messages: cfg.Messages}, src, nil)
	if err != nil {
		return row, err
	}
	defer setup.Close()
	var stream jetstream.Stream
	unique := strconv.FormatInt(time.Now().UnixNano(), 36) // a server may hold other benches' streams
	subject := "outboxlab.bench." + name + "." + unique
	if viaBroker {
		row.Broker = "NATS JetStream"
		stream, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "OUTBOXLAB_BENCH_" + unique,
			Subjects: []string{subject}, Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute})
		if err != nil {
			return row, fmt.Errorf("bench: create the stream: %w", err)
		}
		defer func() { _ = js.DeleteStream(context.WithoutCancel(ctx), stream.CachedInfo().Config.Name) }()
	}
	var (
		wg                                  sync.WaitGroup
		mu                                  sync.Mutex
		latencies                           []time.Duration
		finalized, refused, dups, pubErrors atomic.Int64
		firstErr                            error
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if firstErr == nil {
			firstErr = err
		}
	}
	started := time.Now()
	for i := range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			db, err := src.open(ctx)
			if err != nil {
				fail(err)
				return
			}
			defer db.Close()
			cl, err := store.NewClaimer(ctx, db, fmt.Sprintf("Relay-%d", i+1), store.ClaimerConfig{SQL: store.IndexedScale, Retry: store.DefaultRetry})
			if err != nil {
				fail(err)
				return
			}
			defer cl.Close()
			var own []time.Duration
			for ctx.Err() == nil {
				b, err := cl.Claim(ctx, clock.Real{}.Now(), time.Minute, cfg.Batch)
				if err != nil {
					fail(err)
					return
				}
				if len(b.Messages) == 0 {
					break
				}
				if viaBroker {
					lat, d, e, err := publishBatch(ctx, js, subject, slices.DeleteFunc(slices.Clone(b.Messages), func(m store.ClaimedMessage) bool {
						return cfg.skipPublish != nil && cfg.skipPublish(m.ID)
					}))
					if err != nil {
						fail(err)
						return
					}
					own = append(own, lat...)
					dups.Add(d)
					pubErrors.Add(e)
				}
				// The completion commits only now: every publish of the
				// batch was acknowledged.
				f, err := cl.Finalize(ctx, b.Messages, clock.Real{}.Now())
				if err != nil {
					fail(err)
					return
				}
				finalized.Add(int64(len(f.Finalized)))
				refused.Add(int64(len(f.Rejected)))
			}
			mu.Lock()
			latencies = append(latencies, own...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	row.Drain = time.Since(started)
	if firstErr != nil {
		return row, firstErr
	}
	row.Finalized, row.Refused, row.Duplicates, row.PublishErrors = finalized.Load(), refused.Load(), dups.Load(), pubErrors.Load()
	row.MsgsPerS = float64(row.Finalized) / row.Drain.Seconds()
	slices.Sort(latencies)
	row.AckP50Ms, row.AckP99Ms = quantileMs(latencies, 0.50), quantileMs(latencies, 0.99)
	if viaBroker {
		if row.Stored, row.Lost, err = lostFromStream(ctx, js, stream, setup); err != nil {
			return row, err
		}
	}
	return row, nil
}

// publishTimeout bounds the wait for one publish's acknowledgement.
const publishTimeout = 10 * time.Second

// publishBatch publishes each message of a claimed batch asynchronously
// (the batch is the worker's window), waits for every acknowledgement (at
// most publishTimeout each), and sends a failed publish again once,
// synchronously; a second failure ends the bench: the batch's completion
// may commit only after every publish of it was acknowledged. A latency is
// read when the worker takes the acknowledgement, in publish order: at
// most a later publish's wait behind an earlier one's, an upper bound.
func publishBatch(ctx context.Context, js jetstream.JetStream, subject string, msgs []store.ClaimedMessage) (lat []time.Duration, dups, errs int64, err error) {
	type pending struct {
		msg  store.ClaimedMessage
		at   time.Time
		done jetstream.PubAckFuture
	}
	ps := make([]pending, 0, len(msgs))
	for _, m := range msgs {
		at := time.Now()
		f, err := js.PublishAsync(subject, []byte(m.Payload), jetstream.WithMsgID(strconv.FormatInt(m.ID, 10)))
		if err != nil {
			return lat, dups, errs, fmt.Errorf("bench: publish %d: %w", m.ID, err)
		}
		ps = append(ps, pending{m, at, f})
	}
	for _, p := range ps {
		select {
		case ack := <-p.done.Ok():
			lat = append(lat, time.Since(p.at))
			if ack.Duplicate {
				dups++
			}
		case <-p.done.Err():
			errs++
			ack, err := js.Publish(ctx, subject, []byte(p.msg.Payload), jetstream.WithMsgID(strconv.FormatInt(p.msg.ID, 10)))
			if err != nil {
				return lat, dups, errs, fmt.Errorf("bench: publish %d again: %w", p.msg.ID, err)
			}
			lat = append(lat, time.Since(p.at))
			if ack.Duplicate {
				dups++
			}
		case <-ctx.Done():
			return lat, dups, errs, ctx.Err()
		}
	}
	return lat, dups, errs, nil
}

// lostFromStream reads every message of the stream back (an ordered
// consumer) and counts the finalized messages whose Id none carries.
func lostFromStream(ctx context.Context, js jetstream.JetStream, stream jetstream.Stream, db *store.DB) (stored, lost int64, err error) {
	info, err := stream.Info(ctx)
	if err != nil {
		return 0, 0, err
	}
	stored = int64(info.State.Msgs)
	held := make(map[string]bool, stored)
	if stored > 0 {
		cons, err := js.OrderedConsumer(ctx, info.Config.Name, jetstream.OrderedConsumerConfig{})
		if err != nil {
			return stored, 0, err
		}
		for int64(len(held)) < stored {
			batch, err := cons.Fetch(1000, jetstream.FetchMaxWait(2*time.Second))
			if err != nil {
				return stored, 0, err
			}
			n := 0
			for m := range batch.Messages() {
				held[m.Headers().Get(jetstream.MsgIDHeader)] = true
				n++
			}
			if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
				return stored, 0, err
			}
			if n == 0 {
				break
			}
		}
	}
	ids, err := db.ProcessedIDs(ctx)
	if err != nil {
		return stored, 0, err
	}
	for _, id := range ids {
		if !held[strconv.FormatInt(id, 10)] {
			lost++
		}
	}
	return stored, lost, nil
}

// quantileMs is the nearest-rank q-quantile of sorted, in milliseconds.
func quantileMs(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return float64(sorted[min(max(i, 0), len(sorted)-1)].Microseconds()) / 1000
}
