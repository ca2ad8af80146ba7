package lab

// Figures of a list of values, as every kind's record and section takes
// them.

import (
	"math"
	"slices"
	"time"
)

// Median is the middle value (the mean of the two middle ones for an even
// count), 0 for none; the reports' medians are this one.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Millis is d in milliseconds.
func Millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Quantile is the nearest-rank q quantile of v (0 for none).
func Quantile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(v))
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(i, 0)]
}
