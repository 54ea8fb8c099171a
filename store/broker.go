package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/outboxlab/outboxlab/clock"
)

// BrokerInbox is the schema of sessions 18 to 20: the lab's own broker
// (offers, per-consumer deliveries, a dead-letter queue) and the consumers'
// tables (consumed_events, accounts, projections). Unlike outbox_events
// (logical integer time, shared with sessions 16 and 17), its times are UTC
// text with milliseconds ([clock.Layout]), so a student can read them in the
// sqlite3 shell; in that fixed format text order is time order.
var BrokerInbox = mustMigration("018_broker_inbox.sql")

// The broker's statements. Every time is UTC text in [clock.Layout]; a
// bound such as "now minus the window" is computed in Go and passed as text
// of the same format, so the comparison is a plain text comparison.
const (
	// OfferSQL stores one send. With a deduplication window it refuses (and
	// records as dropped) a send whose event id the broker accepted after
	// :window_start (now minus the window); a window of 0 makes :window_start
	// now, so no earlier offer is inside it: deduplication off.
	OfferSQL = `INSERT INTO broker_offers (event_id, payload, offered_by, offered_at, dropped)
VALUES (:event_id, :payload, :offered_by, :now,
        EXISTS (SELECT 1 FROM broker_offers
                WHERE event_id = :event_id
                  AND dropped = 0
                  AND offered_at > :window_start))
RETURNING offer_id, dropped`

	// SelectNextDeliverySQL picks the oldest accepted offer this consumer
	// has never received, or that is waiting for redelivery.
	SelectNextDeliverySQL = `SELECT o.offer_id, o.event_id, o.payload, o.offered_at
FROM broker_offers o
LEFT JOIN broker_deliveries d ON d.offer_id = o.offer_id AND d.consumer = :consumer
WHERE o.dropped = 0
  AND (d.offer_id IS NULL OR d.state = 'ready')
ORDER BY o.offer_id
LIMIT 1`

	// MarkDeliveredSQL records a delivery: the first one, or the next one of
	// an offer waiting for redelivery. delivery_count is the receipt.
	MarkDeliveredSQL = `INSERT INTO broker_deliveries (offer_id, consumer, state, delivery_count, delivered_at)
VALUES (:offer_id, :consumer, 'in_flight', 1, :now)
ON CONFLICT (offer_id, consumer) DO UPDATE
SET state = 'in_flight', delivery_count = delivery_count + 1, delivered_at = excluded.delivered_at
WHERE state = 'ready'
RETURNING delivery_count`

	// AckDeliverySQL acknowledges a delivery. It must present the receipt of
	// the delivery still in flight: a late ack of an earlier delivery, or of
	// one already acked or dead-lettered, changes 0 rows.
	AckDeliverySQL = `UPDATE broker_deliveries
SET state = 'acked', acked_at = :now
WHERE offer_id = :offer_id
  AND consumer = :consumer
  AND delivery_count = :receipt
  AND state = 'in_flight'`

	// DeadLetterSQL copies into the dead-letter queue every in-flight
	// delivery whose visibility timeout ran out (delivered at or before
	// :timeout_cutoff, now minus the timeout) after its last allowed delivery
	// (:max_deliveries 0 means no limit).
	DeadLetterSQL = `INSERT INTO broker_dead_letters (offer_id, consumer, event_id, payload, delivery_count, dead_lettered_at)
SELECT d.offer_id, d.consumer, o.event_id, o.payload, d.delivery_count, :now
FROM broker_deliveries d
JOIN broker_offers o ON o.offer_id = d.offer_id
WHERE d.consumer = :consumer
  AND d.state = 'in_flight'
  AND d.delivered_at <= :timeout_cutoff
  AND :max_deliveries > 0
  AND d.delivery_count >= :max_deliveries`

	// MarkDeadLetteredSQL takes the deliveries [DeadLetterSQL] copied out of
	// the consumer's queue.
	MarkDeadLetteredSQL = `UPDATE broker_deliveries
SET state = 'dead_lettered'
WHERE consumer = :consumer
  AND state = 'in_flight'
  AND delivered_at <= :timeout_cutoff
  AND :max_deliveries > 0
  AND delivery_count >= :max_deliveries`

	// RedeliverSQL makes every other in-flight delivery whose visibility
	// timeout ran out ready for redelivery: unacknowledged means not done.
	RedeliverSQL = `UPDATE broker_deliveries
SET state = 'ready'
WHERE consumer = :consumer
  AND state = 'in_flight'
  AND delivered_at <= :timeout_cutoff`

	// PurgeDeadLettersSQL applies the dead-letter queue's own retention:
	// :cutoff is now minus the retention.
	PurgeDeadLettersSQL = `DELETE FROM broker_dead_letters
WHERE dead_lettered_at <= :cutoff`

	// TakeDeadLetterSQL removes one dead letter for a replay, returning it.
	TakeDeadLetterSQL = `DELETE FROM broker_dead_letters
WHERE dead_letter_id = :dead_letter_id
RETURNING event_id, payload`
)

