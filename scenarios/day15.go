package scenarios

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/outboxlab/outboxlab/clock"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/provider"
	"github.com/outboxlab/outboxlab/store"
)

// This file holds what the two Day 15 scenarios share: the six seeded
// payments, the worker's processing step and the separate ledgers.

// lessonStart is when the workers start on the scenario clock.
var lessonStart = time.Date(2026, 1, 15, 9, 0, 0, 0, time.UTC)

// seedPayments are the six payments of Days 14 and 15.
var seedPayments = []store.NewPayment{
	{Key: "PAY-001", AmountCents: 2500},
	{Key: "PAY-002", AmountCents: 4200},
	{Key: "PAY-003", AmountCents: 1999},
	{Key: "PAY-004", AmountCents: 12000},
	{Key: "PAY-005", AmountCents: 750},
	{Key: "PAY-006", AmountCents: 3100},
}

// providerLatency is the real time a status check takes: enough for the
// two workers to interleave, short enough for a run to take milliseconds.
const providerLatency = 2 * time.Millisecond

const (
	workerA  = "Worker-A"
	workerB  = "Worker-B"
	checkout = "checkout"
)

// day15 is one Day 15 run: its clock, provider, timeline and ledgers.
// Workers append to the ledgers; they never read them.
type day15 struct {
	clk      *clock.Manual
	provider *provider.Provider
	timeline lab.Timeline
	variant  string
	// concurrent is set when the workers ran at the same time, so the
	// report marks what depends on their interleaving.
	concurrent bool

	mu       sync.Mutex
	loads    []loadEntry
	claims   []claimEntry
	attempts []attemptEntry
	finals   []finalEntry
}

type loadEntry struct {
	seq    int
	at     string
	worker string
	keys   []string
}

type claimEntry struct {
	seq     int
	at      string
	worker  string
	phase   string
	target  string // "next" or a key
	outcome store.ClaimOutcome
	id      int64
	key     string
	until   string // lease expiry on success
	heldBy  string // holder when blocked
	busy    int
}

type attemptEntry struct {
	seq    int
	at     string
	worker string
	id     int64
	key    string
	answer string
}

type finalEntry struct {
	seq       int
	at        string
	worker    string
	id        int64
	key       string
	committed bool
	busy      int
}

func newDay15(variant string) *day15 {
	p := provider.New()
	p.Latency = providerLatency
	return &day15{clk: clock.NewManual(lessonStart), provider: p, variant: variant}
}

func (d *day15) now() string { return clock.Format(d.clk.Now()) }

// event adds a timeline line at the current scenario time.
func (d *day15) event(actor, action, detail string) int {
	return d.timeline.Add(d.now(), actor, action, detail)
}

// seed creates the six payments through the transactional outbox, one
// second apart from 08:59:00, calling the provider's create once per key.
func (d *day15) seed(ctx context.Context, db *store.DB) error {
	d.clk.Set(lessonStart.Add(-time.Minute))
	for _, p := range seedPayments {
		p.MessageType = "PaymentCreated"
		p.Payload = fmt.Sprintf(`{"key":%q,"amountCents":%d}`, p.Key, p.AmountCents)
		if _, err := db.CreatePayment(ctx, p, d.clk.Now()); err != nil {
			return err
		}
		d.provider.Create(checkout, p.Key)
		d.event(checkout, "create payment", fmt.Sprintf("%s %d cents: payment + outbox row in one transaction, then registered at the provider", p.Key, p.AmountCents))
		d.clk.Advance(time.Second)
	}
	d.clk.Set(lessonStart)
	return nil
}

// process is the work for one message: a status check at the provider,
// turned into the outcome to store. Only this step calls the provider.
func (d *day15) process(worker string, id int64, key string) store.Outcome {
	if d.variant == variantWorkerCreates {
		d.provider.Create(worker, key)
		d.event(worker, "provider create (MISTAKE)", key+" sent to the provider's create payment a second time")
	}
	st := d.provider.CheckStatus(worker, key)
	o := store.Outcome{Key: key, Status: "Failed"}
	answer := "Failed"
	if st.Paid {
		o.Status, o.TransactionID = "Paid", st.TransactionID
		answer = "Paid " + st.TransactionID
		if d.variant == variantPaidWithoutTxn {
			o.TransactionID = ""
		}
	}
	seq := d.event(worker, "process", fmt.Sprintf("message %d (%s): status check answered %s", id, key, answer))
	d.mu.Lock()
	d.attempts = append(d.attempts, attemptEntry{seq: seq, at: d.now(), worker: worker, id: id, key: key, answer: answer})
	d.mu.Unlock()
	return o
}

