package challenge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/relayproto"
	"github.com/outboxlab/outboxlab/store"
)

// handle serves one request of in's: the faults armed before it, the
// request itself, the faults armed after it. send is false when no reply
// goes back (the program was killed).
func (w *world) handle(ctx context.Context, in *inst, req relayproto.Request) (rep relayproto.Reply, send bool, rec request) {
	rec = request{op: req.Op, asked: asked(req)}
	if !in.hello && req.Op != relayproto.OpHello {
		msg := "the first request must be hello"
		w.addProblem(in, "protocol", msg)
		return w.fail(in, relayproto.ErrProtocol, msg), true, rec
	}
	for _, f := range in.faults {
		if !f.Do.before() || !f.match(f.At.before(req)) {
			continue
		}
		rec.fault = string(f.Do)
		if f.Do == DropRequest {
			w.fire(in, f.Fault, lab.KindAckLost, "lost on the way: the lab never saw it")
			return w.fail(in, relayproto.ErrUnknownOutcome, "the connection dropped: the request may or may not have arrived"), true, rec
		}
		w.fire(in, f.Fault, lab.KindError, "database error instead of running the statement")
		return w.fail(in, relayproto.ErrDatabase, "disk I/O error (injected by the lab: the statement did not run)"), true, rec
	}
	rep, changes := w.run(ctx, in, req, &rec)
	for _, f := range in.faults {
		if f.Do.before() || !f.match(f.At.after(req, changes, w.rules.classify)) {
			continue
		}
		rec.fault = string(f.Do)
		switch f.Do {
		case Kill:
			w.fire(in, f.Fault, lab.KindCrash, "SIGKILL: the process group dies before the reply; its connection and memory go with it")
			w.kill(in)
			return rep, false, rec
		case Stop:
			w.fire(in, f.Fault, lab.KindStall, fmt.Sprintf("SIGSTOP: frozen for %s, holding what it holds", f.For))
			_ = in.prog.signal(syscall.SIGSTOP)
			w.sleepUntil(in, held, w.clock.Now().Add(f.For))
			_ = in.prog.signal(syscall.SIGCONT)
			w.event(lab.Event{Kind: lab.KindWake, Actor: in.name, Action: "SIGCONT", Detail: "goes on, and now gets its reply"})
		case Hold:
			w.fire(in, f.Fault, lab.KindStall, fmt.Sprintf("its reply is held for %s: it cannot act meanwhile", f.For))
			w.sleepUntil(in, held, w.clock.Now().Add(f.For))
			w.event(lab.Event{Kind: lab.KindWake, Actor: in.name, Action: "reply", Detail: "the held reply reaches it"})
		case Term:
			w.fire(in, f.Fault, lab.KindNote, "SIGTERM: the operating system asks it to shut down; its reply follows")
			w.mu.Lock()
			in.termed = true
			w.mu.Unlock()
			_ = in.prog.signal(syscall.SIGTERM)
		case LoseReply:
			w.fire(in, f.Fault, lab.KindNote, "the request ran, but the reply says its outcome is unknown")
			rep = w.fail(in, relayproto.ErrUnknownOutcome, "the connection dropped before the reply: the lab may or may not have done it")
		}
		rep.Now, rep.Tick = w.nowFor(in), w.tickFor(in)
	}
	return rep, true, rec
}

// fire records that a fault fired.
func (w *world) fire(in *inst, f Fault, kind lab.Kind, detail string) {
	w.mu.Lock()
	w.fired = append(w.fired, f.String())
	w.mu.Unlock()
	w.event(lab.Event{Kind: kind, Actor: in.name, Action: "FAULT " + string(f.Do), Detail: f.String() + ": " + detail})
}

