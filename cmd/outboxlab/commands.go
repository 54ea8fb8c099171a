package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/outboxlab/outboxlab/course"
	"github.com/outboxlab/outboxlab/internal/progress"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/reports"
	"github.com/outboxlab/outboxlab/runfolder"
	"github.com/outboxlab/outboxlab/scenarios"
	"github.com/outboxlab/outboxlab/store"
)

var formatFlag = &cli.StringFlag{Name: "format", Value: "text", Usage: "output `FORMAT`: text or json"}

func checkFormat(c *cli.Context) (string, error) {
	f := c.String("format")
	if f != "text" && f != "json" {
		return "", usagef("--format must be text or json, not %q", f)
	}
	return f, nil
}

func listCommand() *cli.Command {
	return &cli.Command{
		Name:         "list",
		Usage:        "list every scenario with its lesson title and mistake variants",
		Flags:        []cli.Flag{formatFlag},
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			format, err := checkFormat(c)
			if err != nil {
				return err
			}
			if c.Args().Present() {
				return usagef("list takes no arguments (got %q)", c.Args().First())
			}
			if format == "json" {
				type entry struct {
					Name     string   `json:"name"`
					Title    string   `json:"title"`
					Variants []string `json:"variants"`
					// PostgresVariants are the variants only PostgreSQL can
					// run (with --db): SQLite has no row locks.
					PostgresVariants []string `json:"postgres_variants"`
				}
				var out []entry
				for _, sc := range scenarios.All() {
					e := entry{Name: sc.Name, Title: sc.Title, Variants: append([]string{}, sc.VariantNames()...), PostgresVariants: []string{}}
					for _, v := range sc.Variants {
						if v.Engine == store.Postgres {
							e.PostgresVariants = append(e.PostgresVariants, v.Name)
						}
					}
					out = append(out, e)
				}
				return reports.JSONLine(c.App.Writer, out)
			}
			t := lab.Table{Columns: []string{"Scenario", "Lesson", "Variants (--variant)"}}
			for _, sc := range scenarios.All() {
				var names []string
				for _, v := range sc.Variants {
					name := v.Name
					if v.Engine == store.Postgres {
						name += " (PostgreSQL only: --db)"
					}
					names = append(names, name)
				}
				t.AddRow(sc.Name, sc.Title, strings.Join(names, ", "))
			}
			return reports.WriteTable(c.App.Writer, t)
		},
	}
}

func describeCommand() *cli.Command {
	return &cli.Command{
		Name:         "describe",
		Usage:        "explain a scenario: what it teaches, what it leaves unsolved, the SQL it runs, its checks and variants",
		ArgsUsage:    "NAME",
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usagef("describe takes one scenario name (see `outboxlab list`)")
			}
			sc, err := lookup(c.Args().First())
			if err != nil {
				return err
			}
			return describe(c.App.Writer, sc)
		},
	}
}

// indented wraps a lesson's text at 76 columns under a two-space indent,
// its paragraphs apart; the caller prints the first line's indent.
func indented(text string) string {
	lines := reports.Wrap(text, 76)
	for i, l := range lines {
		if i > 0 && l != "" {
			lines[i] = "  " + l
		}
	}
	return strings.Join(lines, "\n")
}

