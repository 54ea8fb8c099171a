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
		s, err := openBatch(ctx, db, owner, cfg)
		if err != nil {
			db.Close()
			return nil, err
		}
		return &batchRelay{runsOn[batchService]{service: s}, &inProcessBatch{s, &inProcess{db: db}}}, nil
	}
	c, err := o.start(ctx, path, phase, owner, batchRelayRole, batchRelayWork{Owner: owner, Config: cfg})
	if err != nil {
		return nil, err
	}
	return &batchRelay{runsOn[batchService]{child: c}, c}, nil
}

// batchService is a fetch-ahead process's own side, in the lab's process
// or in a child: its fetcher and completer on its connection db.
type batchService struct {
	fetcher   *store.Fetcher
	completer *store.Completer
	db        *store.DB
}

// openBatch prepares owner's fetcher and completer on db.
func openBatch(ctx context.Context, db *store.DB, owner string, cfg store.FetchAheadConfig) (batchService, error) {
	f, err := store.NewFetcher(ctx, db, owner, cfg)
	if err != nil {
		return batchService{}, err
	}
	c, err := store.NewCompleter(ctx, db, owner, cfg)
	if err != nil {
		f.Close()
		return batchService{}, err
	}
	return batchService{f, c, db}, nil
}

// close releases the fetcher's and the completer's statements.
func (s batchService) close() error { return errors.Join(s.fetcher.Close(), s.completer.Close()) }

// batchRelay is a fetch-ahead process in the lab's process or in a child
// process: each method one of batchRelayOps, performed where it runs.
type batchRelay struct {
	on runsOn[batchService]
	Lifecycle
}

func (b *batchRelay) Fetch(ctx context.Context, now time.Time, lease time.Duration, limit int) (store.ClaimedBatch, error) {
	return perform(ctx, b.on, batchRelayOps.Fetch, batchClaimArgs{now, lease, limit})
}

func (b *batchRelay) Complete(ctx context.Context, msgs []store.ClaimedMessage, now time.Time) (store.FinalizedBatch, error) {
	return perform(ctx, b.on, batchRelayOps.Complete, batchFinalizeArgs{msgs, now})
}

func (b *batchRelay) Message(ctx context.Context, id int64) (store.MessageState, error) {
	return perform(ctx, b.on, batchRelayOps.Message, id)
}

// inProcessBatch is a fetch-ahead process's life in the lab's process.
type inProcessBatch struct {
	service batchService
	*inProcess
}

// Close releases the prepared statements and closes the connection.
func (b *inProcessBatch) Close(ctx context.Context) error {
	if b.closed {
		return nil
	}
	return errors.Join(b.service.close(), b.inProcess.Close(ctx))
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

// batchRelayMethod is an operation of a fetch-ahead process.
type batchRelayMethod[A, R any] = method[batchService, A, R]

// batchRelayOps are a fetch-ahead process's operations, in the lab's
// process and in the batch-relay child.
var batchRelayOps = struct {
	Fetch    batchRelayMethod[batchClaimArgs, store.ClaimedBatch]
	Complete batchRelayMethod[batchFinalizeArgs, store.FinalizedBatch]
	Message  batchRelayMethod[int64, store.MessageState]
}{
	Fetch: newMethod("fetch", func(ctx context.Context, s batchService, a batchClaimArgs) (store.ClaimedBatch, error) {
		return s.fetcher.Fetch(ctx, a.Now, a.Lease, a.Limit)
	}),
	Complete: newMethod("complete", func(ctx context.Context, s batchService, a batchFinalizeArgs) (store.FinalizedBatch, error) {
		return s.completer.Complete(ctx, a.Messages, a.Now)
	}),
	Message: newMethod("message", func(ctx context.Context, s batchService, id int64) (store.MessageState, error) {
		return s.db.MessageState(ctx, id)
	}),
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
	s, err := openBatch(ctx, db, work.Owner, work.Config)
	if err != nil {
		return nil, err
	}
	defer s.close()
	return nil, w.Answer(ctx, batchRelayOps.Fetch.serve(s), batchRelayOps.Complete.serve(s), batchRelayOps.Message.serve(s))
}
