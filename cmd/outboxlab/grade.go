package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/reports"
	"github.com/outboxlab/outboxlab/scenarios"
	"github.com/outboxlab/outboxlab/store"
)

// gradeScenario is the lesson whose checks judge a claim file.
const gradeScenario = "session-15-outbox-leasing"

func gradeCommand(s *settings) *cli.Command {
	return &cli.Command{
		Name:      "grade",
		Usage:     "judge claim files, one per student, by session 15's checks, several at once",
		ArgsUsage: "FILE...",
		Description: "Runs session-15-outbox-leasing with each FILE as --claim-sql, up to --jobs at once, and prints\n" +
			"one table: file, verdict, and each failed check with its reason. Writes one report per file and\n" +
			"a summary under --out. A file is untrusted input: it must be a regular file of at most 1 MiB whose\n" +
			"first statement SQLite compiles to a read-only SELECT and second to an UPDATE of OutboxMessages.\n" +
			"With --db the files run on that PostgreSQL server, each in a schema of its own and as a throwaway\n" +
			"login role the lab creates for it (rights: USAGE, CREATE on that schema only) and drops afterwards;\n" +
			"the URL's login needs CREATEROLE (or SUPERUSER) and pg_hba.conf must accept the role's password login.\n" +
			"Exit code: 0 every file passed, 1 some file failed a check, 2 some file could not be judged.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "out", Value: "grade-reports", Usage: "the `FOLDER` for the reports"},
			&cli.StringFlag{Name: "jobs", Value: strconv.Itoa(runtime.NumCPU()), Usage: "judge at most `N` files at once"},
			&cli.StringFlag{Name: "timeout", Value: "2m", Usage: "give up judging one file after this `DURATION` (such as 30s or 2m)"},
			&cli.StringFlag{Name: "db", Usage: "grade on the PostgreSQL server at `URL` (postgres://...), each file in a schema of its own as a throwaway login role; the login needs CREATEROLE"},
			formatFlag,
		},
		OnUsageError: onUsageError,
		Action:       func(c *cli.Context) error { return gradeAction(c, s) },
	}
}

// grade is the judgement of one claim file.
type grade struct {
	File         string   `json:"file"`
	Passed       bool     `json:"passed"`
	FailedChecks []string `json:"failed_checks"`
	Report       string   `json:"report"`
	Error        string   `json:"error"`

	reasons []string // one line per failed check, in FailedChecks order
}

// verdict is the table's word for g.
func (g *grade) verdict() string {
	switch {
	case g.Error != "":
		return "NOT JUDGED"
	case g.Passed:
		return "PASS"
	}
	return "FAIL"
}

// gradePlan is a validated `grade` command line.
type gradePlan struct {
	scenario *scenarios.Scenario
	files    []string
	out      string
	jobs     int
	timeout  time.Duration
	format   string
	options  scenarios.Options // each file's run sets its Claim
	now      func() time.Time
}

func parseGrade(c *cli.Context, s *settings) (*gradePlan, error) {
	p := &gradePlan{files: c.Args().Slice(), out: c.String("out"), options: s.options(), now: s.now}
	var err error
	if p.jobs, err = parseCount("jobs", c.String("jobs")); err != nil {
		return nil, err
	}
	if p.format, err = checkFormat(c); err != nil {
		return nil, err
	}
	if len(p.files) == 0 {
		return nil, usagef("name the claim files to grade (e.g. outboxlab grade submissions/*.sql)")
	}
	if p.scenario, err = lookup(gradeScenario); err != nil {
		return nil, err
	}
	if p.jobs < 1 {
		return nil, usagef("--jobs must be at least 1, not %d", p.jobs)
	}
	p.jobs = min(p.jobs, runtime.NumCPU(), len(p.files))
	if p.timeout, err = parseDuration("timeout", c.String("timeout")); err != nil {
		return nil, err
	}
	if p.options.Database, err = serverURL(c); err != nil {
		return nil, err
	}
	if p.options.Database != "" {
		// Each file will run as a throwaway login role: check once that
		// one can be made and can log in, so a missing right is exit 2
		// with its reason rather than every file NOT JUDGED.
		if err := store.CheckGraderServer(c.Context, p.options.Database); err != nil {
			return nil, &usageError{err}
		}
	}
	paths := []string{filepath.Join(p.out, "Grade", "Grade-Summary-"+p.now().UTC().Format("20060102T150405Z")+".txt")}
	for _, f := range p.files {
		r := &lab.Result{Session: p.scenario.Session, FileTag: p.scenario.FileTag, CustomSQL: f}
		paths = append(paths, reports.Path(filepath.Join(p.out, reportFolder(f)), r, p.now()))
	}
	if err := checkOut(p.out, paths...); err != nil {
		return nil, err
	}
	return p, nil
}

