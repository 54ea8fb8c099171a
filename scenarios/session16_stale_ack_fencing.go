package scenarios

import (
	"context"
	"fmt"

	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/store"
)

// The mistake variants of session-16-stale-ack-fencing.
const (
	variantAckByEventID = "ack-by-event-id"
	variantReusedToken  = "reused-token"
)

// reusedWorkerToken is what the reused-token mistake stamps on every claim:
// the worker's configured number, the same for every replica of the relay
// and for every claim attempt.
const reusedWorkerToken = 1

// Why an ack changed no row, as the failed-ack ledger records it.
const (
	reasonLeaseLost        = "lease-lost"        // a newer claim holds the event: our token is stale
	reasonAlreadyDelivered = "already-delivered" // our token is current but someone completed the event
	reasonDatabaseError    = "database-error"    // the statement itself failed; nothing is known about ownership
)

// The session-16 timeline on logical time: A's lease runs out at 130.
const (
	s16ClaimA       = 100
	s16LeaseA       = 130
	s16ClaimB       = 140
	s16LeaseB       = 170
	s16AckA         = 150
	s16AckB         = 160
	s16ClaimDone    = 200
	s16EventID      = "E-41"
	s16EventType    = "PaymentSettled"
	s16EventPayload = `{"paymentKey":"PAY-041","amountCents":4100}`
)

var staleAckFencing = Scenario{
	Name:    "session-16-stale-ack-fencing",
	Session: "Session-16",
	FileTag: "StaleAckFencing",
	Title:   "Session 16: a fencing token turns a stale owner's ack into 0 rows",
	Design:  lab.Safe,
	Teaches: "Every successful claim increments the event's claim_token and hands that token to the claimer. " +
		"The ack is UPDATE … WHERE event_id = ? AND claim_token = ? AND delivered = 0, so only the current " +
		"owner's ack changes a row. Worker-A claims E-41 (token 1), stalls past its lease, Worker-B reclaims " +
		"(token 2); A's late ack changes 0 rows and is recorded as lease-lost (an expected outcome, not a " +
		"database error), B's ack changes 1 row, and the delivered event cannot be claimed again.",
	DoesNotSolve: "Fencing protects the database row, not the world outside it: if Worker-A had already " +
		"published E-41 before its lease ran out, the broker holds that message and Worker-B publishes it " +
		"again. The token rejects A's late write; it cannot un-send A's message. The duplicate broker " +
		"message is expected, and consumers must absorb it (the inbox, session 18).",
	Statements: []lab.Statement{
		{Name: "claim: take E-41 if claimable, increment the token", SQL: store.ClaimEventSQL},
		{Name: "ack: only under the current token, only once", SQL: store.AckWithTokenSQL},
		{Name: "after a 0-row ack: read why", SQL: store.EventByIDSQL},
	},
	Checks: []CheckDoc{
		{"stale_ack_rows", "Worker-A's ack with its stale token changed 0 rows"},
		{"current_ack_rows", "Worker-B's ack with the current token changed 1 row"},
		{"reclaim_after_delivery_rows", "a claim of the delivered event changed 0 rows"},
		{"distinct_tokens", "the two successful claims got two distinct tokens"},
		{"failed_acks_lease_lost", "the failed-ack ledger has 1 entry, reason lease-lost"},
	},
	Variants: []Variant{
		{Name: variantAckByEventID, Mistake: "the ack updates WHERE event_id = ? AND delivered = 0, without the token: " +
			"Worker-A's stale ack completes the event and Worker-B's ack finds it already delivered",
			Breaks: []string{"stale_ack_rows", "current_ack_rows", "failed_acks_lease_lost"}},
		{Name: variantReusedToken, Mistake: fmt.Sprintf("the claim sets claim_token to the worker's fixed number (%d, the "+
			"same on every replica of the relay) instead of incrementing it, so the token names a worker, not a claim attempt", reusedWorkerToken),
			Breaks: []string{"stale_ack_rows", "current_ack_rows", "distinct_tokens", "failed_acks_lease_lost"}},
	},
	Run: func(ctx context.Context, env *Env) (*lab.Result, error) {
		return runStaleAckFencing(ctx, env, fencingOpsFor(env.Variant))
	},
}

// fencingOps are the claim and ack session 16 runs; a variant swaps one.
type fencingOps struct {
	claimSQL, ackSQL string
	claim            func(ctx context.Context, db *store.DB, worker string, now, leaseUntil int64) (store.EventClaim, error)
	ack              func(ctx context.Context, db *store.DB, token, now int64) (store.Fenced, error)
}