func describe(w io.Writer, sc *lesson.Scenario) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n%s\n\n", sc.Name, sc.Title)
	design := "AFTER: the safe design; a run passes when every invariant holds."
	if sc.Design == lab.Broken {
		design = "BEFORE: a broken design; a run passes when the breakage is reproduced. The design stays unsafe."
	}
	fmt.Fprintf(&b, "Design: %s\n\n", design)
	fmt.Fprintf(&b, "What it teaches\n  %s\n\n", indented(sc.Described(sc.Teaches)))
	fmt.Fprintf(&b, "What it does not solve\n  %s\n\n", indented(sc.Described(sc.DoesNotSolve)))
	if sc.OnPostgres != "" {
		fmt.Fprintf(&b, "On PostgreSQL (--db)\n  %s\n\n", indented(sc.Described(sc.OnPostgres)))
	}
	if scenarios.AcceptsClaimSQL(sc) {
		fmt.Fprintf(&b, "Your own claim (--claim-sql FILE, outboxlab grade)\n  %s\n\n", strings.Join(reports.Wrap(claimSQLConfinement, 76), "\n  "))
	}
	if len(sc.Statements) > 0 {
		b.WriteString("The SQL it runs\n")
		for _, s := range sc.Statements {
			fmt.Fprintf(&b, "  -- %s\n  %s;\n\n", s.Name, strings.ReplaceAll(strings.TrimSpace(s.SQL), "\n", "\n  "))
			if s.Postgres != "" {
				fmt.Fprintf(&b, "  -- the same, as PostgreSQL runs it (--db)\n  %s;\n\n", strings.ReplaceAll(strings.TrimSpace(s.Text(store.Postgres)), "\n", "\n  "))
			}
		}
	}
	var exercises []string
	for _, x := range scenarios.Exercises() {
		if x.Lesson == sc.Name {
			exercises = append(exercises, x.Name+" ("+statementWords(x)+")")
		}
	}
	if len(exercises) > 0 {
		fmt.Fprintf(&b, "Exercises (outboxlab exercise show NAME; outboxlab grade --exercise NAME FILE...)\n  %s\n\n",
			strings.Join(reports.Wrap(strings.Join(exercises, "; "), 76), "\n  "))
	}
	b.WriteString("Checks (a run exits 0 only when all pass)\n")
	for _, ch := range sc.Checks {
		about := sc.Described(ch.About)
		if ch.Engine == store.Postgres {
			about += " (PostgreSQL only)"
		}
		if len(ch.Name) > 34 { // a long name stands on its own line, its text under the column
			fmt.Fprintf(&b, "  %s\n  %-34s %s\n", ch.Name, "", about)
			continue
		}
		fmt.Fprintf(&b, "  %-34s %s\n", ch.Name, about)
	}
	if len(sc.Facts) > 0 {
		b.WriteString("\nFacts of the setup (fixed by the lesson's script: they cannot fail, so they are no checks)\n")
		for _, f := range sc.Facts {
			fmt.Fprintf(&b, "  %-34s %s\n    %s\n", f.Name, f.About, strings.Join(reports.Wrap("why: "+f.Why, 72), "\n    "))
		}
	}
	b.WriteString("\nMistake variants (--variant NAME; each must make a check FAIL)\n")
	if len(sc.Variants) == 0 {
		b.WriteString("  (none)\n")
	}
	for _, v := range sc.Variants {
		name := v.Name
		if v.Engine == store.Postgres {
			name += " (PostgreSQL only: with --db)"
		}
		fmt.Fprintf(&b, "  %s\n    %s\n    breaks: %s\n", name, strings.Join(reports.Wrap(sc.Described(v.Mistake), 72), "\n    "), strings.Join(v.Breaks, ", "))
	}
	_, err := io.WriteString(w, fitLines(b.String(), reports.MaxLine))
	return err
}

// claimSQLConfinement says how a claim file, untrusted input, is confined
// on each engine.
const claimSQLConfinement = "A claim file replaces the lesson's claim: a SELECT of the next claimable Id, then an UPDATE of :id; " +
	"or one UPDATE that takes the oldest claimable message and returns its Id (RETURNING Id). " +
	"It is untrusted input, judged by the engine that runs it. On SQLite the authorizer requires a read-only SELECT and an " +
	"UPDATE of OutboxMessages, on a private copy and on every connection of the run, and SQLite may hold 256 MiB in all. " +
	"With --db it runs on PostgreSQL as a throwaway login role, in a throwaway database made from template0, that the lab " +
	"creates for the run (no attribute, no membership, rights: CONNECT to that database, USAGE and CREATE on the run's " +
	"schema only) and drops afterwards; PostgreSQL's own parser first requires a read-only SELECT and an UPDATE of " +
	"OutboxMessages that call no VOLATILE function and read only the run's tables. The URL's login needs CREATEROLE and " +
	"CREATEDB, and pg_hba.conf must accept the role's password login."

