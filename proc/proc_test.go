package proc_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/outboxlab/outboxlab/failpoint"
	"github.com/outboxlab/outboxlab/internal/pgtest"
	"github.com/outboxlab/outboxlab/proc"
	"github.com/outboxlab/outboxlab/proc/proctest"
	"github.com/outboxlab/outboxlab/store"
)

// testTimeout bounds each wait on a child in these tests (a test that
// tests the timeout sets its own): a child that never answers fails its
// test in seconds, not after [proc.DefaultTimeout].
const testTimeout = 5 * time.Second

// TestMain is also the child: started as `<test binary> worker --role
// ROLE`, it serves one of testRoles.
func TestMain(m *testing.M) {
	proctest.Main(m, func(ctx context.Context, role string, in io.Reader, out io.Writer) error {
		return proc.Serve(ctx, role, in, out, testRoles)
	})
}

// The test payments: one the child commits, one it is writing when it
// waits at the failpoint, its transaction open.
var (
	committed = store.NewPayment{Key: "PAY-A", AmountCents: 100, MessageType: "PaymentCreated", Payload: "{}"}
	inFlight  = store.NewPayment{Key: "PAY-B", AmountCents: 200, MessageType: "PaymentCreated", Payload: "{}"}
)

// The counter's operations; it does not handle subtract.
var (
	add      = proc.Operation[int, int]{Name: "add"}
	fail     = proc.Operation[proc.None, proc.None]{Name: "fail"}
	pause    = proc.Operation[proc.None, int]{Name: "pause"}
	clock    = proc.Operation[proc.None, time.Time]{Name: "clock"}
	subtract = proc.Operation[int, int]{Name: "subtract"}
)

var testRoles = map[string]proc.Role{
	// checkout commits one payment with its outbox row, then writes the
	// second in one transaction and waits at the failpoint between the
	// payment insert and the outbox insert, the transaction open.
	"checkout": func(ctx context.Context, w *proc.Worker) (any, error) {
		var at time.Time
		if err := w.Work(&at); err != nil {
			return nil, err
		}
		db, err := w.Open(ctx)
		if err != nil {
			return nil, err
		}
		defer db.Close()
		pays := store.NewPayments(db, store.PaymentWriteLesson)
		if _, err := pays.Create(ctx, committed, at, nil); err != nil {
			return nil, err
		}
		var reachErr error
		_, err = pays.Create(ctx, inFlight, at, func() bool {
			_, reachErr = w.Reach(failpoint.BetweenOutboxWrites, inFlight.Key)
			return reachErr != nil
		})
		if reachErr != nil {
			return nil, reachErr
		}
		return "both committed", err
	},
	"exit-early": func(context.Context, *proc.Worker) (any, error) {
		fmt.Fprintln(os.Stderr, "boom: the worker gave up")
		os.Exit(3)
		return nil, nil
	},
	"garbage": func(context.Context, *proc.Worker) (any, error) {
		fmt.Println("hello, this is not JSON")
		select {} // the parent must kill it
	},
	// term waits at after-claim for SIGTERM, handles it and finishes: it
	// reports the signal it got and exits 0 by itself.
	"term": func(_ context.Context, w *proc.Worker) (any, error) {
		sig, err := w.AwaitSignal(failpoint.AfterClaim, "waiting", syscall.SIGTERM)
		if err != nil {
			return nil, err
		}
		return "handled " + sig.String(), nil
	},
	// term-then-hang handles SIGTERM, then never finishes: the parent
	// must kill it.
	"term-then-hang": func(_ context.Context, w *proc.Worker) (any, error) {
		if _, err := w.AwaitSignal(failpoint.AfterClaim, nil, syscall.SIGTERM); err != nil {
			return nil, err
		}
		select {}
	},
	// counter is an instance at the parent's command: it adds what it is
	// called with, and reports its total when told to finish.
	"counter": func(ctx context.Context, w *proc.Worker) (any, error) {
		total := 0
		err := w.Answer(ctx,
			add.Handle(func(_ context.Context, n int) (int, error) {
				total += n
				return total, nil
			}),
			fail.Handle(func(context.Context, proc.None) (proc.None, error) {
				return proc.None{}, errors.New("the database said no")
			}),
			// pause stops at after-claim, as a lesson's fault point, and
			// goes on when the parent says so.
			pause.Handle(func(context.Context, proc.None) (int, error) {
				if _, err := w.Reach(failpoint.AfterClaim, total); err != nil {
					return 0, err
				}
				total *= 10
				return total, nil
			}),
			// clock stops at after-claim and answers with the time the
			// parent's go-on carried: the child's clock from there.
			clock.Handle(func(context.Context, proc.None) (time.Time, error) {
				return w.Reach(failpoint.AfterClaim, nil)
			}),
		)
		return total, err
	},
	// twice handles add twice: it fails as it starts answering.
	"twice": func(ctx context.Context, w *proc.Worker) (any, error) {
		h := add.Handle(func(_ context.Context, n int) (int, error) { return n, nil })
		return nil, w.Answer(ctx, h, h)
	},
	"silent": func(context.Context, *proc.Worker) (any, error) {
		select {}
	},
	"fails": func(context.Context, *proc.Worker) (any, error) {
		return nil, fmt.Errorf("no database today")
	},
}

