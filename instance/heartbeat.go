package instance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/failpoint"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/proc"
	"github.com/outboxlab/outboxlab/store"
)

// HeartbeatRelay is one of session 22's relays.
type HeartbeatRelay interface {
	// Name is the relay's name.
	Name() string
	// Poll claims the oldest claimable event with a lease and a heartbeat;
	// nil when nothing was claimable or the relay is stopping.
	Poll(ctx context.Context) (HeartbeatJob, error)
	// Freeze stops the relay (a stop-the-world pause): no heartbeat, no
	// work; for real with SIGSTOP when it is a child process.
	Freeze(ctx context.Context, why string) error
	// Resume lets the frozen relay run again (SIGCONT): its overdue
	// heartbeat fires first.
	Resume(ctx context.Context) error
	// Stop is the stop signal: the relay polls no more, cancels the work
	// it has not sent, and may finish what it sent within grace. A child
	// process waits for it at failpoint after-send-before-complete and is
	// sent a real SIGTERM, which it catches; in-process it is a call.
	Stop(ctx context.Context, grace int64) error
	// Exit ends the stopped relay's process: it returns the events it
	// still held.
	Exit(ctx context.Context) ([]string, error)
	Closer
}

// HeartbeatJob is a claimed event a relay works on.
type HeartbeatJob interface {
	Send(ctx context.Context) (bool, error)
	Complete(ctx context.Context) (bool, error)
	// CompleteAtNextBeat has the work end at its heartbeat's next tick:
	// when the clock reaches it, the completion commits first and the
	// tick, already due, renews before the relay stops its heartbeat.
	CompleteAtNextBeat(ctx context.Context) error
	// Hang makes the job's work block on a call that never answers.
	Hang(ctx context.Context, what string) error
}

// HeartbeatRelays are session 22's relays on one stage and the clock that
// reaches them: in the lab's process, each a [cast.HeartbeatRelay] on the
// lab's stage, or child processes at the lab's command, each with a stage
// of its own where its heartbeats run. Each call carries the scenario
// clock's tick; the lab's clock fires the children's heartbeats one at a
// time, in the order one stage would fire them, and tells every live child
// that is not frozen each new time. What a child's stage records (timeline
// lines, claims, renewals, sends, completions, cancellations, its jobs)
// comes back with each call and the lab's stage adopts it, so the report
// reads as the in-process run's. A frozen relay is a child stopped by
// SIGSTOP, which the lab does not call until SIGCONT.
type HeartbeatRelays struct {
	o        *Opener
	stage    *cast.HeartbeatStage
	children []*childHeartbeatRelay // the relays at the lab's command, in the order started
	Set
}

// HeartbeatRelays returns the relays of stage, none started yet; close
// them with their Close.
func (o *Opener) HeartbeatRelays(stage *cast.HeartbeatStage) *HeartbeatRelays {
	return &HeartbeatRelays{o: o, stage: stage}
}

// Open starts relay name on the database at path, with the statements sqls
// and the heartbeat policy p.
func (h *HeartbeatRelays) Open(ctx context.Context, path, name string, sqls store.HeartbeatSQL, p cast.HeartbeatPolicy) (HeartbeatRelay, error) {
	if !h.o.cfg.Processes {
		db, err := h.o.cfg.Open(ctx, path)
		if err != nil {
			return nil, err
		}
		r := &inProcessHeartbeatRelay{h.stage.NewRelay(name, db, sqls, p), &inProcess{db: db}}
		h.Add(r)
		return r, nil
	}
	c, err := h.o.start(ctx, path, "", name, heartbeatRelayRole,
		heartbeatRelayWork{Instance: name, SQLs: sqls, Policy: p, Now: h.stage.Now()})
	if err != nil {
		return nil, err
	}
	r := &childHeartbeatRelay{child: c, stage: h.stage, name: name}
	h.Add(r)
	h.children = append(h.children, r)
	if _, err := r.step(ctx, heartbeatOps.Advance, heartbeatCallArgs{Now: h.stage.Now()}); err != nil { // its start line
		return nil, err
	}
	return r, nil
}

