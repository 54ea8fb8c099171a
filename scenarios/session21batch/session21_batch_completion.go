// Package session21batch is the lesson session-21-batch-completion: its
// Lesson (the sequence, the checks, the variants and what the registry's
// tests read to prove it), the stages and actors only it uses, its proofs
// (proofs.go) and its tests.
package session21batch

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/clock"
	"github.com/outboxlab/outboxlab/instance"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/store"
)

// The batch-completion lesson's two processes and its script: the first
// fetches as many messages as it has workers, finishes them and stalls in
// its completer past the lease; the second fetches after the lease ran
// out, and does them again.
const (
	bcFirst    = "Process-1"
	bcSecond   = "Process-2"
	bcWorkers  = 4 // the first process's workers: what its fetch takes
	bcBacklog  = 8 // the second process fetches all of them
	bcLease    = 30 * time.Second
	bcPayload  = 64
	bcStallEnd = bcLease + time.Second // when the first process's completer wakes
	// Part 2 starts after part 1 is done: one new message, which the first
	// process's own fetcher takes again before its completer flushes.
	bcRefetchStart = time.Minute
)

// bcLesson is the lesson's design: the fetch-ahead fetch and its fenced
// batch completion.
var bcLesson = store.FetchAheadConfig{SQL: store.FetchAhead, Retry: store.DefaultRetry}

// Lesson is session-21-batch-completion, as the registry lists it: "Session
// 21: a completer that batches completions must fence each row".
var Lesson = lesson.Scenario{
	Name:    "session-21-batch-completion",
	Session: "Session-21",
	FileTag: "Batch-Completion",
	Title:   "Session 21: a completer that batches completions must fence each row",
	Design:  lab.Safe,
	NoFigures: "the course's catalogue states no figure for this lesson, which came after its figures were " +
		"fixed: its checks alone decide a run",
	Teaches: "River's shape in the lab: each process runs one fetcher that claims as many messages as it has " +
		"free workers in one statement, each message with its own fencing token and lease; its workers take them one at " +
		"a time; a completer marks the finished ones Processed in one statement, each row only while it is Processing " +
		"under this process and the token its fetch returned. Batching completions widens the window in which a " +
		"finished message's lease runs out before its completion commits.\n\n{@stalled} fetches {fetch_size} messages " +
		"with a {lease} lease, its workers finish them, and its completer stalls (a GC pause) holding the batch. The " +
		"lease runs out; {@refetcher} fetches the {fetch_size} expired messages again under new tokens, with the " +
		"{unseen} it had not seen, and does them again. Then {@stalled}'s completer wakes and flushes its batch: the " +
		"fence refuses every stale row, and {@refetcher} completes all {backlog}. There LockedBy = :worker refuses each " +
		"stale row as well as the token.\n\nThe re-fetch part shows the token deciding alone: a new message is fetched " +
		"by {@stalled}, whose completer is slow to flush; the lease runs out and {@refetch_owner}'s own fetcher takes " +
		"the message again under a new token, the same owner. The completion under the first token reaches a row still " +
		"Processing under {@refetch_owner}: only ClaimToken = Done.Token refuses it, and the completion under the new " +
		"token commits.\n\nLast, the completer flushes that committed batch again under the same name and token, as a " +
		"retry after a lost COMMIT reply would (the lab repeats it; no fault is injected): only Status = 'Processing' " +
		"refuses it, and {@refetch_owner}, reading back a row Processed under its own name and token at the time its " +
		"flush stamped, counts it as done.",
	DoesNotSolve: "Fencing keeps the rows right; it cannot undo the work: the messages whose completion waited were done " +
		"twice, and any effect outside the database (a send) happened twice. A shorter completion interval narrows the " +
		"window, a renewal of the batch's leases while it waits closes more of it, and the consumer's inbox absorbs what " +
		"remains. `outboxlab bench --claim fetch-ahead` measures the design's throughput beside River's.",
	Statements: []store.Stmt{store.FetchAheadFetch, store.FetchAheadComplete},
	Set:        bcLesson,
	Checks: []lesson.CheckDoc{
		{Name: "redone_messages", Measure: true, About: "messages done by both {@stalled} and {@refetcher}: those of {@stalled}'s " +
			"stalled batch, done again after the lease"},
		{Name: "stale_completions_refused", About: "rows of {@stalled}'s late batch that its guard refused"},
		{Name: "stale_completions_committed", About: "rows a completion marked Processed after another fetch had taken them, in either part"},
		{Name: "results_overwritten", About: "rows whose current fetch's completion was refused because a stale completion got there first, in either part"},
		{Name: "duplicates", About: "completions that committed beyond one per message"},
		{Name: "lost", About: "messages left unprocessed when both processes are done"},
		{Name: "stale_token_refused", About: "re-fetch part: whether ClaimToken = Done.Token alone refused the completion " +
			"under the first token, made while {@refetch_owner}, the same process, held the message under a newer one " +
			"(Processing, LockedBy unchanged)"},
		{Name: "retried_flush_rows", About: "re-fetch part: rows changed when {@refetch_owner}'s completer flushed its " +
			"committed batch again under the same name and tokens (a retry after a lost reply)"},
	},
	Variants: []lesson.Variant{
		{Name: "complete-if-processing", Golden: true, Swaps: []store.Stmt{store.FetchAheadCompleteIfProcessing},
			Mistake: "the batch completion checks only Status = 'Processing', as River's JobSetStateIfRunningMany checks only " +
				"state = 'running': a stale completion goes through while a new owner runs the message",
			Breaks: []string{"stale_completions_refused", "stale_completions_committed", "results_overwritten", "stale_token_refused",
				"retried_flush_rows"},
			Shows: "The late batch of {@stalled} marks its messages Processed although {@refetcher} had fetched them " +
				"again and was working on them; {@refetcher}'s own completion of them is then refused: the rows say " +
				"{@stalled} finished work {@refetcher} did. In the re-fetch part the completion " +
				"under the first token commits too ({stale_token_refused} refused), and the one under the current token is " +
				"refused, so it has no flush to retry: {stale_completions_committed} stale completions committed and " +
				"{results_overwritten} results overwritten in all. Only the owner and the token tell a completion of the current claim from a stale one."},
	},
	Settings:  batchCompletionSettings,
	Breakers:  breakers(),
	Guards:    guards(),
	Processes: processes,
	Run:       runBatchCompletion,
}

