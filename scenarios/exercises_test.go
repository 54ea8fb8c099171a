package scenarios

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/outboxlab/outboxlab/internal/pgtest"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/lesson/lessontest"
	"github.com/outboxlab/outboxlab/scenarios/explorer"
	"github.com/outboxlab/outboxlab/store"
)

// TestExerciseAnswerKeys grades, for every exercise, the lesson's own
// statements as a student's file (they pass) and every wrong answer the
// lab holds for the slot (each fails the checks its variant names), on
// SQLite.
func TestExerciseAnswerKeys(t *testing.T) { t.Parallel(); testExerciseAnswerKeys(t, "", false) }

// TestExerciseAnswerKeysOnPostgres is TestExerciseAnswerKeys on a real
// PostgreSQL, the statements in their PostgreSQL text.
func TestExerciseAnswerKeysOnPostgres(t *testing.T) {
	t.Parallel()
	testExerciseAnswerKeys(t, pgtest.URL(t), false)
}

// TestExerciseAnswerKeysInProcesses grades as grade --processes does, the
// lesson's instances in child processes, on both engines: the key passes
// and each exercise's first wrong answer its lesson runs fails the checks
// its variant names, so the children ran the file's statements, not the
// lesson's.
func TestExerciseAnswerKeysInProcesses(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) { t.Parallel(); testExerciseAnswerKeys(t, "", true) })
	t.Run("postgres", func(t *testing.T) { t.Parallel(); testExerciseAnswerKeys(t, pgtest.URL(t), true) })
}

// testExerciseAnswerKeys grades every exercise's key and wrong answers on
// db (SQLite when ""); in processes, only the first wrong answer of each.
func testExerciseAnswerKeys(t *testing.T, db string, processes bool) {
	engine := lesson.Options{Database: db}.Engine()
	gradeHere := func(t *testing.T, sc *lesson.Scenario, x *Exercise, texts []string) *lab.Result {
		t.Helper()
		r := gradeWith(t, db, processes, sc, x, texts)
		if processes && len(lessontest.ProcessesTable(t, r).Rows) == 0 {
			t.Errorf("%s started no child process", r.Scenario)
		}
		return r
	}
	for _, x := range Exercises() {
		t.Run(x.Name, func(t *testing.T) {
			t.Parallel()
			r := gradeHere(t, x.Scenario(), x, textsOn(engine, x.Key))
			if !r.Passed() {
				t.Fatalf("the answer key failed %v: %s", r.FailedChecks(), r.Verdict)
			}
			ranYours(t, r, x)
			if !strings.HasPrefix(r.Verdict, "YOUR "+strings.ToUpper(x.Name)+" HELD") {
				t.Errorf("verdict %q", r.Verdict)
			}
			graded := 0
			for _, m := range x.Mistakes() {
				// In processes, one wrong answer the lesson's own instances
				// run: the explorer starts children for every ordering,
				// minutes under the race detector.
				if m.Engine != "" && m.Engine != engine || processes && (graded > 0 || m.Scenario == explorer.Lesson.Name) {
					continue
				}
				graded++
				t.Run(m.Scenario+"/"+m.Variant, func(t *testing.T) {
					sc, _ := Lookup(m.Scenario)
					r := gradeHere(t, sc, x, textsOn(engine, m.Stmts))
					want := slices.DeleteFunc(slices.Clone(m.Breaks), func(c string) bool { return c == "mistake_exposed" })
					if got := r.FailedChecks(); !sameSet(got, want) {
						t.Errorf("failed %v, want %v (the checks variant %s names)", got, want, m.Variant)
					}
					if !strings.HasPrefix(r.Verdict, "YOUR "+strings.ToUpper(x.Name)+" FAILED") {
						t.Errorf("verdict %q", r.Verdict)
					}
				})
			}
		})
	}
}

// TestEveryExerciseHasAWrongAnswer: an exercise whose wrong answers the
// lab cannot show grades nothing.
func TestEveryExerciseHasAWrongAnswer(t *testing.T) {
	for _, x := range Exercises() {
		if len(x.Mistakes()) == 0 && len(x.WrongAnswers()) == 0 {
			t.Errorf("exercise %s: no mistake variant replaces its statements, and the catalogue holds no wrong answer", x.Name)
		}
	}
}

