// Package lesson is what a lesson of the lab is and how one run of it is
// framed: a [Scenario] (its sequence, statements, checks, variants and the
// metadata the registry's tests read), the [Env] it runs in and
// [Execute], which runs it in a fresh folder and fills its report's texts
// from the run. Each lesson lives in a folder of its own under scenarios/,
// whose package scenarios lists them in course order.
package lesson

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/instance"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/proc"
	"github.com/outboxlab/outboxlab/runfolder"
	"github.com/outboxlab/outboxlab/store"
)

// Scenario is one lesson the lab can run by name.
type Scenario struct {
	Name    string // registry name, e.g. session-15-outbox-leasing
	Session string // report folder, e.g. Session-15
	FileTag string // report file stem, words joined by hyphens, e.g. Outbox-Leasing
	Title   string
	Design  lab.Design

	// Teaches and DoesNotSolve are what `describe` prints: the mechanism,
	// and the problem it leaves for a later lesson. Like every text of a
	// lesson's they are templates (see [lab.Result.Fill]): a setting they
	// quote is {key}, from Settings.
	Teaches      string
	DoesNotSolve string
	// Settings, when set, are the settings the lesson's texts quote (a
	// retention, a window, a skew, a lease, a busy timeout) as opts set
	// them, key -> text: a run fills its texts from its own options, and
	// `describe` from the defaults, so no text states a setting the run
	// did not use.
	Settings func(opts Options) map[string]string
	// Options are the fields of [Options] the lesson reads that a user may
	// set from the command line: cmd makes a flag of each.
	Options []Option
	// OnPostgres, when set, is what the lesson does differently on
	// PostgreSQL; a run there prints it after Teaches.
	OnPostgres string

	// Statements is the SQL the lesson runs, for `describe`: the store's
	// own statement values, not copies. A run's report prints what its
	// ledger recorded instead.
	Statements []store.Stmt
	// Set is the statement set the lesson passes to [StatementSet], as it
	// teaches it: a variant's swaps land in it, and the registry's tests
	// check that they do (nil for a lesson that runs no set a variant
	// swaps into).
	Set any
	// Checks documents every check a run reports, in report order.
	Checks []CheckDoc
	// Facts documents the figures the lesson's script fixes: a run reports
	// each beside the checks, as a fact of the setup, never as a check.
	Facts []FactDoc
	// Figures are the figures the course fixes for the lesson as designed:
	// metric key -> value, as the course's catalogue states them. The
	// registry's TestCourseFigures proves each against the design's run on
	// every engine, and `outboxlab course` prints them on the lesson's page.
	Figures map[string]float64
	// NoFigures, for a lesson whose Figures are empty, says why the course
	// fixes none for it (TestCourseFigures fails a lesson with neither).
	NoFigures string
	// Variants are the mistake variants; each makes at least one check fail.
	Variants []Variant

	// Breakers, Guards and Processes are what the registry's tests run to
	// prove the lesson (see [Breaker]): every check can fail, every guard
	// decides or is a known gap, and a run with child processes starts
	// exactly these. BrokenByTest names, for a check no statement swap can
	// break, the test in the lesson's folder that makes it fail.
	Breakers     []Breaker
	Guards       []Guard
	Processes    Processes
	BrokenByTest map[string]string
	// GoldenFlags are extra command-line flags of the lesson's golden run
	// (cmd's TestGoldenReports keeps the report of the design, and of each
	// variant marked Golden, as a file): a shorter exploration, say.
	GoldenFlags []string
	// RealBroker says the lesson can run on a real broker (--broker nats,
	// [Options.Broker]): each pipeline takes the one [Env.UseRealBroker]
	// gives. BrokerContract are its checks of the lab broker's own
	// contract, not of the design: on a real broker they are measured in
	// a table of what differed, not judged: the lesson calls
	// [Env.MeasureBrokerContract] before it words its verdict.
	RealBroker     bool
	BrokerContract []string
	// GuardsJudgedBy, when set, says why the lesson's guards are not
	// accounted for one by one: what judges its statements instead (the
	// explorer's invariants, whatever ordering breaks them).
	GuardsJudgedBy string

	// Run executes the scenario in env and returns its result. It must
	// write only inside env.Dir.
	Run func(ctx context.Context, env *Env) (*lab.Result, error)
}