// The consumers' statements.
const (
	// OpenAccountSQL creates an account with no credit, once.
	OpenAccountSQL = `INSERT INTO accounts (id, credit_cents) VALUES (:id, 0)
ON CONFLICT (id) DO NOTHING`

	// RecordConsumedSQL is the inbox insert: it adds a row only the first
	// time this consumer sees the event id.
	RecordConsumedSQL = `INSERT INTO consumed_events (consumer, event_id, consumed_at)
VALUES (:consumer, :event_id, :now)
ON CONFLICT (consumer, event_id) DO NOTHING`

	// CreditAccountSQL is the business effect: an additive, unconditional
	// increment. Alone it is the naive consumer.
	CreditAccountSQL = `UPDATE accounts SET credit_cents = credit_cents + :cents WHERE id = :id`

	// HasConsumedSQL asks the inbox whether the event was consumed: the
	// first step of the effect-outside-inbox-tx mistake.
	HasConsumedSQL = `SELECT count(*) FROM consumed_events WHERE consumer = :consumer AND event_id = :event_id`

	// PurgeConsumedSQL applies the inbox retention: dedup records written at
	// or before :cutoff (now minus the retention) are deleted, and a later
	// redelivery of those events looks new.
	PurgeConsumedSQL = `DELETE FROM consumed_events
WHERE consumed_at <= :cutoff`

	// ApplyVersionedSQL moves a projection forward only: an event carrying
	// an older (or the same) version than the stored one changes 0 rows.
	ApplyVersionedSQL = `INSERT INTO projections (entity_id, version, state, updated_at)
VALUES (:entity_id, :version, :state, :now)
ON CONFLICT (entity_id) DO UPDATE
SET version = excluded.version, state = excluded.state, updated_at = excluded.updated_at
WHERE excluded.version > projections.version`

	// ApplyUnversionedSQL is the mistake: last write wins, so an event that
	// arrives after a newer one moves the projection backward.
	ApplyUnversionedSQL = `INSERT INTO projections (entity_id, version, state, updated_at)
VALUES (:entity_id, :version, :state, :now)
ON CONFLICT (entity_id) DO UPDATE
SET version = excluded.version, state = excluded.state, updated_at = excluded.updated_at`
)

// Audit queries on the broker and the consumers, for [DB.Count].
const (
	// CountOffersSQL counts the offers of one event id that the broker
	// accepted (dropped = 0) or dropped (dropped = 1).
	CountOffersSQL = `SELECT count(*) FROM broker_offers WHERE event_id = ? AND dropped = ?`
	// CountConsumedEventsSQL counts one consumer's inbox rows.
	CountConsumedEventsSQL = `SELECT count(*) FROM consumed_events WHERE consumer = ?`
	// AccountCreditSQL reads one account's credit.
	AccountCreditSQL = `SELECT credit_cents FROM accounts WHERE id = ?`
	// CountDeadLettersSQL counts the dead-letter queue.
	CountDeadLettersSQL = `SELECT count(*) FROM broker_dead_letters`
)

// ErrNoAccount means a credit named an account that was never opened.
var ErrNoAccount = errors.New("store: no such account")

// Offer is the broker's answer to a send.
type Offer struct {
	OfferID int64
	EventID string
	// Dropped is true when the dedup window refused the send. The broker
	// still answers the sender with success, as real brokers do.
	Dropped bool
	Stats   TxStats
}

// Offer stores a send of eventID from offeredBy at now ([OfferSQL]). With a
// window > 0 a send whose event id was accepted less than window ago is
// recorded as dropped and never delivered.
func (db *DB) Offer(ctx context.Context, eventID, payload, offeredBy string, now time.Time, window time.Duration) (Offer, error) {
	var o Offer
	stats, err := db.InTx(ctx, func(tx *sql.Tx) error {
		var err error
		o, err = offerTx(ctx, tx, eventID, payload, offeredBy, now, window)
		return err
	})
	o.Stats = stats
	if err != nil {
		return o, fmt.Errorf("store: offer %s from %s: %w", eventID, offeredBy, err)
	}
	return o, nil
}