// AdvanceTo moves the scenario clock to t, firing on the way every
// heartbeat due: the children's one at a time, earliest first (a tie goes
// to the job claimed first, as on one stage), then tells each live child
// not frozen the time t, and moves the lab's stage (whose in-process
// relays fire their own beats).
func (h *HeartbeatRelays) AdvanceTo(ctx context.Context, t int64) error {
	for {
		next := h.nextDue(t)
		if next == nil {
			break
		}
		s, err := next.step(ctx, heartbeatOps.Beat, heartbeatCallArgs{Now: t})
		if err != nil {
			return err
		}
		if !s.Fired {
			return fmt.Errorf("session 22: %s process %d had a heartbeat due at %s and fired none", next.name, next.pc.Pid(), cast.TickClock(next.due.At))
		}
	}
	for _, c := range h.children {
		if c.frozen || c.closed {
			continue
		}
		if _, err := c.step(ctx, heartbeatOps.Advance, heartbeatCallArgs{Now: t}); err != nil {
			return err
		}
	}
	return h.stage.AdvanceTo(ctx, t)
}

// nextDue is the child whose heartbeat is due first by t, or nil.
func (h *HeartbeatRelays) nextDue(t int64) *childHeartbeatRelay {
	var next *childHeartbeatRelay
	for _, c := range h.children {
		if c.frozen || c.closed || !c.beats || c.due.At > t {
			continue
		}
		if next == nil || c.due.At < next.due.At || (c.due.At == next.due.At && h.claimSeq(c.due) < h.claimSeq(next.due)) {
			next = c
		}
	}
	return next
}

// claimSeq is the timeline line of the claim whose job's beat is due.
func (h *HeartbeatRelays) claimSeq(d cast.DueBeat) int {
	for _, c := range h.stage.Claims {
		if c.Relay == d.Relay && c.Event == d.Event && c.Token == d.Token {
			return c.Seq
		}
	}
	return 0
}

// inProcessHeartbeatRelay is a relay in the lab's process, on the lab's
// stage, on its own connection.
type inProcessHeartbeatRelay struct {
	relay *cast.HeartbeatRelay
	*inProcess
}

func (r *inProcessHeartbeatRelay) Name() string { return r.relay.Name }

func (r *inProcessHeartbeatRelay) Poll(ctx context.Context) (HeartbeatJob, error) {
	j, err := r.relay.Poll(ctx)
	if j == nil {
		return nil, err
	}
	return inProcessHeartbeatJob{j}, err
}

func (r *inProcessHeartbeatRelay) Freeze(_ context.Context, why string) error {
	r.relay.Freeze(why)
	return nil
}

func (r *inProcessHeartbeatRelay) Resume(ctx context.Context) error { return r.relay.Resume(ctx) }

func (r *inProcessHeartbeatRelay) Stop(_ context.Context, grace int64) error {
	r.relay.Stop(grace)
	return nil
}

func (r *inProcessHeartbeatRelay) Exit(ctx context.Context) ([]string, error) {
	return r.relay.Exit(ctx)
}

// inProcessHeartbeatJob is a job of an in-process relay.
type inProcessHeartbeatJob struct{ *cast.HeartbeatJob }

func (j inProcessHeartbeatJob) CompleteAtNextBeat(context.Context) error {
	j.HeartbeatJob.CompleteAtNextBeat()
	return nil
}

func (j inProcessHeartbeatJob) Hang(_ context.Context, what string) error {
	j.HeartbeatJob.Hang(what)
	return nil
}

// heartbeatRelayRole is a session-22 relay as a child process.
const heartbeatRelayRole = "heartbeat-relay"

// heartbeatRelayWork is what a heartbeat-relay child is: relay Instance,
// running the statements SQLs with the heartbeat policy Policy, started
// at tick Now of the scenario clock.
type heartbeatRelayWork struct {
	Instance string
	SQLs     store.HeartbeatSQL
	Policy   cast.HeartbeatPolicy
	Now      int64
}

// heartbeatCallArgs is a call's arguments: the clock's tick, and the job
// (its event and token) and what its work hangs on, or the grace period
// of a stop, where they apply.
type heartbeatCallArgs struct {
	Now   int64
	Event string `json:",omitempty"`
	Token int64  `json:",omitempty"`
	What  string `json:",omitempty"`
	Grace int64  `json:",omitempty"`
}

