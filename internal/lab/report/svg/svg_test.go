package svg

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// parsed is what the tests look at in a document: it was read to the end
// by encoding/xml, and these are its element classes and text.
type parsed struct {
	root     map[string]string // attributes of <svg>
	classes  map[string]int    // class attribute → elements
	elements map[string]int    // element name → count
	dashed   int               // polylines with stroke-dasharray
	texts    []string          // character data of <text> and <title>
}

func parse(t *testing.T, b []byte) parsed {
	t.Helper()
	p := parsed{root: map[string]string{}, classes: map[string]int{}, elements: map[string]int{}}
	dec := xml.NewDecoder(bytes.NewReader(b))
	dec.Strict = true
	depth := 0
	var inText bool
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, b)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if depth == 0 {
				if tok.Name.Local != "svg" || tok.Name.Space != "http://www.w3.org/2000/svg" {
					t.Fatalf("root is %v, want svg in the SVG namespace", tok.Name)
				}
				for _, a := range tok.Attr {
					p.root[a.Name.Local] = a.Value
				}
			}
			depth++
			p.elements[tok.Name.Local]++
			for _, a := range tok.Attr {
				if a.Name.Local == "class" {
					p.classes[a.Value]++
				}
				if tok.Name.Local == "polyline" && a.Name.Local == "stroke-dasharray" {
					p.dashed++
				}
				if a.Name.Local == "href" || strings.HasPrefix(a.Name.Local, "on") {
					t.Errorf("attribute %s on <%s>: no links or handlers allowed", a.Name.Local, tok.Name.Local)
				}
			}
			switch tok.Name.Local {
			case "script", "style", "foreignObject", "image", "a":
				t.Errorf("element <%s> not allowed", tok.Name.Local)
			}
			inText = tok.Name.Local == "text" || tok.Name.Local == "title"
		case xml.EndElement:
			depth--
			inText = false
		case xml.CharData:
			if inText {
				p.texts = append(p.texts, string(tok))
			}
		}
	}
	for _, a := range []string{"width", "height", "viewBox", "version"} {
		if p.root[a] == "" {
			t.Errorf("root <svg> lacks %s", a)
		}
	}
	if bytes.Contains(b, []byte("NaN")) || bytes.Contains(b, []byte("Inf")) {
		t.Errorf("document contains NaN or Inf:\n%s", b)
	}
	return p
}

func (p parsed) hasText(s string) bool { return slices.Contains(p.texts, s) }

func ptr(v float64) *float64 { return &v }

// frameSizes are the RFC 2544 Ethernet frame sizes.
var frameSizes = []float64{64, 128, 256, 512, 1024, 1280, 1518}

// lineRate is the 10 GbE packet rate for a frame size: 20 bytes of
// preamble and inter-frame gap per frame.
func lineRate(size float64) float64 { return 10e9 / ((size + 20) * 8) }

func throughputChart() LineChart {
	duts := []struct {
		name string
		pps  func(size float64) float64
	}{
		{"direct", func(s float64) float64 { return min(lineRate(s), 11.2e6) }},
		{"linux-bridge", func(s float64) float64 { return min(lineRate(s), 1.9e6-s*120) }},
		{"ovs", func(s float64) float64 { return min(lineRate(s), 3.6e6-s*300) }},
		{"trestle", func(s float64) float64 { return min(lineRate(s), 8.7e6) }},
	}
	c := LineChart{
		Title:        "Throughput by frame size, 10 GbE, 1 flow",
		XLabel:       "frame size (bytes)",
		YLabel:       "packets per second",
		XTicks:       frameSizes,
		XCategorical: true,
		XUnit:        Plain,
	}
	for _, d := range duts {
		s := Series{Name: d.name}
		for _, f := range frameSizes {
			s.Points = append(s.Points, Point{X: f, Y: d.pps(f)})
		}
		c.Series = append(c.Series, s)
	}
	ref := Series{Name: "10 GbE line rate", Dashed: true}
	for _, f := range frameSizes {
		ref.Points = append(ref.Points, Point{X: f, Y: lineRate(f)})
	}
	c.Series = append(c.Series, ref)
	return c
}

