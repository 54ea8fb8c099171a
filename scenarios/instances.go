package scenarios

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/failpoint"
	"github.com/outboxlab/outboxlab/proc"
	"github.com/outboxlab/outboxlab/store"
)

// An instance is one application instance of a lesson, on its own
// connection: in the lab's process, or with Options.Processes a child
// process at the lab's command (see [proc.Worker.Answer]), which a lesson
// that stalls it freezes for real with SIGSTOP and thaws with SIGCONT.
// The lesson's script is the same either way; only where the instance's
// statements run differs, and the report's processes table says so.

// relayInstance is a relay instance of sessions 16 and 17: the relay
// statements on its own connection ([store.Relay]).
type relayInstance interface {
	Claim(ctx context.Context, eventID, relay string, now, leaseUntil int64) (store.EventClaim, error)
	Complete(ctx context.Context, eventID string, token, now int64) (store.Fenced, error)
	Renew(ctx context.Context, eventID string, token, now, proposed int64) (store.Fenced, error)
	EventByID(ctx context.Context, eventID string) (store.Event, bool, error)
	lifecycle
}

// lifecycle is what a lesson does to an instance besides running its
// statements: stall it, wake it, crash it, close it.
type lifecycle interface {
	// stall pauses the instance where it is, at when (on the lesson's
	// clock), after what it just did: for real with SIGSTOP when it is a
	// child process. It returns how, for the timeline; "" in-process,
	// where the lesson simply does not call it until it wakes.
	stall(when, after string) (how string, err error)
	// wake lets a stalled instance go on at when, before what it does
	// next (SIGCONT), and says how ("" in-process).
	wake(when, before string) (how string, err error)
	// crash kills the instance where it is, at point, holding what it
	// holds: in-process its connection closes, a child process is killed
	// by SIGKILL. death names the killed process for a CRASH line ("" in
	// the lab's process).
	crash(ctx context.Context, point failpoint.Point) (death string, err error)
	// close ends the instance: its connection closed, its process (if
	// any) finished and reaped.
	close(ctx context.Context) error
}

// inProcessRelay is a relay instance in the lab's process.
type inProcessRelay struct {
	*store.Relay
	inProcess
}

// inProcess is an in-process instance's connection: stalling it is the
// lesson not calling it.
type inProcess struct{ db *store.DB }

func (inProcess) stall(string, string) (string, error) { return "", nil }
func (inProcess) wake(string, string) (string, error)  { return "", nil }
func (p inProcess) close(context.Context) error        { return p.db.Close() }

func (p inProcess) crash(ctx context.Context, _ failpoint.Point) (string, error) {
	return "", p.close(ctx)
}

// openRelayInstance opens relay instance name with the statements sqls
// on the run's database.
func (e *Env) openRelayInstance(ctx context.Context, name string, sqls store.RelaySQL) (relayInstance, error) {
	if !e.Options.Processes {
		db, err := e.Open(ctx, e.DatabasePath())
		if err != nil {
			return nil, err
		}
		return inProcessRelay{store.NewRelay(db, sqls), inProcess{db}}, nil
	}
	c, err := e.startInstance(ctx, "", name, relayInstanceRole, relayInstanceWork{SQL: sqls, Instance: name})
	if err != nil {
		return nil, err
	}
	return childRelay{c}, nil
}

// relayInstanceRole is a relay instance as a child process.
const relayInstanceRole = "relay-instance"

// relayInstanceWork is what a relay-instance child is: Instance, running
// the relay statements SQL.
type relayInstanceWork struct {
	SQL      store.RelaySQL `json:"sql"`
	Instance string         `json:"instance"`
}

// The relay operations' arguments, as they cross the pipe.
type (
	claimEventArgs struct {
		EventID, Relay  string
		Now, LeaseUntil int64
	}
	fencedArgs struct {
		EventID              string
		Token, Now, Proposed int64
	}
	eventFound struct {
		Event store.Event
		Found bool
	}
)

// runRelayInstanceChild is the relay-instance child: its own connection,
// and the relay's statements performed at the lab's command.
func runRelayInstanceChild(ctx context.Context, w *proc.Worker) (any, error) {
	var work relayInstanceWork
	db, err := w.Begin(ctx, &work)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	r := store.NewRelay(db, work.SQL)
	return nil, w.Answer(ctx, map[string]proc.Op{
		"claim": op(func(ctx context.Context, a claimEventArgs) (any, error) {
			return r.Claim(ctx, a.EventID, a.Relay, a.Now, a.LeaseUntil)
		}),
		"complete": op(func(ctx context.Context, a fencedArgs) (any, error) {
			return r.Complete(ctx, a.EventID, a.Token, a.Now)
		}),
		"renew": op(func(ctx context.Context, a fencedArgs) (any, error) {
			return r.Renew(ctx, a.EventID, a.Token, a.Now, a.Proposed)
		}),
		"event": op(func(ctx context.Context, id string) (any, error) {
			ev, found, err := r.EventByID(ctx, id)
			return eventFound{ev, found}, err
		}),
	})
}

