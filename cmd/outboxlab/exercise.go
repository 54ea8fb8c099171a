package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/reports"
	"github.com/outboxlab/outboxlab/scenarios"
	"github.com/outboxlab/outboxlab/scenarios/explorer"
	"github.com/outboxlab/outboxlab/store"
)

func exerciseCommand() *cli.Command {
	return &cli.Command{
		Name:  "exercise",
		Usage: "hand out the statements the lessons teach as exercises: list them, show one (outboxlab grade --exercise grades them)",
		Subcommands: []*cli.Command{
			{
				Name:         "list",
				Usage:        "list every exercise: its lesson, the statement a student writes and the checks that grade it",
				Flags:        []cli.Flag{formatFlag},
				OnUsageError: onUsageError,
				Action:       exerciseListAction,
			},
			{
				Name:      "show",
				Usage:     "print an exercise's handout: the task, the schema, the parameters, what the statement must do, the grading",
				ArgsUsage: "NAME",
				Flags: []cli.Flag{
					formatFlag,
					&cli.BoolFlag{Name: "starter", Usage: "also write a starter file, NAME.sql in --out, with the statement left blank"},
					&cli.StringFlag{Name: "out", Value: ".", Usage: "the `FOLDER` for the starter file"},
				},
				OnUsageError: onUsageError,
				Action:       exerciseShowAction,
			},
		},
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return usagef("unknown exercise subcommand %q; exercise's subcommands: list, show", c.Args().First())
			}
			return cli.ShowSubcommandHelp(c)
		},
	}
}

// handout is an exercise as a student receives it; its text and JSON
// forms hold the same content.
type handout struct {
	Name      string          `json:"name"`
	Lesson    string          `json:"lesson"`
	Statement string          `json:"statement"`  // what the file holds, e.g. "an UPDATE of outbox_events"
	Count     int             `json:"statements"` // how many statements: the claim 2, every other 1
	Task      string          `json:"task"`
	Schema    []handoutSchema `json:"schema"`
	Params    []handoutParam  `json:"params"`
	Must      string          `json:"must"`
	Grading   string          `json:"grading"`
	GradedBy  []handoutCheck  `json:"graded_by"`
	Explored  bool            `json:"explored"` // the interleaving explorer grades it too
	Starter   string          `json:"starter"`  // the starter file's text
	// StarterFile is where --starter wrote it ("" without --starter).
	StarterFile string `json:"starter_file,omitempty"`
}

type handoutSchema struct {
	File string `json:"file"`
	SQL  string `json:"sql"`
}

type handoutParam struct {
	Name  string `json:"name"`
	Holds string `json:"holds"`
	// In says which statement gets it, where a file has two.
	In string `json:"in,omitempty"`
}

type handoutCheck struct {
	Name  string `json:"name"`
	About string `json:"about"`
}

// statementWords says what x's file holds, in words.
func statementWords(x *scenarios.Exercise) string {
	var parts []string
	for _, s := range x.Shapes {
		switch s.Kind {
		case store.KindSelect:
			parts = append(parts, "a read-only SELECT of one Id")
		case store.KindInsert:
			parts = append(parts, "an INSERT into "+s.Table+" (it may upsert it: ON CONFLICT ... DO NOTHING or DO UPDATE)")
		case store.KindUpdate:
			update := "an UPDATE of " + s.Table
			if s.ReturnsID {
				update += " that returns the Id of each row it changed (RETURNING Id)"
			}
			parts = append(parts, update)
		}
	}
	return strings.Join(parts, ", then ")
}

