package lesson

import (
	"strconv"
	"strings"
	"time"
)

// Option is a field of [Options] that a lesson reads and a user may set
// from the command line: a lesson lists the options it reads
// ([Scenario.Options]), and cmd makes one flag of each, which it refuses
// for a run of no lesson that reads it. Exactly one of Duration and Count
// is set.
type Option struct {
	Flag string // the flag's name, e.g. "inbox-retention"
	// Usage says what it sets, with its value's placeholder in backquotes
	// ("a `DURATION`"), as --help prints it after the names of the
	// lessons that read it.
	Usage string
	// Duration is the field a duration option sets (a `DURATION` such as
	// 90m, 24h or 2d).
	Duration func(o *Options) *time.Duration
	// Count is the field a count option sets, from 1 to Max; Default is
	// what a run takes when it is not set (the field stays 0).
	Count        func(o *Options) *int
	Max, Default int
}

// DefaultText is the option's default as a user would write it: a
// duration of [DefaultOptions] (24h, 7d, 2m, 300ms), or a count.
func (o Option) DefaultText() string {
	if o.Count != nil {
		return strconv.Itoa(o.Default)
	}
	defaults := DefaultOptions()
	return DurationText(*o.Duration(&defaults))
}

// DurationText writes d as a user would give it on the command line:
// two days or more, whole, as "7d", else Go's form without its zero units
// ("24h", not "24h0m0s"; "2m", not "2m0s").
func DurationText(d time.Duration) string {
	const day = 24 * time.Hour
	if d > day && d%day == 0 {
		return strconv.FormatInt(int64(d/day), 10) + "d"
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// BrokerWindowOption is the lab broker's deduplication window, which
// session 20 teaches and session 18's broker-dedup-window variant opens.
var BrokerWindowOption = Option{Flag: "broker-window", Usage: "the broker's deduplication window, a `DURATION`",
	Duration: func(o *Options) *time.Duration { return &o.BrokerWindow }}
