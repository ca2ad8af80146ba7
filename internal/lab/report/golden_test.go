package report

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trestle/trestle/internal/lab"
)

// The golden tests hold every scenario's output to what it is: each run in
// testdata/runs is a recorded lab run (from docs/lab, read and written
// again by the lab's own JSON encoding, gzipped), and testdata/golden/NAME
// holds what the report makes of it: the terminal's table (terminal.txt),
// report.md and every chart, byte for byte. Rewrite them, after a change
// meant to alter a report, with
//
//	go test ./internal/lab/report -run TestGolden -update
//
// and add a run (or take a new one of docs/lab) with
//
//	go test ./internal/lab/report -run TestGolden -take NAME
var (
	update = flag.Bool("update", false, "rewrite testdata/golden from the runs in testdata/runs")
	take   = flag.String("take", "", "comma-separated names of docs/lab/NAME.json to copy into testdata/runs")
)

// goldenRuns are the recorded runs: one of every scenario (flood's test
// is in speed's run), and the variants whose reports take other paths
// (both ways, the split placement, a unit per size, a run from before the
// floor had a column, a control soak, a filter-scale of one count), and
// idle, a kind registered with a report section of its own (lab.Reporter;
// its run was made by the lab itself, not kept in docs/lab).
var goldenRuns = []string{
	"quick", "quick-floor", "router-pps", "router-pps-bidir", "router-pps-split-partial",
	"rfc2544", "rfc2544-bysize", "rfc2889", "speed", "fdb-scale", "veb-vs-bridge", "inline",
	"chain", "restart", "mac-flood", "soak", "soak-control", "mirror", "filter-scale",
	"filter-scale-100", "vlan-overhead", "cores", "idle", "multicast",
}

func runPath(name string) string { return filepath.Join("testdata", "runs", name+".json.gz") }

// takeRun copies docs/lab/NAME.json into testdata/runs, in the shape the
// lab writes today (fields added since the run was recorded appear with
// their zero values where they have no omitempty).
func takeRun(t *testing.T, name string) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "lab", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var run lab.Run
	if err := json.Unmarshal(b, &run); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	out, err := json.MarshalIndent(&run, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	var z bytes.Buffer
	w, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
	w.Write(out)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(runPath(name)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(runPath(name), z.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// readRun is a recorded run's JSON, and the run read from it.
func readRun(t *testing.T, name string) ([]byte, *lab.Run) {
	t.Helper()
	f, err := os.Open(runPath(name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	b, err := io.ReadAll(z)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var run lab.Run
	if err := json.Unmarshal(b, &run); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return b, &run
}

// TestGoldenJSON: a recorded run read and written again is the same
// bytes, so the JSON the lab writes keeps its shape (names, order, what is
// left out when empty) through any change to the types behind it.
func TestGoldenJSON(t *testing.T) {
	for _, name := range goldenRuns {
		t.Run(name, func(t *testing.T) {
			b, run := readRun(t, name)
			out, err := json.MarshalIndent(run, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out, b) {
				t.Errorf("%s: written again, the JSON differs from the recorded run at byte %d:\n%s", name, firstDiff(out, b), around(out, firstDiff(out, b)))
			}
		})
	}
}

// TestGoldenReports: every recorded run's terminal table, report.md and
// charts are the golden files, byte for byte.
func TestGoldenReports(t *testing.T) {
	if *take != "" {
		for _, name := range strings.Split(*take, ",") {
			takeRun(t, strings.TrimSpace(name))
		}
	}
	for _, name := range goldenRuns {
		t.Run(name, func(t *testing.T) {
			_, run := readRun(t, name)
			got := map[string][]byte{}
			var term bytes.Buffer
			Terminal(&term, run)
			got["terminal.txt"] = term.Bytes()
			dir := t.TempDir()
			if err := Write(dir, run); err != nil {
				t.Fatal(err)
			}
			files, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range files {
				b, err := os.ReadFile(filepath.Join(dir, f.Name()))
				if err != nil {
					t.Fatal(err)
				}
				got[f.Name()] = b
			}
			golden := filepath.Join("testdata", "golden", name)
			if *update {
				if err := os.RemoveAll(golden); err != nil {
					t.Fatal(err)
				}
				if err := os.MkdirAll(golden, 0o755); err != nil {
					t.Fatal(err)
				}
				for f, b := range got {
					if err := os.WriteFile(filepath.Join(golden, f), b, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				return
			}
			want, err := os.ReadDir(golden)
			if err != nil {
				t.Fatalf("%v (write the golden files with -update)", err)
			}
			for _, f := range want {
				if _, ok := got[f.Name()]; !ok {
					t.Errorf("%s: the report no longer writes %s", name, f.Name())
				}
			}
			for f, b := range got {
				w, err := os.ReadFile(filepath.Join(golden, f))
				if err != nil {
					t.Errorf("%s: the report writes %s, which has no golden file", name, f)
					continue
				}
				if !bytes.Equal(b, w) {
					i := firstDiff(b, w)
					t.Errorf("%s/%s differs from its golden file at byte %d:\ngot:  %s\nwant: %s", name, f, i, around(b, i), around(w, i))
				}
			}
		})
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// around is the line of b that holds byte i.
func around(b []byte, i int) string {
	if i > len(b) {
		i = len(b)
	}
	start := bytes.LastIndexByte(b[:i], '\n') + 1
	end := bytes.IndexByte(b[i:], '\n')
	if end < 0 {
		end = len(b) - i
	}
	return string(b[start : i+end])
}
