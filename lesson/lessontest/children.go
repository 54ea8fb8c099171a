package lessontest

import (
	"slices"
	"strings"
	"testing"

	"github.com/outboxlab/outboxlab/instance"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/store"
)

// Children reads r's processes table, checking each row against the
// operating system's word and the timeline: a killed child was killed by
// SIGKILL and a CRASH row names it, a finished one exited 0, and a stalled
// one was frozen and continued, as timeline rows say.
func Children(t testing.TB, r *lab.Result) []lesson.Child {
	t.Helper()
	var got []lesson.Child
	for _, row := range ProcessesTable(t, r).Rows {
		c := lesson.Child{Phase: row[1], Role: row[2], Stalled: row[7] != "-"}
		pid := row[3]
		switch {
		case row[4] == "(not killed: it finished its work)":
			if row[5] != "-" || row[6] != "exit status 0" {
				t.Errorf("process row %v: want exit status 0", row)
			}
		case row[5] == "killed" && row[6] == "signal: killed":
			c.Point = row[4]
			if !TimelineSays(r, "CRASH", "process "+pid+",") {
				t.Errorf("no CRASH row of the timeline names process %s", pid)
			}
		default:
			t.Errorf("process row %v: want killed by SIGKILL or finished with exit status 0", row)
		}
		if c.Stalled && (!strings.Contains(row[7], "SIGSTOP") || !strings.Contains(row[7], "SIGCONT") ||
			!TimelineSays(r, "", "process "+pid+" frozen") || !TimelineSays(r, "wakes", "process "+pid+" continued by SIGCONT")) {
			t.Errorf("process %s: stalls %q; want SIGSTOP and SIGCONT, and timeline rows that say so", pid, row[7])
		}
		got = append(got, c)
	}
	return got
}

// SortedChildren is cs in a stable order: concurrent instances start in
// either order.
func SortedChildren(cs []lesson.Child) []lesson.Child {
	return slices.SortedFunc(slices.Values(cs), func(a, b lesson.Child) int {
		return strings.Compare(a.Phase+"\x00"+a.Role, b.Phase+"\x00"+b.Role)
	})
}

// ProcessesTable is r's processes table; the test fails without one.
func ProcessesTable(t testing.TB, r *lab.Result) lab.Table {
	t.Helper()
	return Table(t, r, instance.ProcessesTitle)
}

// WithoutGuard is stmt with the line "AND <guard>" removed from its SQL
// (and its PostgreSQL text), so the guardless statement cannot drift from
// the lesson's. A guard the statement does not hold is a test failure.
func WithoutGuard(t testing.TB, stmt store.Stmt, guard string) store.Stmt {
	t.Helper()
	remove := func(sql string) string {
		if sql == "" {
			return ""
		}
		line := "\n  AND " + guard
		if strings.Count(sql, line) != 1 {
			t.Fatalf("%q: no single line %q in\n%s", stmt.Name, line, sql)
		}
		return strings.Replace(sql, line, "", 1)
	}
	return store.Stmt{Name: "test: " + stmt.Name + ", without AND " + guard, SQL: remove(stmt.SQL), Postgres: remove(stmt.Postgres),
		Replaces: &stmt}
}
