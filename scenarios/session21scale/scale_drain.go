package session21scale

import (
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/store"
)

// ScaleDrain is what one drain of one backlog recorded (session 21): its
// claim design and backlog, and the ledgers of its workers' claims and
// finalizations and of the forced lease expiry. Workers append to its
// ledgers under its lock; nobody reads them until the drain is over.
type ScaleDrain struct {
	Claim   store.ScaleSQL
	Size    string // small or large
	Backlog int
	Plan    []string // the claim select's query plan

	mu      sync.Mutex
	Claims  []ScaleClaim
	Finals  []ScaleFinal
	Empty   int // claims that found nothing
	Busy    int // transactions retried after SQLITE_BUSY (a lock on PostgreSQL)
	claimUs []float64
	finalUs []float64
	Reads   int64 // what the drain workers' claims and finalizes read: pages on SQLite, rows on PostgreSQL
	// TablePages are the pages the table filled just before the drain and
	// just after it, on PostgreSQL (0 on SQLite).
	TablePages [2]int64
	Drained    int // messages the drain workers finalized
	Lost       int // messages left unprocessed, from the database after the drain
	Expiries   []ScaleExpiry
	Retake     ScaleRetake
}

// ScaleRetake is a drain's last step: the stalled worker claims one fresh
// message and stalls again; after its lease ends the same worker (a second
// claimer under the same name, as a second thread or a restarted process
// would be) claims it again, so the row is Processing and LockedBy names
// the worker still, under a newer token; then the first claimer finalizes
// with the token it was given, and the second with its own.
type ScaleRetake struct {
	Worker string
	ID     int64
	Stale  int64 // the first claim's token, the one the late finalize presents
	// Newer is the second claim's token, 0 when it took nothing; its
	// claim set the row's LockedBy to Worker.
	Newer int64
	// StaleRows and NewerRows are the rows each finalize changed; NewerRows
	// is -1 when the second claimer had nothing to finalize.
	StaleRows, NewerRows int
	// RetryRows are the rows the second claimer's finalize changed when it
	// sent it again under the same name and token, after it had committed
	// (as a retry after a lost reply would): -1 when it did not run.
	RetryRows int
	// RetryDone says the retry changed 0 rows and the worker, reading the
	// row back, found its first write standing ([FirstWriteStands]): the
	// work was done, by itself.
	RetryDone bool
}

// Ran says the step ran: the first claim took a message.
func (r ScaleRetake) Ran() bool { return r.ID != 0 }

// TokenRefused says only the token refused the stale finalize: it changed
// 0 rows while the row was Processing under the same worker's newer claim
// (Status and LockedBy would have let it through), and that claim's
// finalize then committed.
func (r ScaleRetake) TokenRefused() bool {
	return r.Ran() && r.Newer > r.Stale && r.StaleRows == 0 && r.NewerRows == 1
}

// ScaleClaim is one message a worker claimed, under its token.
type ScaleClaim struct {
	Worker    string
	ID, Token int64
}

// ScaleFinal is one message a worker's finalize presented with its token,
// and whether the finalization committed.
type ScaleFinal struct {
	Worker    string
	ID, Token int64
	Committed bool
}

// ScaleExpiry is one message of the forced lease expiry and who held it.
type ScaleExpiry struct {
	Holder    string // the crashed or stalled worker
	ID, Token int64
	Late      string // the stalled worker's late finalize: rows changed, or "-" for the crash
	// Refused says the late finalize ran and changed 0 rows (the stalled
	// worker only).
	Refused bool
}

// Label names the drain: its claim and its backlog.
func (d *ScaleDrain) Label() string { return fmt.Sprintf("%s claim, %s backlog", d.Claim.Name, d.Size) }

// RecordClaim adds worker's claim b to the claim ledger.
func (d *ScaleDrain) RecordClaim(worker string, b store.ClaimedBatch) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.Busy += b.Stats.BusyRetries
	if len(b.Messages) == 0 {
		d.Empty++
		return
	}
	d.claimUs = append(d.claimUs, float64(b.Held.Microseconds()))
	for _, m := range b.Messages {
		d.Claims = append(d.Claims, ScaleClaim{Worker: worker, ID: m.ID, Token: m.Token})
	}
}

// RecordFinal adds worker's finalization f, under token, to the ledger.
func (d *ScaleDrain) RecordFinal(worker string, token int64, f store.FinalizedBatch) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.Busy += f.Stats.BusyRetries
	d.finalUs = append(d.finalUs, float64(f.Held.Microseconds()))
	for _, id := range f.Finalized {
		d.Finals = append(d.Finals, ScaleFinal{Worker: worker, ID: id, Token: token, Committed: true})
	}
	for _, id := range f.Rejected {
		d.Finals = append(d.Finals, ScaleFinal{Worker: worker, ID: id, Token: token})
	}
}

// AddWork adds what one drain worker read and finalized.
func (d *ScaleDrain) AddWork(reads int64, drained int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.Reads += reads
	d.Drained += drained
}

// Reclaimed counts the forced-expiry messages one of the drainers claimed
// again under a newer token than their holder's.
func (d *ScaleDrain) Reclaimed(drainers []string) int {
	n := 0
	for _, e := range d.Expiries {
		if slices.ContainsFunc(d.Claims, func(c ScaleClaim) bool {
			return c.ID == e.ID && c.Token > e.Token && slices.Contains(drainers, c.Worker)
		}) {
			n++
		}
	}
	return n
}