// TestExerciseWrongAnswers grades the catalogue's classic wrong answers
// no variant runs as it stands ([Exercise.WrongAnswers]): each fails
// exactly the lesson's checks it names, and its tag is unique.
func TestExerciseWrongAnswers(t *testing.T) {
	t.Parallel()
	for _, x := range Exercises() {
		tags := map[string]bool{}
		for _, w := range x.WrongAnswers() {
			if tags[w.Tag] || w.What == "" || len(w.Stmts) != len(x.Key) {
				t.Errorf("%s: wrong answer %q is a repeated tag, says nothing, or holds %d statements for %d", x.Name, w.Tag, len(w.Stmts), len(x.Key))
			}
			tags[w.Tag] = true
			t.Run(x.Name+"/"+w.Tag, func(t *testing.T) {
				t.Parallel()
				r := grade(t, "", x.Scenario(), x, w.Texts())
				if got := r.FailedChecks(); !sameSet(got, w.Fails) {
					t.Errorf("failed %v, want %v", got, w.Fails)
				}
			})
		}
	}
}

// TestExerciseParams: the handout lists exactly the parameters the key and
// the wrong answers use, each once with what it holds, so a student can
// use any of them and no other.
func TestExerciseParams(t *testing.T) {
	for _, x := range Exercises() {
		var listed []string
		for _, p := range x.Params {
			if p.Holds == "" || p.Sample == nil {
				t.Errorf("%s: parameter %s says nothing of what it holds", x.Name, p.Name)
			}
			listed = append(listed, p.Name)
		}
		slices.Sort(listed)
		if used := exerciseParams(x); !slices.Equal(slices.Compact(listed), used) {
			t.Errorf("%s: handout lists %v, the statements use %v", x.Name, listed, used)
		}
		if len(x.Shapes) != len(x.Key) {
			t.Errorf("%s: %d shapes for %d statements", x.Name, len(x.Shapes), len(x.Key))
		}
	}
}

// grade runs sc with texts as the student's file for x.
func grade(t *testing.T, db string, sc *lesson.Scenario, x *Exercise, texts []string) *lab.Result {
	t.Helper()
	return gradeWith(t, db, false, sc, x, texts)
}

// gradeWith is grade, the lesson's instances in child processes when
// processes is set.
func gradeWith(t *testing.T, db string, processes bool, sc *lesson.Scenario, x *Exercise, texts []string) *lab.Result {
	t.Helper()
	opts := lesson.DefaultOptions()
	opts.TempRoot, opts.Database = t.TempDir(), db
	if processes {
		opts.Processes, opts.ChildTimeout = true, lessontest.ChildTimeout
	}
	if sc == &explorer.Lesson {
		opts.ExploreBound = 5
	}
	opts.Submission = x.Submit("answer.sql", store.SlotFile{Slot: x.Slot(), Texts: texts})
	r, err := lesson.Execute(context.Background(), sc, "", opts, false)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// ranYours asserts every statement of the file ran in the lesson.
func ranYours(t *testing.T, r *lab.Result, x *Exercise) {
	t.Helper()
	for _, s := range x.Submit("answer.sql", store.SlotFile{Texts: make([]string, len(x.Key))}).Stmts() {
		i := slices.IndexFunc(r.Statements, func(st lab.Statement) bool { return st.Name == s.Name })
		if i < 0 || r.Statements[i].Runs == 0 {
			t.Errorf("%s never ran in %s", s.Name, r.Scenario)
		}
	}
}

// textsOn are the statements' texts as a student writes them for engine.
func textsOn(engine store.Engine, stmts []store.Stmt) []string {
	out := make([]string, len(stmts))
	for i, s := range stmts {
		out[i] = s.SQL
		if engine == store.Postgres && s.Postgres != "" {
			out[i] = s.Postgres
		}
	}
	return out
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// TestExploredExercisesRunInTheExplorer: an exercise the explorer grades
// has its statement executed there (the answer key's explorer run names
// the file's statement in its ledger), and one it does not grade is not
// run there at all.
func TestExploredExercisesRunInTheExplorer(t *testing.T) {
	t.Parallel()
	for _, x := range Exercises() {
		if !x.Explored() {
			continue
		}
		t.Run(x.Name, func(t *testing.T) {
			t.Parallel()
			r := grade(t, "", &explorer.Lesson, x, textsOn(store.SQLite, x.Key))
			if !r.Passed() {
				t.Fatalf("the answer key failed the explorer: %v", r.FailedChecks())
			}
			ranYours(t, r, x)
		})
	}
	if renew, err := LookupExercise("renew"); err != nil || renew.Explored() {
		t.Errorf("renew: the explorer has no renewal action, yet Explored() = true (%v)", err)
	}
}

// exerciseParams are the named parameters the statements of x use, the
// key's and every wrong answer's, sorted: what the lab binds.
func exerciseParams(x *Exercise) []string {
	stmts := slices.Clone(x.Key)
	for _, m := range x.Mistakes() {
		stmts = append(stmts, m.Stmts...)
	}
	var out []string
	for _, s := range stmts {
		texts, _ := store.SplitStatements(s.SQL)
		for _, t := range texts {
			out = append(out, t.Params...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