func runCommand(s *settings) *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "run scenarios by name (or --all) and write their reports",
		ArgsUsage: "NAME... | --all",
		Flags: append([]cli.Flag{
			&cli.BoolFlag{Name: "all", Usage: "run every scenario"},
			&cli.StringFlag{Name: "variant", Usage: "run with the known mistake `NAME` (outboxlab describe SCENARIO lists them)"},
			&cli.StringFlag{Name: "out", Value: "run-reports", Usage: "the `FOLDER` for the reports"},
			&cli.BoolFlag{Name: "keep-db", Usage: "keep each run's SQLite database for the sqlite3 shell (with --db: its schema on the server)"},
			dbFlag,
			&cli.StringFlag{Name: "broker", Value: "lab", Usage: "the `BROKER` of sessions 18, 19 and 20: lab (its own, a few tables on the " +
				"scenario clock), nats (an embedded NATS JetStream) or nats://HOST:PORT (that server)"},
			&cli.BoolFlag{Name: "html", Usage: "also write each report as a self-contained HTML page beside it (and index.html in --out with --all)"},
			&cli.StringFlag{Name: "repeat", Value: "1", Usage: "run each scenario `N` times; fails if any run breaks an invariant"},
			formatFlag,
			&cli.StringFlag{Name: "claim-sql", Usage: "judge your own claim `FILE` (a SELECT of the next claimable Id, then an UPDATE of :id; or one UPDATE ... RETURNING Id) by session 15's checks; with --db as a throwaway login role in a throwaway database"},
			&cli.BoolFlag{Name: "processes", Usage: "run the lessons' workers, relays and consumers as child processes: each crash a real SIGKILL, each stall a real SIGSTOP and SIGCONT, session 22's shutdown a real SIGTERM"},
		}, lessonFlags()...),
		OnUsageError: onUsageError,
		Action:       func(c *cli.Context) error { return runAction(c, s) },
	}
}

// runPlan is a validated `run` command line.
type runPlan struct {
	scenarios []*lesson.Scenario
	variant   string
	out       string
	keepDB    bool
	repeat    int
	format    string
	options   lesson.Options
	now       func() time.Time
	// html writes each report's page beside it; with all, index lists one
	// page per scenario for index.html (see indexRun), so memory does not
	// grow with --repeat.
	html  bool
	all   bool
	index []reports.IndexEntry
}

// parseRun validates a `run` command line, part by part: the scenario
// names, the variant, the lessons' options (parseOptions) and the claim
// file.
func parseRun(c *cli.Context, s *settings) (*runPlan, error) {
	p := &runPlan{variant: c.String("variant"), out: c.String("out"), keepDB: c.Bool("keep-db"), now: s.now,
		html: c.Bool("html"), all: c.Bool("all"), options: s.options()}
	p.options.Processes = c.Bool("processes")
	var err error
	if p.repeat, err = parseCount("repeat", c.String("repeat")); err != nil {
		return nil, err
	}
	if p.format, err = checkFormat(c); err != nil {
		return nil, err
	}
	if progress.IsTerminal(c.App.ErrWriter) {
		// Long work (the explorer, session 23's trials) says how far it
		// is on a terminal; a log or a pipe gets only the results.
		p.options.Progress = c.App.ErrWriter
	}
	for _, part := range []func(*cli.Context) error{p.parseNames, p.parseVariant, p.parseRepeat, p.parseOptions, p.parseClaim, p.parseBroker, func(c *cli.Context) error { return p.parseDB(c, s) }} {
		if err := part(c); err != nil {
			return nil, err
		}
	}
	if err := checkOut(p.out, p.reportPaths()...); err != nil {
		return nil, err
	}
	return p, nil
}

// parseNames reads the scenarios to run: names, or --all.
func (p *runPlan) parseNames(c *cli.Context) error {
	switch {
	case p.all && c.Args().Present():
		return usagef("give scenario names or --all, not both")
	case p.all:
		p.scenarios = scenarios.All()
	case !c.Args().Present():
		return usagef("name a scenario to run, or use --all (see `outboxlab list`)")
	}
	for _, name := range c.Args().Slice() {
		sc, err := lookup(name)
		if err != nil {
			return err
		}
		p.scenarios = append(p.scenarios, sc)
	}
	return nil
}

