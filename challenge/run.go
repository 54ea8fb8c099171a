package challenge

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/clock"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/store"
)

// DefaultTimeout bounds one sequence in real time.
const DefaultTimeout = 2 * time.Minute

// Options are how a challenge's sequences run.
type Options struct {
	// Relay is the user's program: a shell command line the lab starts
	// once per instance, in Dir.
	Relay string
	Dir   string
	// Timeout bounds one sequence in real time (0: [DefaultTimeout]).
	Timeout time.Duration
	// IdleTimeout bounds, in real time, how long a program may compute
	// between a reply and its next request (0: [DefaultIdleTimeout]).
	IdleTimeout time.Duration
	TempRoot    string
	Warn        func(error)
	KeepDB      bool
	// Database, when set, is a postgres:// URL: the sequence runs in a
	// database of its own on that server, the programs logging in as a
	// role that may use the challenge's tables only ("": SQLite).
	Database string
	// Ordering, when set, serves the programs' requests one at a time in
	// its order (see [Ordering]): --replay, and the explorer's runs.
	Ordering *Ordering

	// decisions, when set, receives the run's decision points (the
	// explorer's).
	decisions *[]decision
}

// Run runs one sequence of ch with the user's relay and returns its
// result, judged and filled as a lesson's run is.
func Run(ctx context.Context, ch *Challenge, seq Sequence, o Options) (*lab.Result, error) {
	if strings.TrimSpace(o.Relay) == "" {
		return nil, fmt.Errorf("challenge %s: no relay command", ch.Name)
	}
	sc := ch.scenario(seq, o)
	return lesson.Execute(ctx, sc, "", lesson.Options{TempRoot: o.TempRoot, Warn: o.Warn, Database: o.Database,
		Program: &store.ProgramSandbox{Tables: ch.Tables}}, o.KeepDB)
}

// scenario is seq as a lesson the lab can execute: its run starts the
// programs in a fresh folder and its checks are the challenge's.
func (ch *Challenge) scenario(seq Sequence, o Options) *lesson.Scenario {
	name, tag, title := ch.Name+"."+seq.Name, fileTag(ch.Name+"-"+seq.Name), ch.Title+" ("+seq.Name+")"
	about := seq.About
	if o.Ordering != nil {
		name, tag = name+".ordered", tag+"-Ordered"
		title = fmt.Sprintf("%s (%s, ordering %s)", ch.Title, seq.Name, o.Ordering)
		about += ", one request at a time, in the ordering " + o.Ordering.String()
	}
	checks := append(slices.Clone(ch.Checks), WorldChecks...)
	if seq.AtLeastOnce {
		checks = slices.DeleteFunc(checks, func(c lesson.CheckDoc) bool { return slices.Contains(ch.OnceChecks, c.Name) })
	}
	return &lesson.Scenario{
		Name:    name,
		Session: "Challenges",
		FileTag: tag,
		Title:   title,
		Design:  lab.Safe,
		Teaches: "Challenge " + ch.Name + ", sequence " + seq.Name + ": " + about + ". " +
			"The lab ran your relay (" + o.Relay + ") once per instance; every statement, provider call and wait was " +
			"a request the lab served, on its clock, and the checks read the database and the lab's ledgers.",
		DoesNotSolve: "A sequence tries the orderings its faults force, not every ordering of your requests; the other " +
			"sequences of the challenge try others (`outboxlab challenge show " + ch.Name + "`).",
		Checks: checks,
		Run: func(ctx context.Context, env *lesson.Env) (*lab.Result, error) {
			return ch.runSequence(ctx, env, seq, o, checks)
		},
	}
}

// WorldChecks are the checks every challenge's run makes of the program
// itself and of the sequence's faults, after the challenge's own.
var WorldChecks = []lesson.CheckDoc{
	{Name: "program_faults", About: "the program's own faults: requests that broke the protocol, statements the sandbox refused, " +
		"hangs, exits before the lab stopped it"},
	{Name: "faults_not_reached", About: "faults the sequence names that the run never reached: the program never made the request " +
		"they wait for, so the sequence tested nothing of them"},
}

