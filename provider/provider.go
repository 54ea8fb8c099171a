// Package provider is the lab's fake payment provider: deterministic answers
// and its own ledgers of creation and status-check calls, per key and caller.
package provider

import (
	"fmt"
	"sort"
	"sync"
	"time"
)

// FailingKeys are the idempotency keys whose status check answers Failed;
// every other key created answers Paid. Fixed so every run and every
// student sees the same outcome: PAY-003 and PAY-005 fail.
var FailingKeys = map[string]bool{"PAY-003": true, "PAY-005": true}

// Status is the provider's answer to a status check.
type Status struct {
	Key           string
	Paid          bool
	TransactionID string // provider-generated; set only when Paid
}

// Call is one entry of a provider ledger.
type Call struct {
	Seq    int    // order across both ledgers, from 1
	Caller string // who called: checkout, Worker-A, ...
	Key    string
	Answer string // what the provider answered
}

// Provider is a deterministic fake payment provider. It stands for an
// external service, so its ledgers are the provider's own records: workers
// never read them to coordinate. Safe for concurrent use.
type Provider struct {
	// Latency is how long each status check takes in real time, outside
	// the provider's lock, as a network call would. It lets two workers
	// interleave; it plays no part in any lease decision.
	Latency time.Duration

	mu       sync.Mutex
	seq      int
	created  map[string]string // key -> transaction id assigned at creation
	creation []Call
	checks   []Call
}

// New returns a provider with empty ledgers.
func New() *Provider { return &Provider{created: map[string]string{}} }

// Create is the provider's "create payment": it registers the key and
// reserves the transaction id that a later Paid answer carries (a Failed
// answer never shows it). Calling it twice for one key is recorded, and is
// exactly the mistake its ledger exposes.
func (p *Provider) Create(caller, key string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seq++
	txn, ok := p.created[key]
	if !ok {
		txn = fmt.Sprintf("TXN-%04d", len(p.created)+1)
		p.created[key] = txn
	}
	answer := "registered"
	if ok {
		answer = "registered again"
	}
	p.creation = append(p.creation, Call{Seq: p.seq, Caller: caller, Key: key, Answer: answer})
	return txn
}

// CheckStatus answers Paid (with the transaction id) or Failed for a key.
// A key that was never created answers Failed.
func (p *Provider) CheckStatus(caller, key string) Status {
	if p.Latency > 0 {
		time.Sleep(p.Latency)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seq++
	txn, created := p.created[key]
	st := Status{Key: key, Paid: created && !FailingKeys[key]}
	answer := "Failed"
	if st.Paid {
		st.TransactionID = txn
		answer = "Paid " + txn
	}
	p.checks = append(p.checks, Call{Seq: p.seq, Caller: caller, Key: key, Answer: answer})
	return st
}

// AssignedID is the transaction id the provider assigned to key at its
// creation, and false for a key it never created. A Paid payment must carry
// exactly this id; any other is a fake success.
func (p *Provider) AssignedID(key string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	txn, ok := p.created[key]
	return txn, ok
}

// CreationCalls returns the creation ledger in call order.
func (p *Provider) CreationCalls() []Call {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Call(nil), p.creation...)
}

// StatusChecks returns the status-check ledger in call order.
func (p *Provider) StatusChecks() []Call {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Call(nil), p.checks...)
}

// CountByKey tallies calls per key, for the "exactly once per key" checks.
func CountByKey(calls []Call) map[string]int {
	n := map[string]int{}
	for _, c := range calls {
		n[c.Key]++
	}
	return n
}

// CountByCaller tallies calls per caller.
func CountByCaller(calls []Call) map[string]int {
	n := map[string]int{}
	for _, c := range calls {
		n[c.Caller]++
	}
	return n
}

// Keys returns the map's keys sorted, for stable tables.
func Keys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