// heartbeatStep is a call's result, as it crosses the pipe: its value,
// what the child's stage recorded meanwhile, and its next heartbeat.
type heartbeatStep struct {
	OK     bool `json:",omitempty"` // Send's or Complete's result; Poll: it claimed Event under Token
	Fired  bool `json:",omitempty"` // beat: a heartbeat fired
	Event  string
	Token  int64
	Record cast.HeartbeatRecord
	Due    cast.DueBeat
	Beats  bool     // Due is set: a heartbeat still runs
	Held   []string `json:",omitempty"` // exit: the events the relay still held
}

// heartbeatOp is an operation of the heartbeat-relay child: each a step
// at the call's tick.
type heartbeatOp = proc.Operation[heartbeatCallArgs, heartbeatStep]

// heartbeatOps are the heartbeat-relay child's operations.
var heartbeatOps = struct {
	Advance, Beat, Wake, Poll, Send, Complete, CompleteAtBeat, Hang, Stop, Exit heartbeatOp
}{
	Advance:        heartbeatOp{Name: "advance"},
	Beat:           heartbeatOp{Name: "beat"},
	Wake:           heartbeatOp{Name: "wake"},
	Poll:           heartbeatOp{Name: "poll"},
	Send:           heartbeatOp{Name: "send"},
	Complete:       heartbeatOp{Name: "complete"},
	CompleteAtBeat: heartbeatOp{Name: "complete-at-beat"},
	Hang:           heartbeatOp{Name: "hang"},
	Stop:           heartbeatOp{Name: "stop"},
	Exit:           heartbeatOp{Name: "exit"},
}

// childStage is a heartbeat child's own stage: its broker on db, its
// timeline its own (the lab adopts what it records), its clock at now.
func childStage(ctx context.Context, db *store.DB, now int64) (*cast.HeartbeatStage, error) {
	stage := cast.NewHeartbeatStage(&lab.Timeline{}, store.NewBroker(db, store.BrokerLesson))
	if err := stage.AdvanceTo(ctx, now); err != nil {
		stage.Close()
		return nil, err
	}
	return stage, nil
}

