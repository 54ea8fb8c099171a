package session21scale

import (
	"fmt"
	"slices"

	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/store"
)

// guards are every guard of the statements the lesson runs that update
// a row ([lesson.Guard]): those its own run decides, its known gaps, and
// those it reuses from the lessons that teach them.
func guards() []lesson.Guard {
	scale := func(g store.Stmt) func(any) any {
		return lesson.SwapOf(func(designs []store.ScaleSQL) []store.ScaleSQL {
			designs = slices.Clone(designs)
			for i := range designs {
				designs[i].Finalize = g
			}
			return designs
		})
	}
	return []lesson.Guard{
		{Stmt: store.ScaleFinalize, Guard: "LockedBy = :worker", Swap: scale, Gap: lesson.TokenImpliesOwner},
		{Stmt: store.ScaleFinalize, Guard: "ClaimToken = :token", Swap: scale, Breaks: []string{"retake_stale_refused", "retake_retried_finalize_rows"}}, // the re-take is never retried: not measured
		{Stmt: store.IndexedClaimOne, Guard: "ProcessedAtUtc IS NULL", Gap: takeAfterSelect},
		{Stmt: store.IndexedClaimOne, Guard: lesson.ClaimableOutbox, Gap: takeAfterSelect},
		{Stmt: store.ScaleFinalize, Guard: "Status = 'Processing'", Breaks: []string{"retake_retried_finalize_rows"}},
	}
}

// takeAfterSelect is why the indexed claim's repeated predicate never
// decides alone.
const takeAfterSelect = "the claimer selects the message with the same predicate in the same transaction, holding the " +
	"write lock (BEGIN IMMEDIATE; FOR UPDATE on PostgreSQL), so the take never meets a row its select did not vouch " +
	"for, and the claimer stops the run if the take ever changes other than one row"

// processes is what a run of the lesson with Options.Processes starts
// ([lesson.Processes]).
var processes = lesson.Processes{Serial: true, Children: drainChildren} // its costs move a little from run to run, in-process too

// drainChildren are the instances of the lesson's drains, each with its
// own: Worker-A crashes holding the oldest message, Worker-B stalls
// holding the next until after the drain, Worker-C and Worker-D drain;
// then Worker-B stalls again and a second Worker-B re-takes its message.
func drainChildren(variant string) []lesson.Child {
	var drains []lesson.Child
	for _, claim := range []string{store.LessonScale.Name, store.IndexedScale.Name} {
		for _, size := range []string{"small", "large"} {
			label := fmt.Sprintf("%s claim, %s backlog", claim, size)
			drains = append(drains, lesson.Child{Phase: label + ": " + s21Crashed, Role: "scale-worker", Point: "after-claim"},
				lesson.Child{Phase: label + ": " + s21Stalled, Role: "scale-worker", Stalled: true},
				lesson.Child{Phase: label + ": " + s21Stalled, Role: "scale-worker"}, // its second claimer, for the re-take
				lesson.Child{Phase: label + ": " + s21Drainers[0], Role: "scale-worker"},
				lesson.Child{Phase: label + ": " + s21Drainers[1], Role: "scale-worker"})
		}
	}
	return drains
}
