package scenarios

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/outboxlab/outboxlab/bench"
	"github.com/outboxlab/outboxlab/clock"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/store"
)

// The mistake variants of session-21-claims-at-scale.
const (
	variantUnindexedClaim  = "unindexed-claim"
	variantFinalizeByID    = "finalize-by-id"
	variantPendingOnly     = "pending-only-claim"
	variantDevSizedBacklog = "dev-sized-backlog"
)

// The session-21 drains. The backlogs are small because the registry tests
// run every scenario under the race detector, which makes SQLite's scan
// about forty times slower; cost is counted in pages, so the growth shows
// at any size (`outboxlab bench` measures time at 1,000 to 1,000,000).
const (
	s21SmallBacklog = 50
	s21Growth       = 10 // the large backlog is ten times the small one
	s21Lease        = 30 * time.Second
	s21PayloadBytes = 256 // a realistic event: the scan reads it too
	s21LessonMin    = 2.0 // the lesson claim's cost must at least double at 10× the backlog
	s21IndexedMax   = 1.5 // the indexed claim's must stay under 1.5×
	s21Crashed      = "Worker-A"
	s21Stalled      = "Worker-B"
)

// s21Drainers drain each backlog concurrently, each on its own connection.
var s21Drainers = []string{"Worker-C", "Worker-D"}

var claimsAtScale = Scenario{
	Name:    "session-21-claims-at-scale",
	Session: "Session-21",
	FileTag: "ClaimsAtScale",
	Title:   "Session 21: the lesson's claim scans the backlog; an indexed claim of the same semantics stays flat",
	Design:  lab.Safe,
	Teaches: "The lesson's claim (Pending, or Processing with an expired lease, oldest first) is correct and instant on " +
		"six rows. Its OR matches no index, so SQLite reads the whole table, processed history included, on every " +
		"claim: the cost of a message grows with the backlog and a drain costs its square. The indexed claim keeps " +
		"the same predicate and adds ProcessedAtUtc IS NULL, the WHERE clause of a partial index of unprocessed " +
		"messages in creation order: SQLite walks that index from the oldest entry and stops at the first claimable " +
		"message. Same fencing token, same owner- and token-guarded finalize. Each backlog is drained by two " +
		"workers after a forced lease expiry (one worker crashed holding a message, one stalled past its lease and " +
		"finalizes late with its stale token): the expired messages are reclaimed, the stale finalize changes 0 " +
		"rows, no message is finalized twice and none is left behind. Cost is counted as the pages SQLite reads per " +
		"message (sqlite3_db_status), which is near-repeatable; the time per message is shown beside it.",
	DoesNotSolve: "The indexed claim skips the messages under live leases on every claim, so its cost grows with the " +
		"messages in flight (workers × batch), not with the backlog. And SQLite still runs one write transaction " +
		"at a time: throughput stays under the ceiling of a single-row write transaction, whatever the claim. " +
		"`outboxlab bench` measures that ceiling and how close claims, workers and batches get to it.",
	Statements: []lab.Statement{
		{Name: "lesson claim: select the oldest claimable (reads the whole table)", SQL: store.LessonScaleClaim.Select},
		{Name: "indexed claim: the same predicate on the unprocessed-messages index", SQL: store.IndexedScaleClaim.Select},
		{Name: "claim: take it only if still claimable, with a new fencing token", SQL: store.IndexedScaleClaim.Take},
		{Name: "finalize: only while I own it under my token", SQL: store.FencedFinalize.One},
		{Name: "migration 021: the index the indexed claim walks", SQL: statementText(store.ClaimsAtScale.SQL)},
	},
	Checks: []CheckDoc{
		{"lesson_cost_growth", fmt.Sprintf("the lesson claim's cost per message grows with the backlog: at least %.0fx at %dx the messages", s21LessonMin, s21Growth)},
		{"indexed_cost_growth", fmt.Sprintf("the indexed claim's cost per message stays flat: under %.1fx at %dx the messages", s21IndexedMax, s21Growth)},
		{"duplicates", "no message was finalized twice, in any of the four drains"},
		{"lost", "no message was left unprocessed after any drain, the crashed worker's included"},
	},
	Variants: []Variant{
		{Name: variantUnindexedClaim, Mistake: "the indexed claim ships without migration 021's index (dropped as unused, or never " +
			"applied in production): the same statement falls back to reading the whole table",
			Breaks: []string{"indexed_cost_growth"}},
		{Name: variantFinalizeByID, Mistake: "finalize by Id alone, without the owner and token guard: the stalled worker's late " +
			"finalize completes a message the drain already completed",
			Breaks: []string{"duplicates"}},
		{Name: variantPendingOnly, Mistake: "\"optimize\" the claim to its index-friendly half, Status = 'Pending': fast and flat, " +
			"but the crashed worker's message stays Processing forever",
			Breaks: []string{"lost"}},
		{Name: variantDevSizedBacklog, Mistake: fmt.Sprintf("measure both claims on the backlog a developer has at hand (%d messages, "+
			"twice) instead of one ten times larger: the lesson claim looks as flat as the indexed one", s21SmallBacklog),
			Breaks: []string{"lesson_cost_growth"}},
	},
	Run: runClaimsAtScale,
}

