// Package session21scale is the lesson session-21-claims-at-scale: its
// Lesson (the sequence, the checks, the variants and what the registry's
// tests read to prove it), the stages and actors only it uses, its proofs
// (proofs.go) and its tests.
package session21scale

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/clock"
	"github.com/outboxlab/outboxlab/instance"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/store"
)

// The mistake variants of session-21-claims-at-scale.
const (
	variantUnindexedClaim  = "unindexed-claim"
	variantDevSizedBacklog = "dev-sized-backlog"
)

// The session-21 drains. The backlogs are small because the registry tests
// run every scenario under the race detector, which makes SQLite's scan
// about forty times slower; cost is counted in pages (in rows on
// PostgreSQL), so the growth shows at any size (`outboxlab bench`
// measures time at 1,000 to 1,000,000).
const (
	s21SmallBacklog = 50
	s21Growth       = 10 // the large backlog is ten times the small one
	s21Lease        = 30 * time.Second
	s21PayloadBytes = 256 // a realistic event: the scan reads it too
	s21LessonMin    = 2.0 // the lesson claim's cost must at least double at 10× the backlog
	s21IndexedMax   = 1.5 // the indexed claim's must stay under 1.5×
	s21Crashed      = "Worker-A"
	s21Stalled      = "Worker-B"
	s21Drains       = 4 // two claims × two backlogs
	s21Expired      = 2 // per drain: the crashed and the stalled worker's message
)

// s21Drainers drain each backlog concurrently, each on its own connection.
var s21Drainers = []string{"Worker-C", "Worker-D"}

