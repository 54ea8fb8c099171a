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
	return nil, w.Answer(ctx, map[string]proc.Op{
		"claim": op(func(ctx context.Context, a batchClaimArgs) (any, error) {
			return cl.Claim(ctx, a.Now, a.Lease, a.Limit)
		}),
		"finalize": op(func(ctx context.Context, a batchFinalizeArgs) (any, error) {
			return cl.Finalize(ctx, a.Messages, a.Now)
		}),
		"pages":   op(func(ctx context.Context, _ struct{}) (any, error) { return db.PageReads(ctx) }),
		"flush":   op(func(ctx context.Context, _ struct{}) (any, error) { return nil, db.FlushStats(ctx) }),
		"message": op(func(ctx context.Context, id int64) (any, error) { return db.MessageState(ctx, id) }),
	})
}

// childScaleWorker is a worker in a child process.
type childScaleWorker struct{ *child }

func (c *childScaleWorker) Claim(ctx context.Context, now time.Time, lease time.Duration, limit int) (store.ClaimedBatch, error) {
	var b store.ClaimedBatch
	return b, c.call(ctx, "claim", batchClaimArgs{now, lease, limit}, &b)
}

func (c *childScaleWorker) Finalize(ctx context.Context, msgs []store.ClaimedMessage, now time.Time) (store.FinalizedBatch, error) {
	var f store.FinalizedBatch
	return f, c.call(ctx, "finalize", batchFinalizeArgs{msgs, now}, &f)
}

func (c *childScaleWorker) PageReads(ctx context.Context) (int64, error) {
	var n int64
	return n, c.call(ctx, "pages", struct{}{}, &n)
}

func (c *childScaleWorker) FlushStats(ctx context.Context) error {
	return c.call(ctx, "flush", struct{}{}, nil)
}

func (c *childScaleWorker) Message(ctx context.Context, id int64) (store.MessageState, error) {
	var m store.MessageState
	return m, c.call(ctx, "message", id, &m)
}