func fencingOpsFor(variant string) fencingOps {
	ops := fencingOps{
		claimSQL: store.ClaimEventSQL,
		ackSQL:   store.AckWithTokenSQL,
		claim: func(ctx context.Context, db *store.DB, worker string, now, leaseUntil int64) (store.EventClaim, error) {
			return db.ClaimEvent(ctx, s16EventID, worker, now, leaseUntil)
		},
		ack: func(ctx context.Context, db *store.DB, token, now int64) (store.Fenced, error) {
			return db.AckWithToken(ctx, s16EventID, token, now)
		},
	}
	switch variant {
	case variantAckByEventID:
		ops.ackSQL = store.AckByEventIDSQL
		ops.ack = func(ctx context.Context, db *store.DB, _, now int64) (store.Fenced, error) {
			return db.AckByEventID(ctx, s16EventID, now)
		}
	case variantReusedToken:
		ops.claimSQL = store.ClaimEventFixedTokenSQL
		ops.claim = func(ctx context.Context, db *store.DB, worker string, now, leaseUntil int64) (store.EventClaim, error) {
			return db.ClaimEventWithFixedToken(ctx, s16EventID, worker, reusedWorkerToken, now, leaseUntil)
		}
	}
	return ops
}

// logicalAt prints a logical instant the way the lessons write it.
func logicalAt(t int64) string { return fmt.Sprintf("t=%d", t) }

// staleAckRun is one session-16 run: its timeline and separate ledgers,
// appended to as each action happens.
type staleAckRun struct {
	timeline   lab.Timeline
	claims     []fencedClaimEntry
	acks       []ackEntry
	failedAcks []failedAckEntry
}

type fencedClaimEntry struct {
	seq        int
	at         int64
	worker     string
	outcome    store.ClaimOutcome
	rows       int64
	token      int64
	leaseUntil int64
	heldBy     string
	busy       int
}

type ackEntry struct {
	seq    int
	at     int64
	worker string
	token  int64
	rows   int64
	err    string
	busy   int
}

type failedAckEntry struct {
	seq    int
	at     int64
	worker string
	token  int64
	reason string
	detail string
}

func runStaleAckFencing(ctx context.Context, env *Env, ops fencingOps) (*lab.Result, error) {
	run := &staleAckRun{}
	r := &lab.Result{Statements: []lab.Statement{
		{Name: "claim", SQL: ops.claimSQL},
		{Name: "ack", SQL: ops.ackSQL},
		{Name: "after a 0-row ack: read why", SQL: store.EventByIDSQL},
	}}

	setup, err := openWorker(ctx, env.DatabasePath())
	if err != nil {
		return nil, err
	}
	defer setup.Close()
	if err := setup.Migrate(ctx, store.RelayEvents); err != nil {
		return nil, err
	}
	if err := setup.InsertEvent(ctx, store.NewEvent{ID: s16EventID, Type: s16EventType, Payload: s16EventPayload}, 0); err != nil {
		return nil, err
	}
	run.timeline.Add(logicalAt(0), "producer", "insert event", s16EventID+" committed with its business change; claim_token 0")

	// Each worker is its own application instance with its own connection.
	a, err := openWorker(ctx, env.DatabasePath())
	if err != nil {
		return nil, err
	}
	defer a.Close()
	b, err := openWorker(ctx, env.DatabasePath())
	if err != nil {
		return nil, err
	}
	defer b.Close()

	ca, err := run.claim(ctx, ops, a, workerA, s16ClaimA, s16LeaseA)
	if err != nil {
		return nil, err
	}
	run.timeline.Add(logicalAt(s16ClaimA), workerA, "stalls", "a long GC pause / slow publish: Worker-A still believes it owns "+s16EventID)
	run.timeline.Add(logicalAt(s16LeaseA), "clock", "lease expires", fmt.Sprintf("Worker-A's lease ran until %d; from now on %s is claimable", s16LeaseA, s16EventID))
	cb, err := run.claim(ctx, ops, b, workerB, s16ClaimB, s16LeaseB)
	if err != nil {
		return nil, err
	}
	if ca.Outcome != store.Claimed || cb.Outcome != store.Claimed {
		return nil, fmt.Errorf("session 16: claims were %s and %s, want both claimed", ca.Outcome, cb.Outcome)
	}

	// An ack whose statement failed is recorded (reason database-error) and
	// leaves its metric unset: its check fails as "not measured".
	staleRows, staleMeasured := run.ack(ctx, ops, a, workerA, ca.Token, s16AckA)
	currentRows, currentMeasured := run.ack(ctx, ops, b, workerB, cb.Token, s16AckB)
	cd, err := run.claim(ctx, ops, a, workerA, s16ClaimDone, s16ClaimDone+30)
	if err != nil {
		return nil, err
	}

	if staleMeasured {
		r.SetMetric("stale_ack_rows", float64(staleRows))
	}
	if currentMeasured {
		r.SetMetric("current_ack_rows", float64(currentRows))
	}
	r.SetMetric("reclaim_after_delivery_rows", float64(cd.Rows))
	r.SetMetric("distinct_tokens", float64(run.distinctTokens()))
	r.SetMetric("failed_acks_lease_lost", float64(run.failedAcksFor(reasonLeaseLost)))
	r.SetMetric("failed_acks_database_error", float64(run.failedAcksFor(reasonDatabaseError)))
	delivered, err := setup.Count(ctx, store.CountDeliveredEventsSQL)
	if err != nil {
		return nil, err
	}
	r.SetMetric("delivered_events", float64(delivered))
	expectDocumented(r, env.Scenario.Checks, map[string]float64{
		"stale_ack_rows": 0, "current_ack_rows": 1, "reclaim_after_delivery_rows": 0, "distinct_tokens": 2, "failed_acks_lease_lost": 1,
	})

	if r.Schema, err = setup.Schema(ctx); err != nil {
		return nil, err
	}
	events, err := setup.Events(ctx)
	if err != nil {
		return nil, err
	}
	r.Timeline = run.timeline.Events()
	r.Tables = append(r.Tables, outboxEventsTable(events))
	r.Tables = append(r.Tables, run.tables()...)

	if r.Passed() {
		r.Verdict = fmt.Sprintf("SAFE DESIGN held. Worker-A's late ack with token %d changed %s and was recorded as %s; "+
			"Worker-B's ack with token %d changed %s; the delivered event could not be claimed again (%s). "+
			"Fencing protected the row; it does not stop the duplicate broker message a stale owner may already have sent.",
			ca.Token, rowCount(staleRows), reasonLeaseLost, cb.Token, rowCount(currentRows), rowCount(cd.Rows))
	} else if env.Variant != "" {
		r.Verdict = fmt.Sprintf("DESIGN BROKEN by the %q mistake: failed checks %v. A stale owner's write was not fenced out.", env.Variant, r.FailedChecks())
	} else {
		r.Verdict = fmt.Sprintf("NOT SHOWN: failed checks %v; %d ack(s) failed with a database error (see the failed-ack ledger), so the fencing was not measured.",
			r.FailedChecks(), run.failedAcksFor(reasonDatabaseError))
	}
	return r, nil
}

