package cast

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/provider"
	"github.com/outboxlab/outboxlab/store"
)

// statusArg is the :status argument of the audit counts.
func statusArg(s string) []any { return []any{sql.Named("status", s)} }

// Audit measures the figures both Day 15 scenarios report: final state from
// the database, work done from the ledgers.
func (d *Day15) Audit(ctx context.Context, db *store.DB, r *lab.Result) error {
	counts := []struct {
		key   string
		query string
		args  []any
	}{
		{"outbox_processed", store.CountOutboxByStatus.SQL, statusArg("Processed")},
		{"outbox_pending", store.CountOutboxByStatus.SQL, statusArg("Pending")},
		{"outbox_processing", store.CountOutboxByStatus.SQL, statusArg("Processing")},
		{"paid", store.CountPaymentsByStatus.SQL, statusArg("Paid")},
		{"failed", store.CountPaymentsByStatus.SQL, statusArg("Failed")},
		{"payments_pending", store.CountPaymentsByStatus.SQL, statusArg("Pending")},
		{"seeded_payments", store.CountPayments.SQL, nil},
		{"seeded_messages", store.CountOutbox.SQL, nil},
		{"duplicate_rows", store.DuplicateRows.SQL, nil},
		{"duplicate_payment_rows", store.DuplicatePaymentRows.SQL, nil},
		{"duplicate_outbox_rows", store.DuplicateOutboxRows.SQL, nil},
	}
	for _, c := range counts {
		n, err := db.Count(ctx, c.query, c.args...)
		if err != nil {
			return fmt.Errorf("audit %s: %w", c.key, err)
		}
		r.SetMetric(c.key, float64(n))
	}

	fakes, err := d.fakeSuccesses(ctx, db)
	if err != nil {
		return err
	}
	r.SetMetric("fake_successes", float64(fakes))
	a, b := d.processedBy()
	r.SetMetric("processed_by_a", float64(a))
	r.SetMetric("processed_by_b", float64(b))

	by := d.AttemptsByMessage()
	more := 0
	total := 0
	for _, workers := range by {
		total += len(workers)
		if len(workers) > 1 {
			more++
		}
	}
	r.SetMetric("processing_attempts", float64(total))
	r.SetMetric("unique_messages", float64(len(by)))
	r.SetMetric("processed_more_than_once", float64(more))

	checks := d.Provider.StatusChecks()
	r.SetMetric("status_checks", float64(len(checks)))
	creations := d.Provider.CreationCalls()
	byCaller := provider.CountByCaller(creations)
	r.SetMetric("worker_creation_calls", float64(len(creations)-byCaller[Checkout]))
	perKey := provider.CountByKey(creations)
	wrong := 0
	for _, p := range d.Payments {
		if perKey[p.Key] != 1 {
			wrong++
		}
	}
	r.SetMetric("keys_not_created_exactly_once", float64(wrong))
	return nil
}

// fakeSuccesses compares every payment with the provider's own record: a
// Paid payment must carry exactly the transaction id the provider assigned
// to its key at creation, and a payment that is not Paid must carry none.
// A worker-invented or dropped id is a fake success.
func (d *Day15) fakeSuccesses(ctx context.Context, db *store.DB) (int, error) {
	pays, err := store.NewPayments(db, store.PaymentWriteLesson).List(ctx)
	if err != nil {
		return 0, err
	}
	fakes := 0
	for _, p := range pays {
		assigned, _ := d.Provider.AssignedID(p.Key)
		switch {
		case p.Status == "Paid" && (p.TransactionID == "" || p.TransactionID != assigned):
			fakes++
		case p.Status != "Paid" && p.TransactionID != "":
			fakes++
		}
	}
	return fakes, nil
}

// processedBy counts the distinct messages each worker processed, the
// recovery demo included, from the processing-attempts ledger.
func (d *Day15) processedBy() (a, b int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	seen := map[string]bool{}
	for _, at := range d.attempts {
		k := fmt.Sprintf("%s\x00%d", at.worker, at.id)
		if seen[k] {
			continue
		}
		seen[k] = true
		switch at.worker {
		case WorkerA:
			a++
		case WorkerB:
			b++
		}
	}
	return a, b
}

