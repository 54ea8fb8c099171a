package scenarios

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/instance"
	"github.com/outboxlab/outboxlab/internal/pgtest"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/proc/proctest"
	"github.com/outboxlab/outboxlab/store"
)

// TestMain is also the lab's child process in these tests: a run with
// Options.Processes starts this test binary as `<binary> worker --role
// ROLE`, and it serves the role as the program's hidden worker
// subcommand does.
func TestMain(m *testing.M) { proctest.Main(m, instance.Serve) }

// testChildTimeout bounds each wait on a child in these tests: a child
// that never answers fails its test in seconds, not after
// [proc.DefaultTimeout]; no call of a lesson's child takes near that long,
// even from the race-built binary on a loaded machine.
const testChildTimeout = 5 * time.Second

// executeProcesses runs sc's variant with Options.Processes on db ("" for
// SQLite).
func executeProcesses(t *testing.T, db string, sc *Scenario, variant string) *lab.Result {
	t.Helper()
	return executeRun(t, sc, runKey{variant: variant, database: db, processes: true})
}

// processesElsewhere names the lessons testProcesses does not run, each
// with the test that runs it with processes instead.
var processesElsewhere = map[string]string{
	interleavingExplorer.Name: "TestProcessesExplore",
	heartbeatAndShutdown.Name: "TestProcessesShutdown",
}

// checkEveryLessonRunsInProcesses fails, by the lesson's name, for every
// registered lesson that testProcesses's cases leave out and no other test
// covers: a new lesson cannot skip its run with processes unnoticed.
func checkEveryLessonRunsInProcesses(t *testing.T, lessons []*Scenario) {
	t.Helper()
	for _, sc := range All() {
		if processesElsewhere[sc.Name] != "" {
			continue
		}
		if !slices.Contains(lessons, sc) {
			t.Errorf("%s is not among testProcesses's cases: add its children there (or name the test that runs it in processesElsewhere)", sc.Name)
		}
	}
}

// child is one row of a run's processes table, as a test wants it: its
// phase and role, the failpoint where the lab killed it by SIGKILL ("": it
// finished its work and exited 0), and whether the lab stalled it with
// SIGSTOP and SIGCONT.
type child struct {
	phase, role, point string
	stalled            bool
}

func TestProcesses(t *testing.T) { testProcesses(t, "") }

func TestProcessesOnPostgres(t *testing.T) { testProcesses(t, pgtest.URL(t)) }

