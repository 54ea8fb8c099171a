package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/outboxlab/outboxlab/challenge"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/reports"
)

// relayGrade is a validated `grade --challenge NAME --relay CMD FOLDER...`:
// each folder is a student's, and the relay command runs in it.
type relayGrade struct {
	challenge  *challenge.Challenge
	relay      string
	folders    []string
	students   []string
	out        string
	jobs       int
	timeout    time.Duration
	bound      int
	format     string
	html       bool
	database   string // --db: a postgres:// URL, or "" for SQLite
	s          *settings
	fileReport func(path string, data []byte) (string, error)
}

// gradeRelayUsage is what grade's help says of --challenge.
const gradeRelayUsage = `With --challenge NAME and --relay COMMAND, each argument is a student's folder holding their own
relay: the lab runs COMMAND in the folder (e.g. --relay "python3 relay.py"), through the challenge's
sequences, the shortest failing ordering of each that fails, and its explorer's orderings (outboxlab
challenge show NAME; --bound N, default 1 with --challenge; 0 searches no ordering), into the same table, gradebook and reports; the
student is the folder's name (section-a_alice and section-b_alice where two are named alice).`

func parseRelayGrade(c *cli.Context, s *settings) (*relayGrade, error) {
	g := &relayGrade{relay: strings.TrimSpace(c.String("relay")), folders: c.Args().Slice(), out: c.String("out"), s: s,
		html: c.Bool("html"), fileReport: s.fileReport, bound: 1}
	if g.fileReport == nil {
		g.fileReport = reports.WriteNew
	}
	var err error
	if g.challenge, err = challenge.Lookup(c.String("challenge")); err != nil {
		return nil, &usageError{err}
	}
	if g.relay == "" {
		return nil, usagef("--challenge needs --relay, the command line that runs a student's relay in their folder (e.g. --relay \"python3 relay.py\")")
	}
	for _, flag := range []string{"exercise", "student-from", "processes"} {
		if c.IsSet(flag) {
			return nil, usagef("--%s is for grading files; --challenge grades relays, one per student folder", flag)
		}
	}
	if len(g.folders) == 0 {
		return nil, usagef("name the students' folders (e.g. outboxlab grade --challenge %s --relay \"python3 relay.py\" submissions/*/)", g.challenge.Name)
	}
	for _, f := range g.folders {
		st, err := os.Stat(f)
		switch {
		case f == "":
			return nil, usagef("an empty folder name: --challenge grades one folder per student")
		case errors.Is(err, fs.ErrNotExist):
			return nil, usagef("%s does not exist: --challenge grades one folder per student", f)
		case err != nil || !st.IsDir():
			return nil, usagef("%s is not a folder: --challenge grades one folder per student", f)
		}
	}
	if g.students, err = relayStudents(g.folders, "student"); err != nil {
		return nil, &usageError{err}
	}
	if g.jobs, err = parseCount("jobs", c.String("jobs")); err != nil {
		return nil, err
	}
	if g.jobs < 1 {
		return nil, usagef("--jobs must be at least 1, not %d", g.jobs)
	}
	if g.format, err = checkGradeFormat(c); err != nil {
		return nil, err
	}
	if g.timeout, err = parseDuration("timeout", c.String("timeout")); err != nil {
		return nil, err
	}
	if c.IsSet("bound") {
		if g.bound, err = parseCount("bound", c.String("bound")); err != nil {
			return nil, err
		}
	}
	if err := checkOut(g.out); err != nil {
		return nil, err
	}
	if g.database, err = challengeServer(c, s); err != nil {
		return nil, err
	}
	return g, nil
}

// gradeRelays judges every student's relay, --jobs at a time, and prints
// and files the grades as grade does for files.
func gradeRelays(c *cli.Context, s *settings) error {
	g, err := parseRelayGrade(c, s)
	if err != nil {
		return err
	}
	started := s.now().UTC()
	grades := make([]grade, len(g.folders))
	sem := make(chan struct{}, g.jobs)
	var wg sync.WaitGroup
	for i := range g.folders {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			grades[i] = g.gradeOne(c.Context, i)
		}()
	}
	wg.Wait()
	for i := range grades {
		grades[i].settle()
	}
	var table bytes.Buffer
	if err := writeGradeTable(&table, grades); err != nil {
		return err
	}
	summary, summaryErr := g.fileReport(filepath.Join(g.out, "Grade", "Grade-Summary-"+started.Format("20060102T150405Z")+".txt"),
		append([]byte(fmt.Sprintf("outboxlab grade: %d relays judged by challenge %s (%s)\n\n", len(grades), g.challenge.Name, g.relay)), table.Bytes()...))
	if err := printGrades(c.App.Writer, g.format, grades, table.Bytes(), summary); err != nil {
		return err
	}
	if c.Context.Err() != nil {
		return c.Context.Err()
	}
	return gradeOutcome(grades, summaryErr)
}

// maxGradeOrderings caps each search of a student's orderings.
const maxGradeOrderings = 400

