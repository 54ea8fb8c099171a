package scenarios

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"syscall"

	"github.com/outboxlab/outboxlab/failpoint"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/proc"
	"github.com/outboxlab/outboxlab/store"
)

// ServeWorker is the child's side of Options.Processes: it plays role,
// one of the registered scenarios' [Scenario.Workers], reading its work
// from in and writing its reports to out (see [proc.Serve]). The program's
// hidden `worker` subcommand calls it.
func ServeWorker(ctx context.Context, role string, in io.Reader, out io.Writer) error {
	roles := map[string]proc.Role{}
	for _, sc := range registry {
		for name, r := range sc.Workers {
			roles[name] = r
		}
	}
	return proc.Serve(ctx, role, in, out, roles)
}

// workerTarget is the database at path as a child opens it: what
// [Env.Open] opens, the same file or the same schema on the server.
func (e *Env) workerTarget(ctx context.Context, path string) (proc.Target, error) {
	t := proc.Target{Engine: e.Engine(), Path: path}
	if c := e.Options.Claim; c != nil {
		t.ClaimFile = &store.ClaimFile{Select: c.Select, Update: c.Update}
	}
	if e.server != nil {
		schema, err := e.server.schemaFor(ctx, path)
		if err != nil {
			return t, err
		}
		t.Path, t.URL, t.Schema = "", e.server.connURL(), schema // a confined run's children log in as its role
	}
	return t, nil
}

// startChild starts role as a child process on the database at path, its
// statements merged into the run's ledger when it ends. The caller stops
// it on every path (defer child.Stop()).
func (e *Env) startChild(ctx context.Context, role, path string, work any) (*proc.Child, error) {
	target, err := e.workerTarget(ctx, path)
	if err != nil {
		return nil, err
	}
	c, err := proc.Start(ctx, proc.Spec{Role: role, Target: target, Work: work, Ledger: e.Ledger})
	if err != nil {
		return nil, err
	}
	e.processes.add(processEntry{role: role, pid: c.Pid(), child: c})
	return c, nil
}

// killChild kills child with SIGKILL where it waits, at point, during
// phase, and records its death for the report.
func (e *Env) killChild(c *proc.Child, phase string, point failpoint.Point) (proc.Death, error) {
	d, err := c.Kill(point)
	if err != nil {
		return d, err
	}
	e.processes.ended(c.Pid(), phase, string(d.Point), d.Signal, d.Status)
	return d, nil
}

// waitChild waits for a child that reported its work done to exit with
// status 0, during phase, and records that for the report.
func (e *Env) waitChild(c *proc.Child, phase string) error {
	if err := c.Wait(); err != nil {
		return err
	}
	e.processes.ended(c.Pid(), phase, "(not killed: it finished its work)", "", "exit status 0")
	return nil
}

// signalChild sends child sig (SIGTERM), which it waits for at point and
// handles itself (see [proc.Worker.AwaitSignal]).
func (e *Env) signalChild(c *proc.Child, sig syscall.Signal, point failpoint.Point) error {
	return c.Signal(sig, point)
}

// waitSignalledChild waits for a child that was sent sig at point, and
// then reported its work done, to exit by itself with status 0, during
// phase, and records the signal and its wait status for the report.
func (e *Env) waitSignalledChild(c *proc.Child, phase string, sig syscall.Signal, point failpoint.Point) error {
	if err := c.Wait(); err != nil {
		return err
	}
	e.processes.ended(c.Pid(), phase, fmt.Sprintf("(not killed: sent %s at %s, it exited by itself)", signalText(sig), point),
		signalText(sig)+" (sent by the lab)", c.Status())
	return nil
}

// crashLine is the timeline's CRASH line of a child killed at a
// failpoint, where it held held.
func crashLine(held string, d proc.Death) string {
	return fmt.Sprintf("%s: %s; its connection and memory died with the process", held, d)
}

// signalText names sig as people write it, e.g. SIGTERM.
func signalText(sig syscall.Signal) string {
	if sig == syscall.SIGTERM {
		return "SIGTERM"
	}
	return sig.String()
}

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

// processesTitle is the title of the report's table of child processes.
const processesTitle = "Processes (run --processes)"

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
	"the lesson shuts it down (session 22), it waited at the failpoint for a signal and the lab sent it SIGTERM, which " +
	"it handled and exited by itself. Pid, signals and wait status come from the operating system. Its statements came " +
	"back over the pipe and are in the SQL section; a transaction it had open when it was killed never ended in the " +
	"child, so the transactions section, which counts an in-process crash's transaction as rolled back, does not " +
	"count it: what the database kept of it is what the fresh connection found."

// maxProcessRows is the most children the processes table lists one per
// row; a run with more (the explorer's, hundreds of orderings with their
// own relays) gets one row per kind of child and how it ended.
const maxProcessRows = 24

// processesTable is the report's account of --processes: the children
// the run started and how each ended, or why it started none.
func (e *Env) processesTable() lab.Table {
	e.processes.mu.Lock()
	defer e.processes.mu.Unlock()
	entries := e.processes.entries
	t := lab.Table{Title: processesTitle, Note: processesNote,
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
	t := lab.Table{Title: processesTitle,
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