func TestLineChartElements(t *testing.T) {
	c := throughputChart()
	b, err := c.SVG()
	if err != nil {
		t.Fatal(err)
	}
	p := parse(t, b)
	want := map[string]int{
		"line":          5,
		"marker":        5 * 7,
		"legend-entry":  5,
		"legend-marker": 5,
		"series":        5,
	}
	for class, n := range want {
		if p.classes[class] != n {
			t.Errorf("%d elements of class %q, want %d", p.classes[class], class, n)
		}
	}
	if p.dashed != 1 {
		t.Errorf("%d dashed polylines, want 1 (the line rate)", p.dashed)
	}
	// The reference line is listed last but drawn first, under the
	// measurements that reach it.
	_, first, _ := bytes.Cut(b, []byte("<polyline"))
	if line, _, _ := bytes.Cut(first, []byte(">")); !bytes.Contains(line, []byte("stroke-dasharray")) {
		t.Errorf("first polyline is not the dashed reference: %s", line)
	}
	if p.root["width"] != "720" || p.root["height"] != "420" || p.root["viewBox"] != "0 0 720 420" {
		t.Errorf("root size %v, want the 720×420 default", p.root)
	}
	for _, s := range []string{"64", "1518", "frame size (bytes)", "packets per second", "trestle", c.Title} {
		if !p.hasText(s) {
			t.Errorf("no text %q in %q", s, p.texts)
		}
	}
	// SI ticks on y: the line rate at 64 bytes is 14.9M, so the axis
	// reaches a label in M.
	if !slices.ContainsFunc(p.texts, func(s string) bool { return strings.HasSuffix(s, "M") }) {
		t.Errorf("no y tick label in M among %q", p.texts)
	}
}

func TestBarChartElements(t *testing.T) {
	c := BarChart{
		Title:      "iperf3",
		Categories: []string{"direct", "linux-bridge", "ovs"},
		Series: []Series{
			{Name: "1 stream", Points: []Point{{Y: 9.4, YLo: 9.3, YHi: 9.41}, {Y: 6}, {Y: 7, YLo: 6.5, YHi: 7.5}}},
			{Name: "4 streams", Points: []Point{{Y: 9.41}, {Y: math.NaN()}}}, // one gap, one missing
		},
	}
	b, err := c.SVG()
	if err != nil {
		t.Fatal(err)
	}
	p := parse(t, b)
	for class, n := range map[string]int{"bar": 4, "errorbar": 2, "legend-entry": 2, "series": 2} {
		if p.classes[class] != n {
			t.Errorf("%d elements of class %q, want %d", p.classes[class], class, n)
		}
	}
	for _, s := range c.Categories {
		if !p.hasText(s) {
			t.Errorf("no category label %q", s)
		}
	}
}

func TestEscape(t *testing.T) {
	const hostile = `<a&b>"'`
	line := LineChart{Title: hostile, XLabel: hostile, YLabel: hostile,
		Series: []Series{{Name: hostile, Points: []Point{{X: 1, Y: 1}, {X: 2, Y: 2}}}}}
	bar := BarChart{Title: hostile, Categories: []string{hostile}, Series: []Series{{Name: hostile, Points: []Point{{Y: 1}}}}}
	for name, c := range map[string]chart{"line": line, "bar": bar} {
		t.Run(name, func(t *testing.T) {
			b, err := c.SVG()
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(b, []byte("<a&b>")) {
				t.Errorf("raw %q in the document", "<a&b>")
			}
			p := parse(t, b)
			if !p.hasText(hostile) {
				t.Errorf("no text %q after unescaping, have %q", hostile, p.texts)
			}
		})
	}
	// Characters XML 1.0 cannot carry must not break the document.
	b, err := LineChart{Title: "nul\x00 bell\x07 bad\xff utf8"}.SVG()
	if err != nil {
		t.Fatal(err)
	}
	parse(t, b)
}

