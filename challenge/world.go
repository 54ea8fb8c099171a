package challenge

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/outboxlab/outboxlab/clock"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/relayproto"
	"github.com/outboxlab/outboxlab/store"
)

// The real-time bounds of a program's behaviour: a program that breaks
// them has failed, not the lab.
const (
	// DefaultIdleTimeout is how long a program may compute between a
	// reply and its next request.
	DefaultIdleTimeout = 10 * time.Second
	// shutdownGrace is how long a program has to exit after SIGTERM.
	shutdownGrace = 3 * time.Second
	// busyPause is the pause between two tries of a begin the database
	// turned away because another instance's transaction held its lock.
	busyPause = 3 * time.Millisecond
	// maxRequests bounds one instance's requests in one sequence.
	maxRequests = 20000
	// maxMistakes bounds one instance's requests that broke the protocol
	// or the sandbox: a program that keeps printing what is not a request
	// (its own messages belong on stderr) is stopped, not answered 20000
	// times into a report of 20000 faults.
	maxMistakes = 10
)

// instState is what an instance is doing, as the lab clock sees it.
type instState int

const (
	running instState = iota // computing, or its request is being served
	waiting                  // in a wait, until wake
	held                     // its reply held, or frozen, until wake
	locked                   // its begin waits for another instance's transaction
	gated                    // (an ordering) its request waits for its turn
	gone                     // killed or exited
)

// inst is one instance of the user's program.
type inst struct {
	name   string
	skew   time.Duration
	prog   *program
	db     *store.DB
	tx     *store.ProgramTx
	state  instState
	wake   time.Time
	faults []*armed
	hello  bool
	wrote  bool // its open transaction ran an exec
	// pending is the request waiting at the gate, under an ordering, and
	// step the step that let its latest request through.
	pending relayproto.Request
	step    int
	open    bool // it has an open transaction (in.tx, as the coordinator reads it)
	// killed: the lab killed it (a fault, the end of the run, a breach).
	killed bool
	// termed: the lab sent it SIGTERM (a fault): its exit is no fault.
	termed   bool
	requests int
	// mistakes counts its protocol and sandbox faults (maxMistakes).
	mistakes int
}

// request is one line of the request ledger.
type request struct {
	seq      int
	ticket   int // its place in the order the lab answered requests
	step     int // under an ordering, the step that let it through
	at       string
	instance string
	op       string
	asked    string
	answered string
	fault    string
}

// problem is a program's fault the lab saw: a breach of the protocol, a
// hang, an early exit, a statement the sandbox refused.
type problem struct {
	instance string
	kind     string // "protocol", "sandbox", "exit", "hang"
	detail   string
}

// world is one sequence's run: the lab clock, the instances, the ledgers.
type world struct {
	ch    *Challenge
	seq   Sequence
	rules rules
	// lab is the lab's own connection, which names each program
	// transaction's changes on PostgreSQL (see [store.ProgramTx.Commit]);
	// engine is the run's database engine.
	lab    *store.DB
	engine store.Engine
	start  time.Time
	idle   time.Duration // see Options.IdleTimeout

	mu       sync.Mutex
	cond     *sync.Cond
	clock    *clock.Manual
	insts    []*inst
	gen      int // bumps on every change of an instance's state
	shutdown bool

	timeline *lab.Timeline
	requests []request
	tickets  int // places taken in the order of answers (see request.ticket)
	problems []problem
	busy     int   // begins and commits SQLite turned away as busy (the lab's own connection held the lock)
	queued   int   // begins that waited in line for another instance's transaction
	commits  int64 // commits asked for, numbering the transactions in the audit
	line     []*inst
	fired    []string
	stderr   map[string]string
	exits    map[string]int64  // instance -> the tick it ended at
	exited   map[string]string // instance -> how it ended after the lab's SIGTERM
	// statements names each statement text the programs ran, for the
	// run's statement ledger.
	statements map[string]string
	ledger     *store.Ledger

	// order, when set, serves one request at a time, in the order it
	// says (see [Ordering]); steps counts the requests it let through.
	order     *Ordering
	relay     string // the command line, which a replay command names
	steps     int
	last      *inst
	decisions []decision
	grants    []grant
	diverged  string // why a replayed ordering could not be followed
}