// fileTag is name with its words capitalized, for a report's file name.
func fileTag(name string) string {
	words := strings.FieldsFunc(name, func(r rune) bool { return r == '-' || r == '/' || r == '_' })
	for i, w := range words {
		words[i] = strings.ToUpper(w[:1]) + w[1:]
	}
	return strings.Join(words, "-")
}

// runSequence seeds the database, starts the instances, serves them until
// the lab stops them, and judges what they left.
func (ch *Challenge) runSequence(ctx context.Context, env *lesson.Env, seq Sequence, o Options, checks []lesson.CheckDoc) (*lab.Result, error) {
	rl, seeded, err := ch.world(ctx, env, seq)
	if err != nil {
		return nil, err
	}
	defer rl.close()
	var labDB *store.DB // on PostgreSQL, names each program transaction's changes (SQLite names them in the transaction)
	if env.Engine() == store.Postgres {
		if labDB, err = env.Open(ctx, env.DatabasePath()); err != nil {
			return nil, err
		}
		defer labDB.Close()
	}
	w := &world{ch: ch, seq: seq, rules: rl, lab: labDB, engine: env.Engine(), start: cast.LessonStart, clock: clock.NewManual(cast.LessonStart),
		timeline: &lab.Timeline{}, stderr: map[string]string{}, exits: map[string]int64{}, exited: map[string]string{}, statements: map[string]string{}, ledger: env.Ledger}
	w.cond = sync.NewCond(&w.mu)
	w.order, w.relay = o.Ordering, o.Relay
	w.idle = cmp.Or(o.IdleTimeout, DefaultIdleTimeout)
	for _, e := range seeded {
		w.timeline.Add(e)
	}
	w.timeline.Add(lab.Event{At: w.now(), Kind: lab.KindNote, Actor: "lab", Action: "sequence " + seq.Name, Detail: seq.About})

	timeout := o.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	dir := o.Dir
	if dir == "" {
		if dir, err = os.Getwd(); err != nil {
			return nil, err
		}
	}
	// A fault for no instance in particular is one, armed in every
	// instance: the first to reach its boundary meets it.
	anyInstance := map[int]*armed{}
	for i, f := range seq.Faults {
		if f.Instance == "" {
			anyInstance[i] = &armed{Fault: f}
		}
	}
	for _, name := range seq.Instances {
		cfg := store.DefaultConfig
		cfg.BusyTimeout = time.Millisecond
		db, err := env.OpenProgram(ctx, env.DatabasePath(), cfg)
		if err != nil {
			w.stopAll()
			return nil, err
		}
		prog, err := startProgram(o.Relay, dir, name, programEnv(name, ch.Name))
		if err != nil {
			db.Close()
			w.stopAll()
			return nil, err
		}
		in := &inst{name: name, skew: seq.Skews[name], prog: prog, db: db}
		for i, f := range seq.Faults {
			switch {
			case f.Instance == name:
				in.faults = append(in.faults, &armed{Fault: f})
			case f.Instance == "":
				in.faults = append(in.faults, anyInstance[i])
			}
		}
		w.insts = append(w.insts, in)
	}
	var served sync.WaitGroup
	for _, in := range w.insts {
		served.Add(1)
		go func() {
			defer served.Done()
			w.serve(runCtx, in)
		}()
	}
	go func() { // a begin in line wakes when the run is cut short
		<-runCtx.Done()
		w.mu.Lock()
		w.cond.Broadcast()
		w.mu.Unlock()
	}()
	coordinated := make(chan struct{})
	go func() {
		defer close(coordinated)
		w.coordinate(runCtx)
	}()
	served.Wait()
	w.mu.Lock()
	w.gen++
	w.cond.Broadcast()
	w.mu.Unlock()
	<-coordinated
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if runCtx.Err() != nil {
		w.problems = append(w.problems, problem{instance: "all", kind: "hang",
			detail: fmt.Sprintf("the sequence ran longer than %s (real time) and was stopped", timeout)})
	}

	r := &lab.Result{Concurrent: true}
	if err := rl.judge(ctx, w, r); err != nil {
		return nil, err
	}
	r.SetMetric("program_faults", float64(len(w.problems)))
	r.SetMetric("faults_not_reached", float64(len(w.seq.Faults)-len(w.fired)))
	r.SetMetric("busy_retries", float64(w.busy))
	r.SetMetric("begins_in_line", float64(w.queued))
	r.SetMetric("requests", float64(len(w.requests)))
	schema, err := env.Open(ctx, env.DatabasePath())
	if err != nil {
		return nil, err
	}
	r.Schema, err = schema.Schema(ctx)
	schema.Close()
	if err != nil {
		return nil, err
	}
	for _, in := range w.insts {
		if how, ok := w.exited[in.name]; ok {
			w.timeline.Add(lab.Event{At: clock.Format(w.start.Add(time.Duration(w.exits[in.name]) * time.Millisecond)),
				Kind: lab.KindNote, Actor: in.name, Action: "exit", Detail: how})
		}
	}
	r.Timeline = w.timeline.Events()
	r.Tables = append(r.Tables, w.tables()...)
	r.Relay = o.Relay
	if why := w.neverSpoke(); why != "" {
		r.SetSetting(neverSpokeSetting, why)
	}
	if w.order != nil {
		r.SetSetting("ordering", w.order.String())
		r.Tables = append(r.Tables, w.orderingTable())
		r.Concurrent = false // one request at a time, in the ordering's order: the run repeats
		for i := range r.Tables {
			r.Tables[i].Interleaved = false // nor do its tables' rows vary
		}
		if o.decisions != nil {
			*o.decisions = w.decisions
		}
	}
	want := rl.expected(seq)
	want["faults_not_reached"], want["program_faults"] = 0, 0
	lesson.ExpectDocumented(r, checks, want)
	r.Verdict = verdict(ch, seq, w, r)
	return r, nil
}

