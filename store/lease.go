package store

// Day 15's statements: how a worker claims an outbox message under a lease,
// and how it finalizes one. Each statement is one literal; the lesson's
// claimable predicate, Pending or Processing with an expired lease, is
// repeated whole in every statement that uses it. A lease is live while
// :now < LockedUntilUtc. Parameters are named: :now, :worker, :until, :id.

// ClaimSQL is one way to claim an outbox message: the statements a lesson
// teaches (or a mistake it warns about), kept together so that a variant is
// the same value with one field replaced.
type ClaimSQL struct {
	// SelectNext picks the oldest claimable message's Id.
	SelectNext Stmt
	// Update takes ownership of the message :id. The lesson's version repeats
	// the claimable predicate, so it changes a row only if it is still
	// claimable. A mistake may run it in a transaction of its own
	// ([Stmt.Separate]): between the two, another worker can take the same
	// message.
	Update Stmt
}

// Split reports whether the claim's select and update run in separate
// transactions (the unguarded mistake).
func (c ClaimSQL) Split() bool { return c.Update.Separate }

// OneStatement reports whether the claim is one statement: SelectNext is
// an UPDATE that takes the oldest claimable message and returns its Id
// (RETURNING Id, as [ProductionClaim] does), and Update is left out
// ([Stmt.Omitted]). An engineer's or a student's claim file may take
// this form.
func (c ClaimSQL) OneStatement() bool { return c.Update.Omitted() }

// The lesson's claim, in one BEGIN IMMEDIATE transaction.
var (
	// ClaimSelectNext selects the oldest claimable message. On PostgreSQL,
	// whose transactions do not take the whole database's write lock as
	// SQLite's BEGIN IMMEDIATE does, the select takes the row's lock and
	// skips rows another claim holds (FOR UPDATE SKIP LOCKED): the same
	// lesson, with the lock on the row.
	ClaimSelectNext = namedOn("claim: select the oldest claimable message", `SELECT Id FROM OutboxMessages
WHERE (Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now))
ORDER BY CreatedAtUtc, Id
LIMIT 1`, `SELECT Id FROM OutboxMessages
WHERE (Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now))
ORDER BY CreatedAtUtc, Id
LIMIT 1
FOR UPDATE SKIP LOCKED`)

	// ClaimUpdate takes message :id only if it is still claimable.
	ClaimUpdate = named("claim: take it only if still claimable", `UPDATE OutboxMessages
SET Status = 'Processing', LockedBy = :worker, LockedUntilUtc = :until
WHERE Id = :id
  AND (Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now))`)

	// ClaimReadBack reads the claimed (or blocking) message, in the claim's
	// transaction.
	ClaimReadBack = named("claim: read the message back", `SELECT Id, MessageType, AggregateKey, Payload, Status, CreatedAtUtc, ProcessedAtUtc, LockedBy, LockedUntilUtc
FROM OutboxMessages WHERE Id = :id`)
)

// The claim mistakes.
var (
	// ClaimSelectPendingOnly is the permanent-lock mistake's select: only
	// Pending rows are claimable.
	ClaimSelectPendingOnly = mistake(&ClaimSelectNext,
		"drops the expired-lease branch of the claimable predicate, so a crashed owner's message is never taken over",
		"claim: select the oldest Pending message (MISTAKE: expiry-blind)", `SELECT Id FROM OutboxMessages
WHERE Status = 'Pending'
ORDER BY CreatedAtUtc, Id
LIMIT 1`)

	// ClaimUpdatePendingOnly is the permanent-lock mistake's update.
	ClaimUpdatePendingOnly = mistake(&ClaimUpdate,
		"drops the expired-lease branch of the claimable predicate, so a crashed owner's message is never taken over",
		"claim: take it only if Pending (MISTAKE: expiry-blind)", `UPDATE OutboxMessages
SET Status = 'Processing', LockedBy = :worker, LockedUntilUtc = :until
WHERE Id = :id
  AND Status = 'Pending'`)

	// ClaimSelectOwnTx is the unguarded mistake's select: it runs in a
	// transaction of its own, before the update's, so nothing it read or
	// locked holds when the update runs. On PostgreSQL it takes no row
	// lock: a FOR UPDATE SKIP LOCKED would end at its own commit, and two
	// such selects that happened to overlap would be handed different rows
	// by chance, hiding the race the mistake has every time.
	ClaimSelectOwnTx = mistakeOn(&ClaimSelectNext,
		"runs in a transaction of its own, before the UPDATE's, so nothing it read or locked holds when the UPDATE runs (on PostgreSQL it takes no row lock)",
		"claim: select the oldest claimable message, in a transaction of its own (MISTAKE: unguarded)", `SELECT Id FROM OutboxMessages
WHERE (Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now))
ORDER BY CreatedAtUtc, Id
LIMIT 1 /* in a transaction of its own: nothing it read holds afterwards */`, `SELECT Id FROM OutboxMessages
WHERE (Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now))
ORDER BY CreatedAtUtc, Id
LIMIT 1 /* in a transaction of its own: no lock would outlive it */`)

	// ClaimUpdateByID is the unguarded mistake's update: it trusts the
	// earlier read and changes the row by Id alone.
	ClaimUpdateByID = separate(mistake(&ClaimUpdate,
		"drops the claimable predicate from the UPDATE and runs it in a transaction of its own, after the SELECT's",
		"claim: take it by Id alone (MISTAKE: unguarded, a second transaction)", `UPDATE OutboxMessages
SET Status = 'Processing', LockedBy = :worker, LockedUntilUtc = :until
WHERE Id = :id`))
)

