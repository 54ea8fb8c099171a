package scenarios

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/outboxlab/outboxlab/internal/pgtest"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/proc"
	"github.com/outboxlab/outboxlab/store"
)

// TestMain is also the lab's child process in these tests: a run with
// Options.Processes starts this test binary as `<binary> worker --role
// ROLE` (the standard helper-process pattern), and it serves the role as
// the program's hidden worker subcommand does.
func TestMain(m *testing.M) {
	if len(os.Args) == 4 && os.Args[1] == proc.Command && os.Args[2] == "--role" {
		if err := ServeWorker(context.Background(), os.Args[3], os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// executeProcesses runs sc's variant with Options.Processes on db ("" for
// SQLite).
func executeProcesses(t *testing.T, db string, sc *Scenario, variant string) *lab.Result {
	t.Helper()
	opts := DefaultOptions()
	opts.TempRoot = t.TempDir()
	opts.Database = db
	opts.Processes = true
	r, err := Execute(context.Background(), sc, variant, opts, false)
	if err != nil {
		t.Fatalf("%s %s with processes: %v", sc.Name, variant, err)
	}
	return r
}

// killedProcess is one row of a run's processes table, as a test wants it.
type killedProcess struct{ phase, role, point string }

func TestProcesses(t *testing.T) { testProcesses(t, "") }

func TestProcessesOnPostgres(t *testing.T) { testProcesses(t, pgtest.URL(t)) }

// testProcesses runs the lessons whose crashing instance is a child
// process with Options.Processes on db: each passes (or, as a variant,
// fails the checks it names), every crash is a child killed by SIGKILL at
// its point, and each crash row of the timeline names the killed process.
func testProcesses(t *testing.T, db string) {
	t.Parallel()
	checkout := []killedProcess{{"before", checkoutRole, "between-outbox-writes"}, {"after", checkoutRole, "between-outbox-writes"}}
	workerA := []killedProcess{{"recovery", claimWorkerRole, "after-claim"}}
	// Session 19's crash rows: Relay-A after its send (row 1), Consumer-1
	// after its effect (row 4), Relay-A after its claim (row 6).
	failureCrashes := []killedProcess{{"row 1", failureRelayRole, "after-send-before-complete"},
		{"row 4", failureConsumerRole, "after-effect-before-ack"}, {"row 6", failureRelayRole, "after-claim"}}
	type processesCase struct {
		sc      *Scenario
		variant string
		killed  []killedProcess
		// same names a table whose rows must equal those of the run
		// without Processes: the figures do not depend on where the
		// instances ran.
		same string
	}
	cases := []processesCase{
		{&transactionalOutbox, "", checkout, ""},
		{&transactionalOutbox, variantTwoTransactions, checkout, ""},
		{&outboxLeasing, "", workerA, ""},
		{&outboxLeasing, variantPermanentLock, workerA, ""},
		{&failureClasses, "", failureCrashes, "Failure classes"},
	}
	for _, v := range failureClasses.Variants {
		cases = append(cases, processesCase{&failureClasses, v.Name, failureCrashes, "Failure classes"})
	}
	// Session 21's crash rows: Worker-A, holding the oldest message, before
	// each of the four drains (each claim design on each backlog).
	scaleCrashes := func(variant string) []killedProcess {
		indexed := store.IndexedScale.Name
		if variant == variantPendingOnly {
			indexed = store.PendingOnlyScale.Name
		}
		var killed []killedProcess
		for _, claim := range []string{store.LessonScale.Name, indexed} {
			for _, size := range []string{"small", "large"} {
				killed = append(killed, killedProcess{fmt.Sprintf("%s claim, %s backlog", claim, size), s21ClaimRole, "after-claim"})
			}
		}
		return killed
	}
	cases = append(cases, processesCase{&claimsAtScale, "", scaleCrashes(""), ""})
	for _, v := range claimsAtScale.Variants {
		cases = append(cases, processesCase{&claimsAtScale, v.Name, scaleCrashes(v.Name), ""})
	}
	for _, tt := range cases {
		// Session 21's runs go one at a time: each is four drains of up to
		// 500 messages, and its costs on PostgreSQL are buffer pages that
		// move with the machine's load (autovacuum, concurrent claims
		// skipping each other's rows), in-process as much as with
		// processes. There a run must fail the checks it names and may fail
		// a cost check besides (TestClaimsAtScaleOnPostgres holds the costs
		// to their bounds), never an invariant.
		serial := tt.sc == &claimsAtScale
		pageCosts := serial && db != ""
		t.Run(strings.TrimSpace(tt.sc.Name+" "+tt.variant), func(t *testing.T) {
			if !serial {
				t.Parallel()
			}
			r := executeProcesses(t, db, tt.sc, tt.variant)
			var want []string // the lesson passes; a variant fails the checks it breaks
			if v, ok := tt.sc.Variant(tt.variant); ok {
				want = slices.Sorted(slices.Values(v.Breaks))
			}
			failed := slices.Sorted(slices.Values(r.FailedChecks()))
			if pageCosts {
				for _, name := range want {
					if !slices.Contains(failed, name) {
						t.Errorf("check %s did not fail (failed: %v)", name, failed)
					}
				}
				for _, name := range failed {
					if !slices.Contains(want, name) && !strings.HasSuffix(name, "_cost_growth") {
						t.Errorf("check %s failed (failed: %v, want %v and perhaps a cost check)", name, failed, want)
					}
				}
			} else if !slices.Equal(failed, want) {
				t.Errorf("failed checks %v, want %v", failed, want)
			}
			procs := processesTableOf(t, r)
			var got []killedProcess
			for _, row := range procs.Rows {
				got = append(got, killedProcess{row[1], row[2], row[4]})
				if row[5] != "killed" || row[6] != "signal: killed" {
					t.Errorf("process row %v: want killed by SIGKILL", row)
				}
				if !crashNames(r, row[3]) {
					t.Errorf("no CRASH row of the timeline names process %s", row[3])
				}
			}
			if !slices.Equal(got, tt.killed) {
				t.Errorf("killed processes %v, want %v", got, tt.killed)
			}
			if tt.same != "" {
				opts := DefaultOptions()
				opts.TempRoot = t.TempDir()
				opts.Database = db
				inProcess, err := Execute(context.Background(), tt.sc, tt.variant, opts, false)
				if err != nil {
					t.Fatal(err)
				}
				if got, want := tableOf(t, r, tt.same).Rows, tableOf(t, inProcess, tt.same).Rows; !slices.EqualFunc(got, want, slices.Equal) {
					t.Errorf("%q with processes:\n%v\nwithout:\n%v", tt.same, got, want)
				}
			}
		})
	}
}

// processesTableOf is r's processes table; the test fails without one.
func processesTableOf(t *testing.T, r *lab.Result) lab.Table {
	t.Helper()
	return tableOf(t, r, processesTitle)
}

// tableOf is r's table titled title; the test fails without one.
func tableOf(t *testing.T, r *lab.Result, title string) lab.Table {
	t.Helper()
	for _, tb := range r.Tables {
		if tb.Title == title {
			return tb
		}
	}
	t.Fatalf("%s: no %q table", r.Scenario, title)
	return lab.Table{}
}

// crashNames reports whether a CRASH row of r's timeline names process pid.
func crashNames(r *lab.Result, pid string) bool {
	for _, e := range r.Timeline {
		if e.Action == "CRASH" && strings.Contains(e.Detail, "process "+pid+",") {
			return true
		}
	}
	return false
}

// TestProcessesInProcessScenario: a scenario whose actors do not run as
// child processes still passes with Options.Processes, and its report says
// in its processes table that its actors ran in-process.
func TestProcessesInProcessScenario(t *testing.T) {
	t.Parallel()
	r := executeProcesses(t, "", &staleAckFencing, "")
	if !r.Passed() {
		t.Fatalf("%s with processes failed: %v", r.Scenario, r.FailedChecks())
	}
	procs := processesTableOf(t, r)
	if len(procs.Rows) != 0 || procs.Note != inProcessNote {
		t.Errorf("processes table %+v, want no row and the in-process note", procs)
	}
}

// TestNoProcessesNoTable: without Options.Processes a report has no
// processes table, so the lessons' reports are unchanged.
func TestNoProcessesNoTable(t *testing.T) {
	t.Parallel()
	r := mustExecute(t, &transactionalOutbox, "")
	for _, tb := range r.Tables {
		if tb.Title == processesTitle {
			t.Fatalf("a run without processes has the table %q", processesTitle)
		}
	}
}

func TestProcessesShutdown(t *testing.T) { testProcessesShutdown(t, "") }

func TestProcessesShutdownOnPostgres(t *testing.T) { testProcessesShutdown(t, pgtest.URL(t)) }

// testProcessesShutdown runs session 22 and its variants with
// Options.Processes on db: Relay-D is a child process that the lab stops
// with a real SIGTERM, which it handles and exits 0 by itself; the
// timeline's SIGTERM row names the process; every figure equals the
// in-process run's, so the lesson passes and each variant (among them
// shutdown-marks-complete) fails the checks it names.
func testProcessesShutdown(t *testing.T, db string) {
	t.Parallel()
	variants := []string{""}
	for _, v := range heartbeatAndShutdown.Variants {
		variants = append(variants, v.Name)
	}
	if !slices.Contains(variants, variantShutdownMarksComplete) {
		t.Fatalf("session 22 has no %s variant", variantShutdownMarksComplete)
	}
	for _, variant := range variants {
		t.Run(strings.TrimSpace("session 22 "+variant), func(t *testing.T) {
			t.Parallel()
			r := executeProcesses(t, db, &heartbeatAndShutdown, variant)
			var want []string
			if v, ok := heartbeatAndShutdown.Variant(variant); ok {
				want = slices.Sorted(slices.Values(v.Breaks))
			}
			if got := slices.Sorted(slices.Values(r.FailedChecks())); !slices.Equal(got, want) {
				t.Errorf("failed checks %v, want %v", got, want)
			}
			procs := processesTableOf(t, r)
			if len(procs.Rows) != 1 {
				t.Fatalf("processes table rows %v, want Relay-D's alone", procs.Rows)
			}
			row := procs.Rows[0]
			if row[2] != shutdownRelayRole || row[5] != "SIGTERM (sent by the lab)" || row[6] != "exit status 0" ||
				!strings.Contains(row[4], "after-send-before-complete") {
				t.Errorf("process row %v: want %s sent SIGTERM at after-send-before-complete, exit status 0", row, shutdownRelayRole)
			}
			if !sigtermNames(r, row[3]) {
				t.Errorf("no SIGTERM row of the timeline names a real signal to process %s", row[3])
			}
			opts := DefaultOptions()
			opts.TempRoot = t.TempDir()
			opts.Database = db
			inProcess, err := Execute(context.Background(), &heartbeatAndShutdown, variant, opts, false)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(r.Metrics, inProcess.Metrics) {
				t.Errorf("figures with processes %v, without %v", r.Metrics, inProcess.Metrics)
			}
		})
	}
}

// sigtermNames reports whether the SIGTERM row of r's timeline says it
// was a real signal to process pid.
func sigtermNames(r *lab.Result, pid string) bool {
	for _, e := range r.Timeline {
		if e.Action == "SIGTERM" && strings.Contains(e.Detail, "a real SIGTERM from the lab to process "+pid+",") {
			return true
		}
	}
	return false
}
