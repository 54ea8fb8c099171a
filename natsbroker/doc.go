// Package natsbroker is a real broker beside the lab's (issue 31): a
// [store.Broker] on NATS JetStream, the server embedded in the process
// ([Start], file storage in a folder of the run's temporary folder,
// 127.0.0.1 on a free port, no logs) or reached at nats://HOST:PORT
// ([Connect], [Dial]). The lessons drop it in through the broker seam
// (cast.Pipeline.NewBroker returning one [Broker] for every instance).
//
// # JetStream's own mechanisms
//
//   - Offers go to one stream per run, OUTBOXLAB_<RunID> (subject
//     outboxlab.<RunID>.events, file storage). A send carries Nats-Msg-Id =
//     the event id and the stream's duplicate window is the lesson's
//     window: JetStream's PubAck says Duplicate (Offer.Dropped) and gives
//     the stream sequence. A window of 0 sends no Nats-Msg-Id.
//   - Each consumer name is a durable pull consumer from the stream's
//     start, with explicit acks, AckWait the visibility timeout and
//     MaxDeliver the maximum deliveries ([Config]). DeliverNext is a
//     FetchNoWait of one message; the receipt is the NumDelivered of its
//     metadata. JetStream keeps two instances of a consumer from ever
//     receiving the same delivery.
//   - Ack is a double ack on the very message of the delivery named; its
//     outcome is JetStream's ack metric (SampleFrequency 100%), sent only
//     for an ack that removed a pending message.
//   - JetStream redelivers by itself after AckWait and gives up after
//     MaxDeliver with its advisory
//     $JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.<stream>.<consumer>; the
//     adapter copies the message into the dead-letter stream
//     OUTBOXLAB_<RunID>_DLQ, purges it by retention on the scenario clock,
//     and replays it as an offer under the duplicate window.
//
// The record methods (Offers, Deliveries, DeadLetters, CountOffers,
// DeliveryOf) read the adapter's ledger of those answers, with scenario
// times in [clock.Layout] as the lab's broker stores them; [Broker.Answers]
// gives the answers themselves (PubAck sequences and duplicate flags,
// delivery counts, ack outcomes and replies, advisories) and the real
// durations used ([Timings]).
//
// # Timing
//
// The lessons run on a scenario clock; JetStream's duplicate window and
// ack wait are wall-clock. [Timing] maps a scenario second to 10 ms of
// real time (a 2-minute window runs as 1.2 s, a 30-second visibility as
// 300 ms), makes every operation wait until the real clock reaches its
// scenario instant's image, and compresses a step longer than twice the
// longest such duration (three days for a replay) to a fixed real step,
// which keeps every comparison against the window and the ack wait on the
// same side ([Timing] says why). An operation that ran late is made up
// for: before the next one the broker waits until every window or ack
// wait the scenario says has run out has run out on the real clock too,
// so those outcomes hold on a busy machine. The other way round (a real
// duration run out while the scenario's has not) is noted in
// [Answers.Notes]; keep about 100 ms real from a boundary (10 scenario
// seconds at the default scale).
//
// # What differs from the lab's broker (measured, see the tests)
//
//   - A late ack of an earlier delivery takes: after redelivery 2 an ack of
//     delivery 1 acknowledges the message (JetStream matches acks by
//     stream sequence, not delivery count), and the current ack then finds
//     nothing pending (Rows 0). The lab's broker refuses the late ack.
//   - The server answers every double ack with the same empty reply, taken
//     or not; only the ack metric tells.
//   - Redelivery needs no RedeliverUnacked call: a delivery whose ack wait
//     ran out comes back on the next fetch. RedeliverUnacked reports it
//     (Ready, from the ledger's real clock: JetStream exposes no per-message
//     ack-wait state) and the dead letters (DeadLettered, from the
//     advisories). An ack after the ack wait ran out but before the
//     redelivery takes.
//   - The max-deliveries advisory comes from JetStream's ack-wait timer only
//     for MaxDeliver 1; for MaxDeliver 2 (and, by its source, more) it
//     comes only when a pull request
//     next reaches the consumer, so RedeliverUnacked pulls once when one is
//     owed, and holds the message that pull may bring for the next
//     DeliverNext.
//   - JetStream's duplicate window cannot be 0 (0 is its 2-minute default)
//     nor under 100 ms (refused): a window of 0 sends no Nats-Msg-Id, so an
//     offer sent without a window is no anchor for a later one with a
//     window, as it is in the lab; a window shorter than 100 ms real runs
//     as 100 ms. JetStream forgets a message id on a timer (nats-server's
//     purge timer fires at least 50 ms apart, read in its source), so a
//     resend just past the window may still be dropped.
//   - The visibility timeout and the maximum deliveries must be known when a
//     consumer is first used ([Config]); the lab's broker takes them on
//     each RedeliverUnacked.
//   - A server restarted on its store folder rebuilds its duplicate records
//     from the stored messages: a resend inside the window after the
//     restart is still dropped.
//   - With the server down, calls fail with [ErrUnavailable]: at once when
//     the connection has seen the server go (it buffers nothing while
//     reconnecting), else after the request timeout (measured both ways in
//     the outage test). The real time an outage costs runs JetStream's
//     window and ack waits on while the scenario clock stands still.
package natsbroker
