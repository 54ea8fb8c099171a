package store

// BrokerSQL is the statements of the lab's broker (sessions 18 to 20):
// offers, per-consumer deliveries and the dead-letter queue, kept together
// as one value, as [RelaySQL] is for the relay. Every time is UTC text in
// [clock.Layout]; a bound such as "now minus the window" is computed in Go
// and passed as text of the same format, so the comparison is a plain text
// comparison.
//
// Parameters are named:
//   - Offer: :event_id, :payload, :offered_by, :now, :window_start
//   - SelectNext: :consumer
//   - MarkDelivered: :offer_id, :consumer, :now
//   - Ack: :now, :offer_id, :consumer, :receipt
//   - Delivery: :offer_id, :consumer
//   - DeadLetter: :consumer, :now, :timeout_cutoff, :max_deliveries
//   - MarkDeadLettered: :consumer, :timeout_cutoff, :max_deliveries
//   - Redeliver: :consumer, :timeout_cutoff
//   - PurgeDeadLetters: :cutoff
//   - TakeDeadLetter: :dead_letter_id
type BrokerSQL struct {
	// Offer stores one send. With a deduplication window it refuses (and
	// records as dropped) a send whose event id the broker accepted after
	// :window_start (now minus the window); a window of 0 makes
	// :window_start now, so no earlier offer is inside it: deduplication off.
	Offer Stmt
	// SelectNext picks the oldest accepted offer this consumer has never
	// received, or that is waiting for redelivery.
	SelectNext Stmt
	// MarkDelivered records a delivery: the first one, or the next one of an
	// offer waiting for redelivery. delivery_count is the receipt.
	MarkDelivered Stmt
	// Ack acknowledges a delivery under the receipt of the delivery still in
	// flight: a late ack of an earlier delivery changes 0 rows.
	Ack Stmt
	// Delivery reads one delivery's state and receipt: why an ack changed
	// 0 rows.
	Delivery Stmt
	// DeadLetter copies into the dead-letter queue every in-flight delivery
	// whose visibility timeout ran out after its last allowed delivery
	// (:max_deliveries 0 means no limit).
	DeadLetter Stmt
	// MarkDeadLettered takes the deliveries DeadLetter copied out of the
	// consumer's queue.
	MarkDeadLettered Stmt
	// Redeliver makes every other in-flight delivery whose visibility
	// timeout ran out ready for redelivery: unacknowledged means not done.
	Redeliver Stmt
	// PurgeDeadLetters applies the dead-letter queue's own retention:
	// :cutoff is now minus the retention.
	PurgeDeadLetters Stmt
	// TakeDeadLetter removes one dead letter for a replay, returning it.
	TakeDeadLetter Stmt
}

// BrokerLesson is the broker of sessions 18 to 20.
var BrokerLesson = BrokerSQL{
	Offer:            OfferSend,
	SelectNext:       SelectNextDelivery,
	MarkDelivered:    MarkDelivered,
	Ack:              AckDelivery,
	Delivery:         DeliveryByOffer,
	DeadLetter:       DeadLetterExpired,
	MarkDeadLettered: MarkDeadLettered,
	Redeliver:        RedeliverExpired,
	PurgeDeadLetters: PurgeDeadLetters,
	TakeDeadLetter:   TakeDeadLetter,
}

