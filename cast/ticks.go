package cast

import (
	"fmt"
	"strings"
	"time"

	"github.com/outboxlab/outboxlab/clock"
)

// This file holds the scenario time of sessions 18 to 20 and of the
// explorer. The relay's outbox_events table (shared with sessions 16 and 17)
// keeps logical int64 ticks. In sessions 18 to 20 a tick is one millisecond
// since LessonStart (2026-01-15T09:00:00.000Z), so durations read naturally
// (a 30 s lease is 30000 ticks) and every tick prints as a clock.Layout
// instant. The broker's and the consumers' tables store that same instant as
// UTC text; the Pipeline hands the store its clock's time.Time for them.

// Tick lengths.
const (
	TickSecond int64 = 1000
	TickMinute       = 60 * TickSecond
	TickHour         = 60 * TickMinute
	TickDay          = 24 * TickHour
)

// TicksOf converts a duration to ticks.
func TicksOf(d time.Duration) int64 { return d.Milliseconds() }

// TickSpan converts ticks to a duration, for the store's broker API.
func TickSpan(t int64) time.Duration { return time.Duration(t) * time.Millisecond }

// TickClock prints tick t as an instant on the scenario clock.
func TickClock(t int64) string { return clock.Format(LessonStart.Add(TickSpan(t))) }

// TickOfClock reads an instant the broker stored (clock text) back as a tick.
func TickOfClock(s string) (int64, error) {
	t, err := clock.Parse(s)
	if err != nil {
		return 0, fmt.Errorf("read stored time %q: %w", s, err)
	}
	return t.Sub(LessonStart).Milliseconds(), nil
}

// WindowText prints a dedup window: "off" when there is none.
func WindowText(t int64) string {
	if t <= 0 {
		return "off"
	}
	return DurationText(t)
}

// DurationText prints a tick count as a duration: whole days of two or
// more as "7d" (the CLI accepts d), the rest as a Go duration without
// trailing zero units ("24h", "2m", "7d1m30s").
func DurationText(t int64) string {
	days, rest := t/TickDay, t%TickDay
	if days < 2 {
		days, rest = 0, t
	}
	s := ""
	if days > 0 {
		s = fmt.Sprintf("%dd", days)
	}
	if rest != 0 || s == "" {
		r := (time.Duration(rest) * time.Millisecond).String()
		if strings.HasSuffix(r, "m0s") {
			r = strings.TrimSuffix(r, "0s")
		}
		if strings.HasSuffix(r, "h0m") {
			r = strings.TrimSuffix(r, "0m")
		}
		s += r
	}
	return s
}
