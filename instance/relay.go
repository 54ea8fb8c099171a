package instance

import (
	"context"

	"github.com/outboxlab/outboxlab/proc"
	"github.com/outboxlab/outboxlab/store"
)

// Relay is a relay of sessions 16 and 17: the relay statements on its own
// connection ([store.Relay]).
type Relay interface {
	Claim(ctx context.Context, eventID, relay string, now, leaseUntil int64) (store.EventClaim, error)
	Complete(ctx context.Context, eventID string, token, now int64) (store.Fenced, error)
	Renew(ctx context.Context, eventID string, token, now, proposed int64) (store.Fenced, error)
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
		return &inProcessRelay{store.NewRelay(db, sqls), &inProcess{db: db}}, nil
	}
	c, err := o.start(ctx, path, "", name, relayRole, relayWork{SQL: sqls, Instance: name})
	if err != nil {
		return nil, err
	}
	return &childRelay{c}, nil
}

// inProcessRelay is a relay in the lab's process.
type inProcessRelay struct {
	*store.Relay
	*inProcess
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

// relayOps are the relay-instance child's operations.
var relayOps = struct {
	Claim    proc.Operation[claimEventArgs, store.EventClaim]
	Complete proc.Operation[fencedArgs, store.Fenced]
	Renew    proc.Operation[fencedArgs, store.Fenced]
	Event    proc.Operation[string, eventFound]
}{
	Claim:    proc.Operation[claimEventArgs, store.EventClaim]{Name: "claim"},
	Complete: proc.Operation[fencedArgs, store.Fenced]{Name: "complete"},
	Renew:    proc.Operation[fencedArgs, store.Fenced]{Name: "renew"},
	Event:    proc.Operation[string, eventFound]{Name: "event"},
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
	return nil, w.Answer(ctx,
		relayOps.Claim.Handle(func(ctx context.Context, a claimEventArgs) (store.EventClaim, error) {
			return r.Claim(ctx, a.EventID, a.Relay, a.Now, a.LeaseUntil)
		}),
		relayOps.Complete.Handle(func(ctx context.Context, a fencedArgs) (store.Fenced, error) {
			return r.Complete(ctx, a.EventID, a.Token, a.Now)
		}),
		relayOps.Renew.Handle(func(ctx context.Context, a fencedArgs) (store.Fenced, error) {
			return r.Renew(ctx, a.EventID, a.Token, a.Now, a.Proposed)
		}),
		relayOps.Event.Handle(func(ctx context.Context, id string) (eventFound, error) {
			ev, found, err := r.EventByID(ctx, id)
			return eventFound{ev, found}, err
		}),
	)
}

// childRelay is a relay in a child process: each method is a call the
// child performs on its own connection.
type childRelay struct{ *child }

func (c *childRelay) Claim(ctx context.Context, eventID, relay string, now, leaseUntil int64) (store.EventClaim, error) {
	return call(ctx, c.child, relayOps.Claim, claimEventArgs{eventID, relay, now, leaseUntil})
}

func (c *childRelay) Complete(ctx context.Context, eventID string, token, now int64) (store.Fenced, error) {
	return call(ctx, c.child, relayOps.Complete, fencedArgs{EventID: eventID, Token: token, Now: now})
}

func (c *childRelay) Renew(ctx context.Context, eventID string, token, now, proposed int64) (store.Fenced, error) {
	return call(ctx, c.child, relayOps.Renew, fencedArgs{eventID, token, now, proposed})
}

func (c *childRelay) EventByID(ctx context.Context, eventID string) (store.Event, bool, error) {
	ef, err := call(ctx, c.child, relayOps.Event, eventID)
	return ef.Event, ef.Found, err
}
