package instance

import (
	"context"

	"github.com/outboxlab/outboxlab/proc"
	"github.com/outboxlab/outboxlab/store"
)

// Relay is a relay of sessions 16 and 17: the relay statements on its own
// connection ([store.Relay]).
type Relay interface {
	Claim(ctx context.Context, eventID string, now int64, lease store.EventLease) (store.EventClaim, error)
	Complete(ctx context.Context, eventID string, token, now int64) (store.Fenced, error)
	Renew(ctx context.Context, eventID string, now int64, lease store.EventLease) (store.Fenced, error)
	EventByID(ctx context.Context, eventID string) (store.Event, bool, error)
	Lifecycle
}

// Relay opens relay name with the statements sqls on the database at path.
func (o *Opener) Relay(ctx context.Context, path, name string, sqls store.RelaySQL) (Relay, error) {
	if !o.cfg.Processes {
		db, err := o.cfg.Open(ctx, path)
		if err != nil {
			return nil, err
		}
		return &relay{runsOn[*store.Relay]{service: store.NewRelay(db, sqls)}, &inProcess{db: db}}, nil
	}
	c, err := o.start(ctx, path, "", name, relayRole, relayWork{SQL: sqls, Instance: name})
	if err != nil {
		return nil, err
	}
	return &relay{runsOn[*store.Relay]{child: c}, c}, nil
}

// relay is a relay in the lab's process or in a child process: each
// method one of relayOps, performed where it runs.
type relay struct {
	on runsOn[*store.Relay]
	Lifecycle
}

func (r *relay) Claim(ctx context.Context, eventID string, now int64, lease store.EventLease) (store.EventClaim, error) {
	return perform(ctx, r.on, relayOps.Claim, leaseArgs{eventID, now, lease})
}

func (r *relay) Complete(ctx context.Context, eventID string, token, now int64) (store.Fenced, error) {
	return perform(ctx, r.on, relayOps.Complete, fencedArgs{EventID: eventID, Token: token, Now: now})
}

func (r *relay) Renew(ctx context.Context, eventID string, now int64, lease store.EventLease) (store.Fenced, error) {
	return perform(ctx, r.on, relayOps.Renew, leaseArgs{eventID, now, lease})
}

func (r *relay) EventByID(ctx context.Context, eventID string) (store.Event, bool, error) {
	ef, err := perform(ctx, r.on, relayOps.Event, eventID)
	return ef.Event, ef.Found, err
}

// relayRole is a relay of sessions 16 and 17 as a child process.
const relayRole = "relay-instance"

// relayWork is what a relay-instance child is: Instance, running the
// relay statements SQL.
type relayWork struct {
	SQL      store.RelaySQL
	Instance string
}

// The relay operations' arguments and results, as they cross the pipe.
type (
	// leaseArgs are a claim's or a renewal's: the event, the relay's
	// clock, and the lease it asks for.
	leaseArgs struct {
		EventID string
		Now     int64
		Lease   store.EventLease
	}
	fencedArgs struct {
		EventID    string
		Token, Now int64
	}
	eventFound struct {
		Event store.Event
		Found bool
	}
)

// relayMethod is an operation of a relay, performed by its statements.
type relayMethod[A, R any] = method[*store.Relay, A, R]

// relayOps are a relay's operations, in the lab's process and in the
// relay-instance child.
var relayOps = struct {
	Claim    relayMethod[leaseArgs, store.EventClaim]
	Complete relayMethod[fencedArgs, store.Fenced]
	Renew    relayMethod[leaseArgs, store.Fenced]
	Event    relayMethod[string, eventFound]
}{
	Claim: newMethod("claim", func(ctx context.Context, r *store.Relay, a leaseArgs) (store.EventClaim, error) {
		return r.Claim(ctx, a.EventID, a.Now, a.Lease)
	}),
	Complete: newMethod("complete", func(ctx context.Context, r *store.Relay, a fencedArgs) (store.Fenced, error) {
		return r.Complete(ctx, a.EventID, a.Token, a.Now)
	}),
	Renew: newMethod("renew", func(ctx context.Context, r *store.Relay, a leaseArgs) (store.Fenced, error) {
		return r.Renew(ctx, a.EventID, a.Now, a.Lease)
	}),
	Event: newMethod("event", eventByID[*store.Relay]),
}

// eventByID is r's event id, as it crosses the pipe.
func eventByID[R interface {
	EventByID(ctx context.Context, id string) (store.Event, bool, error)
}](ctx context.Context, r R, id string) (eventFound, error) {
	ev, found, err := r.EventByID(ctx, id)
	return eventFound{ev, found}, err
}

// serveRelay is the relay-instance child: its own connection, and the
// relay's statements performed at the lab's command.
func serveRelay(ctx context.Context, w *proc.Worker) (any, error) {
	var work relayWork
	db, err := w.Begin(ctx, &work)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	r := store.NewRelay(db, work.SQL)
	return nil, w.Answer(ctx, relayOps.Claim.serve(r), relayOps.Complete.serve(r), relayOps.Renew.serve(r), relayOps.Event.serve(r))
}
