package proc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/outboxlab/outboxlab/failpoint"
	"github.com/outboxlab/outboxlab/store"
)

// Command is the hidden subcommand a child runs: `outboxlab worker --role
// ROLE`. The program (or a test binary, in its TestMain) hands it to
// [Serve].
const Command = "worker"

// DefaultTimeout is how long the parent waits for a child's next report
// (or its exit) before it kills the child and fails the run.
const DefaultTimeout = 30 * time.Second

// Spec is one child to start.
type Spec struct {
	Role   string // the role the child plays, from the roles [Serve] knows
	Target Target // the database it opens
	Work   any    // its work, encoded as JSON for the role
	// Ledger, when set, receives the child's statements when it ends
	// (see [store.Ledger.Merge]): the last ledger it reported.
	Ledger *store.Ledger
	// Timeout bounds each wait for a report or an exit; 0 is
	// [DefaultTimeout].
	Timeout time.Duration
}

// Child is a running child process and the parent's end of its pipe.
type Child struct {
	role    string
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	lines   chan line
	reaped  chan struct{} // closed once the child is reaped: read stops handing lines over
	stderr  *tail
	timeout time.Duration
	ledger  *store.Ledger

	// An answering child (see [Operation.Call]): whether it is known idle,
	// and its last idle report.
	idle      bool
	lastIdle  Report
	callError string

	mu     sync.Mutex
	last   *Ledger // the ledger of the last report
	ended  bool
	state  *os.ProcessState
	waitEr error
}

// line is one line of the child's stdout, or the error that ended it.
type line struct {
	b   []byte
	err error
}

// Death is how a child was killed: which process, at which failpoint, by
// which signal, as its wait status says.
type Death struct {
	Role   string          `json:"role"`
	Pid    int             `json:"pid"`
	Point  failpoint.Point `json:"point"`
	Signal string          `json:"signal"` // the signal that ended it, e.g. "killed"
	Status string          `json:"status"` // the wait status as Go prints it, e.g. "signal: killed"
}

// String names the killed process for a report: its role, pid, point and
// wait status.
func (d Death) String() string {
	return fmt.Sprintf("%s, process %d, killed by SIGKILL at %s (wait status: %s)", d.Role, d.Pid, d.Point, d.Status)
}

// executable is the program a child runs: this one.
var executable = os.Executable

// Start starts `<this program> worker --role ROLE` and writes its work on
// its stdin. ctx bounds the child's life: when it ends, the child is
// killed. Stop it (or Kill it, or Wait for it) on every path.
func Start(ctx context.Context, spec Spec) (*Child, error) {
	exe, err := executable()
	if err != nil {
		return nil, fmt.Errorf("proc: find this program to start worker %s: %w", spec.Role, err)
	}
	work, err := json.Marshal(spec.Work)
	if err != nil {
		return nil, fmt.Errorf("proc: encode the work of worker %s: %w", spec.Role, err)
	}
	first, err := json.Marshal(job{Role: spec.Role, Target: spec.Target, Work: work})
	if err != nil {
		return nil, fmt.Errorf("proc: encode the job of worker %s: %w", spec.Role, err)
	}
	cmd := exec.CommandContext(ctx, exe, Command, "--role", spec.Role)
	cmd.SysProcAttr = childAttributes()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("proc: pipe to worker %s: %w", spec.Role, err)
	}
	out, in, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("proc: pipe from worker %s: %w", spec.Role, err)
	}
	cmd.Stdout = in
	c := &Child{role: spec.Role, cmd: cmd, stdin: stdin, lines: make(chan line, 4), reaped: make(chan struct{}), stderr: &tail{max: 2048},
		timeout: spec.Timeout, ledger: spec.Ledger}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		out.Close()
		in.Close()
		return nil, fmt.Errorf("proc: start worker %s: %w", spec.Role, err)
	}
	in.Close() // the child holds the write end now; EOF comes when it dies
	go c.read(out)
	if _, err := stdin.Write(append(first, '\n')); err != nil {
		return nil, c.fail(fmt.Errorf("could not be sent its work: %w", err))
	}
	return c, nil
}