func TestSI(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{0, "0"},
		{math.Copysign(0, -1), "0"},
		{0.5, "0.5"},
		{0.025, "0.025"},
		{0.0012345, "0.00123"},
		{1, "1"},
		{12.5, "12.5"},
		{999, "999"},
		{1000, "1k"},
		{1500, "1.5k"},
		{1518, "1.52k"},
		{350000, "350k"},
		{999999, "1M"}, // rounds up into the next prefix
		{1234567, "1.23M"},
		{14880952, "14.9M"},
		{10e9, "10G"},
		{2.5e12, "2.5T"},
		{-1.5e6, "-1.5M"},
		{-0.5, "-0.5"},
		{0.001, "0.001"},
		{0.00025, "2.5e-4"},
		{1e-9, "1e-9"},
		{-1.5e-7, "-1.5e-7"},
		{1e24, "1e24"},
		{math.NaN(), "NaN"},
		{math.Inf(1), "+Inf"},
		{math.Inf(-1), "-Inf"},
	} {
		if got := SI(tc.v); got != tc.want {
			t.Errorf("SI(%g) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

func TestPlain(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{{1518, "1518"}, {64, "64"}, {0.25, "0.25"}, {math.Copysign(0, -1), "0"}, {-3, "-3"}} {
		if got := Plain(tc.v); got != tc.want {
			t.Errorf("Plain(%g) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

func TestSITicksDistinct(t *testing.T) {
	ticks := []float64{1e6, 1.0001e6, 1.0002e6}
	got := siTicks(ticks)
	want := []string{"1M", "1.0001M", "1.0002M"}
	if !slices.Equal(got, want) {
		t.Errorf("siTicks(%v) = %q, want %q", ticks, got, want)
	}
}

// isNice reports whether v is m × 10^k for m in 1, 2, 2.5, 5.
func isNice(v float64) bool {
	v = math.Abs(v)
	if v == 0 {
		return false
	}
	k := math.Floor(math.Log10(v))
	m := v / math.Pow(10, k)
	for _, n := range []float64{1, 2, 2.5, 5, 10} {
		if math.Abs(m-n) < 1e-9 {
			return true
		}
	}
	return false
}

func TestLinearTicks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		lo, hi float64
		length float64
		want   []float64 // nil: check only the properties
		dense  bool      // no scheme can keep the labels apart
	}{
		{name: "pps", lo: 0, hi: 14.88e6, length: 300, want: []float64{0, 2e6, 4e6, 6e6, 8e6, 10e6, 12e6, 14e6, 16e6}},
		{name: "gbit", lo: 0, hi: 9.41, length: 300, want: []float64{0, 2, 4, 6, 8, 10}},
		{name: "unit", lo: 0, hi: 1, length: 300, want: []float64{0, 0.2, 0.4, 0.6, 0.8, 1}},
		{name: "percent", lo: 0, hi: 100, length: 300, want: []float64{0, 20, 40, 60, 80, 100}},
		{name: "short axis", lo: 0, hi: 100, length: 100, want: []float64{0, 50, 100}},
		{name: "2.5 step", lo: 0, hi: 10, length: 160, want: []float64{0, 2.5, 5, 7.5, 10}},
		{name: "negative", lo: -3.2, hi: 7.9, length: 300, want: []float64{-4, -2, 0, 2, 4, 6, 8}},
		{name: "tiny", lo: 0, hi: 3e-7, length: 300, want: []float64{0, 5e-8, 1e-7, 1.5e-7, 2e-7, 2.5e-7, 3e-7}},
		{name: "offset", lo: 1e9, hi: 1e9 + 5, length: 300, want: []float64{1e9, 1e9 + 1, 1e9 + 2, 1e9 + 3, 1e9 + 4, 1e9 + 5}},
		{name: "huge", lo: -1e300, hi: 1e300, length: 300},
		{name: "near max float", lo: 0, hi: 1.7e308, length: 300},
		// Short, so the coarse schemes are tried, whose next tick is +Inf.
		{name: "near max float, short", lo: 0, hi: 1.75e308, length: 100, dense: true},
		{name: "decimals", lo: 0.1, hi: 0.7, length: 300, want: []float64{0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newAxis(tc.lo, tc.hi, false, true, true, 0, tc.length, siTicks, fitsY(tc.length, false))
			if tc.want != nil && !slices.Equal(a.ticks, tc.want) {
				t.Errorf("ticks %v, want %v", a.ticks, tc.want)
			}
			if len(a.ticks) < 2 || len(a.ticks) > 12 {
				t.Fatalf("%d ticks: %v", len(a.ticks), a.ticks)
			}
			if a.ticks[0] > tc.lo || a.ticks[len(a.ticks)-1] < tc.hi || a.lo != a.ticks[0] || a.hi != a.ticks[len(a.ticks)-1] {
				t.Errorf("ticks %v, domain [%g, %g] do not cover [%g, %g]", a.ticks, a.lo, a.hi, tc.lo, tc.hi)
			}
			step := a.ticks[1] - a.ticks[0]
			if !isNice(step) {
				t.Errorf("step %g is not 1, 2, 2.5 or 5 × 10^n", step)
			}
			for i, v := range a.ticks {
				if r := v / step; math.Abs(r-math.Round(r)) > 1e-6 {
					t.Errorf("tick %g is not a multiple of the step %g", v, step)
				}
				if !finite(v) {
					t.Errorf("tick %g", v)
				}
				if i > 0 && !tc.dense && a.px(v)-a.px(a.ticks[i-1]) < minGapY {
					t.Errorf("ticks %g and %g closer than %d px", a.ticks[i-1], v, minGapY)
				}
				if i > 0 && a.labels[i] == a.labels[i-1] {
					t.Errorf("ticks %g and %g both labelled %q", a.ticks[i-1], v, a.labels[i])
				}
			}
		})
	}
}

func TestLogTicks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		lo, hi float64
		length float64
		want   []float64
	}{
		{"frame sizes", 64, 1518, 300, []float64{50, 100, 200, 500, 1000, 2000}},
		{"decades", 1, 1e5, 300, []float64{1, 10, 100, 1e3, 1e4, 1e5}},
		{"loss ratio", 1e-6, 0.3, 300, []float64{1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 0.1, 1}},
		{"many decades", 1e-30, 1e30, 300, []float64{1e-30, 1e-20, 1e-10, 1, 1e10, 1e20, 1e30}},
		{"one decade", 2, 9, 300, []float64{2, 5, 10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newAxis(tc.lo, tc.hi, true, true, true, 0, tc.length, siTicks, fitsY(tc.length, true))
			if !slices.Equal(a.ticks, tc.want) {
				t.Errorf("ticks %v, want %v", a.ticks, tc.want)
			}
		})
	}
}

func TestLogAxesChart(t *testing.T) {
	c := LineChart{
		LogX: true, LogY: true,
		Series: []Series{
			{Name: "loss", Points: []Point{{X: 1e5, Y: 1e-6}, {X: 1e6, Y: 0}, {X: 1e7, Y: 0.02}, {X: -1, Y: 3}}},
		},
	}
	b, err := c.SVG()
	if err != nil {
		t.Fatal(err)
	}
	p := parse(t, b)
	// (1e6, 0) and (-1, 3) cannot be drawn on log axes.
	if p.classes["marker"] != 2 || p.classes["line"] != 1 {
		t.Errorf("%d markers, %d lines; want 2 and 1", p.classes["marker"], p.classes["line"])
	}
	for _, s := range []string{"100k", "1M", "10M", "1e-5", "0.01"} {
		if !p.hasText(s) {
			t.Errorf("no tick label %q in %q", s, p.texts)
		}
	}
}

// chart is either kind.
type chart interface{ SVG() ([]byte, error) }

func TestEdgeCases(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, tc := range []struct {
		name               string
		c                  chart
		markers, lines     int
		bars, legend       int
		noData             bool // a legend entry says "(no data)"
		wantErr, errSubstr string
	}{
		{name: "zero line chart", c: LineChart{}},
		{name: "zero bar chart", c: BarChart{}},
		{name: "series without points", c: LineChart{Series: []Series{{Name: "a"}}}, legend: 1, noData: true},
		{name: "one point", c: LineChart{Series: []Series{{Points: []Point{{X: 3, Y: 4}}}}}, markers: 1, legend: 1},
		{name: "all zero", c: LineChart{Series: []Series{{Points: []Point{{X: 0, Y: 0}, {X: 0, Y: 0}}}}}, markers: 2, lines: 1, legend: 1},
		{name: "NaN and Inf skipped", c: LineChart{Series: []Series{{Points: []Point{{X: 1, Y: nan}, {X: inf, Y: 1}, {X: 2, Y: 2}, {X: 3, Y: 3}, {X: 4, Y: 5, YLo: nan, YHi: 1}}}}}, markers: 3, lines: 1, legend: 1},
		// A missing figure is a gap: the line breaks there, and a run
		// of one point is a marker without a line.
		{name: "NaN breaks the line", c: LineChart{Series: []Series{{Points: []Point{{X: 1, Y: 1}, {X: 2, Y: 2}, {X: 3, Y: nan}, {X: 4, Y: 4}, {X: 5, Y: 5}, {X: 6, Y: -inf}, {X: 7, Y: 7}}}}}, markers: 5, lines: 2, legend: 1},
		{name: "log axis skips, joins", c: LineChart{LogY: true, Series: []Series{{Points: []Point{{X: 1, Y: 1}, {X: 2, Y: 0}, {X: 3, Y: 3}}}}}, markers: 2, lines: 1, legend: 1},
		{name: "only NaN", c: LineChart{Series: []Series{{Name: "x", Points: []Point{{X: nan, Y: nan}}}}}, legend: 1, noData: true},
		{name: "negative", c: LineChart{Series: []Series{{Points: []Point{{X: -5, Y: -3}, {X: 5, Y: 2, YLo: -1, YHi: 4}}}}}, markers: 2, lines: 1, legend: 1},
		{name: "all negative", c: LineChart{Series: []Series{{Points: []Point{{X: 1, Y: -3}, {X: 2, Y: -3}}}}}, markers: 2, lines: 1, legend: 1},
		{name: "huge range", c: LineChart{Series: []Series{{Points: []Point{{X: 1e-300, Y: 1e-300}, {X: 1e300, Y: 1e300}}}}}, markers: 2, lines: 1, legend: 1},
		{name: "huge log range", c: LineChart{LogY: true, Series: []Series{{Points: []Point{{X: 1, Y: 1e-300}, {X: 2, Y: 1e300}}}}}, markers: 2, lines: 1, legend: 1},
		{name: "near max float", c: LineChart{Height: 160, Series: []Series{{Points: []Point{{X: 1, Y: 0}, {X: math.MaxFloat64, Y: 1.75e308}}}}}, markers: 2, lines: 1, legend: 1},
		{name: "log near max float", c: LineChart{LogY: true, Series: []Series{{Points: []Point{{X: 1, Y: 1}, {X: 2, Y: math.MaxFloat64}}}}}, markers: 2, lines: 1, legend: 1},
		{name: "subnormal", c: LineChart{Series: []Series{{Points: []Point{{X: 5e-324, Y: 5e-324}, {X: 1e-323, Y: 0}}}}}, markers: 2, lines: 1, legend: 1},
		{name: "log subnormal", c: LineChart{LogX: true, LogY: true, Series: []Series{{Points: []Point{{X: 5e-324, Y: 5e-324}}}}}, markers: 1, legend: 1},
		{name: "flat huge values", c: LineChart{Series: []Series{{Points: []Point{{X: 1, Y: 1e15}, {X: 2, Y: 1e15 + 1}}}}}, markers: 2, lines: 1, legend: 1},
		{name: "YMin above data", c: LineChart{YMin: ptr(10), Series: []Series{{Points: []Point{{X: 1, Y: 1}, {X: 2, Y: 2}}}}}, markers: 2, lines: 1, legend: 1},
		{name: "many series", c: LineChart{Series: slices.Repeat([]Series{{Points: []Point{{X: 1, Y: 1}}}}, 20)}, markers: 20, legend: 20},
		{name: "categorical one point", c: LineChart{XCategorical: true, Series: []Series{{Points: []Point{{X: 7, Y: 1}}}}}, markers: 1, legend: 1},
		{name: "categorical empty", c: LineChart{XCategorical: true}},
		{name: "bar all zero", c: BarChart{Categories: []string{"a", "b"}, Series: []Series{{Points: []Point{{Y: 0}, {Y: 0}}}}}, bars: 2, legend: 1},
		{name: "bar negative", c: BarChart{Categories: []string{"a", "b"}, Series: []Series{{Points: []Point{{Y: -2}, {Y: 3, YLo: -1, YHi: 4}}}}}, bars: 2, legend: 1},
		{name: "bar only NaN", c: BarChart{Categories: []string{"a"}, Series: []Series{{Points: []Point{{Y: nan}}}}}, legend: 1, noData: true},
		{name: "bar categories only", c: BarChart{Categories: []string{"a", "b"}}},
		{name: "bar long categories", c: BarChart{Categories: slices.Repeat([]string{"a category name far too long for its group"}, 8), Series: []Series{{Points: []Point{{Y: 1}}}}}, bars: 1, legend: 1},

		{name: "negative width", c: LineChart{Width: -1}, wantErr: "negative"},
		{name: "too small", c: LineChart{Width: 100, Height: 80}, wantErr: "leaves"},
		{name: "bar too small", c: BarChart{Width: 50}, wantErr: "leaves"},
		{name: "categorical log", c: LineChart{XCategorical: true, LogX: true}, wantErr: "XCategorical"},
		{name: "YMin NaN", c: LineChart{YMin: ptr(nan)}, wantErr: "YMin"},
		{name: "log YMin zero", c: LineChart{LogY: true, YMin: ptr(0)}, wantErr: "YMin"},
		{name: "log y all zero", c: LineChart{LogY: true, Series: []Series{{Points: []Point{{X: 1, Y: 0}}}}}, wantErr: "LogY"},
		{name: "log x all negative", c: LineChart{LogX: true, Series: []Series{{Points: []Point{{X: -1, Y: 1}}}}}, wantErr: "LogX"},
		{name: "overflowing range", c: LineChart{Series: []Series{{Points: []Point{{X: 1, Y: -1e308}, {X: 2, Y: 1e308}}}}}, wantErr: "overflows"},
		{name: "bar points beyond categories", c: BarChart{Categories: []string{"a"}, Series: []Series{{Name: "s", Points: []Point{{Y: 1}, {Y: 2}}}}}, wantErr: `"s" has 2 points for 1 categories`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := tc.c.SVG()
			if tc.wantErr != "" {
				if !errors.Is(err, ErrChart) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want ErrChart saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			p := parse(t, b)
			got := []int{p.classes["marker"], p.classes["line"], p.classes["bar"], p.classes["legend-entry"]}
			want := []int{tc.markers, tc.lines, tc.bars, tc.legend}
			if !slices.Equal(got, want) {
				t.Errorf("markers, lines, bars, legend entries = %v, want %v", got, want)
			}
			if noData := slices.ContainsFunc(p.texts, func(s string) bool { return strings.HasSuffix(s, "(no data)") }); noData != tc.noData {
				t.Errorf("(no data) in legend: %t, want %t", noData, tc.noData)
			}
		})
	}
}

// TestRandomCharts draws charts of hostile values, seeded so a failure
// repeats: none may panic, and every one that draws must be well-formed
// with no NaN or Inf in it (parse checks both).
func TestRandomCharts(t *testing.T) {
	values := []float64{0, math.Copysign(0, -1), 1, -1, 0.5, 64, 1518, 1e-300, 1e300, -1e300, 1e15, 1e15 + 1,
		math.MaxFloat64, -math.MaxFloat64, math.SmallestNonzeroFloat64, math.NaN(), math.Inf(1), math.Inf(-1)}
	seed, n := uint64(1), 400
	if s := os.Getenv("SVG_RANDOM_SEED"); s != "" { // for longer runs by hand
		seed, _ = strconv.ParseUint(s, 10, 64)
		n = 20000
	}
	r := rand.New(rand.NewPCG(seed, 2))
	v := func() float64 { return values[r.IntN(len(values))] }
	for i := range n {
		var series []Series
		for range r.IntN(4) {
			s := Series{Name: "s", Dashed: r.IntN(2) == 0}
			for range r.IntN(5) {
				s.Points = append(s.Points, Point{X: v(), Y: v(), YLo: v(), YHi: v()})
			}
			series = append(series, s)
		}
		var c chart
		if r.IntN(3) == 0 {
			bc := BarChart{Series: series}
			for range 5 {
				bc.Categories = append(bc.Categories, "c")
			}
			c = bc
		} else {
			lc := LineChart{Series: series, LogX: r.IntN(3) == 0, LogY: r.IntN(3) == 0, XCategorical: r.IntN(4) == 0}
			if r.IntN(3) == 0 {
				lc.XTicks = []float64{v(), v(), v()}
			}
			if r.IntN(4) == 0 {
				lc.YMin = ptr(v())
			}
			c = lc
		}
		b, err := c.SVG()
		if err != nil {
			if !errors.Is(err, ErrChart) {
				t.Errorf("chart %d: error %v does not wrap ErrChart", i, err)
			}
			continue
		}
		parse(t, b)
	}
}

func TestDeterministic(t *testing.T) {
	for name, c := range exampleCharts() {
		t.Run(name, func(t *testing.T) {
			a, err := c.SVG()
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				b, err := c.SVG()
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(a, b) {
					t.Fatal("two renderings of the same chart differ")
				}
			}
		})
	}
}

// TestStyles holds the contract on series styles: the first seven differ
// in both colour and marker, the next seven are dotted.
func TestStyles(t *testing.T) {
	seen := map[string]bool{}
	for i := range len(palette) {
		st := seriesStyle(i, false)
		key := st.color + string(rune('0'+st.marker))
		if seen[key] || st.dash != "" {
			t.Errorf("style %d %+v repeats or is not solid", i, st)
		}
		seen[key] = true
	}
	if st := seriesStyle(len(palette), false); st.dash == "" {
		t.Errorf("style %d is solid, want dotted", len(palette))
	}
	if st := seriesStyle(2, true); st.dash != "7 4" {
		t.Errorf("dashed style has dash %q", st.dash)
	}
}

func exampleCharts() map[string]chart {
	chain := LineChart{
		Title:  "Throughput by chain length, 1518-byte frames",
		XLabel: "bridges in the chain", YLabel: "Gbit/s",
		XTicks: []float64{1, 2, 3, 4, 5, 6, 7, 8, 9},
	}
	for _, s := range []struct {
		name string
		base float64
		drop float64
	}{{"linux-bridge", 9.2, 0.9}, {"ovs", 9.4, 0.55}, {"trestle", 9.41, 0.08}} {
		ser := Series{Name: s.name}
		for n := 1.0; n <= 9; n++ {
			ser.Points = append(ser.Points, Point{X: n, Y: s.base / (1 + s.drop*(n-1)/4)})
		}
		chain.Series = append(chain.Series, ser)
	}

	loss := LineChart{
		Title:  "Loss by offered load, 64-byte frames",
		XLabel: "offered load (% of line rate)", YLabel: "loss (%)",
		Unit: func(v float64) string { return SI(v) + "%" },
	}
	for _, s := range []struct {
		name string
		knee float64
	}{{"linux-bridge", 13}, {"ovs", 24}, {"trestle", 58}} {
		ser := Series{Name: s.name}
		for load := 10.0; load <= 100; load += 10 {
			l := 0.0
			if load > s.knee {
				l = 100 * (load - s.knee) / load
			}
			ser.Points = append(ser.Points, Point{X: load, Y: l})
		}
		loss.Series = append(loss.Series, ser)
	}

	logLoss := LineChart{
		Title:  "Loss ratio by offered load (log scale)",
		XLabel: "offered load (pps)", YLabel: "loss ratio",
		LogX: true, LogY: true,
	}
	for i, name := range []string{"ovs", "trestle"} {
		ser := Series{Name: name}
		for _, pps := range []float64{1e5, 3e5, 1e6, 3e6, 1e7, 1.488e7} {
			ser.Points = append(ser.Points, Point{X: pps, Y: 1e-7 * pps / 1e5 * math.Pow(10, float64(1-i)*math.Log10(pps/1e5))})
		}
		logLoss.Series = append(logLoss.Series, ser)
	}

	iperf := BarChart{
		Title:  "iperf3 TCP throughput by streams (min–max of 5 runs)",
		XLabel: "device under test", YLabel: "Gbit/s",
		Categories: []string{"direct", "linux-bridge", "ovs", "trestle"},
	}
	for _, s := range []struct {
		name string
		vals []float64
	}{
		{"1 stream", []float64{9.41, 6.1, 7.3, 9.2}},
		{"4 streams", []float64{9.42, 8.9, 9.1, 9.4}},
		{"16 streams", []float64{9.38, 7.2, 8.4, 9.35}},
	} {
		ser := Series{Name: s.name}
		for i, v := range s.vals {
			ser.Points = append(ser.Points, Point{Y: v, YLo: v * (0.97 - 0.01*float64(i)), YHi: min(v*1.01, 9.5)})
		}
		iperf.Series = append(iperf.Series, ser)
	}

	streams := BarChart{
		Title:      "Forwarding rate by stream count",
		YLabel:     "packets per second",
		Categories: []string{"1", "2", "4", "8", "16", "32", "64", "128"},
		Series: []Series{
			{Name: "linux-bridge, 64-byte frames", Points: []Point{{Y: 1.1e6}, {Y: 2e6}, {Y: 3.5e6}, {Y: 5.2e6}, {Y: 5.9e6}, {Y: 6e6}, {Y: 5.8e6}, {Y: 5.5e6}}},
			{Name: "trestle, 64-byte frames", Points: []Point{{Y: 4.4e6}, {Y: 8.7e6}, {Y: 14.1e6}, {Y: 14.88e6}, {Y: 14.88e6}, {Y: 14.88e6}, {Y: 14.88e6}, {Y: 14.88e6}}},
		},
	}

	// Stress cases for the eye: more series than colours, so the legend
	// goes below and the second round of styles is dotted; and category
	// names too long for their groups, so the labels slant.
	many := LineChart{Title: "Twelve series, legend below", XLabel: "x", YLabel: "y"}
	for i := range 12 {
		ser := Series{Name: fmt.Sprintf("configuration %d, %d queues", i+1, 1<<(i%5))}
		for x := 0.0; x <= 10; x++ {
			ser.Points = append(ser.Points, Point{X: x, Y: float64(i+1) * (1 + math.Sin(x/3+float64(i))/4) * 1e5})
		}
		many.Series = append(many.Series, ser)
	}
	longCats := BarChart{
		Title: "Long category names", YLabel: "Gbit/s",
		Categories: []string{"direct (veth pair)", "linux-bridge with vlan filtering", "ovs kernel datapath", "ovs-dpdk", "trestle xdp", "trestle tc"},
		Series: []Series{
			{Name: "TCP", Points: []Point{{Y: 9.4}, {Y: 5.1}, {Y: 6.6}, {Y: 9.1}, {Y: 9.3}, {Y: 8.2}}},
			{Name: "UDP", Points: []Point{{Y: 8.1}, {Y: 3.9}, {Y: 5.0}, {Y: 8.8}, {Y: 9.0}, {Y: 7.7}}},
		},
	}

	linear := throughputChart()
	linear.Title = "Throughput by frame size (linear x, log y)"
	linear.XCategorical = false
	linear.LogY = true

	return map[string]chart{
		"throughput-frame-size":  throughputChart(),
		"throughput-linear-logy": linear,
		"throughput-chain":       chain,
		"loss-offered-load":      loss,
		"loss-log":               logLoss,
		"iperf3-bars":            iperf,
		"streams-bars":           streams,
		"stress-many-series":     many,
		"stress-long-categories": longCats,
	}
}

// TestExamples writes the example charts, to t.TempDir() and, if
// SVG_EXAMPLES_DIR is set, there too, for a person to look at:
//
//	SVG_EXAMPLES_DIR=/tmp/charts go test ./internal/lab/report/svg -run Examples
func TestExamples(t *testing.T) {
	dirs := []string{t.TempDir()}
	if d := os.Getenv("SVG_EXAMPLES_DIR"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, d)
	}
	for name, c := range exampleCharts() {
		b, err := c.SVG()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		parse(t, b)
		for _, d := range dirs {
			if err := os.WriteFile(filepath.Join(d, name+".svg"), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