// CheckDoc names a check and what it proves.
type CheckDoc struct {
	Name string
	// About says what the check proves. It is a template the run fills
	// (see [lab.Result.Fill]): it names an actor only as {@role} and a
	// figure only as {metric_key}, never by a name or a number written
	// into it, so it cannot credit an actor or state a figure the run did
	// not show (checkTextsFromTheRun, in TestScenariosAndVariants).
	About string
	// Measure marks a check of what the lesson measures or reproduces (a
	// claim's work as the backlog grows, a lock wait, a duplicate the
	// design has to survive), not of an invariant the design keeps: a
	// variant that fails only such checks is reported as one that kept
	// every invariant and changed what the run measured. Every check of a
	// broken design's lesson (lab.Broken) reproduces the breakage.
	Measure bool
	// Engine, when set, is the only engine on which the check is made
	// (a PostgreSQL row lock has no SQLite counterpart).
	Engine store.Engine
}

// FactDoc names a figure the lesson's script fixes by construction, what
// it counts and why no statement of the lesson can change it. Its metric
// is measured as any other; [Execute] records it as a [lab.Fact].
type FactDoc struct {
	Name  string // the metric key
	About string
	Why   string
}

// Variant is a known mistake the scenario can run with: the lesson's run
// with its statement set changed by Swaps (and its consumer by Designs),
// or, where the mistake is not a statement (a timing, an order, an
// option), the lesson's run with that one thing changed.
type Variant struct {
	Name    string
	Mistake string   // what the code gets wrong
	Breaks  []string // the checks it makes fail
	// Swaps are the mistake statements the variant runs in place of the
	// lesson statements they replace (see [store.Swap]).
	Swaps []store.Stmt
	// Designs are the consumer designs the variant runs in place of the
	// lesson's designs they replace (see [cast.ConsumerDesign.Replaces]).
	Designs []cast.ConsumerDesign
	// Migrations are the schema steps the variant adds after the lesson's
	// migrations (an index dropped, say); the lesson applies them where
	// [Env.VariantMigrations] says, and the report names each as a
	// statement the variant changed.
	Migrations []store.Migration
	// Changes, for a variant whose mistake is not (only) a statement, says
	// what it changes: an order, a timing, an option, a policy, the schema
	// or the code around the statements. With Swaps or Migrations too (a
	// schema change is a migration), the report names both; without, it
	// says the variant changes no SQL statement.
	Changes string
	// Shows is what running the mistake demonstrates, for the report's
	// "What this run shows"; "" falls back to a sentence built from Mistake.
	// It is a template the run fills (see [lab.Result.Fill]): a figure is
	// {metric_key}, an actor {@role}.
	Shows string
	// Engine, when set, is the only engine the mistake can be made on
	// (SQLite has no FOR UPDATE, say).
	Engine store.Engine
	// Golden keeps the variant's report as a golden file beside the
	// design's (see cmd's TestGoldenReports): it teaches something of its
	// own.
	Golden bool
	// ShortestBound, for an explorer's variant, is the shortest bound that
	// holds its shortest counterexample (explore's
	// TestExploreShortestCounterexampleIsMinimal proves each length): the
	// tests run the variant there, not at the default bound, which costs
	// several times more.
	ShortestBound int
}

// Variant returns the named variant, or false.
func (s *Scenario) Variant(name string) (Variant, bool) {
	for _, v := range s.Variants {
		if v.Name == name {
			return v, true
		}
	}
	return Variant{}, false
}

// VariantNames lists the scenario's variant names.
func (s *Scenario) VariantNames() []string {
	names := make([]string, 0, len(s.Variants))
	for _, v := range s.Variants {
		names = append(names, v.Name)
	}
	return names
}