// run serves req itself and returns its reply and, for a commit, what it
// committed.
func (w *world) run(ctx context.Context, in *inst, req relayproto.Request, rec *request) (relayproto.Reply, []store.AuditEntry) {
	switch req.Op {
	case relayproto.OpHello:
		if in.hello {
			return w.protocol(in, "hello twice"), nil
		}
		w.startTogether(ctx, in)
		rep := w.ok(in)
		rep.Instance, rep.Challenge, rep.Version, rep.Settings, rep.Engine = in.name, w.ch.Name, relayproto.Version, w.ch.Settings, string(w.engine)
		w.event(lab.Event{Kind: lab.KindNote, Actor: in.name, Action: "hello", Detail: "started, on its own connection"})
		return rep, nil
	case relayproto.OpBegin:
		if in.tx != nil {
			return w.protocol(in, "begin inside an open transaction"), nil
		}
		tx, retries, err := w.begin(ctx, in)
		if retries > 0 {
			rec.answered = fmt.Sprintf("began after %d busy retries", retries)
		}
		if err != nil {
			return w.fail(in, relayproto.ErrDatabase, err.Error()), nil
		}
		w.setTx(in, tx)
		return w.ok(in), nil
	case relayproto.OpQuery, relayproto.OpExec:
		if in.tx == nil {
			return w.protocol(in, req.Op+" outside a transaction: send begin first"), nil
		}
		return w.statement(ctx, in, req, rec), nil
	case relayproto.OpCommit:
		if in.tx == nil {
			return w.protocol(in, "commit without a transaction"), nil
		}
		tx := in.tx
		in.tx = nil // over, whatever the commit says; the turn is released once it has
		w.mu.Lock()
		w.commits++ // one transaction open at a time: the numbers follow commit order
		n := w.commits
		w.mu.Unlock()
		changes, err := tx.Commit(ctx, w.lab, in.name, w.now(), n)
		if err == nil {
			rec.answered = fmt.Sprintf("committed, %d rows changed", len(changes))
			for _, e := range w.rules.describe(changes) {
				e.Actor = in.name
				w.event(e)
			}
		}
		// The commit is done, and on the timeline, before the next
		// transaction in line begins (PostgreSQL's BEGIN would not wait
		// for it as SQLite's BEGIN IMMEDIATE does); the request ledger
		// puts it before that begin.
		w.endTurn(in, rec)
		if err != nil {
			return w.dbError(in, err), nil
		}
		return w.ok(in), changes
	case relayproto.OpRollback:
		if in.tx == nil {
			return w.protocol(in, "rollback without a transaction"), nil
		}
		err := in.tx.Rollback()
		w.endTurn(in, rec)
		if err != nil {
			return w.dbError(in, err), nil
		}
		if in.wrote {
			w.event(lab.Event{Kind: lab.KindNote, Actor: in.name, Action: "rollback", Detail: "rolled back its transaction and the writes in it"})
		}
		return w.ok(in), nil
	case relayproto.OpProvider:
		status, txn, ok := w.rules.providerStatus(in.name, req.Key)
		if !ok {
			return w.protocol(in, "this challenge has no payment provider"), nil
		}
		rep := w.ok(in)
		rep.Status, rep.TransactionID = status, txn
		rec.answered = strings.TrimSpace(status + " " + txn)
		w.event(lab.Event{Kind: lab.KindWork, Subject: req.Key, Actor: in.name, Action: "provider",
			Detail: fmt.Sprintf("status check of %s answered %s", req.Key, rec.answered)})
		return rep, nil
	case relayproto.OpWait:
		if req.Ms < 1 {
			return w.protocol(in, "wait needs ms of at least 1"), nil
		}
		w.sleepUntil(in, waiting, w.clock.Now().Add(time.Duration(req.Ms)*time.Millisecond))
		rep := w.ok(in)
		w.mu.Lock()
		rep.Shutdown = w.shutdown
		w.mu.Unlock()
		if rep.Shutdown {
			rec.answered = "shutdown"
		}
		return rep, nil
	case relayproto.OpWork:
		if req.Ms < 1 || req.Key == "" {
			return w.protocol(in, "work needs the event's key and ms of at least 1"), nil
		}
		w.mu.Lock()
		after, stopping := w.commits, w.shutdown
		w.mu.Unlock()
		if stopping {
			// The run is over: no more work happens, and the lab says so.
			rep := w.ok(in)
			rep.Shutdown = true
			rec.answered = "shutdown"
			return rep, nil
		}
		start := w.tickFor(in) - in.skew.Milliseconds()
		if err := w.rules.work(in.name, req.Key, start, start+req.Ms, after); errors.Is(err, errNoWork) {
			return w.protocol(in, "this challenge has no long work: work is for the heartbeat relay"), nil
		}
		w.event(lab.Event{Kind: lab.KindWork, Subject: req.Key, Actor: in.name, Action: "work",
			Detail: fmt.Sprintf("works on %s for %d ms (to tick %d)", req.Key, req.Ms, start+req.Ms)})
		w.sleepUntil(in, waiting, w.clock.Now().Add(time.Duration(req.Ms)*time.Millisecond))
		rep := w.ok(in)
		w.mu.Lock()
		rep.Shutdown = w.shutdown
		w.mu.Unlock()
		return rep, nil
	case relayproto.OpLog:
		w.event(lab.Event{Kind: lab.KindNote, Actor: in.name, Action: "log", Detail: clip(req.Text, 200)})
		return w.ok(in), nil
	case relayproto.OpSend:
		if in.tx != nil {
			return w.protocol(in, "send inside an open transaction: the lab's broker shares the database, whose write lock "+
				"your transaction holds; commit first (a relay sends between its claim's commit and its completion)"), nil
		}
		var offer int64
		err := w.withTurn(ctx, in, rec, func() (err error) {
			offer, err = w.rules.send(ctx, in.name, req.EventID, req.Payload, w.clock.Now())
			return err
		})
		if errors.Is(err, errNoBroker) {
			return w.protocol(in, "this challenge has no broker"), nil
		}
		if err != nil {
			return w.fail(in, relayproto.ErrBrokerUnavailable, "the broker did not store the send: "+err.Error()), nil
		}
		rep := w.ok(in)
		rep.OfferID = offer
		rec.answered = fmt.Sprintf("offer %d", offer)
		w.event(lab.Event{Kind: lab.KindOffer, Subject: req.EventID, Actor: in.name, Action: "send", Offer: offer,
			Detail: fmt.Sprintf("sent %s: the broker stored offer %d", req.EventID, offer)})
		return rep, nil
	case relayproto.OpReceive:
		if in.tx != nil {
			return w.protocol(in, "receive inside an open transaction: the lab's broker shares the database; commit first"), nil
		}
		var d *relayproto.Delivery
		err := w.withTurn(ctx, in, rec, func() (err error) {
			d, err = w.rules.receive(ctx, in.name, w.clock.Now())
			return err
		})
		switch {
		case errors.Is(err, errNoBroker):
			return w.protocol(in, "this challenge has no consumer's broker: receive is for the inbox consumer"), nil
		case err != nil:
			return w.fail(in, relayproto.ErrBrokerUnavailable, "the broker did not deliver: "+err.Error()), nil
		}
		rep := w.ok(in)
		rep.Delivery, rep.Receive = d, true
		if d == nil {
			rec.answered = "nothing"
			return rep, nil
		}
		rec.answered = fmt.Sprintf("offer %d (%s), delivery %d", d.Offer, d.EventID, d.Attempt)
		w.event(lab.Event{Kind: lab.KindDeliver, Subject: d.EventID, Actor: "broker", Action: "deliver", Offer: d.Offer, To: in.name,
			Detail: fmt.Sprintf("offer %d (%s) to %s, delivery %d", d.Offer, d.EventID, in.name, d.Attempt)})
		return rep, nil
	case relayproto.OpAck:
		if in.tx != nil {
			return w.protocol(in, "ack inside an open transaction: the lab's broker shares the database; commit first"), nil
		}
		var took bool
		err := w.withTurn(ctx, in, rec, func() (err error) {
			took, err = w.rules.ack(ctx, in.name, req.Offer, w.clock.Now())
			return err
		})
		switch {
		case errors.Is(err, errNoBroker):
			return w.protocol(in, "this challenge has no consumer's broker: ack is for the inbox consumer"), nil
		case err != nil:
			return w.fail(in, relayproto.ErrBrokerUnavailable, "the broker did not take the ack: "+err.Error()), nil
		}
		rep := w.ok(in)
		rep.Took = &took
		rec.answered = map[bool]string{true: "took", false: "not taken"}[took]
		kind := lab.KindAck
		if !took {
			kind = lab.KindFenced
		}
		w.event(lab.Event{Kind: kind, Actor: in.name, Action: "ack", Offer: req.Offer,
			Detail: fmt.Sprintf("acked offer %d: the broker %s it", req.Offer, map[bool]string{true: "took", false: "did not take"}[took])})
		return rep, nil
	}
	return w.protocol(in, fmt.Sprintf("unknown op %q; the ops are %s", req.Op, strings.Join(relayproto.Ops, ", "))), nil
}

