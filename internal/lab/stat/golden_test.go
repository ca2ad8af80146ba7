package stat

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// ministat (Debian package ministat 20150715) is the oracle. The golden files
// in testdata hold its output for every case below, with every flag variant;
// they are written by
//
//	go test ./internal/lab/stat -run 'TestGolden|TestErrorCases' -update
//
// which runs /usr/bin/ministat in testdata/ (see testdata/README.md).

var update = flag.Bool("update", false, "rewrite testdata/*.golden by running ministat")

type goldenCase struct {
	name string   // testdata/<name>.golden
	args []string // ministat's arguments (flags and files), run in testdata/
}

var goldenCases = []goldenCase{
	// Unequal N (7 and 5): a difference at 80%, none at 90% and above.
	{"iguana_chameleon", []string{"iguana.txt", "chameleon.txt"}},
	// Equal N, a clear difference at every level.
	{"before_after", []string{"before.txt", "after.txt"}},
	// Equal N, two runs of the same thing: no difference at any level.
	{"same", []string{"same_a.txt", "same_b.txt"}},
	// Negative numbers and a negative base average (negative percentages).
	{"negative", []string{"neg_a.txt", "neg_b.txt"}},
	// A constant set: zero span, no plot; its variance rounds to 1.3e-09.
	{"constant", []string{"constant.txt"}},
	// Three equal values whose variance rounds below zero: stddev -nan, no
	// |___| bar, yet the comparison uses the (negative) variance.
	{"nan_stddev", []string{"nan_stddev.txt", "before.txt"}},
	// -0 and 0: which one is Min and which the Median is the sort's doing.
	{"zeros", []string{"zeros.txt"}},
	// Columns and delimiters.
	{"csv_column2", []string{"-C", "2", "-d", ",", "runs.csv", "runs_new.csv"}},
	{"csv_column3", []string{"-C", "3", "-d", ",", "runs.csv", "runs_new.csv"}},
	{"pps_column2", []string{"-C", "2", "pps.txt"}},
	{"semicolons", []string{"-C", "2", "-d", "; ", "semi.txt"}},
	// Comments, blank lines, CRLF, blanks, signs, exponents, hexadecimal.
	{"messy", []string{"messy.txt"}},
	// All seven plot symbols, and their ORs where sets overlap.
	{"seven", []string{"seven_1.txt", "seven_2.txt", "seven_3.txt", "seven_4.txt", "seven_5.txt", "seven_6.txt", "seven_7.txt"}},
	// 128 degrees of freedom (the t table's infinity row) and tall stacks.
	{"big", []string{"big_a.txt", "big_b.txt"}},
	// Magnitudes where %g turns to exponents.
	{"tiny", []string{"tiny.txt"}},
	{"tiny_huge", []string{"tiny.txt", "huge.txt"}},
	// The plot is as high as the last set needs: the top of tall.txt's
	// stack is cut off in the first, and cleared rows show in the second.
	{"heights", []string{"tall.txt", "flat.txt", "mid.txt"}},
	{"heights2", []string{"tall.txt", "mid.txt", "flat.txt"}},
}

// variants are the flags each case runs with, before its own arguments:
// every confidence level, and each output flag ministat has (-A, -n, -s,
// -w). Debian's ministat has no -q; TestRenderQuiet covers ours.
func variants(c goldenCase) [][]string {
	if len(files(c.args)) == 1 {
		return [][]string{{}, {"-n"}, {"-A"}, {"-s"}, {"-w", "40"}, {"-w", "2"}}
	}
	return [][]string{{}, {"-c", "80"}, {"-c", "90"}, {"-c", "95"}, {"-c", "98"}, {"-c", "99"}, {"-c", "99.5"},
		{"-A"}, {"-n"}, {"-s"}, {"-w", "40"}, {"-s", "-w", "100"}, {"-A", "-c", "80"}, {"-w", "3"}}
}

// files are the file operands of ministat's arguments.
func files(args []string) []string {
	_, f, _, err := parseArgs(args)
	if err != nil {
		panic(err)
	}
	return f
}

