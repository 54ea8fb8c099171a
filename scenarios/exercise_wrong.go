package scenarios

import (
	"strings"

	"github.com/outboxlab/outboxlab/store"
)

// WrongAnswer is a classic wrong answer to an exercise that no variant
// runs as it stands (a variant's mistake is a whole design, or changes
// more than the slot): its statements, what it gets wrong and the
// lesson's checks it fails. The instructor's pack files each beside the
// variants' wrong answers, and TestExerciseWrongAnswers grades each.
type WrongAnswer struct {
	Tag   string       // its file's tag: NAME.wrong-TAG.sql
	What  string       // what it gets wrong, in one phrase
	Stmts []store.Stmt // its statements, in file order, with their PostgreSQL text where it differs
	Fails []string     // the checks of the exercise's lesson it fails
}

// Texts are w's statements as a file for SQLite holds them.
func (w WrongAnswer) Texts() []string {
	out := make([]string, len(w.Stmts))
	for i, s := range w.Stmts {
		out[i] = s.SQL
	}
	return out
}

// WrongAnswers are x's classic wrong answers the catalogue holds as text
// ([WrongAnswer]); [Exercise.Mistakes] are the variants'.
func (x *Exercise) WrongAnswers() []WrongAnswer { return wrongAnswers[x.Name] }

// wrong is a wrong answer's statement: text, the same on both engines.
func wrong(text string) store.Stmt { return store.Stmt{Name: "a wrong answer", SQL: text} }

// dropped is s without guard, on both engines.
func dropped(s store.Stmt, guard string) store.Stmt {
	out := wrong(strings.Replace(s.SQL, guard, "", 1))
	if s.Postgres != "" {
		out.Postgres = strings.Replace(s.Postgres, guard, "", 1)
	}
	return out
}

// wrongAnswers are the catalogue's wrong answers, by exercise.
var wrongAnswers = map[string][]WrongAnswer{
	"inbox-insert": {{Tag: "keyed-per-delivery", What: "keys the inbox row by the delivery (event id and time), not by the event, so a redelivery looks new",
		Stmts: []store.Stmt{wrong(`INSERT INTO consumed_events (consumer, event_id, consumed_at)
VALUES (:consumer, :event_id || '@' || :now, :now)
ON CONFLICT (consumer, event_id) DO NOTHING`)}, Fails: []string{"row_4_lost_consumer_ack_no_second_effect", "rows_passed"}}},
	"finalize": {
		{Tag: "status-only", What: "drops the owner guard AND LockedBy = :worker: any worker completes a message still Processing",
			Stmts: []store.Stmt{dropped(store.FinalizeOwned, "\n  AND LockedBy = :worker")},
			Fails: []string{"ownership_violations", "owner_result_kept", "rejected_while_owner_holds"}},
		{Tag: "owner-only", What: "drops AND Status = 'Processing': a retried finalize changes a row already Processed",
			Stmts: []store.Stmt{dropped(store.FinalizeOwned, "\n  AND Status = 'Processing'")},
			Fails: []string{"retried_finalize_rows"}},
	},
	"ack": {{Tag: "no-delivered-guard", What: "drops AND delivered = 0: a retried ack changes a row already delivered",
		Stmts: []store.Stmt{dropped(store.CompleteWithToken, "\n  AND delivered = 0")}, Fails: []string{"retried_ack_rows"}}},
	"scale-finalize": {
		{Tag: "by-id-alone", What: "finalizes by Id alone, with no owner, token or status guard",
			Stmts: []store.Stmt{wrong(store.ScaleFinalizeByID.SQL)},
			Fails: []string{"duplicates", "stale_finalizes_refused", "retake_stale_refused", "retake_retried_finalize_rows"}},
		{Tag: "no-status-guard", What: "drops AND Status = 'Processing': a retried finalize changes a row already Processed",
			Stmts: []store.Stmt{dropped(store.ScaleFinalize, "\n  AND Status = 'Processing'")},
			Fails: []string{"retake_retried_finalize_rows"}},
	},
	"batch-complete": {{Tag: "no-status-guard", What: "drops AND OutboxMessages.Status = 'Processing': a retried flush changes rows already Processed",
		Stmts: []store.Stmt{dropped(store.FetchAheadComplete, "\n  AND OutboxMessages.Status = 'Processing'")},
		Fails: []string{"retried_flush_rows"}}},
	"projection": {{Tag: "last-write-wins", What: "upserts without comparing versions: an older event moves the projection backward",
		Stmts: []store.Stmt{wrong(store.ProjectLastWriteWins.SQL)}, Fails: []string{"row_6_projection_never_moves_backward", "rows_passed"}}},
}
