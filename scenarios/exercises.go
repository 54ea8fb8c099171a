package scenarios

import (
	"fmt"
	"slices"
	"strings"

	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/scenarios/explorer"
	"github.com/outboxlab/outboxlab/store"
)

// Exercise is one statement a lesson teaches, handed to a student to
// write: the student's file takes the place of the lesson's statements
// Key in the lesson's statement set, exactly as a variant's mistake does,
// and the lesson's own checks grade it. Where the interleaving explorer
// runs those statements too, it grades the file over every ordering up to
// its bound.
type Exercise struct {
	Name   string       // what `exercise show` and `grade --exercise` take
	Lesson string       // the scenario whose run grades the file
	Key    []store.Stmt // the lesson's statements the file replaces, in file order: the answer key
	Shapes []store.Shape
	// Alternative is the other form a file may take (see
	// [store.Slot.Alternative]): its statements replace the first of Key
	// and leave the rest out (the claim's one statement).
	Alternative []store.Shape
	Schema      []store.Migration // the tables in force when the statements run
	// Task is the handout's task, in two or three sentences; Must says
	// what the statement must return or change.
	Task, Must string
	Params     []Param // the named parameters the lab binds, with what each holds
	// CheckRows are rows the sandbox check runs the statements over before
	// the lesson does (portable SQL, "" for none).
	CheckRows string
}

// Param is a named parameter an exercise's statement may use.
type Param struct {
	Name   string // without the ':'
	Holds  string // what the lab binds to it
	Sample any    // a value of its type, for the sandbox's check (int64 or string)
	// Statement is the one statement of a two-statement file that gets
	// it (from 1); 0 means every statement.
	Statement int
}

// Slot is where the file goes, as the sandbox confines it: its shapes,
// the schema its check compiles them on and the values it binds.
func (x *Exercise) Slot() store.Slot {
	samples := map[string]any{}
	for _, p := range x.Params {
		samples[p.Name] = p.Sample
	}
	return store.Slot{Name: x.Name, Shapes: x.withParams(x.Shapes), Alternative: x.withParams(x.Alternative),
		Schema: x.Schema, CheckRows: x.CheckRows, Samples: samples}
}

// withParams are shapes, each with the parameters x binds to its
// statement.
func (x *Exercise) withParams(shapes []store.Shape) []store.Shape {
	shapes = slices.Clone(shapes)
	for i := range shapes {
		shapes[i].Params = nil
		for _, p := range x.Params {
			if p.Statement == 0 || p.Statement == i+1 {
				shapes[i].Params = append(shapes[i].Params, p.Name)
			}
		}
	}
	return shapes
}

// Scenario is the lesson that grades x.
func (x *Exercise) Scenario() *lesson.Scenario {
	sc, err := Lookup(x.Lesson)
	if err != nil {
		panic("scenarios: exercise " + x.Name + ": " + err.Error()) // caught by every exercise test
	}
	return sc
}

// Explored says whether the interleaving explorer runs the exercise's
// statements (its alphabet's actions execute them: the explorer's
// Statements), so that a file is also graded over every ordering. Its
// statement set may hold more (the relay's renewal), which no action runs.
func (x *Exercise) Explored() bool {
	for _, k := range x.Key {
		if !slices.ContainsFunc(explorer.Lesson.Statements, func(s store.Stmt) bool { return s.Name == k.Name }) {
			return false
		}
	}
	_, err := store.Swap(explorer.LessonDesign, x.answers()...)
	return err == nil
}

// answers are the key statements as a file holding them would be swapped
// in: each replaces itself.
func (x *Exercise) answers() []store.Stmt {
	out := make([]store.Stmt, len(x.Key))
	for i, k := range x.Key {
		out[i] = store.Stmt{Name: k.Name, SQL: k.SQL, Replaces: &x.Key[i]}
	}
	return out
}

// Mistake is a wrong answer to an exercise the lab holds: one mistake
// variant's statements for the slot, in file order.
type Mistake struct {
	Variant  string       // the lesson's variant (or the explorer's) that runs it
	Scenario string       // where that variant is
	Stmts    []store.Stmt // one per Key: the mistake, or the key where the variant keeps it
	Breaks   []string     // the checks the variant names
	Engine   store.Engine // "" for both
}