// parseArgs reads ministat's command line into our options, as
// cmd/trestle's flags do.
func parseArgs(args []string) (ReadOptions, []string, Options, error) {
	var ro ReadOptions
	var o Options
	var fs []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		arg := func() (string, error) {
			if i+1 == len(args) {
				return "", fmt.Errorf("%s needs a value", a)
			}
			i++
			return args[i], nil
		}
		var v string
		var err error
		switch a {
		case "-A":
			o.NoPlot = true
		case "-n":
			o.SummaryOnly = true
		case "-s":
			o.Separate = true
		case "-q":
			o.Quiet = true
		case "-C", "-w":
			if v, err = arg(); err == nil {
				var n int
				n, err = strconv.Atoi(v)
				if a == "-C" {
					ro.Column = n
				} else {
					o.Width = n
				}
			}
		case "-c":
			if v, err = arg(); err == nil {
				o.Level, err = strconv.ParseFloat(v, 64)
			}
		case "-d":
			ro.Delimiters, err = arg()
		default:
			if strings.HasPrefix(a, "-") && a != "-" {
				err = fmt.Errorf("unknown flag %s", a)
			}
			fs = append(fs, a)
		}
		if err != nil {
			return ro, nil, o, err
		}
	}
	return ro, fs, o, nil
}

// runOurs is `ministat args` in dir, done by this package; stdin, if not
// nil, is standard input.
func runOurs(dir string, args []string, stdin []byte) (string, error) {
	ro, fs, o, err := parseArgs(args)
	if err != nil {
		return "", err
	}
	if len(fs) == 0 {
		fs = []string{"-"}
	}
	var sets []Set
	for _, f := range fs {
		var s Set
		if f == "-" {
			s, err = Read(bytes.NewReader(stdin), StdinName, ro)
		} else {
			var fh *os.File
			if fh, err = os.Open(filepath.Join(dir, f)); err != nil {
				return "", err
			}
			s, err = Read(fh, f, ro)
			fh.Close()
		}
		if err != nil {
			return "", err
		}
		sets = append(sets, s)
	}
	var out bytes.Buffer
	err = Render(&out, sets, o)
	return out.String(), err
}

// runMinistat runs the real ministat in dir.
func runMinistat(t *testing.T, dir string, args []string, stdin []byte) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command("ministat", args...)
	cmd.Dir = dir
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("run ministat %s: %v", strings.Join(args, " "), err)
	}
	return o.String(), e.String(), code
}

func needMinistat(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("ministat"); err != nil {
		t.Skip("ministat is not installed (apt-get install ministat, or scripts/deps.sh): skipping the live comparison")
	}
}

// label is a section header's command, quoted for a shell.
func label(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsFunc(a, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.,/", r))
		}) {
			a = "'" + a + "'"
		}
		q[i] = a
	}
	return "ministat " + strings.Join(q, " ")
}

// Golden files are sections "-- COMMAND --\n" followed by exactly what the
// command printed.
func writeGolden(path string, sections [][2]string) error {
	var b bytes.Buffer
	for _, s := range sections {
		fmt.Fprintf(&b, "-- %s --\n%s", s[0], s[1])
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

func readGolden(path string) (map[string]string, []string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	sections := map[string]string{}
	var order []string
	cur := ""
	for _, line := range strings.SplitAfter(string(data), "\n") {
		if h, ok := strings.CutPrefix(line, "-- "); ok && strings.HasSuffix(h, " --\n") {
			cur = strings.TrimSuffix(h, " --\n")
			order = append(order, cur)
			continue
		}
		if cur == "" && line != "" {
			return nil, nil, fmt.Errorf("%s: text before the first section", path)
		}
		sections[cur] += line
	}
	return sections, order, nil
}

func caseCommands(c goldenCase) [][]string {
	var cmds [][]string
	for _, v := range variants(c) {
		cmds = append(cmds, append(append([]string{}, v...), c.args...))
	}
	return cmds
}

// firstDiff describes where two outputs part.
func firstDiff(got, want string) string {
	g, w := strings.SplitAfter(got, "\n"), strings.SplitAfter(want, "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d:\n got  %q\n want %q\nwhole output:\n%s", i+1, gl, wl, got)
		}
	}
	return ""
}

