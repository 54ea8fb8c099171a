// Package natsbroker is a real broker beside the lab's: a [store.Broker]
// on NATS JetStream (issue 31), embedded in the process ([Start]) or
// reached at nats://HOST:PORT ([Dial]).
package natsbroker
