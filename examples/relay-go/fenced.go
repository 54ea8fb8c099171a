package main

import (
	"github.com/outboxlab/outboxlab/relayproto"
)

// The fenced relay's statements. The claim takes the oldest event whose
// lease is free or over, with the same predicate in its UPDATE, and
// returns the token it took; the completion names that token.
const (
	claimEvent = `UPDATE outbox_events
SET claim_token = claim_token + 1, locked_by = :me, lease_until = CAST(:now AS BIGINT) + :lease
WHERE event_id = (SELECT event_id FROM outbox_events
                  WHERE delivered = 0 AND (lease_until IS NULL OR lease_until <= :now)
                  ORDER BY created_at, event_id LIMIT 1)
  AND delivered = 0 AND (lease_until IS NULL OR lease_until <= :now)
RETURNING event_id, payload, claim_token`
	completeWithToken = `UPDATE outbox_events SET delivered = 1, delivered_at = :now, locked_by = NULL, lease_until = NULL
WHERE event_id = :id AND claim_token = :token`
	completeByEventID = `UPDATE outbox_events SET delivered = 1, delivered_at = :now, locked_by = NULL, lease_until = NULL
WHERE event_id = :id`
)

// The fenced relay's own mistakes.
const (
	noToken            = "no-token"             // the completion names the event, not its token
	completeBeforeSend = "complete-before-send" // the relay completes, then sends
)

// relay is one fenced relay instance.
type relay struct {
	c       *relayproto.Client
	mistake string
}

type event struct {
	id, payload string
	token       int64
}

// run loops claim, send, complete until the lab shuts the run down.
func (r *relay) run() error {
	for {
		e, ok, err := r.claim()
		if err != nil {
			return err
		}
		if !ok {
			shutdown, err := r.c.Wait(idle)
			if err != nil || shutdown {
				return err
			}
			continue
		}
		if r.mistake == completeBeforeSend {
			if err := r.complete(e); err != nil {
				return err
			}
			if err := r.send(e); err != nil {
				return err
			}
			continue
		}
		if err := r.send(e); err != nil {
			return err
		}
		if err := r.complete(e); err != nil {
			return err
		}
	}
}

// claim takes the oldest claimable event and its token.
func (r *relay) claim() (event, bool, error) {
	if err := r.c.Begin(); err != nil {
		return event{}, false, tolerate(err)
	}
	_, rows, err := r.c.Query(claimEvent, map[string]any{"me": r.c.Hello.Instance, "now": r.c.Tick(),
		"lease": r.c.Setting("lease_ms", 300)})
	if err != nil || len(rows) != 1 {
		return event{}, false, (&worker{c: r.c}).rollback(err)
	}
	e := event{id: rows[0][0].(string), payload: rows[0][1].(string), token: int64(rows[0][2].(float64))}
	if err := r.c.Commit(); err != nil {
		return event{}, false, tolerate(err)
	}
	return e, true, nil
}

// send publishes e, trying again while the broker does not take it.
func (r *relay) send(e event) error {
	for {
		_, err := r.c.Send(e.id, e.payload)
		if relayproto.Kind(err) != relayproto.ErrBrokerUnavailable {
			return tolerate(err)
		}
		if shutdown, err := r.c.Wait(idle); err != nil || shutdown {
			return err
		}
	}
}

// complete marks e delivered under the token its claim took; 0 rows means
// another relay's claim is the latest: it has sent, or will send, and
// completes.
func (r *relay) complete(e event) error {
	if err := r.c.Begin(); err != nil {
		return tolerate(err)
	}
	stmt := completeWithToken
	if r.mistake == noToken {
		stmt = completeByEventID
	}
	n, err := r.c.Exec(stmt, map[string]any{"id": e.id, "token": e.token, "now": r.c.Tick()})
	if err != nil || n != 1 {
		return (&worker{c: r.c}).rollback(err)
	}
	return tolerate(r.c.Commit())
}