func handoutOf(x *scenarios.Exercise) handout {
	sc := x.Scenario()
	h := handout{Name: x.Name, Lesson: sc.Name, Statement: statementWords(x), Count: len(x.Shapes), Task: x.Task, Must: x.Must, Explored: x.Explored(),
		Schema: []handoutSchema{}, Params: []handoutParam{}, GradedBy: []handoutCheck{}}
	for _, m := range x.Schema {
		h.Schema = append(h.Schema, handoutSchema{File: m.Name, SQL: strings.TrimSpace(m.SQL)})
	}
	for _, p := range x.Params {
		hp := handoutParam{Name: ":" + p.Name, Holds: p.Holds}
		if p.Statement > 0 {
			hp.In = fmt.Sprintf("statement %d only", p.Statement)
		}
		h.Params = append(h.Params, hp)
	}
	about := map[string]string{}
	for _, c := range sc.Checks {
		about[c.Name] = c.About
	}
	if explorer, err := scenarios.Lookup("explore"); err == nil {
		for _, c := range explorer.Checks {
			about["explore: "+c.Name] = "over every ordering up to the bound: " + c.About
		}
	}
	for _, name := range x.GradedBy() {
		h.GradedBy = append(h.GradedBy, handoutCheck{Name: name, About: about[name]})
	}
	keys := make([]string, len(x.Key))
	for i, k := range x.Key {
		keys[i] = "\"" + k.Name + "\""
	}
	h.Grading = fmt.Sprintf("`outboxlab grade --exercise %s FILE...` runs %s with your file's statements in place of the "+
		"lesson's %s, exactly as the lesson's mistake variants swap theirs, and grades the run by every check of the lesson",
		x.Name, sc.Name, strings.Join(keys, " and "))
	if h.Explored {
		h.Grading += fmt.Sprintf("; the interleaving explorer then runs your statement in every ordering of up to %d actions "+
			"and, where one breaks an invariant, shows the shortest such ordering step by step", explorer.DefaultExploreBound)
	}
	h.Grading += ". A file passes only when every check passes. With --db it runs on PostgreSQL, so write PostgreSQL's " +
		"dialect there; the file is untrusted input: it must be " + h.Statement + " and may use only the parameters above."
	h.Starter = starterText(x, h)
	return h
}

// starterText is the starter file: the handout in comments, the
// statement left blank.
func starterText(x *scenarios.Exercise, h handout) string {
	var b strings.Builder
	comment := func(head, text string) { hanging(&b, "-- ", head, 78, text) }
	comment("", fmt.Sprintf("Exercise %s (lesson %s). The whole handout: outboxlab exercise show %s", x.Name, h.Lesson, x.Name))
	b.WriteString("--\n")
	comment("", h.Task)
	b.WriteString("--\n-- Parameters:\n")
	writeParams(&b, "--   ", 78, h.Params)
	b.WriteString("--\n-- What it must do:\n")
	comment("  ", h.Must)
	b.WriteString("--\n")
	comment("", fmt.Sprintf("Grade it: outboxlab grade --exercise %s %s.sql", x.Name, x.Name))
	b.WriteString("--\n")
	comment("", fmt.Sprintf("Write it below: %s, %s.", h.Statement, statementEnds(h.Count > 1)))
	b.WriteString("\n")
	return b.String()
}

// hanging writes text wrapped to width columns, each line starting with
// indent, the first with head after it and the others with as many
// blanks, so the text hangs under its own start.
func hanging(b *strings.Builder, indent, head string, width int, text string) {
	pad := strings.Repeat(" ", len(head))
	for i, line := range reports.Wrap(text, width-len(indent)-len(head)) {
		lead := pad
		if i == 0 {
			lead = head
		}
		b.WriteString(strings.TrimRight(indent+lead+line, " ") + "\n")
	}
}

// writeParams lists params, each name then what it holds, hanging.
func writeParams(b *strings.Builder, indent string, width int, params []handoutParam) {
	names := 0
	for _, p := range params {
		names = max(names, len(p.Name))
	}
	for _, p := range params {
		holds := p.Holds
		if p.In != "" {
			holds += " (" + p.In + ")"
		}
		hanging(b, indent, fmt.Sprintf("%-*s  ", names, p.Name), width, holds)
	}
}

