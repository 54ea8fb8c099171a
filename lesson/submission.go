package lesson

import (
	"fmt"
	"slices"
	"strings"

	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/store"
)

// Submission is a student's file for an exercise (or an engineer's
// --claim-sql, the claim's): its statements, as the sandbox checked them,
// run in the lesson's statement set in place of the exercise's key, as a
// variant's mistakes are. The registry's exercises make one
// (scenarios.Exercise.Submit).
type Submission struct {
	Exercise string       // the exercise's name
	Lesson   string       // the scenario whose run grades the file
	Key      []store.Stmt // the lesson's statements the file replaces, in file order: the answer key
	// Kinds are the key statements' kinds ("SELECT", "UPDATE"), which name
	// the statements of a file that holds more than one.
	Kinds []string
	// GradedBy are the scenarios that may run the file: its lesson, and
	// the interleaving explorer where its actions run the key statements.
	GradedBy []string
	Source   string // where it came from: the file's name
	// Student is whose file it is, when a grade of a class names it (the
	// file's folder, as submissions/alice/ack.sql is alice's); "" names
	// no one, as for run --claim-sql.
	Student string
	File    store.SlotFile // its statements, comments left out
}

// origin says where the file came from, for a statement's name and the
// verdict: "from ack.sql", or "alice, from ack.sql" with a student.
func (s *Submission) origin() string {
	if s.Student == "" {
		return "from " + s.Source
	}
	return s.Student + ", from " + s.Source
}

// Stmts are the file's statements, each named for the report and
// replacing its key statement. A file in the slot's other form, with
// fewer statements than the key (the claim's one statement), replaces the
// first key statements and leaves the rest out ([store.Stmt.Omitted]).
func (s *Submission) Stmts() []store.Stmt {
	out := make([]store.Stmt, len(s.Key))
	for i, text := range s.File.Texts {
		name := "your " + s.Exercise
		if len(s.File.Texts) > 1 {
			name += ": " + strings.ToLower(s.Kinds[i])
		}
		out[i] = store.Stmt{Name: name + " (" + s.origin() + ")", SQL: text, Replaces: &s.Key[i]}
	}
	for i := len(s.File.Texts); i < len(s.Key); i++ {
		out[i] = store.Stmt{Name: fmt.Sprintf("your %s has no %s of its own: its one statement does it (%s)",
			s.Exercise, strings.ToLower(s.Kinds[i]), s.origin()), Replaces: &s.Key[i]}
	}
	return out
}

// submitted is set with the run's submission swapped in wherever set
// holds a statement of the exercise's key; a set that holds none is left
// as it is (a lesson runs several).
func submitted[T any](env *Env, set T) T {
	sub := env.Options.Submission
	if sub == nil {
		return set
	}
	for _, s := range sub.Stmts() {
		if swapped, err := store.Swap(set, s); err == nil {
			set = swapped
		}
	}
	return set
}

// checkSubmission refuses a run that cannot grade opts.Submission: one
// with a variant, a scenario that does not run the exercise's statements,
// or a file with the wrong number of statements.
func checkSubmission(sc *Scenario, variant string, opts Options) error {
	sub := opts.Submission
	switch {
	case sub == nil:
		return nil
	case variant != "":
		return fmt.Errorf("your file replaces the lesson's %s; it cannot be combined with --variant %s", sub.Exercise, variant)
	case !slices.Contains(sub.GradedBy, sc.Name):
		return fmt.Errorf("scenario %s does not run the %s exercise's statement (its lesson is %s)", sc.Name, sub.Exercise, sub.Lesson)
	case len(sub.File.Texts) == 0 || len(sub.File.Texts) > len(sub.Key):
		return fmt.Errorf("the %s exercise takes %d statements; the file holds %d", sub.Exercise, len(sub.Key), len(sub.File.Texts))
	}
	return nil
}

// judgeSubmission names the student's file in res and says, in the
// verdict, what the lesson's checks made of it: a lesson's own verdict
// speaks of its design or a variant, never of a file.
func judgeSubmission(res *lab.Result, sub *Submission) {
	res.CustomSQL, res.CustomSlot = sub.Exercise+" from "+sub.Source, sub.Exercise
	if sub.Student != "" {
		res.CustomSQL = sub.Exercise + " by " + sub.Student + ", from " + sub.Source
	}
	keys := make([]string, len(sub.Key))
	for i, k := range sub.Key {
		keys[i] = "\"" + k.Name + "\""
	}
	in := "with your statement in place of the lesson's " + strings.Join(keys, " and ")
	if res.Passed() {
		res.Verdict = fmt.Sprintf("YOUR %s HELD (%s): every check passed %s. %s",
			strings.ToUpper(sub.Exercise), sub.origin(), in, res.Verdict)
		return
	}
	res.Verdict = fmt.Sprintf("YOUR %s FAILED (%s): failed checks %s, %s. Read the ledgers and the timeline "+
		"for what your statement changed; `outboxlab exercise show %s` restates the task.",
		strings.ToUpper(sub.Exercise), sub.origin(), strings.Join(res.FailedChecks(), ", "), in, sub.Exercise)
}