// op is f as a [proc.Op]: its arguments decoded into A.
func op[A any](f func(context.Context, A) (any, error)) proc.Op {
	return func(ctx context.Context, raw json.RawMessage) (any, error) {
		var a A
		if err := json.Unmarshal(raw, &a); err != nil {
			return nil, fmt.Errorf("decode the arguments: %w", err)
		}
		return f(ctx, a)
	}
}

// childRelay is a relay instance in a child process: each method is a
// call the child performs on its own connection.
type childRelay struct{ childInstance }

func (c childRelay) Claim(ctx context.Context, eventID, relay string, now, leaseUntil int64) (store.EventClaim, error) {
	var ec store.EventClaim
	return ec, c.call(ctx, "claim", claimEventArgs{eventID, relay, now, leaseUntil}, &ec)
}

func (c childRelay) Complete(ctx context.Context, eventID string, token, now int64) (store.Fenced, error) {
	var f store.Fenced
	return f, c.call(ctx, "complete", fencedArgs{EventID: eventID, Token: token, Now: now}, &f)
}

func (c childRelay) Renew(ctx context.Context, eventID string, token, now, proposed int64) (store.Fenced, error) {
	var f store.Fenced
	return f, c.call(ctx, "renew", fencedArgs{eventID, token, now, proposed}, &f)
}

func (c childRelay) EventByID(ctx context.Context, eventID string) (store.Event, bool, error) {
	var ef eventFound
	err := c.call(ctx, "event", eventID, &ef)
	return ef.Event, ef.Found, err
}

// childInstance is an instance's child process, as the lab drives it.
type childInstance struct {
	env   *Env
	child *proc.Child
	phase string
}

// startInstance starts instance name, of phase ("" for none), as child
// process role at the lab's command on the run's database.
func (e *Env) startInstance(ctx context.Context, phase, name, role string, work any) (childInstance, error) {
	c, err := e.startChild(ctx, role, e.DatabasePath(), work)
	if err != nil {
		return childInstance{}, err
	}
	return childInstance{env: e, child: c, phase: instancePhase(phase, name)}, nil
}

// instancePhase is an instance's phase column in the processes table:
// the lesson's phase, if any, and the instance's name.
func instancePhase(phase, name string) string {
	if phase == "" {
		return name
	}
	return phase + ": " + name
}

// call has the child perform op; see callError.
func (c childInstance) call(ctx context.Context, op string, args, result any) error {
	return c.callError(c.child.Call(ctx, op, args, result))
}

// callError is err of a call: an operation's own error (a statement that
// failed) comes back as the error the in-process instance would have
// returned, its text the child's.
func (childInstance) callError(err error) error {
	var failed *proc.CallError
	if errors.As(err, &failed) {
		return errors.New(failed.Message)
	}
	return err
}

func (c childInstance) stall(when, after string) (string, error) {
	if err := c.child.Freeze(); err != nil {
		return "", err
	}
	c.env.processes.stalled(c.child.Pid(), fmt.Sprintf("SIGSTOP at %s, after %s", when, after))
	return fmt.Sprintf("process %d frozen by SIGSTOP (the operating system shows it stopped): it runs no code, keeps its connection and memory", c.child.Pid()), nil
}

func (c childInstance) wake(when, before string) (string, error) {
	if err := c.child.Thaw(); err != nil {
		return "", err
	}
	c.env.processes.stalled(c.child.Pid(), fmt.Sprintf("SIGCONT at %s, before %s", when, before))
	return fmt.Sprintf("process %d continued by SIGCONT", c.child.Pid()), nil
}

func (c childInstance) crash(_ context.Context, point failpoint.Point) (string, error) {
	death, err := c.env.killChild(c.child, c.phase, point)
	if err != nil {
		return "", err
	}
	return death.String(), nil
}

func (c childInstance) close(ctx context.Context) error {
	if _, err := c.child.Finish(ctx); err != nil {
		return err
	}
	return c.env.waitChild(c.child, c.phase)
}

// instances are a run's instances, closed once: on the run's success path
// with their errors (closeAll), on every other path quietly (deferred).
type instances struct {
	all    []closer
	closed bool
}

// closer is an instance as [instances] closes it.
type closer interface {
	close(ctx context.Context) error
}

func (in *instances) add(c closer) { in.all = append(in.all, c) }

// closeAll closes every instance, in the order opened, and returns their
// errors; after the first call it does nothing.
func (in *instances) closeAll(ctx context.Context) error {
	if in.closed {
		return nil
	}
	in.closed = true
	var errs []error
	for _, s := range in.all {
		errs = append(errs, s.close(ctx))
	}
	return errors.Join(errs...)
}

// withHow is detail with how a stall or wake happened, when it happened
// for real (with Options.Processes).
func withHow(detail, how string) string {
	if how == "" {
		return detail
	}
	return detail + "; " + how
}

