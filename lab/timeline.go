package lab

import (
	"fmt"
	"sync"
)

// Timeline collects events from concurrent workers in the order they were
// recorded. It is observation only: workers never read it to coordinate.
type Timeline struct {
	mu     sync.Mutex
	events []Event
}

// Add appends e, numbered, and returns its sequence number (from 1). An
// event without a kind is a programming error: it panics, and every
// scenario's test run finds it.
func (t *Timeline) Add(e Event) int {
	if e.Kind == "" {
		panic(fmt.Sprintf("lab: timeline event without a kind: %s %q %q", e.Actor, e.Action, e.Detail))
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	e.Seq = len(t.events) + 1
	t.events = append(t.events, e)
	return e.Seq
}

// Note appends an event of kind KindNote: a start, a phase, a step of the
// scenario that the pictures do not mark.
func (t *Timeline) Note(at, actor, action, detail string) int {
	return t.Add(Event{At: at, Actor: actor, Action: action, Detail: detail, Kind: KindNote})
}

// Events returns a copy of the events recorded so far.
func (t *Timeline) Events() []Event {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Event(nil), t.events...)
}
