package lesson

import (
	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/store"
)

// This file holds what every lesson may use to run its statement set (a
// variant's mistakes, a student's file and a test's swap in place) and to
// turn its measured figures into checks and sentences. A lesson imports no
// other lesson: what two lessons share lives here or in package cast.

// ExpectDocumented adds one metric check per documented check, in the
// documented order, so the report and `describe` always agree. Each
// check's text is its template, which [Execute] fills from the run once it
// ended (see [lab.Result.Fill]): the lesson casts its roles
// ([lab.Result.SetCast]) by then. A check
// documented for one engine only (CheckDoc.Engine) is made when want holds
// it: the lesson adds it on that engine.
func ExpectDocumented(r *lab.Result, docs []CheckDoc, want map[string]float64) {
	for _, c := range docs {
		w, ok := want[c.Name]
		if !ok && c.Engine != "" {
			continue // a check of another engine's
		}
		if !ok {
			panic("lesson: no expected value for documented check " + c.Name) // caught by every test
		}
		r.ExpectMetric(c.Name, w, c.About)
		r.Checks[len(r.Checks)-1].Measure = c.Measure
	}
}

// MetricsOf returns a formatter for measured metrics, for verdict sentences.
func MetricsOf(r *lab.Result) func(key string) string {
	return func(key string) string {
		v, ok := r.Metric(key)
		if !ok {
			return "?"
		}
		return lab.FormatNumber(v)
	}
}

// RowsOf is MetricsOf for a count of rows, with its noun: "1 row", "0
// rows", or "? rows" when the run did not measure it.
func RowsOf(r *lab.Result) func(key string) string {
	return func(key string) string {
		v, ok := r.Metric(key)
		if !ok {
			return "? rows"
		}
		return lab.Rows(int64(v))
	}
}

// CountOf is a measured count with its noun, for verdict sentences: "1
// send", "2 sends", or "? sends" when the run did not measure key.
func CountOf(r *lab.Result, key, one, many string) string {
	v, ok := r.Metric(key)
	if !ok {
		return lab.Unknown + " " + many
	}
	return lab.Count(int64(v), one, many)
}

// StatementSet is the statement set a lesson runs: the lesson's set with
// the variant's mistakes swapped in (see [VariantSet]) or a student's file
// (see [submitted]), then a test's swap (see [Swapped]).
func StatementSet[T any](env *Env, set T) T {
	return Swapped(env, submitted(env, VariantSet(env, set)))
}

// VariantSet is set with the variant's mistakes swapped in
// ([Variant.Swaps]), for a lesson whose run is made of more than its
// statements (a test swaps the whole). A variant whose mistake the set
// does not hold is a programming error, which every variant's test run
// finds.
func VariantSet[T any](env *Env, set T) T {
	if v, ok := env.variant(); ok && len(v.Swaps) > 0 {
		var err error
		if set, err = store.Swap(set, v.Swaps...); err != nil {
			panic("lesson: variant " + v.Name + ": " + err.Error())
		}
	}
	return set
}

// ConsumerDesign is the consumer design a lesson runs where it teaches
// lesson: the variant's design that replaces it ([Variant.Designs]), or
// lesson itself with a student's file swapped in (see [submitted]).
func ConsumerDesign(env *Env, lesson cast.ConsumerDesign) cast.ConsumerDesign {
	if v, ok := env.variant(); ok {
		for _, d := range v.Designs {
			if d.Replaces == lesson.Name {
				return d
			}
		}
	}
	lesson.SQL = submitted(env, lesson.SQL)
	return lesson
}

// Swapped is the statement set a lesson runs: set, unless a test swapped
// one of its statements through Options.Swap. Every lesson passes its
// statement set through it, so any check can be shown to fail by a test
// that replaces one statement.
func Swapped[T any](env *Env, set T) T {
	if env.Options.Swap == nil {
		return set
	}
	return env.Options.Swap(set).(T)
}

// BoundCheck compares a measured figure with its bound: op is ">=" or "<";
// its text is doc's template, which [Execute] fills.
func BoundCheck(doc CheckDoc, got float64, op string, bound float64) lab.Check {
	ok := got >= bound
	if op == "<" {
		ok = got < bound
	}
	return lab.Check{Name: doc.Name, About: doc.About, Expected: op + " " + lab.FormatNumber(bound),
		Observed: lab.FormatNumber(got), Passed: ok, Measure: doc.Measure}
}
