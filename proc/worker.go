package proc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"time"

	"github.com/outboxlab/outboxlab/failpoint"
	"github.com/outboxlab/outboxlab/store"
)

// Role is what a child does: it decodes its work ([Worker.Work]), opens
// its own connection ([Worker.Open]), stops at failpoints ([Worker.Reach])
// and returns its result, which the parent reads from the Done report.
type Role func(ctx context.Context, w *Worker) (result any, err error)

// ErrParentGone means the parent closed the child's stdin: the child stops.
var ErrParentGone = errors.New("proc: the parent closed the pipe")

// Worker is the child's end of the pipe.
type Worker struct {
	job    job
	in     *bufio.Reader
	lines  chan stdinLine // the parent's lines after the job, read by one goroutine
	start  sync.Once
	mu     sync.Mutex // one report line at a time
	out    *json.Encoder
	ledger *store.Ledger
}

// stdinLine is one line the parent wrote, or the error that ended stdin.
type stdinLine struct {
	b   []byte
	err error
}

// next waits for the parent's next line. One goroutine reads stdin and
// hands each line over, so that a wait that ends another way (a signal,
// see [Worker.AwaitSignal]) leaves the next line for the next reader. A
// closed pipe returns [ErrParentGone].
func (w *Worker) next() ([]byte, error) {
	l, ok := <-w.stdin()
	if !ok || l.err != nil {
		return nil, ErrParentGone
	}
	return l.b, nil
}

// stdin is the channel of the parent's lines, its reader started once.
func (w *Worker) stdin() <-chan stdinLine {
	w.start.Do(func() {
		w.lines = make(chan stdinLine)
		go func() {
			defer close(w.lines)
			for {
				b, err := w.in.ReadBytes('\n')
				w.lines <- stdinLine{b, err}
				if err != nil {
					return
				}
			}
		}()
	})
	return w.lines
}

// Work decodes the work the parent sent into v.
func (w *Worker) Work(v any) error {
	if err := json.Unmarshal(w.job.Work, v); err != nil {
		return fmt.Errorf("proc: decode the work of role %s: %w", w.job.Role, err)
	}
	return nil
}

// Begin decodes the parent's work into v and opens the child's own
// connection: how every role starts.
func (w *Worker) Begin(ctx context.Context, v any) (*store.DB, error) {
	if err := w.Work(v); err != nil {
		return nil, err
	}
	return w.Open(ctx)
}

// Open opens the child's own connection to the parent's database,
// recording into the child's ledger.
func (w *Worker) Open(ctx context.Context) (*store.DB, error) {
	return w.job.Target.Open(ctx, w.ledger)
}

// Reach reports that the child is at point, with state (what it has done
// so far) and its ledger, and waits for the parent. It returns when the
// parent lets it go on ([Child.GoOn]), with the lab's clock then: a role
// whose instance keeps a clock sets it to that time before it goes on.
// A parent that kills the child there is never answered. A closed pipe
// returns [ErrParentGone].
func (w *Worker) Reach(point failpoint.Point, state any) (now time.Time, err error) {
	if err := w.report(Report{At: point}, state); err != nil {
		return time.Time{}, err
	}
	line, err := w.next()
	if err != nil {
		return time.Time{}, err
	}
	var r reply
	if err := json.Unmarshal(line, &r); err != nil || !r.Go || r.Now == nil {
		return time.Time{}, fmt.Errorf("proc: at %s the parent wrote %q, not a go-on with the lab's clock", point, line)
	}
	return *r.Now, nil
}

// AwaitSignal reports that the child is at point, with state and its
// ledger, and waits there for one of sigs, which the parent sends with
// [Child.Signal]; it returns the signal. The child handles it (it was
// notified with signal.Notify before the report, so none is missed) and
// goes on: the operation that awaited it returns, and the child answers
// the parent's next call. A closed pipe returns [ErrParentGone], a line
// on stdin before the signal an error.
func (w *Worker) AwaitSignal(point failpoint.Point, state any, sigs ...os.Signal) (os.Signal, error) {
	got := make(chan os.Signal, 1)
	signal.Notify(got, sigs...)
	defer signal.Stop(got)
	if err := w.report(Report{At: point}, state); err != nil {
		return nil, err
	}
	select {
	case sig := <-got:
		return sig, nil
	case l, ok := <-w.stdin():
		if !ok || l.err != nil {
			return nil, ErrParentGone
		}
		return nil, fmt.Errorf("proc: at %s the parent wrote %q, not a signal", point, l.b)
	}
}

func (w *Worker) report(r Report, state any) error {
	if state != nil {
		b, err := json.Marshal(state)
		if err != nil {
			return fmt.Errorf("proc: encode the state of role %s: %w", w.job.Role, err)
		}
		r.State = b
	}
	r.Ledger = snapshot(w.ledger)
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.out.Encode(r)
}

// Serve is the child's whole life: it reads its work from in, checks it is
// for role, runs that role from roles and writes its reports to out, the
// last one Done or Error. It returns the role's error, so the child exits
// non-zero when the role failed.
func Serve(ctx context.Context, role string, in io.Reader, out io.Writer, roles map[string]Role) error {
	w := &Worker{in: bufio.NewReader(in), out: json.NewEncoder(out), ledger: &store.Ledger{}}
	line, err := w.in.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("proc: worker %s read no work: %w", role, err)
	}
	if err := json.Unmarshal(line, &w.job); err != nil {
		return w.fail(fmt.Errorf("proc: worker %s: its work is not a job line: %w", role, err))
	}
	if w.job.Role != role {
		return w.fail(fmt.Errorf("proc: worker started as %s was sent the work of %s", role, w.job.Role))
	}
	run, ok := roles[role]
	if !ok {
		return w.fail(fmt.Errorf("proc: no worker role %q", role))
	}
	result, err := run(ctx, w)
	if err != nil {
		return w.fail(err)
	}
	return w.report(Report{Done: true}, result)
}

// fail reports err to the parent and returns it.
func (w *Worker) fail(err error) error {
	_ = w.report(Report{Error: err.Error()}, nil)
	return err
}
