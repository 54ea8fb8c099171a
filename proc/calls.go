package proc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"syscall"
	"time"
)

// A child can also be an application instance at the parent's command:
// its role offers its operations, each an [Operation] with the handler
// [Operation.Handle] makes of a Go function, to [Worker.Answer], and the
// parent performs them one at a time with [Operation.Call]. Between two
// calls the child is idle, blocked reading its stdin, and the parent may
// stall it for real with [Child.Freeze] (SIGSTOP) and [Child.Thaw]
// (SIGCONT), or kill it with [Child.Kill]. [Child.Finish] ends it.
//
// An operation's arguments and result cross the pipe as JSON, encoded
// and decoded here only: by [Operation.Call] and [Operation.Result] in
// the parent, by the handler [Operation.Handle] makes in the child.

// Operation is one operation a role offers, typed: A its arguments, R its
// result. Name is what crosses the pipe; it is unique among its role's
// operations. Declare each operation once, as a value both ends use: a
// misspelt operation then does not compile.
type Operation[A, R any] struct{ Name string }

// None is the arguments or the result of an operation that has none. A
// None result crosses the pipe as no state at all.
type None = struct{}

// Call has the idle child c perform o with args, and returns its result.
// An operation that failed returns a [*CallError]; one that reached a
// failpoint (the child's role called [Worker.Reach] during it) returns a
// [*Reached], and its result comes later from [Operation.Result]. A child
// that dies, misbehaves or says nothing within the timeout is killed and
// Call returns an error naming it, as [Child.Next] does.
func (o Operation[A, R]) Call(ctx context.Context, c *Child, args A) (R, error) {
	var r R
	if err := c.awaitIdle(ctx, o.Name); err != nil {
		return r, err
	}
	a, err := json.Marshal(args)
	if err != nil {
		return r, fmt.Errorf("proc: encode the arguments of %s for worker %s: %w", o.Name, c.role, err)
	}
	if err := c.write(reply{Call: &call{Op: o.Name, Args: a}}); err != nil {
		return r, err
	}
	c.idle = false
	return o.Result(ctx, c)
}

// Result waits for the outcome of the call of o the child c is
// performing: after a [*Reached], once the parent let the child go on
// with [Child.GoOn]. It returns as Call does.
func (o Operation[A, R]) Result(ctx context.Context, c *Child) (R, error) {
	var r R
	if err := c.awaitIdle(ctx, o.Name); err != nil {
		return r, err
	}
	if c.callError != "" {
		return r, &CallError{Role: c.role, Op: o.Name, Pid: c.Pid(), Message: c.callError}
	}
	if err := c.lastIdle.Decode(&r); err != nil {
		return r, c.fail(fmt.Errorf("answered %s with a result that does not decode: %w", o.Name, err))
	}
	return r, nil
}

// Handle is o performed by f in the child, for [Worker.Answer]: the
// call's arguments decoded into A, f's result sent back to the parent.
// An error is the call's, not the role's: the parent gets it as a
// [*CallError] and the child stays idle.
func (o Operation[A, R]) Handle(f func(ctx context.Context, args A) (R, error)) Handler {
	return Handler{name: o.Name, perform: func(ctx context.Context, raw json.RawMessage) (any, error) {
		var a A
		if err := json.Unmarshal(raw, &a); err != nil {
			return nil, fmt.Errorf("decode the arguments: %w", err)
		}
		r, err := f(ctx, a)
		if _, none := any(r).(None); none || err != nil {
			return nil, err
		}
		return r, nil
	}}
}

// Handler is how a role performs one of its operations, as
// [Operation.Handle] makes it.
type Handler struct {
	name    string
	perform func(ctx context.Context, args json.RawMessage) (result any, err error)
}

// Answer reports the child idle and performs the parent's calls with
// handlers, one at a time, each result (or error) reported with the child
// idle again, until the parent says to finish: then Answer returns nil
// and the role returns its result. Two handlers of one operation fail the
// role at once; so does a call of an operation none handles, and a
// closed pipe ([ErrParentGone]).
func (w *Worker) Answer(ctx context.Context, handlers ...Handler) error {
	ops := make(map[string]Handler, len(handlers))
	for _, h := range handlers {
		if _, twice := ops[h.name]; twice {
			return fmt.Errorf("proc: role %s handles operation %q twice", w.job.Role, h.name)
		}
		ops[h.name] = h
	}
	idle := Report{Idle: true}
	var state any
	for {
		if err := w.report(idle, state); err != nil {
			return err
		}
		line, err := w.next()
		if err != nil {
			return err
		}
		var r reply
		if err := json.Unmarshal(line, &r); err != nil || (r.Go == (r.Call != nil)) {
			return fmt.Errorf("proc: idle, the parent wrote %q, not a call or a finish", line)
		}
		if r.Go {
			return nil
		}
		h, ok := ops[r.Call.Op]
		if !ok {
			return fmt.Errorf("proc: role %s has no operation %q", w.job.Role, r.Call.Op)
		}
		idle, state = Report{Idle: true}, nil
		result, err := h.perform(ctx, r.Call.Args)
		if err != nil {
			idle.CallError = err.Error()
		} else {
			state = result
		}
	}
}

