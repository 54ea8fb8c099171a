package cast

import (
	"time"

	"github.com/outboxlab/outboxlab/clock"
)

// This file prints the logical ticks of sessions 16, 17 and 23 as clock
// time. Their outbox_events rows store integer ticks, one millisecond each:
// sessions 16 and 17 count from [LessonStart] (09:00:00.000Z), session 23
// from [ClockStart] (10:00:00.000Z). A student reads the clock time; the
// stored tick stands beside it.

// TickOrigin is the instant a lesson's tick 0 stands for.
type TickOrigin time.Time

// LessonTicks is the tick origin of sessions 16 and 17.
var LessonTicks = TickOrigin(LessonStart)

// DatabaseTicks is the tick origin of session 23's database clock.
var DatabaseTicks = TickOrigin(ClockStart)

// ClockStart is t=0 of session 23's database clock, 10:00:00.000Z.
var ClockStart = LessonStart.Add(time.Hour)

// Instant is tick t on o's clock.
func (o TickOrigin) Instant(t int64) time.Time { return time.Time(o).Add(TickSpan(t)) }

// At prints tick t in [clock.Layout], as a timeline's lab.Event At (and
// Until) holds it, so that the lanes view reads it as clock time.
func (o TickOrigin) At(t int64) string { return clock.Format(o.Instant(t)) }

// Time prints tick t as its clock time with the stored tick beside it:
// "09:00:00.130 (t=130)".
func (o TickOrigin) Time(t int64) string { return o.Clock(t) + " (" + clock.Logical(t) + ")" }

// Clock prints tick t as its clock time alone: "09:00:00.130".
func (o TickOrigin) Clock(t int64) string { return o.Instant(t).UTC().Format("15:04:05.000") }

// Note says what the ticks of a table printed with [TickOrigin.Time] are.
func (o TickOrigin) Note() string {
	return "Times are UTC on " + clock.Format(time.Time(o))[:10] + "; the tick stored in the database (milliseconds since " +
		time.Time(o).UTC().Format("15:04:05.000") + ") stands beside each in brackets."
}