// scaleRun is one session-21 run: its clock, timeline and drains.
type scaleRun struct {
	env      *Env
	clk      *clock.Manual
	timeline lab.Timeline
	drains   []*scaleDrain
}

// scaleDrain is what one drain of one backlog recorded. Workers append
// to its ledgers under mu; nobody reads them until the drain is over.
type scaleDrain struct {
	claim   store.ScaleClaim
	size    string // small or large
	backlog int
	plan    []string

	mu       sync.Mutex
	claims   []scaleClaimEntry
	finals   []scaleFinalEntry
	empty    int
	busy     int
	claimUs  []float64 // each successful claim's own transaction time
	finalUs  []float64 // each finalize's own transaction time
	pages    int64     // pages the drain workers read, claims and finalizes
	drained  int       // messages the drain workers finalized
	lost     int       // from the database, after the drain
	expiries []expiry
}

type scaleClaimEntry struct {
	worker string
	id     int64
	token  int64
}

type scaleFinalEntry struct {
	worker    string
	id        int64
	token     int64
	committed bool
}

// expiry is one message of the forced lease expiry and who held it.
type expiry struct {
	holder string // the crashed or stalled worker
	id     int64
	token  int64
	late   string // the stalled worker's late finalize: rows changed, or "-" for the crash
}

