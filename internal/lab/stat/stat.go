// Package stat is a faithful Go re-implementation of ministat(1), the
// benchmark statistics tool of FreeBSD, as packaged by Debian (ministat
// 20150715): the same numbers, the same plot and the same text, byte for byte.
//
// The contract:
//
//   - Summarize computes N, Min, Max, Median, Avg and Stddev exactly as
//     ministat does: sums are accumulated in input order, the median of an
//     even-sized set is the upper middle value (points[n/2], not the mean of
//     the two middle values), and the variance divides by n-1.
//   - Compare is ministat's Student's t test of two sets, with ministat's own
//     t table (so its rounding of t, and its use of the infinity row above
//     100 degrees of freedom) at the levels in Levels.
//   - Render writes ministat's whole report for up to MaxSets sets, including
//     its quirks (see plot.go), so `trestle stat` and ministat agree.
//   - Read parses ministat's input format: one number per line, a column
//     chosen among strtok(3)-style delimiters, '#' comments; unlike ministat
//     its errors name the file and line as file:line.
//
// Every set must hold at least MinPoints values, as ministat demands.
package stat

import (
	"errors"
	"fmt"
	"math"
)

const (
	// MinPoints is the fewest values ministat accepts in a set.
	MinPoints = 3
	// MaxSets is how many sets one report can hold: ministat has a plot
	// symbol for seven.
	MaxSets = 7
	// DefaultLevel is the confidence level, in percent, when none is given.
	DefaultLevel = 95.0
)

var (
	// ErrTooFewPoints is returned for a set with fewer than MinPoints values.
	ErrTooFewPoints = errors.New("need at least 3 data points")
	// ErrTooManySets is returned for a report of more than MaxSets sets.
	ErrTooManySets = errors.New("too many data sets (ministat takes at most 7)")
	// ErrLevel is returned for a confidence level not in Levels.
	ErrLevel = errors.New("no support for confidence level (use 80, 90, 95, 98, 99 or 99.5)")
	// ErrInvalidData is returned by Read for a field that is not a number.
	ErrInvalidData = errors.New("invalid data")
)

// Set is one data set: a name for the legend and its values in input order.
type Set struct {
	Name   string
	Values []float64
}

// Summary is the line ministat prints for a set. Variance is the value that
// Stddev is the square root of; Compare needs it exactly as computed here.
type Summary struct {
	N                                       int
	Min, Max, Median, Avg, Stddev, Variance float64
}

// dataset mirrors ministat's struct dataset: the sums in input order and the
// points as its qsort leaves them.
type dataset struct {
	name    string
	points  []float64
	sy, syy float64
}

func newDataset(s Set) (*dataset, error) {
	if len(s.Values) < MinPoints {
		return nil, fmt.Errorf("data set %s has %d: %w", s.Name, len(s.Values), ErrTooFewPoints)
	}
	d := &dataset{name: s.Name, points: append([]float64(nil), s.Values...)}
	for _, a := range s.Values {
		d.sy += a
		// The conversion keeps a*a rounded on its own: a fused multiply-add
		// (which Go may emit on arm64) would change the last bits.
		d.syy += float64(a * a)
	}
	msort(d.points)
	return d, nil
}

func (d *dataset) n() int          { return len(d.points) }
func (d *dataset) min() float64    { return d.points[0] }
func (d *dataset) max() float64    { return d.points[len(d.points)-1] }
func (d *dataset) avg() float64    { return d.sy / float64(d.n()) }
func (d *dataset) median() float64 { return d.points[d.n()/2] }
func (d *dataset) stddev() float64 { return math.Sqrt(d.variance()) }
func (d *dataset) variance() float64 {
	// The one-pass formula ministat uses: for a constant set it can come
	// out a hair below zero, and ministat then prints a stddev of -nan.
	n := float64(d.n())
	return (d.syy - d.sy*d.sy/n) / (n - 1.0)
}

func (d *dataset) summary() Summary {
	return Summary{N: d.n(), Min: d.min(), Max: d.max(), Median: d.median(), Avg: d.avg(), Stddev: d.stddev(), Variance: d.variance()}
}

// Summarize returns ministat's summary of s.
func Summarize(s Set) (Summary, error) {
	d, err := newDataset(s)
	if err != nil {
		return Summary{}, err
	}
	return d.summary(), nil
}

// msort sorts p as glibc's qsort does for ministat (glibc 2.36 qsort is a
// top-down merge sort whenever its buffer fits in memory). It matters only
// where ministat's comparison calls values equal that are not the same:
// -0 and 0 keep their input order, and NaN lands where glibc puts it.
func msort(p []float64) {
	tmp := make([]float64, len(p))
	var sortRange func(b []float64)
	sortRange = func(b []float64) {
		if len(b) <= 1 {
			return
		}
		n1 := len(b) / 2
		b1, b2 := b[:n1], b[n1:]
		sortRange(b1)
		sortRange(b2)
		t := tmp[:0]
		for len(b1) > 0 && len(b2) > 0 {
			if cmp(b1[0], b2[0]) <= 0 {
				t, b1 = append(t, b1[0]), b1[1:]
			} else {
				t, b2 = append(t, b2[0]), b2[1:]
			}
		}
		t = append(t, b1...)
		copy(b, t)
	}
	sortRange(p)
}

// cmp is ministat's dbl_cmp: NaN compares equal to everything.
func cmp(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
