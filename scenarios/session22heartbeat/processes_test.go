package session22heartbeat

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/instance"
	"github.com/outboxlab/outboxlab/internal/pgtest"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/lesson/lessontest"
	"github.com/outboxlab/outboxlab/proc/proctest"
	"github.com/outboxlab/outboxlab/store"
)

// TestMain is also the lab's child process in these tests: a run with
// Options.Processes starts this test binary as `<binary> worker --role
// ROLE`, and it serves the role as the program's hidden worker
// subcommand does.
func TestMain(m *testing.M) { proctest.Main(m, instance.Serve) }

func TestProcessesShutdown(t *testing.T) { testProcessesShutdown(t, "") }

func TestProcessesShutdownOnPostgres(t *testing.T) { testProcessesShutdown(t, pgtest.URL(t)) }

// testProcessesShutdown runs session 22 and its variants with
// lesson.Options.Processes on db: Relay-A, Relay-B, Relay-C and the restarted
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
	for _, v := range Lesson.Variants {
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
			r := lessontest.Run(t, &Lesson, lessontest.Key{Variant: variant, Database: db, Processes: true})
			var want []string
			if v, ok := Lesson.Variant(variant); ok {
				want = slices.Sorted(slices.Values(v.Breaks))
			}
			if got := slices.Sorted(slices.Values(r.FailedChecks())); !slices.Equal(got, want) {
				t.Errorf("failed checks %v, want %v", got, want)
			}
			checkShutdownChildren(t, r)
			inProcess := lessontest.On(t, db, &Lesson, variant, 0)
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
	opts := lesson.DefaultOptions()
	opts.TempRoot, opts.Processes, opts.ChildTimeout = t.TempDir(), true, lessontest.ChildTimeout
	opts.Swap = renewalSwap(lessontest.WithoutGuard(t, store.RenewWithinDeadline, "delivered = 0"))
	r, err := lesson.Execute(context.Background(), &Lesson, "", opts, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.FailedChecks(); !slices.Equal(got, []string{"renewals_after_delivery_rows"}) {
		t.Errorf("failed checks %v, want [renewals_after_delivery_rows]", got)
	}
	if !lessontest.TimelineSays(r, "heartbeat e10", "renewed under token 1: 1 row, lease until 09:07:09") {
		t.Error("no timeline line shows Relay-B's tick renewing the delivered e10")
	}
}

// checkShutdownChildren checks session 22's processes table: its five
// children in the order started, each ended as the lesson ends it, and
// the pauses (Relay-A's, Relay-B's, Relay-C's two) each a real SIGSTOP
// and SIGCONT that the timeline names.
func checkShutdownChildren(t *testing.T, r *lab.Result) {
	t.Helper()
	rows := lessontest.ProcessesTable(t, r).Rows
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
		if !lessontest.TimelineSays(r, "start", "child process "+pid+" ") {
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
		if !lessontest.TimelineSays(r, "frozen", "process "+pid+" frozen by SIGSTOP") || !lessontest.TimelineSays(r, "resumes", "process "+pid+" continued by SIGCONT") {
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

// renewalSwap swaps g into the cast's renewal, which no generic swap
// reaches.
func renewalSwap(g store.Stmt) func(any) any {
	return lesson.SwapOf(func(hc heartbeatCast) heartbeatCast { hc.sqls.Renew = g; return hc })
}
