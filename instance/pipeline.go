package instance

import (
	"context"
	"errors"
	"fmt"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/explore"
	"github.com/outboxlab/outboxlab/failpoint"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/proc"
	"github.com/outboxlab/outboxlab/store"
)

// The relays and consumers of a delivery pipeline ([cast.Pipeline]) of
// sessions 18 to 20 and the explorer: in the lab's process, or child
// processes at the lab's command, each step (claim, send, complete,
// consume) a call it performs on its own connection. The pipeline's plan
// holds for them as for in-process instances: where it stalls one past
// its lease, the child stops at the failpoint and the lab freezes it with
// SIGSTOP until its next step (SIGCONT); where it crashes one, the lab
// kills it there with SIGKILL.

// The pipeline's instances as child processes.
const (
	pipelineRelayRole    = "pipeline-relay"
	pipelineConsumerRole = "pipeline-consumer"
)

// pipelineInstanceWork is what a pipeline child is: Instance on the
// pipeline's database, a relay or a consumer of Group applying
// deliveries by Design, with the plan's rules for it armed.
type pipelineInstanceWork struct {
	Pipeline cast.Settings
	Instance string
	Group    string
	Design   cast.ConsumerDesign
}

// pipelineStepArgs is a step's call: the scenario clock's tick, and for
// a consumer whether to stop at failpoint before-effect (where the lab
// holds it, e.g. at a barrier) before it applies a delivery.
type pipelineStepArgs struct {
	Now              int64
	HoldBeforeEffect bool `json:",omitempty"`
}

// pipelineStep is a step's result, as it crosses the pipe: its value,
// the relay's claim after it, and what the child recorded meanwhile.
type pipelineStep struct {
	Outcome store.ClaimOutcome `json:",omitempty"`
	Acked   bool               `json:",omitempty"`
	Rows    int64              `json:",omitempty"`
	Found   bool               `json:",omitempty"`
	Claim   store.EventClaim
	Record  cast.Record
	Fired   []failpoint.Firing // the faults the child's plan fired meanwhile
}

// pipelineOp is an operation of a pipeline child: each a step at the
// call's tick.
type pipelineOp = proc.Operation[pipelineStepArgs, pipelineStep]

// pipelineRelayOps are the pipeline-relay child's operations.
var pipelineRelayOps = struct {
	Claim, Send, Complete, RunOnce pipelineOp
}{
	Claim:    pipelineOp{Name: "claim"},
	Send:     pipelineOp{Name: "send"},
	Complete: pipelineOp{Name: "complete"},
	RunOnce:  pipelineOp{Name: "run-once"},
}

// pipelineConsumerOps are the pipeline-consumer child's operations.
var pipelineConsumerOps = struct {
	Consume pipelineOp
}{
	Consume: pipelineOp{Name: "consume"},
}

// pipelineFault is what a child sends where the plan stops it: the fault
// report and the relay's claim (for a stall, its lease).
type pipelineFault struct {
	cast.CrashReport
	Claim store.EventClaim
	Fired []failpoint.Firing // since the last report, this fault last
}

// PipelineRelay starts relay name on p's database, with a start line on
// p's timeline.
func (o *Opener) PipelineRelay(ctx context.Context, p *cast.Pipeline, name string) (cast.Relay, error) {
	if !o.cfg.Processes {
		return p.StartRelay(ctx, name)
	}
	c, err := o.startPipelineChild(ctx, p, pipelineRelayRole, pipelineInstanceWork{Instance: name})
	if err != nil {
		return nil, err
	}
	return &childPipelineRelay{c}, nil
}

// PipelineConsumer starts consumer name of group, applying deliveries by
// design, on p's database, with a start line on p's timeline.
func (o *Opener) PipelineConsumer(ctx context.Context, p *cast.Pipeline, name, group string, design cast.ConsumerDesign) (cast.Consumer, error) {
	if !o.cfg.Processes {
		return p.StartConsumer(ctx, name, group, design)
	}
	c, err := o.startPipelineChild(ctx, p, pipelineConsumerRole, pipelineInstanceWork{Instance: name, Group: group, Design: design})
	if err != nil {
		return nil, err
	}
	return &childPipelineConsumer{c, group}, nil
}