// protocol is a protocol error's reply, recorded as the program's fault.
func (w *world) protocol(in *inst, msg string) relayproto.Reply {
	w.addProblem(in, "protocol", msg)
	return w.fail(in, relayproto.ErrProtocol, msg)
}

// begin opens in's transaction, retrying while another instance's
// transaction holds the database's write lock; meanwhile in counts as
// waiting, so the lab clock may move.
func (w *world) begin(ctx context.Context, in *inst) (*store.ProgramTx, int, error) {
	if err := w.takeTurn(ctx, in); err != nil {
		return nil, 0, err
	}
	for retries := 0; ; retries++ {
		tx, err := in.db.BeginProgram(ctx)
		if err == nil || !store.IsBusy(err) {
			if retries > 0 {
				w.setState(in, running, time.Time{})
			}
			if err != nil {
				w.setTx(in, nil)
			}
			return tx, retries, err
		}
		w.mu.Lock()
		w.busy++
		w.mu.Unlock()
		w.setState(in, locked, time.Time{})
		select {
		case <-ctx.Done():
			return nil, retries, ctx.Err()
		case <-time.After(busyPause):
		}
	}
}

// takeTurn waits until in's begin is the first in line and no other
// instance's transaction is open, and marks in's transaction open. SQLite
// has one writer; the lab's line makes it fair, where SQLite's busy handler
// would let one program's tight loop starve the others. A begin in line
// counts as locked: the clock may move while the holder waits or is held.
func (w *world) takeTurn(ctx context.Context, in *inst) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.line = append(w.line, in)
	for w.line[0] != in || slices.ContainsFunc(w.insts, func(o *inst) bool { return o != in && o.open && o.state != gone }) {
		if ctx.Err() != nil {
			w.line = slices.DeleteFunc(w.line, func(o *inst) bool { return o == in })
			return ctx.Err()
		}
		if in.state != locked {
			in.state = locked
			w.queued++
			w.gen++
			w.cond.Broadcast()
		}
		w.cond.Wait()
	}
	w.line = w.line[1:]
	in.open, in.state = true, running
	w.gen++
	w.cond.Broadcast()
	return nil
}