// Finish reads the schema and final rows and builds the tables both Day 15
// reports share.
func (d *Day15) Finish(ctx context.Context, db *store.DB, r *lab.Result) error {
	schema, err := db.Schema(ctx)
	if err != nil {
		return err
	}
	r.Schema = schema
	r.Timeline = d.timeline.Events()

	msgs, err := store.NewOutbox(db, store.OutboxLesson).Messages(ctx)
	if err != nil {
		return err
	}
	pays, err := store.NewPayments(db, store.PaymentWriteLesson).List(ctx)
	if err != nil {
		return err
	}
	payByKey := map[string]store.Payment{}
	for _, p := range pays {
		payByKey[p.Key] = p
	}
	by := d.AttemptsByMessage()
	claimsBy := map[int64][]string{}
	d.mu.Lock()
	for _, c := range d.claims {
		if c.outcome == store.Claimed {
			claimsBy[c.id] = append(claimsBy[c.id], c.worker)
		}
	}
	d.mu.Unlock()

	perMsg := lab.Table{
		Title:   "Messages: final state and who worked on each",
		Note:    "Status, lease and payment columns are read from the database; the claimed-by and processed-by columns come from the ledgers.",
		Columns: []string{"Id", "AggregateKey", "Status", "LockedBy", "LockedUntilUtc", "ProcessedAtUtc", "Payment", "TransactionId", "Claimed by", "Processed by", "Times"},
		// Which worker got a message varies; its final state does not.
		VaryingColumns: []string{"LockedBy", "Claimed by", "Processed by"},
	}
	for _, m := range msgs {
		p := payByKey[m.AggregateKey]
		perMsg.AddRow(m.ID, m.AggregateKey, m.Status, m.LockedBy, m.LockedUntil, m.ProcessedAt, p.Status, p.TransactionID,
			strings.Join(claimsBy[m.ID], ", "), strings.Join(sorted(by[m.ID]), ", "), len(by[m.ID]))
	}
	// Who claimed what depends on the interleaving; who processed what is
	// printed sorted, so it does not.
	perMsg.Interleaved = d.Concurrent && len(d.claims) > 0
	r.Tables = append(r.Tables, perMsg)
	for _, t := range d.ledgerTables() {
		// Seeding is sequential; the workers' own ledgers follow their
		// interleaving. The per-key summary is sorted, and without claims
		// (the race) every key was checked once by each worker.
		t.Interleaved = d.Concurrent && t.Title != CreationLedgerTitle && (t.Title != perKeyTitle || len(d.claims) > 0)
		if len(d.claims) == 0 {
			// Without claims every worker does every message: which worker
			// did what does not vary, only the order.
			t.VaryingColumns = slices.DeleteFunc(slices.Clone(t.VaryingColumns), func(c string) bool { return c == "Worker" || c == "Caller" })
		}
		r.Tables = append(r.Tables, t)
	}
	r.Concurrent = d.Concurrent
	return nil
}

// ledgerTables renders each ledger as its own table.
func (d *Day15) ledgerTables() []lab.Table {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []lab.Table
	if len(d.loads) > 0 {
		t := lab.Table{Title: "Ledger: loads", Note: "What each worker read with the plain SELECT, before it did any work.", Columns: []string{"#", "Clock", "Worker", "Loaded", "Keys"}, VaryingColumns: []string{"#"}}
		for _, l := range d.loads {
			t.AddRow(l.seq, l.at, l.worker, len(l.keys), strings.Join(l.keys, ", "))
		}
		out = append(out, t)
	}
	if len(d.claims) > 0 {
		t := lab.Table{Title: "Ledger: claims", Note: "Every claim attempt and its outcome. Only a claimed outcome may lead to processing.", Columns: []string{"#", "Clock", "Worker", "Phase", "Target", "Outcome", "Message", "Lease until", "Held by", "Busy retries"}, VaryingColumns: []string{"#", "Worker", "Busy retries"}}
		for _, c := range d.claims {
			msg := ""
			if c.id != 0 {
				msg = fmt.Sprintf("%d %s", c.id, c.key)
			}
			t.AddRow(c.seq, c.at, c.worker, c.phase, c.target, string(c.outcome), msg, c.until, c.heldBy, c.busy)
		}
		out = append(out, t)
		out = append(out, d.claimSummary())
	}
	t := lab.Table{Title: "Ledger: processing attempts", Note: "Each time a worker did the work for a message. One per message is the goal.", Columns: []string{"#", "Clock", "Worker", "Message", "Key", "Provider answer"}, VaryingColumns: []string{"#", "Worker"}}
	for _, a := range d.attempts {
		t.AddRow(a.seq, a.at, a.worker, a.id, a.key, a.answer)
	}
	out = append(out, t)
	out = append(out, ProviderTables(d.Provider)...)
	if len(d.finals) > 0 {
		t := lab.Table{Title: "Ledger: finalizations and ownership rejections", Note: "A rejected finalization changed 0 rows and was rolled back: the worker no longer owned the message.", Columns: []string{"#", "Clock", "Worker", "Message", "Key", "Result", "Busy retries"}, VaryingColumns: []string{"#", "Worker", "Busy retries"}}
		if len(d.claims) == 0 {
			t.Title, t.Note = "Ledger: completions", "Each completion ran by Id alone, with no ownership guard, so none could be refused."
		}
		retried := false
		for _, f := range d.finals {
			retried = retried || f.retryOf != 0
			result := map[bool]string{true: "committed", false: "rejected (0 rows)"}[f.committed]
			switch {
			case f.retryOf == 0:
			case f.done:
				result = fmt.Sprintf("retry of #%d: done (0 rows)", f.retryOf)
			default:
				result = fmt.Sprintf("retry of #%d: %s", f.retryOf, result)
			}
			t.AddRow(f.seq, f.at, f.worker, f.id, f.key, result, f.busy)
		}
		if retried {
			t.Note += " A retry sends a finalization again under the same name; 0 rows there, with the row Processed " +
				"under its worker at the first's time, means the first committed: the retry is done, not rejected."
		}
		out = append(out, t)
	}
	return out
}

