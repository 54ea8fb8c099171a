package challenge

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/outboxlab/outboxlab/relayproto"
	"github.com/outboxlab/outboxlab/store"
)

// Fault is what the lab does to one instance at one of its request
// boundaries.
type Fault struct {
	// Instance is the instance it happens to; "" for whichever instance
	// reaches the boundary first.
	Instance string
	At       Boundary
	Do       Action
	// For, with Hold and Stop, is how long on the lab clock the reply
	// waits.
	For time.Duration
}

// Boundary names a request by what it is and, for a commit, by what it
// committed: the Nth request of the instance that matches.
type Boundary struct {
	Op string // a relayproto op
	// Commits, on a commit, is what it must have committed: "claim" (a
	// message taken) or "completion" (a message marked Processed).
	Commits string
	// SQLContains, on query and exec, is text the statement must hold.
	SQLContains string
	Nth         int // 1 for the first match
}

// Action is a fault's kind.
type Action string

// The faults the lab injects.
const (
	// Kill: the request runs (a commit commits), then the lab kills the
	// program's process group with SIGKILL; no reply.
	Kill Action = "SIGKILL"
	// Stop: the request runs, then the lab freezes the process group
	// with SIGSTOP for For on the lab clock, sends SIGCONT and replies.
	Stop Action = "SIGSTOP"
	// Hold: the request runs and its reply waits For on the lab clock.
	Hold Action = "hold the reply"
	// FailStatement: the statement does not run; the reply is a
	// database error.
	FailStatement Action = "fail the statement"
	// LoseReply: the request runs (a commit commits, a send is stored)
	// and the reply says its outcome is unknown.
	LoseReply Action = "lose the reply"
	// Term: the request runs, then the lab sends SIGTERM to the
	// program's process group (a shutdown: a deploy, a scale-down) and
	// replies; the program should finish or give back what it holds, and
	// exit.
	Term Action = "SIGTERM"
	// DropRequest: the request never reaches the lab (an ack lost on its
	// way to the broker); the reply says its outcome is unknown.
	DropRequest Action = "drop the request"
)

// before reports whether a runs instead of the request (it never runs).
func (a Action) before() bool { return a == FailStatement || a == DropRequest }

// String says the fault in words, for a report.
func (f Fault) String() string {
	if f.Instance == "" {
		return f.anyInstance()
	}
	at, who, whose := f.At.String(), f.Instance, f.Instance+"'s"
	switch f.Do {
	case Kill:
		return fmt.Sprintf("%s is killed (SIGKILL) after %s", who, at)
	case Stop:
		return fmt.Sprintf("%s is frozen (SIGSTOP) for %s after %s", who, f.For, at)
	case Hold:
		return fmt.Sprintf("%s reply to %s is held for %s", whose, at, f.For)
	case FailStatement:
		return fmt.Sprintf("%s %s fails with a database error", whose, strings.TrimPrefix(at, "its "))
	case LoseReply:
		return fmt.Sprintf("%s reply to %s is lost (unknown outcome)", whose, at)
	case Term:
		return fmt.Sprintf("%s is sent SIGTERM after %s", who, at)
	case DropRequest:
		return fmt.Sprintf("%s %s never reaches the lab (unknown outcome)", whose, strings.TrimPrefix(at, "its "))
	}
	return string(f.Do)
}

// anyInstance says a fault for whichever instance gets there first.
func (f Fault) anyInstance() string {
	at := "the " + strings.TrimPrefix(f.At.String(), "its ") + " any instance makes"
	maker := "the instance that makes the " + strings.TrimPrefix(f.At.String(), "its ")
	switch f.Do {
	case Kill:
		return fmt.Sprintf("SIGKILL to %s, right after it", maker)
	case Stop:
		return fmt.Sprintf("SIGSTOP for %s to %s, right after it, then SIGCONT", f.For, maker)
	case Hold:
		return fmt.Sprintf("the reply to %s is held for %s", at, f.For)
	case FailStatement:
		return fmt.Sprintf("%s fails with a database error", at)
	case LoseReply:
		return fmt.Sprintf("the reply to %s is lost (unknown outcome)", at)
	case Term:
		return fmt.Sprintf("SIGTERM to %s, right after it", maker)
	case DropRequest:
		return fmt.Sprintf("%s never reaches the lab (unknown outcome)", at)
	}
	return string(f.Do)
}

// String names the boundary, e.g. "its first commit of a claim".
func (b Boundary) String() string {
	what := b.Op
	switch {
	case b.Commits != "":
		what = "commit of a " + b.Commits
	case b.Op == relayproto.OpProvider:
		what = "provider call"
	case b.Op == relayproto.OpWork:
		what = "chunk of work"
	case b.SQLContains != "":
		what = fmt.Sprintf("%s of a statement with %q", b.Op, b.SQLContains)
	}
	return fmt.Sprintf("its %s %s", ordinal(b.Nth), what)
}

func ordinal(n int) string {
	switch n {
	case 1:
		return "first"
	case 2:
		return "second"
	case 3:
		return "third"
	}
	return fmt.Sprintf("%dth", n)
}

// before reports whether the fault applies to req before it runs (only a
// statement's failure does).
func (b Boundary) before(req relayproto.Request) bool {
	return b.Op == req.Op && b.Commits == "" && (b.SQLContains == "" || strings.Contains(req.SQL, b.SQLContains))
}

// after reports whether the request that committed changes matches;
// classify says what each change is.
func (b Boundary) after(req relayproto.Request, changes []store.AuditEntry, classify func(store.AuditEntry) string) bool {
	if b.Op != req.Op || (b.SQLContains != "" && !strings.Contains(req.SQL, b.SQLContains)) {
		return false
	}
	return b.Commits == "" || slices.ContainsFunc(changes, func(c store.AuditEntry) bool { return classify(c) == b.Commits })
}

// armed is a fault with its count of matches so far; one for whichever
// instance gets there first is shared by every instance's goroutine.
type armed struct {
	Fault
	mu    sync.Mutex
	seen  int
	fired bool
}

// match counts a request the boundary matches and says whether this is
// the one the fault fires at.
func (a *armed) match(ok bool) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !ok || a.fired {
		return false
	}
	a.seen++
	if a.seen == max(a.At.Nth, 1) {
		a.fired = true
		return true
	}
	return false
}
