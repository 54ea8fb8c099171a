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

// ErrNoAccount means a credit named an account that was never opened.
var ErrNoAccount = errors.New("store: no such account")

// LabBroker is the lab's own broker, a [Broker] made of a few tables on
// the scenario clock (broker_offers, broker_deliveries and
// broker_dead_letters): one connection and the statements it runs.
type LabBroker struct {
	db  *DB
	sql BrokerSQL
}

// NewBroker returns the broker service on db running the statements s.
func NewBroker(db *DB, s BrokerSQL) *LabBroker { return &LabBroker{db: db, sql: s} }

// Offer is the broker's answer to a send.
type Offer struct {
	OfferID int64
	EventID string
	// Dropped is true when the dedup window refused the send. The broker
	// still answers the sender with success, as real brokers do.
	Dropped bool
	Stats   TxStats
}

// Offer stores a send of eventID from offeredBy at now ([BrokerSQL.Offer]).
// With a window > 0 a send whose event id was accepted less than window ago
// is recorded as dropped and never delivered.
func (b *LabBroker) Offer(ctx context.Context, eventID, payload, offeredBy string, now time.Time, window time.Duration) (Offer, error) {
	var o Offer
	stats, err := b.db.InTx(ctx, func(tx *sql.Tx) error {
		var err error
		o, err = b.offer(ctx, tx, eventID, payload, offeredBy, now, window)
		return err
	})
	o.Stats = stats
	if err != nil {
		return o, fmt.Errorf("store: offer %s from %s: %w", eventID, offeredBy, err)
	}
	return o, nil
}