// horizon is the most lab time the sequence may take.
func (w *world) horizon() time.Duration { return cmp.Or(w.seq.Horizon, w.ch.Horizon) }

// now is the lab clock, formatted; for an instance, with its skew.
func (w *world) nowFor(in *inst) string { return clock.Format(w.clock.Now().Add(in.skew)) }
func (w *world) now() string            { return clock.Format(w.clock.Now()) }

// event adds e at the lab clock.
func (w *world) event(e lab.Event) int {
	e.At = w.now()
	return w.timeline.Add(e)
}

// setState changes in's state and wakes whoever waits on a change.
func (w *world) setState(in *inst, s instState, wake time.Time) {
	w.mu.Lock()
	in.state, in.wake = s, wake
	w.gen++
	w.cond.Broadcast()
	w.mu.Unlock()
}

// quiet reports whether no instance can go on without the lab clock
// moving: none is running, and a begin waits for the database's lock only
// while the lock's holder (an instance with an open transaction) is itself
// waiting or held.
func (w *world) quiet() bool {
	stuck := slices.ContainsFunc(w.insts, func(in *inst) bool { return in.open && (in.state == waiting || in.state == held) })
	for _, in := range w.insts {
		if in.state == running || (in.state == locked && !stuck) {
			return false
		}
	}
	return true
}

func (w *world) allGone() bool {
	return !slices.ContainsFunc(w.insts, func(in *inst) bool { return in.state != gone })
}

// coordinate moves the lab clock: whenever no instance runs, it stops the
// run if the challenge's work is done (and no reply is held), or moves the
// clock to the earliest wake and wakes those due. It returns once every
// instance is gone.
func (w *world) coordinate(ctx context.Context) {
	for {
		w.mu.Lock()
		for !w.quiet() {
			w.cond.Wait()
		}
		if w.allGone() {
			w.mu.Unlock()
			return
		}
		if w.order != nil && w.grantLocked() {
			w.gen++
			w.cond.Broadcast()
			w.mu.Unlock()
			continue
		}
		gen := w.gen
		holds := slices.ContainsFunc(w.insts, func(in *inst) bool { return in.state == held })
		w.mu.Unlock()

		done, why := false, ""
		if !holds {
			var err error
			done, err = w.rules.done(ctx)
			why = w.rules.finished() + "; the lab stops the programs (SIGTERM)"
			if err != nil {
				// The lab cannot read its own database: stop, and say why.
				done, why = true, "the lab could not read its database ("+err.Error()+"); it stops the programs (SIGTERM)"
			}
		}

		w.mu.Lock()
		if w.gen != gen {
			w.mu.Unlock()
			continue
		}
		if done && !w.shutdown {
			w.stopLocked(why)
		}
		var next time.Time
		for _, in := range w.insts {
			if (in.state == waiting || in.state == held) && (next.IsZero() || in.wake.Before(next)) {
				next = in.wake
			}
		}
		switch {
		case next.IsZero():
			// Only begins waiting for a lock: they retry on their own.
			w.mu.Unlock()
			time.Sleep(busyPause)
			continue
		case next.After(w.start.Add(w.horizon())) && !w.shutdown:
			w.stopLocked(fmt.Sprintf("the lab clock reached the sequence's horizon (%s): the lab stops the programs (SIGTERM)", w.horizon()))
		default:
			if next.After(w.clock.Now()) {
				w.clock.Set(next)
			}
			for _, in := range w.insts {
				if (in.state == waiting || in.state == held) && !in.wake.After(next) {
					in.state = running
				}
			}
		}
		w.gen++
		w.cond.Broadcast()
		w.mu.Unlock()
	}
}