// parseVariant checks --variant against the scenarios; with --all it keeps
// only the scenarios that have it.
func (p *runPlan) parseVariant(c *cli.Context) error {
	if c.IsSet("variant") && p.variant == "" {
		return usagef("--variant needs a name (see `outboxlab describe NAME`)")
	}
	if p.variant == "" {
		return nil
	}
	if p.all {
		var with []*lesson.Scenario
		for _, sc := range p.scenarios {
			if _, ok := sc.Variant(p.variant); ok {
				with = append(with, sc)
			}
		}
		if len(with) == 0 {
			return usagef("no scenario has a variant %q (see `outboxlab list`)", p.variant)
		}
		p.scenarios = with
	}
	for _, sc := range p.scenarios {
		v, ok := sc.Variant(p.variant)
		if !ok {
			return &usageError{&lesson.UnknownVariantError{Scenario: sc.Name, Variant: p.variant, Known: sc.VariantNames()}}
		}
		if v.Engine == store.Postgres && !c.IsSet("db") {
			return &usageError{&lesson.EngineVariantError{Scenario: sc.Name, Variant: p.variant, Engine: v.Engine}}
		}
	}
	return nil
}

// parseRepeat checks --repeat.
func (p *runPlan) parseRepeat(*cli.Context) error {
	if p.repeat < 1 {
		return usagef("--repeat must be at least 1, not %d", p.repeat)
	}
	return nil
}

// lessonFlags are the options the lessons read ([scenarios.Options]), one
// flag each, named in its usage by the lessons that read it.
func lessonFlags() []cli.Flag {
	var out []cli.Flag
	for _, o := range scenarios.Options() {
		out = append(out, &cli.StringFlag{Name: o.Flag, Value: o.DefaultText(), Usage: o.ReadBy() + ": " + o.Usage})
	}
	return out
}

// parseOptions reads the lessons' options: each duration or count, set on
// the command line, into the run's options; one set for a run of no
// lesson that reads it would be ignored, so it is refused.
func (p *runPlan) parseOptions(c *cli.Context) error {
	for _, o := range scenarios.Options() {
		if !c.IsSet(o.Flag) {
			continue
		}
		if err := p.setOption(c, o); err != nil {
			return err
		}
		if !slices.ContainsFunc(o.Readers, func(sc *lesson.Scenario) bool { return p.runs(sc.Name) }) {
			names := make([]string, len(o.Readers))
			for i, sc := range o.Readers {
				names[i] = sc.Name
			}
			return usagef("--%s applies to %s, which this command does not run", o.Flag, strings.Join(names, " and "))
		}
	}
	return nil
}

// setOption reads o's value, a duration or a count within its range.
func (p *runPlan) setOption(c *cli.Context, o scenarios.LessonOption) error {
	if o.Duration != nil {
		d, err := parseDuration(o.Flag, c.String(o.Flag))
		if err != nil {
			return err
		}
		*o.Duration(&p.options) = d
		return nil
	}
	n, err := parseCount(o.Flag, c.String(o.Flag))
	if err != nil {
		return err
	}
	if n < 1 || n > o.Max {
		return usagef("--%s must be from 1 to %d, not %d", o.Flag, o.Max, n)
	}
	*o.Count(&p.options) = n
	return nil
}

// parseBroker reads --broker: lab, nats or a nats:// URL, for lessons
// that can run on a real broker, in the lab's process.
func (p *runPlan) parseBroker(c *cli.Context) error {
	kind := c.String("broker")
	switch {
	case kind == "lab":
		return nil
	case kind != "nats" && !natsURL.MatchString(kind):
		return usagef("--broker must be lab, nats or nats://HOST:PORT, not %q", kind)
	case p.options.Processes:
		return usagef("--broker %s runs the relays and consumers in the lab's process; it cannot be combined with --processes yet", kind)
	}
	for _, sc := range p.scenarios {
		if !sc.RealBroker {
			return usagef("--broker %s: scenario %s runs on the lab's broker only; sessions 18, 19 and 20 take a real one", kind, sc.Name)
		}
	}
	p.options.Broker = kind
	return nil
}

