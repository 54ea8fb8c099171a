package lesson

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/outboxlab/outboxlab/natsbroker"
)

// RealBroker is the real broker a run's lesson uses in place of the
// lab's, when [Options.Broker] names one: an embedded NATS JetStream whose
// file storage is in the run's folder, or the server a nats:// URL names.
// It has its own streams (named for the run's folder), removed at stop
// from a shared server; cfg is the lesson's window, visibility and
// deliveries. Without a broker named it returns nil and a stop that does
// nothing.
func (e *Env) RealBroker(ctx context.Context, cfg natsbroker.Config) (b *natsbroker.Broker, where string, stop func(), err error) {
	kind := e.Options.Broker
	if kind == "" || kind == "lab" {
		return nil, "", func() {}, nil
	}
	cfg.RunID = strings.NewReplacer(".", "_", "/", "_").Replace(filepath.Base(e.Dir))
	if kind == "nats" {
		srv, err := natsbroker.Start(filepath.Join(e.Dir, "jetstream"))
		if err != nil {
			return nil, "", nil, fmt.Errorf("start the embedded NATS server: %w", err)
		}
		b, err := natsbroker.Dial(ctx, srv.URL(), cfg)
		if err != nil {
			srv.Shutdown()
			return nil, "", nil, err
		}
		return b, "an embedded NATS JetStream server (nats-server " + natsbroker.ServerVersion + ", file storage in the run's folder)",
			func() { b.Close(); srv.Shutdown() }, nil
	}
	b, err = natsbroker.Dial(ctx, kind, cfg)
	if err != nil {
		return nil, "", nil, fmt.Errorf("--broker %s: %w", kind, err)
	}
	return b, "the NATS JetStream server at " + kind + " (streams " + b.StreamName() + " and " + b.DeadLetterStreamName() + ", removed after the run)",
		func() { _ = b.Remove(context.WithoutCancel(ctx)); b.Close() }, nil
}

// checkBroker refuses a real broker for a lesson that cannot take one, or
// with --processes, whose child instances cannot reach it yet.
func checkBroker(sc *Scenario, opts Options) error {
	switch kind := opts.Broker; {
	case kind == "" || kind == "lab":
		return nil
	case kind != "nats" && !strings.HasPrefix(kind, "nats://"):
		return fmt.Errorf("--broker must be lab, nats or nats://HOST:PORT, not %q", kind)
	case !sc.RealBroker:
		return fmt.Errorf("scenario %s runs on the lab's broker only (--broker nats: session 18)", sc.Name)
	case opts.Processes:
		return fmt.Errorf("--broker %s runs the lesson's instances in the lab's process; --processes cannot reach it yet", kind)
	}
	return nil
}
