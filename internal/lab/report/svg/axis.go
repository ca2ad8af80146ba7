package svg

import (
	"iter"
	"math"
	"slices"
	"strconv"
)

// axis maps data values to pixels along one direction of the plot.
type axis struct {
	lo, hi float64   // domain
	log    bool      // log10 scale; lo > 0
	cats   []float64 // categorical: sorted values placed evenly, by index
	p0, p1 float64   // pixels of lo and hi (p1 < p0 for a y axis)
	ticks  []float64
	labels []string // one per tick; "" leaves the tick unlabelled
}

func (a *axis) frac(v float64) float64 {
	var f float64
	switch {
	case a.cats == nil && a.hi == a.lo:
		return 0.5 // an empty categorical axis; nothing is placed on it
	case a.cats != nil:
		if len(a.cats) == 1 {
			return 0.5
		}
		i, _ := slices.BinarySearch(a.cats, v)
		f = float64(i) / float64(len(a.cats)-1)
	case a.log:
		f = (math.Log2(v) - math.Log2(a.lo)) / (math.Log2(a.hi) - math.Log2(a.lo))
	default:
		f = (v - a.lo) / (a.hi - a.lo)
	}
	// A point under an explicit YMin lies outside the domain and is
	// clipped; the bound keeps its coordinate a printable number.
	return max(-10, min(11, f))
}

func (a *axis) px(v float64) float64 { return a.p0 + a.frac(v)*(a.p1-a.p0) }

// log10 is for the decade of x, including subnormal x, where math.Log10
// and math.Log are wrong on amd64 (Log10(5e-324) gives -307.95, not
// -323.3) and math.Log2 is right. It may be off by an ulp at exact powers
// of ten, which the callers' one-decade margins absorb. The log scale
// itself (axis.frac) uses math.Log2 directly, since only ratios matter.
func log10(x float64) float64 { return math.Log2(x) * (math.Ln2 / math.Ln10) }

// cand is one tick scheme: its ticks and the domain it implies.
type cand struct {
	ticks  []float64
	lo, hi float64
}

// maxTicks bounds every scheme, so that no range, however odd, makes a
// large document or a long loop.
const maxTicks = 100

// mants are the nice step mantissas, 1, 2, 2.5 and 5, in tenths so that a
// tick k·step is an integer times a power of ten and prints exactly.
var mants = [...]int64{10, 20, 25, 50}

// decimal returns n × 10^p as the float nearest that decimal, which
// neither repeated addition of a step (0.1+0.2) nor math.Pow10 (inexact
// far from 10^0) gives: strconv rounds correctly.
func decimal(n int64, p int) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatInt(n, 10)+"e"+strconv.Itoa(p), 64)
	return v
}

// linearCandidates yields tick schemes m×10^e, from fine to coarse. An
// extended end moves the domain out to the next tick (the y axis, so the
// top tick is labelled); a tight one keeps the data's end (the x axis, so
// the lines use the width).
func linearCandidates(lo, hi float64, extendLo, extendHi bool) iter.Seq[cand] {
	return func(yield func(cand) bool) {
		e0 := int(math.Floor(log10(hi-lo))) - 2
		for e := e0; e <= e0+5; e++ {
			for _, m := range mants {
				step := decimal(m, e-1)
				if math.IsInf(step, 0) {
					return
				}
				// The epsilon absorbs division error: 0.3/0.1 is 2.9999….
				klo := math.Ceil(lo/step - 1e-9)
				if extendLo {
					klo = math.Floor(lo/step + 1e-9)
				}
				khi := math.Floor(hi/step + 1e-9)
				if extendHi {
					khi = math.Ceil(hi/step - 1e-9)
				}
				if khi-klo >= maxTicks || khi < klo {
					continue
				}
				c := cand{lo: lo, hi: hi}
				for k := int64(klo); k <= int64(khi); k++ {
					c.ticks = append(c.ticks, decimal(k*m, e-1))
				}
				// Near math.MaxFloat64 the next tick out is +Inf.
				if slices.ContainsFunc(c.ticks, func(v float64) bool { return math.IsInf(v, 0) }) {
					continue
				}
				if extendLo {
					c.lo = c.ticks[0]
				}
				if extendHi {
					c.hi = c.ticks[len(c.ticks)-1]
				}
				if !yield(c) {
					return
				}
			}
		}
	}
}

// logCandidates yields log tick schemes from fine to coarse: 1-2-5 in
// each decade, then every decade, then every d-th decade. The ends extend
// as in linearCandidates.
func logCandidates(lo, hi float64, extendLo, extendHi bool) iter.Seq[cand] {
	return func(yield func(cand) bool) {
		e0 := int(math.Floor(log10(lo))) - 1
		e1 := int(math.Ceil(log10(hi))) + 1
		if e1-e0 <= 6 {
			var vals []float64
			for e := e0; e <= e1; e++ {
				for _, m := range [...]int64{1, 2, 5} {
					vals = append(vals, decimal(m, e))
				}
			}
			if c, ok := logCand(vals, lo, hi, extendLo, extendHi); ok && !yield(c) {
				return
			}
		}
		for _, d := range [...]int{1, 2, 3, 5, 10, 20, 50, 100, 200} {
			var vals []float64
			for e := floorDiv(e0, d) * d; e <= e1+d; e += d {
				vals = append(vals, decimal(1, e))
			}
			if c, ok := logCand(vals, lo, hi, extendLo, extendHi); ok && !yield(c) {
				return
			}
		}
	}
}

