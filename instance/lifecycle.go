package instance

import (
	"context"
	"errors"
	"fmt"

	"github.com/outboxlab/outboxlab/failpoint"
	"github.com/outboxlab/outboxlab/proc"
	"github.com/outboxlab/outboxlab/store"
)

// Lifecycle is what a lesson does to an instance besides running its
// statements: stall it, wake it, crash it, close it. The lesson's script
// is the same wherever the instance runs; only how these happen differs,
// and each says so for the timeline.
type Lifecycle interface {
	// Stall pauses the instance where it is, at when (on the lesson's
	// clock), after what it just did: for real with SIGSTOP when it is a
	// child process. It returns how, for the timeline; "" in-process,
	// where the lesson simply does not call it until it wakes.
	Stall(when, after string) (how string, err error)
	// Wake lets a stalled instance go on at when, before what it does
	// next (SIGCONT), and says how ("" in-process).
	Wake(when, before string) (how string, err error)
	// Crash kills the instance where it is, at point, holding what it
	// holds: in-process its connection closes, a child process is killed
	// by SIGKILL. death names the killed process for a CRASH line ("" in
	// the lab's process).
	Crash(ctx context.Context, point failpoint.Point) (death string, err error)
	Closer
}

// Closer is an instance as the run ends it: its connection closed, its
// process (if any) finished and reaped, with the error of a child that
// did not exit 0. Closing twice does nothing.
type Closer interface {
	Close(ctx context.Context) error
}

// WithHow is detail with how a stall or wake happened, when it happened
// for real (in a child process).
func WithHow(detail, how string) string {
	if how == "" {
		return detail
	}
	return detail + "; " + how
}

// Set is a run's instances, closed once: on the run's success path with
// their errors ([Set.Close]), on every other path quietly (deferred).
type Set struct {
	all    []Closer
	closed bool
}

// Add adds c to the set.
func (s *Set) Add(c Closer) { s.all = append(s.all, c) }

// Close closes every instance, in the order added, and returns their
// errors; after the first call it does nothing.
func (s *Set) Close(ctx context.Context) error {
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	for _, c := range s.all {
		errs = append(errs, c.Close(ctx))
	}
	return errors.Join(errs...)
}

// inProcess is an in-process instance's connection: stalling it is the
// lesson not calling it, crashing it is closing it.
type inProcess struct {
	db     *store.DB
	closed bool
}

func (*inProcess) Stall(string, string) (string, error) { return "", nil }
func (*inProcess) Wake(string, string) (string, error)  { return "", nil }

func (p *inProcess) Close(context.Context) error {
	if p.closed {
		return nil
	}
	p.closed = true
	return p.db.Close()
}

func (p *inProcess) Crash(ctx context.Context, _ failpoint.Point) (string, error) {
	return "", p.Close(ctx)
}

// child is an instance's child process, as the lab drives it.
type child struct {
	o      *Opener
	pc     *proc.Child
	phase  string
	dead   bool  // killed, or finished and reaped
	frozen bool  // stalled by SIGSTOP and not yet continued
	sentIt *sent // the signal the lab sent it, if any
}

// start starts instance name, of phase ("" for none), as child process
// role at the lab's command on the database at path.
func (o *Opener) start(ctx context.Context, path, phase, name, role string, work any) (*child, error) {
	c, err := o.startChild(ctx, role, path, work)
	if err != nil {
		return nil, err
	}
	return &child{o: o, pc: c, phase: phaseOf(phase, name)}, nil
}

// call has the child c perform op with args; see callError.
func call[A, R any](ctx context.Context, c *child, op proc.Operation[A, R], args A) (R, error) {
	r, err := op.Call(ctx, c.pc, args)
	return r, callError(err)
}

// callError is err of a call: an operation's own error (a statement that
// failed) comes back as the error the in-process instance would have
// returned, its text the child's.
func callError(err error) error {
	var failed *proc.CallError
	if errors.As(err, &failed) {
		return errors.New(failed.Message)
	}
	return err
}

func (c *child) Stall(when, after string) (string, error) {
	if err := c.pc.Freeze(); err != nil {
		return "", err
	}
	c.frozen = true
	c.o.log.stalled(c.pc.Pid(), fmt.Sprintf("SIGSTOP at %s, after %s", when, after))
	return fmt.Sprintf("process %d frozen by SIGSTOP (the operating system shows it stopped): it runs no code, keeps its connection and memory", c.pc.Pid()), nil
}

func (c *child) Wake(when, before string) (string, error) {
	if err := c.pc.Thaw(); err != nil {
		return "", err
	}
	c.frozen = false
	c.o.log.stalled(c.pc.Pid(), fmt.Sprintf("SIGCONT at %s, before %s", when, before))
	return fmt.Sprintf("process %d continued by SIGCONT", c.pc.Pid()), nil
}

func (c *child) Crash(_ context.Context, point failpoint.Point) (string, error) {
	death, err := c.o.kill(c.pc, c.phase, point)
	if err != nil {
		return "", err
	}
	c.dead = true
	return death.String(), nil
}

// Close tells the idle child to finish and reaps it.
func (c *child) Close(ctx context.Context) error {
	if c.dead {
		return nil
	}
	c.dead = true
	if c.frozen {
		// A run that failed between a stall and its wake: a frozen child
		// cannot read the finish it is sent.
		if err := c.pc.Thaw(); err != nil {
			return err
		}
		c.frozen = false
	}
	if _, err := c.pc.Finish(ctx); err != nil {
		return err
	}
	return c.o.wait(c.pc, c.phase, c.sentIt)
}

// CloseAll closes each of cs in turn and returns their errors.
func CloseAll(ctx context.Context, cs ...Closer) error {
	var errs []error
	for _, c := range cs {
		errs = append(errs, c.Close(ctx))
	}
	return errors.Join(errs...)
}
