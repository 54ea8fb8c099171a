package main

import (
	"regexp"
	"strconv"
	"time"
)

var daysPart = regexp.MustCompile(`(\d+(?:\.\d+)?)d`)

// parseDuration reads a Go duration that may also use days ("3d", "1d12h").
// Zero and negative values are refused: every period the lab takes is a
// length of time that must pass.
func parseDuration(flag, s string) (time.Duration, error) {
	var bad error
	expanded := daysPart.ReplaceAllStringFunc(s, func(m string) string {
		days, err := strconv.ParseFloat(m[:len(m)-1], 64)
		if err != nil {
			bad = err
		}
		return strconv.FormatFloat(days*24, 'f', -1, 64) + "h"
	})
	d, err := time.ParseDuration(expanded)
	if bad != nil || err != nil {
		return 0, usagef("--%s %q is not a duration (examples: 30s, 2m, 24h, 7d, 1d12h)", flag, s)
	}
	if d <= 0 {
		return 0, usagef("--%s must be positive, not %q", flag, s)
	}
	return d, nil
}