// natsURL is a NATS server's URL as --broker takes it: nats://HOST:PORT,
// with an optional user:password@.
var natsURL = regexp.MustCompile(`^nats://([^@/\s]+@)?[^:/@\s]+:[0-9]{1,5}$`)

// runs reports whether the command runs the scenario named name.
func (p *runPlan) runs(name string) bool {
	for _, sc := range p.scenarios {
		if sc.Name == name {
			return true
		}
	}
	return false
}

// dbFlag chooses PostgreSQL instead of the embedded SQLite file.
var dbFlag = &cli.StringFlag{Name: "db", Usage: "run on the PostgreSQL server at `URL` (postgres://...), each run in a schema of its own, instead of an SQLite file"}

// parseDB reads --db and checks, before any run, that the server answers
// (and with --claim-sql, that it can host the claim file's run).
func (p *runPlan) parseDB(c *cli.Context, s *settings) error {
	dsn, err := serverURL(c)
	if err != nil || dsn == "" {
		return err
	}
	if p.options.Submission != nil {
		// The claim file will run as a throwaway login role in a
		// database of its own: check now that they can be made and used
		// (exit 2 with the reason).
		if err := checkGraderServer(c.Context, s, dsn); err != nil {
			return err
		}
	}
	p.options.Database = dsn
	return nil
}

// checkGraderServer prepares the server at dsn for claim files: it removes
// the roles and databases of grades whose process is gone (a SIGKILL
// leaves them), saying so, then checks that a grader role and its
// database can be made and used there. A server that cannot host a grade
// is bad input, exit 2, with the reason.
func checkGraderServer(ctx context.Context, s *settings, dsn string) error {
	swept, err := store.SweepGraders(ctx, dsn)
	if err != nil {
		s.warn(fmt.Errorf("could not look for what killed grades left on the server: %w", err))
	}
	for _, g := range swept {
		var what []string
		if g.Role != "" {
			what = append(what, "role "+g.Role)
		}
		if g.Database != "" {
			what = append(what, "database "+g.Database)
		}
		if len(g.Schemas) > 0 {
			what = append(what, "schemas "+strings.Join(g.Schemas, ", "))
		}
		if g.Err != nil {
			s.warn(fmt.Errorf("could not remove all of %s, left by a grade whose process is gone: %w", strings.Join(what, ", "), g.Err))
			continue
		}
		s.note("removed " + strings.Join(what, ", ") + ", left by a grade whose process is gone")
	}
	if err := store.CheckGraderServer(ctx, dsn); err != nil {
		return &usageError{err}
	}
	return nil
}

// serverURL reads --db: "" without it, else a postgres:// URL of a server
// that answered within [store.ConnectTimeout].
func serverURL(c *cli.Context) (string, error) {
	if !c.IsSet("db") {
		return "", nil
	}
	dsn := c.String("db")
	if !store.IsPostgresURL(dsn) {
		// Not echoed: a keyword form (host=... password=...) holds a password.
		return "", usagef("--db takes a postgres:// URL (or postgresql://), and what it was given does not start so " +
			"(without --db the lab uses an SQLite file)")
	}
	if err := store.CheckServer(c.Context, dsn); err != nil {
		return "", &usageError{err}
	}
	return dsn, nil
}

// parseClaim reads and checks the --claim-sql file, for the scenarios that
// take one and without a variant.
func (p *runPlan) parseClaim(c *cli.Context) error {
	if !c.IsSet("claim-sql") {
		return nil
	}
	claim, err := readClaimSQL(c.Context, c.String("claim-sql"), c.IsSet("db"))
	if err != nil {
		return err
	}
	p.options.Submission = claim
	for _, sc := range p.scenarios {
		if !scenarios.AcceptsClaimSQL(sc) {
			return usagef("--claim-sql: scenario %s does not take claim SQL (session-15-outbox-leasing does)", sc.Name)
		}
	}
	if p.variant != "" {
		return usagef("--claim-sql replaces the lesson's claim; do not combine it with --variant")
	}
	return nil
}

