package scenarios

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

// checkoutRole is session 14's checkout instance as a child process.
const checkoutRole = cast.Checkout

// checkoutWork is what the checkout child writes: the payment, as the
// phase's design says, at the scenario clock's time.
type checkoutWork struct {
	Write   store.PaymentWrite `json:"write"`
	Payment store.NewPayment   `json:"payment"`
	Now     time.Time          `json:"now"`
}

// checkoutAt is what the checkout child says at the failpoint between its
// payment insert and its outbox insert.
type checkoutAt struct {
	Key string `json:"key"`
	// OpenTransaction: the payment row is inserted in a transaction still
	// open (one transaction); false: the payment has committed alone.
	OpenTransaction bool `json:"openTransaction"`
}

// runCheckoutChild is the checkout child: it writes its payment and, between
// the payment and the outbox insert, reports the failpoint and waits there
// for the parent's word, or its SIGKILL.
func runCheckoutChild(ctx context.Context, w *proc.Worker) (any, error) {
	var work checkoutWork
	if err := w.Work(&work); err != nil {
		return nil, err
	}
	db, err := w.Open(ctx)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	var reachErr error
	_, err = store.NewPayments(db, work.Write).Create(ctx, work.Payment, work.Now, func() bool {
		reachErr = w.Reach(failpoint.BetweenOutboxWrites, checkoutAt{Key: work.Payment.Key, OpenTransaction: !work.Write.Split})
		return reachErr != nil // the parent is gone: die here, as the lesson's crash would
	})
	if reachErr != nil {
		return nil, reachErr
	}
	if err != nil {
		return nil, err
	}
	return checkoutAt{Key: work.Payment.Key}, nil
}

// crashPhaseInChild is [session14Run.crashPhase] with checkout as a child
// process: at the failpoint the plan's crash is a SIGKILL of the child, and
// "Instance dead" is its wait status. A child let go on commits its write;
// then checkout's provider call, which follows the commit, is made here,
// where the provider lives.
func (run *session14Run) crashPhaseInChild(ctx context.Context, st durableState, design crashPhaseDesign, path string, plan *failpoint.Plan) (durableState, error) {
	if design.pay != nil {
		return st, errors.New("session 14: this design's pay step runs in-process only; run it without Processes")
	}
	p := crashedPayment
	callsBefore := len(run.prov.CreationCalls())
	child, err := run.env.startChild(ctx, checkoutRole, path, checkoutWork{Write: design.write, Payment: p, Now: run.clk.Now()})
	if err != nil {
		return st, err
	}
	defer child.Stop()
	run.event(cast.Checkout, st.phase+": create payment", fmt.Sprintf("%s %d cents, %s; checkout runs as child process %d",
		p.Key, p.AmountCents, st.design, child.Pid()))
	for {
		r, err := child.Next(ctx)
		if err != nil {
			return st, err
		}
		if r.Done {
			if err := run.env.waitChild(child, st.phase); err != nil {
				return st, err
			}
			run.prov.Create(cast.Checkout, p.Key)
			run.event(cast.Checkout, st.phase+": committed", fmt.Sprintf("no crash happened: process %d committed and exited; then registered at the provider", child.Pid()))
			break
		}
		var at checkoutAt
		if err := r.Decode(&at); err != nil || r.At != failpoint.BetweenOutboxWrites {
			return st, fmt.Errorf("session 14: checkout process %d reported %s %s, not its failpoint %s", child.Pid(), r.At, r.State, failpoint.BetweenOutboxWrites)
		}
		if plan.Fire(r.At, cast.Checkout, at.Key) != failpoint.Crash {
			if err := child.GoOn(); err != nil {
				return st, err
			}
			continue
		}
		death, err := run.env.killChild(child, st.phase, r.At)
		if err != nil {
			return st, err
		}
		st.died = death.Signal == "killed"
		left := "its payment transaction had committed and its outbox transaction had not begun"
		if at.OpenTransaction {
			left = "its transaction was open: the payment row inserted, not committed, the outbox row not written"
		}
		run.event(cast.Checkout, "CRASH", fmt.Sprintf("failpoint %s: %s; %s; the provider was never called", r.At, childDeath(death), left))
		break
	}
	for _, f := range plan.Fired() {
		st.fired = st.fired || f.Fault == failpoint.Crash
	}
	st.providerCalls = len(run.prov.CreationCalls()) - callsBefore
	return run.durableState(ctx, st, path)
}
