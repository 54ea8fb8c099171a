package lab

import (
	"slices"
	"sort"
)

// Median is the middle of xs (the mean of the two middle values for an
// even count), 0 for none. xs is not modified. Lessons and the bench use it
// for measured timings, whose mean one slow outlier would move.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