// testProcesses runs every lesson with Options.Processes on db: each
// passes (or, as a variant, fails exactly the checks it names), every
// instance the lesson runs as a child process is in the processes table,
// every crash is a child killed by SIGKILL at its point and named by a
// CRASH row of the timeline, every stall a child frozen by SIGSTOP and
// continued by SIGCONT, named by the timeline; and where the lesson is
// deterministic its checks observe exactly what the in-process run's do.
func testProcesses(t *testing.T, db string) {
	t.Parallel()
	checkout := []child{{"before: checkout", "checkout", "between-outbox-writes", false}, {"after: checkout", "checkout", "between-outbox-writes", false},
		{"crash-free run: checkout", "checkout", "", false}}
	leasing := []child{{"recovery: Worker-A", "outbox-instance", "after-claim", false}, {"recovery: Worker-B", "outbox-instance", "", false},
		{"concurrent: Worker-A", "outbox-instance", "", false}, {"concurrent: Worker-B", "outbox-instance", "", false}}
	racing := []child{{cast.WorkerA, "outbox-instance", "", false}, {cast.WorkerB, "outbox-instance", "", false}}
	late := []child{{cast.WorkerA, "outbox-instance", "", true}, {cast.WorkerB, "outbox-instance", "", false}}
	fencing := []child{{s16WorkerA, "relay-instance", "", true}, {s16WorkerB, "relay-instance", "", false}}
	renewal := []child{{s17WorkerA, "relay-instance", "", false}, {s17WorkerB, "relay-instance", "", false}}
	// Session 23's three relays, Worker-N stalled by SIGSTOP after its
	// send of e3; Worker-S and Worker-F race 200 times as processes.
	clocks := []child{{s23WorkerS, "clock-relay", "", false}, {s23WorkerF, "clock-relay", "", false}, {s23WorkerN, "clock-relay", "", true}}
	pastTheLease := []child{{cast.RelayA, "pipeline-relay", "", true}, {cast.RelayB, "pipeline-relay", "", false},
		{s18InboxFirst, "pipeline-consumer", "", false}, {s18InboxSecond, "pipeline-consumer", "", false},
		{"Naive-Consumer", "pipeline-consumer", "", false}}
	var retention []child
	for _, part := range []string{"part 1 short", "part 1 long", "part 2"} {
		retention = append(retention, child{part + ": " + cast.RelayA, "pipeline-relay", "", part == "part 2"})
		if part == "part 2" {
			retention = append(retention, child{part + ": " + cast.RelayB, "pipeline-relay", "", false})
		}
		retention = append(retention, child{part + ": Consumer-1", "pipeline-consumer", "", false},
			child{part + ": Consumer-2", "pipeline-consumer", "", false})
	}
	// Session 19's rows, each with its own instances: Relay-A crashes after
	// its send (row 1) and after its claim (row 6), stalls past its lease
	// after its claim (row 2); Consumer-1 crashes after its effect (row 4).
	relay, consumer := "pipeline-relay", "pipeline-consumer"
	failureRows := []child{
		{"row 1: Relay-A", relay, "after-send-before-complete", false}, {"row 1: Relay-B", relay, "", false}, {"row 1: Consumer-1", consumer, "", false},
		{"row 2: Relay-A", relay, "", true}, {"row 2: Relay-B", relay, "", false}, {"row 2: Consumer-1", consumer, "", false},
		{"row 3: Relay-A", relay, "", false}, {"row 3: Consumer-1", consumer, "", false},
		{"row 4: Relay-A", relay, "", false}, {"row 4: Consumer-1", consumer, "after-effect-before-ack", false},
		{"row 4: Consumer-1 (restarted)", consumer, "", false},
		{"row 5: Relay-A", relay, "", false}, {"row 5: Consumer-1", consumer, "", false}, {"row 5: Consumer-2", consumer, "", false},
		{"row 5: Consumer-3", consumer, "", false},
		{"row 6: Relay-A", relay, "after-claim", false}, {"row 6: Relay-B", relay, "", false}, {"row 6: Projector-1", consumer, "", false},
	}
	type processesCase struct {
		sc       *Scenario
		variant  string
		children []child
		// same names a table whose rows must equal those of the run
		// without Processes; sameChecks says the checks must observe the
		// same figures: they do not depend on where the instances ran.
		same       string
		sameChecks bool
	}
	var cases []processesCase
	// Every variant runs with processes on SQLite; on PostgreSQL the
	// lessons and the variants only PostgreSQL has (its row locks between
	// processes), so that make test stays within minutes on two cores: the
	// instances' code is the same on both engines, the engine is not.
	add := func(sc *Scenario, children func(variant string) []child, same string, sameChecks bool) {
		cases = append(cases, processesCase{sc, "", children(""), same, sameChecks})
		for _, v := range sc.Variants {
			if (db == "" && v.Engine == "") || (db != "" && v.Engine == store.Postgres) {
				cases = append(cases, processesCase{sc, v.Name, children(v.Name), same, sameChecks})
			}
		}
	}
	always := func(c []child) func(string) []child { return func(string) []child { return c } }
	add(&transactionalOutbox, always(checkout), "", true)
	add(&outboxLeasing, always(leasing), "", false)
	add(&competingWorkersNoClaim, always(racing), "", true)
	add(&lateFinalize, always(late), "", true)
	add(&staleAckFencing, always(fencing), "", true)
	add(&leaseRenewal, always(renewal), "", true)
	add(&leaseExpiryAfterSend, always(pastTheLease), "", true)
	add(&failureClasses, always(failureRows), "Failure classes", true)
	add(&clocksAndOutages, always(clocks), "", false) // the race's split between winners varies, in-process too
	add(&inboxRetention, always(retention), "", true)
	// The batch-completion lesson's two processes: Process-1's completer
	// stalls by SIGSTOP holding its finished batch.
	add(&batchCompletion, always([]child{{bcFirst, "batch-relay", "", true}, {bcSecond, "batch-relay", "", false}}), "By message: its work and its completion", true)
	// Session 21's drains, each with its own instances: Worker-A crashes
	// holding the oldest message, Worker-B stalls holding the next until
	// after the drain, Worker-C and Worker-D drain; then Worker-B stalls
	// again and a second Worker-B re-takes its message.
	add(&claimsAtScale, func(variant string) []child {
		indexed := store.IndexedScale.Name
		var drains []child
		for _, claim := range []string{store.LessonScale.Name, indexed} {
			for _, size := range []string{"small", "large"} {
				label := fmt.Sprintf("%s claim, %s backlog", claim, size)
				drains = append(drains, child{label + ": " + s21Crashed, "scale-worker", "after-claim", false},
					child{label + ": " + s21Stalled, "scale-worker", "", true},
					child{label + ": " + s21Stalled, "scale-worker", "", false}, // its second claimer, for the re-take
					child{label + ": " + s21Drainers[0], "scale-worker", "", false},
					child{label + ": " + s21Drainers[1], "scale-worker", "", false})
			}
		}
		return drains
	}, "", false) // its costs move a little from run to run, in-process too
	var lessons []*Scenario
	for _, c := range cases {
		lessons = append(lessons, c.sc)
	}
	checkEveryLessonRunsInProcesses(t, lessons)
	for _, tt := range cases {
		// Session 21's runs go one at a time: each is four drains of up to
		// 500 messages.
		serial := tt.sc == &claimsAtScale
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
			if !slices.Equal(failed, want) {
				t.Errorf("failed checks %v, want %v", failed, want)
			}
			if got := childrenOf(t, r); !slices.Equal(sortedChildren(got), sortedChildren(tt.children)) {
				t.Errorf("child processes\n%v\nwant\n%v", got, tt.children)
			}
			checkEventsAgreeWithLedgers(t, r)
			checkTextsFromTheRun(t, tt.sc, r) // a text says only what this run, with its children, showed
			for _, e := range r.Timeline {    // a child's effect crosses the pipe with its service
				if (e.Kind == lab.KindEffect || e.Kind == lab.KindDedup) && e.Service == "" {
					t.Errorf("#%d %s's %s of %s names no consumer service", e.Seq, e.Actor, e.Kind, e.Subject)
				}
			}
			if !tt.sameChecks && tt.same == "" {
				return
			}
			inProcess := executeOn(t, db, tt.sc, tt.variant, 0)
			if tt.sameChecks && !slices.Equal(r.Checks, inProcess.Checks) {
				t.Errorf("checks with processes:\n%v\nwithout:\n%v", r.Checks, inProcess.Checks)
			}
			if tt.same != "" {
				if got, want := tableOf(t, r, tt.same).Rows, tableOf(t, inProcess, tt.same).Rows; !slices.EqualFunc(got, want, slices.Equal) {
					t.Errorf("%q with processes:\n%v\nwithout:\n%v", tt.same, got, want)
				}
			}
		})
	}
}