// Mistakes are the wrong answers the lab holds for x: every variant, of
// the lesson or of the explorer, whose mistakes all replace statements of
// x's slot, as a file would hold them. A variant that also changes
// something no file can (a transaction boundary, [store.Stmt.Separate],
// or a statement left out) is left out.
func (x *Exercise) Mistakes() []Mistake {
	var out []Mistake
	for _, sc := range []*lesson.Scenario{x.Scenario(), &explorer.Lesson} {
		if sc == &explorer.Lesson && !x.Explored() {
			continue
		}
		for _, v := range sc.Variants {
			if m, ok := x.mistakeOf(v); ok {
				m.Scenario = sc.Name
				out = append(out, m)
			}
		}
	}
	return out
}

func (x *Exercise) mistakeOf(v lesson.Variant) (Mistake, bool) {
	if len(v.Swaps) == 0 {
		return Mistake{}, false
	}
	stmts := slices.Clone(x.Key)
	for _, s := range v.Swaps {
		i := slices.IndexFunc(x.Key, func(k store.Stmt) bool { return s.Replaces != nil && s.Replaces.Name == k.Name })
		if i < 0 || s.Separate || s.Omitted() {
			return Mistake{}, false
		}
		stmts[i] = s
	}
	return Mistake{Variant: v.Name, Stmts: stmts, Breaks: v.Breaks, Engine: v.Engine}, true
}

// GradedBy are the checks that grade x: [Exercise.Distinctive] first,
// then the lesson's others.
func (x *Exercise) GradedBy() []string {
	out := x.Distinctive()
	for _, c := range x.Scenario().Checks {
		if !slices.Contains(out, c.Name) {
			out = append(out, c.Name)
		}
	}
	return out
}

// Distinctive are the checks x's known wrong answers break: the lesson's,
// then the explorer's ("explore: " and its name).
func (x *Exercise) Distinctive() []string {
	var first, explored []string
	for _, m := range x.Mistakes() {
		for _, b := range m.Breaks {
			switch {
			case b == "rows_passed":
				// session 19's summary of its rows, broken with any of them
			case m.Scenario == explorer.Lesson.Name && !slices.Contains(explored, "explore: "+b):
				explored = append(explored, "explore: "+b)
			case m.Scenario != explorer.Lesson.Name && !slices.Contains(first, b):
				first = append(first, b)
			}
		}
	}
	return append(first, explored...)
}

// AcceptsClaimSQL says sc can run an engineer's own claim statements (run
// --claim-sql FILE) in place of the lesson's: it is the claim exercise's
// lesson.
func AcceptsClaimSQL(sc *lesson.Scenario) bool {
	x, err := LookupExercise("claim")
	return err == nil && x.Lesson == sc.Name
}

// Exercises lists every exercise, in the course's order.
func Exercises() []*Exercise {
	out := make([]*Exercise, len(exercises))
	for i := range exercises {
		out[i] = &exercises[i]
	}
	return out
}

// LookupExercise finds an exercise by name; the error names the closest
// ones.
func LookupExercise(name string) (*Exercise, error) {
	for _, x := range Exercises() {
		if x.Name == name {
			return x, nil
		}
	}
	names := make([]string, 0, len(exercises))
	for _, x := range exercises {
		names = append(names, x.Name)
	}
	return nil, &UnknownExerciseError{Name: name, Known: names}
}

// UnknownExerciseError is a name that is no exercise.
type UnknownExerciseError struct {
	Name  string
	Known []string
}

func (e *UnknownExerciseError) Error() string {
	msg := fmt.Sprintf("unknown exercise %q", e.Name)
	if c := closest(e.Name, e.Known); len(c) > 0 {
		msg += "; did you mean " + strings.Join(c, " or ") + "?"
	}
	return msg + " (exercises: " + strings.Join(e.Known, ", ") + "; `outboxlab exercise list` describes them)"
}

// Submit is a student's file for x, from source (the file's name), as
// the sandbox checked it: what a run of x's lesson (or the explorer's)
// takes as its [lesson.Options.Submission].
func (x *Exercise) Submit(source string, file store.SlotFile) *lesson.Submission {
	sub := &lesson.Submission{Exercise: x.Name, Lesson: x.Lesson, Key: x.Key, GradedBy: []string{x.Lesson}, Source: source, File: file}
	for _, s := range x.Shapes {
		sub.Kinds = append(sub.Kinds, s.Kind)
	}
	if x.Explored() {
		sub.GradedBy = append(sub.GradedBy, explorer.Lesson.Name)
	}
	return sub
}
