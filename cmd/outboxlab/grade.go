package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/outboxlab/outboxlab/explore"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/reports"
	"github.com/outboxlab/outboxlab/scenarios"
	"github.com/outboxlab/outboxlab/scenarios/explorer"
	"github.com/outboxlab/outboxlab/store"
)

func gradeCommand(s *settings) *cli.Command {
	return &cli.Command{
		Name:      "grade",
		Usage:     "judge students' files, one per student, by the lesson's checks, several at once",
		ArgsUsage: "FILE...",
		Description: "Runs the exercise's lesson (--exercise, default claim: session-15-outbox-leasing) with each\n" +
			"FILE's statements in place of the lesson's, up to --jobs at once, and where the interleaving explorer\n" +
			"runs that statement, the explorer too; prints one table: student, file, verdict, and each failed check\n" +
			"with its reason (an explorer's check with its shortest breaking ordering). Writes the reports of each\n" +
			"file and a summary under --out; outboxlab exercise list names the exercises. A file is untrusted\n" +
			"input: it must be a regular file (not a symbolic link) of at most 1 MiB whose statements the engine\n" +
			"that runs it reads as the exercise's (the claim: a read-only SELECT, then an UPDATE of\n" +
			"OutboxMessages), writing only the exercise's table and calling nothing that changes anything:\n" +
			"SQLite's authorizer judges it, or with --db PostgreSQL's own parser. With --db each file runs as a\n" +
			"throwaway login role, in a throwaway database, the lab creates for it (rights: CONNECT to it, USAGE,\n" +
			"CREATE on the run's schema only) and drops afterwards; the URL's login needs CREATEROLE and CREATEDB\n" +
			"(or SUPERUSER), pg_hba.conf must accept the role's password login, and what killed grades left is\n" +
			"removed first. Every verdict reached is printed, even when a report or the summary cannot be written\n" +
			"or the grade is interrupted.\n\n" + gradeRelayUsage + "\n\n" + studentUsage + "\n\n" + gradeFormatUsage + "\n\n" + gradeExitCodes,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "exercise", Value: "claim", Usage: "grade the files as answers to exercise `NAME` (outboxlab exercise list)"},
			&cli.StringFlag{Name: "challenge", Usage: "grade students' own relays, one folder each, by challenge `NAME` (outboxlab challenge list)"},
			&cli.StringFlag{Name: "relay", Usage: "with --challenge, the `COMMAND` line that runs a student's relay in their folder"},
			&cli.StringFlag{Name: "out", Value: "grade-reports", Usage: "the `FOLDER` for the reports"},
			&cli.StringFlag{Name: "student-from", Value: studentAuto, Usage: "name each file's student by its `WAY`: auto, folder or file (see above)"},
			&cli.StringFlag{Name: "jobs", Value: strconv.Itoa(runtime.NumCPU()), Usage: "judge at most `N` files at once"},
			&cli.StringFlag{Name: "timeout", Value: "2m", Usage: "give up judging one file after this `DURATION` (such as 30s or 2m)"},
			&cli.StringFlag{Name: "bound", Value: strconv.Itoa(explorer.DefaultExploreBound),
				Usage: fmt.Sprintf("where the explorer grades too, its orderings hold at most `N` actions (1 to %d)", explore.MaxBound)},
			&cli.StringFlag{Name: "db", Usage: "grade on the PostgreSQL server at `URL` (postgres://...), each file in a database of its own as a throwaway login role; the login needs CREATEROLE and CREATEDB"},
			gradeFormatFlag,
			&cli.BoolFlag{Name: "html", Usage: "also write each report's self-contained HTML page beside it, to hand back to its student"},
			&cli.BoolFlag{Name: "processes", Usage: "run the lesson's workers, relays and consumers as child processes, as run --processes does: each crash a real SIGKILL, each stall a real SIGSTOP and SIGCONT; where the explorer grades too, each of its orderings starts its relays as child processes, which takes longer (raise --timeout)"},
		},
		OnUsageError: onUsageError,
		Action:       func(c *cli.Context) error { return gradeAction(c, s) },
	}
}

