package session21batch

import (
	"context"
	"testing"
	"time"

	"github.com/outboxlab/outboxlab/instance"
	"github.com/outboxlab/outboxlab/lesson/lessontest"
	"github.com/outboxlab/outboxlab/proc/proctest"
	"github.com/outboxlab/outboxlab/store"
)

// TestClosingAStalledChild: a run that fails while a child is frozen by
// SIGSTOP still closes it at once (continued, then told to finish), not
// after the child's call timeout; the context's deadline, far shorter than
// that timeout, makes the test fail instead of wait.
func TestClosingAStalledChild(t *testing.T) {
	t.Parallel()
	env := lessontest.NewEnv(t, &Lesson)
	env.Instances = instance.New(instance.Config{Processes: true, Open: env.Open, Target: env.Target, Ledger: env.Ledger})
	defer env.Instances.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	setup, err := env.Open(ctx, env.DatabasePath())
	if err != nil {
		t.Fatal(err)
	}
	defer setup.Close()
	if err := setup.Migrate(ctx, store.PaymentsOutbox, store.OutboxLeasing, store.OutboxFencing, store.ClaimsAtScale); err != nil {
		t.Fatal(err)
	}
	p, err := env.Instances.BatchRelay(ctx, env.DatabasePath(), "", bcFirst, bcLesson)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Stall("t=0", "the test's start"); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatalf("closing the frozen child: %v", err)
	}
}

// TestMain is also the lab's child process in these tests: a run with
// Options.Processes starts this test binary as `<binary> worker --role
// ROLE`, and it serves the role as the program's hidden worker
// subcommand does.
func TestMain(m *testing.M) { proctest.Main(m, instance.Serve) }