func runClaimsAtScale(ctx context.Context, env *Env) (*lab.Result, error) {
	run := &scaleRun{env: env, clk: clock.NewManual(lessonStart)}
	r := &lab.Result{Concurrent: true}
	indexed := store.IndexedScaleClaim
	if env.Is(variantPendingOnly) {
		indexed = store.PendingOnlyScaleClaim
	}
	finalize := store.FencedFinalize
	if env.Is(variantFinalizeByID) {
		finalize = store.ByIDFinalize
	}
	large := s21SmallBacklog * s21Growth
	if env.Is(variantDevSizedBacklog) {
		large = s21SmallBacklog
	}
	r.Statements = []lab.Statement{
		{Name: "lesson claim: select the oldest claimable", SQL: store.LessonScaleClaim.Select},
		{Name: indexed.Name + " claim: select the oldest claimable (" + indexed.About + ")", SQL: indexed.Select},
		{Name: indexed.Name + " claim: take it only if still claimable, with a new fencing token", SQL: indexed.Take},
		{Name: "finalize: " + finalize.Name, SQL: finalize.One},
		{Name: "migration 021", SQL: statementText(store.ClaimsAtScale.SQL)},
	}
	if env.Is(variantUnindexedClaim) {
		r.Statements = append(r.Statements, lab.Statement{Name: store.WithoutClaimIndex.Name, SQL: statementText(store.WithoutClaimIndex.SQL)})
	}

	var schemaDB string
	for _, claim := range []store.ScaleClaim{store.LessonScaleClaim, indexed} {
		for _, size := range []struct {
			name string
			n    int
		}{{"small", s21SmallBacklog}, {"large", large}} {
			d := &scaleDrain{claim: claim, size: size.name, backlog: size.n}
			path := env.ExtraDatabasePath(fmt.Sprintf("claims-%s-%s", claim.Name, size.name))
			if err := run.drainBacklog(ctx, d, path, finalize); err != nil {
				return nil, err
			}
			run.drains = append(run.drains, d)
			schemaDB = path
		}
	}

	db, err := openWorker(ctx, schemaDB)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	if r.Schema, err = db.Schema(ctx); err != nil {
		return nil, err
	}
	r.Database = schemaDB
	r.Timeline = run.timeline.Events()
	run.measure(r)
	r.Tables = run.tables()

	v := func(key string) float64 { x, _ := r.Metric(key); return x }
	m := metricsOf(r)
	r.Checks = append(r.Checks,
		growthCheck(env.Scenario.Checks[0], v("lesson_cost_growth"), ">=", s21LessonMin),
		growthCheck(env.Scenario.Checks[1], v("indexed_cost_growth"), "<", s21IndexedMax))
	expectDocumented(r, env.Scenario.Checks[2:], map[string]float64{"duplicates": 0, "lost": 0})

	sizes := fmt.Sprintf("%d and %d messages", s21SmallBacklog, large)
	switch {
	case r.Passed():
		r.Verdict = fmt.Sprintf("SAFE DESIGN at scale. From %s, the lesson claim's cost per message grew %sx "+
			"(%s to %s pages read per message): it scans. The indexed claim, same semantics and same fencing, grew %sx "+
			"(%s to %s pages). All four drains reclaimed the crashed and the stalled worker's messages, refused the stale "+
			"finalize, and ended with %s duplicates and %s lost.", sizes, m("lesson_cost_growth"),
			m("lesson_pages_per_message_small"), m("lesson_pages_per_message_large"), m("indexed_cost_growth"),
			m("indexed_pages_per_message_small"), m("indexed_pages_per_message_large"), m("duplicates"), m("lost"))
	case env.Variant != "":
		r.Verdict = fmt.Sprintf("DESIGN BROKEN by the %q mistake: failed checks %s.", env.Variant, strings.Join(r.FailedChecks(), ", "))
	default:
		r.Verdict = fmt.Sprintf("Checks failed without a mistake variant: %s. Read the drains table.", strings.Join(r.FailedChecks(), ", "))
	}
	return r, nil
}

// growthCheck compares a cost growth with its bound.
func growthCheck(doc CheckDoc, got float64, op string, bound float64) lab.Check {
	ok := got >= bound
	if op == "<" {
		ok = got < bound
	}
	return lab.Check{Name: doc.Name, About: doc.About, Expected: op + " " + lab.FormatNumber(bound),
		Observed: lab.FormatNumber(got), Passed: ok}
}

// event adds a timeline line at the current scenario time.
func (run *scaleRun) event(actor, action, detail string) {
	run.timeline.Add(clock.Format(run.clk.Now()), actor, action, detail)
}

