package main

import (
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/outboxlab/outboxlab/internal/newfolder"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/reports"
	"github.com/outboxlab/outboxlab/scenarios"
	"github.com/outboxlab/outboxlab/scenarios/explorer"
	"github.com/outboxlab/outboxlab/store"
)

// The two packs' folders under `exercise pack --out`.
const (
	studentPackFolder    = "student"
	instructorPackFolder = "instructor"
)

func exercisePackCommand() *cli.Command {
	return &cli.Command{
		Name: "pack",
		Usage: "write a course's packs into a new folder: student/ holds each exercise's handout and starter file, " +
			"instructor/ its answer key and its classic wrong answers with the checks each fails",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "out", Usage: "the `FOLDER` for the two packs: a new or empty folder (nothing is overwritten)"},
		},
		OnUsageError: onUsageError,
		Action:       exercisePackAction,
	}
}

func exercisePackAction(c *cli.Context) error {
	if c.Args().Present() {
		return usagef("exercise pack takes no arguments (got %q); name the folder with --out", c.Args().First())
	}
	out := c.String("out")
	if out == "" {
		return usagef("exercise pack needs --out FOLDER: a new or empty folder for the student's and the instructor's packs")
	}
	files := append(studentPack(), instructorPack()...)
	if _, err := writeNewFolder(out, "exercise pack", files); err != nil {
		return err
	}
	text := fmt.Sprintf("Wrote %d files under %s:\n"+
		"  %-*s  for the students: each exercise's handout (NAME.txt), its starter (NAME.sql) and README.txt\n"+
		"  %-*s  keep it: each exercise's answer key (NAME.answer.sql), its classic wrong answers "+
		"(NAME.wrong-VARIANT.sql) and README.txt, the checks each wrong answer fails\n",
		len(files), out, len(instructorPackFolder)+1, studentPackFolder+"/", len(instructorPackFolder)+1, instructorPackFolder+"/")
	_, err := io.WriteString(c.App.Writer, fitLines(text, reports.MaxLine))
	return err
}

// packFile is one file of a pack: its path under --out and its text.
type packFile = newfolder.File

// studentPack is what a student receives: for every exercise its handout
// (NAME.txt, as `exercise show NAME` prints it) and its starter (NAME.sql,
// as `exercise show NAME --starter` writes it), and README.txt. It holds no
// statement of an answer key or of a wrong answer.
func studentPack() []packFile {
	var files []packFile
	t := lab.Table{Columns: []string{"#", "Exercise", "Lesson", "The student writes", "Files"}}
	for i, x := range scenarios.Exercises() {
		h := handoutOf(x)
		var text strings.Builder
		_ = writeHandout(&text, h) // a strings.Builder does not fail
		files = append(files,
			packFile{Name: filepath.Join(studentPackFolder, x.Name+".txt"), Text: text.String()},
			packFile{Name: filepath.Join(studentPackFolder, x.Name+".sql"), Text: h.Starter})
		t.AddRow(i+1, x.Name, x.Lesson, statementWords(x), x.Name+".txt, "+x.Name+".sql")
	}
	var readme strings.Builder
	readme.WriteString("outboxlab exercises: the student's pack\n\n")
	hanging(&readme, "", "", reports.MaxLine, "The exercises in course order. For each, NAME.txt is the handout (the task, "+
		"the schema in force, the parameters, what the statement must return or change and the checks that grade it) and "+
		"NAME.sql the starter: the same handout as SQL comments, with the statement left blank for you to write. "+
		"Grade your file with `outboxlab grade --exercise NAME NAME.sql`; `outboxlab exercise show NAME` prints the handout again.")
	readme.WriteString("\n")
	_ = reports.WriteTable(&readme, t)
	files = append(files, packFile{Name: filepath.Join(studentPackFolder, "README.txt"), Text: readme.String()})
	return files
}

// wrongAnswer is one of an exercise's classic wrong answers as the
// instructor's pack files it.
type wrongAnswer struct {
	File   string       // its file name under instructor/
	Stmts  []store.Stmt // what the file holds, in file order
	Engine store.Engine // the one engine that shows it wrong, "" for both
	// Fails are the checks it fails, as grade names them: the variant's
	// Breaks, the explorer's with "explore: " before them.
	Fails []string
	Head  string // the comment atop its file: where it comes from, what it changed
}

// wrongAnswers are x's classic wrong answers: its variants'
// ([scenarios.Exercise.Mistakes]), each named for its variant,
// NAME.wrong-VARIANT.sql (the explorer's NAME.wrong-explore-VARIANT.sql),
// then the catalogue's ([scenarios.Exercise.WrongAnswers]),
// NAME.wrong-TAG.sql.
func wrongAnswers(x *scenarios.Exercise) []wrongAnswer {
	var out []wrongAnswer
	for _, m := range x.Mistakes() {
		w := wrongAnswer{File: x.Name + ".wrong-" + m.Variant + ".sql", Stmts: m.Stmts, Engine: m.Engine}
		for _, b := range m.Breaks {
			switch {
			case b == "mistake_exposed":
				// the variant's own statement of itself, no check of the lesson's design
			case m.Scenario == explorer.Lesson.Name:
				w.Fails = append(w.Fails, "explore: "+b)
			default:
				w.Fails = append(w.Fails, b)
			}
		}
		if m.Scenario == explorer.Lesson.Name {
			w.File = x.Name + ".wrong-explore-" + m.Variant + ".sql"
		}
		w.Head = variantHead(x, m, w.Fails)
		out = append(out, w)
	}
	for _, c := range x.WrongAnswers() {
		out = append(out, wrongAnswer{File: x.Name + ".wrong-" + c.Tag + ".sql", Stmts: c.Stmts, Fails: c.Fails,
			Head: fmt.Sprintf("A classic wrong answer to exercise %s (lesson %s), which no variant runs as it stands: it %s. "+
				"It fails: %s.", x.Name, x.Lesson, c.What, strings.Join(c.Fails, ", "))})
	}
	return out
}

