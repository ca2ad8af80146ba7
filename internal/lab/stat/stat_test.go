package stat

import (
	"bytes"
	"errors"
	"math"
	"os"
	"strings"
	"testing"
)

// Hand-computed checks, so that the tests do not only trust the oracle.

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestSummarize(t *testing.T) {
	cases := []struct {
		name   string
		values []float64
		want   Summary // Variance and Stddev checked to 1e-6
	}{
		// The ministat(1) manual page example: 2100/7 = 300; sum of squares
		// 970000 - 2100²/7 = 340000, /6 = 56666.67, sqrt = 238.04761.
		{"iguana", []float64{50, 200, 150, 400, 750, 400, 150}, Summary{N: 7, Min: 50, Max: 750, Median: 200, Avg: 300, Stddev: 238.0476143, Variance: 56666.666667}},
		// 2700/5 = 540; 1815800 - 2700²/5 = 357800, /4 = 89450.
		{"chameleon", []float64{150, 400, 720, 500, 930}, Summary{N: 5, Min: 150, Max: 930, Median: 500, Avg: 540, Stddev: 299.0819288, Variance: 89450}},
		// Even N: ministat takes points[n/2], the upper middle value, not
		// the mean of the two middle ones (which would be 2.5).
		{"even", []float64{4, 1, 3, 2}, Summary{N: 4, Min: 1, Max: 4, Median: 3, Avg: 2.5, Stddev: 1.2909944, Variance: 5.0 / 3}},
		// -3, -1, 2: avg -2/3; squares 14 - 4/3 = 38/3, /2 = 19/3.
		{"negative", []float64{2, -3, -1}, Summary{N: 3, Min: -3, Max: 2, Median: -1, Avg: -2.0 / 3, Stddev: math.Sqrt(19.0 / 3), Variance: 19.0 / 3}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Summarize(Set{Name: c.name, Values: c.values})
			if err != nil {
				t.Fatal(err)
			}
			if got.N != c.want.N || got.Min != c.want.Min || got.Max != c.want.Max || got.Median != c.want.Median ||
				!near(got.Avg, c.want.Avg, 1e-12) || !near(got.Stddev, c.want.Stddev, 1e-6) || !near(got.Variance, c.want.Variance, 1e-6) {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestSummarizeTooFew(t *testing.T) {
	_, err := Summarize(Set{Name: "two", Values: []float64{1, 2}})
	if !errors.Is(err, ErrTooFewPoints) || !strings.Contains(err.Error(), "two") {
		t.Errorf("two points: %v", err)
	}
}

// The order -0 and 0 end up in is glibc's merge sort's: stable.
func TestSortKeepsEqualOrder(t *testing.T) {
	s, err := Summarize(Set{Values: []float64{0, math.Copysign(0, -1), 1}})
	if err != nil {
		t.Fatal(err)
	}
	if math.Signbit(s.Min) || !math.Signbit(s.Median) {
		t.Errorf("min %v (want 0), median %v (want -0)", s.Min, s.Median)
	}
}

func TestStudentT(t *testing.T) {
	cases := []struct {
		df    int
		level float64
		want  float64
	}{
		{1, 80, 3.078},
		{10, 95, 2.228},
		{10, 99.5, 4.143},
		{100, 99.5, 3.174},
		{101, 95, 1.960}, // above 100: the infinity row
		{5000, 80, 1.282},
	}
	for _, c := range cases {
		got, err := StudentT(c.df, c.level)
		if err != nil || got != c.want {
			t.Errorf("StudentT(%d, %g) = %g, %v; want %g", c.df, c.level, got, err, c.want)
		}
	}
	if _, err := StudentT(10, 97.5); !errors.Is(err, ErrLevel) {
		t.Errorf("level 97.5: %v, want ErrLevel", err)
	}
	if _, err := StudentT(0, 95); err == nil {
		t.Error("0 degrees of freedom: no error")
	}
}

func TestCompare(t *testing.T) {
	iguana, _ := Summarize(Set{Values: []float64{50, 200, 150, 400, 750, 400, 150}})
	chameleon, _ := Summarize(Set{Values: []float64{150, 400, 720, 500, 930}})
	// By hand: df = 10; pooled variance (4*89450 + 6*56666.67)/10 = 69780,
	// s = 264.159; its standard error 264.159*sqrt(1/5+1/7) = 154.676.
	// At 80%, t = 1.372: 240 +/- 212.215, 80% +/- 70.7384% (of 300), the
	// manual page's figures. At 95%, t = 2.228: +/- 344.62, not proven.
	const se = 154.67568
	cases := []struct {
		level  float64
		t      float64
		proven bool
	}{
		{80, 1.372, true},
		{90, 1.812, false},
		{95, 2.228, false},
		{98, 2.764, false},
		{99, 3.169, false},
		{99.5, 4.143, false},
	}
	for _, c := range cases {
		got, err := Compare(iguana, chameleon, c.level)
		if err != nil {
			t.Fatal(err)
		}
		if got.DF != 10 || got.T != c.t || got.Diff != 240 || got.Proven != c.proven ||
			!near(got.PooledS, 264.1590, 1e-4) || !near(got.Interval, c.t*se, 1e-3) ||
			got.Percent != 80 || !near(got.PercentInterval, c.t*se/3, 1e-3) {
			t.Errorf("level %g: %+v", c.level, got)
		}
	}
	if _, err := Compare(iguana, chameleon, 42); !errors.Is(err, ErrLevel) {
		t.Errorf("level 42: %v", err)
	}
}

func TestCG(t *testing.T) {
	cases := []struct {
		v    float64
		prec int
		want string
	}{
		{300, 8, "300"},
		{238.04761428, 8, "238.04761"},
		{0.0015165751, 8, "0.0015165751"},
		{1.317089e-09, 8, "1.317089e-09"},
		{1e8, 8, "1e+08"},
		{99999999.5, 8, "1e+08"},
		{12345678.9, 8, "12345679"},
		{0.125, 2, "0.12"}, // glibc rounds a tie to even
		{math.Copysign(0, -1), 6, "-0"},
		{math.Inf(1), 6, "inf"},
		{math.Inf(-1), 6, "-inf"},
		{math.NaN(), 6, "nan"},
		{math.Copysign(math.NaN(), -1), 6, "-nan"},
	}
	for _, c := range cases {
		if got := cG(c.v, c.prec); got != c.want {
			t.Errorf("cG(%v, %d) = %q, want %q", c.v, c.prec, got, c.want)
		}
	}
}

func TestParseCDouble(t *testing.T) {
	cases := []struct {
		in   string
		want float64
		ok   bool
	}{
		{"12", 12, true},
		{"+13.5", 13.5, true},
		{"-0.25", -0.25, true},
		{"14.", 14, true},
		{".5e2", 50, true},
		{"1E-3", 0.001, true},
		{"  7", 7, true}, // strtod skips leading white space
		{"0x10", 16, true},
		{"0X1.8p1", 3, true},
		{"-0x.8", -0.5, true},
		{"1e400", math.Inf(1), true},
		{"INF", math.Inf(1), true},
		{"-Infinity", math.Inf(-1), true},
		{"1e-400", 0, true},
		{"3x", 0, false},
		{"1e", 0, false},
		{"1e+", 0, false},
		{".", 0, false},
		{"+", 0, false},
		{"0x", 0, false},
		{"0x1p", 0, false},
		{"infinit", 0, false},
		{"1_000", 0, false},
		{"7 ", 0, false}, // trailing blanks are the reader's to strip, not strtod's
		{"", 0, false},
	}
	for _, c := range cases {
		got, ok := parseCDouble(c.in)
		if ok != c.ok || ok && got != c.want {
			t.Errorf("parseCDouble(%q) = %v, %v; want %v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
	for _, in := range []string{"nan", "NaN(123abc)", "-nan"} {
		got, ok := parseCDouble(in)
		if !ok || !math.IsNaN(got) || math.Signbit(got) != strings.HasPrefix(in, "-") {
			t.Errorf("parseCDouble(%q) = %v, %v", in, got, ok)
		}
	}
	if _, ok := parseCDouble("nan(1"); ok {
		t.Error(`parseCDouble("nan(1") accepted`)
	}
}

func TestRead(t *testing.T) {
	cases := []struct {
		name  string
		input string
		opts  ReadOptions
		want  []float64
		err   error  // errors.Is
		msg   string // in the error text
	}{
		{name: "plain", input: "1\n2\n3\n", want: []float64{1, 2, 3}},
		{name: "no final newline", input: "1\n2\n3", want: []float64{1, 2, 3}},
		{name: "comments and blanks", input: "# head\n\n1 # one\n  \n2\r\n#3\n3\t\n", want: []float64{1, 2, 3}},
		{name: "column", input: "a 1 x\nb 2 y\nc\nd 3 z\n", opts: ReadOptions{Column: 2}, want: []float64{1, 2, 3}},
		{name: "column after a comment", input: "1 # 9\n2 5\n3 6\n4 7\n", opts: ReadOptions{Column: 2}, want: []float64{5, 6, 7}},
		{name: "delimiters", input: "1,,10\n2;20\n3, 30\n", opts: ReadOptions{Column: 2, Delimiters: ",;"}, want: []float64{10, 20, 30}},
		{name: "NUL ends the line", input: "1\n2\x00junk\n3\n", want: []float64{1, 2, 3}},
		{name: "invalid", input: "1\n2\n\n3x\n", err: ErrInvalidData, msg: "in.txt:4: "},
		{name: "too few", input: "1\n2\n", err: ErrTooFewPoints, msg: "in.txt has 2"},
		{name: "column missing everywhere", input: "1\n2\n3\n", opts: ReadOptions{Column: 2}, err: ErrTooFewPoints},
		// fgets(buf, 8192) splits a line longer than 8191 bytes and ministat
		// counts each piece as a line: 8191 blanks, then "5", so the bad
		// field of the fourth line is reported on line 5, as ministat does.
		{name: "long line", input: "1\n" + strings.Repeat(" ", 8191) + "5\n2\nbad\n", err: ErrInvalidData, msg: "in.txt:5: "},
		{name: "long line values", input: "1\n" + strings.Repeat(" ", 8191) + "5\n2\n", want: []float64{1, 5, 2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := Read(strings.NewReader(c.input), "in.txt", c.opts)
			if c.err != nil {
				if !errors.Is(err, c.err) || !strings.Contains(err.Error(), c.msg) {
					t.Fatalf("error %v, want %v containing %q", err, c.err, c.msg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.Name != "in.txt" || len(s.Values) != len(c.want) {
				t.Fatalf("got %+v, want values %v", s, c.want)
			}
			for i := range c.want {
				if s.Values[i] != c.want[i] {
					t.Fatalf("got %v, want %v", s.Values, c.want)
				}
			}
		})
	}
}

func TestReadFileMissing(t *testing.T) {
	_, err := ReadFile("testdata/no-such-file.txt", ReadOptions{})
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "no-such-file.txt") {
		t.Errorf("missing file: %v", err)
	}
}

func TestRenderErrors(t *testing.T) {
	three := Set{Name: "three", Values: []float64{1, 2, 3}}
	cases := []struct {
		name string
		sets []Set
		opts Options
		err  error
		msg  string
	}{
		{"no sets", nil, Options{}, nil, "no data sets"},
		{"eight sets", []Set{three, three, three, three, three, three, three, three}, Options{}, ErrTooManySets, ""},
		{"level", []Set{three, three}, Options{Level: 85}, ErrLevel, "85%"},
		{"width 1", []Set{three}, Options{Width: 1}, nil, "width 1"},
		{"two points", []Set{three, {Name: "pair", Values: []float64{1, 2}}}, Options{}, ErrTooFewPoints, "pair"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			err := Render(&out, c.sets, c.opts)
			if err == nil || c.err != nil && !errors.Is(err, c.err) || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("error %v, want %v containing %q", err, c.err, c.msg)
			}
		})
	}
}

// -q is in current FreeBSD ministat, not in Debian's 20150715 that the
// golden files come from: it drops the legend and the table header.
func TestRenderQuiet(t *testing.T) {
	sets := []Set{
		{Name: "iguana", Values: []float64{50, 200, 150, 400, 750, 400, 150}},
		{Name: "chameleon", Values: []float64{150, 400, 720, 500, 930}},
	}
	var out bytes.Buffer
	if err := Render(&out, sets, Options{Quiet: true, SummaryOnly: true}); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"x   7            50           750           200           300     238.04761\n" +
		"+   5           150           930           500           540     299.08193\n"
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}

// The manual page's example, as it prints it (-s -w 60 at 80%).
func TestRenderManualExample(t *testing.T) {
	sets := []Set{
		{Name: "iguana", Values: []float64{50, 200, 150, 400, 750, 400, 150}},
		{Name: "chameleon", Values: []float64{150, 400, 720, 500, 930}},
	}
	var out bytes.Buffer
	if err := Render(&out, sets, Options{Separate: true, Width: 60, Level: 80}); err != nil {
		t.Fatal(err)
	}
	want := `x iguana
+ chameleon
+------------------------------------------------------------+
|x      *  x            *      +              + x           +|
| |________M______A_______________|                          |
|             |________________M__A___________________|      |
+------------------------------------------------------------+
    N           Min           Max        Median           Avg        Stddev
x   7            50           750           200           300     238.04761
+   5           150           930           500           540     299.08193
Difference at 80.0% confidence
	240 +/- 212.215
	80% +/- 70.7384%
	(Student's t, pooled s = 264.159)
`
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}