// childrenOf reads r's processes table, checking each row against the
// operating system's word and the timeline: a killed child was killed by
// SIGKILL and a CRASH row names it, a finished one exited 0, and a stalled
// one was frozen and continued, as timeline rows say.
func childrenOf(t *testing.T, r *lab.Result) []child {
	t.Helper()
	var got []child
	for _, row := range processesTableOf(t, r).Rows {
		c := child{phase: row[1], role: row[2], stalled: row[7] != "-"}
		pid := row[3]
		switch {
		case row[4] == "(not killed: it finished its work)":
			if row[5] != "-" || row[6] != "exit status 0" {
				t.Errorf("process row %v: want exit status 0", row)
			}
		case row[5] == "killed" && row[6] == "signal: killed":
			c.point = row[4]
			if !timelineSays(r, "CRASH", "process "+pid+",") {
				t.Errorf("no CRASH row of the timeline names process %s", pid)
			}
		default:
			t.Errorf("process row %v: want killed by SIGKILL or finished with exit status 0", row)
		}
		if c.stalled && (!strings.Contains(row[7], "SIGSTOP") || !strings.Contains(row[7], "SIGCONT") ||
			!timelineSays(r, "", "process "+pid+" frozen") || !timelineSays(r, "wakes", "process "+pid+" continued by SIGCONT")) {
			t.Errorf("process %s: stalls %q; want SIGSTOP and SIGCONT, and timeline rows that say so", pid, row[7])
		}
		got = append(got, c)
	}
	return got
}

