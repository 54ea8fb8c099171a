package explorer

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/outboxlab/outboxlab/instance"
	"github.com/outboxlab/outboxlab/internal/pgtest"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/lesson/lessontest"
	"github.com/outboxlab/outboxlab/proc/proctest"
)

// TestMain is also the lab's child process in these tests: a run with
// Options.Processes starts this test binary as `<binary> worker --role
// ROLE`, and it serves the role as the program's hidden worker
// subcommand does.
func TestMain(m *testing.M) { proctest.Main(m, instance.Serve) }

func TestProcessesExplore(t *testing.T) { testProcessesExplore(t, "") }

func TestProcessesExploreOnPostgres(t *testing.T) { testProcessesExplore(t, pgtest.URL(t)) }

// testProcessesExplore runs the explorer and its variants, at a small
// bound, with Options.Processes on db: every relay of every ordering is a
// child process, those the crash action killed died by SIGKILL between
// their steps, the replayed ordering's timeline names its children, and
// the checks observe what the in-process exploration's do.
func testProcessesExplore(t *testing.T, db string) {
	t.Parallel()
	// The lesson, and on SQLite one mistake whose counterexample the
	// explorer finds: each exploration starts dozens of processes.
	variants := []string{""}
	if db == "" {
		variants = append(variants, xCompleteBeforeSend)
	}
	for _, variant := range variants {
		t.Run(strings.TrimSpace("explore "+variant), func(t *testing.T) {
			t.Parallel()
			run := func(processes bool) *lab.Result {
				return lessontest.Run(t, &Lesson, lessontest.Key{Variant: variant, Database: db, Bound: 3, Processes: processes})
			}
			r, inProcess := run(true), run(false)
			if !slices.Equal(r.Checks, inProcess.Checks) {
				t.Errorf("checks with processes:\n%v\nwithout:\n%v", r.Checks, inProcess.Checks)
			}
			procs := lessontest.ProcessesTable(t, r)
			killed, finished := 0, 0
			for _, row := range procs.Rows {
				if row[1] != "pipeline-relay" {
					t.Errorf("process row %v: want role %s", row, "pipeline-relay")
				}
				n, err := strconv.Atoi(row[2])
				if err != nil {
					t.Fatalf("process row %v: children %q", row, row[2])
				}
				switch {
				case row[4] == "between its steps (the explorer's crash action)" && row[5] == "killed" && row[6] == "signal: killed":
					killed += n
				case row[4] == "(not killed: it finished its work)" && row[6] == "exit status 0":
					finished += n
				default:
					t.Errorf("process row %v: want killed by SIGKILL between its steps, or exit status 0", row)
				}
			}
			if killed == 0 || finished == 0 {
				t.Errorf("%d relays killed by the crash action and %d finished; want some of each", killed, finished)
			}
			if !lessontest.TimelineSays(r, "start", "child process ") {
				t.Errorf("the replayed ordering's timeline names no child process")
			}
		})
	}
}