// Options are a run's settings: those a user may change from the command
// line (each a lesson's [Option]), where its databases and children are,
// and the hooks a caller or a test gives it (Warn, Progress, Swap).
type Options struct {
	InboxRetention time.Duration // session 20: how long dedup records live
	DLQRetention   time.Duration // session 20: how long the dead-letter queue keeps messages
	BrokerWindow   time.Duration // session 20: the broker's deduplication window

	SkewSlow time.Duration // session 23: how far Worker-S's clock reads behind the database's
	SkewFast time.Duration // session 23: how far Worker-F's clock reads ahead of the database's

	// ExploreBound is the most actions one ordering of `explore` holds; 0
	// means the scenario's default.
	ExploreBound int

	// Submission, when set, is an engineer's or a student's file for an
	// exercise (--claim-sql's is the claim's): the exercise's lesson (or
	// the explorer, where it runs the exercise's statements) runs it in
	// place of the exercise's key statements.
	Submission *Submission

	// TempRoot is the folder in which each run makes its temporary folder;
	// "" means the system's temporary folder. Tests give each run its own.
	TempRoot string

	// Warn, when set, hears what went wrong without spoiling the run, such
	// as a temporary folder that could not be removed.
	Warn func(error)

	// Progress, when set, is where long work (the explorer's orderings,
	// session 23's race trials) says how far it is: one status line, as
	// package progress draws it. The CLI sets it to stderr when stderr is
	// a terminal; nil says nothing.
	Progress io.Writer

	// Database, when set, is a postgres:// URL: the run creates a schema
	// of its own on that server (see [Env.Open]) instead of an SQLite file
	// in its folder. "" is the embedded SQLite default.
	Database string

	// Program, when set, is the sandbox of a user's program the run
	// starts (a relay challenge's): its connections come from
	// [Env.OpenProgram], and on PostgreSQL they alone log in as a role
	// the run makes for them.
	Program *store.ProgramSandbox

	// Processes runs the lessons' application instances as child
	// processes of the lab (the hidden `worker` subcommand; see package
	// instance), each stall a real SIGSTOP and each crash a real SIGKILL;
	// the report's processes table names them, or says why a scenario
	// started none.
	Processes bool

	// Broker is the broker of a lesson that can use a real one
	// ([Scenario.RealBroker]): "" or "lab" the lab's own, "nats" an
	// embedded NATS JetStream, "nats://HOST:PORT" that server's.
	Broker string

	// ChildTimeout bounds, with Processes, each wait for a child's report,
	// answer or exit; 0 is [proc.DefaultTimeout]. Tests shorten it, so
	// that a child that never answers fails them in seconds.
	ChildTimeout time.Duration

	// Swap, set only by tests (a lesson's [Breaker]s and the registry's
	// guard tests), replaces the lesson's statement set before the run
	// (see [StatementSet]): a test runs the scenario with one statement
	// replaced and asserts which check fails, as a variant would.
	Swap func(set any) any
}

// slotFile is the run's untrusted file, which every connection of the run
// is guarded for, or nil.
func (o Options) slotFile() *store.SlotFile {
	if o.Submission == nil {
		return nil
	}
	return &o.Submission.File
}

// DefaultOptions are the lessons' defaults.
func DefaultOptions() Options {
	return Options{InboxRetention: 24 * time.Hour, DLQRetention: 7 * 24 * time.Hour, BrokerWindow: 2 * time.Minute,
		SkewSlow: 300 * time.Millisecond, SkewFast: 300 * time.Millisecond}
}

// Env is where one run happens.
type Env struct {
	Scenario *Scenario
	Dir      string // the run's temporary folder; the only place it may write
	Variant  string // "" for the lesson as designed
	Options  Options
	// Ledger records every statement the run's connections execute; the
	// report's SQL section is rendered from it.
	Ledger *store.Ledger

	// Instances opens the run's application instances, in the lab's
	// process or (Options.Processes) as child processes: a lesson asks it
	// for each instance and never asks how it runs.
	Instances *instance.Opener

	server *serverSchemas // with Options.Database: the run's schemas on the server
	broker *jetStream     // with Options.Broker: the run's real broker, once a part asked for it
}

// Engine is the engine the options choose.
func (o Options) Engine() store.Engine {
	if o.Database != "" {
		return store.Postgres
	}
	return store.SQLite
}

