package bench

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxlab/outboxlab/internal/pgtest"
	"github.com/outboxlab/outboxlab/internal/progress"
)

// closeOnWrite is a progress writer that runs do once, when a line
// containing trigger is written.
type closeOnWrite struct {
	trigger string
	do      func()
	once    sync.Once
}

func (w *closeOnWrite) Write(b []byte) (int, error) {
	if bytes.Contains(b, []byte(w.trigger)) {
		w.once.Do(w.do)
	}
	return len(b), nil
}

// TestRiverCellStopsClientWhenWatchFails: the server watch's connection
// closes once the drain begins, so watch.end fails after River's client
// started. riverCell must stop the client and return the error. Before
// the fix it returned without stopping River: 26 of River's goroutines
// kept running (fetching, electing, listening on a connection it took
// out of the pool, which the pool's Close does not close: one
// outboxlab-river session stayed on the server), and a pool.Close that
// meets a River query in flight waits for it.
func TestRiverCellStopsClientWhenWatchFails(t *testing.T) {
	const deadline = 30 * time.Second // River's stop is bounded at 10 s
	cfg := DefaultConfig()
	cfg.Database = pgtest.URL(t)
	ctx := context.Background()
	watch, err := newServerWatch(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer watch.close()
	p := progress.New(&closeOnWrite{trigger: ": draining", do: func() { watch.db.Close() }}, "bench")
	done := make(chan error, 1)
	go func() {
		_, err := riverCell(ctx, cfg, 50, 2, p, watch)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "database is closed") {
			t.Fatalf("riverCell = %v, want the server watch's error", err)
		}
	case <-time.After(deadline):
		t.Fatalf("riverCell still running after %v: River's client was not stopped and the pool's Close waits for its connections", deadline)
	}
	// A stopped client has no goroutine left; one never stopped keeps
	// fetching, electing and listening (on a connection it took out of
	// the pool, which the pool's Close does not close).
	var left int
	for range 100 {
		if left = riverGoroutines(); left == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if left > 0 {
		t.Fatalf("%d goroutines of River's client still run after riverCell returned: the client was not stopped", left)
	}
}

// riverGoroutines counts the goroutines running River's code.
func riverGoroutines() int {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if bytes.Contains(g, []byte("github.com/riverqueue/river")) {
			n++
		}
	}
	return n
}
