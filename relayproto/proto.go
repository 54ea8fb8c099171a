// Package relayproto is the protocol a user's relay speaks with the lab:
// one JSON line per request on the program's stdout, one JSON line per
// reply on its stdin. The lab answers every request from its own world (the
// database, the broker, the payment provider, its clock), so a program keeps
// nothing outside its memory and the lab sees, records and can fault every
// step. The page docs/relay-protocol.md is the protocol's reference; this
// package holds its types once, and [Client] is a small Go client of it.
package relayproto

import (
	"encoding/json"
	"fmt"
)

// Version is the protocol's version, which hello's reply carries.
const Version = 1

// MaxLine is the most bytes one request line may hold, its newline
// included: a longer line is the program's fault and ends its run.
const MaxLine = 1 << 20

// The operations a request names.
const (
	OpHello    = "hello"    // the first request: who am I, which challenge, which settings
	OpBegin    = "begin"    // open a transaction on the instance's own connection
	OpQuery    = "query"    // a statement that returns rows (SELECT, UPDATE ... RETURNING)
	OpExec     = "exec"     // a statement that changes rows and returns none
	OpCommit   = "commit"   // commit the open transaction
	OpRollback = "rollback" // roll it back
	OpProvider = "provider" // ask the payment provider for a payment's status
	OpSend     = "send"     // publish an event to the broker
	OpReceive  = "receive"  // take the next delivery the broker has for this consumer
	OpAck      = "ack"      // acknowledge a delivery
	OpWait     = "wait"     // let the lab clock move on by ms before the next request
	OpWork     = "work"     // do ms of an event's work, on the lab clock
	OpLog      = "log"      // a line for the run's timeline
)

// Ops lists every operation, in the protocol page's order.
var Ops = []string{OpHello, OpBegin, OpQuery, OpExec, OpCommit, OpRollback, OpProvider, OpSend, OpReceive, OpAck, OpWork, OpWait, OpLog}

// Request is one line a program writes. Op says what it asks; the other
// fields are the operation's arguments, absent where it takes none.
type Request struct {
	Op string `json:"op"`
	// SQL and Params: query and exec. Params are named (:name in the
	// text, without the colon here); values are strings, numbers,
	// booleans or null.
	SQL    string         `json:"sql,omitempty"`
	Params map[string]any `json:"params,omitempty"`
	// Key: provider, the payment's idempotency key; work, the event's id.
	Key string `json:"key,omitempty"`
	// EventID and Payload: send.
	EventID string `json:"event_id,omitempty"`
	Payload string `json:"payload,omitempty"`
	// Offer: ack, the delivery's offer as receive named it.
	Offer int64 `json:"offer,omitempty"`
	// Ms: wait and work, how long on the lab clock.
	Ms int64 `json:"ms,omitempty"`
	// Text: log.
	Text string `json:"text,omitempty"`
}