func exerciseListAction(c *cli.Context) error {
	format, err := checkFormat(c)
	if err != nil {
		return err
	}
	if c.Args().Present() {
		return usagef("exercise list takes no arguments (got %q)", c.Args().First())
	}
	if format == "json" {
		var out []handout
		for _, x := range scenarios.Exercises() {
			out = append(out, handoutOf(x))
		}
		return reports.JSONLine(c.App.Writer, out)
	}
	t := lab.Table{Columns: []string{"Exercise", "Lesson", "The student writes", "Graded by"}}
	for _, x := range scenarios.Exercises() {
		t.AddRow(x.Name, x.Lesson, statementWords(x), gradedBySummary(x))
	}
	if err := reports.WriteTable(c.App.Writer, t); err != nil {
		return err
	}
	_, err = fmt.Fprintln(c.App.Writer, "\nHand one out with `outboxlab exercise show NAME --starter`;\n"+
		"grade a class's files with `outboxlab grade --exercise NAME FILE...`.")
	return err
}

// gradedBySummary names the checks x's known mistakes break, and counts
// the lesson's others.
func gradedBySummary(x *scenarios.Exercise) string {
	all, distinctive := x.GradedBy(), x.Distinctive()
	s := strings.Join(distinctive, ", ")
	if others := len(all) - len(distinctive); others > 0 {
		s += fmt.Sprintf(" and %d more", others)
	}
	return s
}

// statementEnds says how the file's statements end.
func statementEnds(two bool) string {
	if two {
		return "each statement ending with ';'"
	}
	return "ending with ';'"
}

func exerciseShowAction(c *cli.Context) error {
	format, err := checkFormat(c)
	if err != nil {
		return err
	}
	if c.NArg() != 1 {
		return usagef("exercise show takes one exercise name (see `outboxlab exercise list`)")
	}
	x, err := scenarios.LookupExercise(c.Args().First())
	if err != nil {
		return &usageError{err}
	}
	h := handoutOf(x)
	if c.Bool("starter") {
		out := c.String("out")
		if err := checkOut(out); err != nil {
			return err
		}
		if h.StarterFile, err = reports.WriteNew(filepath.Join(out, x.Name+".sql"), []byte(h.Starter)); err != nil {
			return fmt.Errorf("exercise show: the starter file: %w", err)
		}
	}
	if format == "json" {
		return reports.JSONLine(c.App.Writer, h)
	}
	return writeHandout(c.App.Writer, h)
}

// writeHandout prints h as text, every line within 120 columns.
func writeHandout(w io.Writer, h handout) error {
	var b strings.Builder
	para := func(indent, text string) { hanging(&b, indent, "", 118, text) }
	fmt.Fprintf(&b, "Exercise %s (lesson %s)\n\n", h.Name, h.Lesson)
	b.WriteString("Task\n")
	para("  ", h.Task)
	b.WriteString("\nYour file holds\n")
	para("  ", h.Statement+", "+statementEnds(h.Count > 1)+". Comments (--) are allowed.")
	b.WriteString("\nThe schema in force\n")
	for _, s := range h.Schema {
		fmt.Fprintf(&b, "  -- %s\n", s.File)
		for _, line := range strings.Split(s.SQL, "\n") {
			b.WriteString(strings.TrimRight("  "+line, " ") + "\n")
		}
		b.WriteString("\n")
	}
	b.WriteString("The parameters your statement may use\n")
	writeParams(&b, "  ", 118, h.Params)
	b.WriteString("\nWhat it must return or change\n")
	para("  ", h.Must)
	b.WriteString("\nHow it is graded\n")
	para("  ", h.Grading)
	b.WriteString("  The checks:\n")
	for _, c := range h.GradedBy {
		hanging(&b, "    ", c.Name+": ", 118, c.About)
	}
	if h.StarterFile != "" {
		fmt.Fprintf(&b, "\nStarter file: %s\n", h.StarterFile)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
