package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/outboxlab/outboxlab/internal/pgtest"
	"github.com/outboxlab/outboxlab/scenarios"
)

// TestExerciseList: every exercise is listed, in text and JSON, with its
// lesson, what the student writes and the name of every check that grades
// it; at least eight, across sessions 15 to 21.
func TestExerciseList(t *testing.T) {
	t.Parallel()
	text := runCLI(t, "exercise", "list")
	if text.code != 0 {
		t.Fatalf("exit %d: %s", text.code, text.stderr)
	}
	js := runCLI(t, "exercise", "list", "--format", "json")
	var listed []handout
	if err := json.Unmarshal([]byte(js.stdout), &listed); err != nil {
		t.Fatalf("JSON: %v\n%s", err, js.stdout)
	}
	if len(listed) < 8 {
		t.Errorf("%d exercises, want at least 8", len(listed))
	}
	lessons := map[string]bool{}
	graded := lastColumn(text.stdout) // the Graded by column, its wrapped lines joined
	for _, h := range listed {
		lessons[h.Lesson] = true
		for _, want := range []string{h.Name, h.Lesson} {
			if !strings.Contains(text.stdout, want) {
				t.Errorf("the text list lacks %q", want)
			}
		}
		if h.Task == "" || h.Must == "" || len(h.Schema) == 0 || len(h.Params) == 0 || len(h.GradedBy) == 0 {
			t.Errorf("%s: incomplete handout %+v", h.Name, h)
		}
		for _, c := range h.GradedBy {
			if !strings.Contains(graded, c.Name) {
				t.Errorf("%s: the Graded by column hides check %q", h.Name, c.Name)
			}
		}
	}
	if strings.Contains(graded, " more") {
		t.Errorf("the Graded by column counts checks it does not name:\n%s", text.stdout)
	}
	if len(lessons) < 6 {
		t.Errorf("exercises span %d lessons, want sessions 15 to 21", len(lessons))
	}
	assertFits(t, "exercise list", text.stdout)
}

// TestExerciseShow: the handout's text form holds what its JSON form
// holds, every line within 120 columns, for every exercise.
func TestExerciseShow(t *testing.T) {
	t.Parallel()
	for _, x := range scenarios.Exercises() {
		text := runCLI(t, "exercise", "show", x.Name)
		js := runCLI(t, "exercise", "show", x.Name, "--format", "json")
		if text.code != 0 || js.code != 0 {
			t.Fatalf("%s: exit %d/%d: %s%s", x.Name, text.code, js.code, text.stderr, js.stderr)
		}
		var h handout
		if err := json.Unmarshal([]byte(js.stdout), &h); err != nil {
			t.Fatalf("%s: JSON: %v", x.Name, err)
		}
		flat := strings.Join(strings.Fields(text.stdout), " ")
		want := []string{h.Task, h.Must, h.Grading, h.Statement}
		for _, p := range h.Params {
			want = append(want, p.Name, p.Holds)
		}
		for _, c := range h.GradedBy {
			want = append(want, c.Name)
		}
		for _, s := range h.Schema {
			want = append(want, s.File, strings.Join(strings.Fields(s.SQL), " "))
		}
		for _, w := range want {
			if !strings.Contains(flat, strings.Join(strings.Fields(w), " ")) {
				t.Errorf("%s: the text handout lacks %q", x.Name, w)
			}
		}
		for _, k := range x.Key {
			if strings.Contains(text.stdout, strings.TrimSpace(k.SQL)) {
				t.Errorf("%s: the handout prints the answer key", x.Name)
			}
		}
		assertFits(t, "exercise show "+x.Name, text.stdout)
	}
}