// sortedChildren is cs in a stable order: concurrent instances start in
// either order.
func sortedChildren(cs []child) []child {
	return slices.SortedFunc(slices.Values(cs), func(a, b child) int {
		return strings.Compare(a.phase+"\x00"+a.role, b.phase+"\x00"+b.role)
	})
}

// processesTableOf is r's processes table; the test fails without one.
func processesTableOf(t *testing.T, r *lab.Result) lab.Table {
	t.Helper()
	return tableOf(t, r, instance.ProcessesTitle)
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

// timelineSays reports whether a row of r's timeline with action (any,
// if "") has a detail holding text.
func timelineSays(r *lab.Result, action, text string) bool {
	for _, e := range r.Timeline {
		if (action == "" || e.Action == action) && strings.Contains(e.Detail, text) {
			return true
		}
	}
	return false
}

// TestProcessesTableWithoutChildren: a run that started no child says so
// in its processes table instead of showing an empty one.
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
				return executeRun(t, &interleavingExplorer, runKey{variant: variant, database: db, bound: 3, processes: processes})
			}
			r, inProcess := run(true), run(false)
			if !slices.Equal(r.Checks, inProcess.Checks) {
				t.Errorf("checks with processes:\n%v\nwithout:\n%v", r.Checks, inProcess.Checks)
			}
			procs := processesTableOf(t, r)
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
			if !timelineSays(r, "start", "child process ") {
				t.Errorf("the replayed ordering's timeline names no child process")
			}
		})
	}
}

// TestNoProcessesNoTable: without Options.Processes a report has no
// processes table, so the lessons' reports are unchanged.
func TestNoProcessesNoTable(t *testing.T) {
	t.Parallel()
	r := mustExecute(t, &transactionalOutbox, "")
	for _, tb := range r.Tables {
		if tb.Title == instance.ProcessesTitle {
			t.Fatalf("a run without processes has the table %q", instance.ProcessesTitle)
		}
	}
}

func TestProcessesShutdown(t *testing.T) { testProcessesShutdown(t, "") }

func TestProcessesShutdownOnPostgres(t *testing.T) { testProcessesShutdown(t, pgtest.URL(t)) }

// testProcessesShutdown runs session 22 and its variants with
// Options.Processes on db: Relay-A, Relay-B, Relay-C and the restarted
// relay are child processes at the lab's command that finish and exit 0,
// each paused relay stopped by a real SIGSTOP through its pause and
// continued by SIGCONT, as the processes table and the timeline's rows
// naming its pid say; Relay-D is a child process that the lab stops with a real SIGTERM,
// which it handles and exits 0 by itself; the timeline's SIGTERM row
// names the process; every check and figure equals the in-process run's,
// so the lesson passes and each variant (among them
// shutdown-marks-complete) fails the checks it names.
func testProcessesShutdown(t *testing.T, db string) {
	t.Parallel()
	variants := []string{""}
	for _, v := range heartbeatAndShutdown.Variants {
		if db == "" { // on PostgreSQL the lesson only, as in testProcesses
			variants = append(variants, v.Name)
		}
	}
	if db == "" && !slices.Contains(variants, variantShutdownMarksComplete) {
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
			checkShutdownChildren(t, r)
			inProcess := executeOn(t, db, &heartbeatAndShutdown, variant, 0)
			if !slices.Equal(r.Checks, inProcess.Checks) {
				t.Errorf("checks with processes:\n%v\nwithout:\n%v", r.Checks, inProcess.Checks)
			}
			if !slices.Equal(r.Metrics, inProcess.Metrics) {
				t.Errorf("figures with processes %v, without %v", r.Metrics, inProcess.Metrics)
			}
		})
	}
}

