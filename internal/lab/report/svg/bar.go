package svg

import (
	"fmt"
	"math"
	"slices"
	"unicode/utf8"
)

// BarChart is a grouped bar chart: for each category (a DUT, a stream
// count) one bar per series, left to right in series order, on a linear y
// axis that includes 0.
type BarChart struct {
	Title, XLabel, YLabel string
	Categories            []string
	// Series[j].Points[i] is the bar of series j in category i; X is
	// ignored, YLo and YHi draw an error bar. A series may have fewer
	// points than there are categories (the rest have no bar), not more.
	// A NaN or infinite Y leaves a gap.
	Series []Series
	// Width and Height in pixels; 0 means 720×420.
	Width, Height int
	// Unit formats the y tick labels; nil means SI.
	Unit func(float64) string
}

const (
	rotateDeg   = 35 // slant of category labels too wide for their group
	maxCatRunes = 24 // a slanted label is cut to this, the tooltip keeps it whole
)

// SVG renders the chart. It fails, wrapping ErrChart, for a negative size
// or one too small for a plot, a series with more points than categories,
// and data whose range overflows float64.
func (c BarChart) SVG() ([]byte, error) {
	const kind = "bar chart"
	w, h, err := checkSize(kind, c.Width, c.Height)
	if err != nil {
		return nil, err
	}
	lo, hi := 0.0, 0.0
	items := make([]legendItem, len(c.Series))
	names := make([]string, len(c.Series))
	for j, s := range c.Series {
		names[j] = seriesName(s, j)
		if len(s.Points) > len(c.Categories) {
			return nil, fmt.Errorf("%w: %s: series %q has %d points for %d categories", ErrChart, kind, names[j], len(s.Points), len(c.Categories))
		}
		items[j] = legendItem{name: names[j], st: seriesStyle(j, false), bar: true}
		drawn := 0
		for _, p := range s.Points {
			if !finite(p.Y) {
				continue
			}
			drawn++
			lo, hi = min(lo, p.Y), max(hi, p.Y)
			if elo, ehi, ok := errorRange(p); ok {
				lo, hi = min(lo, elo), max(hi, ehi)
			}
		}
		if drawn == 0 {
			items[j].name += " (no data)"
		}
	}
	lo, hi = widen(lo, hi, false, true)
	if !finite(hi - lo) {
		return nil, fmt.Errorf("%w: %s: y range [%g, %g] overflows float64", ErrChart, kind, lo, hi)
	}

	// The category labels are slanted when one is wider than its group.
	// That needs the plot width, which depends on the y labels, which
	// depend on the plot height, which depends on the slant: the second
	// pass settles it from the first pass's width.
	ncat := max(1, len(c.Categories))
	yfmt := formatter(c.Unit)
	var (
		f      frame
		ya     axis
		rotate bool
		labels []string
	)
	plotW := float64(w) - 120
	for pass := 0; pass < 2; pass++ {
		labels, rotate = categoryLabels(c.Categories, plotW/float64(ncat))
		tickH := tickSize
		if rotate {
			widest := 0.0
			for _, l := range labels {
				widest = max(widest, textWidth(l, tickSize))
			}
			s, co := math.Sincos(rotateDeg * math.Pi / 180)
			tickH = min(widest*s+tickSize*co, float64(h)/3)
		}
		f, ya, err = layout(kind, w, h, c.Title, c.XLabel, c.YLabel, items, tickH, func(y0, y1 float64) axis {
			return newAxis(lo, hi, false, true, true, y1, y0, yfmt, fitsY(y1-y0, false))
		})
		if err != nil {
			return nil, err
		}
		if plotW == f.x1-f.x0 {
			break
		}
		plotW = f.x1 - f.x0
	}

	d := newDoc(w, h, c.Title, slices.Concat(names, c.Categories))
	d.title(c.Title)
	d.drawFrame(f, axis{}, ya)

	band := (f.x1 - f.x0) / float64(ncat)
	y1 := crisp(f.y1)
	for i, l := range labels {
		cx := f.x0 + (float64(i)+0.5)*band
		y := y1 + tickLen + 4 + tickSize*0.8
		if rotate {
			d.text(cx+4, y, tickSize, "end", l, fmt.Sprintf(` transform="rotate(-%d %s %s)"`, rotateDeg, num(cx+4), num(y)))
		} else {
			d.text(cx, y, tickSize, "middle", l, "")
		}
		if i > 0 {
			x := crisp(f.x0 + float64(i)*band)
			d.line(x, y1, x, y1+tickLen, axisColor, 1, "")
		}
	}

	// Groups fill 80% of their band (60% for a single series, whose fat
	// bars would otherwise touch); bars within a group are separated by a
	// hairline gap.
	ns := max(1, len(c.Series))
	group := band * 0.8
	if ns == 1 {
		group = band * 0.6
	}
	barW := group / float64(ns)
	gap := min(2, barW*0.15)
	zero := ya.px(0)
	for j, s := range c.Series {
		st := items[j].st
		d.printf(`<g class="series" fill="%s">`+"\n", st.color)
		for i, p := range s.Points {
			if !finite(p.Y) {
				continue
			}
			x := f.x0 + float64(i)*band + (band-group)/2 + float64(j)*barW + gap/2
			y := ya.px(p.Y)
			d.printf(`<rect class="bar" x="%s" y="%s" width="%s" height="%s"><title>%s</title></rect>`+"\n",
				num(x), num(min(y, zero)), num(barW-gap), num(math.Abs(y-zero)),
				esc(fmt.Sprintf("%s, %s: %s", c.Categories[i], names[j], barTip(p))))
		}
		for i, p := range s.Points {
			elo, ehi, ok := errorRange(p)
			if !finite(p.Y) || !ok {
				continue
			}
			x := f.x0 + float64(i)*band + (band-group)/2 + (float64(j)+0.5)*barW
			d.errorBar(x, ya.px(elo), ya.px(ehi), min(barW*0.5, 10), textColor)
		}
		d.printf("</g>\n")
	}
	d.drawLegend(f)
	return d.end(), nil
}

func barTip(p Point) string {
	s := siDigits(p.Y, 6)
	if lo, hi, ok := errorRange(p); ok {
		s += fmt.Sprintf(" [%s, %s]", siDigits(lo, 6), siDigits(hi, 6))
	}
	return s
}

// categoryLabels returns the labels to draw for groups band pixels wide,
// and whether they must be slanted; slanted labels are cut to maxCatRunes.
func categoryLabels(cats []string, band float64) ([]string, bool) {
	rotate := false
	for _, l := range cats {
		if textWidth(l, tickSize) > band-8 {
			rotate = true
		}
	}
	if !rotate {
		return cats, false
	}
	out := make([]string, len(cats))
	for i, l := range cats {
		if utf8.RuneCountInString(l) > maxCatRunes {
			l = string([]rune(l)[:maxCatRunes-1]) + "…"
		}
		out[i] = l
	}
	return out, true
}