// The broker's statements.
var (
	// OfferSend stores one send, dropped inside the dedup window.
	// On PostgreSQL, EXISTS is a boolean and dropped an integer, so the
	// statement says CASE WHEN EXISTS (...) THEN 1 ELSE 0 END.
	OfferSend = namedOn("broker: offer (dropped inside the dedup window)", `INSERT INTO broker_offers (event_id, payload, offered_by, offered_at, dropped)
VALUES (:event_id, :payload, :offered_by, :now,
        EXISTS (SELECT 1 FROM broker_offers
                WHERE event_id = :event_id
                  AND dropped = 0
                  AND offered_at > :window_start))
RETURNING offer_id, dropped`, `INSERT INTO broker_offers (event_id, payload, offered_by, offered_at, dropped)
VALUES (:event_id, :payload, :offered_by, :now,
        CASE WHEN EXISTS (SELECT 1 FROM broker_offers
                          WHERE event_id = :event_id
                            AND dropped = 0
                            AND offered_at > :window_start) THEN 1 ELSE 0 END)
RETURNING offer_id, dropped`)

	// SelectNextDelivery picks the consumer's next offer.
	SelectNextDelivery = named("broker: select the next offer for the consumer", `SELECT o.offer_id, o.event_id, o.payload, o.offered_at
FROM broker_offers o
LEFT JOIN broker_deliveries d ON d.offer_id = o.offer_id AND d.consumer = :consumer
WHERE o.dropped = 0
  AND (d.offer_id IS NULL OR d.state = 'ready')
ORDER BY o.offer_id
LIMIT 1`)

	// MarkDelivered marks the offer in flight under a new receipt.
	// PostgreSQL wants the upsert's columns named with their table, where
	// excluded.delivery_count would be as good a reading.
	MarkDelivered = namedOn("broker: mark delivered (receipt = delivery_count)", `INSERT INTO broker_deliveries (offer_id, consumer, state, delivery_count, delivered_at)
VALUES (:offer_id, :consumer, 'in_flight', 1, :now)
ON CONFLICT (offer_id, consumer) DO UPDATE
SET state = 'in_flight', delivery_count = delivery_count + 1, delivered_at = excluded.delivered_at
WHERE state = 'ready'
RETURNING delivery_count`, `INSERT INTO broker_deliveries (offer_id, consumer, state, delivery_count, delivered_at)
VALUES (:offer_id, :consumer, 'in_flight', 1, :now)
ON CONFLICT (offer_id, consumer) DO UPDATE
SET state = 'in_flight', delivery_count = broker_deliveries.delivery_count + 1, delivered_at = excluded.delivered_at
WHERE broker_deliveries.state = 'ready'
RETURNING delivery_count`)

	// AckDelivery acknowledges under the receipt of the delivery in flight.
	AckDelivery = named("broker: ack a delivery under its receipt", `UPDATE broker_deliveries
SET state = 'acked', acked_at = :now
WHERE offer_id = :offer_id
  AND consumer = :consumer
  AND delivery_count = :receipt
  AND state = 'in_flight'`)

	// DeliveryByOffer reads one delivery back after an ack changed 0 rows.
	DeliveryByOffer = named("broker: read one delivery (its state and receipt)", `SELECT state, delivery_count FROM broker_deliveries
WHERE offer_id = :offer_id
  AND consumer = :consumer`)

	// DeadLetterExpired copies expired deliveries past their last allowed
	// delivery into the dead-letter queue.
	DeadLetterExpired = named("broker: dead-letter after the last delivery", `INSERT INTO broker_dead_letters (offer_id, consumer, event_id, payload, delivery_count, dead_lettered_at)
SELECT d.offer_id, d.consumer, o.event_id, o.payload, d.delivery_count, :now
FROM broker_deliveries d
JOIN broker_offers o ON o.offer_id = d.offer_id
WHERE d.consumer = :consumer
  AND d.state = 'in_flight'
  AND d.delivered_at <= :timeout_cutoff
  AND :max_deliveries > 0
  AND d.delivery_count >= :max_deliveries`)

	// MarkDeadLettered takes the dead-lettered deliveries out of the queue.
	MarkDeadLettered = named("broker: mark those deliveries dead-lettered", `UPDATE broker_deliveries
SET state = 'dead_lettered'
WHERE consumer = :consumer
  AND state = 'in_flight'
  AND delivered_at <= :timeout_cutoff
  AND :max_deliveries > 0
  AND delivery_count >= :max_deliveries`)

	// RedeliverExpired makes the other expired deliveries ready again.
	RedeliverExpired = named("broker: redeliver after the visibility timeout", `UPDATE broker_deliveries
SET state = 'ready'
WHERE consumer = :consumer
  AND state = 'in_flight'
  AND delivered_at <= :timeout_cutoff`)

	// PurgeDeadLetters applies the dead-letter queue's retention.
	PurgeDeadLetters = named("broker: DLQ retention purge", `DELETE FROM broker_dead_letters
WHERE dead_lettered_at <= :cutoff`)

	// TakeDeadLetter removes one dead letter for a replay.
	TakeDeadLetter = named("operator: take a dead letter for a replay (then offer it again)", `DELETE FROM broker_dead_letters
WHERE dead_letter_id = :dead_letter_id
RETURNING event_id, payload`)
)