// outboxInstance is a worker of session 15: the outbox statements on its
// own connection ([store.Outbox]).
type outboxInstance interface {
	cast.Outbox
	lifecycle
}

// inProcessOutbox is an outbox worker in the lab's process.
type inProcessOutbox struct {
	*store.Outbox
	inProcess
}

// openOutboxInstance opens outbox worker name, of phase ("" for none),
// with the statements sqls on the run's database; on PostgreSQL each of its claims watches for
// workers waiting on its row lock for up to lockWatch (0: none; see
// [store.Outbox.WatchLockWaits]).
func (e *Env) openOutboxInstance(ctx context.Context, phase, name string, sqls store.OutboxSQL, lockWatch time.Duration) (outboxInstance, error) {
	if !e.Options.Processes {
		db, err := e.Open(ctx, e.DatabasePath())
		if err != nil {
			return nil, err
		}
		return inProcessOutbox{store.NewOutbox(db, sqls).WatchLockWaits(lockWatch), inProcess{db}}, nil
	}
	c, err := e.startInstance(ctx, phase, name, outboxInstanceRole, outboxInstanceWork{SQL: sqls, Instance: name, LockWatch: lockWatch})
	if err != nil {
		return nil, err
	}
	return childOutbox{c, sqls}, nil
}

// outboxInstanceRole is an outbox worker as a child process.
const outboxInstanceRole = "outbox-instance"

// outboxInstanceWork is what an outbox-instance child is: Instance,
// running the outbox statements SQL, watching for lock waits for up to
// LockWatch.
type outboxInstanceWork struct {
	SQL       store.OutboxSQL `json:"sql"`
	Instance  string          `json:"instance"`
	LockWatch time.Duration   `json:"lockWatch,omitempty"`
}

// The outbox operations' arguments, as they cross the pipe.
type (
	claimArgs struct {
		ID     int64 // 0: the next claimable message
		Worker string
		Now    time.Time
		Lease  time.Duration
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

// runOutboxInstanceChild is the outbox-instance child: its own
// connection, and the outbox statements performed at the lab's command.
func runOutboxInstanceChild(ctx context.Context, w *proc.Worker) (any, error) {
	var work outboxInstanceWork
	db, err := w.Begin(ctx, &work)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	o := store.NewOutbox(db, work.SQL).WatchLockWaits(work.LockWatch)
	return nil, w.Answer(ctx, map[string]proc.Op{
		"load": op(func(ctx context.Context, _ struct{}) (any, error) { return o.LoadPending(ctx) }),
		"claim": op(func(ctx context.Context, a claimArgs) (any, error) {
			if a.ID != 0 {
				return o.ClaimMessage(ctx, a.ID, a.Worker, a.Now, a.Lease)
			}
			var between func()
			var held error
			if a.Hold {
				between = func() { held = w.Reach(failpoint.BetweenClaimSelectAndUpdate, nil) }
			}
			c, err := o.ClaimNext(ctx, a.Worker, a.Now, a.Lease, between)
			if held != nil {
				return nil, held
			}
			return c, err
		}),
		"finalize": op(func(ctx context.Context, a finalizeArgs) (any, error) {
			return o.Finalize(ctx, a.ID, a.Worker, a.Outcome, a.Now)
		}),
	})
}

// childOutbox is an outbox worker in a child process: each method is a
// call the child performs on its own connection.
type childOutbox struct {
	childInstance
	sqls store.OutboxSQL
}

func (c childOutbox) LoadPending(ctx context.Context) ([]store.Message, error) {
	var msgs []store.Message
	return msgs, c.call(ctx, "load", struct{}{}, &msgs)
}

// ClaimNext claims the next claimable message. With between, the child
// stops at failpoint between-claim-select-and-update; the lab runs
// between (the lesson's barrier) and lets it go on.
func (c childOutbox) ClaimNext(ctx context.Context, worker string, now time.Time, lease time.Duration, between func()) (store.Claim, error) {
	var cl store.Claim
	err := c.child.Call(ctx, "claim", claimArgs{Worker: worker, Now: now, Lease: lease, Hold: between != nil}, &cl)
	var reached *proc.Reached
	if errors.As(err, &reached) && reached.Report.At == failpoint.BetweenClaimSelectAndUpdate {
		between()
		if err = c.child.GoOn(); err == nil {
			err = c.child.Result(ctx, "claim", &cl)
		}
	}
	return cl, c.callError(err)
}

func (c childOutbox) ClaimMessage(ctx context.Context, id int64, worker string, now time.Time, lease time.Duration) (store.Claim, error) {
	var cl store.Claim
	return cl, c.call(ctx, "claim", claimArgs{ID: id, Worker: worker, Now: now, Lease: lease}, &cl)
}

func (c childOutbox) Finalize(ctx context.Context, id int64, worker string, out store.Outcome, now time.Time) (store.Finalization, error) {
	var f store.Finalization
	return f, c.call(ctx, "finalize", finalizeArgs{id, worker, out, now}, &f)
}

func (c childOutbox) Statements() store.OutboxSQL { return c.sqls }
