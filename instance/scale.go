package instance

import (
	"context"
	"errors"
	"time"

	"github.com/outboxlab/outboxlab/failpoint"
	"github.com/outboxlab/outboxlab/proc"
	"github.com/outboxlab/outboxlab/store"
)

// ScaleWorker is a worker of session 21: its claimer ([store.Claimer]) on
// its own connection.
type ScaleWorker interface {
	Claim(ctx context.Context, now time.Time, lease time.Duration, limit int) (store.ClaimedBatch, error)
	Finalize(ctx context.Context, msgs []store.ClaimedMessage, now time.Time) (store.FinalizedBatch, error)
	// PageReads is what the worker's connection has read so far (SQLite's
	// page count; see [store.DB.PageReads]).
	PageReads(ctx context.Context) (int64, error)
	// FlushStats hands the connection's statistics to the server now
	// (PostgreSQL; see [store.DB.FlushStats]).
	FlushStats(ctx context.Context) error
	// Message reads message id back on the worker's own connection: what
	// it does when its finalize changed 0 rows, to learn why.
	Message(ctx context.Context, id int64) (store.MessageState, error)
	Lifecycle
}

// ScaleWorker opens worker's connection to the database at path, in
// phase, and prepares its claimer with cfg.
func (o *Opener) ScaleWorker(ctx context.Context, path, phase, worker string, cfg store.ClaimerConfig) (ScaleWorker, error) {
	if !o.cfg.Processes {
		db, err := o.cfg.Open(ctx, path)
		if err != nil {
			return nil, err
		}
		cl, err := store.NewClaimer(ctx, db, worker, cfg)
		if err != nil {
			db.Close()
			return nil, err
		}
		return &inProcessScaleWorker{cl, &inProcess{db: db}}, nil
	}
	c, err := o.start(ctx, path, phase, worker, scaleWorkerRole, scaleWorkerWork{Worker: worker, Config: cfg})
	if err != nil {
		return nil, err
	}
	return &childScaleWorker{c}, nil
}

// inProcessScaleWorker is a worker in the lab's process.
type inProcessScaleWorker struct {
	claimer *store.Claimer
	*inProcess
}

func (w *inProcessScaleWorker) Claim(ctx context.Context, now time.Time, lease time.Duration, limit int) (store.ClaimedBatch, error) {
	return w.claimer.Claim(ctx, now, lease, limit)
}

func (w *inProcessScaleWorker) Finalize(ctx context.Context, msgs []store.ClaimedMessage, now time.Time) (store.FinalizedBatch, error) {
	return w.claimer.Finalize(ctx, msgs, now)
}

func (w *inProcessScaleWorker) PageReads(ctx context.Context) (int64, error) {
	return w.db.PageReads(ctx)
}
func (w *inProcessScaleWorker) FlushStats(ctx context.Context) error { return w.db.FlushStats(ctx) }

func (w *inProcessScaleWorker) Message(ctx context.Context, id int64) (store.MessageState, error) {
	return w.db.MessageState(ctx, id)
}

// Close releases the claimer and closes the connection.
func (w *inProcessScaleWorker) Close(ctx context.Context) error {
	if w.closed {
		return nil
	}
	return errors.Join(w.claimer.Close(), w.inProcess.Close(ctx))
}

// Crash is the close of a worker holding a lease: its connection and its
// memory go.
func (w *inProcessScaleWorker) Crash(ctx context.Context, _ failpoint.Point) (string, error) {
	return "", w.Close(ctx)
}

// scaleWorkerRole is a worker of a drain (the one that crashes, the one
// that stalls, the drain workers) as a child process.
const scaleWorkerRole = "scale-worker"

// scaleWorkerWork is what a scale-worker child is: Worker, claiming and
// finalizing with Config.
type scaleWorkerWork struct {
	Worker string
	Config store.ClaimerConfig
}

// The arguments of a claim of up to Limit messages and of a finalization
// of a batch, as they cross the pipe: the scale worker's and the batch
// relay's.
type (
	batchClaimArgs struct {
		Now   time.Time
		Lease time.Duration
		Limit int
	}
	batchFinalizeArgs struct {
		Messages []store.ClaimedMessage
		Now      time.Time
	}
)

// scaleWorkerOps are the scale-worker child's operations.
var scaleWorkerOps = struct {
	Claim    proc.Operation[batchClaimArgs, store.ClaimedBatch]
	Finalize proc.Operation[batchFinalizeArgs, store.FinalizedBatch]
	Pages    proc.Operation[proc.None, int64]
	Flush    proc.Operation[proc.None, proc.None]
	Message  proc.Operation[int64, store.MessageState]
}{
	Claim:    proc.Operation[batchClaimArgs, store.ClaimedBatch]{Name: "claim"},
	Finalize: proc.Operation[batchFinalizeArgs, store.FinalizedBatch]{Name: "finalize"},
	Pages:    proc.Operation[proc.None, int64]{Name: "pages"},
	Flush:    proc.Operation[proc.None, proc.None]{Name: "flush"},
	Message:  proc.Operation[int64, store.MessageState]{Name: "message"},
}

// serveScaleWorker is the scale-worker child: its claimer on its own
// connection, its claims, finalizations and statistics at the lab's
// command.
func serveScaleWorker(ctx context.Context, w *proc.Worker) (any, error) {
	var work scaleWorkerWork
	db, err := w.Begin(ctx, &work)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	cl, err := store.NewClaimer(ctx, db, work.Worker, work.Config)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	return nil, w.Answer(ctx,
		scaleWorkerOps.Claim.Handle(func(ctx context.Context, a batchClaimArgs) (store.ClaimedBatch, error) {
			return cl.Claim(ctx, a.Now, a.Lease, a.Limit)
		}),
		scaleWorkerOps.Finalize.Handle(func(ctx context.Context, a batchFinalizeArgs) (store.FinalizedBatch, error) {
			return cl.Finalize(ctx, a.Messages, a.Now)
		}),
		scaleWorkerOps.Pages.Handle(func(ctx context.Context, _ proc.None) (int64, error) { return db.PageReads(ctx) }),
		scaleWorkerOps.Flush.Handle(func(ctx context.Context, _ proc.None) (proc.None, error) { return proc.None{}, db.FlushStats(ctx) }),
		scaleWorkerOps.Message.Handle(db.MessageState),
	)
}

// childScaleWorker is a worker in a child process.
type childScaleWorker struct{ *child }

func (c *childScaleWorker) Claim(ctx context.Context, now time.Time, lease time.Duration, limit int) (store.ClaimedBatch, error) {
	return call(ctx, c.child, scaleWorkerOps.Claim, batchClaimArgs{now, lease, limit})
}

func (c *childScaleWorker) Finalize(ctx context.Context, msgs []store.ClaimedMessage, now time.Time) (store.FinalizedBatch, error) {
	return call(ctx, c.child, scaleWorkerOps.Finalize, batchFinalizeArgs{msgs, now})
}

func (c *childScaleWorker) PageReads(ctx context.Context) (int64, error) {
	return call(ctx, c.child, scaleWorkerOps.Pages, proc.None{})
}

func (c *childScaleWorker) FlushStats(ctx context.Context) error {
	_, err := call(ctx, c.child, scaleWorkerOps.Flush, proc.None{})
	return err
}

func (c *childScaleWorker) Message(ctx context.Context, id int64) (store.MessageState, error) {
	return call(ctx, c.child, scaleWorkerOps.Message, id)
}