func offerTx(ctx context.Context, tx *sql.Tx, eventID, payload, offeredBy string, now time.Time, window time.Duration) (Offer, error) {
	o := Offer{EventID: eventID}
	var dropped int64
	err := tx.QueryRowContext(ctx, OfferSQL,
		sql.Named("event_id", eventID), sql.Named("payload", payload), sql.Named("offered_by", offeredBy),
		sql.Named("now", clock.Format(now)), sql.Named("window_start", clock.Format(now.Add(-max(window, 0)))),
	).Scan(&o.OfferID, &dropped)
	o.Dropped = dropped != 0
	return o, err
}

// Delivery is one offer handed to a consumer. Found is false when the
// broker had nothing for it.
type Delivery struct {
	Found     bool
	OfferID   int64
	EventID   string
	Payload   string
	OfferedAt string
	// Receipt is the delivery number of this offer for this consumer (1 on
	// the first delivery); [DB.AckDelivery] must present it.
	Receipt int64
	Stats   TxStats
}

// DeliverNext hands consumer the oldest accepted offer it has not received,
// or one waiting for redelivery, and marks it in flight, in one BEGIN
// IMMEDIATE transaction ([SelectNextDeliverySQL], [MarkDeliveredSQL]), so
// two instances of one consumer never receive the same delivery.
func (db *DB) DeliverNext(ctx context.Context, consumer string, now time.Time) (Delivery, error) {
	var d Delivery
	stats, err := db.InTx(ctx, func(tx *sql.Tx) error {
		d = Delivery{}
		err := tx.QueryRowContext(ctx, SelectNextDeliverySQL, sql.Named("consumer", consumer)).
			Scan(&d.OfferID, &d.EventID, &d.Payload, &d.OfferedAt)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, MarkDeliveredSQL,
			sql.Named("offer_id", d.OfferID), sql.Named("consumer", consumer), sql.Named("now", clock.Format(now)),
		).Scan(&d.Receipt); err != nil {
			return err
		}
		d.Found = true
		return nil
	})
	d.Stats = stats
	if err != nil {
		return d, fmt.Errorf("store: deliver next to %s: %w", consumer, err)
	}
	return d, nil
}

// AckDelivery acknowledges the delivery with this receipt
// ([AckDeliverySQL]). Rows 0 is an expected value: the delivery was no
// longer in flight under that receipt.
func (db *DB) AckDelivery(ctx context.Context, consumer string, offerID, receipt int64, now time.Time) (Fenced, error) {
	f, err := db.execRows(ctx, AckDeliverySQL,
		sql.Named("now", clock.Format(now)), sql.Named("offer_id", offerID), sql.Named("consumer", consumer), sql.Named("receipt", receipt))
	if err != nil {
		return f, fmt.Errorf("store: ack offer %d by %s: %w", offerID, consumer, err)
	}
	return f, nil
}

// Redelivery is what [DB.RedeliverUnacked] did.
type Redelivery struct {
	Ready        int64 // deliveries made ready for redelivery
	DeadLettered int64 // deliveries moved to the dead-letter queue
	Stats        TxStats
}

// RedeliverUnacked, in one transaction, takes the consumer's in-flight
// deliveries whose visibility timeout has run out (delivered at or before
// now minus visibility): those already delivered maxDeliveries times go to
// the dead-letter queue ([DeadLetterSQL], [MarkDeadLetteredSQL];
// maxDeliveries 0 means no limit), the others become ready for redelivery
// ([RedeliverSQL]).
func (db *DB) RedeliverUnacked(ctx context.Context, consumer string, now time.Time, visibility time.Duration, maxDeliveries int64) (Redelivery, error) {
	var r Redelivery
	group := sql.Named("consumer", consumer)
	cutoff := sql.Named("timeout_cutoff", clock.Format(now.Add(-visibility)))
	limit := sql.Named("max_deliveries", maxDeliveries)
	stats, err := db.InTx(ctx, func(tx *sql.Tx) error {
		r = Redelivery{}
		if _, err := tx.ExecContext(ctx, DeadLetterSQL, group, sql.Named("now", clock.Format(now)), cutoff, limit); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, MarkDeadLetteredSQL, group, cutoff, limit)
		if err != nil {
			return err
		}
		if r.DeadLettered, err = res.RowsAffected(); err != nil {
			return err
		}
		res, err = tx.ExecContext(ctx, RedeliverSQL, group, cutoff)
		if err != nil {
			return err
		}
		r.Ready, err = res.RowsAffected()
		return err
	})
	r.Stats = stats
	if err != nil {
		return r, fmt.Errorf("store: redeliver to %s: %w", consumer, err)
	}
	return r, nil
}