// startPipelineChild starts work's instance as child process role, with
// p's settings and the rules of p's plan for it, and tells its start.
func (o *Opener) startPipelineChild(ctx context.Context, p *cast.Pipeline, role string, work pipelineInstanceWork) (*childPipelineInstance, error) {
	work.Pipeline = p.Settings(p.Faults.RulesFor(work.Instance)...)
	c, err := o.startChild(ctx, role, p.Path, work)
	if err != nil {
		return nil, err
	}
	start := cast.RelayStart
	if role == pipelineConsumerRole {
		start = cast.ConsumerStart(work.Group, work.Design)
	}
	p.Event(lab.KindNote, work.Instance, "start", fmt.Sprintf("%s: child process %d (outboxlab worker --role %s)", start, c.Pid(), role))
	return &childPipelineInstance{o: o, child: c, p: p, name: work.Instance, phase: phaseOf(p.Label, work.Instance)}, nil
}

// childPipelineInstance is the lab's end of a pipeline child.
type childPipelineInstance struct {
	o     *Opener
	child *proc.Child
	p     *cast.Pipeline
	name  string
	phase string // its phase in the processes table: the pipeline's label and its name

	claim   store.EventClaim // the relay's claim, as its last step left it
	stalled pipelineOp       // the step it was frozen in, its Name "" if none
	at      failpoint.Point  // where it was frozen
	dead    bool             // killed by the plan's crash

	// beforeEffect, for a consumer, holds it before each effect (see
	// [childPipelineConsumer.HoldBeforeEffect]).
	beforeEffect func(ctx context.Context) error
}

// step has the child perform op at the clock's tick, after waking it if
// it is frozen; its record goes to the lab's pipeline.
func (c *childPipelineInstance) step(ctx context.Context, op pipelineOp) (pipelineStep, error) {
	if c.dead {
		return pipelineStep{}, failpoint.ErrCrashed
	}
	if err := c.wake(ctx); err != nil {
		return pipelineStep{}, err
	}
	s, err := op.Call(ctx, c.child, pipelineStepArgs{Now: c.p.Now(), HoldBeforeEffect: c.beforeEffect != nil})
	return s, c.settle(ctx, op, &s, err)
}

// settle takes a step's outcome: its record adopted, or the plan's
// fault where the child stopped. A consumer stopped before its effect is
// held there by the lab's hook (see [childPipelineConsumer.HoldBeforeEffect])
// and let go on first.
func (c *childPipelineInstance) settle(ctx context.Context, op pipelineOp, s *pipelineStep, err error) error {
	var reached *proc.Reached
	for errors.As(err, &reached) && reached.Report.At == failpoint.BeforeEffect && c.beforeEffect != nil {
		if err := c.beforeEffect(ctx); err != nil {
			return err
		}
		if err = c.child.GoOn(c.p.Clock.Now()); err == nil {
			*s, err = op.Result(ctx, c.child)
		}
	}
	var failed *proc.CallError
	switch {
	case errors.As(err, &reached):
		return c.fault(op, reached.Report)
	case errors.As(err, &failed):
		return errors.New(failed.Message) // the statement's own error, as in-process
	case err != nil:
		return err
	}
	c.p.Adopt(s.Record)
	c.claim = s.Claim
	_, err = c.replay(s.Fired)
	return err
}

// replay fires, in the lab's plan, the faults the child's plan fired (its
// copy of the lab's rules for it), so that the lab's plan and its table
// of faults fired hold them, and checks the lab's plan agrees. It returns
// the last one's fault (failpoint.None for none).
func (c *childPipelineInstance) replay(fired []failpoint.Firing) (failpoint.Fault, error) {
	last := failpoint.None
	for _, f := range fired {
		if last = c.p.Faults.Fire(f.Point, f.Actor, f.Subject); last != f.Fault {
			return last, fmt.Errorf("%s process %d: its plan fired %s at %s on %s, where the run's plan has %q",
				c.name, c.child.Pid(), f.Fault, f.Point, f.Subject, last)
		}
	}
	return last, nil
}