func (d *day15) recordLoad(worker string, msgs []store.Message) {
	keys := make([]string, len(msgs))
	for i, m := range msgs {
		keys[i] = m.AggregateKey
	}
	seq := d.event(worker, "load", fmt.Sprintf("%d Pending messages: %s", len(msgs), strings.Join(keys, ", ")))
	d.mu.Lock()
	d.loads = append(d.loads, loadEntry{seq: seq, at: d.now(), worker: worker, keys: keys})
	d.mu.Unlock()
}

func (d *day15) recordClaim(worker, phase, target string, c store.Claim) {
	var detail string
	switch c.Outcome {
	case store.Claimed:
		detail = fmt.Sprintf("claimed message %d (%s), lease until %s", c.Message.ID, c.Message.AggregateKey, c.Message.LockedUntil)
	case store.Blocked:
		detail = fmt.Sprintf("message %d (%s) is Processing under %s's live lease until %s", c.Message.ID, c.Message.AggregateKey, c.HeldBy, c.HeldUntil)
	case store.Empty:
		detail = "nothing claimable"
	case store.Done:
		detail = fmt.Sprintf("message %d (%s) already Processed", c.Message.ID, c.Message.AggregateKey)
	case store.Lost:
		detail = "selected a message, but the guarded UPDATE changed 0 rows"
	}
	if c.Stats.BusyRetries > 0 {
		detail += fmt.Sprintf(" (after %d SQLITE_BUSY retries)", c.Stats.BusyRetries)
	}
	seq := d.event(worker, "claim "+string(c.Outcome), detail)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.claims = append(d.claims, claimEntry{
		seq: seq, at: d.now(), worker: worker, phase: phase, target: target, outcome: c.Outcome,
		id: c.Message.ID, key: c.Message.AggregateKey, until: c.Message.LockedUntil, heldBy: c.HeldBy, busy: c.Stats.BusyRetries,
	})
}

func (d *day15) recordFinal(worker string, id int64, key string, committed bool, busy int, detail string) {
	seq := d.event(worker, map[bool]string{true: "finalize", false: "finalize rejected"}[committed], detail)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.finals = append(d.finals, finalEntry{seq: seq, at: d.now(), worker: worker, id: id, key: key, committed: committed, busy: busy})
}

// attemptsByMessage counts processing attempts per message id.
func (d *day15) attemptsByMessage() map[int64][]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	by := map[int64][]string{}
	for _, a := range d.attempts {
		by[a.id] = append(by[a.id], a.worker)
	}
	return by
}

// audit measures the figures both Day 15 scenarios report: final state from
// the database, work done from the ledgers.
func (d *day15) audit(ctx context.Context, db *store.DB, r *lab.Result) error {
	counts := []struct {
		key   string
		query string
		args  []any
	}{
		{"outbox_processed", store.CountOutboxByStatusSQL, []any{"Processed"}},
		{"outbox_pending", store.CountOutboxByStatusSQL, []any{"Pending"}},
		{"outbox_processing", store.CountOutboxByStatusSQL, []any{"Processing"}},
		{"paid", store.CountPaymentsByStatusSQL, []any{"Paid"}},
		{"failed", store.CountPaymentsByStatusSQL, []any{"Failed"}},
		{"duplicate_rows", store.DuplicateRowsSQL, nil},
		{"fake_successes", store.FakeSuccessesSQL, nil},
	}
	for _, c := range counts {
		n, err := db.Count(ctx, c.query, c.args...)
		if err != nil {
			return fmt.Errorf("audit %s: %w", c.key, err)
		}
		r.SetMetric(c.key, float64(n))
	}

	by := d.attemptsByMessage()
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

	checks := d.provider.StatusChecks()
	r.SetMetric("status_checks", float64(len(checks)))
	creations := d.provider.CreationCalls()
	byCaller := provider.CountByCaller(creations)
	r.SetMetric("worker_creation_calls", float64(len(creations)-byCaller[checkout]))
	perKey := provider.CountByKey(creations)
	wrong := 0
	for _, p := range seedPayments {
		if perKey[p.Key] != 1 {
			wrong++
		}
	}
	r.SetMetric("keys_not_created_exactly_once", float64(wrong))
	return nil
}