// parseBound reads --bound, the explorer's bound for an exercise it
// grades; set for one it does not grade, it is refused.
func (p *gradePlan) parseBound(c *cli.Context) error {
	if !c.IsSet("bound") {
		return nil
	}
	if !p.exercise.Explored() {
		return usagef("--bound sets the explorer's orderings, and the explorer does not grade %s (only its lesson, %s, does)",
			p.exercise.Name, p.exercise.Lesson)
	}
	n, err := parseCount("bound", c.String("bound"))
	if err != nil {
		return err
	}
	if n < 1 || n > explore.MaxBound {
		return usagef("--bound must be from 1 to %d, not %d", explore.MaxBound, n)
	}
	p.options.ExploreBound = n
	return nil
}

// gradeExitCodes is grade's exit codes, as its help prints them.
const gradeExitCodes = `Exit code:
  0    every file passed
  1    every file was judged, and some failed a check
  2    some file could not be judged for its own sake: refused (a link or not a regular file, over
       1 MiB, not the exercise's statements: for the claim a read-only SELECT and an UPDATE of
       OutboxMessages), a statement that failed or ran too long in the run, a run its statements stopped
       that the lesson's own complete (a value of the wrong type, an event never delivered), or no verdict
       within --timeout; also bad input before any file: an unknown exercise, a flag, an --out that cannot
       take reports, a --db server that cannot host a grade
  3    the lab's own failure, not a file's: a report or the summary could not be written (a full disk),
       or a run could not complete (no temporary folder under TMPDIR, a lost database connection, a bug);
       the verdicts reached are printed all the same
  130  interrupted (Ctrl-C, SIGTERM, SIGHUP): the verdicts reached so far are printed first`

// grade is the judgement of one student's file.
type grade struct {
	Student  string `json:"student"`
	Exercise string `json:"exercise"`
	File     string `json:"file"`
	// Verdict is the gradebook's word: passed, failed, refused or not
	// judged (see settle); Reason says why, in the student's words.
	Verdict      string       `json:"verdict"`
	Passed       bool         `json:"passed"`
	Reason       string       `json:"reason"`
	Checks       []gradeCheck `json:"checks"` // every check of every run that judged it
	FailedChecks []string     `json:"failed_checks"`
	Report       string       `json:"report"`
	// ExploreReport is the explorer's report, for an exercise whose
	// statement the explorer runs.
	ExploreReport string `json:"explore_report,omitempty"`
	// Page and ExplorePage are the reports' HTML pages, with --html.
	Page        string `json:"page,omitempty"`
	ExplorePage string `json:"explore_page,omitempty"`
	Error       string `json:"error"`
	// ReportError says why the report of a file that was judged could
	// not be written (a full disk); the verdict stands.
	ReportError string `json:"report_error,omitempty"`

	reasons []string // one line per failed check, in FailedChecks order
	fault   fault    // whose fault Error is
}

// fault is why a file has no verdict: its own input, the lab, or a stop.
type fault int

const (
	noFault     fault = iota
	fileFault         // the file was refused, or its statements failed or ran too long: exit 2
	labFault          // the lab could not judge it (no run folder, a lost connection): exit 3
	interrupted       // the grade was stopped before its verdict: exit 130
)

// verdict is the table's word for g, the gradebook's in capitals.
func (g *grade) verdict() string {
	switch {
	case g.Error != "" && (g.fault == fileFault || g.Verdict == verdictRefused):
		return "REFUSED" // the file's own fault: refused, or its statements failed or ran too long
	case g.Error != "":
		return "NOT JUDGED"
	case g.Passed:
		return "PASS"
	}
	return "FAIL"
}