// StaleRefused counts the late finalizes that changed 0 rows.
func (d *ScaleDrain) StaleRefused() int {
	n := 0
	for _, e := range d.Expiries {
		if e.Refused {
			n++
		}
	}
	return n
}

// Duplicates counts committed finalizations beyond the first per message.
func (d *ScaleDrain) Duplicates() int {
	per := map[int64]int{}
	dup := 0
	for _, f := range d.Finals {
		if f.Committed {
			if per[f.ID]++; per[f.ID] > 1 {
				dup++
			}
		}
	}
	return dup
}

// ReadsPerMessage is the drain workers' reads (pages or rows) per message
// they finalized.
func (d *ScaleDrain) ReadsPerMessage() float64 {
	return Round2(float64(d.Reads) / float64(max(d.Drained, 1)))
}

// UsPerMessage is the median claim transaction plus the median finalize
// transaction, each its committed attempt alone (waiting excluded).
func (d *ScaleDrain) UsPerMessage() float64 {
	return Round2(lab.Median(d.claimUs) + lab.Median(d.finalUs))
}

// Round2 rounds x to two decimals, as a report prints a ratio.
func Round2(x float64) float64 { return math.Round(x*100) / 100 }

// CommittedBy counts the committed finalizations of each worker.
func (d *ScaleDrain) CommittedBy() map[string]int {
	by := map[string]int{}
	for _, f := range d.Finals {
		if f.Committed {
			by[f.Worker]++
		}
	}
	return by
}

// CommittedOf counts the committed finalizations of message id.
func (d *ScaleDrain) CommittedOf(id int64) int {
	n := 0
	for _, f := range d.Finals {
		if f.ID == id && f.Committed {
			n++
		}
	}
	return n
}

// TakenOver lists who claimed e's message besides its holder, with the
// token each got, e.g. "Worker-C (2)".
func (d *ScaleDrain) TakenOver(e ScaleExpiry) []string {
	var took []string
	for _, c := range d.Claims {
		if c.ID == e.ID && c.Worker != e.Holder {
			took = append(took, fmt.Sprintf("%s (%d)", c.Worker, c.Token))
		}
	}
	return took
}

// ScaleMetrics sets session 21's figures on r: per drain, its cost per
// message (reads, in unit) and time per message, and its backlog; per claim
// the growth of each from the small backlog to the large; the number of
// drains; and the invariants summed over them ([ScaleTotals]).
func ScaleMetrics(r *lab.Result, drains []*ScaleDrain, unit string, drainers []string) {
	perMessage := "_" + unit + "_per_message_"
	for _, d := range drains {
		key := d.Claim.Name
		r.SetMetric(key+perMessage+d.Size, d.ReadsPerMessage())
		r.SetMetric(key+"_us_per_message_"+d.Size, d.UsPerMessage())
		r.SetMetric("backlog_"+d.Size, float64(d.Backlog))
	}
	for _, key := range []string{"lesson", "indexed"} {
		small, _ := r.Metric(key + perMessage + "small")
		large, _ := r.Metric(key + perMessage + "large")
		r.SetMetric(key+"_cost_growth", Round2(large/math.Max(small, 1e-9)))
		smallUs, _ := r.Metric(key + "_us_per_message_small")
		largeUs, _ := r.Metric(key + "_us_per_message_large")
		r.SetMetric(key+"_time_growth", Round2(largeUs/math.Max(smallUs, 1e-9)))
	}
	r.SetMetric("drains", float64(len(drains)))
	for _, t := range ScaleTotals(drains, drainers) {
		if t.N >= 0 {
			r.SetMetric(t.Key, float64(t.N))
		}
	}
}

// ScaleTotal is one invariant of session 21 summed over its drains.
type ScaleTotal struct {
	Key string // the metric key
	N   int    // -1: not measured (a step the total sums never ran)
}

// ScaleTotals sums the drains' ledgers into the invariants the lesson
// checks: duplicates, lost messages, forced expiries, those drainers
// reclaimed, stale finalizes refused, re-takes only the token refused, and
// the rows the re-take's retried finalizes changed.
func ScaleTotals(drains []*ScaleDrain, drainers []string) []ScaleTotal {
	var dup, lost, forced, reclaimed, refused, retaken, retried int
	for _, d := range drains {
		dup, lost, forced = dup+d.Duplicates(), lost+d.Lost, forced+len(d.Expiries)
		reclaimed, refused = reclaimed+d.Reclaimed(drainers), refused+d.StaleRefused()
		if d.Retake.TokenRefused() {
			retaken++
		}
		if retried >= 0 && d.Retake.RetryRows >= 0 {
			retried += d.Retake.RetryRows
		} else {
			retried = -1 // a re-take whose finalize was never retried: not measured
		}
	}
	return []ScaleTotal{{"duplicates", dup}, {"lost", lost}, {"forced_expiries", forced}, {"expired_reclaimed", reclaimed},
		{"stale_finalizes_refused", refused}, {"retake_stale_refused", retaken}, {"retake_retried_finalize_rows", retried}}
}