// Engine is the database engine the run uses.
func (e *Env) Engine() store.Engine {
	if e.server != nil {
		return store.Postgres
	}
	return store.SQLite
}

// Open opens one application instance's own connection to the database at
// path, recording into the run's statement ledger. On PostgreSQL, path
// names one of the run's schemas: the main database file is the run's
// schema, and each extra database file a schema of its own beside it.
func (e *Env) Open(ctx context.Context, path string) (*store.DB, error) {
	cfg := store.DefaultConfig
	cfg.Ledger = e.Ledger
	// An engineer's file is untrusted input: guard every connection.
	cfg.SlotFile = e.Options.slotFile()
	if e.server != nil {
		return e.server.open(ctx, path, cfg)
	}
	return store.Open(ctx, path, cfg)
}

// Target is the database at path as a child process opens it: what
// [Env.Open] opens, the same file or the same schema on the server.
func (e *Env) Target(ctx context.Context, path string) (proc.Target, error) {
	t := proc.Target{Engine: e.Engine(), Path: path, SlotFile: e.Options.slotFile()}
	if e.server != nil {
		schema, err := e.server.schemaFor(ctx, path)
		if err != nil {
			return t, err
		}
		t.Path, t.URL, t.Schema = "", e.server.connURL(), schema // a confined run's children log in as its role
	}
	return t, nil
}

// DatabaseLabel names, for a report, the database that stands for path: its
// file name in the run folder, or on PostgreSQL the run's schema for it.
func (e *Env) DatabaseLabel(path string) string {
	if e.server != nil {
		if schema, ok := e.server.schemaOf(path); ok {
			return schema
		}
	}
	return filepath.Base(path)
}

// DatabaseColumn is the heading of a report column of [Env.DatabaseLabel]s.
func (e *Env) DatabaseColumn() string {
	if e.server != nil {
		return "Schema"
	}
	return "Database file"
}

// DatabaseWhere says, in a report's table note, where the run's databases
// are and how to look into a kept one.
func (e *Env) DatabaseWhere() string {
	if e.server != nil {
		return "Each is a schema of its own on the server; with --keep-db, SET search_path TO it in psql to check it yourself."
	}
	return "Each is a file in the run folder; with --keep-db, open one with the sqlite3 shell to check it yourself."
}

// DatabasePath is the run's main database file.
func (e *Env) DatabasePath() string { return filepath.Join(e.Dir, "outboxlab.db") }

// ExtraDatabasePath is another database file in the run's folder, for
// scenarios that need a fresh database per case.
func (e *Env) ExtraDatabasePath(name string) string { return filepath.Join(e.Dir, name+".db") }

// variant is the run's variant, if it runs one.
func (e *Env) variant() (Variant, bool) {
	if e.Scenario == nil || e.Variant == "" {
		return Variant{}, false
	}
	return e.Scenario.Variant(e.Variant)
}

// VariantMigrations are the schema steps the run's variant adds after the
// lesson's migrations ([Variant.Migrations]), none without a variant.
func (e *Env) VariantMigrations() []store.Migration {
	v, _ := e.variant()
	return v.Migrations
}

// Is reports whether the run uses the named variant.
func (e *Env) Is(variant string) bool { return e.Variant == variant }