// ConsumerSQL is the statements of the consumers of sessions 18 to 20 on
// their own tables: the inbox (consumed_events), accounts and projections.
//
// Parameters are named:
//   - OpenAccount: :id
//   - Record: :consumer, :event_id, :now
//   - Credit: :cents, :id
//   - Check: :consumer, :event_id
//   - Purge: :cutoff
//   - Project: :entity_id, :version, :state, :now
type ConsumerSQL struct {
	// OpenAccount creates an account with no credit, once.
	OpenAccount Stmt
	// Record is the inbox insert: it adds a row only the first time this
	// consumer sees the event id. The lesson's consumer credits only when it
	// added one, in the same transaction.
	Record Stmt
	// Credit is the business effect: an additive, unconditional increment.
	Credit Stmt
	// Check reads the inbox before the effect, in a transaction of its own.
	// The lesson has none ([NoSeparateInboxRead], never run): its inbox
	// insert is the check.
	Check Stmt
	// Purge applies the inbox retention: dedup records written at or before
	// :cutoff (now minus the retention) are deleted, and a later redelivery
	// of those events looks new.
	Purge Stmt
	// Project moves a state projection; the lesson's only forward.
	Project Stmt
}

// ConsumerLesson is the consumer the lessons teach: the inbox insert and the
// credit in one transaction, a projection that never moves backward.
var ConsumerLesson = ConsumerSQL{
	OpenAccount: OpenAccount,
	Record:      RecordConsumed,
	Check:       NoSeparateInboxRead,
	Credit:      CreditAccount,
	Purge:       PurgeConsumed,
	Project:     ProjectNewerVersion,
}

// The consumers' statements.
var (
	// OpenAccount creates an account with no credit, once.
	OpenAccount = named("consumer: open an account (no credit)", `INSERT INTO accounts (id, credit_cents) VALUES (:id, 0)
ON CONFLICT (id) DO NOTHING`)

	// RecordConsumed is the inbox insert.
	RecordConsumed = named("consumer: inbox insert (ON CONFLICT DO NOTHING)", `INSERT INTO consumed_events (consumer, event_id, consumed_at)
VALUES (:consumer, :event_id, :now)
ON CONFLICT (consumer, event_id) DO NOTHING`)

	// CreditAccount is the business effect.
	CreditAccount = named("consumer: credit the account", `UPDATE accounts SET credit_cents = credit_cents + :cents WHERE id = :id`)

	// PurgeConsumed applies the inbox retention.
	PurgeConsumed = named("inbox retention purge", `DELETE FROM consumed_events
WHERE consumed_at <= :cutoff`)

	// ProjectNewerVersion moves a projection forward only: an event carrying
	// an older (or the same) version than the stored one changes 0 rows.
	ProjectNewerVersion = named("consumer: projection, only a newer version", `INSERT INTO projections (entity_id, version, state, updated_at)
VALUES (:entity_id, :version, :state, :now)
ON CONFLICT (entity_id) DO UPDATE
SET version = excluded.version, state = excluded.state, updated_at = excluded.updated_at
WHERE excluded.version > projections.version`)
)

// NoSeparateInboxRead is the lesson's answer to "was this event consumed?":
// no statement of its own, since the inbox insert in the effect's
// transaction is the check. It has no text and never runs; the mistake that
// adds a separate read names it as what it replaced.
var NoSeparateInboxRead = Stmt{Name: "consumer: no separate inbox read (the inbox insert in the effect's transaction is the check)"}