// TestExerciseStarter: --starter writes NAME.sql with the statement left
// blank (grading it refuses it for holding no statement), never over an
// existing file.
func TestExerciseStarter(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for i, want := range []string{"finalize.sql", "finalize-2.sql"} {
		o := runCLI(t, "exercise", "show", "finalize", "--starter", "--out", dir)
		if o.code != 0 || !strings.Contains(o.stdout, filepath.Join(dir, want)) {
			t.Fatalf("run %d: exit %d, stdout %q, stderr %q", i+1, o.code, o.stdout, o.stderr)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "finalize.sql"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line != "" && !strings.HasPrefix(line, "--") {
			t.Errorf("the starter holds code: %q", line)
		}
	}
	g := runCLI(t, "grade", "--exercise", "finalize", "--format", "csv", "--out", filepath.Join(dir, "out"), filepath.Join(dir, "finalize.sql"))
	if g.code != 2 || !strings.Contains(g.stdout, ",refused,") {
		t.Errorf("grading the blank starter: exit %d, %s", g.code, g.stdout)
	}
}

// TestExerciseBadInput: unknown names and misplaced arguments are one
// clear line and exit 2.
func TestExerciseBadInput(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"exercise", "show", "acks"}, `unknown exercise "acks"; did you mean ack?`},
		{[]string{"exercise", "show"}, "one exercise name"},
		{[]string{"exercise", "foo"}, `unknown exercise subcommand "foo"; exercise's subcommands: list, show, pack`},
		{[]string{"exercise", "list", "x"}, "takes no arguments"},
		{[]string{"exercise", "show", "ack", "--format", "yaml"}, "--format must be text or json"},
		{[]string{"grade", "--exercise", "finalise", "x.sql"}, `did you mean finalize?`},
		{[]string{"grade", "--exercise", "ack"}, "name the files to grade"},
		{[]string{"grade", "--exercise", "finalize", "--bound", "3", "x.sql"}, "the explorer does not grade finalize"},
		{[]string{"grade", "--exercise", "ack", "--bound", "99", "x.sql"}, "--bound must be from 1 to"},
	} {
		o := runCLI(t, tt.args...)
		if o.code != 2 || !strings.Contains(o.stderr, tt.want) || strings.Count(strings.TrimSpace(o.stderr), "\n") > 0 {
			t.Errorf("%v: exit %d, stderr %q, want one line with %q", tt.args, o.code, o.stderr, tt.want)
		}
	}
}

// TestGradeExercise grades a right and a wrong answer to an exercise the
// explorer runs: the wrong one fails the lesson's checks and the
// explorer's, with its shortest breaking ordering as the reason, and both
// get their two reports.
func TestGradeExercise(t *testing.T) { t.Parallel(); testGradeExercise(t, nil) }

// TestGradeExerciseOnPostgres is TestGradeExercise with --db: each file as
// a throwaway role in a database of its own.
func TestGradeExerciseOnPostgres(t *testing.T) {
	t.Parallel()
	testGradeExercise(t, []string{"--db", pgtest.URL(t)})
}

// TestGradeExerciseInProcesses grades a right and a wrong finalize with
// --processes, on both engines: the lesson's Worker-A is a child process,
// frozen by a real SIGSTOP past its lease, and the verdicts are those of
// the run in one process (TestExerciseAnswerKeys). The finalize is no
// statement the explorer runs: with --processes each of its orderings
// starts child processes, which under the race detector took longer than
// grade's 2 min --timeout in CI.
func TestGradeExerciseInProcesses(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) { t.Parallel(); testGradeInProcesses(t, nil) })
	t.Run("postgres", func(t *testing.T) { t.Parallel(); testGradeInProcesses(t, []string{"--db", pgtest.URL(t)}) })
}

// testGradeInProcesses grades a right and a wrong finalize with
// --processes, on the server --db names in db (SQLite without).
func testGradeInProcesses(t *testing.T, db []string) {
	dir := t.TempDir()
	owned := "UPDATE OutboxMessages\nSET Status = 'Processed', ProcessedAtUtc = :now\nWHERE Id = :id\n  AND Status = 'Processing'"
	paths := writeFiles(t, dir, map[string]string{
		"right.sql": owned + "\n  AND LockedBy = :worker;\n",
		"wrong.sql": owned + ";\n",
	})
	args := append([]string{"grade", "--exercise", "finalize", "--processes", "--format", "json", "--out", filepath.Join(dir, "out")}, db...)
	o := runCLI(t, append(args, paths...)...)
	if o.code != 1 {
		t.Fatalf("exit %d, want 1: %s %s", o.code, o.stdout, o.stderr)
	}
	grades := gradesOf(t, o.stdout)
	if len(grades) != 2 || !grades[0].Passed || grades[1].Passed {
		t.Fatalf("grades %+v", grades)
	}
	want := []string{"ownership_violations", "owner_result_kept", "rejected_while_owner_holds"}
	if !slices.Equal(grades[1].FailedChecks, want) {
		t.Errorf("wrong.sql failed %v, want %v", grades[1].FailedChecks, want)
	}
	for _, g := range grades {
		b, err := os.ReadFile(g.Report)
		if err != nil || !strings.Contains(string(b), "== Processes (--processes)") || !strings.Contains(string(b), "YOUR FINALIZE") {
			t.Errorf("%s: report %q has no table of its child processes: %v", g.File, g.Report, err)
		}
		if strings.Contains(string(b), "No child process") || !strings.Contains(string(b), "| outbox-instance |") {
			t.Errorf("%s: report %q lists no outbox-instance child", g.File, g.Report)
		}
	}
}