// instructorPack is what the instructor keeps: for every exercise its
// answer key (NAME.answer.sql) and its classic wrong answers, each a file
// `grade --exercise NAME` accepts, a PostgreSQL twin (.postgres.sql) of
// any whose text differs there, and README.txt, the table of the checks
// each wrong answer fails.
func instructorPack() []packFile {
	var files []packFile
	// add files stmts as name, and as its PostgreSQL twin where their text
	// differs there; head says what the file is, and how to grade it.
	add := func(x *scenarios.Exercise, name, head string, stmts []store.Stmt) {
		grade := func(file, db string) string {
			return fmt.Sprintf(" Grade it: outboxlab grade --exercise %s%s %s", x.Name, db, file)
		}
		files = append(files, packFile{Name: filepath.Join(instructorPackFolder, name),
			Text: sqlFile(head+grade(name, ""), stmts, store.SQLite)})
		if differsOnPostgres(stmts) {
			pg := strings.TrimSuffix(name, ".sql") + ".postgres.sql"
			files = append(files, packFile{Name: filepath.Join(instructorPackFolder, pg),
				Text: sqlFile(head+" This is its PostgreSQL text."+grade(pg, " --db URL"), stmts, store.Postgres)})
		}
	}
	// A file's name starts with its exercise's: no column of its own, so
	// that no name wraps.
	t := lab.Table{Columns: []string{"File", "Fails (at least these checks)"}}
	for _, x := range scenarios.Exercises() {
		answer := x.Name + ".answer.sql"
		own := "the lesson's own statement"
		if len(x.Key) > 1 {
			own += "s, in order"
		}
		add(x, answer, fmt.Sprintf("The answer key to exercise %s (lesson %s): %s. It passes every check.",
			x.Name, x.Lesson, own), x.Key)
		t.AddRow(answer, "none: it passes every check")
		wrong := wrongAnswers(x)
		for _, w := range wrong {
			add(x, w.File, w.Head, w.Stmts)
			t.AddRow(w.File, engineNote(w.Engine)+strings.Join(w.Fails, ", "))
		}
		if len(wrong) == 0 {
			t.AddRow(x.Name+": -", "the lab holds no wrong answer to this exercise alone")
		}
	}
	var readme strings.Builder
	readme.WriteString("outboxlab exercises: the instructor's pack (keep it from the students)\n\n")
	hanging(&readme, "", "", reports.MaxLine, "For each exercise, in course order: NAME.answer.sql, the answer key, which "+
		"passes; and NAME.wrong-VARIANT.sql, each classic wrong answer the lessons' mistake variants hold "+
		"(wrong-explore-VARIANT: the interleaving explorer's) or the catalogue holds as text (wrong-TAG), with the checks "+
		"it fails when graded with `outboxlab grade "+
		"--exercise NAME FILE` (grading runs the explorer too where it runs the statement, so a file may fail more). "+
		"A file NAME.*.postgres.sql is the same answer in PostgreSQL's text, for `grade --db URL`.")
	readme.WriteString("\n")
	_ = reports.WriteTable(&readme, t)
	files = append(files, packFile{Name: filepath.Join(instructorPackFolder, "README.txt"), Text: readme.String()})
	return files
}

// variantHead is the comment atop a variant's wrong answer: where it
// comes from, what it changed and the checks it fails.
func variantHead(x *scenarios.Exercise, m scenarios.Mistake, fails []string) string {
	var changed []string
	for _, s := range m.Stmts {
		if s.Mistake != "" && !slices.Contains(changed, s.Mistake) {
			changed = append(changed, s.Mistake)
		}
	}
	return fmt.Sprintf("A classic wrong answer to exercise %s: variant %s of %s (outboxlab run %s --variant %s). "+
		"What changed: %s. %sIt fails: %s.", x.Name, m.Variant, m.Scenario, m.Scenario,
		m.Variant, strings.Join(changed, "; "), engineNote(m.Engine), strings.Join(fails, ", "))
}

// engineNote says where a wrong answer fails, when only one engine shows it.
func engineNote(engine store.Engine) string {
	switch engine {
	case store.Postgres:
		return "on PostgreSQL only (grade --db): "
	case store.SQLite:
		return "on SQLite only: "
	}
	return ""
}

// differsOnPostgres says some statement of stmts has a PostgreSQL text of
// its own.
func differsOnPostgres(stmts []store.Stmt) bool {
	return slices.ContainsFunc(stmts, func(s store.Stmt) bool { return s.Postgres != "" })
}

// sqlFile is a file of stmts as grade reads it: head as comments, then
// each statement, named in a comment, in engine's text, ending with ';'.
func sqlFile(head string, stmts []store.Stmt, engine store.Engine) string {
	var b strings.Builder
	hanging(&b, "-- ", "", starterWidth, head)
	for _, s := range stmts {
		text := s.SQL
		if engine == store.Postgres && s.Postgres != "" {
			text = s.Postgres
		}
		b.WriteString("\n-- " + s.Name + "\n" + strings.TrimSpace(text) + ";\n")
	}
	return b.String()
}