// drainBacklog seeds a fresh database with d.backlog messages, forces a
// lease expiry (one worker crashes holding the oldest message, another
// stalls holding the next), lets the leases run out on the scenario clock,
// drains the backlog with two workers, and lets the stalled worker finalize
// late with its stale token.
func (run *scaleRun) drainBacklog(ctx context.Context, d *scaleDrain, path string, finalize store.ScaleFinalize) error {
	label := fmt.Sprintf("%s claim, %s backlog", d.claim.Name, d.size)
	setup, err := openWorker(ctx, path)
	if err != nil {
		return err
	}
	defer setup.Close()
	steps := []store.Migration{store.PaymentsOutbox, store.OutboxLeasing, store.OutboxFencing, store.ClaimsAtScale}
	if run.env.Is(variantUnindexedClaim) && d.claim.Name != store.LessonScaleClaim.Name {
		steps = append(steps, store.WithoutClaimIndex)
	}
	if err := setup.Migrate(ctx, steps...); err != nil {
		return err
	}
	run.clk.Set(lessonStart)
	first := lessonStart.Add(-time.Duration(d.backlog) * time.Second)
	err = setup.SeedBacklog(ctx, store.Backlog{Messages: d.backlog, First: first, Spacing: time.Second, PayloadBytes: s21PayloadBytes})
	if err != nil {
		return err
	}
	run.event("scenario", "seed", fmt.Sprintf("%s: %d Pending messages, one a second from %s, in one streamed transaction", label, d.backlog, clock.Format(first)))
	if d.plan, err = setup.ClaimPlan(ctx, d.claim, run.clk.Now()); err != nil {
		return err
	}

	cfg := store.ClaimerConfig{Claim: d.claim, Finalize: finalize, Retry: store.DefaultRetry}
	// Worker-A claims the oldest message and crashes with it.
	crashed, err := run.claimAlone(ctx, path, s21Crashed, cfg, d)
	if err != nil {
		return err
	}
	if crashed.ID != 0 {
		d.expiries = append(d.expiries, expiry{holder: s21Crashed, id: crashed.ID, token: crashed.Token, late: "-"})
		run.event(s21Crashed, "CRASH", fmt.Sprintf("died holding message %d (token %d), lease until %s", crashed.ID, crashed.Token, crashed.LockedUntil))
	}
	// Worker-B claims the next one, processes it, and stalls before finalizing.
	stalledDB, err := openWorker(ctx, path)
	if err != nil {
		return err
	}
	defer stalledDB.Close()
	stalled, err := stalledDB.NewClaimer(ctx, s21Stalled, cfg)
	if err != nil {
		return err
	}
	defer stalled.Close()
	held, err := stalled.Claim(ctx, run.clk.Now(), s21Lease, 1)
	if err != nil {
		return err
	}
	d.recordClaim(s21Stalled, held)
	if len(held.Messages) == 1 {
		m := held.Messages[0]
		run.event(s21Stalled, "claim, process, stall", fmt.Sprintf("message %d (token %d), lease until %s; a long GC pause begins before its finalize", m.ID, m.Token, m.LockedUntil))
	}

	run.clk.Advance(s21Lease + time.Second)
	run.event("clock", "advance", fmt.Sprintf("scenario clock moves %v: both leases have expired", s21Lease+time.Second))

	run.event("scenario", "drain", fmt.Sprintf("%s: %s and %s drain concurrently, each on its own connection", label, s21Drainers[0], s21Drainers[1]))
	err = runConcurrently(ctx, s21Drainers, func(ctx context.Context, worker string) error {
		return run.drainAs(ctx, path, worker, cfg, d)
	})
	if err != nil {
		return err
	}
	run.event("scenario", "drained", fmt.Sprintf("%s: %d messages finalized by the drain workers, %d pages read, %d SQLITE_BUSY retries",
		label, d.drained, d.pages, d.busy))

	// Worker-B wakes up and finalizes with the token it was given.
	if len(held.Messages) == 1 {
		m := held.Messages[0]
		f, err := stalled.Finalize(ctx, held.Messages, run.clk.Now())
		if err != nil {
			return err
		}
		d.recordFinal(s21Stalled, m.Token, f)
		late := fmt.Sprintf("%d row", len(f.Finalized))
		if len(f.Finalized) != 1 {
			late += "s"
		}
		d.expiries = append(d.expiries, expiry{holder: s21Stalled, id: m.ID, token: m.Token, late: late})
		outcome := "changed 0 rows: the message was reclaimed under a newer token (lease lost)"
		if len(f.Finalized) == 1 {
			outcome = "changed 1 row: a stale owner completed a message it no longer owned"
		}
		run.event(s21Stalled, "late finalize", fmt.Sprintf("message %d with stale token %d %s", m.ID, m.Token, outcome))
	}
	lost, err := setup.Count(ctx, store.CountUnprocessedSQL)
	if err != nil {
		return err
	}
	d.lost = lost
	return nil
}

