package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// statTestdata holds the data sets and ministat's golden output.
const statTestdata = "../../internal/lab/stat/testdata"

// goldenSection returns what ministat printed for command in a golden file
// of internal/lab/stat (sections "-- COMMAND --\n" then the output).
func goldenSection(t *testing.T, file, command string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "-- "+command+" --\n")
	if !ok {
		t.Fatalf("%s: no section %q", file, command)
	}
	if i := strings.Index(rest, "\n-- "); i >= 0 {
		rest = rest[:i+1]
	}
	return rest
}

// TestStat runs `trestle stat` in-process through its cobra flags and
// compares with what ministat printed for the same command line: the same
// but for ministat's -c, -n and -w, which trestle spells --confidence,
// --summary-only and --width (its -c, -n and -w are capture's and events').
func TestStat(t *testing.T) {
	t.Chdir(statTestdata) // the legend shows file names as given
	cases := []struct {
		golden string
		args   string // both ministat's and ours
	}{
		{"iguana_chameleon.golden", "iguana.txt chameleon.txt"},
		{"iguana_chameleon.golden", "-c 80 iguana.txt chameleon.txt"},
		{"iguana_chameleon.golden", "-c 99.5 iguana.txt chameleon.txt"},
		{"before_after.golden", "-s -w 100 before.txt after.txt"},
		{"before_after.golden", "-A -c 80 before.txt after.txt"},
		{"same.golden", "-n same_a.txt same_b.txt"},
		{"csv_column2.golden", "-C 2 -d , runs.csv runs_new.csv"},
		{"seven.golden", "-w 40 seven_1.txt seven_2.txt seven_3.txt seven_4.txt seven_5.txt seven_6.txt seven_7.txt"},
	}
	for _, c := range cases {
		want := goldenSection(t, c.golden, "ministat "+c.args)
		got, code := runCLI(t, nil, append([]string{"stat"}, ministatArgs(c.args)...)...)
		if code != 0 || got != want {
			t.Errorf("trestle stat %s: exit %d\ngot\n%s\nwant (ministat)\n%s", c.args, code, got, want)
		}
	}
}

// ministatArgs are a ministat command line's words as trestle stat takes
// them.
func ministatArgs(line string) []string {
	long := map[string]string{"-c": "--confidence", "-n": "--summary-only", "-w": "--width"}
	var out []string
	for _, w := range strings.Fields(line) {
		if l, ok := long[w]; ok {
			w = l
		}
		out = append(out, w)
	}
	return out
}

func TestStatStdin(t *testing.T) {
	in, err := os.ReadFile(statTestdata + "/iguana.txt")
	if err != nil {
		t.Fatal(err)
	}
	want := goldenSection(t, statTestdata+"/iguana_chameleon.golden", "ministat -n iguana.txt chameleon.txt")
	want = strings.Replace(want, "x iguana.txt", "x <stdin>", 1)
	want = strings.Replace(want, "+ chameleon.txt", "+ "+statTestdata+"/chameleon.txt", 1)
	for _, args := range [][]string{{"--summary-only", "-", statTestdata + "/chameleon.txt"}} {
		var out bytes.Buffer
		e := &env{stdout: &out, stderr: &out, getenv: func(string) string { return "" }}
		c := e.statCmd()
		c.SetArgs(args)
		c.SetIn(bytes.NewReader(in))
		if err := c.Execute(); err != nil || out.String() != want {
			t.Errorf("stat %v: %v\ngot\n%s\nwant\n%s", args, err, out.String(), want)
		}
	}
}

func TestStatQuiet(t *testing.T) {
	out, code := runCLI(t, nil, "stat", "-q", "--summary-only", statTestdata+"/iguana.txt", statTestdata+"/chameleon.txt")
	want := "" +
		"x   7            50           750           200           300     238.04761\n" +
		"+   5           150           930           500           540     299.08193\n"
	if code != 0 || out != want {
		t.Errorf("stat -q --summary-only: exit %d\n%s", code, out)
	}
}

func TestStatErrors(t *testing.T) {
	d := statTestdata + "/"
	cases := []struct {
		args []string
		want string
	}{
		{[]string{d + "invalid.txt"}, d + `invalid.txt:4: invalid data: "3x" is not a number`},
		{[]string{d + "single.txt"}, d + "single.txt has 1: need at least 3 data points"},
		{[]string{"--confidence", "85", d + "before.txt", d + "after.txt"}, "--confidence 85: one of 80, 90, 95, 98, 99 or 99.5"},
		{[]string{"-C", "0", d + "before.txt"}, "--column 0: column numbers start at 1"},
		{[]string{"-d", "", d + "before.txt"}, "--delimiters: an empty string separates nothing"},
		{[]string{"--width", "1", d + "before.txt"}, "--width 1: the plot needs a width of at least 2"},
		{[]string{"-c", "99", d + "before.txt"}, "unknown flag -c"},
		{[]string{d + "nope.txt"}, "nope.txt: no such file"},
		{strings.Fields(strings.Repeat(d+"before.txt ", 8)), "8 files: too many data sets"},
	}
	for _, c := range cases {
		out, code := runCLI(t, nil, append([]string{"stat"}, c.args...)...)
		if code == 0 || !strings.Contains(out, c.want) {
			t.Errorf("stat %v: exit %d, %q; want %q", c.args, code, out, c.want)
		}
	}
}

func TestStatHelp(t *testing.T) {
	out, code := runCLI(t, nil, "stat", "--help")
	for _, want := range []string{"ministat", "trestle stat before.txt after.txt", "Difference at 95.0% confidence", "No\ndifference proven", "    --confidence"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("stat --help lacks %q:\n%s", want, out)
		}
	}
}