// gradePlan is a validated `grade` command line.
type gradePlan struct {
	exercise *scenarios.Exercise
	scenario *lesson.Scenario // the exercise's lesson
	files    []string
	students []string // each file's student (studentNames)
	out      string
	jobs     int
	timeout  time.Duration
	format   string
	html     bool           // also write each report's HTML page beside it
	options  lesson.Options // each file's run sets its Claim
	now      func() time.Time
	// fileReport files a report's bytes as [reports.WriteNew] does;
	// tests make it fail as a full disk would.
	fileReport func(path string, data []byte) (string, error)
	ownRuns    sync.Map // the graders whose own run completed (ownRunCompletes)
}

func parseGrade(c *cli.Context, s *settings) (*gradePlan, error) {
	p := &gradePlan{files: c.Args().Slice(), out: c.String("out"), options: s.options(), now: s.now, fileReport: s.fileReport}
	p.options.Processes = c.Bool("processes")
	p.html = c.Bool("html")
	if p.fileReport == nil {
		p.fileReport = reports.WriteNew
	}
	var err error
	if p.jobs, err = parseCount("jobs", c.String("jobs")); err != nil {
		return nil, err
	}
	if p.format, err = checkGradeFormat(c); err != nil {
		return nil, err
	}
	if p.exercise, err = scenarios.LookupExercise(c.String("exercise")); err != nil {
		return nil, &usageError{err}
	}
	p.scenario = p.exercise.Scenario()
	if len(p.files) == 0 {
		return nil, usagef("name the files to grade (e.g. outboxlab grade --exercise %s submissions/*/%s.sql)", p.exercise.Name, p.exercise.Name)
	}
	switch how := c.String("student-from"); how {
	case studentAuto, studentFolder, studentFile:
		p.students = studentNames(p.files, p.exercise.Name, how)
	default:
		return nil, usagef("--student-from must be auto, folder or file, not %q", how)
	}
	if p.jobs < 1 {
		return nil, usagef("--jobs must be at least 1, not %d", p.jobs)
	}
	p.jobs = min(p.jobs, runtime.NumCPU(), len(p.files))
	if p.timeout, err = parseDuration("timeout", c.String("timeout")); err != nil {
		return nil, err
	}
	if err := p.parseBound(c); err != nil {
		return nil, err
	}
	if p.options.Database, err = serverURL(c); err != nil {
		return nil, err
	}
	if p.options.Database != "" {
		// Each file will run as a throwaway login role in a database of
		// its own: remove what killed grades left, then check once that
		// a role and a database can be made and used, so a missing right
		// is exit 2 with its reason rather than every file NOT JUDGED.
		if err := checkGraderServer(c.Context, s, p.options.Database); err != nil {
			return nil, err
		}
	}
	paths := []string{filepath.Join(p.out, "Grade", "Grade-Summary-"+p.now().UTC().Format("20060102T150405Z")+".txt")}
	for i, f := range p.files {
		for _, sc := range p.graders() {
			r := &lab.Result{Session: sc.Session, FileTag: sc.FileTag, CustomSQL: f}
			paths = append(paths, reports.Path(p.reportFolder(i), r, p.now()))
		}
	}
	if err := checkOut(p.out, paths...); err != nil {
		return nil, err
	}
	return p, nil
}

func gradeAction(c *cli.Context, s *settings) error {
	if c.IsSet("challenge") || c.IsSet("relay") {
		return gradeRelays(c, s)
	}
	p, err := parseGrade(c, s)
	if err != nil {
		return err
	}
	started := p.now().UTC()
	grades := gradeAll(c.Context, p)
	// Every verdict reached is printed, whatever happens next: a summary
	// that cannot be written (a full disk) or an interruption loses none.
	var table bytes.Buffer
	if err := writeGradeTable(&table, grades); err != nil {
		return err
	}
	summary, summaryErr := p.fileReport(filepath.Join(p.out, "Grade", "Grade-Summary-"+started.Format("20060102T150405Z")+".txt"),
		append([]byte(fmt.Sprintf("outboxlab grade: %d files judged as answers to exercise %s by %s\n\n",
			len(grades), p.exercise.Name, strings.Join(p.graderNames(), " and "))), table.Bytes()...))
	if err := printGrades(c.App.Writer, p.format, grades, table.Bytes(), summary); err != nil {
		return err
	}
	if c.Context.Err() != nil {
		return c.Context.Err()
	}
	return gradeOutcome(grades, summaryErr)
}