// claim runs one claim for worker and records it in the claim ledger.
func (run *staleAckRun) claim(ctx context.Context, ops fencingOps, db *store.DB, worker string, now, leaseUntil int64) (store.EventClaim, error) {
	c, err := ops.claim(ctx, db, worker, now, leaseUntil)
	if err != nil {
		return c, err
	}
	var detail string
	switch c.Outcome {
	case store.Claimed:
		detail = fmt.Sprintf("%s claimed: 1 row, token %d, lease until %d", c.EventID, c.Token, c.LeaseUntil)
	case store.Done:
		detail = fmt.Sprintf("%s is delivered: the claim changed 0 rows", c.EventID)
	case store.Blocked:
		detail = fmt.Sprintf("%s is under %s's live lease until %d: 0 rows", c.EventID, c.HeldBy, c.LeaseUntil)
	default:
		detail = fmt.Sprintf("%s: %s, %d rows", c.EventID, c.Outcome, c.Rows)
	}
	seq := run.timeline.Add(logicalAt(now), worker, "claim "+string(c.Outcome), detail)
	run.claims = append(run.claims, fencedClaimEntry{seq: seq, at: now, worker: worker, outcome: c.Outcome, rows: c.Rows,
		token: c.Token, leaseUntil: c.LeaseUntil, heldBy: c.HeldBy, busy: c.Stats.BusyRetries})
	return c, nil
}

// ack runs one ack and records it; a 0-row ack or a failed statement also
// goes to the failed-ack ledger with its reason. A database error is a
// recorded outcome too: the worker cannot know whether it still owns the
// event, so it must not treat the event as done. measured is false when the
// statement failed: then no row count is known, and none is reported.
func (run *staleAckRun) ack(ctx context.Context, ops fencingOps, db *store.DB, worker string, token, now int64) (rows int64, measured bool) {
	f, ackErr := ops.ack(ctx, db, token, now)
	e := ackEntry{at: now, worker: worker, token: token, rows: f.Rows, busy: f.Stats.BusyRetries}
	var reason, why string
	switch {
	case ackErr != nil:
		e.err = ackErr.Error()
		reason, why = reasonDatabaseError, ackErr.Error()
	case f.Rows == 0:
		ev, ok, err := db.EventByID(ctx, s16EventID)
		if err != nil {
			reason, why = reasonDatabaseError, "0 rows, and reading the event to tell why failed: "+err.Error()
			break
		}
		reason, why = classifyZeroRowAck(ev, ok, token)
	}
	detail := fmt.Sprintf("with token %d: %s changed", token, rowCount(f.Rows))
	if ackErr != nil {
		detail = fmt.Sprintf("with token %d: the statement failed, no row count", token)
	}
	action := "ack"
	if reason != "" {
		action = "ack failed: " + reason
		detail += "; " + why
	} else {
		detail += "; " + s16EventID + " delivered"
	}
	e.seq = run.timeline.Add(logicalAt(now), worker, action, detail)
	run.acks = append(run.acks, e)
	if reason != "" {
		run.failedAcks = append(run.failedAcks, failedAckEntry{seq: e.seq, at: now, worker: worker, token: token, reason: reason, detail: why})
	}
	return f.Rows, ackErr == nil
}

