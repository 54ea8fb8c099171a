package store

import (
	"encoding/json"
	"slices"
	"testing"
)

// TestLedgerMerge: what another process's ledger recorded, sent as JSON,
// adds up with the parent's own by text, is named from the parent's
// catalogue and names (not the sender's), and keeps transaction shapes.
func TestLedgerMerge(t *testing.T) {
	parent := &Ledger{}
	parent.record(ledgerTestInsert.SQL, 1, nil)
	parent.recordTx([]string{ledgerTestInsert.SQL}, true)
	custom := Stmt{Name: "your claim: select", SQL: "SELECT 42"}
	parent.Name(custom)

	child := &Ledger{}
	child.record(ledgerTestInsert.SQL, 1, nil)
	child.record(ledgerTestInsert.SQL, 0, errRaceLost)
	child.record(custom.SQL, 0, nil)
	child.addRows(custom.SQL, 3)
	child.recordTx([]string{ledgerTestInsert.SQL}, true)
	child.recordTx([]string{ledgerTestInsert.SQL, custom.SQL}, false)
	child.omit(Stmt{Name: "a step left out", Replaces: &ledgerTestGuard})

	var sent struct {
		Entries []LedgerEntry
		Txs     []LedgerTx
	}
	b, err := json.Marshal(struct {
		Entries []LedgerEntry
		Txs     []LedgerTx
	}{child.Entries(), child.Transactions()})
	if err == nil {
		err = json.Unmarshal(b, &sent)
	}
	if err != nil {
		t.Fatal(err)
	}
	parent.Merge(sent.Entries, sent.Txs)

	got := map[string]LedgerEntry{}
	for _, e := range parent.Entries() {
		got[e.Stmt.Name] = e
	}
	for _, tt := range []struct {
		name                        string
		runs, failed, skipped, rows int
	}{
		{ledgerTestInsert.Name, 3, 1, 0, 2},
		{custom.Name, 1, 0, 0, 3},
		{"a step left out", 0, 0, 1, 0},
	} {
		e, ok := got[tt.name]
		if !ok {
			t.Errorf("no merged entry named %q in %v", tt.name, parent.Entries())
			continue
		}
		if e.Runs != tt.runs || e.Failed != tt.failed || e.Skipped != tt.skipped || e.Rows != int64(tt.rows) {
			t.Errorf("%s: runs %d failed %d skipped %d rows %d, want %d %d %d %d", tt.name, e.Runs, e.Failed, e.Skipped, e.Rows, tt.runs, tt.failed, tt.skipped, tt.rows)
		}
	}
	txs := parent.Transactions()
	if len(txs) != 2 || !slices.Equal(txs[0].Statements, []string{ledgerTestInsert.Name}) || txs[0].Committed != 2 ||
		txs[1].RolledBack != 1 || txs[1].Committed != 0 {
		t.Errorf("merged transactions %+v, want the insert committed twice and the pair rolled back once", txs)
	}
}
