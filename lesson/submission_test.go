package lesson

import (
	"strings"
	"testing"

	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/store"
)

// TestJudgeSubmissionNamesStudent: the verdict, the report's "Your SQL"
// and the file's statement names say whose file it is when a grade names
// a student, and read as before when it does not (run --claim-sql).
func TestJudgeSubmissionNamesStudent(t *testing.T) {
	key := store.Stmt{Name: "relay: complete under the current token", SQL: "UPDATE outbox_events SET delivered = 1"}
	for _, tt := range []struct {
		name, student string
		passed        bool
		verdict       string // the verdict's opening
		customSQL     string
		stmt          string
	}{
		{"FailedByStudent", "alice", false, "YOUR ACK FAILED (alice, from ack.sql): failed checks stale_ack_rows", "ack by alice, from ack.sql", "your ack (alice, from ack.sql)"},
		{"HeldByStudent", "bob", true, "YOUR ACK HELD (bob, from ack.sql): every check passed", "ack by bob, from ack.sql", "your ack (bob, from ack.sql)"},
		{"FailedNoStudent", "", false, "YOUR ACK FAILED (from ack.sql): failed checks stale_ack_rows", "ack from ack.sql", "your ack (from ack.sql)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sub := &Submission{Exercise: "ack", Key: []store.Stmt{key}, Kinds: []string{"UPDATE"}, Source: "ack.sql", Student: tt.student,
				File: store.SlotFile{Texts: []string{"UPDATE outbox_events SET delivered = 1 WHERE event_id = :id"}}}
			res := &lab.Result{Checks: []lab.Check{{Name: "stale_ack_rows", Expected: "0", Observed: "1", Passed: tt.passed}}}
			judgeSubmission(res, sub)
			if !strings.HasPrefix(res.Verdict, tt.verdict) {
				t.Errorf("verdict %q, want it to open with %q", res.Verdict, tt.verdict)
			}
			if res.CustomSQL != tt.customSQL {
				t.Errorf("CustomSQL %q, want %q", res.CustomSQL, tt.customSQL)
			}
			if got := sub.Stmts()[0].Name; got != tt.stmt {
				t.Errorf("statement name %q, want %q", got, tt.stmt)
			}
		})
	}
}