// fault carries out, on the child stopped at a failpoint, what the plan
// has there: a crash (SIGKILL) or a stall past the lease (SIGSTOP, until
// its next step).
func (c *childPipelineInstance) fault(op pipelineOp, r proc.Report) error {
	var f pipelineFault
	if err := r.Decode(&f); err != nil || f.Point != r.At {
		return fmt.Errorf("%s process %d reported %s %s, not a fault at a failpoint", c.name, c.child.Pid(), r.At, clip(r.State))
	}
	c.p.Adopt(f.Record)
	if n := len(f.Fired); n == 0 || f.Fired[n-1].Point != f.Point {
		return fmt.Errorf("%s process %d stopped at %s, where its plan fired no fault", c.name, c.child.Pid(), f.Point)
	}
	fault, err := c.replay(f.Fired)
	if err != nil {
		return err
	}
	switch fault {
	case failpoint.Crash:
		death, err := c.o.kill(c.child, c.phase, f.Point)
		if err != nil {
			return err
		}
		c.dead = true
		c.p.Add(lab.Event{Kind: lab.KindCrash, Subject: f.Subject, Actor: c.name, Action: "CRASH", Detail: crashLine(f.Held, death)})
		return failpoint.ErrCrashed
	case failpoint.LeaseExpiry:
		if err := c.child.Freeze(); err != nil {
			return err
		}
		c.o.log.stalled(c.child.Pid(), fmt.Sprintf("SIGSTOP at %s, at %s", cast.TickClock(c.p.Now()), f.Point))
		c.claim, c.stalled, c.at = f.Claim, op, f.Point
		c.p.StallPastLease(c.name, f.Point, f.Claim, fmt.Sprintf("process %d frozen there by SIGSTOP (the operating system shows it stopped)", c.child.Pid()))
		return nil
	default:
		return fmt.Errorf("%s process %d stopped at %s on %s, where the run's plan has %q", c.name, c.child.Pid(), f.Point, f.Subject, fault)
	}
}

// wake lets a frozen child go on (SIGCONT) and finish the step it was
// frozen in.
func (c *childPipelineInstance) wake(ctx context.Context) error {
	if c.stalled.Name == "" {
		return nil
	}
	op := c.stalled
	c.stalled = pipelineOp{}
	if err := c.child.Thaw(); err != nil {
		return err
	}
	c.o.log.stalled(c.child.Pid(), fmt.Sprintf("SIGCONT at %s", cast.TickClock(c.p.Now())))
	c.p.Add(lab.Event{Kind: lab.KindWake, Subject: c.claim.EventID, Actor: c.name, Action: "wakes", Detail: fmt.Sprintf("process %d continued by SIGCONT: it goes on from %s, unaware that its lease on %s expired",
		c.child.Pid(), c.at, c.claim.EventID)})
	if err := c.child.GoOn(c.p.Clock.Now()); err != nil {
		return err
	}
	s, err := op.Result(ctx, c.child)
	return c.settle(ctx, op, &s, err)
}

// Name is the instance's name.
func (c *childPipelineInstance) Name() string { return c.name }

// Close ends the child: woken if frozen, told to finish, and reaped; a
// killed child is already gone.
func (c *childPipelineInstance) Close(ctx context.Context) error {
	if c.dead {
		return nil
	}
	c.dead = true
	if err := c.wake(ctx); err != nil {
		return err
	}
	if _, err := c.child.Finish(ctx); err != nil {
		return err
	}
	return c.o.wait(c.child, c.phase, nil)
}

// childPipelineRelay is a relay in a child process.
type childPipelineRelay struct{ *childPipelineInstance }