// batchCompletionSettings are the options the script runs with: the first
// fetch's size (the first process's workers), the lease, the backlog and
// the messages the first fetch left.
func batchCompletionSettings(lesson.Options) map[string]string {
	return map[string]string{"fetch_size": fmt.Sprint(bcWorkers), "lease": bcLease.String(),
		"backlog": fmt.Sprint(bcBacklog), "unseen": fmt.Sprint(bcBacklog - bcWorkers)}
}

// batchRun is one run of the lesson: its clock, timeline and ledgers.
type batchRun struct {
	env      *lesson.Env
	setup    *store.DB     // the lab's own connection: seeding and reads
	rows     *store.Outbox // the lab's reads of the messages, on setup
	clk      *clock.Manual
	timeline lab.Timeline
	work     map[int64][]string // who did the work of each message
	late     store.FinalizedBatch
	lateBy   string // the process whose completer flushed late
	second   store.FinalizedBatch
	final    map[int64]int // committed completions per message
	refetch  bcRefetch
}

// bcRefetch is part 2: the first process's completions of one message
// under its first token and, after its own fetcher took the message
// again, under the newer one.
type bcRefetch struct {
	id             int64 // the part's message
	stale, current store.FinalizedBatch
	// tokenRefused: the stale completion changed 0 rows, the row as read
	// back Processing under the first process: the token alone decided.
	tokenRefused bool
	// retry is the completer's flush of the current batch sent again after
	// it had committed (cast.RetryWrite), one row per message.
	retry []cast.RetriedRow
}

func runBatchCompletion(ctx context.Context, env *lesson.Env) (*lab.Result, error) {
	run := &batchRun{env: env, clk: clock.NewManual(cast.LessonStart), work: map[int64][]string{}, final: map[int64]int{}}
	setup, err := env.Open(ctx, env.DatabasePath())
	if err != nil {
		return nil, err
	}
	defer setup.Close()
	if err := setup.Migrate(ctx, store.PaymentsOutbox, store.OutboxLeasing, store.OutboxFencing, store.ClaimsAtScale); err != nil {
		return nil, err
	}
	run.setup, run.rows = setup, store.NewOutbox(setup, store.OutboxLesson)
	backlog := store.Backlog{Messages: bcBacklog, First: cast.LessonStart.Add(-time.Minute), Spacing: time.Second, PayloadBytes: bcPayload}
	if err := store.SeedBacklog(ctx, setup, backlog); err != nil {
		return nil, err
	}
	run.event(lab.Event{Kind: lab.KindCommit, Actor: "producer", Action: "commit",
		Detail: fmt.Sprintf("%d Pending messages, one a second", bcBacklog)})
	if err := run.play(ctx, lesson.StatementSet(env, bcLesson)); err != nil {
		return nil, err
	}
	r := &lab.Result{Timeline: run.timeline.Events()}
	lost, err := setup.Count(ctx, store.CountUnprocessed.SQL)
	if err != nil {
		return nil, err
	}
	if r.Schema, err = setup.Schema(ctx); err != nil {
		return nil, err
	}
	run.measure(r, lost)
	lesson.ExpectDocumented(r, env.Scenario.Checks, map[string]float64{"redone_messages": bcWorkers, "stale_completions_refused": bcWorkers,
		"stale_completions_committed": 0, "results_overwritten": 0, "duplicates": 0, "lost": 0, "stale_token_refused": 1,
		"retried_flush_rows": 0})
	r.Tables = []lab.Table{run.messagesTable()}
	r.Verdict = run.verdict(r)
	return r, nil
}

