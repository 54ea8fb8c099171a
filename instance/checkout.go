package instance

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/failpoint"
	"github.com/outboxlab/outboxlab/proc"
	"github.com/outboxlab/outboxlab/store"
)

// Checkout is session 14's checkout instance: it writes payments, each
// with its outbox message, through its payments service on its own
// connection, and may die between the two writes.
type Checkout interface {
	// Write writes p at now. At the failpoint between the payment and its
	// outbox message it asks crash (nil: never) whether it dies there; if
	// so, Write returns Crashed and the instance is gone.
	Write(ctx context.Context, p store.NewPayment, now time.Time, crash func() bool) (Written, error)
	// Dead reports whether the instance is gone, and how the lab knows.
	Dead(ctx context.Context) (dead bool, evidence string)
	// Where says where the instance runs, for the timeline: "" in the
	// lab's process.
	Where() string
	Closer
}

// Written is what a checkout's write came to.
type Written struct {
	// Crashed says the instance died at the failpoint.
	Crashed bool
	// Death names the killed process ("" in the lab's process).
	Death string
	// OpenTransaction says the payment row was inserted in a transaction
	// still open when it died (one transaction); false: the payment had
	// committed alone.
	OpenTransaction bool
}

// Checkout opens checkout in phase on the database at path, writing with
// the statements write.
func (o *Opener) Checkout(ctx context.Context, path, phase string, write store.PaymentWrite) (Checkout, error) {
	if !o.cfg.Processes {
		db, err := o.cfg.Open(ctx, path)
		if err != nil {
			return nil, err
		}
		return &inProcessCheckout{store.NewPayments(db, write), write, &inProcess{db: db}}, nil
	}
	c, err := o.start(ctx, path, phase, cast.Checkout, checkoutRole, checkoutWork{Write: write})
	if err != nil {
		return nil, err
	}
	return &childCheckout{c}, nil
}

// inProcessCheckout is checkout in the lab's process: a crash closes its
// connection in the middle of its write.
type inProcessCheckout struct {
	payments *store.Payments
	write    store.PaymentWrite
	*inProcess
}

func (c *inProcessCheckout) Write(ctx context.Context, p store.NewPayment, now time.Time, crash func() bool) (Written, error) {
	_, err := c.payments.Create(ctx, p, now, crash)
	if errors.Is(err, store.ErrCrashed) {
		return Written{Crashed: true, OpenTransaction: !c.write.Split()}, nil
	}
	return Written{}, err
}

// Dead: a dead instance answers no query, its connection gone.
func (c *inProcessCheckout) Dead(ctx context.Context) (bool, string) {
	_, err := c.payments.List(ctx)
	return err != nil, "the crashed instance refusing a query afterwards"
}

func (*inProcessCheckout) Where() string { return "" }

// checkoutRole is checkout as a child process.
const checkoutRole = cast.Checkout

// checkoutWork is what a checkout child writes with.
type checkoutWork struct {
	Write store.PaymentWrite
}

// checkoutArgs is a write's call: the payment at the scenario clock's
// time, and whether to stop at the failpoint between its writes (Hold),
// where the lab lets it go on or kills it.
type checkoutArgs struct {
	Payment store.NewPayment
	Now     time.Time
	Hold    bool
}

// checkoutAt is what the checkout child says at the failpoint between its
// payment insert and its outbox insert.
type checkoutAt struct {
	Key             string
	OpenTransaction bool
}

// checkoutOps are the checkout child's operations.
var checkoutOps = struct {
	Write proc.Operation[checkoutArgs, proc.None]
}{
	Write: proc.Operation[checkoutArgs, proc.None]{Name: "write"},
}

// serveCheckout is the checkout child: it writes payments at the lab's
// command and, between a payment and its outbox insert, reports the
// failpoint and waits there for the lab's word, or its SIGKILL.
func serveCheckout(ctx context.Context, w *proc.Worker) (any, error) {
	var work checkoutWork
	db, err := w.Begin(ctx, &work)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	pays := store.NewPayments(db, work.Write)
	return nil, w.Answer(ctx,
		checkoutOps.Write.Handle(func(ctx context.Context, a checkoutArgs) (proc.None, error) {
			var crash func() bool
			var reachErr error
			if a.Hold {
				crash = func() bool {
					// The write keeps its call's time, as the lab's does:
					// the go-on's clock is that time.
					_, reachErr = w.Reach(failpoint.BetweenOutboxWrites, checkoutAt{Key: a.Payment.Key, OpenTransaction: !work.Write.Split()})
					return reachErr != nil // the parent is gone: die here, as the lesson's crash would
				}
			}
			_, err := pays.Create(ctx, a.Payment, a.Now, crash)
			if reachErr != nil {
				return proc.None{}, reachErr
			}
			return proc.None{}, err
		}),
	)
}

// childCheckout is checkout in a child process: a crash is a SIGKILL at
// the failpoint, and the instance is dead by its wait status.
type childCheckout struct{ *child }

func (c *childCheckout) Write(ctx context.Context, p store.NewPayment, now time.Time, crash func() bool) (Written, error) {
	_, err := checkoutOps.Write.Call(ctx, c.pc, checkoutArgs{Payment: p, Now: now, Hold: crash != nil})
	var reached *proc.Reached
	if !errors.As(err, &reached) {
		return Written{}, callError(err)
	}
	var at checkoutAt
	if err := reached.Report.Decode(&at); err != nil || reached.Report.At != failpoint.BetweenOutboxWrites {
		return Written{}, fmt.Errorf("checkout process %d reported %s %s, not its failpoint %s",
			c.pc.Pid(), reached.Report.At, clip(reached.Report.State), failpoint.BetweenOutboxWrites)
	}
	if !crash() {
		if err := c.pc.GoOn(now); err != nil {
			return Written{}, err
		}
		_, err := checkoutOps.Write.Result(ctx, c.pc)
		return Written{}, callError(err)
	}
	death, err := c.Crash(ctx, failpoint.BetweenOutboxWrites)
	if err != nil {
		return Written{}, err
	}
	return Written{Crashed: true, Death: death, OpenTransaction: at.OpenTransaction}, nil
}

// Dead: the child was killed by SIGKILL, as its wait status says.
func (c *childCheckout) Dead(context.Context) (bool, string) {
	return c.dead, "the checkout child's wait status (killed by SIGKILL)"
}

func (c *childCheckout) Where() string {
	return fmt.Sprintf("checkout runs as child process %d", c.pc.Pid())
}
