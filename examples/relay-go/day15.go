package main

import (
	"time"

	"github.com/outboxlab/outboxlab/relayproto"
)

// idle is how long the worker waits, on the lab clock, when nothing is
// claimable.
const idle = 100 * time.Millisecond

// The worker's statements. The claim selects and takes the oldest
// claimable message with the same predicate, in one transaction, and holds
// only if exactly one row changed.
const (
	selectClaimable = `SELECT Id, AggregateKey FROM OutboxMessages
WHERE Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now)
ORDER BY CreatedAtUtc, Id LIMIT 1`
	takeClaimable = `UPDATE OutboxMessages SET Status = 'Processing', LockedBy = :me, LockedUntilUtc = :until
WHERE Id = :id AND (Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now))`
	selectPendingOnly = `SELECT Id, AggregateKey FROM OutboxMessages WHERE Status = 'Pending'
ORDER BY CreatedAtUtc, Id LIMIT 1`
	takePendingOnly = `UPDATE OutboxMessages SET Status = 'Processing', LockedBy = :me, LockedUntilUtc = :until
WHERE Id = :id AND Status = 'Pending'`
	takeByID      = `UPDATE OutboxMessages SET Status = 'Processing', LockedBy = :me, LockedUntilUtc = :until WHERE Id = :id`
	completeOwned = `UPDATE OutboxMessages SET Status = 'Processed', ProcessedAtUtc = :now
WHERE Id = :id AND Status = 'Processing' AND LockedBy = :me`
	completeByID = `UPDATE OutboxMessages SET Status = 'Processed', ProcessedAtUtc = :now WHERE Id = :id`
	applyOutcome = `UPDATE Payments SET PaymentStatus = :status, TransactionId = :txn, UpdatedAtUtc = :now
WHERE IdempotencyKey = :key`
)

// worker is one Day 15 worker instance.
type worker struct {
	c       *relayproto.Client
	mistake string
}

type message struct {
	id  int64
	key string
}

// run loops claim, process, finalize until the lab shuts the run down.
func (w *worker) run() error {
	for {
		m, ok, err := w.claim()
		if err != nil {
			return err
		}
		if !ok {
			shutdown, err := w.c.Wait(idle)
			if err != nil || shutdown {
				return err
			}
			continue
		}
		status, txn, err := "Failed", "", error(nil)
		if w.mistake != skipsProvider {
			status, txn, err = w.c.Provider(m.key)
		}
		if err != nil {
			return err
		}
		if w.mistake == dropsTxnID {
			txn = ""
		}
		if err := w.finalize(m, status, txn); err != nil {
			return err
		}
	}
}

// now is the time the worker reasons with: the lab's, from the last
// reply, unless it makes the own-clock mistake.
func (w *worker) now() time.Time {
	if w.mistake == ownClock {
		return time.Now()
	}
	return w.c.Now()
}

// claim takes the oldest claimable message; ok is false when there was
// none, or another instance took it first, or the commit's outcome is
// unknown (its lease will end and someone will claim it again).
func (w *worker) claim() (message, bool, error) {
	if err := w.c.Begin(); err != nil {
		return message{}, false, tolerate(err)
	}
	sel, take := selectClaimable, takeClaimable
	if w.mistake == pendingOnlyClaim {
		sel, take = selectPendingOnly, takePendingOnly
	}
	now := w.now()
	// Another instance's lease has ended for sure only once this clock,
	// less the most it may be off, has passed its end.
	ended := now.Add(-time.Duration(w.c.Setting("max_clock_skew_ms", 0)) * time.Millisecond)
	if w.mistake == ignoresSkew {
		ended = now
	}
	_, rows, err := w.c.Query(sel, map[string]any{"now": relayproto.Format(ended)})
	if err != nil || len(rows) == 0 {
		return message{}, false, w.rollback(err)
	}
	m := message{id: int64(rows[0][0].(float64)), key: rows[0][1].(string)}
	lease := time.Duration(w.c.Setting("lease_ms", 500)) * time.Millisecond
	if w.mistake == splitClaim {
		// The mistake: what was read is trusted in a second transaction.
		if err := w.c.Commit(); err != nil {
			return message{}, false, tolerate(err)
		}
		if err := w.c.Begin(); err != nil {
			return message{}, false, tolerate(err)
		}
		take = takeByID
	}
	n, err := w.c.Exec(take, map[string]any{"id": m.id, "me": w.c.Hello.Instance,
		"now": relayproto.Format(ended), "until": relayproto.Format(now.Add(lease))})
	if err != nil || n != 1 {
		return message{}, false, w.rollback(err)
	}
	if err := w.c.Commit(); err != nil {
		return message{}, false, tolerate(err)
	}
	return m, true, nil
}

// finalize stores the provider's answer and marks the message Processed,
// in one transaction, only while the message is still this worker's.
func (w *worker) finalize(m message, status, txn string) error {
	if err := w.c.Begin(); err != nil {
		return tolerate(err)
	}
	complete := completeOwned
	if w.mistake == noOwnerGuard {
		complete = completeByID
	}
	now := relayproto.Format(w.now())
	n, err := w.c.Exec(complete, map[string]any{"id": m.id, "me": w.c.Hello.Instance, "now": now})
	if err != nil {
		return w.rollback(err)
	}
	if n != 1 && w.mistake != zeroRowsOK {
		// Another instance took the message over: its outcome is theirs
		// to store.
		return w.rollback(nil)
	}
	var txnArg any
	if status == "Paid" {
		txnArg = txn
	}
	if _, err := w.c.Exec(applyOutcome, map[string]any{"status": status, "txn": txnArg, "now": now, "key": m.key}); err != nil {
		return w.rollback(err)
	}
	return tolerate(w.c.Commit())
}

// rollback ends a transaction that will not commit; err, the reason, is
// tolerated when it is the database's (the message stays claimable).
func (w *worker) rollback(err error) error {
	if rerr := w.c.Rollback(); rerr != nil {
		return rerr
	}
	return tolerate(err)
}

// tolerate drops the errors a worker lives with: a database error, a busy
// database, a lost reply. The message's lease ends and someone claims it
// again. A broken protocol or a sandbox refusal is a bug and stops it.
func tolerate(err error) error {
	switch relayproto.Kind(err) {
	case relayproto.ErrDatabase, relayproto.ErrBusy, relayproto.ErrUnknownOutcome, relayproto.ErrBrokerUnavailable:
		return nil
	}
	return err
}