func (b *LabBroker) offer(ctx context.Context, tx *sql.Tx, eventID, payload, offeredBy string, now time.Time, window time.Duration) (Offer, error) {
	o := Offer{EventID: eventID}
	var dropped int64
	err := tx.QueryRowContext(ctx, b.sql.Offer.SQL,
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
	// the first delivery); [Broker.Ack] must present it.
	Receipt int64
	Stats   TxStats
}

// DeliverNext hands consumer the oldest accepted offer it has not received,
// or one waiting for redelivery, and marks it in flight, in one BEGIN
// IMMEDIATE transaction ([BrokerSQL.SelectNext], [BrokerSQL.MarkDelivered]),
// so two instances of one consumer never receive the same delivery.
func (b *LabBroker) DeliverNext(ctx context.Context, consumer string, now time.Time) (Delivery, error) {
	var d Delivery
	stats, err := b.db.InTx(ctx, func(tx *sql.Tx) error {
		d = Delivery{}
		return b.deliverNext(ctx, tx, consumer, now, &d)
	})
	d.Stats = stats
	if err != nil {
		return d, fmt.Errorf("store: deliver next to %s: %w", consumer, err)
	}
	return d, nil
}

func (b *LabBroker) deliverNext(ctx context.Context, tx *sql.Tx, consumer string, now time.Time, d *Delivery) error {
	err := tx.QueryRowContext(ctx, b.sql.SelectNext.SQL, sql.Named("consumer", consumer)).
		Scan(&d.OfferID, &d.EventID, &d.Payload, &d.OfferedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	err = tx.QueryRowContext(ctx, b.sql.MarkDelivered.SQL,
		sql.Named("offer_id", d.OfferID), sql.Named("consumer", consumer), sql.Named("now", clock.Format(now)),
	).Scan(&d.Receipt)
	if errors.Is(err, sql.ErrNoRows) {
		// Only on PostgreSQL, where the select takes no lock: another
		// instance of this consumer marked the offer in flight after our
		// select read it. Like SQLITE_BUSY, run the transaction again.
		return errRaceLost
	}
	if err != nil {
		return err
	}
	d.Found = true
	return nil
}

// Ack acknowledges the delivery with this receipt ([BrokerSQL.Ack]). Rows
// 0 is an expected value: the delivery was no longer in flight under that
// receipt.
func (b *LabBroker) Ack(ctx context.Context, consumer string, offerID, receipt int64, now time.Time) (Fenced, error) {
	f, err := b.db.execRows(ctx, b.sql.Ack.SQL,
		sql.Named("now", clock.Format(now)), sql.Named("offer_id", offerID), sql.Named("consumer", consumer), sql.Named("receipt", receipt))
	if err != nil {
		return f, fmt.Errorf("store: ack offer %d by %s: %w", offerID, consumer, err)
	}
	return f, nil
}

// DeliveryOf reads consumer's delivery of offerID back
// ([BrokerSQL.Delivery]): its state and receipt (delivery_count), to say
// why an ack changed 0 rows. ok is false when there is none.
func (b *LabBroker) DeliveryOf(ctx context.Context, consumer string, offerID int64) (d BrokerDelivery, ok bool, err error) {
	d = BrokerDelivery{OfferID: offerID, Consumer: consumer}
	err = b.db.sql.QueryRowContext(ctx, b.sql.Delivery.SQL, sql.Named("offer_id", offerID), sql.Named("consumer", consumer)).
		Scan(&d.State, &d.DeliveryCount)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return d, false, nil
	case err != nil:
		return d, false, fmt.Errorf("store: read the delivery of offer %d to %s: %w", offerID, consumer, err)
	}
	return d, true, nil
}

// Redelivery is what [Broker.RedeliverUnacked] did.
type Redelivery struct {
	Ready        int64 // deliveries made ready for redelivery
	DeadLettered int64 // deliveries moved to the dead-letter queue
	Stats        TxStats
}

// RedeliverUnacked, in one transaction, takes the consumer's in-flight
// deliveries whose visibility timeout has run out (delivered at or before
// now minus visibility): those already delivered maxDeliveries times go to
// the dead-letter queue ([BrokerSQL.DeadLetter],
// [BrokerSQL.MarkDeadLettered]; maxDeliveries 0 means no limit), the others
// become ready for redelivery ([BrokerSQL.Redeliver]).
func (b *LabBroker) RedeliverUnacked(ctx context.Context, consumer string, now time.Time, visibility time.Duration, maxDeliveries int64) (Redelivery, error) {
	var r Redelivery
	stats, err := b.db.InTx(ctx, func(tx *sql.Tx) error {
		r = Redelivery{}
		return b.redeliver(ctx, tx, consumer, now, visibility, maxDeliveries, &r)
	})
	r.Stats = stats
	if err != nil {
		return r, fmt.Errorf("store: redeliver to %s: %w", consumer, err)
	}
	return r, nil
}

func (b *LabBroker) redeliver(ctx context.Context, tx *sql.Tx, consumer string, now time.Time, visibility time.Duration, maxDeliveries int64, r *Redelivery) error {
	group := sql.Named("consumer", consumer)
	cutoff := sql.Named("timeout_cutoff", clock.Format(now.Add(-visibility)))
	limit := sql.Named("max_deliveries", maxDeliveries)
	if _, err := tx.ExecContext(ctx, b.sql.DeadLetter.SQL, group, sql.Named("now", clock.Format(now)), cutoff, limit); err != nil {
		return err
	}
	res, err := tx.ExecContext(ctx, b.sql.MarkDeadLettered.SQL, group, cutoff, limit)
	if err != nil {
		return err
	}
	if r.DeadLettered, err = res.RowsAffected(); err != nil {
		return err
	}
	res, err = tx.ExecContext(ctx, b.sql.Redeliver.SQL, group, cutoff)
	if err != nil {
		return err
	}
	r.Ready, err = res.RowsAffected()
	return err
}

// PurgeDeadLetters deletes dead letters at least retention old at now
// ([BrokerSQL.PurgeDeadLetters]) and reports how many went.
func (b *LabBroker) PurgeDeadLetters(ctx context.Context, now time.Time, retention time.Duration) (int64, error) {
	f, err := b.db.execRows(ctx, b.sql.PurgeDeadLetters.SQL, sql.Named("cutoff", clock.Format(now.Add(-retention))))
	if err != nil {
		return 0, fmt.Errorf("store: purge dead letters: %w", err)
	}
	return f.Rows, nil
}

// ReplayDeadLetter is an operator's redrive: in one transaction it takes
// the dead letter out of the queue ([BrokerSQL.TakeDeadLetter]) and offers
// it to the broker again ([BrokerSQL.Offer]), so the broker's dedup window
// applies to the replay as to any send. ok is false when the dead letter is
// gone (purged).
func (b *LabBroker) ReplayDeadLetter(ctx context.Context, deadLetterID int64, by string, now time.Time, window time.Duration) (o Offer, ok bool, err error) {
	stats, err := b.db.InTx(ctx, func(tx *sql.Tx) error {
		o, ok = Offer{}, false
		var eventID, payload string
		err := tx.QueryRowContext(ctx, b.sql.TakeDeadLetter.SQL, sql.Named("dead_letter_id", deadLetterID)).Scan(&eventID, &payload)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		if o, err = b.offer(ctx, tx, eventID, payload, by, now, window); err != nil {
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

// Consumer is the consumers' service on their own tables: the inbox
// (consumed_events), accounts and projections, on one connection and with
// the statements it runs.
type Consumer struct {
	db  *DB
	sql ConsumerSQL
}

// NewConsumer returns the consumer service on db running the statements s.
func NewConsumer(db *DB, s ConsumerSQL) *Consumer { return &Consumer{db: db, sql: s} }

// Effect is what one consumer call did to the business state.
type Effect struct {
	// Applied is true when the business effect committed in this call.
	Applied bool
	// InboxRows is what the inbox insert added: 1 the first time, 0 for a
	// duplicate (an expected value) or when the call wrote no inbox row.
	InboxRows int64
	Stats     TxStats
}

// OpenAccount creates the account with no credit, once
// ([ConsumerSQL.OpenAccount]).
func (c *Consumer) OpenAccount(ctx context.Context, id string) error {
	if _, err := c.db.execRows(ctx, c.sql.OpenAccount.SQL, sql.Named("id", id)); err != nil {
		return fmt.Errorf("store: open account %s: %w", id, err)
	}
	return nil
}

// CreditWithInbox is the inbox consumer: one BEGIN IMMEDIATE transaction
// inserts (consumer, eventID) into consumed_events with ON CONFLICT DO
// NOTHING ([ConsumerSQL.Record]) and credits the account
// ([ConsumerSQL.Credit]) only when the insert added a row. Both commit, or
// neither does; a duplicate is an expected outcome with Applied false.
func (c *Consumer) CreditWithInbox(ctx context.Context, consumer, eventID, account string, cents int64, now time.Time) (Effect, error) {
	var e Effect
	stats, err := c.db.InTx(ctx, func(tx *sql.Tx) error {
		e = Effect{}
		rows, err := c.record(ctx, tx, consumer, eventID, now)
		if err != nil {
			return err
		}
		e.InboxRows = rows
		if rows == 0 {
			return nil
		}
		if err := c.credit(ctx, tx, account, cents); err != nil {
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

// Credit is the effect step of the effect-outside-inbox-tx mistake: an
// unconditional increment ([ConsumerSQL.Credit]) in its own transaction.
func (c *Consumer) Credit(ctx context.Context, account string, cents int64) (Effect, error) {
	stats, err := c.db.InTx(ctx, func(tx *sql.Tx) error { return c.credit(ctx, tx, account, cents) })
	if err != nil {
		return Effect{Stats: stats}, fmt.Errorf("store: credit %s: %w", account, err)
	}
	return Effect{Applied: true, Stats: stats}, nil
}

// Check reads the inbox ([ConsumerSQL.Check]) outside any effect
// transaction: the first step of the effect-outside-inbox-tx mistake.
func (c *Consumer) Check(ctx context.Context, consumer, eventID string) (bool, error) {
	var n int64
	err := c.db.sql.QueryRowContext(ctx, c.sql.Check.SQL, sql.Named("consumer", consumer), sql.Named("event_id", eventID)).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("store: read inbox of %s for %s: %w", consumer, eventID, err)
	}
	return n > 0, nil
}

// Record runs the inbox insert ([ConsumerSQL.Record]) in its own
// transaction: the last step of the effect-outside-inbox-tx mistake.
func (c *Consumer) Record(ctx context.Context, consumer, eventID string, now time.Time) (Effect, error) {
	var e Effect
	stats, err := c.db.InTx(ctx, func(tx *sql.Tx) error {
		var err error
		e.InboxRows, err = c.record(ctx, tx, consumer, eventID, now)
		return err
	})
	e.Stats = stats
	if err != nil {
		return e, fmt.Errorf("store: record %s consumed by %s: %w", eventID, consumer, err)
	}
	return e, nil
}

func (c *Consumer) record(ctx context.Context, tx *sql.Tx, consumer, eventID string, now time.Time) (int64, error) {
	if c.sql.Record.Omitted() {
		// The mistake keeps no inbox: every delivery looks new.
		c.db.ledger.omit(c.sql.Record)
		return 1, nil
	}
	res, err := tx.ExecContext(ctx, c.sql.Record.SQL, sql.Named("consumer", consumer), sql.Named("event_id", eventID), sql.Named("now", clock.Format(now)))
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (c *Consumer) credit(ctx context.Context, tx *sql.Tx, account string, cents int64) error {
	res, err := tx.ExecContext(ctx, c.sql.Credit.SQL, sql.Named("cents", cents), sql.Named("id", account))
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

// Purge applies the inbox retention at now ([ConsumerSQL.Purge]) and
// reports how many dedup records it deleted.
func (c *Consumer) Purge(ctx context.Context, now time.Time, retention time.Duration) (int64, error) {
	f, err := c.db.execRows(ctx, c.sql.Purge.SQL, sql.Named("cutoff", clock.Format(now.Add(-retention))))
	if err != nil {
		return 0, fmt.Errorf("store: purge consumed events: %w", err)
	}
	return f.Rows, nil
}

// Project stores version of the entity's state ([ConsumerSQL.Project]);
// the lesson's statement only if it is newer than the stored one. Rows 0 is
// an expected value: an older version arrived late and was ignored.
func (c *Consumer) Project(ctx context.Context, entityID string, version int64, state string, now time.Time) (Fenced, error) {
	f, err := c.db.execRows(ctx, c.sql.Project.SQL, sql.Named("entity_id", entityID), sql.Named("version", version),
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

// Offers returns every broker offer, accepted or dropped, in arrival order.
func (b *LabBroker) Offers(ctx context.Context) ([]BrokerOffer, error) {
	return listRows(ctx, b.db, "offers", ListOffers.SQL, func(s rowScanner) (BrokerOffer, error) {
		var o BrokerOffer
		var dropped int64
		err := s.Scan(&o.OfferID, &o.EventID, &o.Payload, &o.OfferedBy, &o.OfferedAt, &dropped)
		o.Dropped = dropped != 0
		return o, err
	})
}

// Deliveries returns every delivery state row.
func (b *LabBroker) Deliveries(ctx context.Context) ([]BrokerDelivery, error) {
	return listRows(ctx, b.db, "deliveries", ListDeliveries.SQL, func(s rowScanner) (BrokerDelivery, error) {
		var d BrokerDelivery
		var acked sql.NullString
		err := s.Scan(&d.OfferID, &d.Consumer, &d.State, &d.DeliveryCount, &d.DeliveredAt, &acked)
		d.AckedAt = acked.String
		return d, err
	})
}

// DeadLetters returns the dead-letter queue.
func (b *LabBroker) DeadLetters(ctx context.Context) ([]DeadLetter, error) {
	return listRows(ctx, b.db, "dead letters", ListDeadLetters.SQL, func(s rowScanner) (DeadLetter, error) {
		var d DeadLetter
		err := s.Scan(&d.ID, &d.OfferID, &d.Consumer, &d.EventID, &d.Payload, &d.DeliveryCount, &d.DeadLetteredAt)
		return d, err
	})
}

// ConsumedEvents returns the inbox rows.
func (c *Consumer) ConsumedEvents(ctx context.Context) ([]ConsumedEvent, error) {
	return listRows(ctx, c.db, "consumed events", ListConsumedEvents.SQL, func(s rowScanner) (ConsumedEvent, error) {
		var c ConsumedEvent
		err := s.Scan(&c.Consumer, &c.EventID, &c.ConsumedAt)
		return c, err
	})
}

// Accounts returns every account.
func (c *Consumer) Accounts(ctx context.Context) ([]Account, error) {
	return listRows(ctx, c.db, "accounts", ListAccounts.SQL, func(s rowScanner) (Account, error) {
		var a Account
		err := s.Scan(&a.ID, &a.CreditCents)
		return a, err
	})
}

// Projections returns every projection row.
func (c *Consumer) Projections(ctx context.Context) ([]Projection, error) {
	return listRows(ctx, c.db, "projections", ListProjections.SQL, func(s rowScanner) (Projection, error) {
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

// CountOffers counts the offers of eventID the broker accepted, or with
// dropped those its deduplication window dropped, from its own record.
func (b *LabBroker) CountOffers(ctx context.Context, eventID string, dropped bool) (int64, error) {
	flag := 0
	if dropped {
		flag = 1
	}
	n, err := b.db.Count(ctx, CountOffers.SQL, eventID, flag)
	return int64(n), err
}