// takesTurn says whether a request writes the database, so waits in the
// line of transactions: a begin, and the broker's operations, which the
// lab's broker runs in the same database.
func takesTurn(op string) bool {
	switch op {
	case relayproto.OpBegin, relayproto.OpSend, relayproto.OpReceive, relayproto.OpAck:
		return true
	}
	return false
}

// withTurn runs the lab's own write for in's request (a broker's
// operation) in in's turn in the line of transactions; rec takes its place
// in the ledger before the turn passes on.
func (w *world) withTurn(ctx context.Context, in *inst, rec *request, write func() error) error {
	if err := w.takeTurn(ctx, in); err != nil {
		return err
	}
	defer w.endTurn(in, rec)
	return write()
}

// endTurn ends in's turn in the line of transactions: rec, the request
// that ends it (a commit, a rollback, a broker's write), takes its place
// in the order of answers and its clock first, so the request ledger lists
// it before the begin the turn lets through.
func (w *world) endTurn(in *inst, rec *request) {
	w.mu.Lock()
	w.tickets++
	rec.ticket, rec.at = w.tickets, w.now()
	w.mu.Unlock()
	w.setTx(in, nil)
}

// statement runs a query or an exec in in's transaction.
func (w *world) statement(ctx context.Context, in *inst, req relayproto.Request, rec *request) relayproto.Reply {
	if req.Op == relayproto.OpExec {
		w.name(req.SQL)
		n, err := in.tx.Exec(ctx, req.SQL, req.Params)
		if err != nil {
			return w.dbError(in, err)
		}
		in.wrote = true
		rep := w.ok(in)
		rep.RowsAffected = &n
		rec.answered = fmt.Sprintf("%d rows changed", n)
		if n == 0 {
			w.event(lab.Event{Kind: lab.KindNote, Actor: in.name, Action: "0 rows",
				Detail: fmt.Sprintf("%s changed 0 rows%s", w.statementName(req.SQL), params(req.Params))})
		}
		return rep
	}
	w.name(req.SQL)
	cols, rows, err := in.tx.Query(ctx, req.SQL, req.Params)
	if err != nil {
		return w.dbError(in, err)
	}
	rep := w.ok(in)
	rep.Columns, rep.Rows, rep.Query = cols, rows, true
	rec.answered = fmt.Sprintf("%d rows", len(rows))
	return rep
}