// The PostgreSQL claim mistakes. PostgreSQL runs a transaction at READ
// COMMITTED: a plain SELECT takes no lock, and each statement sees what was
// committed when it started. SQLite has no FOR UPDATE; these run on
// PostgreSQL only.
var (
	// ClaimSelectForUpdate locks the row without SKIP LOCKED: correct, but
	// a second worker's claim waits for the first claim's transaction.
	ClaimSelectForUpdate = mistake(&ClaimSelectNext,
		"takes the row lock without SKIP LOCKED, so a second worker's claim waits for the first claim's transaction to end instead of taking the next message",
		"claim: select the oldest claimable message FOR UPDATE (MISTAKE: waits for the lock)", `SELECT Id FROM OutboxMessages
WHERE (Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now))
ORDER BY CreatedAtUtc, Id
LIMIT 1
FOR UPDATE`)

	// ClaimSelectNoLock reads without a row lock: under READ COMMITTED two
	// workers can both read the same message.
	ClaimSelectNoLock = mistake(&ClaimSelectNext,
		"drops FOR UPDATE SKIP LOCKED: under READ COMMITTED the select takes no lock, so two workers can both read the same message",
		"claim: select the oldest claimable message (MISTAKE: no row lock)", `SELECT Id FROM OutboxMessages
WHERE (Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now))
ORDER BY CreatedAtUtc, Id
LIMIT 1 /* no FOR UPDATE: a read, not a lock */`)

	// ClaimUpdateTrustingRead takes the row by Id alone, in the select's
	// transaction: it trusts what the select read.
	ClaimUpdateTrustingRead = mistake(&ClaimUpdate,
		"drops the claimable predicate from the UPDATE, trusting the select's read: under READ COMMITTED it waits for the other worker's claim to commit, then overwrites it",
		"claim: take it by Id alone (MISTAKE: trusts the select's read)", `UPDATE OutboxMessages
SET Status = 'Processing', LockedBy = :worker, LockedUntilUtc = :until
WHERE Id = :id /* the select said it was claimable */`)
)