// The consumers' mistakes.
var (
	// CheckInboxFirst is the effect-outside-inbox-tx mistake's first step:
	// the consumer asks the inbox in a transaction of its own, then credits
	// and inserts the inbox row in two more, so a duplicate that arrives
	// between them passes the check.
	CheckInboxFirst = mistake(&NoSeparateInboxRead,
		"asks the inbox in a read of its own, outside the credit's transaction; the insert comes after the effect",
		"consumer: check the inbox before the effect (MISTAKE)",
		`SELECT count(*) FROM consumed_events WHERE consumer = :consumer AND event_id = :event_id`)

	// NoInbox is the naive consumer: it leaves the inbox insert out, so
	// every delivery, a redelivery or a second send included, is credited.
	NoInbox = omitted(&RecordConsumed,
		"leaves the inbox insert out: every delivery is credited, duplicates included",
		"consumer: no inbox insert")

	// ProjectLastWriteWins is the projection without a version guard: the
	// last event to arrive wins, so an older one moves it backward.
	ProjectLastWriteWins = mistake(&ConsumerLesson.Project,
		"drops the version guard WHERE excluded.version > projections.version",
		"consumer: projection, last write wins (MISTAKE)",
		`INSERT INTO projections (entity_id, version, state, updated_at)
VALUES (:entity_id, :version, :state, :now)
ON CONFLICT (entity_id) DO UPDATE
SET version = excluded.version, state = excluded.state, updated_at = excluded.updated_at`)
)

// Audit reads of the broker and the consumers' tables: the lab's own
// queries, for a report's figures and tables (with [DB.Count] for counts).
var (
	// CountOffers counts the offers of one event id that the broker
	// accepted (dropped = 0) or dropped (dropped = 1).
	CountOffers = audit("audit: count an event's offers, accepted or dropped", `SELECT count(*) FROM broker_offers WHERE event_id = ? AND dropped = ?`)
	// CountConsumedEvents counts one consumer's inbox rows.
	CountConsumedEvents = audit("audit: count a consumer's inbox rows", `SELECT count(*) FROM consumed_events WHERE consumer = ?`)
	// CountDeadLetters counts the dead-letter queue.
	CountDeadLetters = audit("audit: count the dead-letter queue", `SELECT count(*) FROM broker_dead_letters`)
	// AccountCredit reads one account's credit.
	AccountCredit = audit("audit: read an account's credit", `SELECT credit_cents FROM accounts WHERE id = ?`)

	// ListOffers reads every offer in arrival order.
	ListOffers = audit("audit: read every broker offer", `SELECT offer_id, event_id, payload, offered_by, offered_at, dropped FROM broker_offers ORDER BY offer_id`)
	// ListDeliveries reads every delivery by offer and consumer.
	ListDeliveries = audit("audit: read every broker delivery", `SELECT offer_id, consumer, state, delivery_count, delivered_at, acked_at FROM broker_deliveries ORDER BY offer_id, consumer`)
	// ListDeadLetters reads the dead-letter queue in arrival order.
	ListDeadLetters = audit("audit: read the dead-letter queue", `SELECT dead_letter_id, offer_id, consumer, event_id, payload, delivery_count, dead_lettered_at FROM broker_dead_letters ORDER BY dead_letter_id`)
	// ListConsumedEvents reads the inbox.
	ListConsumedEvents = audit("audit: read the inbox", `SELECT consumer, event_id, consumed_at FROM consumed_events ORDER BY consumer, consumed_at, event_id`)
	// ListAccounts reads every account.
	ListAccounts = audit("audit: read every account", `SELECT id, credit_cents FROM accounts ORDER BY id`)
	// ListProjections reads every projection.
	ListProjections = audit("audit: read every projection", `SELECT entity_id, version, state, updated_at FROM projections ORDER BY entity_id`)
)