// read hands the child's stdout to Next, one line at a time, until EOF
// or until the child is reaped and nobody will read any more.
func (c *Child) read(out *os.File) {
	defer out.Close()
	defer close(c.lines)
	r := bufio.NewReader(out)
	for {
		b, err := r.ReadBytes('\n')
		l := line{b: b}
		if err != nil {
			l.err = io.ErrUnexpectedEOF
		}
		if len(b) > 0 {
			select {
			case c.lines <- l:
			case <-c.reaped:
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Pid is the child's process id.
func (c *Child) Pid() int { return c.cmd.Process.Pid }

// Role is the role the child plays.
func (c *Child) Role() string { return c.role }

// Next waits for the child's next report. A child that reports an error,
// dies, prints a line that is not a report, or says nothing within the
// timeout is killed (if still alive) and Next returns an error naming it.
func (c *Child) Next(ctx context.Context) (Report, error) {
	timer := time.NewTimer(c.timeout)
	defer timer.Stop()
	select {
	case l, ok := <-c.lines:
		if !ok {
			return Report{}, c.failExiting(errors.New("exited before it reported"))
		}
		var r Report
		if l.err != nil || json.Unmarshal(l.b, &r) != nil || !r.valid() {
			return Report{}, c.fail(fmt.Errorf("printed a line that is not a worker report: %q", clip(string(l.b), 120)))
		}
		if r.Ledger != nil {
			c.mu.Lock()
			c.last = r.Ledger
			c.mu.Unlock()
		}
		if r.Error != "" {
			return Report{}, c.failExiting(errors.New("failed: " + r.Error))
		}
		return r, nil
	case <-ctx.Done():
		c.Stop()
		return Report{}, ctx.Err()
	case <-timer.C:
		return Report{}, c.fail(fmt.Errorf("said nothing for %s", c.timeout))
	}
}

// valid reports whether r says exactly one thing.
func (r Report) valid() bool {
	n := 0
	for _, set := range []bool{r.At != "", r.Idle, r.Done, r.Error != ""} {
		if set {
			n++
		}
	}
	return n == 1
}

// GoOn lets a child waiting at a failpoint carry on at now, the lab's
// clock as it lets it go: [Worker.Reach] returns it to the child, which
// acts at that time from there, as an instance in the lab's process would
// after the same hold (the lab may have moved its clock meanwhile).
func (c *Child) GoOn(now time.Time) error { return c.write(reply{Go: true, Now: &now}) }

// Kill kills the child with SIGKILL where it waits, at point, and waits
// for its exit. The [Death] comes from the wait status; a child that
// ended any other way is an error.
func (c *Child) Kill(point failpoint.Point) (Death, error) {
	d := Death{Role: c.role, Pid: c.Pid(), Point: point}
	// Process.Signal, not syscall.Kill on the pid: once the child is
	// reaped its pid may belong to another process, and Signal knows.
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return d, c.fail(fmt.Errorf("could not be sent SIGKILL at %s: %w", point, err))
	}
	st := c.wait()
	if st == nil {
		return d, fmt.Errorf("proc: worker %s (pid %d) was sent SIGKILL at %s and could not be reaped: %v", c.role, d.Pid, point, c.waitErr())
	}
	ws, ok := st.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		return d, fmt.Errorf("proc: worker %s (pid %d) was sent SIGKILL at %s, yet it ended with %s%s", c.role, d.Pid, point, st, c.stderr.said())
	}
	d.Signal, d.Status = ws.Signal().String(), st.String()
	return d, nil
}

// Signal sends the child sig where it waits for it, at point (see
// [Worker.AwaitSignal]): a signal it handles, such as SIGTERM, unlike
// Kill's SIGKILL. The child goes on by itself: read its reports with
// Next, then Wait for its own exit, which kills it only after the
// timeout, and says so.
func (c *Child) Signal(sig syscall.Signal, point failpoint.Point) error {
	if err := c.cmd.Process.Signal(sig); err != nil {
		return c.fail(fmt.Errorf("could not be sent %s at %s: %w", signalName(sig), point, err))
	}
	return nil
}

// Status is the child's wait status as Go prints it (e.g. "exit status
// 0"), once it is reaped, or "" while it runs.
func (c *Child) Status() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == nil {
		return ""
	}
	return c.state.String()
}

// signalName is sig as people write it, e.g. SIGTERM.
func signalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGINT:
		return "SIGINT"
	}
	return sig.String()
}

// Wait waits for a child that reported Done to exit, and checks it exited
// with status 0.
func (c *Child) Wait() error {
	done := make(chan *os.ProcessState, 1)
	go func() { done <- c.wait() }()
	timer := time.NewTimer(c.timeout)
	defer timer.Stop()
	select {
	case st := <-done:
		if st == nil {
			return fmt.Errorf("proc: worker %s (pid %d) could not be reaped: %v", c.role, c.Pid(), c.waitErr())
		}
		if !st.Success() {
			return fmt.Errorf("proc: worker %s (pid %d) reported done, then ended with %s%s", c.role, c.Pid(), st, c.stderr.said())
		}
		return nil
	case <-timer.C:
		return c.fail(fmt.Errorf("reported done, then did not exit within %s", c.timeout))
	}
}

// Stop kills the child if it is still alive and reaps it; it is safe to
// call at any time, more than once, and after Kill or Wait.
func (c *Child) Stop() {
	_ = c.cmd.Process.Kill()
	c.wait()
}

// wait closes the child's stdin, reaps it once and merges its last ledger
// into the parent's; later calls return the same state.
func (c *Child) wait() *os.ProcessState {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return c.state
	}
	c.ended = true
	_ = c.stdin.Close()
	c.waitEr = c.cmd.Wait()
	c.state = c.cmd.ProcessState
	close(c.reaped)
	if c.ledger != nil && c.last != nil {
		c.ledger.Merge(c.last.Entries, c.last.Transactions)
	}
	return c.state
}

// waitErr is what reaping the child returned.
func (c *Child) waitErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.waitEr
}

// failExiting is fail for a child that is ending on its own (its stdout
// closed, or it reported its error): it gets the timeout to exit, so its
// own exit status is the one reported, and is killed only after that.
func (c *Child) failExiting(err error) error {
	exited := make(chan struct{})
	go func() {
		c.wait()
		close(exited)
	}()
	timer := time.NewTimer(c.timeout)
	defer timer.Stop()
	select {
	case <-exited:
	case <-timer.C:
	}
	return c.fail(err)
}

// fail kills the child, reaps it and returns err naming it, with what it
// wrote on stderr and how it ended.
func (c *Child) fail(err error) error {
	c.Stop()
	how := ""
	if st := c.wait(); st != nil {
		how = " (" + st.String() + ")"
	}
	return fmt.Errorf("proc: worker %s (pid %d) %w%s%s", c.role, c.Pid(), err, how, c.stderr.said())
}

// tail keeps the last max bytes written to it: a child's stderr.
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

// said is what the child wrote on stderr, for an error message, or "".
func (t *tail) said() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.Join(strings.Fields(string(t.b)), " ")
	if s == "" {
		return ""
	}
	return "; its stderr: " + clip(s, 300)
}

// clip shortens s to at most n bytes, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
