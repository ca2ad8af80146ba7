package svg

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// LineChart plots y against x, one line per series: throughput against
// frame size or chain length, loss against offered load. The zero value
// with Series set is a usable chart.
type LineChart struct {
	Title, XLabel, YLabel string
	Series                []Series
	// XTicks are explicit x ticks (the frame sizes, say), each drawn and
	// labelled where the label fits; without them nice ticks are chosen.
	XTicks []float64
	// XCategorical spaces the distinct x values of the points and XTicks
	// evenly, in order, as categories: 64, 128 … 1518 without crowding the
	// small sizes. It cannot be combined with LogX.
	XCategorical bool
	LogX, LogY   bool
	// YMin is the bottom of the y axis, exactly; points below it are
	// clipped. Default: 0 for a linear axis (or the nice value under the
	// lowest point if that is negative), the nice value under the lowest
	// point for a log one.
	YMin *float64
	// Width and Height in pixels; 0 means 720×420.
	Width, Height int
	// Unit formats the y tick labels and XUnit the x ones; nil means SI.
	// Plain suits frame sizes.
	Unit, XUnit func(float64) string
}

// SVG renders the chart. It fails, wrapping ErrChart, for a negative
// size or one too small for a plot, LogX with XCategorical, a YMin that is
// not finite (or not positive with LogY), a log axis on which no point can
// be drawn, and data whose range overflows float64.
func (c LineChart) SVG() ([]byte, error) {
	const kind = "line chart"
	w, h, err := checkSize(kind, c.Width, c.Height)
	if err != nil {
		return nil, err
	}
	if c.XCategorical && c.LogX {
		return nil, fmt.Errorf("%w: %s: XCategorical and LogX together", ErrChart, kind)
	}
	if c.YMin != nil && (!finite(*c.YMin) || c.LogY && *c.YMin <= 0) {
		return nil, fmt.Errorf("%w: %s: YMin %g with LogY %t", ErrChart, kind, *c.YMin, c.LogY)
	}

	// The points that can be drawn, and the data's extent. A point with a
	// NaN or infinite coordinate is a missing figure, which breaks its
	// line: segs are the runs between them, each drawn as a line of its
	// own. One that a log axis cannot show is skipped, its neighbours
	// joined.
	pts := make([][]Point, len(c.Series))
	segs := make([][][]Point, len(c.Series))
	xlo, xhi := math.Inf(1), math.Inf(-1)
	ylo, yhi := math.Inf(1), math.Inf(-1)
	var n, offX, offY int
	for i, s := range c.Series {
		gap := true
		for _, p := range s.Points {
			switch {
			case !finite(p.X) || !finite(p.Y):
				gap = true
				continue
			case c.LogX && p.X <= 0:
				offX++
				continue
			case c.LogY && p.Y <= 0:
				offY++
				continue
			}
			if gap {
				segs[i] = append(segs[i], nil)
				gap = false
			}
			segs[i][len(segs[i])-1] = append(segs[i][len(segs[i])-1], p)
			pts[i] = append(pts[i], p)
			n++
			xlo, xhi = min(xlo, p.X), max(xhi, p.X)
			ylo, yhi = min(ylo, p.Y), max(yhi, p.Y)
			if lo, hi, ok := errorRange(p); ok {
				if !c.LogY || lo > 0 {
					ylo = min(ylo, lo)
				}
				if !c.LogY || hi > 0 {
					yhi = max(yhi, hi)
				}
			}
		}
	}
	if n == 0 && offX > 0 {
		return nil, fmt.Errorf("%w: %s: LogX, but none of the %d finite points has x > 0", ErrChart, kind, offX)
	}
	if n == 0 && offY > 0 {
		return nil, fmt.Errorf("%w: %s: LogY, but none of the %d finite points has y > 0", ErrChart, kind, offY)
	}

	var xt []float64
	for _, t := range c.XTicks {
		if finite(t) && (!c.LogX || t > 0) {
			xt = append(xt, t)
		}
	}
	slices.Sort(xt)
	xt = slices.Compact(xt)

	// The x range: the data and explicit ticks, tight (no nice rounding),
	// so the lines use the whole width.
	if len(xt) > 0 {
		xlo, xhi = min(xlo, xt[0]), max(xhi, xt[len(xt)-1])
	}
	if xlo > xhi {
		xlo, xhi = 0, 1
		if c.LogX {
			xlo, xhi = 1, 10
		}
	}
	xlo, xhi = widen(xlo, xhi, c.LogX, false)
	if !c.XCategorical && !finite(xhi-xlo) {
		return nil, fmt.Errorf("%w: %s: x range [%g, %g] overflows float64", ErrChart, kind, xlo, xhi)
	}

	// The y range starts at YMin, or at 0 on a linear axis, so that
	// throughput differences are not exaggerated by a cut-off axis.
	if n == 0 {
		ylo, yhi = 0, 0
		if c.LogY {
			ylo, yhi = 1, 10
		}
	}
	if !c.LogY {
		ylo, yhi = min(ylo, 0), max(yhi, 0)
	}
	if c.YMin != nil {
		ylo, yhi = *c.YMin, max(yhi, *c.YMin)
	}
	ylo, yhi = widen(ylo, yhi, c.LogY, c.YMin != nil || !c.LogY)
	if !finite(yhi - ylo) {
		return nil, fmt.Errorf("%w: %s: y range [%g, %g] overflows float64", ErrChart, kind, ylo, yhi)
	}

	items := make([]legendItem, len(c.Series))
	names := make([]string, len(c.Series))
	for i, s := range c.Series {
		names[i] = seriesName(s, i)
		items[i] = legendItem{name: names[i], st: seriesStyle(i, s.Dashed)}
		if len(pts[i]) == 0 {
			items[i].name += " (no data)"
		}
	}

	yfmt := formatter(c.Unit)
	f, ya, err := layout(kind, w, h, c.Title, c.XLabel, c.YLabel, items, tickSize, func(y0, y1 float64) axis {
		return newAxis(ylo, yhi, c.LogY, c.YMin == nil, true, y1, y0, yfmt, fitsY(y1-y0, c.LogY))
	})
	if err != nil {
		return nil, err
	}

	// The x axis is inset from the plot's edges so that markers at the
	// ends do not sit on the y axis.
	xfmt := formatter(c.XUnit)
	inset := 14.0
	var xa axis
	switch {
	case c.XCategorical:
		cats := slices.Clone(xt)
		for _, p := range pts {
			for _, q := range p {
				cats = append(cats, q.X)
			}
		}
		slices.Sort(cats)
		cats = slices.Compact(cats)
		if len(cats) > 0 {
			inset = min(40, (f.x1-f.x0)/float64(2*len(cats)))
		}
		xa = axis{cats: cats, p0: f.x0 + inset, p1: f.x1 - inset, ticks: cats, labels: xfmt(cats)}
		thinLabels(&xa)
	case len(xt) > 0:
		xa = axis{lo: xlo, hi: xhi, log: c.LogX, p0: f.x0 + inset, p1: f.x1 - inset, ticks: xt, labels: xfmt(xt)}
		thinLabels(&xa)
	default:
		length := f.x1 - f.x0 - 2*inset
		xa = newAxis(xlo, xhi, c.LogX, false, false, f.x0+inset, f.x1-inset, xfmt, fitsX(length, c.LogX, xfmt))
	}

	d := newDoc(w, h, c.Title, names)
	d.title(c.Title)
	d.drawFrame(f, xa, ya)
	d.clip(f)
	// Reference lines go under the measurements: where a DUT runs at line
	// rate, its line must show, not the reference's.
	for _, dashed := range []bool{true, false} {
		for i, s := range c.Series {
			if s.Dashed == dashed && len(pts[i]) > 0 {
				d.lineSeries(names[i], segs[i], items[i].st, xa, ya)
			}
		}
	}
	d.printf("</g>\n")
	d.drawLegend(f)
	return d.end(), nil
}

