package main

import (
	"encoding/json"
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
// nothing, and the renewal never moves the lease past the claim's
// processing deadline.
const (
	renewLease = `UPDATE outbox_events SET lease_until = CAST(:now AS BIGINT) + :lease
WHERE event_id = :id AND claim_token = :token AND delivered = 0 AND CAST(:now AS BIGINT) + :lease <= :deadline`
	renewPastDeadline = `UPDATE outbox_events SET lease_until = CAST(:now AS BIGINT) + :lease
WHERE event_id = :id AND claim_token = :token AND delivered = 0`
	giveBack = `UPDATE outbox_events SET locked_by = NULL, lease_until = NULL
WHERE event_id = :id AND claim_token = :token AND delivered = 0`
)

// The heartbeat relay's own mistakes.
const (
	noRenew              = "no-renew"               // it works through the event on its first lease
	renewWithoutStopping = "renew-without-stopping" // a renewal that changed 0 rows does not stop the work
	ignoreSigterm        = "ignore-sigterm"         // SIGTERM kills it where it stands, holding its claim
	noDeadline           = "no-deadline"            // the renewal has no processing deadline: it renews for as long as it works
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
		// The claim's processing deadline, from the tick it was taken at.
		deadline := h.c.Tick() + h.c.Setting("max_processing_ms", 1500)
		lost, stop, err := h.work(e, workOf(e, h.c.Setting("work_ms", 900)), deadline)
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

// workOf is e's length of work: its payload's work_ms, else the setting's.
func workOf(e event, setting int64) time.Duration {
	var p struct {
		WorkMs int64 `json:"work_ms"`
	}
	if json.Unmarshal([]byte(e.payload), &p) == nil && p.WorkMs > 0 {
		setting = p.WorkMs
	}
	return time.Duration(setting) * time.Millisecond
}

// work does e's work chunk by chunk, renewing the lease before each;
// lost says a renewal found the lease taken over (or its deadline
// reached), stop that SIGTERM came.
func (h *heartbeat) work(e event, total time.Duration, deadline int64) (lost, stop bool, err error) {
	for done := time.Duration(0); done < total; done += chunk {
		if h.terminated() {
			return false, true, nil
		}
		if h.mistake != noRenew {
			renewed, err := h.renew(e, deadline)
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

// renew extends e's lease from now, under e's token, up to deadline.
func (h *heartbeat) renew(e event, deadline int64) (bool, error) {
	if err := h.c.Begin(); err != nil {
		return false, tolerate(err)
	}
	stmt, params := renewLease, map[string]any{"id": e.id, "token": e.token, "now": h.c.Tick(), "lease": h.c.Setting("lease_ms", 300),
		"deadline": deadline}
	if h.mistake == noDeadline {
		stmt = renewPastDeadline
		delete(params, "deadline")
	}
	n, err := h.c.Exec(stmt, params)
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