// testGradeExercise grades a right and a wrong ack, on the server --db
// names in db (SQLite without).
func testGradeExercise(t *testing.T, db []string) {
	dir := t.TempDir()
	files := map[string]string{
		"right.sql": "-- the token decides\nUPDATE outbox_events SET delivered = 1, delivered_at = :now\nWHERE event_id = :id AND claim_token = :token AND delivered = 0;\n",
		"wrong.sql": "UPDATE outbox_events SET delivered = 1, delivered_at = :now WHERE event_id = :id AND delivered = 0;\n",
	}
	paths := writeFiles(t, dir, files)
	args := append([]string{"grade", "--exercise", "ack", "--out", filepath.Join(dir, "out")}, db...)
	o := runCLI(t, append(append(args, "--format", "json"), paths...)...)
	if o.code != 1 {
		t.Fatalf("exit %d, want 1: %s", o.code, o.stderr)
	}
	grades := gradesOf(t, o.stdout)
	if len(grades) != 2 || !grades[0].Passed || grades[1].Passed {
		t.Fatalf("grades %+v", grades)
	}
	want := []string{"stale_ack_rows", "current_ack_rows", "failed_acks_lease_lost", "explore: violations_stale_completion"}
	if !slices.Equal(grades[1].FailedChecks, want) {
		t.Errorf("wrong.sql failed %v, want %v", grades[1].FailedChecks, want)
	}
	for _, g := range grades {
		for _, r := range []string{g.Report, g.ExploreReport} {
			if b, err := os.ReadFile(r); err != nil || !strings.Contains(string(b), "YOUR ACK") {
				t.Errorf("%s: report %q: %v", g.File, r, err)
			} else if strings.Contains(string(b), "== Processes (--processes)") {
				t.Errorf("%s: report %q has a table of child processes, without --processes", g.File, r)
			}
		}
	}
	table := runCLI(t, append(args, paths[1])...)
	if !strings.Contains(lastColumn(table.stdout), "the shortest ordering that breaks it, 5 actions: A claim, A send, expire, B claim, A complete") {
		t.Errorf("the table does not show the explorer's shortest ordering:\n%s", table.stdout)
	}
}

// gradesOf reads grade's --format json output: one verdict per line.
func gradesOf(t *testing.T, stdout string) []grade {
	t.Helper()
	var grades []grade
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var g grade
		if err := json.Unmarshal([]byte(line), &g); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		grades = append(grades, g)
	}
	return grades
}

// byFileName is grades keyed by their file's base name.
func byFileName(grades []grade) map[string]grade {
	got := map[string]grade{}
	for _, g := range grades {
		got[filepath.Base(g.File)] = g
	}
	return got
}

// lastColumn is the text of a table's last column, its cells' lines
// joined by blanks, as a reader follows a wrapped cell.
func lastColumn(table string) string {
	var words []string
	for _, line := range strings.Split(table, "\n") {
		line = strings.TrimSuffix(line, "|")
		if i := strings.LastIndex(line, "|"); i >= 0 {
			words = append(words, strings.Fields(line[i+1:])...)
		}
	}
	return strings.Join(words, " ")
}

// writeFiles writes each file's text under dir and returns their paths,
// sorted.
func writeFiles(t *testing.T, dir string, files map[string]string) []string {
	t.Helper()
	var paths []string
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	slices.Sort(paths)
	return paths
}

// assertFits fails for a line over 120 columns.
func assertFits(t *testing.T, what, text string) {
	t.Helper()
	for _, line := range strings.Split(text, "\n") {
		if n := len([]rune(line)); n > 120 {
			t.Errorf("%s: a line of %d columns: %q", what, n, line)
		}
	}
}
