// Package instance runs a lesson's application instances (workers, relays,
// consumers, checkout): each on its own connection, in the lab's process
// or, with run --processes, in a child process at the lab's command. A
// lesson asks the run's [Opener] for an instance and never asks how it
// runs; the child's side of every instance is here too ([Serve]).
package instance

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/failpoint"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/proc"
	"github.com/outboxlab/outboxlab/store"
)

// Config is what a run's [Opener] needs.
type Config struct {
	// Processes runs each instance in a child process of the lab (the
	// hidden `worker` subcommand), each stall a real SIGSTOP and each crash
	// a real SIGKILL.
	Processes bool
	// Open opens one connection to the database at path, recording into
	// the run's ledger: an in-process instance's.
	Open cast.Opener
	// Target is the database at path as a child opens it: the same file,
	// or the same schema on the server.
	Target func(ctx context.Context, path string) (proc.Target, error)
	// Ledger receives each child's statements when it ends.
	Ledger *store.Ledger
	// Timeout bounds each wait for a child's report, answer or exit (see
	// [proc.Spec]); 0 is [proc.DefaultTimeout]. Tests shorten it, so that
	// a child that never answers fails them in seconds.
	Timeout time.Duration
}

// Opener opens a run's instances. The run builds one from --processes;
// every instance it opens runs the same way.
type Opener struct {
	cfg Config
	log processLog
}

// New returns the opener cfg describes.
func New(cfg Config) *Opener { return &Opener{cfg: cfg} }

// Stop kills and reaps every child still alive: no child outlives its
// run, whatever path the run took. It does nothing in-process.
func (o *Opener) Stop() { o.log.stopAll() }

// ProcessesTable is the report's account of the run's child processes,
// and false when the run's instances ran in the lab's process.
func (o *Opener) ProcessesTable() (lab.Table, bool) {
	if !o.cfg.Processes {
		return lab.Table{}, false
	}
	return o.log.table(), true
}

// startChild starts role as a child process on the database at path, its
// statements merged into the run's ledger when it ends, and logs it for
// the processes table. The run's end stops it on every path.
func (o *Opener) startChild(ctx context.Context, role, path string, work any) (*proc.Child, error) {
	target, err := o.cfg.Target(ctx, path)
	if err != nil {
		return nil, err
	}
	c, err := proc.Start(ctx, proc.Spec{Role: role, Target: target, Work: work, Ledger: o.cfg.Ledger, Timeout: o.cfg.Timeout})
	if err != nil {
		return nil, err
	}
	o.log.add(processEntry{role: role, pid: c.Pid(), child: c})
	return c, nil
}

// kill kills child with SIGKILL where it waits, at point, during phase,
// and logs its death.
func (o *Opener) kill(c *proc.Child, phase string, point failpoint.Point) (proc.Death, error) {
	d, err := c.Kill(point)
	if err != nil {
		return d, err
	}
	o.log.ended(c.Pid(), phase, string(d.Point), d.Signal, d.Status)
	return d, nil
}

// wait waits for a child that reported its work done to exit with status
// 0, during phase, and logs it. A child sent a signal it handled says so.
func (o *Opener) wait(c *proc.Child, phase string, signalled *sent) error {
	if err := c.Wait(); err != nil {
		return err
	}
	if signalled != nil {
		o.log.ended(c.Pid(), phase, fmt.Sprintf("(not killed: sent %s at %s, it handled it, finished and exited)", signalText(signalled.sig), signalled.at),
			signalText(signalled.sig)+" (sent by the lab)", c.Status())
		return nil
	}
	o.log.ended(c.Pid(), phase, "(not killed: it finished its work)", "", "exit status 0")
	return nil
}

// sent is a signal the lab sent a child, and the failpoint it waited at.
type sent struct {
	sig syscall.Signal
	at  failpoint.Point
}

// signalText names sig as people write it, e.g. SIGTERM.
func signalText(sig syscall.Signal) string {
	if sig == syscall.SIGTERM {
		return "SIGTERM"
	}
	return sig.String()
}

// crashLine is the timeline's CRASH line of a child killed at a
// failpoint, where it held held.
func crashLine(held string, d proc.Death) string {
	return fmt.Sprintf("%s: %s; its connection and memory died with the process", held, d)
}

// phaseOf is an instance's phase column in the processes table: the
// lesson's phase, if any, and the instance's name.
func phaseOf(phase, name string) string {
	if phase == "" {
		return name
	}
	return phase + ": " + name
}

// clip shortens a child's report state for an error message.
func clip(b []byte) string {
	if len(b) > 120 {
		return string(b[:120]) + "..."
	}
	return string(b)
}
