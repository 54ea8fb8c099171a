package instance

import (
	"context"

	"github.com/outboxlab/outboxlab/proc"
	"github.com/outboxlab/outboxlab/store"
)

// ClockRelay is a relay of session 23: the statements that read the
// database's clock ([store.ClockRelay]) on its own connection, and a clock
// of its own that reads Skew milliseconds ahead of the database's (behind,
// when negative). Each call carries now, the database's time: the instance
// hands it to its connection's db_now() (on SQLite the clock runs in each
// process that opens the file; on PostgreSQL it is the server's, and the
// instance leaves it alone) and reads its own clock as now + Skew, the
// :now its statements are given.
type ClockRelay interface {
	Claim(ctx context.Context, eventID string, now, lease int64) (store.EventClaim, error)
	Ack(ctx context.Context, eventID string, token, now int64) (store.Fenced, error)
	Renew(ctx context.Context, eventID string, token, now, lease int64) (store.Fenced, error)
	EventByID(ctx context.Context, eventID string) (store.Event, bool, error)
	Lifecycle
}

// ClockRelay opens relay name, its clock skew milliseconds off the
// database's, with the statements sqls on the database at path.
func (o *Opener) ClockRelay(ctx context.Context, path, name string, skew int64, sqls store.ClockSQL) (ClockRelay, error) {
	if !o.cfg.Processes {
		db, err := o.cfg.Open(store.WithDatabaseClock(ctx, store.NewDatabaseClock()), path)
		if err != nil {
			return nil, err
		}
		return &clockRelay{runsOn[skewedRelay]{service: skewedRelay{store.NewClockRelay(db, sqls), db, name, skew}}, &inProcess{db: db}}, nil
	}
	c, err := o.start(ctx, path, "", name, clockRelayRole, clockRelayWork{SQL: sqls, Instance: name, Skew: skew})
	if err != nil {
		return nil, err
	}
	return &clockRelay{runsOn[skewedRelay]{child: c}, c}, nil
}

// clockRelay is a session-23 relay in the lab's process or in a child
// process: each method one of clockRelayOps, performed where it runs.
type clockRelay struct {
	on runsOn[skewedRelay]
	Lifecycle
}

func (r *clockRelay) Claim(ctx context.Context, eventID string, now, lease int64) (store.EventClaim, error) {
	return perform(ctx, r.on, clockRelayOps.Claim, clockCallArgs{EventID: eventID, Now: now, Lease: lease})
}

func (r *clockRelay) Ack(ctx context.Context, eventID string, token, now int64) (store.Fenced, error) {
	return perform(ctx, r.on, clockRelayOps.Ack, clockCallArgs{EventID: eventID, Token: token, Now: now})
}

func (r *clockRelay) Renew(ctx context.Context, eventID string, token, now, lease int64) (store.Fenced, error) {
	return perform(ctx, r.on, clockRelayOps.Renew, clockCallArgs{EventID: eventID, Token: token, Now: now, Lease: lease})
}

func (r *clockRelay) EventByID(ctx context.Context, eventID string) (store.Event, bool, error) {
	ef, err := perform(ctx, r.on, clockRelayOps.Event, eventID)
	return ef.Event, ef.Found, err
}

// skewedRelay is a session-23 relay's own side, in the lab's process or
// in a child: its service on its connection, its name and its clock. Its
// methods take now, the database's time, and act at now + skew.
type skewedRelay struct {
	relay *store.ClockRelay
	db    *store.DB
	name  string
	skew  int64
}

func (r skewedRelay) Claim(ctx context.Context, eventID string, now, lease int64) (store.EventClaim, error) {
	if err := r.db.SyncProcessClock(now); err != nil {
		return store.EventClaim{}, err
	}
	return r.relay.Claim(ctx, eventID, r.name, now+r.skew, lease)
}

func (r skewedRelay) Ack(ctx context.Context, eventID string, token, now int64) (store.Fenced, error) {
	if err := r.db.SyncProcessClock(now); err != nil {
		return store.Fenced{}, err
	}
	return r.relay.Ack(ctx, eventID, token)
}

func (r skewedRelay) Renew(ctx context.Context, eventID string, token, now, lease int64) (store.Fenced, error) {
	if err := r.db.SyncProcessClock(now); err != nil {
		return store.Fenced{}, err
	}
	return r.relay.Renew(ctx, eventID, token, lease)
}

func (r skewedRelay) EventByID(ctx context.Context, eventID string) (store.Event, bool, error) {
	return r.relay.EventByID(ctx, eventID)
}

// clockRelayRole is a session-23 relay as a child process.
const clockRelayRole = "clock-relay"

// clockRelayWork is what a clock-relay child is: Instance, its clock Skew
// off the database's, running the statements SQL.
type clockRelayWork struct {
	SQL      store.ClockSQL
	Instance string
	Skew     int64
}

// clockCallArgs are a session-23 relay operation's arguments, as they
// cross the pipe: now is the database's time.
type clockCallArgs struct {
	EventID           string
	Token, Now, Lease int64
}

// clockRelayMethod is an operation of a session-23 relay.
type clockRelayMethod[A, R any] = method[skewedRelay, A, R]

// clockRelayOps are a session-23 relay's operations, in the lab's process
// and in the clock-relay child.
var clockRelayOps = struct {
	Claim clockRelayMethod[clockCallArgs, store.EventClaim]
	Ack   clockRelayMethod[clockCallArgs, store.Fenced]
	Renew clockRelayMethod[clockCallArgs, store.Fenced]
	Event clockRelayMethod[string, eventFound]
}{
	Claim: newMethod("claim", func(ctx context.Context, r skewedRelay, a clockCallArgs) (store.EventClaim, error) {
		return r.Claim(ctx, a.EventID, a.Now, a.Lease)
	}),
	Ack: newMethod("ack", func(ctx context.Context, r skewedRelay, a clockCallArgs) (store.Fenced, error) {
		return r.Ack(ctx, a.EventID, a.Token, a.Now)
	}),
	Renew: newMethod("renew", func(ctx context.Context, r skewedRelay, a clockCallArgs) (store.Fenced, error) {
		return r.Renew(ctx, a.EventID, a.Token, a.Now, a.Lease)
	}),
	Event: newMethod("event", eventByID[skewedRelay]),
}

// serveClockRelay is the clock-relay child: its own connection, whose
// db_now() on SQLite answers the time each call brings, and the relay's
// statements performed at the lab's command.
func serveClockRelay(ctx context.Context, w *proc.Worker) (any, error) {
	var work clockRelayWork
	if err := w.Work(&work); err != nil {
		return nil, err
	}
	db, err := w.Open(store.WithDatabaseClock(ctx, store.NewDatabaseClock()))
	if err != nil {
		return nil, err
	}
	defer db.Close()
	r := skewedRelay{store.NewClockRelay(db, work.SQL), db, work.Instance, work.Skew}
	return nil, w.Answer(ctx, clockRelayOps.Claim.serve(r), clockRelayOps.Ack.serve(r), clockRelayOps.Renew.serve(r), clockRelayOps.Event.serve(r))
}