// Lesson is session-21-claims-at-scale, as the registry lists it: "Session
// 21: the lesson's claim scans the backlog; an indexed claim of the same
// semantics stays flat".
var Lesson = lesson.Scenario{
	Name:    "session-21-claims-at-scale",
	Session: "Session-21",
	FileTag: "Claims-At-Scale",
	Title:   "Session 21: the lesson's claim scans the backlog; an indexed claim of the same semantics stays flat",
	Design:  lab.Safe,
	Figures: map[string]float64{"duplicates": 0, "lost": 0},
	Teaches: "The lesson's claim (Pending, or Processing with an expired lease, oldest first) is correct and instant on " +
		"six rows. Its OR matches no index, so SQLite reads the whole table, processed history included, on every " +
		"claim: the cost of a message grows with the backlog and a drain costs its square. The indexed claim keeps " +
		"the same predicate and adds ProcessedAtUtc IS NULL, the WHERE clause of a partial index of unprocessed " +
		"messages in creation order: SQLite walks that index from the oldest entry and stops at the first claimable " +
		"message. Same fencing token, same owner- and token-guarded finalize.\n\nEach backlog is drained by {drain_workers} " +
		"workers after a forced lease expiry (one worker crashed holding a message, one stalled past its lease and " +
		"finalizes late with its stale token): the expired messages are reclaimed, the stale finalize changes 0 " +
		"rows, no message is finalized more than once and none is left behind.\n\nThen {@stalled} stalls past its lease on a new " +
		"message and a second claimer under its name takes it back: the stale finalize finds the row Processing and " +
		"still LockedBy {@retaker}, and only the token refuses it.\n\nLast, the second claimer sends its committed " +
		"finalize again under the same name and token, as a retry after a lost COMMIT reply would (the lab repeats " +
		"it; no fault is injected): only Status = 'Processing' refuses it, and the worker, reading back a row " +
		"Processed under its own name and token at the time its finalize stamped, counts it as done. The re-take runs after each drain's cost is " +
		"read: no cost figure counts it.\n\nCost is counted as the pages SQLite reads per message (sqlite3_db_status), " +
		"which is near-repeatable; the time per message is shown beside it.",
	OnPostgres: "On PostgreSQL the same holds with its planner in place of SQLite's: the OR claim scans the table, " +
		"the indexed claim walks the same partial index, and both selects lock the row they return with FOR UPDATE " +
		"SKIP LOCKED, so concurrent claims skip each other's rows instead of serializing. Cost is then the live rows " +
		"the drain's scans read from its schema (pg_stat_user_tables: rows sequential scans returned plus rows index scans " +
		"fetched), not pages: the pages a PostgreSQL scan reads include dead row versions, and how many are left depends " +
		"on when they can be pruned, which any transaction open on the server postpones. Many writers commit at once, " +
		"so the single-writer ceiling below is SQLite's, and `bench --db` measures the server's.",
	DoesNotSolve: "The indexed claim skips the messages under live leases on every claim, so its cost grows with the " +
		"messages in flight (workers × batch), not with the backlog. And SQLite still runs one write transaction " +
		"at a time: throughput stays under the ceiling of a single-row write transaction, whatever the claim. " +
		"`outboxlab bench` measures that ceiling and how close claims, workers and batches get to it.",
	Statements: []store.Stmt{
		store.LessonSelectNext,
		store.IndexedSelectNext,
		store.IndexedClaimOne,
		store.ScaleFinalize,
		{Name: "migration " + store.ClaimsAtScale.Name + ": the index the indexed claim walks",
			SQL: strings.TrimSuffix(strings.TrimSpace(store.ClaimsAtScale.SQL), ";")},
	},
	Set: s21Designs,
	Checks: []lesson.CheckDoc{
		{Name: "lesson_cost_growth", Measure: true, About: "growth of the lesson claim's cost per message from " +
			"{backlog_small} to {backlog_large} messages, bounded below by {lesson_min_growth}x: a scan grows with the backlog"},
		{Name: "indexed_cost_growth", Measure: true, About: "growth of the indexed claim's cost per message from " +
			"{backlog_small} to {backlog_large} messages, bounded above by {indexed_max_growth}x: an index walk stays flat"},
		{Name: "duplicates", About: "messages finalized more than once, over the {drains} drains"},
		{Name: "lost", About: "messages left unprocessed after the {drains} drains, {@crashed}'s included"},
		{Name: "expired_reclaimed", About: "forced-expiry messages ({@crashed}'s and {@stalled}'s, {forced_expiries} " +
			"over the drains) that a drain worker claimed again under a new token"},
		{Name: "stale_finalizes_refused", About: "late finalizes by {@stalled} under its stale token that changed no row, " +
			"over the {drains} drains"},
		{Name: "retake_stale_refused", About: "re-takes in which {@retaker}'s first claim finalized after a second claimer " +
			"under its name took the message again (Processing, LockedBy {@retaker}, a newer token), changed no row, and the " +
			"newer claim's finalize committed: only ClaimToken = :token refused it; over the {drains} drains"},
		{Name: "retake_retried_finalize_rows", About: "rows changed when the re-take's second claimer sent its committed finalize " +
			"again under the same name and token (a retry after a lost reply), summed over the {drains} drains"},
	},
	Settings: claimsAtScaleSettings,
	Variants: []lesson.Variant{
		{Name: variantUnindexedClaim, Migrations: []store.Migration{store.WithoutClaimIndex}, Changes: "the schema: the indexed claim runs without the index {claim_index} creates", Mistake: "the indexed claim ships without the index {claim_index} creates (dropped as unused, or never " +
			"applied in production): the same statement falls back to reading the whole table",
			Breaks: []string{"indexed_cost_growth"},
			Shows: "Without the index {claim_index} creates, the indexed claim's plan becomes a scan of the table, like the lesson " +
				"claim's, and its cost per message grows {indexed_cost_growth}x from {backlog_small} to {backlog_large} messages " +
				"instead of staying flat. The " +
				"statement text is unchanged: a claim's cost depends on the schema it runs on, so the index is part " +
				"of the claim's design."},
		{Name: "finalize-by-id", Swaps: []store.Stmt{store.ScaleFinalizeByID, store.ScaleFinalizeBatchByID}, Mistake: "finalize by Id alone, without the owner and token guard: the stalled worker's late " +
			"finalize completes a message the drain already completed",
			Breaks: []string{"duplicates", "stale_finalizes_refused", "retake_stale_refused", "retake_retried_finalize_rows"},
			Shows: "In the {drains} drains {@stalled} stalls past its lease, the drain reclaims and finalizes its " +
				"message, and {@stalled}'s late finalize by Id commits again (duplicates: {duplicates}; late finalizes " +
				"refused: {stale_finalizes_refused}); the re-take's retried finalize completes its message again " +
				"({retake_retried_finalize_rows} rows). Scale does not change the fencing rule: finalization is guarded " +
				"by the owner and the token, or a worker that outlived its lease completes a message again."},
		{Name: "pending-only-claim", Swaps: []store.Stmt{store.PendingOnlySelectNext, store.PendingOnlyClaimOne,
			store.PendingOnlyClaimBatch, store.PendingOnlyPlanNext}, Mistake: "\"optimize\" the claim to its index-friendly half, Status = 'Pending': fast and flat, " +
			"but the crashed worker's message stays Processing forever",
			Breaks: []string{"lost", "expired_reclaimed", "stale_finalizes_refused", "retake_stale_refused",
				"retake_retried_finalize_rows"},
			Shows: "The Status = 'Pending' claim is fast and flat, but it never takes over a Processing row whose lease " +
				"has expired: the message {@crashed} held when it crashed stays Processing (lost: {lost}, in the drains " +
				"{drains_with_lost}; forced-expiry messages reclaimed: {expired_reclaimed} of {forced_expiries}), and no " +
				"re-take takes back the message {@retaker} stalled on in the drains {drains_without_retake}, so there is " +
				"no finalize to retry. " +
				"Recovery rests on the expired-lease half of the claimable predicate; an index must serve the whole " +
				"predicate, not a faster half of it."},
		{Name: variantDevSizedBacklog, Changes: "the measurement: the large backlog is the small one", Mistake: "measure both claims on the backlog a developer has at hand ({dev_backlog} messages, " +
			"as both backlogs) instead of one {backlog_growth} times larger: the lesson claim looks as flat as the indexed one",
			Breaks: []string{"lesson_cost_growth"},
			Shows: "Measured on {backlog_small} and on {backlog_large} messages, the lesson claim's cost per message grows " +
				"{lesson_cost_growth}x, so a scan whose cost grows with the backlog stays invisible. A cost that grows " +
				"with the backlog shows only on a backlog large enough to grow: measure at production size, or a " +
				"full-table claim looks as good as an indexed one."},
	},
	Guards:    guards(),
	Processes: processes,
	Run:       runClaimsAtScale,
}