func gradeAction(c *cli.Context, s *settings) error {
	p, err := parseGrade(c, s)
	if err != nil {
		return err
	}
	sc := p.scenario
	started := p.now().UTC()
	grades := gradeAll(c.Context, sc, p)
	if c.Context.Err() != nil {
		return c.Context.Err()
	}
	var table bytes.Buffer
	if err := writeGradeTable(&table, grades); err != nil {
		return err
	}
	summary, err := reports.WriteNew(filepath.Join(p.out, "Grade", "Grade-Summary-"+started.Format("20060102T150405Z")+".txt"),
		append([]byte(fmt.Sprintf("outboxlab grade: %d claim files judged by %s's checks\n\n", len(grades), sc.Name)), table.Bytes()...))
	if err != nil {
		return err
	}
	w := c.App.Writer
	if p.format == "json" {
		for _, g := range grades {
			if err := reports.JSONLine(w, g); err != nil {
				return err
			}
		}
	} else {
		if _, err := w.Write(table.Bytes()); err != nil {
			return err
		}
		fmt.Fprintf(w, "\nsummary: %s\n", summary)
	}
	return gradeOutcome(grades)
}

// gradeOutcome is the exit: 2 when a file could not be judged, 1 when one
// failed a check.
func gradeOutcome(grades []grade) error {
	notJudged, failed := 0, 0
	for _, g := range grades {
		switch g.verdict() {
		case "NOT JUDGED":
			notJudged++
		case "FAIL":
			failed++
		}
	}
	switch {
	case notJudged > 0:
		return usagef("grade: %d of %d files could not be judged (see the table)", notJudged, len(grades))
	case failed > 0:
		return errChecksFailed
	}
	return nil
}

// gradeAll judges every file, p.jobs at a time, in the order given.
func gradeAll(ctx context.Context, sc *scenarios.Scenario, p *gradePlan) []grade {
	grades := make([]grade, len(p.files))
	sem := make(chan struct{}, p.jobs)
	var wg sync.WaitGroup
	for i, file := range p.files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				grades[i] = grade{File: file, Error: "interrupted"}
				return
			}
			defer func() { <-sem }()
			grades[i] = gradeFile(ctx, sc, file, p)
		}()
	}
	wg.Wait()
	return grades
}

// gradeFile judges one claim file; any failure to judge it is its Error.
func gradeFile(ctx context.Context, sc *scenarios.Scenario, file string, p *gradePlan) grade {
	g := grade{File: file, FailedChecks: []string{}}
	// The claim file check runs once on a tiny database and is not timed:
	// --timeout bounds the scenario run, which a slow claim can stretch.
	cf, err := loadClaimFile(ctx, file)
	switch {
	case ctx.Err() != nil:
		g.Error = "interrupted"
		return g
	case err != nil:
		g.Error = "refused: " + oneLine(err.Error())
		return g
	}
	opts := p.options
	opts.Claim = &scenarios.CustomClaim{Source: filepath.Base(file), Select: cf.Select, Update: cf.Update}
	started := p.now().UTC()
	runCtx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	res, err := scenarios.Execute(runCtx, sc, "", opts, false)
	switch {
	case ctx.Err() != nil:
		g.Error = "interrupted"
		return g
	case errors.Is(runCtx.Err(), context.DeadlineExceeded):
		g.Error = fmt.Sprintf("gave up after %s: the claim did not finish the lesson in time", p.timeout)
		return g
	case err != nil:
		g.Error = "the run could not complete: " + oneLine(err.Error())
		return g
	}
	g.Passed = res.Passed()
	for _, ch := range res.Checks {
		if !ch.Passed {
			g.FailedChecks = append(g.FailedChecks, ch.Name)
			g.reasons = append(g.reasons, fmt.Sprintf("expected %s, observed %s", ch.Expected, ch.Observed))
		}
	}
	path, err := reports.Write(filepath.Join(p.out, reportFolder(file)), res, reports.RunInfo{Started: started, Elapsed: p.now().Sub(started)})
	if err != nil {
		g.Error = "the report could not be written: " + oneLine(err.Error())
		return g
	}
	g.Report = path
	return g
}

// reportFolder is the folder under --out for a file's report: its name
// without extension, so each student's report is easy to find.
func reportFolder(file string) string {
	stem := strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
	stem = strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == utf8.RuneError {
			return '_'
		}
		return r
	}, stem)
	if stem == "" || stem == "." || stem == ".." {
		stem = "claim"
	}
	return stem
}

// writeGradeTable prints one row per failed check (or one per file that
// passed or could not be judged).
func writeGradeTable(w io.Writer, grades []grade) error {
	t := lab.Table{Columns: []string{"File", "Verdict", "Failed check", "Reason"}}
	for _, g := range grades {
		// A file's name and an error quoting its SQL are the student's
		// data: escaped, they cannot act on the terminal or break a row.
		file := reports.Printable(g.File)
		switch {
		case g.Error != "":
			t.AddRow(file, g.verdict(), "-", reports.Printable(g.Error))
		case len(g.FailedChecks) == 0:
			t.AddRow(file, g.verdict(), "-", "every check passed")
		}
		for i, name := range g.FailedChecks {
			t.AddRow(file, g.verdict(), name, g.reasons[i])
		}
	}
	if err := reports.WriteTable(w, t); err != nil {
		return err
	}
	passed, failed, notJudged := 0, 0, 0
	for _, g := range grades {
		switch g.verdict() {
		case "PASS":
			passed++
		case "FAIL":
			failed++
		default:
			notJudged++
		}
	}
	_, err := fmt.Fprintf(w, "%d files: %d passed, %d failed a check, %d not judged\n", len(grades), passed, failed, notJudged)
	return err
}