// stopLocked begins the end of the run: waits return with shutdown, held
// replies are let go, and every program gets SIGTERM, then SIGKILL after
// shutdownGrace. w.mu is held.
func (w *world) stopLocked(why string) {
	w.shutdown = true
	w.gen++
	defer w.cond.Broadcast()
	w.timeline.Add(lab.Event{At: w.now(), Kind: lab.KindNote, Actor: "lab", Action: "stop", Detail: why})
	for _, in := range w.insts {
		if in.state == waiting || in.state == held {
			in.state = running
		}
		if in.state != gone {
			_ = in.prog.signal(syscall.SIGCONT)
			_ = in.prog.signal(syscall.SIGTERM)
		}
	}
	progs := make([]*program, 0, len(w.insts))
	for _, in := range w.insts {
		progs = append(progs, in.prog)
	}
	time.AfterFunc(shutdownGrace, func() {
		for _, p := range progs {
			_ = p.signal(syscall.SIGKILL)
		}
	})
}

// serve answers in's requests until its program ends.
func (w *world) serve(ctx context.Context, in *inst) {
	defer w.ended(in)
	for {
		line, ok := w.next(ctx, in)
		if !ok {
			return
		}
		in.requests++
		if in.requests > maxRequests {
			w.breach(in, "flood", fmt.Sprintf("sent more than %d requests in one sequence", maxRequests))
			return
		}
		req, err := relayproto.Decode(line)
		if err == nil && w.order != nil && !w.gate(in, req) {
			return
		}
		var rep relayproto.Reply
		var send bool
		var rec request
		if err != nil {
			w.addProblem(in, "protocol", err.Error())
			rep, send = w.fail(in, relayproto.ErrProtocol, err.Error()), true
			rec = request{op: "?", asked: clip(string(line), 60)}
		} else {
			rep, send, rec = w.handle(ctx, in, req)
		}
		rec.instance, rec.step = in.name, in.step
		if rep.Error != nil && rec.answered == "" {
			rec.answered = rep.Error.Kind + ": " + clip(rep.Error.Message, 80)
		}
		w.record(rec)
		if w.mistakesOf(in) >= maxMistakes {
			w.breach(in, "flood", fmt.Sprintf("broke the protocol or the sandbox %d times: the lab stopped it (stdout carries "+
				"requests only; a program's own messages go to stderr)", maxMistakes))
			return
		}
		if !send {
			continue // killed: its next read ends
		}
		b, err := json.Marshal(rep)
		if err == nil {
			err = in.prog.reply(b, w.idle)
		}
		if errors.Is(err, errNotReading) {
			w.breach(in, "hang", fmt.Sprintf("did not read the lab's reply for %s (real time): a program reads one reply per request", w.idle))
			return
		}
		if err != nil {
			continue // it has gone; the next read says how
		}
		w.setState(in, running, time.Time{})
	}
}

// next waits for in's next request line; false when its program has
// ended, broke a bound, or the run is over.
func (w *world) next(ctx context.Context, in *inst) ([]byte, bool) {
	timer := time.NewTimer(w.idle)
	defer timer.Stop()
	select {
	case l, ok := <-in.prog.lines:
		switch {
		case !ok:
			return nil, false
		case errors.Is(l.err, errLineTooLong):
			w.breach(in, "protocol", l.err.Error())
			return nil, false
		case l.err != nil:
			return nil, false
		}
		return l.b, true
	case <-timer.C:
		since := "after its last reply"
		if in.requests == 0 {
			since = "since it started"
		}
		w.breach(in, "hang", fmt.Sprintf("sent no request for %s (real time) %s: a program asks the lab for everything, and waits with wait",
			w.idle, since))
		return nil, false
	case <-ctx.Done():
		w.kill(in)
		return nil, false
	}
}

// breach records a program's fault that ends it, and kills it.
func (w *world) breach(in *inst, kind, detail string) {
	w.addProblem(in, kind, detail)
	w.kill(in)
}

func (w *world) addProblem(in *inst, kind, detail string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.problems = append(w.problems, problem{instance: in.name, kind: kind, detail: strings.TrimPrefix(detail, "relayproto: ")})
	if kind == "protocol" || kind == "sandbox" {
		in.mistakes++
	}
}

// mistakesOf is how many of in's requests broke the protocol or the
// sandbox so far.
func (w *world) mistakesOf(in *inst) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return in.mistakes
}

