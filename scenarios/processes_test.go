package scenarios

import (
	"slices"
	"strings"
	"testing"

	"github.com/outboxlab/outboxlab/instance"
	"github.com/outboxlab/outboxlab/internal/pgtest"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/lesson/lessontest"
	"github.com/outboxlab/outboxlab/proc/proctest"
	"github.com/outboxlab/outboxlab/scenarios/session14outbox"
	"github.com/outboxlab/outboxlab/store"
)

// TestMain is also the lab's child process in these tests: a run with
// Options.Processes starts this test binary as `<binary> worker --role
// ROLE`, and it serves the role as the program's hidden worker
// subcommand does.
func TestMain(m *testing.M) { proctest.Main(m, instance.Serve) }

func TestProcesses(t *testing.T) { testProcesses(t, "") }

func TestProcessesOnPostgres(t *testing.T) { testProcesses(t, pgtest.URL(t)) }

// testProcesses runs every lesson with Options.Processes on db: each
// passes (or, as a variant, fails exactly the checks it names), every
// instance the lesson runs as a child process is in the processes table,
// as the lesson's [lesson.Processes] names it, every crash is a child
// killed by SIGKILL at its point and named by a CRASH row of the
// timeline, every stall a child frozen by SIGSTOP and continued by
// SIGCONT, named by the timeline; and where the lesson is deterministic
// its checks observe exactly what the in-process run's do. A lesson that
// names neither its children nor the test that runs it with processes
// fails by its name.
func testProcesses(t *testing.T, db string) {
	t.Parallel()
	type processesCase struct {
		sc      *lesson.Scenario
		variant string
	}
	var cases []processesCase
	for _, sc := range All() {
		switch {
		case sc.Processes.Elsewhere != "":
			continue
		case sc.Processes.Children == nil:
			t.Errorf("%s names no children a run with processes starts (lesson.Processes.Children), nor the test that runs it with processes (Elsewhere)", sc.Name)
			continue
		}
		// Every variant runs with processes on SQLite; on PostgreSQL the
		// lessons and the variants only PostgreSQL has (its row locks
		// between processes), so that make test stays within minutes on
		// two cores: the instances' code is the same on both engines, the
		// engine is not.
		cases = append(cases, processesCase{sc, ""})
		for _, v := range sc.Variants {
			if (db == "" && v.Engine == "") || (db != "" && v.Engine == store.Postgres) {
				cases = append(cases, processesCase{sc, v.Name})
			}
		}
	}
	for _, tt := range cases {
		p := tt.sc.Processes
		t.Run(strings.TrimSpace(tt.sc.Name+" "+tt.variant), func(t *testing.T) {
			if !p.Serial {
				t.Parallel()
			}
			r := lessontest.Run(t, tt.sc, lessontest.Key{Variant: tt.variant, Database: db, Processes: true})
			var want []string // the lesson passes; a variant fails the checks it breaks
			if v, ok := tt.sc.Variant(tt.variant); ok {
				want = slices.Sorted(slices.Values(v.Breaks))
			}
			failed := slices.Sorted(slices.Values(r.FailedChecks()))
			if !slices.Equal(failed, want) {
				t.Errorf("failed checks %v, want %v", failed, want)
			}
			children := p.Children(tt.variant)
			if got := lessontest.Children(t, r); !slices.Equal(lessontest.SortedChildren(got), lessontest.SortedChildren(children)) {
				t.Errorf("child processes\n%v\nwant\n%v", got, children)
			}
			checkEventsAgreeWithLedgers(t, r)
			checkTextsFromTheRun(t, tt.sc, r) // a text says only what this run, with its children, showed
			for _, e := range r.Timeline {    // a child's effect crosses the pipe with its service
				if (e.Kind == lab.KindEffect || e.Kind == lab.KindDedup) && e.Service == "" {
					t.Errorf("#%d %s's %s of %s names no consumer service", e.Seq, e.Actor, e.Kind, e.Subject)
				}
			}
			if !p.SameChecks && p.Same == "" {
				return
			}
			inProcess := lessontest.On(t, db, tt.sc, tt.variant, 0)
			if p.SameChecks && !slices.Equal(r.Checks, inProcess.Checks) {
				t.Errorf("checks with processes:\n%v\nwithout:\n%v", r.Checks, inProcess.Checks)
			}
			if p.Same != "" {
				if got, want := lessontest.Table(t, r, p.Same).Rows, lessontest.Table(t, inProcess, p.Same).Rows; !slices.EqualFunc(got, want, slices.Equal) {
					t.Errorf("%q with processes:\n%v\nwithout:\n%v", p.Same, got, want)
				}
			}
		})
	}
}

// TestNoProcessesNoTable: without lesson.Options.Processes a report has no
// processes table, so the lessons' reports are unchanged.
func TestNoProcessesNoTable(t *testing.T) {
	t.Parallel()
	r := lessontest.Must(t, &session14outbox.Lesson, "")
	for _, tb := range r.Tables {
		if tb.Title == instance.ProcessesTitle {
			t.Fatalf("a run without processes has the table %q", instance.ProcessesTitle)
		}
	}
}