// claimAlone opens a worker, claims one message and closes the connection:
// the crash.
func (run *scaleRun) claimAlone(ctx context.Context, path, worker string, cfg store.ClaimerConfig, d *scaleDrain) (store.ClaimedMessage, error) {
	db, err := openWorker(ctx, path)
	if err != nil {
		return store.ClaimedMessage{}, err
	}
	defer db.Close()
	cl, err := db.NewClaimer(ctx, worker, cfg)
	if err != nil {
		return store.ClaimedMessage{}, err
	}
	defer cl.Close()
	b, err := cl.Claim(ctx, run.clk.Now(), s21Lease, 1)
	if err != nil || len(b.Messages) == 0 {
		return store.ClaimedMessage{}, err
	}
	d.recordClaim(worker, b)
	return b.Messages[0], nil
}

// drainAs is one drain worker: claim, process, finalize until nothing is
// claimable, counting the pages its connection reads.
func (run *scaleRun) drainAs(ctx context.Context, path, worker string, cfg store.ClaimerConfig, d *scaleDrain) error {
	db, err := openWorker(ctx, path)
	if err != nil {
		return err
	}
	defer db.Close()
	cl, err := db.NewClaimer(ctx, worker, cfg)
	if err != nil {
		return err
	}
	defer cl.Close()
	before, err := db.PageReads(ctx)
	if err != nil {
		return err
	}
	drained := 0
	for ctx.Err() == nil {
		b, err := cl.Claim(ctx, run.clk.Now(), s21Lease, 1)
		if err != nil {
			return err
		}
		d.recordClaim(worker, b)
		if len(b.Messages) == 0 {
			break
		}
		// Processing is empty here: the lesson is the cost of the claim.
		f, err := cl.Finalize(ctx, b.Messages, run.clk.Now())
		if err != nil {
			return err
		}
		d.recordFinal(worker, b.Messages[0].Token, f)
		drained += len(f.Finalized)
	}
	after, err := db.PageReads(ctx)
	if err != nil {
		return err
	}
	d.mu.Lock()
	d.pages += after - before
	d.drained += drained
	d.mu.Unlock()
	return ctx.Err()
}

func (d *scaleDrain) recordClaim(worker string, b store.ClaimedBatch) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.busy += b.Stats.BusyRetries
	if len(b.Messages) == 0 {
		d.empty++
		return
	}
	d.claimUs = append(d.claimUs, float64(b.Held.Microseconds()))
	for _, m := range b.Messages {
		d.claims = append(d.claims, scaleClaimEntry{worker: worker, id: m.ID, token: m.Token})
	}
}

func (d *scaleDrain) recordFinal(worker string, token int64, f store.FinalizedBatch) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.busy += f.Stats.BusyRetries
	d.finalUs = append(d.finalUs, float64(f.Held.Microseconds()))
	for _, id := range f.Finalized {
		d.finals = append(d.finals, scaleFinalEntry{worker: worker, id: id, token: token, committed: true})
	}
	for _, id := range f.Rejected {
		d.finals = append(d.finals, scaleFinalEntry{worker: worker, id: id, token: token})
	}
}

// duplicates counts committed finalizations beyond the first per message.
func (d *scaleDrain) duplicates() int {
	per := map[int64]int{}
	dup := 0
	for _, f := range d.finals {
		if f.committed {
			if per[f.id]++; per[f.id] > 1 {
				dup++
			}
		}
	}
	return dup
}

// pagesPerMessage is the drain workers' page reads per message they finalized.
func (d *scaleDrain) pagesPerMessage() float64 {
	return round2(float64(d.pages) / float64(max(d.drained, 1)))
}

// usPerMessage is the median claim transaction plus the median finalize
// transaction, each its committed attempt alone (waiting excluded).
func (d *scaleDrain) usPerMessage() float64 {
	return round2(bench.Median(d.claimUs) + bench.Median(d.finalUs))
}