// Reply is one line the lab writes back, in request order. Every reply
// carries Now, the lab clock's time for this instance (skewed where the
// challenge says): the program must use it and never its own clock.
type Reply struct {
	OK  bool   `json:"ok"`
	Now string `json:"now"`
	// Tick is the same instant as Now in milliseconds since the lab's
	// epoch, 2026-01-15T09:00:00.000Z: the integer time of the tables
	// that store one (outbox_events' lease_until).
	Tick int64 `json:"tick"`
	// Error, when OK is false, says what went wrong.
	Error *Error `json:"error,omitempty"`

	// hello
	Instance  string         `json:"instance,omitempty"`
	Challenge string         `json:"challenge,omitempty"`
	Version   int            `json:"version,omitempty"`
	Settings  map[string]any `json:"settings,omitempty"`
	// Engine is the database the statements run on: "sqlite" or
	// "postgres" (each has its SQL dialect; see the protocol page).
	Engine string `json:"engine,omitempty"`
	// query: the columns and rows the statement returned (rows as
	// arrays, in column order).
	Columns []string `json:"columns,omitempty"`
	Rows    [][]any  `json:"rows,omitempty"`
	// exec: the rows the statement changed. Always present on exec's
	// reply, so 0 is seen, not guessed.
	RowsAffected *int64 `json:"rows_affected,omitempty"`
	// provider
	Status        string `json:"status,omitempty"` // "Paid" or "Failed"
	TransactionID string `json:"transaction_id,omitempty"`
	// send: the broker's number for the stored offer.
	OfferID int64 `json:"offer_id,omitempty"`
	// receive: the delivery, nil when the broker has none now.
	Delivery *Delivery `json:"delivery,omitempty"`
	// ack: whether the broker took the ack (false for a delivery it had
	// already given up on, or one acked before).
	Took *bool `json:"took,omitempty"`
	// wait: the lab is shutting the run down (it has sent SIGTERM): finish
	// what is in hand and exit.
	Shutdown bool `json:"shutdown,omitempty"`

	// Query marks a query's reply, whose columns and rows are written even
	// when empty (a program reads "rows": [] as no row, not as a missing
	// field); Receive a receive's, whose delivery is written even when
	// there is none ("delivery": null).
	Query   bool `json:"-"`
	Receive bool `json:"-"`
}

// MarshalJSON writes r; a query's reply always has columns and rows.
func (r Reply) MarshalJSON() ([]byte, error) {
	type plain Reply
	if r.Receive {
		return json.Marshal(struct {
			plain
			Delivery *Delivery `json:"delivery"`
		}{plain(r), r.Delivery})
	}
	if !r.Query {
		return json.Marshal(plain(r))
	}
	columns, rows := r.Columns, r.Rows
	if columns == nil {
		columns = []string{}
	}
	if rows == nil {
		rows = [][]any{}
	}
	return json.Marshal(struct {
		plain
		Columns []string `json:"columns"`
		Rows    [][]any  `json:"rows"`
	}{plain(r), columns, rows})
}

// Delivery is what receive hands a consumer.
type Delivery struct {
	Offer   int64  `json:"offer"`
	EventID string `json:"event_id"`
	Payload string `json:"payload"`
	// Attempt counts the deliveries of this offer to this consumer, 1
	// for the first.
	Attempt int `json:"attempt"`
}

// Error is a failed request's reason. Kind is one of the kinds below, for
// a program to act on; Message is for people.
type Error struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Kind + ": " + e.Message }

// The kinds of [Error].
const (
	// ErrDatabase: the database refused or failed the statement (a
	// constraint, a syntax error, an injected fault). The transaction
	// stays open; roll it back.
	ErrDatabase = "database"
	// ErrBusy: the database was locked by another instance for longer
	// than the lab waits; the transaction stays open, roll it back and
	// try again later.
	ErrBusy = "busy"
	// ErrSandbox: the statement touches what the challenge does not
	// allow (another table, PRAGMA, ATTACH, a schema change). The
	// transaction stays open.
	ErrSandbox = "sandbox"
	// ErrUnknownOutcome: the reply to a commit or a send was lost: the
	// lab did it, or not, and does not say. The transaction is over.
	ErrUnknownOutcome = "unknown_outcome"
	// ErrBrokerUnavailable: the broker did not take the send.
	ErrBrokerUnavailable = "broker_unavailable"
	// ErrProtocol: the request was not one the lab understands, or not
	// now (a statement outside a transaction, a second begin).
	ErrProtocol = "protocol"
)

// Decode parses one request line.
func Decode(line []byte) (Request, error) {
	var r Request
	if err := json.Unmarshal(line, &r); err != nil {
		return Request{}, fmt.Errorf("relayproto: a request must be one JSON object per line: %w", err)
	}
	if r.Op == "" {
		return Request{}, fmt.Errorf("relayproto: a request must name its op")
	}
	return r, nil
}
