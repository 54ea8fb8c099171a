package natsbroker

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/outboxlab/outboxlab/store"
)

// ErrUnavailable means the broker could not be reached: the server is
// down, the connection is reconnecting or closed, or JetStream did not
// answer within the request timeout. Errors wrap it; test with errors.Is.
// It is the broker seam's outage, [store.ErrBrokerUnavailable], which the
// relays retry.
var ErrUnavailable = store.ErrBrokerUnavailable

// outage wraps err as [ErrUnavailable] when it, or the connection's state,
// says the broker could not be reached; other errors pass through. what
// names the operation.
func (b *Broker) outage(what string, err error) error {
	if err == nil {
		return nil
	}
	if !b.nc.IsConnected() || isOutage(err) {
		return fmt.Errorf("natsbroker: %s: %w: %w", what, ErrUnavailable, err)
	}
	return fmt.Errorf("natsbroker: %s: %w", what, err)
}

// isOutage says whether err is one a down or unreachable server gives.
func isOutage(err error) bool {
	for _, target := range []error{
		context.DeadlineExceeded,
		nats.ErrTimeout,
		nats.ErrNoResponders,
		nats.ErrConnectionClosed,
		nats.ErrConnectionReconnecting,
		nats.ErrReconnectBufExceeded,
		nats.ErrDisconnected,
		jetstream.ErrNoStreamResponse,
		jetstream.ErrJetStreamNotEnabled,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}