// PurgeDeadLetters deletes dead letters at least retention old at now
// ([PurgeDeadLettersSQL]) and reports how many went.
func (db *DB) PurgeDeadLetters(ctx context.Context, now time.Time, retention time.Duration) (int64, error) {
	f, err := db.execRows(ctx, PurgeDeadLettersSQL, sql.Named("cutoff", clock.Format(now.Add(-retention))))
	if err != nil {
		return 0, fmt.Errorf("store: purge dead letters: %w", err)
	}
	return f.Rows, nil
}

// ReplayDeadLetter is an operator's redrive: in one transaction it takes
// the dead letter out of the queue ([TakeDeadLetterSQL]) and offers it to
// the broker again ([OfferSQL]), so the broker's dedup window applies to the
// replay as to any send. ok is false when the dead letter is gone (purged).
func (db *DB) ReplayDeadLetter(ctx context.Context, deadLetterID int64, by string, now time.Time, window time.Duration) (o Offer, ok bool, err error) {
	stats, err := db.InTx(ctx, func(tx *sql.Tx) error {
		o, ok = Offer{}, false
		var eventID, payload string
		err := tx.QueryRowContext(ctx, TakeDeadLetterSQL, sql.Named("dead_letter_id", deadLetterID)).Scan(&eventID, &payload)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		if o, err = offerTx(ctx, tx, eventID, payload, by, now, window); err != nil {
			return err
		}
		ok = true
		return nil
	})
	o.Stats = stats
	if err != nil {
		return o, false, fmt.Errorf("store: replay dead letter %d: %w", deadLetterID, err)
	}
	return o, ok, nil
}

// Effect is what one consumer call did to the business state.
type Effect struct {
	// Applied is true when the business effect committed in this call.
	Applied bool
	// InboxRows is what the inbox insert added: 1 the first time, 0 for a
	// duplicate (an expected value) or when the call wrote no inbox row.
	InboxRows int64
	Stats     TxStats
}

// OpenAccount creates the account with no credit, once ([OpenAccountSQL]).
func (db *DB) OpenAccount(ctx context.Context, id string) error {
	if _, err := db.execRows(ctx, OpenAccountSQL, sql.Named("id", id)); err != nil {
		return fmt.Errorf("store: open account %s: %w", id, err)
	}
	return nil
}

// ApplyCreditWithInbox is the inbox consumer: one BEGIN IMMEDIATE
// transaction inserts (consumer, eventID) into consumed_events with ON
// CONFLICT DO NOTHING ([RecordConsumedSQL]) and credits the account
// ([CreditAccountSQL]) only when the insert added a row. Both commit, or
// neither does; a duplicate is an expected outcome with Applied false.
func (db *DB) ApplyCreditWithInbox(ctx context.Context, consumer, eventID, account string, cents int64, now time.Time) (Effect, error) {
	var e Effect
	stats, err := db.InTx(ctx, func(tx *sql.Tx) error {
		e = Effect{}
		rows, err := recordConsumedTx(ctx, tx, consumer, eventID, now)
		if err != nil {
			return err
		}
		e.InboxRows = rows
		if rows == 0 {
			return nil
		}
		if err := creditTx(ctx, tx, account, cents); err != nil {
			return err
		}
		e.Applied = true
		return nil
	})
	e.Stats = stats
	if err != nil {
		return e, fmt.Errorf("store: apply %s for %s with inbox: %w", eventID, consumer, err)
	}
	return e, nil
}

// CreditAccount is the naive consumer's whole step, and the effect step of
// the effect-outside-inbox-tx mistake: an unconditional increment
// ([CreditAccountSQL]) in its own transaction.
func (db *DB) CreditAccount(ctx context.Context, account string, cents int64) (Effect, error) {
	stats, err := db.InTx(ctx, func(tx *sql.Tx) error { return creditTx(ctx, tx, account, cents) })
	if err != nil {
		return Effect{Stats: stats}, fmt.Errorf("store: credit %s: %w", account, err)
	}
	return Effect{Applied: true, Stats: stats}, nil
}

