package scenarios

import "github.com/outboxlab/outboxlab/lab"

// This file holds what every lesson file may use to turn its measured
// figures into checks and sentences. A lesson file never uses a name that
// another lesson file declares: what two lessons share lives here or in
// package cast.

// expectDocumented adds one metric check per documented check, in the
// documented order, so the report and `describe` always agree. A check
// documented for one engine only (CheckDoc.Engine) is made when want holds
// it: the lesson adds it on that engine.
func expectDocumented(r *lab.Result, docs []CheckDoc, want map[string]float64) {
	for _, c := range docs {
		w, ok := want[c.Name]
		if !ok && c.Engine != "" {
			continue // a check of another engine's
		}
		if !ok {
			panic("scenarios: no expected value for documented check " + c.Name) // caught by every test
		}
		r.ExpectMetric(c.Name, w, c.About)
	}
}

// metricsOf returns a formatter for measured metrics, for verdict sentences.
func metricsOf(r *lab.Result) func(key string) string {
	return func(key string) string {
		v, ok := r.Metric(key)
		if !ok {
			return "?"
		}
		return lab.FormatNumber(v)
	}
}

// swapped is the statement set a lesson runs: set, unless a test swapped
// one of its statements through Options.swap. Every lesson passes its
// statement set through it, so any check can be shown to fail by a test
// that replaces one statement.
func swapped[T any](env *Env, set T) T {
	if env.Options.swap == nil {
		return set
	}
	return env.Options.swap(set).(T)
}
