package instance

import (
	"context"
	"io"

	"github.com/outboxlab/outboxlab/proc"
)

// roles are the child processes an [Opener] starts, by role: each the
// child's side of one kind of instance. It is the one table the hidden
// `worker --role ROLE` subcommand serves.
var roles = map[string]proc.Role{
	checkoutRole:         serveCheckout,
	outboxRole:           serveOutbox,
	relayRole:            serveRelay,
	pipelineRelayRole:    servePipelineRelay,
	pipelineConsumerRole: servePipelineConsumer,
	scaleWorkerRole:      serveScaleWorker,
	batchRelayRole:       serveBatchRelay,
	heartbeatRelayRole:   serveHeartbeatRelay,
	clockRelayRole:       serveClockRelay,
}

// Serve is the child's side of an instance: it plays role, reading its
// work from in and writing its reports to out (see [proc.Serve]). The
// program's hidden `worker` subcommand calls it.
func Serve(ctx context.Context, role string, in io.Reader, out io.Writer) error {
	return proc.Serve(ctx, role, in, out, roles)
}
