package instance

import (
	"context"
	"errors"
	"time"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/failpoint"
	"github.com/outboxlab/outboxlab/proc"
	"github.com/outboxlab/outboxlab/store"
)

// Outbox is a worker of session 15: the outbox statements on its own
// connection ([store.Outbox]).
type Outbox interface {
	cast.Outbox
	Lifecycle
}

// Outbox opens outbox worker name, of phase ("" for none), with the
// statements sqls on the database at path. On PostgreSQL each of its
// claims watches for workers waiting on its row lock for up to lockWatch
// (0: none; see [store.Outbox.WatchLockWaits]).
func (o *Opener) Outbox(ctx context.Context, path, phase, name string, sqls store.OutboxSQL, lockWatch time.Duration) (Outbox, error) {
	if !o.cfg.Processes {
		db, err := o.cfg.Open(ctx, path)
		if err != nil {
			return nil, err
		}
		return &inProcessOutbox{store.NewOutbox(db, sqls).WatchLockWaits(lockWatch), &inProcess{db: db}}, nil
	}
	c, err := o.start(ctx, path, phase, name, outboxRole, outboxWork{SQL: sqls, Instance: name, LockWatch: lockWatch})
	if err != nil {
		return nil, err
	}
	return &childOutbox{c, sqls}, nil
}

// inProcessOutbox is an outbox worker in the lab's process.
type inProcessOutbox struct {
	*store.Outbox
	*inProcess
}

// outboxRole is an outbox worker as a child process.
const outboxRole = "outbox-instance"

// outboxWork is what an outbox-instance child is: Instance, running the
// outbox statements SQL, watching for lock waits for up to LockWatch.
type outboxWork struct {
	SQL       store.OutboxSQL
	Instance  string
	LockWatch time.Duration
}

// The outbox operations' arguments, as they cross the pipe.
type (
	claimArgs struct {
		ID    int64 // 0: the next claimable message
		Now   time.Time
		Lease store.OutboxLease
		// Hold: the claim stops at failpoint
		// between-claim-select-and-update until the lab lets it go on.
		Hold bool
	}
	finalizeArgs struct {
		ID      int64
		Worker  string
		Outcome store.Outcome
		Now     time.Time
	}
)

// outboxOps are the outbox-instance child's operations.
var outboxOps = struct {
	Load     proc.Operation[proc.None, []store.Message]
	Claim    proc.Operation[claimArgs, store.Claim]
	Finalize proc.Operation[finalizeArgs, store.Finalization]
}{
	Load:     proc.Operation[proc.None, []store.Message]{Name: "load"},
	Claim:    proc.Operation[claimArgs, store.Claim]{Name: "claim"},
	Finalize: proc.Operation[finalizeArgs, store.Finalization]{Name: "finalize"},
}

// serveOutbox is the outbox-instance child: its own connection, and the
// outbox statements performed at the lab's command.
func serveOutbox(ctx context.Context, w *proc.Worker) (any, error) {
	var work outboxWork
	db, err := w.Begin(ctx, &work)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	out := store.NewOutbox(db, work.SQL).WatchLockWaits(work.LockWatch)
	return nil, w.Answer(ctx,
		outboxOps.Load.Handle(func(ctx context.Context, _ proc.None) ([]store.Message, error) { return out.LoadPending(ctx) }),
		outboxOps.Claim.Handle(func(ctx context.Context, a claimArgs) (store.Claim, error) {
			if a.ID != 0 {
				return out.ClaimMessage(ctx, a.ID, a.Now, a.Lease)
			}
			var between func()
			var held error
			if a.Hold {
				// The claim keeps its call's time after the hold, as the
				// lab's ClaimNext does: the go-on's clock is that time.
				between = func() { _, held = w.Reach(failpoint.BetweenClaimSelectAndUpdate, nil) }
			}
			c, err := out.ClaimNext(ctx, a.Now, a.Lease, between)
			if held != nil {
				return store.Claim{}, held
			}
			return c, err
		}),
		outboxOps.Finalize.Handle(func(ctx context.Context, a finalizeArgs) (store.Finalization, error) {
			return out.Finalize(ctx, a.ID, a.Worker, a.Outcome, a.Now)
		}),
	)
}

// childOutbox is an outbox worker in a child process: each method is a
// call the child performs on its own connection.
type childOutbox struct {
	*child
	sqls store.OutboxSQL
}

func (c *childOutbox) LoadPending(ctx context.Context) ([]store.Message, error) {
	return call(ctx, c.child, outboxOps.Load, proc.None{})
}

// ClaimNext claims the next claimable message. With between, the child
// stops at failpoint between-claim-select-and-update; the lab runs
// between (the lesson's barrier) and lets it go on.
func (c *childOutbox) ClaimNext(ctx context.Context, now time.Time, lease store.OutboxLease, between func()) (store.Claim, error) {
	cl, err := outboxOps.Claim.Call(ctx, c.pc, claimArgs{Now: now, Lease: lease, Hold: between != nil})
	var reached *proc.Reached
	if errors.As(err, &reached) && reached.Report.At == failpoint.BetweenClaimSelectAndUpdate {
		between()
		if err = c.pc.GoOn(now); err == nil {
			cl, err = outboxOps.Claim.Result(ctx, c.pc)
		}
	}
	return cl, callError(err)
}

func (c *childOutbox) ClaimMessage(ctx context.Context, id int64, now time.Time, lease store.OutboxLease) (store.Claim, error) {
	return call(ctx, c.child, outboxOps.Claim, claimArgs{ID: id, Now: now, Lease: lease})
}

func (c *childOutbox) Finalize(ctx context.Context, id int64, worker string, out store.Outcome, now time.Time) (store.Finalization, error) {
	return call(ctx, c.child, outboxOps.Finalize, finalizeArgs{id, worker, out, now})
}

func (c *childOutbox) Statements() store.OutboxSQL { return c.sqls }
