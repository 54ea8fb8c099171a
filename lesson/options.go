package lesson

import (
	"strconv"
	"time"

	"github.com/outboxlab/outboxlab/cast"
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
	return cast.DurationText(o.Duration(&defaults).Milliseconds())
}

// BrokerWindowOption is the lab broker's deduplication window, which
// session 20 teaches and session 18's broker-dedup-window variant opens.
var BrokerWindowOption = Option{Flag: "broker-window", Usage: "the broker's deduplication window, a `DURATION`",
	Duration: func(o *Options) *time.Duration { return &o.BrokerWindow }}