// event adds e to the timeline at the current scenario time.
func (run *batchRun) event(e lab.Event) {
	e.At = clock.Format(run.clk.Now())
	run.timeline.Add(e)
}

// play is the script: the first process fetches, works and stalls in its
// completer; the lease runs out; the second fetches and works; the first
// wakes and flushes its stale batch; the second completes.
func (run *batchRun) play(ctx context.Context, cfg store.FetchAheadConfig) error {
	var procs instance.Set
	defer procs.Close(ctx)
	first, err := run.env.Instances.BatchRelay(ctx, run.env.DatabasePath(), "", bcFirst, cfg)
	if err != nil {
		return err
	}
	procs.Add(first)
	second, err := run.env.Instances.BatchRelay(ctx, run.env.DatabasePath(), "", bcSecond, cfg)
	if err != nil {
		return err
	}
	procs.Add(second)

	held, err := run.fetchAndWork(ctx, first, bcFirst, bcWorkers)
	if err != nil {
		return err
	}
	how, err := first.Stall(clock.Format(run.clk.Now()), "its workers finished its batch")
	if err != nil {
		return err
	}
	run.event(lab.Event{Kind: lab.KindStall, Actor: bcFirst, Action: "completer stalls", Detail: instance.WithHow(
		fmt.Sprintf("a GC pause with %d finished messages waiting for their batch completion", len(held.Messages)), how)})
	run.clk.Set(cast.LessonStart.Add(bcLease))
	run.event(lab.Event{Kind: lab.KindExpiry, Actor: "clock", Action: "lease expiry",
		Detail: fmt.Sprintf("%s's leases ran out at %s, its completion not committed", bcFirst, clock.Format(run.clk.Now()))})
	redo, err := run.fetchAndWork(ctx, second, bcSecond, bcBacklog)
	if err != nil {
		return err
	}
	run.clk.Set(cast.LessonStart.Add(bcStallEnd))
	if how, err = first.Wake(clock.Format(run.clk.Now()), "its batch completion"); err != nil {
		return err
	}
	run.event(lab.Event{Kind: lab.KindWake, Actor: bcFirst, Action: "wakes", Detail: instance.WithHow(
		fmt.Sprintf("the pause ends: its completer flushes the batch of %d it held", len(held.Messages)), how)})
	run.lateBy = bcFirst
	if run.late, err = run.complete(ctx, first, bcFirst, held); err != nil {
		return err
	}
	run.clk.Advance(time.Second)
	if run.second, err = run.complete(ctx, second, bcSecond, redo); err != nil {
		return err
	}
	if err := run.playRefetch(ctx, first); err != nil {
		return err
	}
	return procs.Close(ctx)
}

