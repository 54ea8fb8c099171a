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
		return &scaleWorker{runsOn[scaleService]{service: scaleService{cl, db}}, &inProcessScaleWorker{cl, &inProcess{db: db}}}, nil
	}
	c, err := o.start(ctx, path, phase, worker, scaleWorkerRole, scaleWorkerWork{Worker: worker, Config: cfg})
	if err != nil {
		return nil, err
	}
	return &scaleWorker{runsOn[scaleService]{child: c}, c}, nil
}

// scaleService is a session-21 worker's own side, in the lab's process
// or in a child: its claimer on its connection db.
type scaleService struct {
	claimer *store.Claimer
	db      *store.DB
}

// scaleWorker is a worker in the lab's process or in a child process:
// each method one of scaleWorkerOps, performed where it runs.
type scaleWorker struct {
	on runsOn[scaleService]
	Lifecycle
}

func (w *scaleWorker) Claim(ctx context.Context, now time.Time, lease time.Duration, limit int) (store.ClaimedBatch, error) {
	return perform(ctx, w.on, scaleWorkerOps.Claim, batchClaimArgs{now, lease, limit})
}

func (w *scaleWorker) Finalize(ctx context.Context, msgs []store.ClaimedMessage, now time.Time) (store.FinalizedBatch, error) {
	return perform(ctx, w.on, scaleWorkerOps.Finalize, batchFinalizeArgs{msgs, now})
}

func (w *scaleWorker) PageReads(ctx context.Context) (int64, error) {
	return perform(ctx, w.on, scaleWorkerOps.Pages, proc.None{})
}

func (w *scaleWorker) FlushStats(ctx context.Context) error {
	_, err := perform(ctx, w.on, scaleWorkerOps.Flush, proc.None{})
	return err
}

func (w *scaleWorker) Message(ctx context.Context, id int64) (store.MessageState, error) {
	return perform(ctx, w.on, scaleWorkerOps.Message, id)
}

// inProcessScaleWorker is a worker's life in the lab's process.
type inProcessScaleWorker struct {
	claimer *store.Claimer
	*inProcess
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

// scaleWorkerMethod is an operation of a session-21 worker.
type scaleWorkerMethod[A, R any] = method[scaleService, A, R]

// scaleWorkerOps are a session-21 worker's operations, in the lab's
// process and in the scale-worker child.
var scaleWorkerOps = struct {
	Claim    scaleWorkerMethod[batchClaimArgs, store.ClaimedBatch]
	Finalize scaleWorkerMethod[batchFinalizeArgs, store.FinalizedBatch]
	Pages    scaleWorkerMethod[proc.None, int64]
	Flush    scaleWorkerMethod[proc.None, proc.None]
	Message  scaleWorkerMethod[int64, store.MessageState]
}{
	Claim: newMethod("claim", func(ctx context.Context, s scaleService, a batchClaimArgs) (store.ClaimedBatch, error) {
		return s.claimer.Claim(ctx, a.Now, a.Lease, a.Limit)
	}),
	Finalize: newMethod("finalize", func(ctx context.Context, s scaleService, a batchFinalizeArgs) (store.FinalizedBatch, error) {
		return s.claimer.Finalize(ctx, a.Messages, a.Now)
	}),
	Pages: newMethod("pages", func(ctx context.Context, s scaleService, _ proc.None) (int64, error) {
		return s.db.PageReads(ctx)
	}),
	Flush: newMethod("flush", func(ctx context.Context, s scaleService, _ proc.None) (proc.None, error) {
		return proc.None{}, s.db.FlushStats(ctx)
	}),
	Message: newMethod("message", func(ctx context.Context, s scaleService, id int64) (store.MessageState, error) {
		return s.db.MessageState(ctx, id)
	}),
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
	s := scaleService{cl, db}
	return nil, w.Answer(ctx, scaleWorkerOps.Claim.serve(s), scaleWorkerOps.Finalize.serve(s),
		scaleWorkerOps.Pages.serve(s), scaleWorkerOps.Flush.serve(s), scaleWorkerOps.Message.serve(s))
}