// gradeOne runs student i's relay through the challenge's sequences, the
// shortest failing ordering of each that failed, and its explorer, and
// files a report per run.
func (g *relayGrade) gradeOne(ctx context.Context, i int) grade {
	gr := grade{Student: g.students[i], Exercise: g.challenge.Name, File: g.folders[i], FailedChecks: []string{}, Passed: true}
	folder, err := filepath.Abs(g.folders[i])
	if err != nil {
		gr.Error, gr.fault = "the lab could not find the folder: "+err.Error(), labFault
		return gr
	}
	o := challenge.Options{Relay: g.relay, Dir: folder, Timeout: g.timeout, TempRoot: g.s.tempRoot, Warn: g.s.warn, Database: g.database}
	// Each run, and the --sequence its replay names ("" for the explored
	// sequence, which --replay alone replays).
	var results []*lab.Result
	var replaySequence []string
	exploredFailing := false
	for _, seq := range g.challenge.Sequences {
		r, err := challenge.Run(ctx, g.challenge, seq, o)
		if err != nil {
			return g.notJudged(ctx, gr, err)
		}
		results, replaySequence = append(results, r), append(replaySequence, "")
		if why := challenge.NeverSpoke(r); why != "" {
			// Every other sequence would end the same: the relay is refused
			// with this run's report, which holds its stderr.
			gr = g.record(gr, i, results, replaySequence)
			gr.Passed, gr.Error, gr.fault = false, "the relay never spoke in "+seq.Name+": "+oneLine(why), fileFault
			return gr
		}
		if r.Passed() || g.bound == 0 {
			continue
		}
		// As challenge run does: the failure as steps a student can
		// follow, the shortest ordering of the sequence's requests that
		// fails too.
		x, err := challenge.Explore(ctx, g.challenge, seq, o, g.bound, maxGradeOrderings)
		if err != nil {
			return g.notJudged(ctx, gr, err)
		}
		exploredFailing = exploredFailing || seq.Name == g.challenge.Explored
		if x.Failing != nil {
			named := seq.Name
			if named == g.challenge.Explored {
				named = ""
			}
			results, replaySequence = append(results, x.Failing), append(replaySequence, named)
		}
	}
	if g.bound > 0 && !exploredFailing {
		explored, _ := g.challenge.Sequence(g.challenge.Explored)
		x, err := challenge.Explore(ctx, g.challenge, explored, o, g.bound, maxGradeOrderings)
		if err != nil {
			return g.notJudged(ctx, gr, err)
		}
		if x.Failing != nil {
			results, replaySequence = append(results, x.Failing), append(replaySequence, "")
		}
	}
	return g.record(gr, i, results, replaySequence)
}

// record enters student i's runs into gr, with the --sequence each one's
// replay names, and files their reports.
func (g *relayGrade) record(gr grade, i int, results []*lab.Result, replaySequence []string) grade {
	failing, failingOrdered := false, false
	for k, r := range results {
		name := strings.TrimPrefix(r.Scenario, g.challenge.Name+".")
		counterexample := ""
		if o := r.Settings["ordering"]; o != "" {
			counterexample = "--replay " + o
			if replaySequence[k] != "" {
				counterexample = "--sequence " + replaySequence[k] + " " + counterexample
			}
		}
		for _, ch := range r.Checks {
			gr.Checks = append(gr.Checks, gradeCheck{Name: name + ": " + ch.Name, Expected: ch.Expected, Observed: ch.Observed, Passed: ch.Passed,
				Counterexample: counterexample})
			if !ch.Passed {
				reason := fmt.Sprintf("expected %s, observed %s", ch.Expected, ch.Observed)
				switch {
				case strings.HasSuffix(counterexample, "--replay none"):
					reason += "; broken by the requests in order, without a switch (" + counterexample + ")"
				case counterexample != "":
					reason += "; the ordering that breaks it: " + counterexample
				}
				gr.FailedChecks = append(gr.FailedChecks, name+": "+ch.Name)
				gr.reasons = append(gr.reasons, reason)
			}
		}
		gr.Passed = gr.Passed && r.Passed()
		path, page, err := g.file(i, r)
		if err != nil {
			gr.ReportError = oneLine(err.Error())
		}
		// The grade points at the first failed run's report, or the first;
		// better, at the first failed ordering's, whose steps a student can
		// follow and whose command replays them.
		ordered := r.Settings["ordering"] != ""
		if gr.Report == "" || (!r.Passed() && (!failing || ordered && !failingOrdered)) {
			gr.Report, gr.Page = path, page
			failing, failingOrdered = !r.Passed(), !r.Passed() && ordered
		}
	}
	return gr
}

// notJudged is a grade without a verdict: the run could not complete.
func (g *relayGrade) notJudged(ctx context.Context, gr grade, err error) grade {
	gr.Passed, gr.FailedChecks, gr.reasons, gr.Checks = false, nil, nil, nil
	gr.Error, gr.fault = "the run could not complete: "+oneLine(err.Error()), labFault
	if ctx.Err() != nil {
		gr.Error, gr.fault = "interrupted", interrupted
	}
	return gr
}

// file writes run r's report (and page) in student i's folder of --out.
func (g *relayGrade) file(i int, r *lab.Result) (path, page string, err error) {
	started := g.s.now().UTC()
	info := reports.RunInfo{Started: started}
	var buf bytes.Buffer
	if err := reports.Text(&buf, r, info); err != nil {
		return "", "", err
	}
	path, err = g.fileReport(reports.Path(filepath.Join(g.out, g.challenge.Name, g.students[i]), r, started), buf.Bytes())
	if err != nil || !g.html {
		return path, "", err
	}
	buf.Reset()
	if err := reports.HTML(&buf, r, info); err != nil {
		return path, "", err
	}
	page, err = g.fileReport(reports.HTMLPath(path), buf.Bytes())
	return path, page, err
}