// s21Start is when the drains start on the scenario clock.
var s21Start = time.Date(2026, 1, 15, 9, 0, 0, 0, time.UTC)

// scaleRun is one session-21 run: its env (every connection is opened
// through it, so the run's ledger records every statement), clock,
// timeline and drains.
type scaleRun struct {
	env      *lesson.Env
	clk      *clock.Manual
	timeline lab.Timeline
	drains   []*ScaleDrain
}

// s21Designs are the two claim designs a run compares, lesson then
// indexed.
var s21Designs = []store.ScaleSQL{store.LessonScale, store.IndexedScale}

func runClaimsAtScale(ctx context.Context, env *lesson.Env) (*lab.Result, error) {
	run := &scaleRun{env: env, clk: clock.NewManual(s21Start)}
	large := s21SmallBacklog * s21Growth
	if env.Is(variantDevSizedBacklog) {
		large = s21SmallBacklog
	}
	schemaDB, err := run.play(ctx, large)
	if err != nil {
		return nil, err
	}
	r := &lab.Result{Concurrent: true, Database: schemaDB}
	db, err := env.Open(ctx, schemaDB)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	if r.Schema, err = db.Schema(ctx); err != nil {
		return nil, err
	}
	r.Timeline = run.timeline.Events()
	ScaleMetrics(r, run.drains, run.words().Unit, s21Drainers)
	castScaleRoles(r, run.drains)
	recordDrainsWhere(r, run.drains)
	r.Tables = ScaleTables(run.drains, run.words(), s21Drainers)
	run.check(r)
	r.Verdict = run.verdict(r, large)
	return r, nil
}

// play drains a small and a large backlog with each claim design, each in
// a fresh database, and returns the last database's path.
func (run *scaleRun) play(ctx context.Context, large int) (string, error) {
	var path string
	for _, claim := range lesson.StatementSet(run.env, s21Designs) {
		for _, size := range []struct {
			name string
			n    int
		}{{"small", s21SmallBacklog}, {"large", large}} {
			d := &ScaleDrain{Claim: claim, Size: size.name, Backlog: size.n}
			path = run.env.ExtraDatabasePath(fmt.Sprintf("claims-%s-%s", claim.Name, size.name))
			if err := run.drainBacklog(ctx, d, path); err != nil {
				return "", err
			}
			run.drains = append(run.drains, d)
		}
	}
	return path, nil
}

