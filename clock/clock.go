// Package clock gives the lab its notion of time: a real clock for the
// bench and a manual scenario clock that lease logic reads instead of time.Now.
package clock

import (
	"sync"
	"time"
)

// Layout is how the lab stores and prints instants: UTC text with
// milliseconds, so a student can read and compare them in the sqlite3 shell.
const Layout = "2006-01-02T15:04:05.000Z"

// Format renders t in [Layout] after converting it to UTC.
func Format(t time.Time) string { return t.UTC().Format(Layout) }

// Parse reads an instant written by [Format].
func Parse(s string) (time.Time, error) { return time.Parse(Layout, s) }

// Clock tells the current time. Every lease decision in the lab asks a Clock.
type Clock interface {
	Now() time.Time
}

// Real is the wall clock, in UTC.
type Real struct{}

// Now returns the current wall-clock time in UTC.
func (Real) Now() time.Time { return time.Now().UTC() }

// Manual is a scenario clock that only moves when told to. It is safe for
// concurrent use, so workers on separate goroutines can read it while the
// scenario script advances it.
type Manual struct {
	mu  sync.Mutex
	now time.Time
}

// NewManual returns a manual clock stopped at start.
func NewManual(start time.Time) *Manual { return &Manual{now: start.UTC()} }

// Now returns the clock's current instant.
func (m *Manual) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

// Set moves the clock to t. Moving it backwards is allowed; a scenario that
// does so is describing a clock skew on purpose.
func (m *Manual) Set(t time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.now = t.UTC()
}

// Advance moves the clock forward by d and returns the new instant.
func (m *Manual) Advance(d time.Duration) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.now = m.now.Add(d)
	return m.now
}