// claimSummary tallies the claim ledger per worker.
func (d *Day15) claimSummary() lab.Table {
	type tally struct{ attempts, claimed, empty, blocked, refused, other, busy int }
	per := map[string]*tally{} // by phase, then worker
	for _, c := range d.claims {
		k := c.phase + "\x00" + c.worker
		t := per[k]
		if t == nil {
			t = &tally{}
			per[k] = t
		}
		t.attempts++
		t.busy += c.busy
		switch c.outcome {
		case store.Claimed:
			t.claimed++
		case store.Empty:
			t.empty++
		case store.Blocked:
			t.blocked++
		case store.Refused:
			t.refused++
		default:
			t.other++
		}
	}
	keys := make([]string, 0, len(per))
	for k := range per {
		keys = append(keys, k)
	}
	// The recovery demo comes before the concurrent phase.
	sort.Slice(keys, func(i, j int) bool {
		pi, pj := strings.HasPrefix(keys[i], "recovery"), strings.HasPrefix(keys[j], "recovery")
		if pi != pj {
			return pi
		}
		return keys[i] < keys[j]
	})
	retries := d.engine.RetriedError() + " retries"
	t := lab.Table{Title: "Ledger: claims per worker and phase", Note: "Every claim attempt in the claim ledger, counted per worker and phase by its outcome.", Columns: []string{"Phase", "Worker", "Attempts", "Successes", "Empty", "Blocked (live lease)", "Refused (lease expired)", "Lost/done", retries},
		VaryingColumns: []string{"Worker", "Attempts", "Successes", retries}}
	for _, k := range keys {
		phase, worker, _ := strings.Cut(k, "\x00")
		x := per[k]
		t.AddRow(phase, worker, x.attempts, x.claimed, x.empty, x.blocked, x.refused, x.other, x.busy)
	}
	return t
}

// Titles of the provider's ledger tables.
const (
	// CreationLedgerTitle titles the provider's record of "create payment".
	CreationLedgerTitle = "Ledger: provider creation calls"
	perKeyTitle         = "Provider calls per key"
)

// ProviderTables renders the provider's own ledgers.
func ProviderTables(p *provider.Provider) []lab.Table {
	create := lab.Table{Title: CreationLedgerTitle, Note: "The provider's record of \"create payment\". Exactly one per key, all by checkout.", Columns: []string{"Call", "Caller", "Key", "Answer"}}
	for _, c := range p.CreationCalls() {
		create.AddRow(c.Seq, c.Caller, c.Key, c.Answer)
	}
	checks := p.StatusChecks()
	status := lab.Table{Title: "Ledger: provider status checks", Note: "The provider's record of status checks, in call order.", Columns: []string{"Call", "Caller", "Key", "Answer"}, VaryingColumns: []string{"Call", "Caller"}}
	for _, c := range checks {
		status.AddRow(c.Seq, c.Caller, c.Key, c.Answer)
	}
	perKey := lab.Table{Title: perKeyTitle, Note: "The provider's two ledgers summed per idempotency key: its creation calls and its status checks.", Columns: []string{"Key", "Creation calls", "Status checks", "Status checks by caller"}, VaryingColumns: []string{"Status checks by caller"}}
	creations := provider.CountByKey(p.CreationCalls())
	checkCount := provider.CountByKey(checks)
	byKeyCaller := map[string]map[string]int{}
	for _, c := range checks {
		if byKeyCaller[c.Key] == nil {
			byKeyCaller[c.Key] = map[string]int{}
		}
		byKeyCaller[c.Key][c.Caller]++
	}
	for _, k := range provider.Keys(creations) {
		var parts []string
		for _, caller := range provider.Keys(byKeyCaller[k]) {
			parts = append(parts, fmt.Sprintf("%s %d", caller, byKeyCaller[k][caller]))
		}
		perKey.AddRow(k, creations[k], checkCount[k], strings.Join(parts, ", "))
	}
	return []lab.Table{create, status, perKey}
}

// sorted returns a sorted copy of names.
func sorted(names []string) []string {
	out := append([]string(nil), names...)
	sort.Strings(out)
	return out
}