func TestGolden(t *testing.T) {
	for _, c := range goldenCases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join("testdata", c.name+".golden")
			if *update {
				needMinistat(t)
				var sections [][2]string
				for _, args := range caseCommands(c) {
					out, errOut, code := runMinistat(t, "testdata", args, nil)
					if code != 0 || errOut != "" {
						t.Fatalf("%s: exit %d: %s", label(args), code, errOut)
					}
					sections = append(sections, [2]string{label(args), out})
				}
				if err := writeGolden(path, sections); err != nil {
					t.Fatal(err)
				}
			}
			golden, order, err := readGolden(path)
			if err != nil {
				t.Fatal(err)
			}
			cmds := caseCommands(c)
			if len(order) != len(cmds) {
				t.Errorf("%s has %d sections, the case has %d commands: run with -update", path, len(order), len(cmds))
			}
			for _, args := range cmds {
				want, ok := golden[label(args)]
				if !ok {
					t.Errorf("%s: no section for %q: run with -update", path, label(args))
					continue
				}
				got, err := runOurs("testdata", args, nil)
				if err != nil {
					t.Errorf("%s: %v", label(args), err)
					continue
				}
				if got != want {
					t.Errorf("%s differs from ministat's output at %s", label(args), firstDiff(got, want))
				}
			}
		})
	}
}

// errorCases are inputs ministat refuses. Our messages differ on purpose
// (they say file:line), so only the failure is compared; errors.golden keeps
// ministat's own messages and exit codes for reference.
var errorCases = []struct {
	args []string
	err  error  // errors.Is
	msg  string // in our error text
}{
	{[]string{"single.txt"}, ErrTooFewPoints, "single.txt has 1"},
	{[]string{"invalid.txt"}, ErrInvalidData, `invalid.txt:4: invalid data: "3x"`},
	{[]string{"-C", "9", "runs.csv"}, ErrTooFewPoints, "runs.csv has 0"},
	{[]string{"-c", "85", "before.txt", "after.txt"}, ErrLevel, "85%"},
	{[]string{"before.txt", "after.txt", "iguana.txt", "chameleon.txt", "same_a.txt", "same_b.txt", "neg_a.txt", "neg_b.txt"}, ErrTooManySets, "8 sets"},
	{[]string{"no-such-file.txt"}, os.ErrNotExist, "no-such-file.txt"},
}

func TestErrorCases(t *testing.T) {
	path := filepath.Join("testdata", "errors.golden")
	if *update {
		needMinistat(t)
		var sections [][2]string
		for _, c := range errorCases {
			out, errOut, code := runMinistat(t, "testdata", c.args, nil)
			if code == 0 {
				t.Fatalf("%s succeeded:\n%s", label(c.args), out)
			}
			sections = append(sections, [2]string{label(c.args), fmt.Sprintf("%s[exit status %d]\n", errOut, code)})
		}
		if err := writeGolden(path, sections); err != nil {
			t.Fatal(err)
		}
	}
	golden, _, err := readGolden(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range errorCases {
		if g, ok := golden[label(c.args)]; !ok || strings.Contains(g, "[exit status 0]") {
			t.Errorf("%s: errors.golden does not show ministat failing: run with -update", label(c.args))
		}
		_, err := runOurs("testdata", c.args, nil)
		if !errors.Is(err, c.err) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: error %v, want %v containing %q", label(c.args), err, c.err, c.msg)
		}
	}
}