// CallError is an operation's error, as the child reported it: the call
// failed, the child is idle and alive.
type CallError struct {
	Role, Op string
	Pid      int
	Message  string
}

func (e *CallError) Error() string {
	return fmt.Sprintf("%s (process %d), %s: %s", e.Role, e.Pid, e.Op, e.Message)
}

// Reached is what [Operation.Call] (or [Operation.Result]) returns when
// the child, performing Op, reached a failpoint: Report says which (At)
// and what the child sent with it (State). The child waits there, as at
// [Worker.Reach]: kill it there ([Child.Kill]), or let it go on
// ([Child.GoOn]) and collect the call's outcome with [Operation.Result].
type Reached struct {
	Op     string
	Report Report
}

func (r *Reached) Error() string {
	return fmt.Sprintf("proc: performing %s, the child reached %s", r.Op, r.Report.At)
}

// Finish tells the idle child its calls are over: its role returns, and
// Finish returns its Done report. Then [Child.Wait] for its exit.
func (c *Child) Finish(ctx context.Context) (Report, error) {
	if err := c.awaitIdle(ctx, ""); err != nil {
		return Report{}, err
	}
	if err := c.write(reply{Go: true}); err != nil {
		return Report{}, err
	}
	c.idle = false
	r, err := c.Next(ctx)
	if err != nil {
		return r, err
	}
	if !r.Done {
		return r, c.fail(fmt.Errorf("was told to finish and reported %s instead of done", describe(r)))
	}
	return r, nil
}

// awaitIdle reads the child's next report unless it is known to be idle,
// and checks that it is; performing op (if not ""), the child may also
// have reached a failpoint, which returns a [*Reached].
func (c *Child) awaitIdle(ctx context.Context, op string) error {
	if c.idle {
		return nil
	}
	r, err := c.Next(ctx)
	if err != nil {
		return err
	}
	if r.At != "" && op != "" {
		return &Reached{Op: op, Report: r}
	}
	if !r.Idle {
		return c.fail(fmt.Errorf("reported %s where it should wait for a call", describe(r)))
	}
	c.idle, c.lastIdle, c.callError = true, r, r.CallError
	return nil
}

// describe names what a report says, for an error.
func describe(r Report) string {
	switch {
	case r.At != "":
		return "reaching " + string(r.At)
	case r.Done:
		return "done"
	case r.Idle:
		return "idle"
	}
	return "an error"
}

// write sends the child one reply line.
func (c *Child) write(r reply) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("proc: encode a reply to worker %s: %w", c.role, err)
	}
	if _, err := c.stdin.Write(append(b, '\n')); err != nil {
		return c.fail(fmt.Errorf("could not be written to: %w", err))
	}
	return nil
}

// ErrNotStopped means the operating system did not show a frozen child
// as stopped in time.
var ErrNotStopped = errors.New("proc: the child was sent SIGSTOP but did not stop")

// Freeze stalls the child for real: it sends SIGSTOP, which the child can
// neither catch nor ignore, and returns once the operating system shows
// the process stopped (Linux: state T in /proc/PID/stat; elsewhere the
// signal's delivery is trusted). A frozen child runs no code at all, as in
// a long GC pause or a VM suspended by its host, until [Child.Thaw]; it
// keeps its connection and its memory.
func (c *Child) Freeze() error {
	if err := c.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return c.fail(fmt.Errorf("could not be sent SIGSTOP: %w", err))
	}
	deadline := time.Now().Add(c.timeout)
	for {
		stopped, known := processStopped(c.Pid())
		if stopped || !known {
			return nil
		}
		if time.Now().After(deadline) {
			return c.fail(ErrNotStopped)
		}
		time.Sleep(time.Millisecond)
	}
}

// Thaw lets a frozen child run again with SIGCONT; it carries on where
// it stopped, unaware of the time it lost.
func (c *Child) Thaw() error {
	if err := c.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		return c.fail(fmt.Errorf("could not be sent SIGCONT: %w", err))
	}
	return nil
}