// engines are the targets a test runs on: an SQLite file in t's folder
// (its WAL shared by the test's connections and the child's), and a schema
// of its own on the test server (skipped without one).
var engines = []struct {
	name   string
	target func(t *testing.T) proc.Target
}{
	{"SQLite", func(t *testing.T) proc.Target {
		return proc.Target{Engine: store.SQLite, Path: filepath.Join(t.TempDir(), "shared.db")}
	}},
	{"PostgreSQL", func(t *testing.T) proc.Target {
		url := pgtest.URL(t)
		var b [4]byte
		_, _ = rand.Read(b[:])
		schema := "outboxlab_proc_test_" + hex.EncodeToString(b[:])
		if err := store.CreateSchema(context.Background(), url, schema, store.Config{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = store.DropSchema(context.Background(), url, schema, store.Config{}) })
		return proc.Target{Engine: store.Postgres, URL: url, Schema: schema}
	}},
}

// TestKilledChildLosesOnlyItsOpenTransaction: a child commits a payment,
// then holds a second one's transaction open at a failpoint. Killed there
// by SIGKILL, it leaves the committed payment and its outbox row, and
// nothing of the open transaction, to a fresh connection; let go on, it
// commits both. The parent's ledger holds the child's statements.
func TestKilledChildLosesOnlyItsOpenTransaction(t *testing.T) {
	for _, engine := range engines {
		for _, tt := range []struct {
			name string
			kill bool
			want []string
		}{
			{"Killed", true, []string{committed.Key}},
			{"LetGoOn", false, []string{committed.Key, inFlight.Key}},
		} {
			t.Run(engine.name+"/"+tt.name, func(t *testing.T) {
				ctx := context.Background()
				target := engine.target(t)
				ledger := &store.Ledger{}
				parent, err := target.Open(ctx, ledger)
				if err != nil {
					t.Fatal(err)
				}
				defer parent.Close() // open throughout: the WAL file is shared
				if err := parent.Migrate(ctx, store.PaymentsOutbox); err != nil {
					t.Fatal(err)
				}
				c, err := proc.Start(ctx, proc.Spec{Role: "checkout", Target: target, Work: time.Unix(0, 0).UTC(), Ledger: ledger, Timeout: testTimeout})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(c.Stop)
				r, err := c.Next(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if r.At != failpoint.BetweenOutboxWrites {
					t.Fatalf("report %+v, want the child at %s", r, failpoint.BetweenOutboxWrites)
				}
				if tt.kill {
					d, err := c.Kill(r.At)
					if err != nil {
						t.Fatal(err)
					}
					if d.Signal != "killed" || d.Status != "signal: killed" || d.Pid != c.Pid() || d.Role != "checkout" {
						t.Errorf("death %+v, want checkout pid %d killed by SIGKILL", d, c.Pid())
					}
				} else {
					if err := c.GoOn(time.Unix(0, 0).UTC()); err != nil {
						t.Fatal(err)
					}
					if r, err = c.Next(ctx); err != nil || !r.Done {
						t.Fatalf("after go-on: %+v, %v; want done", r, err)
					}
					if err := c.Wait(); err != nil {
						t.Fatal(err)
					}
				}
				fresh, err := target.Open(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer fresh.Close()
				pays, err := store.NewPayments(fresh, store.PaymentWriteLesson).List(ctx)
				if err != nil {
					t.Fatal(err)
				}
				var keys []string
				for _, p := range pays {
					keys = append(keys, p.Key)
				}
				msgs, err := fresh.Count(ctx, store.CountOutbox.SQL)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(keys, tt.want) || msgs != len(tt.want) {
					t.Errorf("a fresh connection finds payments %v and %d outbox rows, want %v and %d", keys, msgs, tt.want, len(tt.want))
				}
				if runs := ledgerRuns(ledger, store.InsertPayment.Text(target.Engine)); runs != 2 {
					t.Errorf("the parent's ledger holds %d runs of the child's payment insert, want 2", runs)
				}
			})
		}
	}
}

func ledgerRuns(l *store.Ledger, text string) int {
	for _, e := range l.Entries() {
		if e.Text == text {
			return e.Runs
		}
	}
	return 0
}

// TestChildThatMisbehavesFailsClearly: a child that exits before it
// reports, prints something that is not a report, says nothing, or fails
// its role gives an error naming it and what happened, promptly.
func TestChildThatMisbehavesFailsClearly(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		role string
		want []string
	}{
		{"exit-early", []string{"worker exit-early (pid ", "exited before it reported", "exit status 3", "boom: the worker gave up"}},
		{"garbage", []string{"worker garbage (pid ", "not a worker report", "hello, this is not JSON", "signal: killed"}},
		{"silent", []string{"worker silent (pid ", "said nothing for 2s", "signal: killed"}},
		{"fails", []string{"worker fails (pid ", "failed: no database today", "exit status 1"}},
		{"no-such-role", []string{"worker no-such-role (pid ", `no worker role "no-such-role"`}},
	} {
		t.Run(tt.role, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			target := proc.Target{Engine: store.SQLite, Path: filepath.Join(t.TempDir(), "unused.db")}
			// 2s, not less: a child of the race-built test binary on a
			// loaded machine may take longer than that to start.
			c, err := proc.Start(ctx, proc.Spec{Role: tt.role, Target: target, Work: 1, Timeout: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Stop)
			r, err := c.Next(ctx)
			if err == nil {
				t.Fatalf("report %+v, want an error", r)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestContextEndKillsChild: a run that is cancelled while its child waits
// at a failpoint kills the child; Next returns at once.
func TestContextEndKillsChild(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	target := proc.Target{Engine: store.SQLite, Path: filepath.Join(t.TempDir(), "unused.db")}
	c, err := proc.Start(ctx, proc.Spec{Role: "silent", Target: target, Work: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	cancel()
	if _, err := c.Next(ctx); err != context.Canceled {
		t.Fatalf("Next after cancel: %v, want context.Canceled", err)
	}
	if _, err := c.Kill(failpoint.AfterClaim); err == nil {
		t.Error("Kill of a child the cancel already killed reported a death")
	}
}

// TestSignalledChildExitsByItself: a child waiting at a failpoint for
// SIGTERM gets it from Signal, handles it, reports done and exits 0 on its
// own; one that handles it and then hangs is killed after the timeout,
// and the error says so.
func TestSignalledChildExitsByItself(t *testing.T) {
	t.Parallel()
	target := engines[0].target(t)
	ctx := context.Background()
	c, err := proc.Start(ctx, proc.Spec{Role: "term", Target: target, Work: 1, Timeout: testTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	r, err := c.Next(ctx)
	if err != nil || r.At != failpoint.AfterClaim {
		t.Fatalf("first report %+v, %v; want at %s", r, err, failpoint.AfterClaim)
	}
	if err := c.Signal(syscall.SIGTERM, failpoint.AfterClaim); err != nil {
		t.Fatal(err)
	}
	r, err = c.Next(ctx)
	var said string
	if err != nil || !r.Done || r.Decode(&said) != nil || said != "handled "+syscall.SIGTERM.String() {
		t.Fatalf("report after SIGTERM %+v (%q), %v; want done, handled", r, said, err)
	}
	if err := c.Wait(); err != nil {
		t.Fatal(err)
	}
	if got := c.Status(); got != "exit status 0" {
		t.Errorf("wait status %q, want exit status 0", got)
	}

	h, err := proc.Start(ctx, proc.Spec{Role: "term-then-hang", Target: target, Work: 1, Timeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Stop()
	if _, err := h.Next(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.Signal(syscall.SIGTERM, failpoint.AfterClaim); err != nil {
		t.Fatal(err)
	}
	_, err = h.Next(ctx)
	if err == nil || !strings.Contains(err.Error(), "said nothing") || !strings.Contains(err.Error(), "signal: killed") {
		t.Errorf("a child that hangs after SIGTERM: error %v, want it killed after saying nothing", err)
	}
}

// startCounter starts the "counter" role on the first engine, a child
// at the parent's command, stopped when t ends.
func startCounter(t *testing.T) *proc.Child { return startAnswering(t, "counter") }

// startAnswering starts role on the first engine, stopped when t ends.
func startAnswering(t *testing.T, role string) *proc.Child {
	t.Helper()
	c, err := proc.Start(context.Background(), proc.Spec{Role: role, Target: engines[0].target(t), Work: 1, Timeout: testTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

// TestAnsweringChildCanBeFrozen: a child at the parent's command performs
// each call and stays alive when one fails; frozen by SIGSTOP it answers
// nothing (the operating system shows it stopped) until SIGCONT, then
// carries on with its memory intact; told to finish, it reports its
// result and exits 0.
func TestAnsweringChildCanBeFrozen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := startCounter(t)
	total, err := add.Call(ctx, c, 2)
	if err != nil || total != 2 {
		t.Fatalf("add 2: total %d, %v; want 2", total, err)
	}
	var callErr *proc.CallError
	if _, err := fail.Call(ctx, c, proc.None{}); !errors.As(err, &callErr) || callErr.Message != "the database said no" {
		t.Fatalf("a failing call returned %v, want a CallError with the child's message", err)
	}

	if err := c.Freeze(); err != nil {
		t.Fatal(err)
	}
	if state := processState(t, c.Pid()); state != "T" && state != "" {
		t.Errorf("a frozen child's state is %q, want T (stopped)", state)
	}
	answered := make(chan error, 1)
	go func() {
		var err error
		total, err = add.Call(ctx, c, 3)
		answered <- err
	}()
	select {
	case err := <-answered:
		t.Fatalf("a frozen child answered a call (%v)", err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := c.Thaw(); err != nil {
		t.Fatal(err)
	}
	if err := <-answered; err != nil || total != 5 {
		t.Fatalf("after SIGCONT, add 3: total %d, %v; want 5", total, err)
	}
	var reached *proc.Reached
	if _, err := pause.Call(ctx, c, proc.None{}); !errors.As(err, &reached) || reached.Report.At != failpoint.AfterClaim {
		t.Fatalf("a call that reaches a failpoint returned %v, want Reached at %s", err, failpoint.AfterClaim)
	}
	if err := c.GoOn(time.Unix(0, 0).UTC()); err != nil {
		t.Fatal(err)
	}
	if total, err = pause.Result(ctx, c); err != nil || total != 50 {
		t.Fatalf("after the failpoint, pause: total %d, %v; want 50", total, err)
	}
	r, err := c.Finish(ctx)
	if err != nil || r.Decode(&total) != nil || total != 50 {
		t.Fatalf("finish: %+v (%d), %v; want done with 50", r, total, err)
	}
	if err := c.Wait(); err != nil {
		t.Fatal(err)
	}

	u := startCounter(t)
	if _, err := subtract.Call(ctx, u, 1); err == nil || !strings.Contains(err.Error(), `no operation "subtract"`) {
		t.Errorf("a call of an unknown operation: %v, want the role to fail naming it", err)
	}
}

// TestOperationHandledTwiceFailsTheRole: a role that hands Answer two
// handlers of one operation fails as it starts answering, naming it.
func TestOperationHandledTwiceFailsTheRole(t *testing.T) {
	t.Parallel()
	c := startAnswering(t, "twice")
	if _, err := add.Call(context.Background(), c, 1); err == nil || !strings.Contains(err.Error(), `handles operation "add" twice`) {
		t.Errorf("a call to a role that handles add twice: %v, want the role to fail naming add", err)
	}
}

// TestGoOnCarriesTheLabsClock: a child let go on at a failpoint gets the
// time the parent's go-on carried, the lab's clock after its hold there,
// to the nanosecond.
func TestGoOnCarriesTheLabsClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := startCounter(t)
	held := time.Date(2026, 1, 15, 9, 1, 10, int(123*time.Millisecond), time.UTC)
	var reached *proc.Reached
	if _, err := clock.Call(ctx, c, proc.None{}); !errors.As(err, &reached) || reached.Report.At != failpoint.AfterClaim {
		t.Fatalf("clock: %v, want the child at %s", err, failpoint.AfterClaim)
	}
	if err := c.GoOn(held); err != nil {
		t.Fatal(err)
	}
	if got, err := clock.Result(ctx, c); err != nil || !got.Equal(held) {
		t.Fatalf("after the go-on the child's clock is %v (%v), want the lab's %v", got, err, held)
	}
	if _, err := c.Finish(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(); err != nil {
		t.Fatal(err)
	}
}

// processState is the state letter of process pid in /proc/PID/stat, or
// "" where /proc cannot be read (not Linux).
func processState(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	i := strings.LastIndexByte(string(b), ')')
	return strings.Fields(string(b[i+1:]))[0]
}

// TestFrozenChildFailsACallWithinItsTimeout: a call to a child that never
// answers (frozen by SIGSTOP) fails once the child's timeout passes, not
// after [proc.DefaultTimeout]: the error names the child and the
// timeout, and the child is killed.
func TestFrozenChildFailsACallWithinItsTimeout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, err := proc.Start(ctx, proc.Spec{Role: "counter", Target: engines[0].target(t), Work: 1, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	if _, err := add.Call(ctx, c, 2); err != nil {
		t.Fatal(err)
	}
	if err := c.Freeze(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = add.Call(ctx, c, 3)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the call failed after %s, want about the 1s timeout", took)
	}
	if err == nil || !strings.Contains(err.Error(), "worker counter (pid ") || !strings.Contains(err.Error(), "said nothing for 1s") ||
		!strings.Contains(err.Error(), "signal: killed") {
		t.Errorf("call to a frozen child: %v, want an error naming it, its 1s of silence and its SIGKILL", err)
	}
}
