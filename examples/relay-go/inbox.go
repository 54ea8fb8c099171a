package main

import (
	"encoding/json"
	"fmt"

	"github.com/outboxlab/outboxlab/relayproto"
)

// The inbox consumer's statements: the inbox insert, which adds a row
// only for an event the service has not recorded, and the credit.
const (
	recordInInbox = `INSERT INTO consumed_events (consumer, event_id, consumed_at) VALUES (:service, :event, :now)
ON CONFLICT (consumer, event_id) DO NOTHING`
	creditAccount = `UPDATE accounts SET credit_cents = credit_cents + :amount WHERE id = :account`
)

// The inbox consumer's own mistakes.
const (
	noDedup         = "no-dedup"          // the credit is applied whatever the inbox insert found
	ackBeforeEffect = "ack-before-effect" // the delivery is acked before its effect commits
)

// consumer is one instance of the credits service.
type consumer struct {
	c       *relayproto.Client
	mistake string
}

type credit struct {
	Account     string `json:"account"`
	AmountCents int64  `json:"amountCents"`
}

// run loops receive, apply once, ack until the lab shuts the run down.
func (k *consumer) run() error {
	for {
		d, err := k.c.Receive()
		if err != nil {
			return tolerate(err)
		}
		if d == nil {
			shutdown, err := k.c.Wait(idle)
			if err != nil || shutdown {
				return err
			}
			continue
		}
		var cr credit
		if err := json.Unmarshal([]byte(d.Payload), &cr); err != nil {
			return fmt.Errorf("offer %d: payload %q: %w", d.Offer, d.Payload, err)
		}
		if k.mistake == ackBeforeEffect {
			if err := k.ack(d.Offer); err != nil {
				return err
			}
		}
		applied, err := k.apply(d.EventID, cr)
		if err != nil {
			return err
		}
		if !applied || k.mistake == ackBeforeEffect {
			continue // not applied: the delivery stays unacked and comes again
		}
		if err := k.ack(d.Offer); err != nil {
			return err
		}
	}
}

// apply records the event in the service's inbox and, only if it was not
// there, credits the account, in one transaction. It reports whether the
// transaction committed (a duplicate's commit changes nothing).
func (k *consumer) apply(eventID string, cr credit) (bool, error) {
	if err := k.c.Begin(); err != nil {
		return false, tolerate(err)
	}
	n, err := k.c.Exec(recordInInbox, map[string]any{"service": k.c.Hello.Settings["service"], "event": eventID, "now": relayproto.Format(k.c.Now())})
	if err != nil {
		return false, (&worker{c: k.c}).rollback(err)
	}
	if n == 1 || k.mistake == noDedup {
		if _, err := k.c.Exec(creditAccount, map[string]any{"amount": cr.AmountCents, "account": cr.Account}); err != nil {
			return false, (&worker{c: k.c}).rollback(err)
		}
	}
	if err := k.c.Commit(); err != nil {
		return false, tolerate(err)
	}
	return true, nil
}

// ack acknowledges offer; an ack the broker did not take (its delivery
// went to another instance since) or whose outcome is unknown is left to
// the redelivery, which the inbox makes harmless.
func (k *consumer) ack(offer int64) error {
	_, err := k.c.Ack(offer)
	return tolerate(err)
}
