package store

// ClockSQL is session 23's statements on outbox_events: the relay's claim,
// ack and renewal read the database's own clock, db_now() (milliseconds on
// the lesson's clock, see [DatabaseClock]), so a lease's instants are the
// database's, never a worker's. A variant is the same value with one field
// replaced by a mistake declared below.
//
// Parameters are named. Every statement of a field is called with the same
// arguments, so a mistake may use one the lesson's statement does not:
//   - Insert: :id, :type, :payload, :now (created_at)
//   - Claim: :relay, :lease (a duration), :id, :now (the worker's own clock)
//   - ReadClaim, Event, Hold: :id
//   - Ack: :id, :token
//   - Renew: :lease, :id, :token
//   - Stage: :relay, :id
type ClockSQL struct {
	// Insert writes an outbox event, unclaimed and not delivered.
	Insert Stmt
	// Claim takes the event :id for :lease milliseconds if its lease has
	// ended, with a new fencing token.
	Claim Stmt
	// ReadClaim reads back what a claim wrote, in the claim's transaction.
	ReadClaim Stmt
	// Ack marks the event delivered under the current token while the
	// lease is live.
	Ack Stmt
	// Renew gives the event one more lease from now, under the current
	// token, while the lease is live.
	Renew Stmt
	// Event reads one event: why an ack changed 0 rows.
	Event Stmt
	// Events reads every event, for the report.
	Events Stmt
	// Hold is another application's write on the event's row, run in a
	// transaction the lab keeps open: the database outage at the ack.
	Hold Stmt
	// Stage is the lab's start of a race trial: the event held by :relay
	// under a new token, its lease ending now on the database's clock.
	Stage Stmt
}

// ClockLesson is session 23's relay as the lesson teaches it.
var ClockLesson = ClockSQL{
	Insert:    InsertEvent,
	Claim:     ClaimOnDatabaseClock,
	ReadClaim: ReadClaim,
	Ack:       AckOnDatabaseClock,
	Renew:     RenewOnDatabaseClock,
	Event:     EventByID,
	Events:    ListEvents,
	Hold:      HoldEventRow,
	Stage:     StageRaceTrial,
}

// The lesson's statements.
var (
	// ClaimOnDatabaseClock is the fenced claim with the database deciding
	// the time: the lease is over when db_now() reaches lease_until, and
	// the new lease ends :lease milliseconds after db_now(). The worker
	// sends a duration, never an instant of its own clock.
	ClaimOnDatabaseClock = named("relay: claim on the database's clock (token + 1, lease from db_now())", `UPDATE outbox_events
SET claim_token = claim_token + 1,
    locked_by   = :relay,
    lease_until = db_now() + :lease
WHERE event_id = :id
  AND delivered = 0
  AND (lease_until IS NULL OR lease_until <= db_now())`)

	// AckOnDatabaseClock completes the event only under the current token,
	// only once, and only while the lease is live on the database's clock.
	// 0 rows: the lease was lost (a newer token, or it ran out) or the
	// event is already delivered.
	AckOnDatabaseClock = named("relay: ack under the current token while the lease is live (db_now())", `UPDATE outbox_events
SET delivered = 1, delivered_at = db_now()
WHERE event_id = :id
  AND claim_token = :token
  AND delivered = 0
  AND lease_until > db_now()`)

	// RenewOnDatabaseClock gives the event one more lease from the
	// database's now, under the current token, while the lease is live.
	RenewOnDatabaseClock = named("relay: renew one lease from db_now() (current token, live lease)", `UPDATE outbox_events
SET lease_until = db_now() + :lease
WHERE event_id = :id
  AND claim_token = :token
  AND delivered = 0
  AND lease_until > db_now()`)

	// HoldEventRow is the outage: another application (a batch job)
	// rewrites the event's row and keeps its transaction open. On SQLite
	// it holds the database's write lock, on PostgreSQL the row's lock,
	// until the lab ends the transaction.
	HoldEventRow = named("batch job: rewrite an event's row in a long transaction (holds its lock)", `UPDATE outbox_events
SET payload = payload
WHERE event_id = :id`)

	// StageRaceTrial starts one trial of the race at the lease end: the
	// event becomes :relay's under a new token, not delivered, with its
	// lease ending exactly now on the database's clock.
	StageRaceTrial = audit("lab: start a race trial (the event :relay's under a new token, its lease ending at db_now())", `UPDATE outbox_events
SET claim_token = claim_token + 1,
    locked_by   = :relay,
    lease_until = db_now(),
    delivered   = 0
WHERE event_id = :id`)
)

// Session 23's mistakes, each replacing one lesson statement.
var (
	// ClaimOnWorkerClock is the worker-clock-leases mistake: the claim
	// compares the lease end with :now, the worker's own clock, and writes
	// a lease end computed on it. Two workers whose clocks disagree then
	// disagree about whether the same lease is live.
	ClaimOnWorkerClock = mistake(&ClaimOnDatabaseClock, "compares and writes lease ends on :now, the worker's own clock, instead of db_now()",
		"relay: claim on the worker's own clock (MISTAKE)", `UPDATE outbox_events
SET claim_token = claim_token + 1,
    locked_by   = :relay,
    lease_until = :now + :lease
WHERE event_id = :id
  AND delivered = 0
  AND (lease_until IS NULL OR lease_until <= :now)`)

	// RenewOnDatabaseClockByEventID is the renew-by-event-id mistake on the
	// database's clock: without the token, a renewal that comes after
	// another worker's claim finds that worker's live lease and extends it.
	RenewOnDatabaseClockByEventID = mistake(&RenewOnDatabaseClock, "drops the token guard AND claim_token = :token",
		"relay: renew one lease from db_now() by event id alone (MISTAKE)", `UPDATE outbox_events
SET lease_until = db_now() + :lease
WHERE event_id = :id
  AND delivered = 0
  AND lease_until > db_now()`)
)

// The database's clock on PostgreSQL: a one-row table in the run's schema
// that the lab moves, and the function db_now() that reads it. (On SQLite
// db_now() is a function of the lab's connections; see [DatabaseClock].)
var (
	createClockTable = audit("lab: create the database's clock (PostgreSQL: a one-row table the lab moves)",
		`CREATE TABLE db_clock (now_ms BIGINT NOT NULL)`)
	startClock = audit("lab: start the database's clock (PostgreSQL)", `INSERT INTO db_clock (now_ms) VALUES (:now)`)
	createNow  = audit("lab: define db_now(), the database's clock (PostgreSQL)",
		`CREATE OR REPLACE FUNCTION db_now() RETURNS bigint LANGUAGE sql STABLE AS 'SELECT now_ms FROM db_clock'`)
	moveClock = audit("lab: move the database's clock (PostgreSQL)", `UPDATE db_clock SET now_ms = :now`)

	// ackLockWait bounds the ack's wait for a lock on PostgreSQL, whose
	// default is to wait for ever, to SQLite's busy timeout.
	ackLockWait = named("relay: the ack waits at most 1 s for a lock (PostgreSQL)",
		`SET LOCAL lock_timeout = '1s'`)
)