// claimsAtScaleSettings are the bounds the cost checks hold the growth
// to, the index the indexed claim walks, and the drain workers per drain.
func claimsAtScaleSettings(lesson.Options) map[string]string {
	return map[string]string{
		"lesson_min_growth":  lab.FormatNumber(s21LessonMin),
		"indexed_max_growth": lab.FormatNumber(s21IndexedMax),
		"claim_index":        "migration " + store.ClaimsAtScale.Name,
		"drain_workers":      fmt.Sprint(len(s21Drainers)),
		"dev_backlog":        fmt.Sprint(s21SmallBacklog),
		"backlog_growth":     fmt.Sprint(s21Growth),
	}
}

// castScaleRoles casts the run's roles from the drains' ledgers: crashed
// is the holder of a forced expiry whose worker never finalized, stalled
// the holder whose late finalize ran, retaker the worker whose message
// the re-take's second claim took (its claim set the row's LockedBy).
func castScaleRoles(r *lab.Result, drains []*ScaleDrain) {
	for _, d := range drains {
		for _, e := range d.Expiries {
			role := "stalled"
			if e.Late == "-" {
				role = "crashed"
			}
			if _, set := r.Cast[role]; !set {
				r.SetCast(role, e.Holder)
			}
		}
		if _, set := r.Cast["retaker"]; !set && d.Retake.Ran() {
			r.SetCast("retaker", d.Retake.Worker)
		}
	}
}

// recordDrainsWhere records, as settings the texts quote, the drains
// (their labels) that left a message unprocessed and those whose re-take
// the token did not decide alone.
func recordDrainsWhere(r *lab.Result, drains []*ScaleDrain) {
	var lost, noRetake []string
	for _, d := range drains {
		if d.Lost > 0 {
			lost = append(lost, "\""+d.Label()+"\"")
		}
		if !d.Retake.TokenRefused() {
			noRetake = append(noRetake, "\""+d.Label()+"\"")
		}
	}
	r.SetSetting("drains_with_lost", drainList(lost))
	r.SetSetting("drains_without_retake", drainList(noRetake))
}

// drainList joins drain labels, or says "none".
func drainList(labels []string) string {
	if len(labels) == 0 {
		return "none"
	}
	return strings.Join(labels, " and ")
}

// check compares the costs' growth with their bounds and the invariants
// with the documented values.
func (run *scaleRun) check(r *lab.Result) {
	checks := run.env.Scenario.Checks
	v := func(key string) float64 { x, _ := r.Metric(key); return x }
	r.Checks = append(r.Checks,
		lesson.BoundCheck(checks[0], v("lesson_cost_growth"), ">=", s21LessonMin),
		lesson.BoundCheck(checks[1], v("indexed_cost_growth"), "<", s21IndexedMax))
	lesson.ExpectDocumented(r, checks[2:], map[string]float64{"duplicates": 0, "lost": 0,
		"expired_reclaimed": s21Drains * s21Expired, "stale_finalizes_refused": s21Drains, "retake_stale_refused": s21Drains,
		"retake_retried_finalize_rows": 0})
}

