package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/outboxlab/outboxlab/scenarios"
	"github.com/outboxlab/outboxlab/store"
)

// writtenPack runs `exercise pack` into a new folder and returns it.
func writtenPack(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "pack")
	o := runCLI(t, "exercise", "pack", "--out", dir)
	if o.code != 0 {
		t.Fatalf("exercise pack: exit %d: %s", o.code, o.stderr)
	}
	assertFits(t, "exercise pack", o.stdout)
	return dir
}

// collapsed is s with every run of white space one blank, as a statement
// reads whatever its line breaks.
func collapsed(s string) string { return strings.Join(strings.Fields(s), " ") }

// answerTexts are every statement a student must not be handed: each
// exercise's key and wrong answers, in SQLite's and PostgreSQL's text,
// without their ';', whitespace collapsed.
func answerTexts() map[string]string {
	out := map[string]string{}
	for _, x := range scenarios.Exercises() {
		stmts := slices.Clone(x.Key)
		for _, m := range x.Mistakes() {
			stmts = append(stmts, m.Stmts...)
		}
		for _, s := range stmts {
			for _, text := range []string{s.SQL, s.Postgres} {
				if text = collapsed(strings.TrimSuffix(strings.TrimSpace(text), ";")); text != "" {
					out[text] = x.Name + ": " + s.Name
				}
			}
		}
	}
	return out
}

// TestPackStudentHoldsNoAnswer: no file of the student's pack holds an
// answer key's statement or a wrong answer's, whitespace collapsed.
func TestPackStudentHoldsNoAnswer(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(writtenPack(t), studentPackFolder)
	answers := answerTexts()
	if len(answers) < len(scenarios.Exercises()) {
		t.Fatalf("only %d answer texts", len(answers))
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) == 0 {
		t.Fatalf("the student's pack %s: %v (%d files)", dir, err, len(entries))
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		text := collapsed(string(b))
		for answer, what := range answers {
			if strings.Contains(text, answer) {
				t.Errorf("student/%s holds the statement %s", e.Name(), what)
			}
		}
	}
}

// TestPackStudentIsTheHandouts: the student's pack holds, for every
// exercise, the handout `exercise show` prints and the starter `exercise
// show --starter` writes, byte for byte, and a README naming the
// exercises in course order.
func TestPackStudentIsTheHandouts(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(writtenPack(t), studentPackFolder)
	starters := t.TempDir()
	readme, err := os.ReadFile(filepath.Join(dir, "README.txt"))
	if err != nil {
		t.Fatal(err)
	}
	at := 0
	for _, x := range scenarios.Exercises() {
		show := runCLI(t, "exercise", "show", x.Name, "--starter", "--out", starters)
		if show.code != 0 {
			t.Fatalf("exercise show %s: exit %d: %s", x.Name, show.code, show.stderr)
		}
		handout, _ := os.ReadFile(filepath.Join(dir, x.Name+".txt"))
		if want := runCLI(t, "exercise", "show", x.Name).stdout; string(handout) != want {
			t.Errorf("student/%s.txt is not the handout exercise show prints:\n%s\nwant:\n%s", x.Name, handout, want)
		}
		starter, _ := os.ReadFile(filepath.Join(dir, x.Name+".sql"))
		want, err := os.ReadFile(filepath.Join(starters, x.Name+".sql"))
		if err != nil || string(starter) != string(want) {
			t.Errorf("student/%s.sql is not the starter exercise show --starter writes (%v)", x.Name, err)
		}
		i := strings.Index(string(readme[at:]), "| "+x.Name+" ")
		if i < 0 {
			t.Errorf("README.txt does not list %s after the exercises before it", x.Name)
			continue
		}
		at += i
	}
	assertFits(t, "student/README.txt", string(readme))
}

// TestStarterIsTheHandout: each starter holds, as comments, the task, the
// schema in force, every parameter and what it holds, what the statement
// must do, every check that grades it and the grade command, then one
// marked blank place per statement; and no line that is not a comment.
func TestStarterIsTheHandout(t *testing.T) {
	t.Parallel()
	for _, x := range scenarios.Exercises() {
		h := handoutOf(x)
		var comments []string
		for _, line := range strings.Split(h.Starter, "\n") {
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "--") {
				t.Errorf("%s: the starter holds code: %q", x.Name, line)
			}
			comments = append(comments, strings.TrimPrefix(line, "--"))
		}
		flat := collapsed(strings.Join(comments, " "))
		want := []string{h.Task, h.Must, h.Statement, "outboxlab grade --exercise " + x.Name + " " + x.Name + ".sql"}
		for _, p := range h.Params {
			want = append(want, p.Name, p.Holds)
		}
		for _, c := range h.GradedBy {
			want = append(want, c.Name+": "+c.About)
		}
		for _, s := range h.Schema {
			want = append(want, strings.Split(s.SQL, "\n")...)
		}
		for _, w := range want {
			if !strings.Contains(flat, collapsed(w)) {
				t.Errorf("%s: the starter lacks %q", x.Name, w)
			}
		}
		if got := strings.Count(h.Starter, placeMark); got != len(x.Key) {
			t.Errorf("%s: %d marked places for %d statements", x.Name, got, len(x.Key))
		}
		if !strings.Contains(flat, "CREATE TABLE") {
			t.Errorf("%s: the starter has no CREATE TABLE", x.Name)
		}
	}
}