// lineSeries draws one series, its segments apart: error bars under the
// lines, the lines, then the markers on top, each with a tooltip of its
// values for browsers.
func (d *doc) lineSeries(name string, segs [][]Point, st style, xa, ya axis) {
	pts := slices.Concat(segs...)
	d.printf(`<g class="series">` + "\n")
	for _, p := range pts {
		lo, hi, ok := errorRange(p)
		if !ok || ya.log && hi <= 0 {
			continue
		}
		if ya.log && lo <= 0 {
			lo = ya.lo // the bar runs off the bottom, as far as a log axis goes
		}
		d.errorBar(xa.px(p.X), ya.px(lo), ya.px(hi), 8, st.color)
	}
	for _, seg := range segs {
		if len(seg) < 2 {
			continue
		}
		var b strings.Builder
		for i, p := range seg {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(num(xa.px(p.X)) + "," + num(ya.px(p.Y)))
		}
		dash := ""
		if st.dash != "" {
			dash = fmt.Sprintf(` stroke-dasharray="%s"`, st.dash)
		}
		d.printf(`<polyline class="line" points="%s" fill="none" stroke="%s" stroke-width="2" stroke-linejoin="round"%s/>`+"\n", b.String(), st.color, dash)
	}
	for _, p := range pts {
		d.marker(st.marker, xa.px(p.X), ya.px(p.Y), st.color, "marker", tip(name, p))
	}
	d.printf("</g>\n")
}

// tip is a marker's tooltip: the values with six digits, more than the
// axis shows.
func tip(name string, p Point) string {
	s := fmt.Sprintf("%s: %s, %s", name, siDigits(p.X, 6), siDigits(p.Y, 6))
	if lo, hi, ok := errorRange(p); ok {
		s += fmt.Sprintf(" [%s, %s]", siDigits(lo, 6), siDigits(hi, 6))
	}
	return s
}
