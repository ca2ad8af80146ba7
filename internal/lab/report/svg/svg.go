// Package svg draws the line charts and grouped bar charts of the benchmark
// reports as standalone SVG 1.1 documents, using only the standard library.
//
// The contract, which the tests hold:
//
//   - A document is complete on its own: xmlns, width, height and viewBox on
//     the root, a white background (so it stays readable in GitHub's dark
//     mode), presentation attributes only. No script, no CSS, no external
//     font or link, so it looks the same through GitHub's image proxy
//     (![](chart.svg)), in a browser and in rsvg-convert. Text uses the
//     generic sans-serif family.
//   - The output is deterministic: the same chart value gives the same bytes.
//     Coordinates are printed with one decimal, and nothing depends on map
//     order, the clock or the locale, so reports diff cleanly.
//   - All text (title, labels, series and category names) is XML-escaped;
//     characters XML cannot carry become U+FFFD.
//   - A point with a NaN or infinite coordinate is a missing figure: it is
//     skipped and its line breaks there, a gap, never a line drawn across
//     it. A point a log axis cannot show (≤ 0) is skipped and its
//     neighbours joined. Points of a line are joined in the order given
//     (not sorted by X), so parametric curves such as latency against load
//     draw as measured. A series with nothing to draw keeps its legend entry,
//     marked "(no data)", so a missing measurement is visible.
//   - Series i gets colour i and marker i of a 7-entry Okabe-Ito palette (the
//     yellow is left out: it is unreadable on white). Series 8 to 14 reuse
//     colours and markers with a dotted line; from 15 on, styles repeat.
//     Dashed series always use a long dash. Bars are told apart by colour and
//     by their fixed left-to-right order in each group.
//   - SVG returns an error, wrapping ErrChart and naming the field, only for
//     input that cannot be drawn at all; empty or degenerate data draws an
//     empty or flat chart instead.
//
// Text widths are estimated from character classes, not measured from a
// font, so layout leaves some slack; very long titles or names may still be
// clipped.
package svg

import (
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"strconv"
	"strings"
	"unicode"
)

// ErrChart is wrapped by every error SVG returns: the chart cannot be drawn
// as given.
var ErrChart = errors.New("unusable chart")

// Point is one measurement. YLo and YHi are an optional error bar in
// absolute y units (min/max, or mean ± stddev already added); both 0 means
// none.
type Point struct {
	X, Y     float64
	YLo, YHi float64
}

// Series is one line of a LineChart or one bar colour of a BarChart.
type Series struct {
	Name   string
	Points []Point
	// Dashed draws the line dashed, for reference lines such as the
	// theoretical line rate. Ignored by BarChart.
	Dashed bool
}

const (
	defaultWidth  = 720
	defaultHeight = 420
	// minPlot is the smallest plot area, in pixels, worth drawing.
	minPlot = 60

	titleSize  = 16.0
	labelSize  = 13.0
	tickSize   = 12.0
	legendSize = 12.0

	textColor = "#222222"
	axisColor = "#444444"
	gridColor = "#e3e3e3"
)

// palette is Okabe-Ito without its yellow (#F0E442), darkest hues first
// because most figures have few series.
var palette = [...]string{"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#000000", "#E69F00", "#56B4E9"}

// style is how series i is drawn, fixed by its index so that the same DUT
// keeps its look across the figures of a report if given in the same order.
type style struct {
	color  string
	marker int
	dash   string // stroke-dasharray, "" for solid
}

func seriesStyle(i int, dashed bool) style {
	s := style{color: palette[i%len(palette)], marker: i % len(palette)}
	switch {
	case dashed:
		s.dash = "7 4"
	case (i/len(palette))%2 == 1:
		s.dash = "2 3"
	}
	return s
}

// SI formats v with three significant digits and an SI prefix for large
// magnitudes: 1234567 → "1.23M", 350000 → "350k", 0.5 → "0.5", 1500 →
// "1.5k". Magnitudes below 1 get no prefix (a loss of "0.001" must not read
// as "1m"); below 0.001 they are written 2.5e-6, which stays short and
// reads the same on every tick of a log axis.
func SI(v float64) string { return siDigits(v, 3) }