// rowCount prints an affected-row count: "0 rows", "1 row".
func rowCount(n int64) string {
	if n == 1 {
		return "1 row"
	}
	return fmt.Sprintf("%d rows", n)
}

// classifyZeroRowAck tells why an ack changed no row, from the event as the
// database holds it after the ack.
func classifyZeroRowAck(ev store.Event, found bool, token int64) (reason, why string) {
	switch {
	case !found:
		return reasonDatabaseError, "the event row is missing"
	case ev.Token != token:
		return reasonLeaseLost, fmt.Sprintf("the current token is %d (held by %s): ours is stale", ev.Token, ev.LockedBy)
	case ev.Delivered:
		return reasonAlreadyDelivered, fmt.Sprintf("our token %d is current, but the event was already delivered at t=%d", token, ev.DeliveredAt)
	default:
		return reasonDatabaseError, "the token is current and the event pending, yet no row changed"
	}
}

func (run *staleAckRun) distinctTokens() int {
	seen := map[int64]bool{}
	for _, c := range run.claims {
		if c.outcome == store.Claimed {
			seen[c.token] = true
		}
	}
	return len(seen)
}

func (run *staleAckRun) failedAcksFor(reason string) int {
	n := 0
	for _, f := range run.failedAcks {
		if f.reason == reason {
			n++
		}
	}
	return n
}

func (run *staleAckRun) tables() []lab.Table {
	claims := lab.Table{Title: "Ledger: claims and their fencing tokens",
		Note:    "Every claim attempt, its affected rows and the token it got. A successful claim increments claim_token, so each gets a new one.",
		Columns: []string{"#", "Time", "Worker", "Outcome", "Rows", "Token", "Lease until", "Held by", "Busy retries"}}
	for _, c := range run.claims {
		token, until := "-", "-"
		if c.outcome == store.Claimed {
			token, until = fmt.Sprint(c.token), fmt.Sprint(c.leaseUntil)
		}
		claims.AddRow(c.seq, logicalAt(c.at), c.worker, string(c.outcome), c.rows, token, until, c.heldBy, c.busy)
	}
	acks := lab.Table{Title: "Ledger: acks",
		Note:    "Every ack attempt with the token it presented and the rows the UPDATE changed. 0 rows is an expected outcome, not an error.",
		Columns: []string{"#", "Time", "Worker", "Token presented", "Rows", "Error", "Busy retries"}}
	for _, a := range run.acks {
		var rows any = a.rows
		if a.err != "" {
			rows = nil // the statement failed: no row count is known
		}
		acks.AddRow(a.seq, logicalAt(a.at), a.worker, a.token, rows, a.err, a.busy)
	}
	failed := lab.Table{Title: "Ledger: failed acks",
		Note: "Each ack that did not complete the event, with its reason: " + reasonLeaseLost + " (a newer claim holds the event), " +
			reasonAlreadyDelivered + " (someone completed it under our token) or " + reasonDatabaseError + " (the statement failed; ownership unknown).",
		Columns: []string{"#", "Time", "Worker", "Token presented", "Reason", "Why"}}
	for _, f := range run.failedAcks {
		failed.AddRow(f.seq, logicalAt(f.at), f.worker, f.token, f.reason, f.detail)
	}
	return []lab.Table{claims, acks, failed}
}

// outboxEventsTable is the per-event table, read from the database.
func outboxEventsTable(events []store.Event) lab.Table {
	t := lab.Table{Title: "outbox_events: final state (from the database)",
		Columns: []string{"event_id", "event_type", "claim_token", "locked_by", "lease_until", "delivered", "delivered_at"}}
	for _, e := range events {
		until, at := "-", "-"
		if e.LeaseUntil != 0 {
			until = fmt.Sprint(e.LeaseUntil)
		}
		if e.Delivered {
			at = fmt.Sprint(e.DeliveredAt)
		}
		t.AddRow(e.ID, e.Type, e.Token, e.LockedBy, until, e.Delivered, at)
	}
	return t
}