// measure sets the metrics: per drain, then growth per claim, then the
// invariants summed over the four drains.
func (run *scaleRun) measure(r *lab.Result) {
	dup, lost := 0, 0
	for _, d := range run.drains {
		key := d.claim.Name
		if key == store.PendingOnlyScaleClaim.Name {
			key = store.IndexedScaleClaim.Name // the variant stands in for the indexed claim
		}
		r.SetMetric(key+"_pages_per_message_"+d.size, d.pagesPerMessage())
		r.SetMetric(key+"_us_per_message_"+d.size, d.usPerMessage())
		r.SetMetric("backlog_"+d.size, float64(d.backlog))
		dup += d.duplicates()
		lost += d.lost
	}
	for _, key := range []string{"lesson", "indexed"} {
		small, _ := r.Metric(key + "_pages_per_message_small")
		large, _ := r.Metric(key + "_pages_per_message_large")
		r.SetMetric(key+"_cost_growth", round2(large/math.Max(small, 1e-9)))
		smallUs, _ := r.Metric(key + "_us_per_message_small")
		largeUs, _ := r.Metric(key + "_us_per_message_large")
		r.SetMetric(key+"_time_growth", round2(largeUs/math.Max(smallUs, 1e-9)))
	}
	r.SetMetric("duplicates", float64(dup))
	r.SetMetric("lost", float64(lost))
}

// tables renders the drains, the query plans and the forced expiries.
func (run *scaleRun) tables() []lab.Table {
	drains := lab.Table{
		Title: "Drains: cost per message",
		Note: "Pages/msg is what SQLite read per message (claim and finalize; sqlite3_db_status cache hits plus misses on the " +
			"drain workers' connections), near-repeatable: the checks compare it. µs/msg is the median claim transaction " +
			"plus the median finalize transaction, BEGIN to COMMIT of the committed attempt: real time, so it varies with the " +
			"machine and what else runs on it.",
		Interleaved: true,
		Columns:     []string{"Claim", "Backlog", "Messages", "Pages/msg", "µs/msg", "Claims", "Empty claims", "BUSY retries", "Split", "Duplicates", "Lost"},
	}
	plans := lab.Table{
		Title:   "Query plans (EXPLAIN QUERY PLAN of each claim's select, on its large backlog)",
		Note:    "SCAN OutboxMessages reads every row; SCAN … USING INDEX walks the partial index from the oldest unprocessed message.",
		Columns: []string{"Claim", "Plan"},
	}
	expiries := lab.Table{
		Title: "Forced lease expiry: who held what, who took it over",
		Note: "Worker-A crashed holding the oldest message; Worker-B stalled holding the next. After the leases expired the " +
			"drain reclaimed both with a new token; Worker-B's late finalize presented its old one.",
		Interleaved: true,
		Columns:     []string{"Claim", "Backlog", "Message", "Held by", "Token", "Reclaimed by (token)", "Late finalize", "Committed finalizations"},
	}
	for _, d := range run.drains {
		split := map[string]int{}
		for _, f := range d.finals {
			if f.committed && slices.Contains(s21Drainers, f.worker) {
				split[f.worker]++
			}
		}
		drains.AddRow(d.claim.Name, fmt.Sprintf("%d (%s)", d.backlog, d.size), d.drained, lab.FormatNumber(d.pagesPerMessage()),
			lab.FormatNumber(d.usPerMessage()), len(d.claims), d.empty, d.busy,
			fmt.Sprintf("%s %d, %s %d", s21Drainers[0], split[s21Drainers[0]], s21Drainers[1], split[s21Drainers[1]]),
			d.duplicates(), d.lost)
		if d.size == "large" {
			plans.AddRow(d.claim.Name, strings.Join(d.plan, " / "))
		}
		for _, e := range d.expiries {
			var took []string
			committed := 0
			for _, c := range d.claims {
				if c.id == e.id && c.worker != e.holder {
					took = append(took, fmt.Sprintf("%s (%d)", c.worker, c.token))
				}
			}
			for _, f := range d.finals {
				if f.id == e.id && f.committed {
					committed++
				}
			}
			expiries.AddRow(d.claim.Name, d.backlog, e.id, e.holder, e.token, strings.Join(took, ", "), e.late, committed)
		}
	}
	return []lab.Table{drains, plans, expiries}
}

// statementText drops a script's final semicolon: reports add their own.
func statementText(sql string) string { return strings.TrimSuffix(strings.TrimSpace(sql), ";") }

func round2(x float64) float64 { return math.Round(x*100) / 100 }