// verdict says what the run showed, in the figures the checks compared.
func (run *scaleRun) verdict(r *lab.Result, large int) string {
	m := lesson.MetricsOf(r)
	unit := run.words().Unit
	perMessage := "_" + unit + "_per_message_"
	sizes := fmt.Sprintf("%d and %d messages", s21SmallBacklog, large)
	switch {
	case r.Passed():
		return fmt.Sprintf("SAFE DESIGN at scale. From %s, the lesson claim's cost per message grew %sx "+
			"(%s to %s %s read per message): it scans. The indexed claim, same semantics and same fencing, grew %sx "+
			"(%s to %s %s). In the %s drains the workers reclaimed %s of the %s forced-expiry messages (%s's and "+
			"%s's), %s stale finalizes changed 0 rows, and so did %s against %s's own newer claim, "+
			"refused by the token alone; the drains ended with %s duplicates and %s lost, and %s's retried finalizes "+
			"under its own committed token changed %s.",
			sizes, m("lesson_cost_growth"), m("lesson"+perMessage+"small"), m("lesson"+perMessage+"large"), unit,
			m("indexed_cost_growth"), m("indexed"+perMessage+"small"), m("indexed"+perMessage+"large"), unit,
			m("drains"), m("expired_reclaimed"), m("forced_expiries"), r.Fill("{@crashed}"), r.Fill("{@stalled}"),
			m("stale_finalizes_refused"), m("retake_stale_refused"), r.Fill("{@retaker}"), m("duplicates"), m("lost"),
			r.Fill("{@retaker}"),
			lesson.RowsOf(r)("retake_retried_finalize_rows"))
	case run.env.Variant != "":
		return "" // lesson.Execute opens a variant's verdict with what its checks measured
	default:
		return fmt.Sprintf("NOT SHOWN: the design did not hold this run; failed checks %v. Read the drains table.", r.FailedChecks())
	}
}

// event adds a timeline line at the current scenario time.
func (run *scaleRun) event(kind lab.Kind, actor, action, detail string) {
	run.add(lab.Event{Kind: kind, Actor: actor, Action: action, Detail: detail})
}

// add adds e to the timeline at the current scenario time.
func (run *scaleRun) add(e lab.Event) {
	e.At = clock.Format(run.clk.Now())
	run.timeline.Add(e)
}

// drainBacklog seeds a fresh database with d.Backlog messages, forces a
// lease expiry (one worker crashes holding the oldest message, another
// stalls holding the next), lets the leases run out on the scenario clock,
// drains the backlog with two workers, lets the stalled worker finalize
// late with its stale token, and ends with its re-take (see retake).
func (run *scaleRun) drainBacklog(ctx context.Context, d *ScaleDrain, path string) error {
	label := d.Label()
	setup, err := run.env.Open(ctx, path)
	if err != nil {
		return err
	}
	defer setup.Close()
	if err := run.seed(ctx, setup, d, label); err != nil {
		return err
	}
	cfg := store.ClaimerConfig{SQL: d.Claim, Retry: store.DefaultRetry}
	if err := run.crash(ctx, path, cfg, d); err != nil {
		return err
	}
	stalled, held, err := run.stall(ctx, path, cfg, d)
	if err != nil {
		return err
	}
	var workers instance.Set
	defer workers.Close(ctx)
	workers.Add(stalled)

	run.clk.Advance(s21Lease + time.Second)
	run.event(lab.KindExpiry, "clock", "advance", fmt.Sprintf("scenario clock moves %v: both leases have expired", s21Lease+time.Second))

	// Both drain workers are up before either claims: a child process
	// takes longer to start than a claim takes to run.
	drainers := map[string]instance.ScaleWorker{}
	for _, worker := range s21Drainers {
		w, err := run.env.Instances.ScaleWorker(ctx, path, label, worker, cfg)
		if err != nil {
			return err
		}
		workers.Add(w)
		drainers[worker] = w
	}
	if d.TablePages[0], err = run.tablePages(ctx, setup); err != nil {
		return err
	}
	before, err := run.schemaReads(ctx, setup)
	if err != nil {
		return err
	}
	run.event(lab.KindNote, "scenario", "drain", fmt.Sprintf("%s: %s and %s drain concurrently, each on its own connection", label, s21Drainers[0], s21Drainers[1]))
	err = cast.RunConcurrently(ctx, s21Drainers, func(ctx context.Context, worker string) error {
		return run.drainAs(ctx, drainers[worker], worker, d)
	})
	if err != nil {
		return err
	}
	after, err := run.schemaReads(ctx, setup)
	if err != nil {
		return err
	}
	d.Reads += after - before
	if d.TablePages[1], err = run.tablePages(ctx, setup); err != nil {
		return err
	}
	detail := fmt.Sprintf("%s: %d messages finalized by the drain workers, %d %s read, %d %s",
		label, d.Drained, d.Reads, run.words().Unit, d.Busy, run.words().Retried)
	if run.env.Engine() == store.Postgres {
		detail += fmt.Sprintf("; the table filled %d pages before the drain and %d after", d.TablePages[0], d.TablePages[1])
	}
	run.event(lab.KindNote, "scenario", "drained", detail)

	if err := run.lateFinalize(ctx, stalled, held, d); err != nil {
		return err
	}
	if err := run.retake(ctx, setup, path, cfg, stalled, &workers, d); err != nil {
		return err
	}
	if err := workers.Close(ctx); err != nil {
		return err
	}
	d.Lost, err = setup.Count(ctx, store.CountUnprocessed.SQL)
	return err
}