func floorDiv(a, b int) int {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// logCand picks from vals (ascending) the ticks for [lo, hi].
func logCand(vals []float64, lo, hi float64, extendLo, extendHi bool) (cand, bool) {
	vals = slices.DeleteFunc(vals, func(v float64) bool { return v <= 0 || math.IsInf(v, 0) })
	c := cand{lo: lo, hi: hi}
	first, last := -1, -1
	for i, v := range vals {
		if extendLo && v <= lo*(1+1e-12) || !extendLo && v >= lo*(1-1e-12) && first < 0 {
			first = i
		}
		if extendHi && v >= hi*(1-1e-12) && last < 0 || !extendHi && v <= hi*(1+1e-12) {
			last = i
		}
	}
	if first < 0 || last < 0 || last < first || last-first >= maxTicks {
		return c, false
	}
	c.ticks = vals[first : last+1]
	if extendLo {
		c.lo = c.ticks[0]
	}
	if extendHi {
		c.hi = c.ticks[len(c.ticks)-1]
	}
	return c, true
}

// newAxis builds an axis over [lo, hi] from pixel p0 to p1 with the first
// tick scheme that fits, or none if no scheme has a tick (a range at the
// edge of float64).
func newAxis(lo, hi float64, log, extendLo, extendHi bool, p0, p1 float64, format func([]float64) []string, fits func(cand) bool) axis {
	cands := linearCandidates(lo, hi, extendLo, extendHi)
	if log {
		cands = logCandidates(lo, hi, extendLo, extendHi)
	}
	c := pick(cands, fits)
	if len(c.ticks) == 0 {
		c = cand{lo: lo, hi: hi}
	}
	return axis{lo: c.lo, hi: c.hi, log: log, p0: p0, p1: p1, ticks: c.ticks, labels: format(c.ticks)}
}

// pick returns the first candidate with two or more ticks that fits; if
// none does (a tiny plot), the coarsest with two ticks or more, else with
// any.
func pick(cands iter.Seq[cand], fits func(cand) bool) cand {
	var two, one cand
	for c := range cands {
		switch {
		case len(c.ticks) >= 2 && fits(c):
			return c
		case len(c.ticks) >= 2:
			two = c
		case len(c.ticks) == 1:
			one = c
		}
	}
	if len(two.ticks) > 0 {
		return two
	}
	return one
}

// Minimum distances between tick labels, in pixels.
const (
	minGapX = 36 // and the half-widths of both labels
	minGapY = 36
)

// fitsX reports whether the labels of c sit apart on a horizontal axis
// of the given length.
func fitsX(length float64, log bool, format func([]float64) []string) func(cand) bool {
	return func(c cand) bool {
		labels := format(c.ticks)
		a := axis{lo: c.lo, hi: c.hi, log: log, p1: length}
		for i := 1; i < len(c.ticks); i++ {
			need := (textWidth(labels[i], tickSize)+textWidth(labels[i-1], tickSize))/2 + 12
			if a.px(c.ticks[i])-a.px(c.ticks[i-1]) < max(need, minGapX) {
				return false
			}
		}
		return true
	}
}

// fitsY is fitsX for a vertical axis, where the label height is what
// matters and a fixed gap keeps the grid calm.
func fitsY(length float64, log bool) func(cand) bool {
	return func(c cand) bool {
		a := axis{lo: c.lo, hi: c.hi, log: log, p1: length}
		for i := 1; i < len(c.ticks); i++ {
			if a.px(c.ticks[i])-a.px(c.ticks[i-1]) < minGapY {
				return false
			}
		}
		return true
	}
}

// thinLabels blanks the labels of a horizontal axis that would overlap the
// last label kept, left to right: for explicit or categorical ticks, which
// the caller chose and which are therefore all kept as tick marks.
func thinLabels(a *axis) {
	right := math.Inf(-1)
	for i, t := range a.ticks {
		x := a.px(t)
		w := textWidth(a.labels[i], tickSize)
		if x-w/2 < right+8 {
			a.labels[i] = ""
			continue
		}
		right = x + w/2
	}
}

// widen turns an empty or zero-width range into a drawable one; fixedLo
// keeps lo (an explicit YMin). A range this narrow relative to its values
// (below 1e-9) counts as zero width: nice ticks cannot resolve it in float64.
func widen(lo, hi float64, log, fixedLo bool) (float64, float64) {
	if log {
		if hi > lo*(1+1e-9) {
			return lo, hi
		}
		// At the ends of float64 a factor may underflow to 0 or overflow
		// to +Inf, neither of which has a logarithm: keep that end.
		l, h := lo/3, hi*3
		if fixedLo {
			l, h = lo, lo*10
		}
		if l <= 0 {
			l = lo
		}
		if math.IsInf(h, 0) {
			h = hi
		}
		if h <= l {
			l = h / 10
		}
		return l, h
	}
	if hi-lo > 1e-9*max(math.Abs(lo), math.Abs(hi)) {
		return lo, hi
	}
	d := max(math.Abs(lo), math.Abs(hi), 1)
	if fixedLo {
		return lo, lo + d
	}
	return lo - d/2, hi + d/2
}

// crisp moves a 1-pixel line onto a pixel centre, so it is not smeared
// over two rows.
func crisp(v float64) float64 { return math.Floor(v) + 0.5 }
