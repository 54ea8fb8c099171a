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
		Usage: "hand out the statements the lessons teach as exercises: list them, show one, pack them all for a class (outboxlab grade --exercise grades them)",
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
					&cli.BoolFlag{Name: "starter", Usage: "also write a starter file, NAME.sql in --out: the handout as SQL comments, the statement left blank"},
					&cli.StringFlag{Name: "out", Value: ".", Usage: "the `FOLDER` for the starter file"},
				},
				OnUsageError: onUsageError,
				Action:       exerciseShowAction,
			},
			exercisePackCommand(),
		},
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return usagef("unknown exercise subcommand %q; exercise's subcommands: list, show, pack", c.Args().First())
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
		parts = append(parts, shapeWords(s))
	}
	words := strings.Join(parts, ", then ")
	if len(x.Alternative) == 1 {
		words += "; or instead one statement, " + shapeWords(x.Alternative[0])
	}
	return words
}

// shapeWords says what one statement of a file is, in words.
func shapeWords(s store.Shape) string {
	switch s.Kind {
	case store.KindSelect:
		return "a read-only SELECT of one Id"
	case store.KindInsert:
		return "an INSERT into " + s.Table + " (it may upsert it: ON CONFLICT ... DO NOTHING or DO UPDATE)"
	case store.KindUpdate:
		update := "an UPDATE of " + s.Table
		if s.ReturnsID {
			update += " that returns the Id of each row it changed (RETURNING Id)"
		}
		return update
	}
	return "a statement"
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
		about[c.Name] = inWords(c.About)
	}
	if explorer, err := scenarios.Lookup("explore"); err == nil {
		for _, c := range explorer.Checks {
			about["explore: "+c.Name] = "over every ordering up to the bound: " + inWords(c.About)
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

// starterText is the starter file, as `exercise show --starter` and
// `exercise pack` write it: the whole handout as SQL comments (the task,
// the schema in force, the parameters, what the statement must return or
// change, the checks that grade it and how to grade it), then a marked
// blank place for each statement the student writes. It holds no
// statement of the answer key.
func starterText(x *scenarios.Exercise, h handout) string {
	var b strings.Builder
	comment := func(head, text string) { hanging(&b, "-- ", head, starterWidth, text) }
	heading := func(title string) { b.WriteString("--\n-- " + title + "\n") }
	comment("", fmt.Sprintf("Exercise %s (lesson %s). The handout: outboxlab exercise show %s", x.Name, h.Lesson, x.Name))
	heading("Task:")
	comment("  ", h.Task)
	heading("Your file holds:")
	comment("  ", h.Statement+", "+statementEnds(h.Count > 1)+". Comments (--) are allowed.")
	heading("The schema in force:")
	for _, s := range h.Schema {
		b.WriteString("--   -- " + s.File + "\n")
		for _, line := range strings.Split(s.SQL, "\n") {
			b.WriteString(strings.TrimRight("--   "+line, " ") + "\n")
		}
	}
	heading("The parameters your statement may use:")
	writeParams(&b, "--   ", starterWidth, h.Params)
	heading("What it must return or change:")
	comment("  ", h.Must)
	heading("The checks that grade it (a file passes only when every check passes):")
	for _, c := range h.GradedBy {
		hanging(&b, "--   ", c.Name+": ", starterWidth, c.About)
	}
	heading("How to grade it:")
	comment("  ", fmt.Sprintf("outboxlab grade --exercise %s %s.sql", x.Name, x.Name))
	b.WriteString("--\n")
	comment("", fmt.Sprintf("Write it below: %s, %s.", h.Statement, statementEnds(h.Count > 1)))
	for i, place := range starterPlaces(x) {
		if i > 0 || len(x.Shapes) == 1 {
			b.WriteString("\n")
		}
		b.WriteString("\n" + place + "\n\n")
	}
	return b.String()
}

// starterWidth is the widest line of a starter file's comments (a schema
// line may be wider, as the store declares it).
const starterWidth = 78

// placeMark opens the comment that marks where a starter's statement goes.
const placeMark = "-- >>> "

// starterPlaces are the marked places a starter leaves blank, one comment
// line per statement the student writes, in file order.
func starterPlaces(x *scenarios.Exercise) []string {
	if len(x.Shapes) == 1 {
		return []string{placeMark + "your statement, below this line"}
	}
	var out []string
	for i, s := range x.Shapes {
		out = append(out, fmt.Sprintf("%sstatement %d of %d, below this line: %s", placeMark, i+1, len(x.Shapes), shapeWords(s)))
	}
	return out
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
	// The exercise and its lesson share a column, so that the checks' column
	// holds the longest check name whole within the page's 120 columns.
	t := lab.Table{Columns: []string{"Exercise (its lesson)", "The student writes", "Graded by"}}
	for _, x := range scenarios.Exercises() {
		t.AddRow(x.Name+"\n("+x.Lesson+")", statementWords(x), gradedByAll(x))
	}
	if err := reports.WriteTable(c.App.Writer, t); err != nil {
		return err
	}
	_, err = fmt.Fprintln(c.App.Writer, "\nGraded by names every check of the exercise's lesson (and the explorer's), those the "+
		"classic wrong answers fail first.\nHand one out with `outboxlab exercise show NAME --starter`, or every one with "+
		"`outboxlab exercise pack --out DIR`;\ngrade a class's files with `outboxlab grade --exercise NAME FILE...`.")
	return err
}

// gradedByAll names every check that grades x, those its known mistakes
// break first: the list never hides a name.
func gradedByAll(x *scenarios.Exercise) string {
	return strings.Join(x.GradedBy(), ", ")
}

// inWords fills a check's text without a run: each placeholder a run
// fills with its actors and settings ({@crashed_owner}, {lease}) becomes
// its name in words ("the crashed owner", "the lease").
func inWords(text string) string {
	return lab.ReplacePlaceholders(text, func(key string) string {
		return "the " + strings.ReplaceAll(strings.TrimPrefix(key, "@"), "_", " ")
	})
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