// betweenSteps is where the explorer's crash action kills a relay: idle,
// between two of its steps, not at a failpoint inside one.
const betweenSteps failpoint.Point = "between its steps (the explorer's crash action)"

// Holding is the claim the relay holds, as its last step left it.
func (r *childPipelineRelay) Holding() store.EventClaim { return r.claim }

// Crash kills the idle relay with SIGKILL between two of its steps, where
// it held held, and says so on the timeline.
func (r *childPipelineRelay) Crash(held string) error {
	if r.dead {
		return nil
	}
	death, err := r.o.kill(r.child, r.phase, betweenSteps)
	if err != nil {
		return err
	}
	r.dead = true
	r.p.Add(lab.Event{Kind: lab.KindCrash, Subject: r.claim.EventID, Actor: r.name, Action: "CRASH", Detail: crashLine(held, death)})
	return nil
}

// ExploreRelay starts the explorer's relay name on p's database (an
// [explore.RelayStarter]), with a start line on p's timeline.
func (o *Opener) ExploreRelay(ctx context.Context, p *cast.Pipeline, name string) (explore.Relay, error) {
	if !o.cfg.Processes {
		return explore.StartInProcess(ctx, p, name)
	}
	c, err := o.startPipelineChild(ctx, p, pipelineRelayRole, pipelineInstanceWork{Instance: name})
	if err != nil {
		return nil, err
	}
	return &childPipelineRelay{c}, nil
}

// ClaimNext claims the oldest claimable event. A relay frozen in its
// claim (the plan stalls it after a claim) got its claim.
func (r *childPipelineRelay) ClaimNext(ctx context.Context) (store.ClaimOutcome, error) {
	s, err := r.step(ctx, pipelineRelayOps.Claim)
	if r.stalled.Name != "" {
		return store.Claimed, err
	}
	return s.Outcome, err
}

// Send offers the claimed event to the broker. A relay frozen in its send
// (the plan stalls it at the broker's ack or after it) was acknowledged.
func (r *childPipelineRelay) Send(ctx context.Context) (bool, error) {
	s, err := r.step(ctx, pipelineRelayOps.Send)
	if r.stalled.Name != "" {
		return true, err
	}
	return s.Acked, err
}

// Complete marks the claimed event published under its token.
func (r *childPipelineRelay) Complete(ctx context.Context) (int64, error) {
	s, err := r.step(ctx, pipelineRelayOps.Complete)
	return s.Rows, err
}

// RunOnce is the relay's loop body (claim, send, complete), as one step.
func (r *childPipelineRelay) RunOnce(ctx context.Context) (bool, error) {
	s, err := r.step(ctx, pipelineRelayOps.RunOnce)
	return s.Found, err
}

// childPipelineConsumer is a consumer in a child process.
type childPipelineConsumer struct {
	*childPipelineInstance
	group string
}

func (c *childPipelineConsumer) Group() string { return c.group }

// HoldBeforeEffect has the lab run hold whenever the consumer has decided
// to apply a delivery, before its effect: the child stops at failpoint
// before-effect, the lab runs hold, and the child goes on.
func (c *childPipelineConsumer) HoldBeforeEffect(hold func(ctx context.Context) error) {
	c.beforeEffect = hold
}

// ConsumeNext takes, applies and acknowledges the next delivery.
func (c *childPipelineConsumer) ConsumeNext(ctx context.Context) (bool, error) {
	s, err := c.step(ctx, pipelineConsumerOps.Consume)
	return s.Found, err
}

// pipelineChild is a pipeline child's side: its pipeline on the lab's
// database, and how many of its plan's firings it has reported.
type pipelineChild struct {
	*cast.Pipeline
	work     pipelineInstanceWork
	reported int
}