// keptPlace is where a run kept its database: its folder, or on
// PostgreSQL the server and schema.
func keptPlace(res *lab.Result) string {
	if res.Engine == string(store.Postgres) {
		return res.Database
	}
	return filepath.Dir(res.Database)
}

// reportPaths are where the plan's reports would go if they were written now.
func (p *runPlan) reportPaths() []string {
	var paths []string
	for _, sc := range p.scenarios {
		r := &lab.Result{Session: sc.Session, FileTag: sc.FileTag, Variant: p.variant}
		if p.options.Submission != nil {
			r.CustomSQL = p.options.Submission.Source
		}
		paths = append(paths, reports.Path(p.out, r, p.now()))
	}
	return paths
}

func lookup(name string) (*lesson.Scenario, error) {
	sc, err := scenarios.Lookup(name)
	if err != nil {
		return nil, &usageError{err}
	}
	return sc, nil
}

func runAction(c *cli.Context, s *settings) error {
	p, err := parseRun(c, s)
	if err != nil {
		return err
	}
	allPassed := true
	lastKept := ""                     // with --keep-db, named if a stop comes between runs
	firsts := map[string]*lab.Result{} // each scenario's first run, for the Day 15 comparison
	pages := map[string]string{}       // and its page, with --html
	for _, sc := range p.scenarios {
		tally := &repeatTally{}
		for i := 0; i < p.repeat; i++ {
			res, path, page, err := p.runOnce(c, sc)
			if err != nil && lastKept != "" && errors.Is(err, context.Canceled) && !errors.As(err, new(*runfolder.Kept)) {
				return &runfolder.Kept{Dir: lastKept, Err: err}
			}
			if err != nil {
				return err
			}
			if p.keepDB {
				lastKept = keptPlace(res)
			}
			tally.add(res)
			if i == 0 {
				firsts[sc.Name], pages[sc.Name] = res, page
			}
			allPassed = allPassed && res.Passed()
			p.indexRun(res, page, i)
			if err := p.print(c.App.Writer, res, path, page, i); err != nil {
				return err
			}
		}
		if p.repeat > 1 && p.format == "text" {
			printRepeatSummary(c.App.Writer, sc, p.variant, tally)
		}
	}
	if err := p.compareDay15(c.App.Writer, firsts, pages); err != nil {
		return err
	}
	if err := p.writeIndex(c.App.Writer); err != nil {
		return err
	}
	if !allPassed {
		return errChecksFailed
	}
	return nil
}

// compareDay15 writes, and in text format prints, the Day 15 BEFORE and
// AFTER comparison when this invocation ran both scenarios as designed;
// with --html also its page, linking the two runs' pages (pages), and with
// --all the index links it.
func (p *runPlan) compareDay15(w io.Writer, firsts map[string]*lab.Result, pages map[string]string) error {
	before, after := firsts["session-15-competing-workers-no-claim"], firsts["session-15-outbox-leasing"]
	headline, t, ok := scenarios.Day15Comparison(before, after)
	if !ok {
		return nil
	}
	path, err := reports.WriteComparison(p.out, after.Session, headline, t, []string{before.Scenario, after.Scenario}, p.now())
	if err != nil {
		return fmt.Errorf("write the Day 15 comparison: %w", err)
	}
	if p.html {
		var from []reports.ComparisonLink
		for _, r := range []*lab.Result{before, after} {
			rel, err := filepath.Rel(filepath.Dir(path), pages[r.Scenario])
			if pages[r.Scenario] == "" || err != nil {
				rel = ""
			}
			from = append(from, reports.ComparisonLink{Scenario: r.Scenario, Page: filepath.ToSlash(rel)})
		}
		page, err := reports.WriteComparisonHTML(path, headline, t, from)
		if err != nil {
			return fmt.Errorf("write the Day 15 comparison page: %w", err)
		}
		if p.all {
			rel, err := filepath.Rel(p.out, page)
			if err != nil {
				rel = page
			}
			sc, err := scenarios.Lookup(after.Scenario)
			day := ""
			if err == nil {
				day = course.Day(sc) // the comparison stands under Day 15's session in the index
			}
			p.index = append(p.index, reports.IndexEntry{Scenario: "Day 15: BEFORE and AFTER", Title: t.Title, Design: "comparison",
				Passed: true, Verdict: headline, Page: filepath.ToSlash(rel), Day: day})
		}
		if p.format == "text" {
			defer fmt.Fprintln(w, "  page:     "+page)
		}
	}
	if p.format != "text" {
		return nil
	}
	fmt.Fprintln(w, "Day 15, BEFORE and AFTER side by side:")
	for _, l := range reports.Wrap(headline, 76) {
		fmt.Fprintln(w, "  "+l)
	}
	fmt.Fprintln(w, "  report:   "+path)
	return nil
}