// Execute runs sc once in a fresh temporary folder and fills in the result's
// identity. The folder is removed afterwards unless keepDB is set.
func Execute(ctx context.Context, sc *Scenario, variant string, opts Options, keepDB bool) (*lab.Result, error) {
	if variant != "" {
		if _, ok := sc.Variant(variant); !ok {
			return nil, &UnknownVariantError{Scenario: sc.Name, Variant: variant, Known: sc.VariantNames()}
		}
	}
	if v, ok := sc.Variant(variant); ok && v.Engine != "" && v.Engine != opts.Engine() {
		return nil, &EngineVariantError{Scenario: sc.Name, Variant: variant, Engine: v.Engine}
	}
	if err := checkSubmission(sc, variant, opts); err != nil {
		return nil, err
	}
	if err := checkBroker(sc, opts); err != nil {
		return nil, err
	}
	// The folder carries its owner's pid, so a later start can sweep it if
	// this process is killed; a failure to remove it goes to opts.Warn.
	dir, done, err := runfolder.New(opts.TempRoot, "outboxlab-"+sc.Name+"-", keepDB, opts.Warn)
	if err != nil {
		return nil, fmt.Errorf("lesson: make run folder: %w", err)
	}
	defer done()
	env := &Env{Scenario: sc, Dir: dir, Variant: variant, Options: opts, Ledger: &store.Ledger{}}
	if opts.Submission != nil {
		// The report names the file's statements as the student's, even
		// one whose text is the lesson's own.
		env.Ledger.Name(opts.Submission.Stmts()...)
	}
	if opts.Database != "" {
		env.server = newServerSchemas(opts.Database, sc.Name, env.DatabasePath(), opts.slotFile(), opts.Program)
		env.server.keep = keepDB
		defer env.server.drop(keepDB, opts.Warn)
	}
	env.Instances = instance.New(instance.Config{Processes: opts.Processes, Open: env.Open, Target: env.Target, Ledger: env.Ledger,
		Timeout: opts.ChildTimeout})
	defer env.stopRealBroker(opts.Warn) // after the instances, which use it
	defer env.Instances.Stop()
	res, err := sc.Run(ctx, env)
	if err != nil {
		if keepDB && env.server != nil {
			return nil, fmt.Errorf("%s: %w", sc.Name, &runfolder.Kept{Dir: env.server.describe(), Err: err})
		}
		if keepDB {
			return nil, fmt.Errorf("%s: %w", sc.Name, &runfolder.Kept{Dir: dir, Err: err})
		}
		return nil, fmt.Errorf("%s: %w", sc.Name, err)
	}
	if t, ok := env.Instances.ProcessesTable(); ok {
		res.Tables = append(res.Tables, t)
	}
	for _, f := range sc.Facts {
		res.AddFact(f.Name, f.About, f.Why)
	}
	res.Scenario, res.Title, res.Session, res.FileTag = sc.Name, sc.Title, sc.Session, sc.FileTag
	fillTexts(res, sc, opts)
	res.Variant, res.Design, res.Lesson, res.DoesNotSolve = variant, sc.Design, res.Fill(sc.Teaches), res.Fill(sc.DoesNotSolve)
	if env.Engine() == store.Postgres && sc.OnPostgres != "" {
		res.Lesson += "\n\n" + res.Fill(sc.OnPostgres)
	}
	if v, ok := sc.Variant(variant); ok {
		res.Mistake, res.MistakeShows, res.MistakeChanges = res.Fill(v.Mistake), res.Fill(v.Shows), res.Fill(v.Changes)
		if res.MistakeShows == "" {
			res.MistakeShows = defaultShows(res)
		}
		res.Verdict = joinSentences(variantVerdict(res, v), res.Verdict)
		exposeMistake(res, v)
	}
	res.Statements, res.Transactions = ledgerStatements(env.Ledger, env.Engine()), ledgerTransactions(env.Ledger)
	if v, ok := sc.Variant(variant); ok {
		res.VariantStatements = variantStatements(v)
		for _, m := range v.Swaps {
			if !slices.ContainsFunc(res.Statements, func(s lab.Statement) bool { return s.Name == m.Name }) {
				res.MistakesNotRun = append(res.MistakesNotRun, m.Name)
			}
		}
	}
	if res.Database == "" {
		res.Database = env.DatabasePath()
	}
	res.Engine = string(env.Engine())
	if env.server != nil {
		res.Database = env.server.describe()
	}
	res.DatabaseKept = keepDB
	if sub := opts.Submission; sub != nil {
		judgeSubmission(res, sub)
	}
	return res, nil
}

// fillTexts records the settings sc's texts quote as opts set them, then
// fills every check's text, a template the lesson left as written, from
// the run (see [lab.Result.Fill]).
func fillTexts(res *lab.Result, sc *Scenario, opts Options) {
	if sc.Settings != nil {
		for k, v := range sc.Settings(opts) {
			if _, set := res.Settings[k]; !set { // the lesson's own record of what it ran with stands
				res.SetSetting(k, v)
			}
		}
	}
	for i := range res.Checks {
		res.Checks[i].About = res.Fill(res.Checks[i].About)
	}
}

