package relayproto

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// TimeLayout is how the lab writes a time: UTC, milliseconds, a Z.
const TimeLayout = "2006-01-02T15:04:05.000Z"

// Client is a Go program's end of the protocol: each method writes one
// request and reads its reply. It is safe for one goroutine at a time;
// the lab answers in request order.
type Client struct {
	mu  sync.Mutex
	in  *bufio.Reader
	out io.Writer
	// Hello is hello's reply: the instance's name, the challenge, its
	// settings.
	Hello Reply
	now   string
	tick  int64
}

// Dial says hello to the lab over the process's stdin and stdout.
func Dial() (*Client, error) { return DialWith(os.Stdin, os.Stdout) }

// DialWith says hello over in (the lab's replies) and out (the requests).
func DialWith(in io.Reader, out io.Writer) (*Client, error) {
	c := &Client{in: bufio.NewReaderSize(in, 64<<10), out: out}
	r, err := c.Do(Request{Op: OpHello})
	if err != nil {
		return nil, err
	}
	c.Hello = r
	return c, nil
}

// Do sends r and returns its reply; a reply that is not OK is returned
// with its *Error.
func (c *Client) Do(r Request) (Reply, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, err := json.Marshal(r)
	if err != nil {
		return Reply{}, err
	}
	if _, err := c.out.Write(append(b, '\n')); err != nil {
		return Reply{}, fmt.Errorf("relayproto: write %s: %w", r.Op, err)
	}
	line, err := c.in.ReadBytes('\n')
	if err != nil {
		return Reply{}, fmt.Errorf("relayproto: read the reply to %s: %w", r.Op, err)
	}
	var rep Reply
	if err := json.Unmarshal(line, &rep); err != nil {
		return Reply{}, fmt.Errorf("relayproto: the reply to %s: %w", r.Op, err)
	}
	c.now, c.tick = rep.Now, rep.Tick
	if !rep.OK {
		if rep.Error == nil {
			rep.Error = &Error{Kind: ErrProtocol, Message: "a reply without ok and without an error"}
		}
		return rep, rep.Error
	}
	return rep, nil
}

// Tick is the lab clock as the last reply gave it, in milliseconds since
// the lab's epoch (the integer time of outbox_events).
func (c *Client) Tick() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tick
}

// Now is the lab clock's time as the last reply gave it.
func (c *Client) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, _ := time.Parse(TimeLayout, c.now)
	return t
}

// Format writes t as the lab writes times (and as the challenges'
// tables store them).
func Format(t time.Time) string { return t.UTC().Format(TimeLayout) }

// Setting is a number hello's reply set, or def.
func (c *Client) Setting(name string, def int64) int64 {
	if v, ok := c.Hello.Settings[name].(float64); ok {
		return int64(v)
	}
	return def
}

// Begin opens a transaction.
func (c *Client) Begin() error { _, err := c.Do(Request{Op: OpBegin}); return err }

// Commit commits it.
func (c *Client) Commit() error { _, err := c.Do(Request{Op: OpCommit}); return err }

// Rollback rolls it back.
func (c *Client) Rollback() error { _, err := c.Do(Request{Op: OpRollback}); return err }

// Query runs a statement that returns rows.
func (c *Client) Query(sql string, params map[string]any) (columns []string, rows [][]any, err error) {
	r, err := c.Do(Request{Op: OpQuery, SQL: sql, Params: params})
	return r.Columns, r.Rows, err
}

// Exec runs a statement that changes rows and returns how many it changed.
func (c *Client) Exec(sql string, params map[string]any) (int64, error) {
	r, err := c.Do(Request{Op: OpExec, SQL: sql, Params: params})
	if err != nil {
		return 0, err
	}
	if r.RowsAffected == nil {
		return 0, errors.New("relayproto: exec's reply has no rows_affected")
	}
	return *r.RowsAffected, nil
}

// Provider asks the payment provider for key's status.
func (c *Client) Provider(key string) (status, transactionID string, err error) {
	r, err := c.Do(Request{Op: OpProvider, Key: key})
	return r.Status, r.TransactionID, err
}

// Send publishes an event to the broker and returns its offer.
func (c *Client) Send(eventID, payload string) (int64, error) {
	r, err := c.Do(Request{Op: OpSend, EventID: eventID, Payload: payload})
	return r.OfferID, err
}

// Receive takes the next delivery, nil when there is none now.
func (c *Client) Receive() (*Delivery, error) {
	r, err := c.Do(Request{Op: OpReceive})
	return r.Delivery, err
}

// Ack acknowledges offer's delivery and says whether the broker took it.
func (c *Client) Ack(offer int64) (bool, error) {
	r, err := c.Do(Request{Op: OpAck, Offer: offer})
	return r.Took != nil && *r.Took, err
}

// Wait lets the lab clock move on by d and says whether the lab is
// shutting the run down.
func (c *Client) Wait(d time.Duration) (shutdown bool, err error) {
	r, err := c.Do(Request{Op: OpWait, Ms: d.Milliseconds()})
	return r.Shutdown, err
}

// Work does d of key's work on the lab clock and says whether the lab is
// shutting the run down.
func (c *Client) Work(key string, d time.Duration) (shutdown bool, err error) {
	r, err := c.Do(Request{Op: OpWork, Key: key, Ms: d.Milliseconds()})
	return r.Shutdown, err
}

// Log writes a line to the run's timeline.
func (c *Client) Log(text string) error { _, err := c.Do(Request{Op: OpLog, Text: text}); return err }

// Kind is err's kind when it is the lab's *Error, "" otherwise.
func Kind(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return ""
}
