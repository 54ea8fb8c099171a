package main

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// leadingDays matches a duration that starts with a number of days: "7d",
// "0.5d", "1d12h". Days may only lead; the rest is a Go duration.
var leadingDays = regexp.MustCompile(`^(\d+(?:\.\d+)?)d(.*)$`)

// parseDuration reads a Go duration that may start with days ("3d",
// "1d12h"). Values under a millisecond are refused: every period the lab
// takes is a length of time that must pass, on a millisecond clock.
func parseDuration(flag, s string) (time.Duration, error) {
	bad := usagef("--%s %q is not a duration (examples: 30s, 2m, 24h, 7d, 1d12h)", flag, s)
	var d time.Duration
	if m := leadingDays.FindStringSubmatch(s); m != nil {
		days, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			return 0, bad
		}
		if days*float64(24*time.Hour) >= math.MaxInt64 {
			return 0, tooLong(flag, s)
		}
		d = time.Duration(days * float64(24*time.Hour))
		if m[2] != "" {
			rest, err := time.ParseDuration(m[2])
			if err != nil || strings.HasPrefix(m[2], "-") || strings.HasPrefix(m[2], "+") {
				return 0, bad
			}
			if d > math.MaxInt64-rest {
				return 0, tooLong(flag, s)
			}
			d += rest
		}
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			if goDuration.MatchString(s) {
				return 0, tooLong(flag, s) // well formed, so it overflowed
			}
			return 0, bad
		}
	}
	if d < time.Millisecond {
		return 0, usagef("--%s must be at least 1ms, not %q", flag, s)
	}
	return d, nil
}

// goDuration matches a well-formed positive Go duration, so a parse failure
// of one is an overflow.
var goDuration = regexp.MustCompile(`^\+?(\d+(\.\d*)?(ns|us|µs|ms|s|m|h))+$`)

func tooLong(flag, s string) error {
	return usagef("--%s %q is too long (at most about 290 years, 106751d)", flag, s)
}

// parseCount reads a positive whole number in decimal only: "0x10" or
// "010" are refused rather than read as 16 or 8.
func parseCount(flag, s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || !decimal.MatchString(s) {
		return 0, usagef("invalid value %q for --%s: give a whole number in decimal, such as 10", s, flag)
	}
	return n, nil
}

var decimal = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)