// runOnce runs sc once and files its report, and with --html its page. An
// interrupted run is not filed: its error says so and, with --keep-db,
// names its folder.
func (p *runPlan) runOnce(c *cli.Context, sc *lesson.Scenario) (res *lab.Result, path, page string, err error) {
	ctx := c.Context
	if ctx.Err() != nil {
		return nil, "", "", ctx.Err()
	}
	started := p.now().UTC()
	res, err = lesson.Execute(ctx, sc, p.variant, p.options, p.keepDB)
	var stmtErr *store.SlotStatementError
	switch {
	case ctx.Err() != nil && err != nil:
		return nil, "", "", err // with --keep-db, a *runfolder.Kept naming the folder
	case ctx.Err() != nil && p.keepDB:
		return nil, "", "", &runfolder.Kept{Dir: keptPlace(res), Err: ctx.Err()}
	case ctx.Err() != nil:
		return nil, "", "", ctx.Err()
	case errors.As(err, &stmtErr) && p.options.Submission != nil:
		// The engineer's SQL could not run: that is their input's fault.
		// Any other failure is the lab's, exit 3.
		return nil, "", "", usagef("--claim-sql %s: its %s failed in the run: %v", p.options.Submission.Source, stmtErr.Statement, stmtErr.Err)
	case errors.As(err, new(*store.SlotFileError)) && p.options.Submission != nil:
		// On PostgreSQL the server judges the file in the run's own
		// database, before the lesson starts.
		var cfe *store.SlotFileError
		errors.As(err, &cfe)
		return nil, "", "", usagef("--claim-sql %s: %v", p.options.Submission.Source, cfe)
	case err != nil:
		return nil, "", "", err
	}
	path, err = reports.Write(p.out, res, reports.RunInfo{Started: started, Elapsed: p.now().Sub(started)})
	if err != nil {
		// The scenario ran; only filing its report failed (a full disk):
		// exit 3, as bench does.
		return nil, "", "", err
	}
	if p.html {
		page, err = reports.WriteHTML(path, res, reports.RunInfo{Started: started, Elapsed: p.now().Sub(started)})
		if err != nil {
			return nil, "", "", err
		}
	}
	return res, path, page, nil
}

// indexRun keeps what index.html needs of run i of a scenario, and only
// when an index is written (--all --html): one entry per scenario, its
// first run's page, or among repeats its first failed run's.
func (p *runPlan) indexRun(res *lab.Result, page string, i int) {
	if !p.html || !p.all || page == "" {
		return
	}
	rel, err := filepath.Rel(p.out, page)
	if err != nil {
		rel = page
	}
	e := reports.IndexEntry{Scenario: res.Scenario, Variant: res.Variant, Title: res.Title,
		Design: res.DesignName(), Passed: res.Passed(), Verdict: res.Verdict, Page: filepath.ToSlash(rel)}
	if sc, err := scenarios.Lookup(res.Scenario); err == nil {
		e.Day, e.Exercises = course.Day(sc), course.ExerciseNames(sc)
	}
	switch last := len(p.index) - 1; {
	case i == 0 || last < 0:
		p.index = append(p.index, e)
	case p.index[last].Passed && !e.Passed:
		p.index[last] = e
	}
}