// playRefetch is part 2: a new message; the first process fetches it, its
// worker does it, and its completer is slow to flush; the lease runs out
// and the process's own fetcher takes the message again under a new
// token; the completer flushes the first token's completion, then the new
// one's.
func (run *batchRun) playRefetch(ctx context.Context, first instance.BatchRelay) error {
	run.clk.Set(cast.LessonStart.Add(bcRefetchStart))
	backlog := store.Backlog{Messages: 1, After: bcBacklog, First: run.clk.Now(), PayloadBytes: bcPayload}
	if err := store.SeedBacklog(ctx, run.setup, backlog); err != nil {
		return err
	}
	run.event(lab.Event{Kind: lab.KindCommit, Actor: "producer", Action: "commit",
		Detail: fmt.Sprintf("part 2: message %d, Pending", bcBacklog+1)})
	held, err := run.fetchAndWork(ctx, first, bcFirst, 1)
	if err != nil || len(held.Messages) == 0 {
		return err
	}
	run.clk.Set(cast.LessonStart.Add(bcRefetchStart + bcLease))
	run.event(lab.Event{Kind: lab.KindExpiry, Actor: "clock", Action: "lease expiry",
		Detail: fmt.Sprintf("%s's lease on message %d ran out at %s, its completer not yet flushed (a slow interval, not a pause: its fetcher runs)",
			bcFirst, held.Messages[0].ID, clock.Format(run.clk.Now()))})
	again, err := run.fetchAndWork(ctx, first, bcFirst, 1)
	if err != nil {
		return err
	}
	if run.refetch.stale, err = run.complete(ctx, first, bcFirst, held); err != nil {
		return err
	}
	id := held.Messages[0].ID
	run.refetch.id = id
	if slices.Contains(run.refetch.stale.Rejected, id) {
		found, err := run.rows.Messages(ctx)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(found, func(m store.Message) bool { return m.ID == id })
		run.refetch.tokenRefused = i >= 0 && found[i].Status == "Processing" && found[i].LockedBy == bcFirst
	}
	run.clk.Advance(time.Second)
	if run.refetch.current, err = run.complete(ctx, first, bcFirst, again); err != nil || len(run.refetch.current.Finalized) == 0 {
		return err
	}
	return run.retryFlush(ctx, first, again)
}

// retryFlush is part 2's last step: the completer flushes the batch it has
// just committed again, a second later, under the same name and tokens, as
// a client's retry policy sends a statement again when its COMMIT's reply
// was lost (cast.RetryWrite: the lab injects no fault, it repeats the
// statement), and reads each row back to learn what the retry did.
func (run *batchRun) retryFlush(ctx context.Context, p instance.BatchRelay, b store.ClaimedBatch) error {
	done := clock.Format(run.clk.Now())
	run.clk.Advance(time.Second)
	rows, err := cast.RetryWrite(ctx, bcFirst, b.Messages, run.refetch.current, done, run.clk.Now(), p.Complete, p.Message)
	run.refetch.retry = rows
	for _, r := range rows {
		run.event(lab.Event{Kind: r.Kind, Refusal: r.Refusal, Subject: r.Message.AggregateKey, Rows: lab.RowsOf(int64(r.Rows)), Actor: bcFirst,
			Action: "complete again", Detail: cast.RetryNote(fmt.Sprintf("its completer's batch (message %d, token %d)",
				r.Message.ID, r.Message.Token)) + r.Outcome})
	}
	return err
}

// fetchAndWork has process name fetch up to limit messages, one statement,
// and its workers do each one.
func (run *batchRun) fetchAndWork(ctx context.Context, p instance.BatchRelay, name string, limit int) (store.ClaimedBatch, error) {
	b, err := p.Fetch(ctx, run.clk.Now(), bcLease, limit)
	if err != nil {
		return b, err
	}
	for _, m := range b.Messages {
		run.event(lab.Event{Kind: lab.KindClaim, Subject: m.AggregateKey, Until: m.LockedUntil, Rows: lab.RowsOf(1), Actor: name,
			Action: "fetch", Detail: fmt.Sprintf("message %d, token %d, lease until %s (one fetch of %d)", m.ID, m.Token, m.LockedUntil, len(b.Messages))})
	}
	run.clk.Advance(time.Second)
	for _, m := range b.Messages {
		run.work[m.ID] = append(run.work[m.ID], name)
		run.event(lab.Event{Kind: lab.KindWork, Subject: m.AggregateKey, Actor: name, Action: "work",
			Detail: fmt.Sprintf("a worker did message %d", m.ID)})
	}
	return b, nil
}

