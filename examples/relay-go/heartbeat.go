package main

import (
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/outboxlab/outboxlab/relayproto"
)

// chunk is how much work the heartbeat relay does between two renewals:
// well inside the lease, the renewal's safety margin.
const chunk = 100 * time.Millisecond

// The heartbeat relay's statements: the renewal and the give-back name
// the token the claim took, so a relay whose lease was taken over changes
// nothing.
const (
	renewLease = `UPDATE outbox_events SET lease_until = CAST(:now AS BIGINT) + :lease
WHERE event_id = :id AND claim_token = :token AND delivered = 0`
	giveBack = `UPDATE outbox_events SET locked_by = NULL, lease_until = NULL
WHERE event_id = :id AND claim_token = :token AND delivered = 0`
)

// The heartbeat relay's own mistakes.
const (
	noRenew              = "no-renew"               // it works through the event on its first lease
	renewWithoutStopping = "renew-without-stopping" // a renewal that changed 0 rows does not stop the work
	ignoreSigterm        = "ignore-sigterm"         // SIGTERM kills it where it stands, holding its claim
)

// heartbeat is one heartbeat relay instance: the fenced relay's claim,
// send and completion, with renewals while it works.
type heartbeat struct {
	relay
	term chan os.Signal
}

func newHeartbeat(c *relayproto.Client, mistake string) *heartbeat {
	h := &heartbeat{relay: relay{c: c, mistake: mistake}, term: make(chan os.Signal, 1)}
	if mistake != ignoreSigterm {
		signal.Notify(h.term, syscall.SIGTERM)
	}
	return h
}

// terminated says whether SIGTERM has come.
func (h *heartbeat) terminated() bool {
	select {
	case <-h.term:
		return true
	default:
		return false
	}
}

func (h *heartbeat) run() error {
	work := time.Duration(h.c.Setting("work_ms", 900)) * time.Millisecond
	for {
		if h.terminated() {
			return nil
		}
		e, ok, err := h.claim()
		if err != nil {
			return err
		}
		if !ok {
			shutdown, err := h.c.Wait(idle)
			if err != nil || shutdown {
				return err
			}
			continue
		}
		lost, stop, err := h.work(e, work)
		switch {
		case err != nil:
			return err
		case stop:
			return h.giveBack(e)
		case lost:
			continue // another relay holds it now: it works, sends and completes
		}
		if err := h.send(e); err != nil {
			return err
		}
		if err := h.complete(e); err != nil {
			return err
		}
	}
}

// work does e's work chunk by chunk, renewing the lease before each;
// lost says a renewal found the lease taken over, stop that SIGTERM came.
func (h *heartbeat) work(e event, total time.Duration) (lost, stop bool, err error) {
	for done := time.Duration(0); done < total; done += chunk {
		if h.terminated() {
			return false, true, nil
		}
		if h.mistake != noRenew {
			renewed, err := h.renew(e)
			if err != nil {
				return false, false, err
			}
			if !renewed && h.mistake != renewWithoutStopping {
				return true, false, nil
			}
		}
		if _, err := h.c.Work(e.id, chunk); err != nil {
			return false, false, err
		}
	}
	return false, false, nil
}

// renew extends e's lease from now, under e's token.
func (h *heartbeat) renew(e event) (bool, error) {
	if err := h.c.Begin(); err != nil {
		return false, tolerate(err)
	}
	n, err := h.c.Exec(renewLease, map[string]any{"id": e.id, "token": e.token, "now": h.c.Tick(), "lease": h.c.Setting("lease_ms", 300)})
	if err != nil {
		return false, (&worker{c: h.c}).rollback(err)
	}
	if err := h.c.Commit(); err != nil {
		return false, tolerate(err)
	}
	return n == 1, nil
}

// giveBack clears e's claim, under e's token, so another relay takes it
// at once, and ends the relay.
func (h *heartbeat) giveBack(e event) error {
	if err := h.c.Begin(); err != nil {
		return tolerate(err)
	}
	if _, err := h.c.Exec(giveBack, map[string]any{"id": e.id, "token": e.token}); err != nil {
		return (&worker{c: h.c}).rollback(err)
	}
	return tolerate(h.c.Commit())
}