// writeIndex writes index.html in --out, linking every page this `run
// --all --html` wrote, and in text format says where it is.
func (p *runPlan) writeIndex(w io.Writer) error {
	if !p.html || !p.all || len(p.index) == 0 {
		return nil
	}
	path, err := reports.WriteIndex(p.out, p.index)
	if err != nil {
		return fmt.Errorf("write the HTML index: %w", err)
	}
	if p.format == "text" {
		fmt.Fprintln(w, "HTML index of these runs: "+path)
	}
	return nil
}

// print shows run i's outcome (page is its HTML page, if any): a JSON line, the whole run when it is the
// only one, or only a failure among repeats.
func (p *runPlan) print(w io.Writer, res *lab.Result, path, page string, i int) error {
	switch {
	case p.format == "json":
		j := reports.NewJSONResult(res, path)
		j.HTML = page
		return reports.JSONLine(w, j)
	case p.repeat == 1:
		printRun(w, res, path, page)
	case !res.Passed():
		fmt.Fprintf(w, "run %d of %d FAILED: %s (report: %s)\n", i+1, p.repeat, strings.Join(res.FailedChecks(), ", "), path)
	}
	return nil
}

// printRun prints one run's outcome, its verdict and where its report is.
// With --html, page is the report's HTML page.
func printRun(w io.Writer, r *lab.Result, path, page string) {
	name := r.Scenario
	if r.Variant != "" {
		name += " --variant " + r.Variant
	}
	status := "PASS"
	if !r.Passed() {
		status = "FAIL"
	}
	fmt.Fprintf(w, "%s: %s\n", name, status)
	for _, line := range reports.Wrap(r.Verdict, 76) {
		fmt.Fprintf(w, "  %s\n", line)
	}
	for _, ch := range r.Checks {
		if !ch.Passed {
			fmt.Fprintf(w, "  FAILED %s: expected %s, observed %s\n", ch.Name, ch.Expected, ch.Observed)
		}
	}
	fmt.Fprintf(w, "  report:   %s\n", path)
	if page != "" {
		fmt.Fprintf(w, "  page:     %s\n", page)
	}
	if r.DatabaseKept {
		fmt.Fprintf(w, "  database: %s\n", r.Database)
	}
	fmt.Fprintln(w)
}

// repeatTally is what the summary of repeated runs needs, and nothing
// more: a run's result is dropped once it is counted, so memory stays flat
// however many runs there are.
type repeatTally struct {
	runs, passed int
	splits       map[string]int // "A/B" claims in the concurrent phase → runs
}

// add counts one run.
func (t *repeatTally) add(r *lab.Result) {
	t.runs++
	if r.Passed() {
		t.passed++
	}
	a, okA := r.Metric("concurrent_claims_a")
	b, okB := r.Metric("concurrent_claims_b")
	if okA && okB {
		if t.splits == nil {
			t.splits = map[string]int{}
		}
		t.splits[fmt.Sprintf("%s/%s", lab.FormatNumber(a), lab.FormatNumber(b))]++
	}
}

// printRepeatSummary prints the tally of repeated runs: how many passed
// and, where the scenario measures one, the distribution of the A/B claim
// split.
func printRepeatSummary(w io.Writer, sc *lesson.Scenario, variant string, t *repeatTally) {
	name := sc.Name
	if variant != "" {
		name += " --variant " + variant
	}
	fmt.Fprintf(w, "%s x%d: %d passed, %d failed\n", name, t.runs, t.passed, t.runs-t.passed)
	if len(t.splits) > 0 {
		keys := make([]string, 0, len(t.splits))
		for k := range t.splits {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s x%d", k, t.splits[k]))
		}
		fmt.Fprintf(w, "  Worker-A/Worker-B claims in the concurrent phase: %s\n", strings.Join(parts, ", "))
		fmt.Fprintln(w, "  (the split varies from run to run; the invariants must not)")
	}
	fmt.Fprintln(w)
}
