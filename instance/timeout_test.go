package instance

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outboxlab/outboxlab/proc"
	"github.com/outboxlab/outboxlab/proc/proctest"
	"github.com/outboxlab/outboxlab/store"
)

// TestMain is also the instances' child process: started as `<test
// binary> worker --role ROLE`, it serves the role as the program's hidden
// worker subcommand does.
func TestMain(m *testing.M) { proctest.Main(m, Serve) }

// TestConfigTimeoutBoundsAChildsCall: an opener's Timeout reaches each
// child it starts, so a child instance that never answers (a relay frozen
// by SIGSTOP) fails the lab's call in about that time, not after
// [proc.DefaultTimeout]; the context's deadline, far shorter than the
// default, makes the test fail instead of wait when it does not.
func TestConfigTimeoutBoundsAChildsCall(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	o := New(Config{Processes: true, Ledger: &store.Ledger{}, Timeout: time.Second,
		Target: func(_ context.Context, path string) (proc.Target, error) {
			return proc.Target{Engine: store.SQLite, Path: path}, nil
		}})
	defer o.Stop()
	r, err := o.Relay(ctx, filepath.Join(t.TempDir(), "relay.db"), "Worker-A", store.RelayLesson)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Stall("t=1", "t=2"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, _, err = r.EventByID(ctx, "EVENT-1")
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the call to a frozen relay returned after %s, want about the opener's 1s", took)
	}
	if err == nil || !strings.Contains(err.Error(), "said nothing for 1s") {
		t.Errorf("a call to a frozen relay: %v, want the child's 1s of silence", err)
	}
}
