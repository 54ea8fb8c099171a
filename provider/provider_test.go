package provider_test

import (
	"sync"
	"testing"

	"github.com/outboxlab/outboxlab/provider"
)

func TestCheckStatus(t *testing.T) {
	p := provider.New()
	for _, key := range []string{"PAY-001", "PAY-002", "PAY-003", "PAY-004", "PAY-005", "PAY-006"} {
		p.Create("checkout", key)
	}
	tests := []struct {
		key  string
		paid bool
		txn  string
	}{
		{"PAY-001", true, "TXN-0001"},
		{"PAY-003", false, ""},
		{"PAY-005", false, ""},
		{"PAY-006", true, "TXN-0006"},
		{"PAY-999", false, ""}, // never created
	}
	for _, tt := range tests {
		st := p.CheckStatus("Worker-A", tt.key)
		if st.Paid != tt.paid || st.TransactionID != tt.txn {
			t.Errorf("CheckStatus(%s) = %+v, want paid=%v txn=%q", tt.key, st, tt.paid, tt.txn)
		}
	}
	if got := len(p.StatusChecks()); got != len(tests) {
		t.Errorf("status-check ledger has %d entries, want %d", got, len(tests))
	}
}

func TestCreateTwiceIsRecorded(t *testing.T) {
	p := provider.New()
	first := p.Create("checkout", "PAY-001")
	again := p.Create("Worker-A", "PAY-001")
	if first != again {
		t.Errorf("a second create assigned a new transaction id: %s then %s", first, again)
	}
	perKey := provider.CountByKey(p.CreationCalls())
	perCaller := provider.CountByCaller(p.CreationCalls())
	if perKey["PAY-001"] != 2 || perCaller["Worker-A"] != 1 {
		t.Errorf("ledger per key %v, per caller %v", perKey, perCaller)
	}
}

func TestConcurrentCallers(t *testing.T) {
	p := provider.New()
	p.Create("checkout", "PAY-001")
	var wg sync.WaitGroup
	for _, w := range []string{"Worker-A", "Worker-B"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				p.CheckStatus(w, "PAY-001")
			}
		}()
	}
	wg.Wait()
	calls := p.StatusChecks()
	if len(calls) != 100 {
		t.Fatalf("%d calls recorded, want 100", len(calls))
	}
	for i, c := range calls {
		if c.Seq != i+2 { // the create took seq 1
			t.Fatalf("call %d has seq %d: the ledger is not in call order", i, c.Seq)
		}
	}
}
