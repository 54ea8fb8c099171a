package instance

import (
	"fmt"
	"strings"
	"sync"

	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/proc"
)

// processLog is what a run's child processes did, for the report.
type processLog struct {
	mu      sync.Mutex
	entries []processEntry
}

// processEntry is one child: its role and pid and how it ended, as the
// lab saw it ("" while it runs).
type processEntry struct {
	role                         string
	pid                          int
	phase, point, signal, status string
	stalls                       []string // each SIGSTOP and SIGCONT the lab sent it, when and why
	child                        *proc.Child
}

func (l *processLog) add(e processEntry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = append(l.entries, e)
}

func (l *processLog) ended(pid int, phase, point, signal, status string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range l.entries {
		if e := &l.entries[i]; e.pid == pid && e.status == "" {
			e.phase, e.point, e.signal, e.status = phase, point, signal, status
		}
	}
}

// stalled notes a SIGSTOP or SIGCONT the lab sent process pid.
func (l *processLog) stalled(pid int, what string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range l.entries {
		if e := &l.entries[i]; e.pid == pid && e.status == "" {
			e.stalls = append(e.stalls, what)
		}
	}
}

// stopAll kills and reaps every child still alive: no child outlives
// its run, whatever path the run took.
func (l *processLog) stopAll() {
	l.mu.Lock()
	children := make([]*proc.Child, 0, len(l.entries))
	for _, e := range l.entries {
		children = append(children, e.child)
	}
	l.mu.Unlock()
	for _, c := range children {
		c.Stop()
	}
}

// ProcessesTitle is the title of the report's table of child processes.
const ProcessesTitle = "Processes (--processes)"

// inProcessNote says why a run with --processes started no child.
const inProcessNote = "No child process: this run started no application instance, so it had nothing to run in one."

// processesNote explains the table of a run that started children.
const processesNote = "Each row is a child process of the lab (`outboxlab worker --role ROLE`, the same program) with its " +
	"own database connection; its work and the scenario clock reach it on its stdin as JSON lines, its reports come back " +
	"on its stdout. Most are application instances at the lab's command: the lesson's script calls each step (claim, " +
	"send, ack, renew, finalize, consume) and the child performs it on its connection, then waits on its stdin; the " +
	"services outside every instance (the payment provider, the broker's redelivery, the observer's reads) stay in the " +
	"lab. Where the lesson stalls one, the lab froze it with SIGSTOP (the operating system showed it stopped, so it ran " +
	"no code at all) and let it go on with SIGCONT: the Stalled column says when. Where the lesson crashes one, it " +
	"reached the named failpoint, said so and blocked reading stdin, and the lab killed it there with SIGKILL; where " +
	"the lesson shuts it down (session 22), it waited at the failpoint for a signal and the lab sent it a real SIGTERM, " +
	"which it caught and handled; it then finished the lesson's steps and exited 0. Pid, signals and wait status come " +
	"from the operating system. Its statements came " +
	"back over the pipe and are in the SQL section; a transaction it had open when it was killed never ended in the " +
	"child, so the transactions section, which counts an in-process crash's transaction as rolled back, does not " +
	"count it: what the database kept of it is what the fresh connection found."

// maxProcessRows is the most children the processes table lists one per
// row; a run with more (the explorer's, hundreds of orderings with their
// own relays) gets one row per kind of child and how it ended.
const maxProcessRows = 24

// table is the report's account of --processes: the children the run
// started and how each ended, or why it started none.
func (l *processLog) table() lab.Table {
	l.mu.Lock()
	defer l.mu.Unlock()
	entries := l.entries
	t := lab.Table{Title: ProcessesTitle, Note: processesNote,
		Columns: []string{"#", "Phase", "Role", "Pid", "Killed at", "Signal", "Wait status", "Stalled (SIGSTOP, SIGCONT)"}}
	switch {
	case len(entries) == 0:
		t.Note = inProcessNote
	case len(entries) > maxProcessRows:
		return groupedProcessesTable(entries)
	}
	for i, p := range entries {
		t.AddRow(i+1, p.phase, p.role, p.pid, p.point, p.signal, p.status, strings.Join(p.stalls, "; "))
	}
	return t
}

// groupedProcessesTable is the processes table of a run with too many
// children to list: one row per phase, role and way of ending, with how
// many children ended so and their pids' range.
func groupedProcessesTable(entries []processEntry) lab.Table {
	t := lab.Table{Title: ProcessesTitle,
		Note: fmt.Sprintf("%d child processes, too many to list one per row: each row counts the children of one phase and "+
			"role that ended the same way, with the range of their pids; the timeline names the pid of each child it shows. ",
			len(entries)) + processesNote,
		Columns: []string{"Phase", "Role", "Children", "Pids", "Killed at", "Signal", "Wait status", "Stalled"}}
	type group struct {
		phase, role, point, signal, status string
		stalled                            bool
	}
	var order []group
	count := map[group]int{}
	low, high := map[group]int{}, map[group]int{}
	for _, p := range entries {
		g := group{p.phase, p.role, p.point, p.signal, p.status, len(p.stalls) > 0}
		if count[g] == 0 {
			order = append(order, g)
			low[g], high[g] = p.pid, p.pid
		}
		count[g]++
		low[g], high[g] = min(low[g], p.pid), max(high[g], p.pid)
	}
	for _, g := range order {
		t.AddRow(g.phase, g.role, count[g], fmt.Sprintf("%d-%d", low[g], high[g]), g.point, g.signal, g.status, g.stalled)
	}
	return t
}