// TestPackRefusesAnOutInUse: a folder that holds anything, a file, and a
// folder that cannot be created are each one clear line and exit 2, and
// nothing in the way is touched.
func TestPackRefusesAnOutInUse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	kept := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(kept, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--out", dir}, "is not empty"},
		{[]string{"--out", kept}, "is a file, not a folder"},
		{[]string{"--out", filepath.Join(kept, "pack")}, "cannot"},
		{nil, "needs --out FOLDER"},
		{[]string{"--out", filepath.Join(dir, "new"), "extra"}, "takes no arguments"},
	} {
		o := runCLI(t, append([]string{"exercise", "pack"}, tt.args...)...)
		if o.code != 2 || !strings.Contains(o.stderr, tt.want) || strings.Count(strings.TrimSpace(o.stderr), "\n") > 0 {
			t.Errorf("%v: exit %d, stderr %q, want one line with %q", tt.args, o.code, o.stderr, tt.want)
		}
	}
	if b, err := os.ReadFile(kept); err != nil || string(b) != "mine" {
		t.Errorf("the file in the way changed: %q, %v", b, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the refused --out holds %d entries, want only the file that was there", len(entries))
	}
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	if o := runCLI(t, "exercise", "pack", "--out", empty); o.code != 0 {
		t.Errorf("an empty --out: exit %d: %s", o.code, o.stderr)
	}
}

// readmeTable reads a table as reports draw it: one map per row, its
// header's names to its cells, a wrapped cell's lines joined (by a blank,
// or by nothing after a '-', as a wrapped file name reads).
func readmeTable(text string) []map[string]string {
	var header []string
	var rows []map[string]string
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if header == nil {
			header = cells
			continue
		}
		if cells[0] != "" {
			rows = append(rows, map[string]string{})
		}
		row := rows[len(rows)-1]
		for i, c := range cells {
			switch prev := row[header[i]]; {
			case c == "":
			case prev == "":
				row[header[i]] = c
			case strings.HasSuffix(prev, "-"):
				row[header[i]] = prev + c
			default:
				row[header[i]] = prev + " " + c
			}
		}
	}
	return rows
}

// TestPackInstructorGrades grades every file of the instructor's pack on
// SQLite through grade --exercise, as a class's files are: each answer
// key passes, and each wrong answer fails at least the checks the pack's
// README names for it (grading also runs the explorer where it runs the
// statement, which a lesson's wrong answer may fail too); and no report
// prints a key statement more often than the file itself holds it. A
// wrong answer PostgreSQL alone shows, and a PostgreSQL twin, is left to
// --db.
func TestPackInstructorGrades(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(writtenPack(t), instructorPackFolder)
	readme, err := os.ReadFile(filepath.Join(dir, "README.txt"))
	if err != nil {
		t.Fatal(err)
	}
	assertFits(t, "instructor/README.txt", string(readme))
	fails := map[string][]string{} // file -> the checks the README says it fails
	byExercise := map[string][]string{}
	for _, row := range readmeTable(string(readme)) {
		file, says := row["File"], row["Fails (at least these checks)"]
		if strings.HasSuffix(file, ": -") || strings.HasPrefix(says, engineNote(store.Postgres)) {
			continue
		}
		exercise, _, _ := strings.Cut(file, ".")
		byExercise[exercise] = append(byExercise[exercise], filepath.Join(dir, file))
		fails[file] = []string{}
		if !strings.HasPrefix(says, "none") {
			fails[file] = strings.Split(says, ", ")
		}
	}
	graded := 0
	for _, x := range scenarios.Exercises() {
		files := byExercise[x.Name]
		if !slices.Contains(files, filepath.Join(dir, x.Name+".answer.sql")) ||
			len(files) != 1+len(slices.DeleteFunc(wrongAnswers(x), func(w wrongAnswer) bool { return w.Engine == store.Postgres })) {
			t.Errorf("%s: the README lists %v", x.Name, files)
			continue
		}
		// Every file is one grade accepts, holding the statements the
		// lesson's key or variant holds: scenarios' TestExerciseAnswerKeys
		// grades those on both engines. The grades below run a few through
		// the CLI end to end (each grade runs the lesson and the explorer).
		for _, f := range files {
			checkPackFileHolds(t, x, f)
		}
		if !gradedEndToEnd[x.Name] {
			graded += len(files)
			continue
		}
		o := runCLI(t, append([]string{"grade", "--exercise", x.Name, "--jobs", "2", "--format", "json", "--out", t.TempDir()}, files...)...)
		if o.code != 0 && o.code != 1 {
			t.Errorf("%s: grade exit %d: %s %s", x.Name, o.code, o.stdout, o.stderr)
			continue
		}
		for _, g := range gradesOf(t, o.stdout) {
			graded++
			want := fails[filepath.Base(g.File)]
			switch {
			case len(want) == 0 && !g.Passed:
				t.Errorf("%s: the answer key failed %v %s", g.File, g.FailedChecks, g.Error)
			case len(want) > 0 && (g.Passed || slices.ContainsFunc(want, func(c string) bool { return !slices.Contains(g.FailedChecks, c) })):
				t.Errorf("%s: failed %v, the README says at least %v", g.File, g.FailedChecks, want)
			}
			assertKeyHidden(t, x, g)
		}
	}
	if graded != len(fails) || graded < 2*len(scenarios.Exercises()) {
		t.Errorf("checked %d files of the %d the README lists", graded, len(fails))
	}
}