// serveHeartbeatRelay is the heartbeat-relay child: one relay on its
// own connection and stage, whose heartbeats fire as the lab's calls move
// its clock, performing the lab's calls.
func serveHeartbeatRelay(ctx context.Context, w *proc.Worker) (any, error) {
	var work heartbeatRelayWork
	db, err := w.Begin(ctx, &work)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	stage, err := childStage(ctx, db, work.Now)
	if err != nil {
		return nil, err
	}
	defer stage.Close()
	relay := stage.NewRelayIn(work.Instance, fmt.Sprintf("child process %d (outboxlab worker --role %s) on its own connection",
		os.Getpid(), heartbeatRelayRole), db, work.SQLs, work.Policy)
	type key struct {
		event string
		token int64
	}
	jobs := map[key]*cast.HeartbeatJob{}
	// step is an operation at the call's tick: the clock moved there
	// first (firing what is due, as on the lab's stage) unless the
	// operation moves it itself.
	type perform = func(ctx context.Context, a heartbeatCallArgs) (heartbeatStep, error)
	step := func(moves bool, do func(ctx context.Context, a heartbeatCallArgs, s *heartbeatStep) error) perform {
		return func(ctx context.Context, a heartbeatCallArgs) (heartbeatStep, error) {
			var s heartbeatStep
			if !moves {
				if err := stage.AdvanceTo(ctx, a.Now); err != nil {
					return s, err
				}
			}
			err := do(ctx, a, &s)
			s.Record = stage.TakeRecord()
			s.Due, s.Beats = stage.NextBeat()
			return s, err
		}
	}
	withJob := func(do func(ctx context.Context, j *cast.HeartbeatJob, a heartbeatCallArgs, s *heartbeatStep) error) perform {
		return step(false, func(ctx context.Context, a heartbeatCallArgs, s *heartbeatStep) error {
			j, ok := jobs[key{a.Event, a.Token}]
			if !ok {
				return fmt.Errorf("%s holds no job on %s under token %d", work.Instance, a.Event, a.Token)
			}
			return do(ctx, j, a, s)
		})
	}
	return nil, w.Answer(ctx,
		heartbeatOps.Advance.Handle(step(false, func(context.Context, heartbeatCallArgs, *heartbeatStep) error { return nil })),
		heartbeatOps.Beat.Handle(step(true, func(ctx context.Context, a heartbeatCallArgs, s *heartbeatStep) (err error) {
			s.Fired, err = stage.FireNextBeat(ctx, a.Now)
			return err
		})),
		heartbeatOps.Wake.Handle(step(true, func(ctx context.Context, a heartbeatCallArgs, _ *heartbeatStep) error {
			return stage.Wake(ctx, a.Now)
		})),
		heartbeatOps.Poll.Handle(step(false, func(ctx context.Context, _ heartbeatCallArgs, s *heartbeatStep) error {
			j, err := relay.Poll(ctx)
			if j != nil {
				jobs[key{j.Event, j.Token}] = j
				s.OK, s.Event, s.Token = true, j.Event, j.Token
			}
			return err
		})),
		heartbeatOps.Send.Handle(withJob(func(ctx context.Context, j *cast.HeartbeatJob, _ heartbeatCallArgs, s *heartbeatStep) (err error) {
			s.OK, err = j.Send(ctx)
			return err
		})),
		heartbeatOps.Complete.Handle(withJob(func(ctx context.Context, j *cast.HeartbeatJob, _ heartbeatCallArgs, s *heartbeatStep) (err error) {
			s.OK, err = j.Complete(ctx)
			return err
		})),
		heartbeatOps.CompleteAtBeat.Handle(withJob(func(_ context.Context, j *cast.HeartbeatJob, _ heartbeatCallArgs, _ *heartbeatStep) error {
			j.CompleteAtNextBeat()
			return nil
		})),
		heartbeatOps.Hang.Handle(withJob(func(_ context.Context, j *cast.HeartbeatJob, a heartbeatCallArgs, _ *heartbeatStep) error {
			j.Hang(a.What)
			return nil
		})),
		// stop waits for the stop signal, a real SIGTERM, where the lab
		// stops the relay: after its send, before its completion.
		heartbeatOps.Stop.Handle(step(false, func(_ context.Context, a heartbeatCallArgs, _ *heartbeatStep) error {
			if _, err := w.AwaitSignal(failpoint.AfterSendBeforeComplete, stage.TakeRecord(), syscall.SIGTERM); err != nil {
				return err
			}
			relay.StopOnSignal(a.Grace, os.Getpid())
			return nil
		})),
		heartbeatOps.Exit.Handle(step(false, func(ctx context.Context, _ heartbeatCallArgs, s *heartbeatStep) (err error) {
			s.Held, err = relay.Exit(ctx)
			return err
		})),
	)
}

// childHeartbeatRelay is a relay in a child process, as the lab drives
// it: each method a call at the lab's clock, its record adopted by the
// lab's stage.
type childHeartbeatRelay struct {
	*child
	stage  *cast.HeartbeatStage
	name   string
	due    cast.DueBeat // its next heartbeat, if beats
	beats  bool
	did    string // what it last did, for the processes table
	frozen bool   // stopped by SIGSTOP: the lab does not call it
	closed bool
}

func (r *childHeartbeatRelay) Name() string { return r.name }

// step has the child perform op with a, and adopts its record.
func (r *childHeartbeatRelay) step(ctx context.Context, op heartbeatOp, a heartbeatCallArgs) (heartbeatStep, error) {
	if r.frozen || r.closed {
		return heartbeatStep{}, fmt.Errorf("session 22: %s process %d was called (%s) while frozen or closed", r.name, r.pc.Pid(), op.Name)
	}
	s, err := call(ctx, r.child, op, a)
	if err != nil {
		return s, err
	}
	r.stage.Adopt(s.Record)
	r.due, r.beats = s.Due, s.Beats
	return s, nil
}

func (r *childHeartbeatRelay) Poll(ctx context.Context) (HeartbeatJob, error) {
	s, err := r.step(ctx, heartbeatOps.Poll, heartbeatCallArgs{Now: r.stage.Now()})
	if err != nil || !s.OK {
		return nil, err
	}
	r.did = "its claim of " + s.Event
	return &childHeartbeatJob{relay: r, event: s.Event, token: s.Token}, nil
}