// TestProcessesRenewalAfterDelivery: with the relays as child processes,
// Relay-B's tick on e10, fired in its own process after the completion
// there, changes 1 row once the renewal drops delivered = 0, and only
// renewals_after_delivery_rows fails, as in the lab's process.
func TestProcessesRenewalAfterDelivery(t *testing.T) {
	t.Parallel()
	opts := DefaultOptions()
	opts.TempRoot, opts.Processes, opts.ChildTimeout = t.TempDir(), true, testChildTimeout
	opts.swap = heartbeatRenewal(withoutGuard(t, store.RenewWithinDeadline, "delivered = 0"))
	r, err := Execute(context.Background(), &heartbeatAndShutdown, "", opts, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.FailedChecks(); !slices.Equal(got, []string{"renewals_after_delivery_rows"}) {
		t.Errorf("failed checks %v, want [renewals_after_delivery_rows]", got)
	}
	if !timelineSays(r, "heartbeat e10", "renewed under token 1: 1 row, lease until 09:07:09") {
		t.Error("no timeline line shows Relay-B's tick renewing the delivered e10")
	}
}

// checkShutdownChildren checks session 22's processes table: its five
// children in the order started, each ended as the lesson ends it, and
// the pauses (Relay-A's, Relay-B's, Relay-C's two) each a real SIGSTOP
// and SIGCONT that the timeline names.
func checkShutdownChildren(t *testing.T, r *lab.Result) {
	t.Helper()
	rows := processesTableOf(t, r).Rows
	want := []struct {
		phase, role string
		sigterm     bool       // sent SIGTERM at after-send-before-complete; else it finished its work
		stalls      [][2]int64 // each pause's SIGSTOP and SIGCONT, in seconds
	}{
		{hbRelayA, "heartbeat-relay", false, [][2]int64{{105, 140}}},
		{hbRelayB, "heartbeat-relay", false, [][2]int64{{335, 370}}},
		{hbRelayC, "heartbeat-relay", false, [][2]int64{{155, 190}, {280, 291}}},
		{hbRelayD, "heartbeat-relay", true, nil},
		{hbRelayFresh, "heartbeat-relay", false, nil},
	}
	if len(rows) != len(want) {
		t.Fatalf("processes table rows %v, want %d: Relay-A, Relay-B, Relay-C, Relay-D and the restarted relay", rows, len(want))
	}
	for i, w := range want {
		row := rows[i]
		if row[1] != w.phase || row[2] != w.role || row[6] != "exit status 0" {
			t.Errorf("process row %v: want %s as %s, exit status 0", row, w.phase, w.role)
			continue
		}
		pid := row[3]
		if w.sigterm {
			if row[5] != "SIGTERM (sent by the lab)" || !strings.Contains(row[4], "after-send-before-complete") {
				t.Errorf("process row %v: want %s sent SIGTERM at after-send-before-complete", row, w.phase)
			}
			if !sigtermNames(r, pid) {
				t.Errorf("no SIGTERM row of the timeline names a real signal to process %s", pid)
			}
		} else if row[4] != "(not killed: it finished its work)" || row[5] != "-" {
			t.Errorf("process row %v: want it to finish its work, no signal", row)
		}
		if !timelineSays(r, "start", "child process "+pid+" ") {
			t.Errorf("no start row of the timeline names %s's process %s", w.phase, pid)
		}
		if len(w.stalls) == 0 {
			if row[7] != "-" {
				t.Errorf("process %s (%s): stalls %q, want none", pid, w.phase, row[7])
			}
			continue
		}
		for _, st := range w.stalls {
			stop, cont := cast.TickClock(st[0]*cast.TickSecond), cast.TickClock(st[1]*cast.TickSecond)
			if !strings.Contains(row[7], "SIGSTOP at "+stop) || !strings.Contains(row[7], "SIGCONT at "+cont) {
				t.Errorf("process %s (%s): stalls %q, want SIGSTOP at %s and SIGCONT at %s", pid, w.phase, row[7], stop, cont)
			}
		}
		if !timelineSays(r, "frozen", "process "+pid+" frozen by SIGSTOP") || !timelineSays(r, "resumes", "process "+pid+" continued by SIGCONT") {
			t.Errorf("process %s: no frozen and resumes rows of the timeline name its SIGSTOP and SIGCONT", pid)
		}
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