// Plain formats v as the shortest decimal that reads back as v, without
// prefix: for axes such as frame sizes, where "1518" beats "1.52k".
func Plain(v float64) string {
	if v == 0 {
		return "0"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

const siPrefixes = " kMGTPE"

// siDigits is SI with sig significant digits. It works on the decimal
// digits of strconv's 'e' format, not on math.Log10, so powers of ten and
// values that round up (999999 → "1M") land on the right prefix exactly.
func siDigits(v float64, sig int) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case v == 0:
		return "0"
	}
	e := strconv.FormatFloat(math.Abs(v), 'e', sig-1, 64) // d.ddde±XX
	mant, exps, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(exps)
	sign := ""
	if v < 0 {
		sign = "-"
	}
	if exp >= 21 || exp < -3 {
		return sign + trimZeros(mant) + "e" + strconv.Itoa(exp)
	}
	digits := strings.Replace(mant, ".", "", 1)
	p := 0
	if exp > 0 {
		p = exp / 3
	}
	point := 1 + exp - 3*p // digits before the decimal point
	var s string
	switch {
	case point <= 0:
		s = "0." + strings.Repeat("0", -point) + digits
	case point >= len(digits):
		s = digits + strings.Repeat("0", point-len(digits))
	default:
		s = digits[:point] + "." + digits[point:]
	}
	s = trimZeros(s)
	if p > 0 {
		s += siPrefixes[p : p+1]
	}
	return sign + s
}

// trimZeros drops trailing zeros after a decimal point, and the point.
func trimZeros(s string) string {
	if !strings.Contains(s, ".") {
		return s
	}
	return strings.TrimRight(strings.TrimRight(s, "0"), ".")
}

// siTicks labels a set of ticks with SI, adding digits until neighbours
// differ, so a narrow range such as 1.0000M..1.0004M still reads.
func siTicks(ticks []float64) []string {
	labels := make([]string, len(ticks))
	for sig := 3; sig <= 15; sig++ {
		for i, t := range ticks {
			labels[i] = siDigits(t, sig)
		}
		distinct := true
		for i := 1; i < len(labels); i++ {
			if labels[i] == labels[i-1] && ticks[i] != ticks[i-1] {
				distinct = false
				break
			}
		}
		if distinct {
			break
		}
	}
	return labels
}

// formatter returns the tick labeller: the caller's per-value function, or
// siTicks.
func formatter(unit func(float64) string) func([]float64) []string {
	if unit == nil {
		return siTicks
	}
	return func(ticks []float64) []string {
		labels := make([]string, len(ticks))
		for i, t := range ticks {
			labels[i] = unit(t)
		}
		return labels
	}
}

// num prints a coordinate: one decimal, no "-0", no trailing ".0". Every
// number in the document goes through here, which is what makes the output
// byte-stable.
func num(v float64) string {
	s := strconv.FormatFloat(v, 'f', 1, 64)
	s = strings.TrimSuffix(s, ".0")
	if s == "-0" {
		return "0"
	}
	return s
}

// esc escapes s for XML text and attribute values: the five specials,
// U+FFFD for what XML 1.0 cannot carry (control characters, invalid UTF-8),
// and a space for tab and newline, which SVG text would collapse anyway.
func esc(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '&':
			b.WriteString("&amp;")
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '"':
			b.WriteString("&quot;")
		case '\'':
			b.WriteString("&apos;")
		case '\t', '\n', '\r':
			b.WriteByte(' ')
		default:
			if r < 0x20 || r == 0xFFFE || r == 0xFFFF {
				r = '\uFFFD'
			}
			b.WriteRune(r)
		}
	}
	return b.String()
}

// textWidth estimates the rendered width of s in pixels. The factors are
// a little above Helvetica's and close to DejaVu Sans's (the usual Linux
// sans-serif), so layout errs on the roomy side.
func textWidth(s string, size float64) float64 {
	w := 0.0
	for _, r := range s {
		switch {
		case strings.ContainsRune("iljtfI.,:;'|!()[] ", r):
			w += 0.34
		case strings.ContainsRune("mwMW@%", r):
			w += 0.9
		case unicode.IsUpper(r):
			w += 0.72
		case unicode.IsDigit(r):
			w += 0.64
		default:
			w += 0.6
		}
	}
	return w * size
}

// doc accumulates one SVG document.
type doc struct {
	b    bytes.Buffer
	w, h float64
	id   string // prefix for element ids, see newDoc
}