// printGrades prints every grade: a gradebook (csv), one JSON line each,
// or the table and where the summary is (when it was written).
func printGrades(w io.Writer, format string, grades []grade, table []byte, summary string) error {
	switch format {
	case "csv":
		return writeGradebook(w, grades)
	case "json":
		for _, g := range grades {
			if err := reports.JSONLine(w, g); err != nil {
				return err
			}
		}
		return nil
	}
	if _, err := w.Write(table); err != nil {
		return err
	}
	if summary != "" {
		_, err := fmt.Fprintf(w, "\nsummary: %s\n", summary)
		return err
	}
	return nil
}

// gradeOutcome is the exit (see gradeExitCodes): 3 when the lab failed a
// file or a report or the summary could not be written, else 2 when a
// file could not be judged for its own sake, else 1 when one failed a
// check.
func gradeOutcome(grades []grade, summaryErr error) error {
	var labFailed, unwritten, notJudged, failed int
	for _, g := range grades {
		switch {
		case g.fault == labFault:
			labFailed++
		case g.Error != "":
			notJudged++
		case !g.Passed:
			failed++
		}
		if g.ReportError != "" {
			unwritten++
		}
	}
	switch {
	case labFailed > 0 || unwritten > 0 || summaryErr != nil:
		var what []string
		if labFailed > 0 {
			what = append(what, fmt.Sprintf("%d of %d files could not be judged for the lab's own reason", labFailed, len(grades)))
		}
		if unwritten > 0 {
			what = append(what, fmt.Sprintf("%d reports could not be written", unwritten))
		}
		if summaryErr != nil {
			what = append(what, "the summary could not be written: "+summaryErr.Error())
		}
		return fmt.Errorf("grade: %s (every verdict reached is printed above)", strings.Join(what, "; "))
	case notJudged > 0:
		return usagef("grade: %d of %d files could not be judged (each reason is printed with its verdict)", notJudged, len(grades))
	case failed > 0:
		return errChecksFailed
	}
	return nil
}

// gradeAll judges every file, p.jobs at a time, starting them in the
// order given (so after Ctrl-C the verdicts reached are the first files'),
// and returns the grades in that order.
func gradeAll(ctx context.Context, p *gradePlan) []grade {
	grades := make([]grade, len(p.files))
	sem := make(chan struct{}, p.jobs)
	var wg sync.WaitGroup
	for i := range p.files {
		if ctx.Err() == nil {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			grades[i] = p.newGrade(i)
			grades[i].Error, grades[i].fault = "interrupted", interrupted
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			defer func() {
				// A bug of the lab's costs one file its verdict, not the class.
				if r := recover(); r != nil {
					grades[i] = p.newGrade(i)
					grades[i].Error = fmt.Sprintf("the lab failed while judging it (a bug in outboxlab; please report it): %v", r)
					grades[i].fault = labFault
				}
			}()
			grades[i] = gradeFile(ctx, i, p)
		}()
	}
	wg.Wait()
	for i := range grades {
		grades[i].settle()
	}
	return grades
}

// graders are the scenarios that judge a file: the exercise's lesson,
// then the explorer where it runs the exercise's statement.
func (p *gradePlan) graders() []*lesson.Scenario {
	out := []*lesson.Scenario{p.scenario}
	if p.exercise.Explored() {
		if explorer, err := scenarios.Lookup("explore"); err == nil {
			out = append(out, explorer)
		}
	}
	return out
}

// graderNames names p.graders for the summary.
func (p *gradePlan) graderNames() []string {
	var names []string
	for _, sc := range p.graders() {
		names = append(names, sc.Name+"'s checks")
	}
	return names
}