// name names a program's statement in the run's statement ledger the
// first time it runs, "your relay: statement N", so the report prints it
// in full as the lessons' statements are.
func (w *world) name(text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.statements[text]; ok {
		return
	}
	w.statements[text] = fmt.Sprintf("your relay: statement %d", len(w.statements)+1)
	w.ledger.Name(store.Stmt{Name: w.statements[text], SQL: text})
}

// statementName is the name the ledger gives text.
func (w *world) statementName(text string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.statements[text]
}

// dbError is the reply to a statement, a begin or a commit the database
// failed: the sandbox's refusal, a busy database, or the database's error.
func (w *world) dbError(in *inst, err error) relayproto.Reply {
	var se *store.SandboxError
	switch {
	case errors.As(err, &se):
		w.addProblem(in, "sandbox", se.Error())
		return w.fail(in, relayproto.ErrSandbox, se.Error())
	case store.IsBusy(err):
		w.mu.Lock()
		w.busy++
		w.mu.Unlock()
		return w.fail(in, relayproto.ErrBusy, err.Error())
	}
	return w.fail(in, relayproto.ErrDatabase, err.Error())
}

// asked says a request in a few words, for the request ledger.
func asked(req relayproto.Request) string {
	switch req.Op {
	case relayproto.OpQuery, relayproto.OpExec:
		return clip(req.SQL, 70) + params(req.Params)
	case relayproto.OpProvider:
		return req.Key
	case relayproto.OpSend:
		return req.EventID
	case relayproto.OpAck:
		return fmt.Sprintf("offer %d", req.Offer)
	case relayproto.OpWait:
		return fmt.Sprintf("%d ms", req.Ms)
	case relayproto.OpWork:
		return fmt.Sprintf("%s, %d ms", req.Key, req.Ms)
	case relayproto.OpLog:
		return clip(req.Text, 60)
	}
	return ""
}

func params(p map[string]any) string {
	if len(p) == 0 {
		return ""
	}
	b, err := json.Marshal(p) // as the program sent them; its keys sorted
	if err != nil {
		return fmt.Sprintf(" %v", p)
	}
	return " " + string(b)
}