// Described is text, one of sc's templates, as `describe` prints it: each
// setting as the default options set it; a figure or an actor only a run
// shows is named in angle brackets (<stale_ack_rows>, <stale owner>).
func (sc *Scenario) Described(text string) string {
	r := &lab.Result{}
	if sc.Settings != nil {
		r.Settings = sc.Settings(DefaultOptions())
	}
	return lab.ReplacePlaceholders(text, func(key string) string {
		if filled := r.Fill("{" + key + "}"); filled != lab.Unknown {
			return filled
		}
		return "<" + strings.ReplaceAll(strings.TrimPrefix(key, "@"), "_", " ") + ">"
	})
}

// exposeMistake makes a variant that broke no check fail all the same, with
// a check that says so: some options (a broker window long enough, an
// explorer bound too short for the counterexample) hide a mistake, and a
// run that hid it must not pass as if the design were safe.
func exposeMistake(res *lab.Result, v Variant) {
	if !res.Passed() {
		return
	}
	res.Checks = append(res.Checks, lab.Check{
		Name:     "mistake_exposed",
		About:    "the variant's mistake broke at least one of the checks it names (" + strings.Join(v.Breaks, ", ") + ")",
		Expected: "at least 1 failed check", Observed: "0: these options hid the mistake", Passed: false,
	})
	res.MistakeShows = joinSentences("MISTAKE NOT EXPOSED with these options: every check passed, so this run shows nothing "+
		"about the mistake. Run the variant with the lesson's default options to see it. What this run measured:", res.MistakeShows)
	res.Verdict = joinSentences("MISTAKE NOT EXPOSED: with these options the "+v.Name+" mistake broke no check, so this run "+
		"proves nothing about the design; the check mistake_exposed fails for that reason.", res.Verdict)
}

// EngineVariantError is returned for a variant of another engine's: a
// mistake only that engine lets one make.
type EngineVariantError struct {
	Scenario, Variant string
	Engine            store.Engine
}

func (e *EngineVariantError) Error() string {
	if e.Engine == store.Postgres {
		return fmt.Sprintf("variant %s of %s is a PostgreSQL mistake (SQLite has no row locks): run it with --db postgres://...", e.Variant, e.Scenario)
	}
	return fmt.Sprintf("variant %s of %s runs on %s only", e.Variant, e.Scenario, e.Engine)
}

// UnknownVariantError is returned for a variant the scenario does not have.
type UnknownVariantError struct {
	Scenario, Variant string
	Known             []string
}

func (e *UnknownVariantError) Error() string {
	if len(e.Known) == 0 {
		return fmt.Sprintf("scenario %s has no variants (asked for %q)", e.Scenario, e.Variant)
	}
	return fmt.Sprintf("scenario %s has no variant %q; its variants: %s", e.Scenario, e.Variant, strings.Join(e.Known, ", "))
}

// ledgerStatements turns the run's statement ledger into the result's
// statements, the only source of a report's SQL section.
func ledgerStatements(l *store.Ledger, engine store.Engine) []lab.Statement {
	var out []lab.Statement
	for _, e := range l.Entries() {
		s := lab.Statement{
			Name: e.Stmt.Name, SQL: e.Text, Runs: e.Runs, Rows: e.Rows, Failed: e.Failed,
			Mistake: e.Stmt.Mistake, Audit: e.Stmt.Audit, Omitted: e.Stmt.Omitted(), Skipped: e.Skipped,
		}
		if r := e.Stmt.Replaces; r != nil {
			s.Replaces, s.ReplacedSQL = r.Name, r.Text(engine)
		}
		out = append(out, s)
	}
	return out
}

// ledgerTransactions is the ledger's transaction shapes as result data.
func ledgerTransactions(l *store.Ledger) []lab.Transaction {
	var out []lab.Transaction
	for _, t := range l.Transactions() {
		out = append(out, lab.Transaction{Statements: t.Statements, Committed: t.Committed, RolledBack: t.RolledBack})
	}
	return out
}