func (r *childHeartbeatRelay) Freeze(_ context.Context, why string) error {
	how, err := r.Stall(cast.TickClock(r.stage.Now()), r.did)
	if err != nil {
		return err
	}
	r.frozen = true
	r.stage.AdoptedRelay(r.name).Freeze(WithHow(why, how))
	return nil
}

func (r *childHeartbeatRelay) Resume(ctx context.Context) error {
	how, err := r.Wake(cast.TickClock(r.stage.Now()), "its overdue heartbeat")
	if err != nil {
		return err
	}
	r.frozen = false
	if err := r.stage.AdoptedRelay(r.name).ResumeBy(ctx, how); err != nil {
		return err
	}
	_, err = r.step(ctx, heartbeatOps.Wake, heartbeatCallArgs{Now: r.stage.Now()})
	return err
}

// Stop has the child wait at failpoint after-send-before-complete for
// its stop signal and sends it a real SIGTERM there, which it catches.
func (r *childHeartbeatRelay) Stop(ctx context.Context, grace int64) error {
	if r.frozen || r.closed {
		return fmt.Errorf("session 22: %s process %d was stopped while frozen or closed", r.name, r.pc.Pid())
	}
	_, err := heartbeatOps.Stop.Call(ctx, r.pc, heartbeatCallArgs{Now: r.stage.Now(), Grace: grace})
	var reached *proc.Reached
	if !errors.As(err, &reached) || reached.Report.At != failpoint.AfterSendBeforeComplete {
		return fmt.Errorf("session 22: %s process %d, asked to wait for its stop signal, did not reach %s: %w",
			r.name, r.pc.Pid(), failpoint.AfterSendBeforeComplete, callError(err))
	}
	var rec cast.HeartbeatRecord
	if err := reached.Report.Decode(&rec); err != nil {
		return err
	}
	r.stage.Adopt(rec)
	if err := r.pc.Signal(syscall.SIGTERM, failpoint.AfterSendBeforeComplete); err != nil {
		return err
	}
	r.sentIt = &sent{sig: syscall.SIGTERM, at: failpoint.AfterSendBeforeComplete}
	s, err := heartbeatOps.Stop.Result(ctx, r.pc)
	if err := callError(err); err != nil {
		return err
	}
	r.stage.Adopt(s.Record)
	r.due, r.beats = s.Due, s.Beats
	return nil
}

// Exit ends the stopped relay's work: the events it still held.
func (r *childHeartbeatRelay) Exit(ctx context.Context) ([]string, error) {
	s, err := r.step(ctx, heartbeatOps.Exit, heartbeatCallArgs{Now: r.stage.Now()})
	return s.Held, err
}

// Close ends the child: let run again if frozen, told to finish, reaped.
func (r *childHeartbeatRelay) Close(ctx context.Context) error {
	if r.closed {
		return nil
	}
	r.closed = true
	if r.frozen {
		r.frozen = false
		if err := r.pc.Thaw(); err != nil {
			return err
		}
	}
	return r.child.Close(ctx)
}

// childHeartbeatJob is a job of a child relay: its event and token.
type childHeartbeatJob struct {
	relay *childHeartbeatRelay
	event string
	token int64
}

// call has the relay perform op on the job.
func (j *childHeartbeatJob) call(ctx context.Context, op heartbeatOp, what string) (bool, error) {
	s, err := j.relay.step(ctx, op, heartbeatCallArgs{Now: j.relay.stage.Now(), Event: j.event, Token: j.token, What: what})
	if err == nil {
		j.relay.did = fmt.Sprintf("its %s of %s", op.Name, j.event)
	}
	return s.OK, err
}

func (j *childHeartbeatJob) Send(ctx context.Context) (bool, error) {
	return j.call(ctx, heartbeatOps.Send, "")
}
func (j *childHeartbeatJob) Complete(ctx context.Context) (bool, error) {
	return j.call(ctx, heartbeatOps.Complete, "")
}

func (j *childHeartbeatJob) CompleteAtNextBeat(ctx context.Context) error {
	_, err := j.call(ctx, heartbeatOps.CompleteAtBeat, "")
	return err
}

func (j *childHeartbeatJob) Hang(ctx context.Context, what string) error {
	_, err := j.call(ctx, heartbeatOps.Hang, what)
	return err
}