// HasConsumed reads the inbox ([HasConsumedSQL]) outside any effect
// transaction: the first step of the effect-outside-inbox-tx mistake.
func (db *DB) HasConsumed(ctx context.Context, consumer, eventID string) (bool, error) {
	var n int64
	err := db.sql.QueryRowContext(ctx, HasConsumedSQL, sql.Named("consumer", consumer), sql.Named("event_id", eventID)).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("store: read inbox of %s for %s: %w", consumer, eventID, err)
	}
	return n > 0, nil
}

// RecordConsumed runs the inbox insert ([RecordConsumedSQL]) in its own
// transaction: the last step of the effect-outside-inbox-tx mistake.
func (db *DB) RecordConsumed(ctx context.Context, consumer, eventID string, now time.Time) (Effect, error) {
	var e Effect
	stats, err := db.InTx(ctx, func(tx *sql.Tx) error {
		var err error
		e.InboxRows, err = recordConsumedTx(ctx, tx, consumer, eventID, now)
		return err
	})
	e.Stats = stats
	if err != nil {
		return e, fmt.Errorf("store: record %s consumed by %s: %w", eventID, consumer, err)
	}
	return e, nil
}

func recordConsumedTx(ctx context.Context, tx *sql.Tx, consumer, eventID string, now time.Time) (int64, error) {
	res, err := tx.ExecContext(ctx, RecordConsumedSQL, sql.Named("consumer", consumer), sql.Named("event_id", eventID), sql.Named("now", clock.Format(now)))
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func creditTx(ctx context.Context, tx *sql.Tx, account string, cents int64) error {
	res, err := tx.ExecContext(ctx, CreditAccountSQL, sql.Named("cents", cents), sql.Named("id", account))
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n != 1 {
		return fmt.Errorf("%w: %s", ErrNoAccount, account)
	}
	return nil
}

// PurgeConsumed applies the inbox retention at now ([PurgeConsumedSQL])
// and reports how many dedup records it deleted.
func (db *DB) PurgeConsumed(ctx context.Context, now time.Time, retention time.Duration) (int64, error) {
	f, err := db.execRows(ctx, PurgeConsumedSQL, sql.Named("cutoff", clock.Format(now.Add(-retention))))
	if err != nil {
		return 0, fmt.Errorf("store: purge consumed events: %w", err)
	}
	return f.Rows, nil
}

// ApplyProjection stores version of the entity's state only if it is newer
// than the stored one ([ApplyVersionedSQL]). Rows 0 is an expected value:
// an older version arrived late and was ignored.
func (db *DB) ApplyProjection(ctx context.Context, entityID string, version int64, state string, now time.Time) (Fenced, error) {
	return db.project(ctx, ApplyVersionedSQL, entityID, version, state, now)
}

// ApplyProjectionUnversioned is the mistake ([ApplyUnversionedSQL]): the
// last event to arrive wins, even an older version.
func (db *DB) ApplyProjectionUnversioned(ctx context.Context, entityID string, version int64, state string, now time.Time) (Fenced, error) {
	return db.project(ctx, ApplyUnversionedSQL, entityID, version, state, now)
}

func (db *DB) project(ctx context.Context, stmt, entityID string, version int64, state string, now time.Time) (Fenced, error) {
	f, err := db.execRows(ctx, stmt, sql.Named("entity_id", entityID), sql.Named("version", version),
		sql.Named("state", state), sql.Named("now", clock.Format(now)))
	if err != nil {
		return f, fmt.Errorf("store: project %s version %d: %w", entityID, version, err)
	}
	return f, nil
}

// BrokerOffer is a broker_offers row.
type BrokerOffer struct {
	OfferID   int64
	EventID   string
	Payload   string
	OfferedBy string
	OfferedAt string
	Dropped   bool
}

// BrokerDelivery is a broker_deliveries row.
type BrokerDelivery struct {
	OfferID       int64
	Consumer      string
	State         string // in_flight, ready, acked or dead_lettered
	DeliveryCount int64
	DeliveredAt   string
	AckedAt       string // "" until acked
}

// DeadLetter is a broker_dead_letters row.
type DeadLetter struct {
	ID             int64
	OfferID        int64
	Consumer       string
	EventID        string
	Payload        string
	DeliveryCount  int64
	DeadLetteredAt string
}

// ConsumedEvent is a consumed_events row.
type ConsumedEvent struct {
	Consumer   string
	EventID    string
	ConsumedAt string
}

// Account is an accounts row.
type Account struct {
	ID          string
	CreditCents int64
}

// Projection is a projections row.
type Projection struct {
	EntityID  string
	Version   int64
	State     string
	UpdatedAt string
}

// Listing queries, for the reports' final-state tables.
const (
	// ListOffersSQL reads every offer in arrival order.
	ListOffersSQL = `SELECT offer_id, event_id, payload, offered_by, offered_at, dropped FROM broker_offers ORDER BY offer_id`
	// ListDeliveriesSQL reads every delivery by offer and consumer.
	ListDeliveriesSQL = `SELECT offer_id, consumer, state, delivery_count, delivered_at, acked_at FROM broker_deliveries ORDER BY offer_id, consumer`
	// ListDeadLettersSQL reads the dead-letter queue in arrival order.
	ListDeadLettersSQL = `SELECT dead_letter_id, offer_id, consumer, event_id, payload, delivery_count, dead_lettered_at FROM broker_dead_letters ORDER BY dead_letter_id`
	// ListConsumedEventsSQL reads the inbox.
	ListConsumedEventsSQL = `SELECT consumer, event_id, consumed_at FROM consumed_events ORDER BY consumer, consumed_at, event_id`
	// ListAccountsSQL reads every account.
	ListAccountsSQL = `SELECT id, credit_cents FROM accounts ORDER BY id`
	// ListProjectionsSQL reads every projection.
	ListProjectionsSQL = `SELECT entity_id, version, state, updated_at FROM projections ORDER BY entity_id`
)

// Offers returns every broker offer, accepted or dropped, in arrival order.
func (db *DB) Offers(ctx context.Context) ([]BrokerOffer, error) {
	return listRows(ctx, db, "offers", ListOffersSQL, func(s rowScanner) (BrokerOffer, error) {
		var o BrokerOffer
		var dropped int64
		err := s.Scan(&o.OfferID, &o.EventID, &o.Payload, &o.OfferedBy, &o.OfferedAt, &dropped)
		o.Dropped = dropped != 0
		return o, err
	})
}

// Deliveries returns every delivery state row.
func (db *DB) Deliveries(ctx context.Context) ([]BrokerDelivery, error) {
	return listRows(ctx, db, "deliveries", ListDeliveriesSQL, func(s rowScanner) (BrokerDelivery, error) {
		var d BrokerDelivery
		var acked sql.NullString
		err := s.Scan(&d.OfferID, &d.Consumer, &d.State, &d.DeliveryCount, &d.DeliveredAt, &acked)
		d.AckedAt = acked.String
		return d, err
	})
}

// DeadLetters returns the dead-letter queue.
func (db *DB) DeadLetters(ctx context.Context) ([]DeadLetter, error) {
	return listRows(ctx, db, "dead letters", ListDeadLettersSQL, func(s rowScanner) (DeadLetter, error) {
		var d DeadLetter
		err := s.Scan(&d.ID, &d.OfferID, &d.Consumer, &d.EventID, &d.Payload, &d.DeliveryCount, &d.DeadLetteredAt)
		return d, err
	})
}

// ConsumedEvents returns the inbox rows.
func (db *DB) ConsumedEvents(ctx context.Context) ([]ConsumedEvent, error) {
	return listRows(ctx, db, "consumed events", ListConsumedEventsSQL, func(s rowScanner) (ConsumedEvent, error) {
		var c ConsumedEvent
		err := s.Scan(&c.Consumer, &c.EventID, &c.ConsumedAt)
		return c, err
	})
}

// Accounts returns every account.
func (db *DB) Accounts(ctx context.Context) ([]Account, error) {
	return listRows(ctx, db, "accounts", ListAccountsSQL, func(s rowScanner) (Account, error) {
		var a Account
		err := s.Scan(&a.ID, &a.CreditCents)
		return a, err
	})
}

// Projections returns every projection row.
func (db *DB) Projections(ctx context.Context) ([]Projection, error) {
	return listRows(ctx, db, "projections", ListProjectionsSQL, func(s rowScanner) (Projection, error) {
		var p Projection
		err := s.Scan(&p.EntityID, &p.Version, &p.State, &p.UpdatedAt)
		return p, err
	})
}

type rowScanner interface{ Scan(...any) error }

func listRows[T any](ctx context.Context, db *DB, what, query string, scan func(rowScanner) (T, error)) ([]T, error) {
	rows, err := db.sql.QueryContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("store: list %s: %w", what, err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("store: list %s: %w", what, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list %s: %w", what, err)
	}
	return out, nil
}
