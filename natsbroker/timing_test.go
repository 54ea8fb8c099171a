package natsbroker

import (
	"fmt"
	"testing"
	"time"
)

// TestTimingReal: scenario durations map linearly to real ones.
func TestTimingReal(t *testing.T) {
	tests := []struct {
		timing Timing
		d      time.Duration
		want   time.Duration
	}{
		{DefaultTiming, 2 * time.Minute, 1200 * time.Millisecond},
		{DefaultTiming, 30 * time.Second, 300 * time.Millisecond},
		{DefaultTiming, 0, 0},
		{DefaultTiming, -time.Second, 0},
		{testTiming, 20 * time.Second, 100 * time.Millisecond},
	}
	for _, tt := range tests {
		if got := tt.timing.Real(tt.d); got != tt.want {
			t.Errorf("%+v.Real(%s) = %s, want %s", tt.timing, tt.d, got, tt.want)
		}
	}
}

// TestTimingCompressesLongSteps follows the scenario clock's mapping
// through a timetable: steps within the threshold map linearly, a longer
// one to the threshold's real duration plus Jump, an instant seen again
// maps where it did, an earlier one does not wait.
func TestTimingCompressesLongSteps(t *testing.T) {
	timing := DefaultTiming.Cover(2 * time.Minute) // threshold 4 min: 2.4 s real
	c := newScenarioClock(timing)
	origin := c.target(at(0))
	tests := []struct {
		now  time.Duration
		want time.Duration // real offset from the first instant; -1: no wait
	}{
		{now: 30 * second, want: 300 * time.Millisecond},
		{now: 30 * second, want: 300 * time.Millisecond},
		{now: 4*minute + 30*second, want: 2700 * time.Millisecond}, // a step of exactly the threshold: linear
		{now: 3 * day, want: 2700*time.Millisecond + 2400*time.Millisecond + 100*time.Millisecond},
		{now: 3*day + 20*second, want: 5200*time.Millisecond + 200*time.Millisecond},
		{now: 2 * day, want: -1},
	}
	for _, tt := range tests {
		got := c.target(at(tt.now))
		if tt.want < 0 {
			if !got.IsZero() {
				t.Errorf("target(%s) = %s after the origin, want no wait", tt.now, got.Sub(origin))
			}
			continue
		}
		if got.Sub(origin) != tt.want {
			t.Errorf("target(%s) = %s after the origin, want %s", tt.now, got.Sub(origin), tt.want)
		}
	}
	if c.compressedJumps() != 1 {
		t.Errorf("compressed jumps %d, want 1", c.compressedJumps())
	}
}

// TestTimingKeepsWindowComparisons checks the doc comment's argument on
// a few timetables: an interval is longer than the window in real time
// exactly when it is in scenario time, whether or not a step in it was
// compressed.
func TestTimingKeepsWindowComparisons(t *testing.T) {
	window := 2 * time.Minute
	timing := DefaultTiming.Cover(window)
	tests := []struct {
		name  string
		steps []time.Duration // successive scenario steps from the interval's start
	}{
		{"Within", []time.Duration{30 * second, 30 * second}},
		{"JustOver", []time.Duration{100 * second, 30 * second}},
		{"OneLongStep", []time.Duration{3 * day}},
		{"ShortThenLong", []time.Duration{time.Second, 5 * time.Minute}},
	}
	for _, tt := range tests {
		c := newScenarioClock(timing)
		origin := c.target(at(0))
		var scenario time.Duration
		var real time.Time
		for _, s := range tt.steps {
			scenario += s
			real = c.target(at(scenario))
		}
		if scenarioOver, realOver := scenario >= window, real.Sub(origin) >= timing.Real(window); scenarioOver != realOver {
			t.Errorf("%s: over the window in scenario time %v, in real time %v (%s real)", tt.name, scenarioOver, realOver, real.Sub(origin))
		}
	}
}

// ExampleTiming: what the default timing makes of a lesson's 2-minute
// window, 30-second visibility timeout and a three-day jump.
func ExampleTiming() {
	timing := DefaultTiming.Cover(2 * time.Minute).Cover(30 * time.Second)
	fmt.Println("window:", timing.Real(2*time.Minute))
	fmt.Println("ack wait:", timing.Real(30*time.Second))
	fmt.Println("threshold:", timing.Threshold, "as", timing.Real(timing.Threshold))
	fmt.Println("three days:", timing.step(72*time.Hour))
	// Output:
	// window: 1.2s
	// ack wait: 300ms
	// threshold: 4m0s as 2.4s
	// three days: 2.5s
}

// TestRedacted: a report names a NATS server without its user's password.
func TestRedacted(t *testing.T) {
	for in, want := range map[string]string{
		"nats://alice:secret@host:4222": "nats://alice@host:4222",
		"nats://host:4222":              "nats://host:4222",
	} {
		if got := Redacted(in); got != want {
			t.Errorf("Redacted(%q) = %q, want %q", in, got, want)
		}
	}
}