// complete has process name's completer flush its finished messages.
func (run *batchRun) complete(ctx context.Context, p instance.BatchRelay, name string, b store.ClaimedBatch) (store.FinalizedBatch, error) {
	f, err := p.Complete(ctx, b.Messages, run.clk.Now())
	if err != nil {
		return f, err
	}
	fetched := map[int64]store.ClaimedMessage{}
	for _, m := range b.Messages {
		fetched[m.ID] = m
	}
	now := clock.Format(run.clk.Now())
	for _, id := range f.Finalized {
		run.final[id]++
		kind, detail := lab.KindFinalize, fmt.Sprintf("message %d marked Processed in the batch", id)
		if m := fetched[id]; m.LockedUntil <= now {
			kind, detail = lab.KindStale, detail+fmt.Sprintf(", its lease over since %s", m.LockedUntil)
			if w := run.work[id]; len(w) > 0 && w[len(w)-1] != name {
				detail += fmt.Sprintf(" and %s working on it again", w[len(w)-1])
			}
		}
		run.event(lab.Event{Kind: kind, Subject: fetched[id].AggregateKey, Rows: lab.RowsOf(1), Actor: name, Action: "complete", Detail: detail})
	}
	if len(f.Rejected) == 0 {
		return f, nil
	}
	found, err := run.rows.Messages(ctx)
	if err != nil {
		return f, err
	}
	for _, id := range f.Rejected {
		kind, refusal, why := refusedBecause(found, id, name)
		if name != bcFirst && slices.Contains(run.late.Finalized, id) {
			why += ", " + bcFirst + "'s late batch having marked it"
		}
		run.event(lab.Event{Kind: kind, Refusal: refusal, Subject: fetched[id].AggregateKey, Rows: lab.RowsOf(0), Actor: name,
			Action: "complete", Detail: fmt.Sprintf("message %d refused: %s", id, why)})
	}
	return f, nil
}

// refusedBecause says which predicate of the batch completion turned
// process name's row id away, from the row as the lab read it back, and
// what the refusal was: a fence, or (the row Processed under this same
// process) a write that found the work done.
func refusedBecause(found []store.Message, id int64, name string) (lab.Kind, lab.Refusal, string) {
	i := slices.IndexFunc(found, func(m store.Message) bool { return m.ID == id })
	switch {
	case i < 0:
		return lab.KindFenced, lab.RefusedByGone, "the row is gone"
	case found[i].Status != "Processing" && found[i].LockedBy == name:
		return lab.KindNoOp, "", fmt.Sprintf("the row, still %s's, is %s already (Status = 'Processing' refused it)", name, found[i].Status)
	case found[i].Status != "Processing":
		return lab.KindFenced, lab.RefusedByStatus, fmt.Sprintf("the row is %s already (Status = 'Processing' refused it)", found[i].Status)
	case found[i].LockedBy != name:
		return lab.KindFenced, lab.RefusedByToken, fmt.Sprintf("the row is %s's now, under a later fetch's token (LockedBy = :worker and "+
			"ClaimToken = Done.Token each refused it)", found[i].LockedBy)
	default:
		return lab.KindFenced, lab.RefusedByToken, "the row, still Processing under " + name + ", has a later fetch's token (ClaimToken = Done.Token alone refused it)"
	}
}

// owns says the work ledger's last worker on message id is process name:
// the process whose fetch holds it.
func (run *batchRun) owns(name string, id int64) bool {
	w := run.work[id]
	return len(w) > 0 && w[len(w)-1] == name
}

// measure sets the figures from the ledgers and the database.
func (run *batchRun) measure(r *lab.Result, lost int) {
	redone, duplicates := 0, 0
	for _, w := range run.work {
		if slices.Contains(w, bcFirst) && slices.Contains(w, bcSecond) {
			redone++
		}
	}
	for _, n := range run.final {
		duplicates += max(n-1, 0)
	}
	stale := 0
	for _, id := range run.late.Finalized {
		if !run.owns(bcFirst, id) {
			stale++
		}
	}
	overwritten := 0
	for _, id := range run.second.Rejected {
		if slices.Contains(run.late.Finalized, id) {
			overwritten++
		}
	}
	// Part 2: a completion under the first token that committed is stale;
	// the current token's refused after it is an overwritten result.
	if len(run.refetch.stale.Finalized) > 0 {
		stale++
		if len(run.refetch.current.Rejected) > 0 {
			overwritten++
		}
	}
	run.castRoles(r)
	r.SetMetric("redone_messages", float64(redone))
	r.SetMetric("stale_completions_refused", float64(len(run.late.Rejected)))
	r.SetMetric("stale_completions_committed", float64(stale))
	r.SetMetric("results_overwritten", float64(overwritten))
	r.SetMetric("duplicates", float64(duplicates))
	r.SetMetric("lost", float64(lost))
	r.SetFlag("stale_token_refused", run.refetch.tokenRefused)
	if len(run.refetch.retry) > 0 { // a flush never retried measures nothing: the check reads "not measured"
		retried := 0
		for _, row := range run.refetch.retry {
			retried += row.Rows
		}
		r.SetMetric("retried_flush_rows", float64(retried))
	}
}

