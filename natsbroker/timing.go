package natsbroker

import (
	"context"
	"sync"
	"time"
)

// Timing maps the lessons' scenario clock onto the real clock JetStream
// runs on. JetStream's duplicate window and a consumer's ack wait are
// wall-clock durations; the lessons speak of a 2-minute window and a
// 30-second visibility timeout, and jump three days ahead for a replay.
//
// Durations map linearly: a scenario duration d runs as d/second × Scale
// of real time ([Timing.Real]), so with the default 10 ms per scenario
// second the lesson's 2-minute window runs as 1.2 s.
//
// Instants map through the calls: the broker sees scenario time pass by
// waiting, before each operation at scenario time now, until the real
// clock reaches now's mapped instant. The mapping is monotone and
// compressed: a step between two successive scenario instants of at most
// Threshold maps linearly, a longer step (three days) maps to
// Real(Threshold) + Jump only. Threshold is at least twice the longest
// duration JetStream compares against (the window and the ack wait, see
// [Timing.Cover]), and that keeps every comparison's outcome:
//
//   - An interval between two operations whose steps are all within the
//     threshold maps linearly, so it is shorter than the window (or the ack
//     wait) in real time exactly when it is in scenario time.
//   - An interval holding a compressed step is longer than Threshold in
//     scenario time, so longer than the window; in real time it is longer
//     than Real(Threshold) + Jump ≥ 2 × the window's real duration, so
//     longer there too, with a margin of a whole window.
//
// The mapping only delays operations, so the real interval between two
// operations can differ from the mapped one by an operation's latency
// (milliseconds, 100 ms and more on a busy machine). The broker makes up
// for a late start: before an operation it also waits until each window
// or ack wait the scenario says has run out has run out on the real clock
// from when JetStream started it (catchup.go). A real duration that ran
// out early cannot be made up; it is noted in [Answers.Notes]. JetStream also drops its duplicate records on a
// timer (nats-server's purge timer fires at least 50 ms apart), so a
// resend just past the window can still be dropped. Keep a boundary well
// clear of that: the tests keep 100 ms real (20 scenario seconds at 5 ms
// a second) from each; 25 ms margins failed under -race on two cores.
//
// A zero Timing is not usable; [DefaultTiming] is, and [Config] fills a
// zero Scale or Jump from it. Scenario time going backwards is not
// expected; an operation at an earlier instant than the last simply does
// not wait.
type Timing struct {
	// Scale is the real duration of one scenario second.
	Scale time.Duration
	// Jump is the real step a scenario step longer than Threshold maps to,
	// beyond Real(Threshold).
	Jump time.Duration
	// Threshold is the longest scenario step mapped linearly; [Timing.Cover]
	// raises it to twice the longest duration JetStream compares against.
	Threshold time.Duration
}

// DefaultTiming runs a scenario second as 10 ms real, and a jump beyond
// the threshold as 100 ms beyond the threshold's real duration.
var DefaultTiming = Timing{Scale: 10 * time.Millisecond, Jump: 100 * time.Millisecond}

// Real is the real duration of the scenario duration d (0 for d ≤ 0).
func (t Timing) Real(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(float64(d) / float64(time.Second) * float64(t.Scale))
}

// Cover returns t with its threshold raised, if needed, to twice d: the
// compressed jumps then keep comparisons against d (a window or an ack
// wait) on the right side.
func (t Timing) Cover(d time.Duration) Timing {
	if d > 0 && t.Threshold < 2*d {
		t.Threshold = 2 * d
	}
	return t
}

// step is the real duration one scenario step of d maps to.
func (t Timing) step(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	if d <= t.Threshold {
		return t.Real(d)
	}
	return t.Real(t.Threshold) + t.Jump
}

// scenarioClock holds the mapping's state: the first scenario instant
// seen and when (real), the last scenario instant seen and its mapped real
// offset. Safe for concurrent use.
type scenarioClock struct {
	mu         sync.Mutex
	timing     Timing
	started    bool
	realOrigin time.Time
	last       time.Time
	mapped     time.Duration // real offset of last from realOrigin
	jumps      int           // scenario steps compressed so far
}

func newScenarioClock(t Timing) *scenarioClock { return &scenarioClock{timing: t} }

// cover raises the threshold to twice d (see [Timing.Cover]).
func (c *scenarioClock) cover(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timing = c.timing.Cover(d)
}

// current is the timing in force.
func (c *scenarioClock) current() Timing {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.timing
}

// target maps the scenario instant now to its real instant, advancing the
// mapping when now is later than any instant seen before.
func (c *scenarioClock) target(now time.Time) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.started {
		c.started, c.realOrigin, c.last = true, time.Now(), now
		return c.realOrigin
	}
	if now.After(c.last) {
		step := now.Sub(c.last)
		if step > c.timing.Threshold {
			c.jumps++
		}
		c.mapped += c.timing.step(step)
		c.last = now
		return c.realOrigin.Add(c.mapped)
	}
	if now.Equal(c.last) {
		return c.realOrigin.Add(c.mapped)
	}
	// An earlier instant than the last: no wait.
	return time.Time{}
}

// wait blocks until the real clock reaches now's mapped instant, or ctx
// ends.
func (c *scenarioClock) wait(ctx context.Context, now time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return sleepUntil(ctx, c.target(now))
}

// compressedJumps is how many scenario steps were compressed so far.
func (c *scenarioClock) compressedJumps() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.jumps
}