// neverSpokeSetting is the run's setting that says no instance sent a
// request ([NeverSpoke]).
const neverSpokeSetting = "never_spoke"

// NeverSpoke says, when no instance of run r's relay sent a single
// request, how the first one ended and the last line of its stderr (a
// command line that names no program, a program that fails as it
// starts); "" when one did. Every other sequence would end the same: the
// CLI stops there.
func NeverSpoke(r *lab.Result) string { return r.Settings[neverSpokeSetting] }

// neverSpoke is [NeverSpoke]'s sentence, from the world at the run's end.
func (w *world) neverSpoke() string {
	for _, in := range w.insts {
		if in.requests > 0 {
			return ""
		}
	}
	first := w.insts[0]
	how := "ended"
	for _, p := range w.problems {
		if p.instance == first.name {
			how = p.detail
			break
		}
	}
	why := fmt.Sprintf("no instance sent a request; %s %s", first.name, how)
	lines := strings.Split(strings.TrimSpace(w.stderr[first.name]), "\n")
	if last := strings.TrimSpace(lines[len(lines)-1]); last != "" {
		why += "; its stderr ends: " + clip(last, 160)
	}
	return why
}

// stopAll kills every program started so far (a start that failed half
// way).
func (w *world) stopAll() {
	for _, in := range w.insts {
		in.prog.kill()
		in.closeDB()
	}
}