// sqlComment is a comment of SQL text, as a slot file leaves it out.
var sqlComment = regexp.MustCompile(`(?s)/\*.*?\*/|--[^\n]*`)

// withoutComments is sql as a slot file holds it: no comments, no ';'.
func withoutComments(sql string) string {
	return strings.TrimSuffix(strings.TrimSpace(sqlComment.ReplaceAllString(sql, "")), ";")
}

// gradedEndToEnd are the exercises whose instructor files
// TestPackInstructorGrades grades through the CLI: one the explorer grades
// too, one it does not, and the two-statement claim.
var gradedEndToEnd = map[string]bool{"ack": true, "finalize": true, "claim": true}

// checkPackFileHolds parses the instructor file at path as grade does and
// asserts it holds the statements of x's key, or of the wrong answer it is
// named for.
func checkPackFileHolds(t *testing.T, x *scenarios.Exercise, path string) {
	t.Helper()
	f, err := loadSlotFile(context.Background(), x.Slot(), path, false)
	if err != nil {
		t.Errorf("%s: grade would refuse it: %v", path, err)
		return
	}
	want := x.Key
	if name := filepath.Base(path); name != x.Name+".answer.sql" {
		i := slices.IndexFunc(wrongAnswers(x), func(w wrongAnswer) bool { return w.File == name })
		if i < 0 {
			t.Errorf("%s: no wrong answer of %s has this name", path, x.Name)
			return
		}
		want = wrongAnswers(x)[i].Stmts
	}
	if len(f.Texts) != len(want) {
		t.Errorf("%s holds %d statements, want %d", path, len(f.Texts), len(want))
		return
	}
	for i, text := range f.Texts {
		if collapsed(text) != collapsed(withoutComments(want[i].SQL)) {
			t.Errorf("%s, statement %d:\n%s\nwant\n%s", path, i+1, text, want[i].SQL)
		}
	}
}

// assertKeyHidden fails where g's reports print a statement of x's key
// more often than g's file holds it: a graded report shows the student's
// statements in the slot, never the lesson's.
func assertKeyHidden(t *testing.T, x *scenarios.Exercise, g grade) {
	t.Helper()
	file, err := os.ReadFile(g.File)
	if err != nil {
		t.Fatal(err)
	}
	var own []string // the file's statements, collapsed
	for _, text := range strings.Split(string(file), ";") {
		var code []string
		for _, line := range strings.Split(text, "\n") {
			if !strings.HasPrefix(strings.TrimSpace(line), "--") {
				code = append(code, line)
			}
		}
		own = append(own, collapsed(strings.Join(code, " ")))
	}
	for _, path := range []string{g.Report, g.ExploreReport} {
		if path == "" {
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		report := collapsed(string(b))
		for _, k := range x.Key {
			key := collapsed(k.SQL)
			if got, want := strings.Count(report, key), countOf(own, key); got != want {
				t.Errorf("%s: %s prints the key %q %d times; the file holds it %d times", g.File, path, k.Name, got, want)
			}
		}
	}
}

// countOf counts s in list.
func countOf(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}

// TestPackPostgresFilesParse: every file of the instructor's pack that
// only `grade --db` grades (a PostgreSQL twin, a wrong answer PostgreSQL
// alone shows) splits into its exercise's statements as grade reads a
// file for PostgreSQL, which then judges it with its own parser.
func TestPackPostgresFilesParse(t *testing.T) {
	t.Parallel()
	postgresOnly := map[string]bool{}
	for _, x := range scenarios.Exercises() {
		for _, w := range wrongAnswers(x) {
			postgresOnly[w.File] = w.Engine == store.Postgres
		}
	}
	parsed := 0
	for _, f := range instructorPack() {
		name := filepath.Base(f.Name)
		x, err := scenarios.LookupExercise(name[:strings.Index(name, ".")])
		if name == "README.txt" {
			continue
		} else if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !strings.HasSuffix(name, ".postgres.sql") && !postgresOnly[name] {
			continue
		}
		parsed++
		if sf, err := store.ParseSlotFile(x.Slot(), f.Text); err != nil || len(sf.Texts) != len(x.Key) {
			t.Errorf("%s: %v (%d statements)", name, err, len(sf.Texts))
		}
	}
	if parsed < 5 {
		t.Errorf("%d files for PostgreSQL, want the twins of the claim's and batch-complete's answers and of "+
			"batch-complete's wrong answer, and the claim's two wrong answers", parsed)
	}
}
