package proc

import (
	"encoding/json"
	"time"

	"github.com/outboxlab/outboxlab/failpoint"
	"github.com/outboxlab/outboxlab/store"
)

// job is the one line the parent writes first: who the child is, which
// database it opens and its work, which the role decodes.
type job struct {
	Role   string          `json:"role"`
	Target Target          `json:"target"`
	Work   json.RawMessage `json:"work"`
}

// reply is a line the parent writes to a child waiting at a failpoint,
// or to an idle child (see [Worker.Answer]): go on, or perform Call.
type reply struct {
	Go bool `json:"go,omitempty"` // carry on past the point; an idle child returns
	// Now, with Go at a failpoint, is the lab's clock as the child goes
	// on: the hold there may have moved it (see [Child.GoOn]).
	Now  *time.Time `json:"now,omitempty"`
	Call *call      `json:"call,omitempty"` // an idle child's next operation
}

// call is one operation the parent asks an idle child to perform.
type call struct {
	Op   string          `json:"op"`
	Args json.RawMessage `json:"args,omitempty"`
}

// Report is one line a child writes. Exactly one of At, Idle, Done and
// Error says what it is.
type Report struct {
	// At is the failpoint the child has reached; it now waits on stdin for
	// the parent's word, or its death.
	At failpoint.Point `json:"at,omitempty"`
	// Idle says the child waits for the parent's next call (or its word
	// to finish); State is the last call's result, CallError its error.
	Idle      bool   `json:"idle,omitempty"`
	CallError string `json:"call_error,omitempty"`
	// Done says the role finished; State is its result.
	Done bool `json:"done,omitempty"`
	// Error is why the role failed; the child then exits with status 1.
	Error string `json:"error,omitempty"`
	// State is what the child has done so far (with At), its last call's
	// result (with Idle) or its result (with Done), in the role's own shape.
	State json.RawMessage `json:"state,omitempty"`
	// Ledger is every statement the child has executed so far.
	Ledger *Ledger `json:"ledger,omitempty"`
}

// Decode decodes the report's State into v.
func (r Report) Decode(v any) error {
	if len(r.State) == 0 {
		return nil
	}
	return json.Unmarshal(r.State, v)
}

// Ledger is a child's statement ledger as it crosses the pipe: what
// [store.Ledger.Entries] and [store.Ledger.Transactions] returned in the
// child, for [store.Ledger.Merge] in the parent.
type Ledger struct {
	Entries      []store.LedgerEntry `json:"entries"`
	Transactions []store.LedgerTx    `json:"transactions"`
}

// snapshot is l as it stands now.
func snapshot(l *store.Ledger) *Ledger {
	return &Ledger{Entries: l.Entries(), Transactions: l.Transactions()}
}