// finish reads the schema and final rows and builds the tables both Day 15
// reports share.
func (d *day15) finish(ctx context.Context, db *store.DB, r *lab.Result) error {
	schema, err := db.Schema(ctx)
	if err != nil {
		return err
	}
	r.Schema = schema
	r.Timeline = d.timeline.Events()

	msgs, err := db.Messages(ctx)
	if err != nil {
		return err
	}
	pays, err := db.Payments(ctx)
	if err != nil {
		return err
	}
	payByKey := map[string]store.Payment{}
	for _, p := range pays {
		payByKey[p.Key] = p
	}
	by := d.attemptsByMessage()
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
	}
	for _, m := range msgs {
		p := payByKey[m.AggregateKey]
		perMsg.AddRow(m.ID, m.AggregateKey, m.Status, m.LockedBy, m.LockedUntil, m.ProcessedAt, p.Status, p.TransactionID,
			strings.Join(claimsBy[m.ID], ", "), strings.Join(sorted(by[m.ID]), ", "), len(by[m.ID]))
	}
	// Who claimed what depends on the interleaving; who processed what is
	// printed sorted, so it does not.
	perMsg.Interleaved = d.concurrent && len(d.claims) > 0
	r.Tables = append(r.Tables, perMsg)
	for _, t := range d.ledgerTables() {
		// Seeding is sequential; the workers' own ledgers follow their
		// interleaving. The per-key summary is sorted, and without claims
		// (the race) every key was checked once by each worker.
		t.Interleaved = d.concurrent && t.Title != creationLedgerTitle && (t.Title != perKeyTitle || len(d.claims) > 0)
		r.Tables = append(r.Tables, t)
	}
	r.Concurrent = d.concurrent
	return nil
}

// ledgerTables renders each ledger as its own table.
func (d *day15) ledgerTables() []lab.Table {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []lab.Table
	if len(d.loads) > 0 {
		t := lab.Table{Title: "Ledger: loads", Note: "What each worker read with the plain SELECT, before it did any work.", Columns: []string{"#", "Clock", "Worker", "Loaded", "Keys"}}
		for _, l := range d.loads {
			t.AddRow(l.seq, l.at, l.worker, len(l.keys), strings.Join(l.keys, ", "))
		}
		out = append(out, t)
	}
	if len(d.claims) > 0 {
		t := lab.Table{Title: "Ledger: claims", Note: "Every claim attempt and its outcome. Only a claimed outcome may lead to processing.", Columns: []string{"#", "Clock", "Worker", "Phase", "Target", "Outcome", "Message", "Lease until", "Held by", "Busy retries"}}
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
	t := lab.Table{Title: "Ledger: processing attempts", Note: "Each time a worker did the work for a message. One per message is the goal.", Columns: []string{"#", "Clock", "Worker", "Message", "Key", "Provider answer"}}
	for _, a := range d.attempts {
		t.AddRow(a.seq, a.at, a.worker, a.id, a.key, a.answer)
	}
	out = append(out, t)
	out = append(out, providerTables(d.provider)...)
	if len(d.finals) > 0 {
		t := lab.Table{Title: "Ledger: finalizations and ownership rejections", Note: "A rejected finalization changed 0 rows and was rolled back: the worker no longer owned the message.", Columns: []string{"#", "Clock", "Worker", "Message", "Key", "Result", "Busy retries"}}
		if len(d.claims) == 0 {
			t.Title, t.Note = "Ledger: completions", "Each completion ran by Id alone, with no ownership guard, so none could be refused."
		}
		for _, f := range d.finals {
			t.AddRow(f.seq, f.at, f.worker, f.id, f.key, map[bool]string{true: "committed", false: "rejected (0 rows)"}[f.committed], f.busy)
		}
		out = append(out, t)
	}
	return out
}

// claimSummary tallies the claim ledger per worker.
func (d *day15) claimSummary() lab.Table {
	type tally struct{ attempts, claimed, empty, blocked, other, busy int }
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
	t := lab.Table{Title: "Ledger: claims per worker and phase", Columns: []string{"Phase", "Worker", "Attempts", "Successes", "Empty", "Blocked", "Lost/done", "SQLITE_BUSY retries"}}
	for _, k := range keys {
		phase, worker, _ := strings.Cut(k, "\x00")
		x := per[k]
		t.AddRow(phase, worker, x.attempts, x.claimed, x.empty, x.blocked, x.other, x.busy)
	}
	return t
}

const (
	creationLedgerTitle = "Ledger: provider creation calls"
	perKeyTitle         = "Provider calls per key"
)

// providerTables renders the provider's own ledgers.
func providerTables(p *provider.Provider) []lab.Table {
	create := lab.Table{Title: creationLedgerTitle, Note: "The provider's record of \"create payment\". Exactly one per key, all by checkout.", Columns: []string{"Call", "Caller", "Key", "Answer"}}
	for _, c := range p.CreationCalls() {
		create.AddRow(c.Seq, c.Caller, c.Key, c.Answer)
	}
	checks := p.StatusChecks()
	status := lab.Table{Title: "Ledger: provider status checks", Note: "The provider's record of status checks, in call order.", Columns: []string{"Call", "Caller", "Key", "Answer"}}
	for _, c := range checks {
		status.AddRow(c.Seq, c.Caller, c.Key, c.Answer)
	}
	perKey := lab.Table{Title: perKeyTitle, Columns: []string{"Key", "Creation calls", "Status checks", "Status checks by caller"}}
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

// openWorker opens one application instance's own connection.
func openWorker(ctx context.Context, path string) (*store.DB, error) {
	return store.Open(ctx, path, store.DefaultConfig)
}
