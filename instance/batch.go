package instance

import (
	"context"
	"errors"
	"time"

	"github.com/outboxlab/outboxlab/failpoint"
	"github.com/outboxlab/outboxlab/proc"
	"github.com/outboxlab/outboxlab/store"
)

// BatchRelay is a process of the fetch-ahead design (River's shape): its
// one fetcher, which claims up to its free workers' count in one
// statement, and its completer, which marks what its workers finished in
// one statement, on the process's own connection.
type BatchRelay interface {
	Fetch(ctx context.Context, now time.Time, lease time.Duration, limit int) (store.ClaimedBatch, error)
	Complete(ctx context.Context, msgs []store.ClaimedMessage, now time.Time) (store.FinalizedBatch, error)
	// Message reads message id back on the process's own connection: what
	// its completer does when a row of its batch changed nothing, to learn
	// why.
	Message(ctx context.Context, id int64) (store.MessageState, error)
	Lifecycle
}

// BatchRelay opens process owner, in phase, on the database at path, its
// fetcher and completer running cfg's statements.
func (o *Opener) BatchRelay(ctx context.Context, path, phase, owner string, cfg store.FetchAheadConfig) (BatchRelay, error) {
	if !o.cfg.Processes {
		db, err := o.cfg.Open(ctx, path)
		if err != nil {
			return nil, err
		}
		f, c, err := openBatch(ctx, db, owner, cfg)
		if err != nil {
			db.Close()
			return nil, err
		}
		return &inProcessBatch{f, c, &inProcess{db: db}}, nil
	}
	c, err := o.start(ctx, path, phase, owner, batchRelayRole, batchRelayWork{Owner: owner, Config: cfg})
	if err != nil {
		return nil, err
	}
	return &childBatch{c}, nil
}

// openBatch prepares owner's fetcher and completer on db.
func openBatch(ctx context.Context, db *store.DB, owner string, cfg store.FetchAheadConfig) (*store.Fetcher, *store.Completer, error) {
	f, err := store.NewFetcher(ctx, db, owner, cfg)
	if err != nil {
		return nil, nil, err
	}
	c, err := store.NewCompleter(ctx, db, owner, cfg)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, c, nil
}

// inProcessBatch is a fetch-ahead process in the lab's process.
type inProcessBatch struct {
	fetcher   *store.Fetcher
	completer *store.Completer
	*inProcess
}

func (b *inProcessBatch) Fetch(ctx context.Context, now time.Time, lease time.Duration, limit int) (store.ClaimedBatch, error) {
	return b.fetcher.Fetch(ctx, now, lease, limit)
}

func (b *inProcessBatch) Complete(ctx context.Context, msgs []store.ClaimedMessage, now time.Time) (store.FinalizedBatch, error) {
	return b.completer.Complete(ctx, msgs, now)
}

func (b *inProcessBatch) Message(ctx context.Context, id int64) (store.MessageState, error) {
	return b.db.MessageState(ctx, id)
}

// Close releases the prepared statements and closes the connection.
func (b *inProcessBatch) Close(ctx context.Context) error {
	if b.closed {
		return nil
	}
	return errors.Join(b.fetcher.Close(), b.completer.Close(), b.inProcess.Close(ctx))
}

// Crash is the close of a process holding leases: its connection and its
// memory go.
func (b *inProcessBatch) Crash(ctx context.Context, _ failpoint.Point) (string, error) {
	return "", b.Close(ctx)
}

// batchRelayRole is a fetch-ahead process as a child process.
const batchRelayRole = "batch-relay"

// batchRelayWork is what a batch-relay child is: Owner, fetching and
// completing with Config.
type batchRelayWork struct {
	Owner  string
	Config store.FetchAheadConfig
}

// batchRelayOps are the batch-relay child's operations.
var batchRelayOps = struct {
	Fetch    proc.Operation[batchClaimArgs, store.ClaimedBatch]
	Complete proc.Operation[batchFinalizeArgs, store.FinalizedBatch]
	Message  proc.Operation[int64, store.MessageState]
}{
	Fetch:    proc.Operation[batchClaimArgs, store.ClaimedBatch]{Name: "fetch"},
	Complete: proc.Operation[batchFinalizeArgs, store.FinalizedBatch]{Name: "complete"},
	Message:  proc.Operation[int64, store.MessageState]{Name: "message"},
}

// serveBatchRelay is the batch-relay child: its fetcher and completer on
// its own connection, at the lab's command.
func serveBatchRelay(ctx context.Context, w *proc.Worker) (any, error) {
	var work batchRelayWork
	db, err := w.Begin(ctx, &work)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	f, c, err := openBatch(ctx, db, work.Owner, work.Config)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	defer c.Close()
	return nil, w.Answer(ctx,
		batchRelayOps.Fetch.Handle(func(ctx context.Context, a batchClaimArgs) (store.ClaimedBatch, error) {
			return f.Fetch(ctx, a.Now, a.Lease, a.Limit)
		}),
		batchRelayOps.Complete.Handle(func(ctx context.Context, a batchFinalizeArgs) (store.FinalizedBatch, error) {
			return c.Complete(ctx, a.Messages, a.Now)
		}),
		batchRelayOps.Message.Handle(db.MessageState),
	)
}

// childBatch is a fetch-ahead process in a child process.
type childBatch struct{ *child }

func (c *childBatch) Fetch(ctx context.Context, now time.Time, lease time.Duration, limit int) (store.ClaimedBatch, error) {
	return call(ctx, c.child, batchRelayOps.Fetch, batchClaimArgs{now, lease, limit})
}

func (c *childBatch) Complete(ctx context.Context, msgs []store.ClaimedMessage, now time.Time) (store.FinalizedBatch, error) {
	return call(ctx, c.child, batchRelayOps.Complete, batchFinalizeArgs{msgs, now})
}

func (c *childBatch) Message(ctx context.Context, id int64) (store.MessageState, error) {
	return call(ctx, c.child, batchRelayOps.Message, id)
}