// kill kills in's program (its open transaction rolls back with its
// connection) and marks it gone.
func (w *world) kill(in *inst) {
	w.mu.Lock()
	in.killed = true
	w.mu.Unlock()
	in.prog.kill()
	in.closeDB()
	w.setState(in, gone, time.Time{})
}

// startTogether marks in as started and, unless an ordering serves the
// requests one at a time, holds its hello's reply until every instance
// has said hello (or ended): the instances start their work together,
// however long each program takes to start.
func (w *world) startTogether(ctx context.Context, in *inst) {
	w.mu.Lock()
	defer w.mu.Unlock()
	in.hello = true
	w.gen++
	w.cond.Broadcast()
	for w.order == nil && ctx.Err() == nil && slices.ContainsFunc(w.insts, func(o *inst) bool { return !o.hello && o.state != gone }) {
		w.cond.Wait()
	}
}

// setTx makes tx in's open transaction (nil: none).
func (w *world) setTx(in *inst, tx *store.ProgramTx) {
	in.tx = tx
	if tx != nil {
		in.wrote = false
	}
	w.mu.Lock()
	in.open = tx != nil
	w.gen++
	w.cond.Broadcast()
	w.mu.Unlock()
}

// closeDB rolls back in's open transaction and closes its connection, as
// its death would.
func (in *inst) closeDB() {
	if in.tx != nil {
		_ = in.tx.Rollback()
		in.tx = nil
	}
	if in.db != nil {
		_ = in.db.Close()
		in.db = nil
	}
}

// ended marks in gone once its program has ended, and says how it ended.
func (w *world) ended(in *inst) {
	in.prog.kill() // the rest of its process group
	in.closeDB()
	w.mu.Lock()
	killed, stopping := in.killed, w.shutdown || in.termed
	if s := strings.TrimSpace(in.prog.stderrText()); s != "" {
		w.stderr[in.name] = s
	}
	w.mu.Unlock()
	how := in.prog.exited()
	w.mu.Lock()
	w.exits[in.name] = w.clock.Now().Sub(w.start).Milliseconds()
	w.mu.Unlock()
	switch {
	case killed:
	case stopping:
		// Said at the end, in start order: when the programs end after
		// the lab's SIGTERM is the operating system's business.
		w.mu.Lock()
		w.exited[in.name] = "after the lab's SIGTERM: " + how
		w.mu.Unlock()
	default:
		w.addProblem(in, "exit", fmt.Sprintf("%s on its own, before the lab stopped it", how))
		w.event(lab.Event{Kind: lab.KindCrash, Actor: in.name, Action: "EXIT", Detail: how + " on its own, before the lab stopped it"})
	}
	w.setState(in, gone, time.Time{})
}

// record adds rec to the request ledger in its place in the order of
// answers, at the lab clock: now, unless it ended a turn in the line of
// transactions (see [world.endTurn]), which took both then.
func (w *world) record(rec request) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if rec.ticket == 0 {
		w.tickets++
		rec.ticket, rec.at = w.tickets, w.now()
	}
	w.requests = append(w.requests, rec)
}

// fail is an error reply.
func (w *world) fail(in *inst, kind, msg string) relayproto.Reply {
	return relayproto.Reply{Now: w.nowFor(in), Tick: w.tickFor(in), Error: &relayproto.Error{Kind: kind, Message: msg}}
}

// ok is a success reply, to be filled.
func (w *world) ok(in *inst) relayproto.Reply {
	return relayproto.Reply{OK: true, Now: w.nowFor(in), Tick: w.tickFor(in)}
}

// tickFor is the lab clock for in, in milliseconds since the lab's epoch.
func (w *world) tickFor(in *inst) int64 {
	return w.clock.Now().Add(in.skew).Sub(w.start).Milliseconds()
}

// sleepUntil blocks in, in state s, until the coordinator wakes it (the
// lab clock reached wake, or the run is stopping).
func (w *world) sleepUntil(in *inst, s instState, wake time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.shutdown {
		return
	}
	in.state, in.wake = s, wake
	w.gen++
	w.cond.Broadcast()
	for in.state == s {
		w.cond.Wait()
	}
}

func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}