// tablePages is, on PostgreSQL, the pages the drained table fills; on
// SQLite 0, unread.
func (run *scaleRun) tablePages(ctx context.Context, setup *store.DB) (int64, error) {
	if run.env.Engine() != store.Postgres {
		return 0, nil
	}
	return setup.TablePages(ctx)
}

// schemaReads is, on PostgreSQL, the live rows read so far from the
// drain's schema by every connection, once setup has handed over its own
// statistics; each worker hands over its own when its work ends. On
// SQLite it is 0: each drain worker counts its own connection's pages.
func (run *scaleRun) schemaReads(ctx context.Context, setup *store.DB) (int64, error) {
	if run.env.Engine() != store.Postgres {
		return 0, nil
	}
	if err := setup.FlushStats(ctx); err != nil {
		return 0, err
	}
	return setup.SchemaRowReads(ctx)
}

// seed migrates setup's fresh database (without the claim index in the
// unindexed-claim variant), writes the backlog and reads the claim's plan.
func (run *scaleRun) seed(ctx context.Context, setup *store.DB, d *ScaleDrain, label string) error {
	steps := []store.Migration{store.PaymentsOutbox, store.OutboxLeasing, store.OutboxFencing, store.ClaimsAtScale}
	if d.Claim.Name != store.LessonScale.Name {
		steps = append(steps, run.env.VariantMigrations()...)
	}
	if err := setup.Migrate(ctx, steps...); err != nil {
		return err
	}
	run.clk.Set(s21Start)
	first := s21Start.Add(-time.Duration(d.Backlog) * time.Second)
	err := store.SeedBacklog(ctx, setup, store.Backlog{Messages: d.Backlog, First: first, Spacing: time.Second, PayloadBytes: s21PayloadBytes,
		RoomForVersions: true})
	if err != nil {
		return err
	}
	run.event(lab.KindNote, "scenario", "seed", fmt.Sprintf("%s: %d Pending messages, one a second from %s, in one streamed transaction", label, d.Backlog, clock.Format(first)))
	d.Plan, err = store.ClaimPlan(ctx, setup, d.Claim, run.clk.Now())
	return err
}

// drainAs is one drain worker: claim, process, finalize until nothing is
// claimable. On SQLite it counts the pages its connection reads; on
// PostgreSQL it hands its statistics over and the run reads the rows the
// schema's scans read (see schemaReads).
func (run *scaleRun) drainAs(ctx context.Context, w instance.ScaleWorker, worker string, d *ScaleDrain) error {
	pages := w.PageReads
	if run.env.Engine() == store.Postgres {
		pages = func(context.Context) (int64, error) { return 0, nil } // counted by drainBacklog
	}
	before, err := pages(ctx)
	if err != nil {
		return err
	}
	drained := 0
	for ctx.Err() == nil {
		b, err := w.Claim(ctx, run.clk.Now(), s21Lease, 1)
		if err != nil {
			return err
		}
		d.RecordClaim(worker, b)
		if len(b.Messages) == 0 {
			break
		}
		// Processing is empty here: the lesson is the cost of the claim.
		f, err := w.Finalize(ctx, b.Messages, run.clk.Now())
		if err != nil {
			return err
		}
		d.RecordFinal(worker, b.Messages[0].Token, f)
		drained += len(f.Finalized)
	}
	if err := w.FlushStats(ctx); err != nil {
		return err
	}
	after, err := pages(ctx)
	if err != nil {
		return err
	}
	d.AddWork(after-before, drained)
	return ctx.Err()
}

// words is ScaleWords for the run's engine.
func (run *scaleRun) words() ScaleWording { return ScaleWords[run.env.Engine()] }