// load reads and checks file i as its student's answer to p's exercise
// and returns the options of the runs that judge it.
func (p *gradePlan) load(ctx context.Context, i int) (lesson.Options, error) {
	opts := p.options
	// A student's file is handed in, not linked: a link in a downloaded
	// folder could make the grade read, and its report and the reason of
	// a refusal quote, any file this machine lets the grader read.
	if st, err := os.Lstat(p.files[i]); err == nil && st.Mode()&os.ModeSymlink != 0 {
		return opts, fmt.Errorf("%w: it is a symbolic link; hand in the file itself", errUnreadable)
	}
	var err error
	opts.Submission, err = loadSubmission(ctx, p.exercise, p.files[i], p.options.Database != "")
	if opts.Submission != nil {
		opts.Submission.Student = p.students[i]
	}
	return opts, err
}

// newGrade is file i's grade before it is judged.
func (p *gradePlan) newGrade(i int) grade {
	return grade{Student: p.students[i], Exercise: p.exercise.Name, File: p.files[i], FailedChecks: []string{}}
}

// reportFolder is the folder of file i's reports: --out, the exercise,
// then the student, so each student's reports are easy to find.
func (p *gradePlan) reportFolder(i int) string {
	return filepath.Join(p.out, p.exercise.Name, p.students[i])
}