// tables are the sequence's own ledgers: faults, the program's faults,
// its stderr, the requests.
func (w *world) tables() []lab.Table {
	var out []lab.Table
	faults := lab.Table{Title: "Faults the lab injected", Note: "At the programs' request boundaries, as the sequence names them; fired says whether the run reached the boundary.",
		Columns: []string{"Fault", "Fired"}}
	for _, f := range w.seq.Faults {
		faults.AddRow(f.String(), yesNo(slices.Contains(w.fired, f.String())))
	}
	if len(w.seq.Faults) > 0 {
		out = append(out, faults)
	}
	if len(w.problems) > 0 {
		t := lab.Table{Title: "The program's faults", Note: "What the lab saw the program do wrong outside the checks' invariants; each fails program_faults.",
			Columns: []string{"Instance", "Kind", "What"}}
		for _, p := range w.problems {
			t.AddRow(p.instance, p.kind, p.detail)
		}
		out = append(out, t)
	}
	if len(w.stderr) > 0 {
		t := lab.Table{Title: "The program's stderr", Note: "The last lines each instance wrote to stderr.", Columns: []string{"Instance", "Line"}}
		for _, in := range w.insts {
			lines := strings.Split(w.stderr[in.name], "\n")
			if len(lines) > 12 {
				lines = lines[len(lines)-12:]
			}
			for _, l := range lines {
				if l != "" {
					t.AddRow(in.name, clip(l, 100))
				}
			}
		}
		out = append(out, t)
	}
	req := lab.Table{Title: "Ledger: requests", Note: "Every request the programs sent and what the lab answered, in the order it answered them " +
		"(a commit, a rollback or a broker's write where it was done: a reply held after it says so under Fault).",
		Columns: []string{"#", "Clock", "Instance", "Op", "Asked", "Answered", "Fault"}, VaryingColumns: []string{"#", "Clock", "Instance"}, Interleaved: true}
	requests := slices.Clone(w.requests)
	slices.SortStableFunc(requests, func(a, b request) int { return a.ticket - b.ticket })
	for i := range requests {
		requests[i].seq = i + 1
	}
	if w.order != nil {
		req.Note = "Every request the programs sent and what the lab answered, in the order the ordering let them through; " +
			"the clock is when the answer came (a wait's, later)."
		// One request at a time: the order the ordering let them through,
		// where a reply that waited (wait, work, a held reply) came later.
		slices.SortStableFunc(requests, func(a, b request) int { return a.step - b.step })
		for i := range requests {
			requests[i].seq = i + 1
		}
	}
	for _, r := range requests {
		req.AddRow(r.seq, r.at, r.instance, r.op, r.asked, r.answered, r.fault)
	}
	return append(out, req)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// verdict says what the sequence showed.
func verdict(ch *Challenge, seq Sequence, w *world, r *lab.Result) string {
	m := lesson.MetricsOf(r)
	if r.Passed() {
		return fmt.Sprintf("YOUR RELAY HELD in %s: %s, %s program faults, over %s requests.", seq.Name, w.rules.summary(m),
			m("program_faults"), m("requests"))
	}
	why := ""
	for _, e := range r.Timeline {
		if e.Kind == lab.KindSteal || e.Kind == lab.KindStale || e.Kind == lab.KindUnsent {
			what := strings.TrimSuffix(e.Detail, ".")
			if !strings.HasPrefix(what, e.Actor+" ") {
				what = e.Actor + " " + what
			}
			why = fmt.Sprintf(" The first breach on the timeline, #%d at %s: %s.", e.Seq, e.At, what)
			break
		}
	}
	if x, ok := w.rules.(explainer); ok && why == "" {
		if e := x.explain(); e != "" {
			why = " " + e
		}
	}
	if len(w.problems) > 0 {
		p := w.problems[0]
		why += fmt.Sprintf(" First program fault: %s (%s): %s.", p.instance, p.kind, strings.TrimSuffix(p.detail, "."))
	}
	in := seq.Name
	if w.order != nil {
		in += " in the ordering " + w.order.String() + " (the ordering's table lists its steps and the command that runs it again)"
	}
	return fmt.Sprintf("YOUR RELAY DID NOT HOLD in %s: failed checks %s.%s", in, strings.Join(r.FailedChecks(), ", "), why)
}