// castRoles casts the run's processes from its ledgers: stalled is the
// process whose completer flushed the late batch, refetcher the last
// worker of that batch's messages besides it, refetch_owner the process
// whose fetch last did the re-fetch part's message.
func (run *batchRun) castRoles(r *lab.Result) {
	r.SetCast("stalled", run.lateBy)
	for _, id := range slices.Concat(run.late.Finalized, run.late.Rejected) {
		if w := run.work[id]; len(w) > 0 && w[len(w)-1] != run.lateBy {
			r.SetCast("refetcher", w[len(w)-1])
		}
	}
	if w := run.work[run.refetch.id]; len(w) > 0 {
		r.SetCast("refetch_owner", w[len(w)-1])
	}
}

// messagesTable is each message's work and completions, from the ledgers.
func (run *batchRun) messagesTable() lab.Table {
	t := lab.Table{Title: "By message: its work and its completion", Note: "From the work ledger and the completions' " +
		"answers: the Ids each batch completion marked Processed or had refused by its guard. Retried flush: the rows " +
		"the completer's committed flush changed when sent again, (done) where its process read the row back Processed " +
		"under its own name and token at the time its flush stamped.",
		Columns: []string{"Message", "Done by", "Completed by", "Refused for", "Retried flush"}}
	ids := make([]int64, 0, len(run.work))
	for id := range run.work {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	who := func(f store.FinalizedBatch, name string, id int64, refused bool) string {
		if slices.Contains(map[bool][]int64{false: f.Finalized, true: f.Rejected}[refused], id) {
			return name
		}
		return ""
	}
	retried := func(id int64) string {
		for _, r := range run.refetch.retry {
			if r.Message.ID == id && r.Kind == lab.KindNoOp {
				return lab.Rows(int64(r.Rows)) + " (done)"
			} else if r.Message.ID == id {
				return lab.Rows(int64(r.Rows))
			}
		}
		return "-"
	}
	for _, id := range ids {
		join := func(a, b string) string { return strings.Trim(a+", "+b, ", ") }
		t.AddRow(id, strings.Join(run.work[id], ", "),
			orNone(join(join(who(run.late, bcFirst, id, false), who(run.second, bcSecond, id, false)),
				join(who(run.refetch.stale, bcFirst+" (first token)", id, false), who(run.refetch.current, bcFirst+" (new token)", id, false)))),
			orNone(join(join(who(run.late, bcFirst, id, true), who(run.second, bcSecond, id, true)),
				join(who(run.refetch.stale, bcFirst+" (first token)", id, true), who(run.refetch.current, bcFirst+" (new token)", id, true)))),
			retried(id))
	}
	return t
}

// orNone is s, or "-" when empty.
func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// verdict says what the run showed, in its figures.
func (run *batchRun) verdict(r *lab.Result) string {
	m := lesson.MetricsOf(r)
	if r.Passed() {
		return fmt.Sprintf("SAFE DESIGN held, with honest duplicate work: the %s messages whose batch completion stalled past "+
			"their lease were done again by %s; the stale batch's guard refused all %s of its rows, %s completed every "+
			"message once (%s duplicates, %s lost), and no stale completion committed (%s). In the re-fetch part %s's own fetcher "+
			"took message %d again before its completer flushed, and the token alone refused the completion under the first "+
			"token (%s refused): the owner's name is the same, the claim is not; its completer's retried flush of the "+
			"committed batch changed %s. Batching completions widens "+
			"the window; the per-row fence keeps it from corrupting the rows.", m("redone_messages"), r.Fill("{@refetcher}"),
			m("stale_completions_refused"), r.Fill("{@refetcher}"), m("duplicates"), m("lost"), m("stale_completions_committed"),
			r.Fill("{@refetch_owner}"), run.refetch.id, m("stale_token_refused"), lesson.RowsOf(r)("retried_flush_rows"))
	}
	if run.env.Variant != "" {
		return fmt.Sprintf("Stale completions committed: %s; results "+
			"overwritten: %s; stale rows refused: %s; duplicates: %s; lost: %s.", m("stale_completions_committed"), m("results_overwritten"),
			m("stale_completions_refused"), m("duplicates"), m("lost"))
	}
	return fmt.Sprintf("NOT SHOWN: the design did not hold this run; failed checks %v: %s messages redone, %s stale "+
		"completions refused, %s duplicates, %s lost.", r.FailedChecks(), m("redone_messages"), m("stale_completions_refused"),
		m("duplicates"), m("lost"))
}
