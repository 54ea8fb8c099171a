package lab

import "sync"

// Timeline collects events from concurrent workers in the order they were
// recorded. It is observation only: workers never read it to coordinate.
type Timeline struct {
	mu     sync.Mutex
	events []Event
}

// Add appends an event and returns its sequence number (from 1).
func (t *Timeline) Add(at, actor, action, detail string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	seq := len(t.events) + 1
	t.events = append(t.events, Event{Seq: seq, At: at, Actor: actor, Action: action, Detail: detail})
	return seq
}

// Events returns a copy of the events recorded so far.
func (t *Timeline) Events() []Event {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Event(nil), t.events...)
}