// ownRunCompletes says whether judge's run completes with the lesson's
// own statements in p's options, within --timeout: when a run with a
// file's statements fails for no reason the sandbox or the engine names,
// this tells the file's fault from the lab's. A run that completed once
// is not run again.
func (p *gradePlan) ownRunCompletes(ctx context.Context, judge *lesson.Scenario) bool {
	if _, ok := p.ownRuns.Load(judge.Name); ok {
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	opts := p.options
	opts.Submission = nil
	if _, err := lesson.Execute(ctx, judge, "", opts, false); err != nil {
		return false
	}
	p.ownRuns.Store(judge.Name, true)
	return true
}

// gradeFile judges p.files[file]; any failure to judge it is its Error, with
// whose fault it is.
func gradeFile(ctx context.Context, file int, p *gradePlan) grade {
	g := p.newGrade(file)
	notJudged := func(f fault, msg string) grade {
		// A file refused or not judged passed nothing: what an earlier run
		// of it (the lesson's, before the explorer's) found is not its verdict.
		g.Error, g.fault, g.Passed, g.FailedChecks, g.reasons, g.Checks = msg, f, false, nil, nil, nil
		if ctx.Err() != nil {
			g.Error, g.fault = "interrupted", interrupted
		}
		return g
	}
	// The file's check runs once on a tiny database and is not timed:
	// --timeout bounds the runs, which a slow statement can stretch.
	opts, err := p.load(ctx, file)
	switch {
	case ctx.Err() != nil:
		return notJudged(interrupted, "")
	case errors.As(err, new(*store.SlotFileError)) || errors.Is(err, errUnreadable):
		return notJudged(fileFault, "refused: "+oneLine(err.Error()))
	case err != nil:
		return notJudged(labFault, "the lab could not check it: "+oneLine(err.Error()))
	}
	runCtx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	g.Passed = true
	for i, judge := range p.graders() {
		started := p.now().UTC()
		res, err := lesson.Execute(runCtx, judge, "", opts, false)
		inRun := "in the run"
		if i > 0 {
			inRun = "in the explorer's run"
		}
		var stmtErr *store.SlotStatementError
		var refusal *store.SlotFileError
		switch {
		case ctx.Err() != nil:
			return notJudged(interrupted, "")
		case errors.Is(runCtx.Err(), context.DeadlineExceeded):
			what := "the lesson"
			if i > 0 {
				what = "the explorer's orderings"
			}
			return notJudged(fileFault, fmt.Sprintf("gave up after %s: the file's statements did not finish %s in time", p.timeout, what))
		case errors.As(err, &refusal):
			// On PostgreSQL the server itself checks the file, in the run's
			// own database, before the lesson starts.
			return notJudged(fileFault, "refused: "+oneLine(refusal.Error()))
		case errors.As(err, &stmtErr):
			which := stmtErr.Statement // "first statement", or "the statement" of a file of one
			if !strings.HasPrefix(which, "the ") {
				which = "its " + which
			}
			return notJudged(fileFault, fmt.Sprintf("%s failed %s: %s", which, inRun, oneLine(stmtErr.Err.Error())))
		case err != nil && p.ownRunCompletes(ctx, judge):
			// The file's statements ran, but what they did (a value of the
			// wrong type, an event never marked delivered) stopped the
			// lesson, which completes with its own: the file's fault.
			return notJudged(fileFault, fmt.Sprintf("the file's statements stopped the %s (the lesson's own statements complete it): %s",
				strings.TrimPrefix(inRun, "in the "), oneLine(err.Error())))
		case err != nil:
			return notJudged(labFault, "the run could not complete: "+oneLine(err.Error()))
		}
		g.Passed = g.Passed && res.Passed()
		prefix := ""
		if i > 0 {
			prefix = judge.Name + ": "
		}
		for _, ch := range res.Checks {
			g.Checks = append(g.Checks, gradeCheck{Name: prefix + ch.Name, Expected: ch.Expected, Observed: ch.Observed, Passed: ch.Passed, Counterexample: ch.Counterexample})
			if !ch.Passed {
				reason := fmt.Sprintf("expected %s, observed %s", ch.Expected, ch.Observed)
				if ch.Counterexample != "" {
					reason += "; the shortest ordering that breaks it, " + ch.Counterexample
				}
				g.FailedChecks = append(g.FailedChecks, prefix+ch.Name)
				g.reasons = append(g.reasons, reason)
			}
		}
		var buf bytes.Buffer
		info := reports.RunInfo{Started: started, Elapsed: p.now().Sub(started)}
		path := ""
		err = reports.Text(&buf, res, info)
		if err == nil {
			path, err = p.fileReport(reports.Path(p.reportFolder(file), res, started), buf.Bytes())
		}
		page := ""
		if err == nil && p.html {
			buf.Reset()
			if err = reports.HTML(&buf, res, info); err == nil {
				page, err = p.fileReport(reports.HTMLPath(path), buf.Bytes())
			}
		}
		if err != nil {
			// The verdict stands; only its report is lost (exit 3).
			g.ReportError = oneLine(err.Error())
		}
		if i == 0 {
			g.Report, g.Page = path, page
		} else {
			g.ExploreReport, g.ExplorePage = path, page
		}
	}
	return g
}

// writeGradeTable prints one row per failed check (or one per file that
// passed or could not be judged).
func writeGradeTable(w io.Writer, grades []grade) error {
	t := lab.Table{Columns: []string{"Student", "File", "Verdict", "Failed check", "Reason"}}
	for _, g := range grades {
		// A file's name and an error quoting its SQL are the student's
		// data: escaped, they cannot act on the terminal or break a row.
		student, file := reports.Printable(g.Student), reports.Printable(g.File)
		switch {
		case g.Error != "":
			t.AddRow(student, file, g.verdict(), "-", reports.Printable(g.Error))
		case len(g.FailedChecks) == 0:
			t.AddRow(student, file, g.verdict(), "-", "every check passed")
		}
		for i, name := range g.FailedChecks {
			t.AddRow(student, file, g.verdict(), name, g.reasons[i])
		}
		if g.ReportError != "" {
			t.AddRow(student, file, g.verdict(), "-", "its report could not be written: "+reports.Printable(g.ReportError))
		}
	}
	if err := reports.WriteTable(w, t); err != nil {
		return err
	}
	passed, failed, refused, notJudged := 0, 0, 0, 0
	for _, g := range grades {
		switch g.verdict() {
		case "PASS":
			passed++
		case "FAIL":
			failed++
		case "REFUSED":
			refused++
		default:
			notJudged++
		}
	}
	_, err := fmt.Fprintf(w, "%d files: %d passed, %d failed a check, %d refused, %d not judged\n", len(grades), passed, failed, refused, notJudged)
	return err
}