// The claims a lesson chooses from.
var (
	// LeaseClaim is Day 15's atomic claim: in one BEGIN IMMEDIATE
	// transaction, select the oldest claimable message and update it with
	// the same predicate; the claim succeeded only if exactly one row changed.
	LeaseClaim = ClaimSQL{SelectNext: ClaimSelectNext, Update: ClaimUpdate}

	// ExpiryBlindClaim is the permanent-lock mistake: only Pending rows are
	// claimable, so a message whose owner crashed stays Processing forever.
	ExpiryBlindClaim = ClaimSQL{SelectNext: ClaimSelectPendingOnly, Update: ClaimUpdatePendingOnly}

	// UnguardedClaim is the select-then-update mistake: the update trusts
	// the earlier read and changes the row by Id alone, in its own transaction.
	UnguardedClaim = ClaimSQL{SelectNext: ClaimSelectOwnTx, Update: ClaimUpdateByID}

	// QueuingClaim is the lesson's claim on PostgreSQL with FOR UPDATE but
	// without SKIP LOCKED: no message is claimed twice, but the workers
	// queue behind one another's row lock.
	QueuingClaim = ClaimSQL{SelectNext: ClaimSelectForUpdate, Update: ClaimUpdate}

	// ReadCommittedClaim is select-then-update in one transaction without
	// a row lock and with an update that trusts the read: on PostgreSQL two
	// workers both take the same message.
	ReadCommittedClaim = ClaimSQL{SelectNext: ClaimSelectNoLock, Update: ClaimUpdateTrustingRead}

	// ProductionClaim is how production outboxes and job queues (River,
	// MassTransit) claim: one statement that takes the oldest claimable
	// message and returns its Id. On PostgreSQL its subquery locks the row
	// and skips rows another claim holds (FOR UPDATE SKIP LOCKED); on
	// SQLite, BEGIN IMMEDIATE serializes the claims. `describe` shows it
	// beside the lesson's two statements, examples/claim-one-statement.sql
	// holds it for --claim-sql and the claim exercise, and the bench runs
	// its batched form (see [ScaleSQL]).
	ProductionClaim = namedOn("claim in one statement (the production form)", `UPDATE OutboxMessages
SET Status = 'Processing', LockedBy = :worker, LockedUntilUtc = :until
WHERE Id = (SELECT Id FROM OutboxMessages
            WHERE (Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now))
            ORDER BY CreatedAtUtc, Id
            LIMIT 1)
RETURNING Id`, `UPDATE OutboxMessages
SET Status = 'Processing', LockedBy = :worker, LockedUntilUtc = :until
WHERE Id = (SELECT Id FROM OutboxMessages
            WHERE (Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now))
            ORDER BY CreatedAtUtc, Id
            LIMIT 1
            FOR UPDATE SKIP LOCKED)
RETURNING Id`)
)

// Finalization and the Day 15 "before".
var (
	// FinalizeOwned is Day 15's ownership-verified completion: the message
	// becomes Processed only while this worker still owns it.
	FinalizeOwned = named("finalize: mark Processed only while I own it", `UPDATE OutboxMessages
SET Status = 'Processed', ProcessedAtUtc = :now
WHERE Id = :id
  AND Status = 'Processing'
  AND LockedBy = :worker`)

	// CompleteByID is the "before" completion: by Id alone, so a second
	// worker's completion of the same message succeeds too. (Session 21's
	// ScaleFinalizeByID has the same SQL; the closing comment keeps the two
	// texts, and so the lesson statements they replace, apart.)
	CompleteByID = mistake(&FinalizeOwned,
		"drops the ownership guard AND Status = 'Processing' AND LockedBy = :worker, so it never refuses",
		"complete: mark Processed by Id alone (MISTAKE: no ownership guard)", `UPDATE OutboxMessages
SET Status = 'Processed', ProcessedAtUtc = :now
WHERE Id = :id /* whichever worker loaded it */`)

	// ApplyPaymentOutcome stores the provider's answer on the payment, in
	// the finalization's transaction.
	ApplyPaymentOutcome = named("finalize: apply the provider's outcome to the payment (same transaction)", `UPDATE Payments
SET PaymentStatus = :status, TransactionId = :txn, UpdatedAtUtc = :now
WHERE IdempotencyKey = :key`)

	// LoadPending is the naive bulk load of Day 15's "before": every worker
	// reads every Pending message and believes it owns them.
	LoadPending = named("load: read every Pending message (a read, not a claim)", `SELECT Id, MessageType, AggregateKey, Payload, CreatedAtUtc
FROM OutboxMessages
WHERE Status = 'Pending'
ORDER BY CreatedAtUtc, Id`)
)

// OutboxSQL is Day 15's statements on outbox messages: how a worker finds
// work (a claim, or the "before"'s plain load) and how it finalizes it. A
// variant is the same value with one field replaced.
type OutboxSQL struct {
	Claim ClaimSQL
	// Load is the "before"'s read of every Pending message.
	Load Stmt
	// Finalize marks message :id Processed; the transaction commits only if
	// it changed exactly one row.
	Finalize Stmt
	// ApplyOutcome stores the provider's answer on the payment, in
	// Finalize's transaction.
	ApplyOutcome Stmt
}

// OutboxLesson is Day 15's lesson: the lease claim and the owner-guarded
// finalization.
var OutboxLesson = OutboxSQL{Claim: LeaseClaim, Load: LoadPending, Finalize: FinalizeOwned, ApplyOutcome: ApplyPaymentOutcome}