// attachPipelineChild is a pipeline child's pipeline: the lab's database
// on the child's own connections, each fault of its plan reported to the
// lab at its failpoint with claim() (the relay's claim, if any), where the
// lab kills or freezes the child.
func attachPipelineChild(w *proc.Worker, claim func() store.EventClaim) (*pipelineChild, error) {
	c := &pipelineChild{}
	if err := w.Work(&c.work); err != nil {
		return nil, err
	}
	c.Pipeline = cast.Attach(func(ctx context.Context, _ string) (*store.DB, error) { return w.Open(ctx) }, c.work.Pipeline)
	report := func(r cast.CrashReport) error { return c.reach(w, r.Point, pipelineFault{r, claim(), c.takeFired()}) }
	c.BeforeCrash, c.BeforeStall = report, report
	return c, nil
}

// reach stops the child at point with state until the lab lets it go on,
// and sets the pipeline's clock to the lab's then: a stall or a hold there
// may have moved it, and the rest of the step acts at that time, as an
// instance in the lab's process does.
func (c *pipelineChild) reach(w *proc.Worker, point failpoint.Point, state any) error {
	now, err := w.Reach(point, state)
	if err != nil {
		return err
	}
	c.SetClock(now)
	return nil
}

// takeFired is what the child's plan fired since it last said.
func (c *pipelineChild) takeFired() []failpoint.Firing {
	all := c.Faults.Fired()
	fired := all[c.reported:]
	c.reported = len(all)
	return fired
}

// servePipelineRelay is a relay as a child process: claim, send and
// complete at the lab's command.
func servePipelineRelay(ctx context.Context, w *proc.Worker) (any, error) {
	var r *cast.RelayInstance
	p, err := attachPipelineChild(w, func() store.EventClaim { return r.Claim })
	if err != nil {
		return nil, err
	}
	if r, err = p.OpenRelay(ctx, p.work.Instance); err != nil {
		return nil, err
	}
	defer r.Close(ctx)
	step := func(do func(ctx context.Context, s *pipelineStep) error) func(context.Context, pipelineStepArgs) (pipelineStep, error) {
		return func(ctx context.Context, a pipelineStepArgs) (pipelineStep, error) {
			p.SetNow(a.Now)
			var s pipelineStep
			err := do(ctx, &s)
			s.Claim, s.Record, s.Fired = r.Claim, p.TakeRecord(), p.takeFired()
			return s, err
		}
	}
	return nil, w.Answer(ctx,
		pipelineRelayOps.Claim.Handle(step(func(ctx context.Context, s *pipelineStep) (err error) {
			s.Outcome, err = r.ClaimNext(ctx)
			return err
		})),
		pipelineRelayOps.Send.Handle(step(func(ctx context.Context, s *pipelineStep) (err error) {
			s.Acked, err = r.Send(ctx)
			return err
		})),
		pipelineRelayOps.Complete.Handle(step(func(ctx context.Context, s *pipelineStep) (err error) {
			s.Rows, err = r.Complete(ctx)
			return err
		})),
		pipelineRelayOps.RunOnce.Handle(step(func(ctx context.Context, s *pipelineStep) (err error) {
			s.Found, err = r.RunOnce(ctx)
			return err
		})),
	)
}

// servePipelineConsumer is a consumer as a child process: each
// delivery taken, applied and acknowledged at the lab's command.
func servePipelineConsumer(ctx context.Context, w *proc.Worker) (any, error) {
	p, err := attachPipelineChild(w, func() store.EventClaim { return store.EventClaim{} })
	if err != nil {
		return nil, err
	}
	c, err := p.OpenConsumer(ctx, p.work.Instance, p.work.Group, p.work.Design)
	if err != nil {
		return nil, err
	}
	defer c.Close(ctx)
	return nil, w.Answer(ctx,
		pipelineConsumerOps.Consume.Handle(func(ctx context.Context, a pipelineStepArgs) (pipelineStep, error) {
			p.SetNow(a.Now)
			c.BeforeEffect = nil
			if a.HoldBeforeEffect {
				c.BeforeEffect = func(context.Context) error { return p.reach(w, failpoint.BeforeEffect, nil) }
			}
			found, err := c.ConsumeNext(ctx)
			return pipelineStep{Found: found, Record: p.TakeRecord(), Fired: p.takeFired()}, err
		}),
	)
}