// newDoc starts a document. Element ids (the clip path) carry a hash of
// the chart's identity so that two charts inlined in one HTML page do not
// share ids; a hash, not a counter, keeps the output deterministic.
func newDoc(w, h int, title string, names []string) *doc {
	hs := fnv.New32a()
	fmt.Fprintf(hs, "%d %d %q", w, h, title)
	for _, n := range names {
		fmt.Fprintf(hs, " %q", n)
	}
	d := &doc{w: float64(w), h: float64(h), id: fmt.Sprintf("c%08x", hs.Sum32())}
	d.printf(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	d.printf(`<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif">`+"\n", w, h, w, h)
	if title != "" {
		d.printf("<title>%s</title>\n", esc(title))
	}
	d.printf(`<rect x="0" y="0" width="%d" height="%d" fill="#ffffff"/>`+"\n", w, h)
	return d
}

func (d *doc) printf(format string, a ...any) { fmt.Fprintf(&d.b, format, a...) }

func (d *doc) end() []byte {
	d.printf("</svg>\n")
	return d.b.Bytes()
}

// text writes a label; anchor is start, middle or end; y is the baseline.
// extra is raw attributes (a transform), already safe.
func (d *doc) text(x, y, size float64, anchor, s, extra string) {
	d.printf(`<text x="%s" y="%s" font-size="%s" text-anchor="%s" fill="%s"%s>%s</text>`+"\n",
		num(x), num(y), num(size), anchor, textColor, extra, esc(s))
}

func (d *doc) line(x1, y1, x2, y2 float64, color string, width float64, extra string) {
	d.printf(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="%s"%s/>`+"\n",
		num(x1), num(y1), num(x2), num(y2), color, num(width), extra)
}

// title centres the chart title over the whole canvas, shrinking the font
// for long titles rather than running off the edge.
func (d *doc) title(s string) {
	if s == "" {
		return
	}
	size := titleSize
	for size > 11 && textWidth(s, size)*1.05 > d.w-20 {
		size--
	}
	d.text(d.w/2, 12+size, size, "middle", s, ` font-weight="bold"`)
}

// marker draws marker shape k at (x, y). The shapes alternate filled and
// hollow so that series stay apart in greyscale print.
// class tells data markers from legend samples apart for the tests.
func (d *doc) marker(k int, x, y float64, color, class, tip string) {
	const r = 4.0
	var shape string
	switch k {
	case 0:
		shape = fmt.Sprintf(`<circle cx="%s" cy="%s" r="%s" fill="%s"`, num(x), num(y), num(r), color)
	case 1:
		shape = fmt.Sprintf(`<rect x="%s" y="%s" width="%s" height="%s" fill="%s"`, num(x-r*0.85), num(y-r*0.85), num(r*1.7), num(r*1.7), color)
	case 2:
		shape = fmt.Sprintf(`<path d="M%s %sL%s %sL%s %sZ" fill="%s"`, num(x), num(y-r*1.15), num(x+r*1.1), num(y+r*0.8), num(x-r*1.1), num(y+r*0.8), color)
	case 3:
		shape = fmt.Sprintf(`<path d="M%s %sL%s %sL%s %sL%s %sZ" fill="%s"`, num(x), num(y-r*1.2), num(x+r*1.2), num(y), num(x), num(y+r*1.2), num(x-r*1.2), num(y), color)
	case 4:
		shape = fmt.Sprintf(`<path d="M%s %sL%s %sL%s %sZ" fill="%s"`, num(x), num(y+r*1.15), num(x+r*1.1), num(y-r*0.8), num(x-r*1.1), num(y-r*0.8), color)
	case 5:
		shape = fmt.Sprintf(`<circle cx="%s" cy="%s" r="%s" fill="#ffffff" stroke="%s" stroke-width="1.8"`, num(x), num(y), num(r-0.5), color)
	default:
		shape = fmt.Sprintf(`<rect x="%s" y="%s" width="%s" height="%s" fill="#ffffff" stroke="%s" stroke-width="1.8"`, num(x-r*0.75), num(y-r*0.75), num(r*1.5), num(r*1.5), color)
	}
	if tip == "" {
		d.printf("%s class=\"%s\"/>\n", shape, class)
		return
	}
	d.printf("%s class=\"%s\"><title>%s</title></%s>\n", shape, class, esc(tip), shapeName(shape))
}

func shapeName(shape string) string {
	name, _, _ := strings.Cut(shape[1:], " ")
	return name
}

// errorBar draws a vertical bar from yLo to yHi (pixels) with caps.
func (d *doc) errorBar(x, yLo, yHi, capW float64, color string) {
	d.printf(`<path class="errorbar" d="M%s %sL%s %sM%s %sL%s %sM%s %sL%s %s" stroke="%s" stroke-width="1.3" fill="none"/>`+"\n",
		num(x), num(yLo), num(x), num(yHi),
		num(x-capW/2), num(yLo), num(x+capW/2), num(yLo),
		num(x-capW/2), num(yHi), num(x+capW/2), num(yHi), color)
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// errorRange returns the error bar of p, ordered, and whether it has one.
func errorRange(p Point) (lo, hi float64, ok bool) {
	if p.YLo == 0 && p.YHi == 0 || !finite(p.YLo) || !finite(p.YHi) {
		return 0, 0, false
	}
	lo, hi = p.YLo, p.YHi
	if lo > hi {
		lo, hi = hi, lo
	}
	return lo, hi, true
}

func seriesName(s Series, i int) string {
	if s.Name == "" {
		return fmt.Sprintf("series %d", i+1)
	}
	return s.Name
}

func checkSize(kind string, w, h int) (int, int, error) {
	if w < 0 || h < 0 {
		return 0, 0, fmt.Errorf("%w: %s: Width %d, Height %d: negative", ErrChart, kind, w, h)
	}
	if w == 0 {
		w = defaultWidth
	}
	if h == 0 {
		h = defaultHeight
	}
	return w, h, nil
}