// TestLiveMinistat runs the installed ministat on every golden command and
// compares, so the golden files cannot drift from the binary unnoticed.
func TestLiveMinistat(t *testing.T) {
	needMinistat(t)
	for _, c := range goldenCases {
		for _, args := range caseCommands(c) {
			want, errOut, code := runMinistat(t, "testdata", args, nil)
			if code != 0 {
				t.Errorf("%s: ministat exit %d: %s", label(args), code, errOut)
				continue
			}
			got, err := runOurs("testdata", args, nil)
			if err != nil || got != want {
				t.Errorf("%s: %v, differs at %s", label(args), err, firstDiff(got, want))
			}
		}
	}
	for _, c := range errorCases {
		if _, _, code := runMinistat(t, "testdata", c.args, nil); code == 0 {
			t.Errorf("%s: ministat accepts what we refuse", label(c.args))
		}
	}
	// Bad lines are reported on the same line number, counting a line of
	// more than 8191 bytes as two, as ministat's fgets does.
	dir := t.TempDir()
	long := "1\n" + strings.Repeat(" ", 8191) + "5\n2\nbad\n"
	if err := os.WriteFile(filepath.Join(dir, "long.txt"), []byte(long), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ dir, file string }{{"testdata", "invalid.txt"}, {dir, "long.txt"}} {
		_, errOut, _ := runMinistat(t, c.dir, []string{c.file}, nil)
		var line int
		if _, err := fmt.Sscanf(errOut, "ministat: Invalid data on line %d", &line); err != nil {
			t.Fatalf("%s: ministat said %q", c.file, errOut)
		}
		_, err := runOurs(c.dir, []string{c.file}, nil)
		if want := fmt.Sprintf("%s:%d: ", c.file, line); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: ministat reports line %d, we say %v", c.file, line, err)
		}
	}
	// Standard input, with no file and with "-": the legend says <stdin>.
	in, err := os.ReadFile("testdata/iguana.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{}, {"-"}, {"-s", "-w", "50", "-"}, {"-", "chameleon.txt"}} {
		want, _, _ := runMinistat(t, "testdata", args, in)
		if got, err := runOurs("testdata", args, in); err != nil || got != want {
			t.Errorf("stdin %s: %v, differs at %s", label(args), err, firstDiff(got, want))
		}
	}
}

// TestLiveRandom compares with ministat on random data sets: sizes, spreads,
// stacks of equal values, signs, magnitudes, widths and levels.
func TestLiveRandom(t *testing.T) {
	needMinistat(t)
	dir := t.TempDir()
	r := rand.New(rand.NewSource(74))
	runs := 400
	if testing.Short() {
		runs = 50
	}
	for run := 0; run < runs; run++ {
		nsets := 1 + r.Intn(4)
		if r.Intn(10) == 0 {
			nsets = 5 + r.Intn(3)
		}
		var args []string
		switch r.Intn(6) {
		case 0:
			args = append(args, "-s")
		case 1:
			args = append(args, "-A")
		case 2:
			args = append(args, "-n")
		}
		args = append(args, "-w", strconv.Itoa([]int{2, 3, 7, 20, 40, 74, 74, 120, 200}[r.Intn(9)]))
		args = append(args, "-c", strconv.FormatFloat(Levels[r.Intn(len(Levels))], 'g', -1, 64))
		scale := math.Pow(10, float64(r.Intn(16)-8))
		for k := 0; k < nsets; k++ {
			name := fmt.Sprintf("set%d.txt", k)
			n := 3 + r.Intn(40)
			if r.Intn(8) == 0 {
				n = 100 + r.Intn(100)
			}
			mean := (r.Float64()*200 - 100) * scale
			sd := r.Float64() * 20 * scale
			var b strings.Builder
			for i := 0; i < n; i++ {
				v := mean + r.NormFloat64()*sd
				switch r.Intn(4) {
				case 0: // stacks of equal values
					v = math.Round(v / scale)
				case 1:
					v = float64(float32(v))
				}
				b.WriteString(strconv.FormatFloat(v, 'g', -1, 64) + "\n")
			}
			if err := os.WriteFile(filepath.Join(dir, name), []byte(b.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			args = append(args, name)
		}
		want, errOut, code := runMinistat(t, dir, args, nil)
		if code != 0 {
			t.Fatalf("run %d, %s: ministat exit %d: %s", run, label(args), code, errOut)
		}
		got, err := runOurs(dir, args, nil)
		if err != nil || got != want {
			t.Fatalf("run %d, %s: %v, differs at %s", run, label(args), err, firstDiff(got, want))
		}
	}
}
