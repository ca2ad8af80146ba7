package overlay

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/trestle/trestle/internal/lab"
	"github.com/trestle/trestle/internal/lab/labtest"
)

func TestMain(m *testing.M) { labtest.Main(m) }

// TestOverlayKind: the overlay kind is registered with its preset and its
// own section; --stations sets its count and refuses bad ones and any
// other scenario, --streams sets its iperf3 streams; Prepare refuses
// DUTs with no overlay here and knobs its topology has no place for.
func TestOverlayKind(t *testing.T) {
	if lab.KindOf(lab.TestOverlay) == nil || !lab.OwnSection(lab.TestOverlay) {
		t.Fatalf("overlay: registered %v, own section %v", lab.KindOf(lab.TestOverlay) != nil, lab.OwnSection(lab.TestOverlay))
	}
	s, ok := lab.Scenarios["overlay"]
	if !ok || !s.Has(lab.TestOverlay) || !slices.Equal(lab.SpecTexts(s.DUTs), []string{"linux-bridge", "trestle:xdp", "trestle"}) {
		t.Fatalf("overlay preset: %+v", s)
	}
	if d := s.Describe(); !strings.Contains(d, "VNI 1000, h1 behind A, h2 behind B; 10 new stations timed") || !strings.Contains(d, "iperf3 TCP streams 1 4 through the overlay") {
		t.Errorf("describe:\n%s", d)
	}
	flags := func(sc string, args ...string) (lab.Scenario, error) {
		f := pflag.NewFlagSet("lab", pflag.ContinueOnError)
		lab.DeclareFlags(f)
		if err := f.Parse(args); err != nil {
			return lab.Scenario{}, err
		}
		out := lab.Scenarios[sc]
		err := out.SetFlags(f)
		return out, err
	}
	got, err := flags("overlay", "--stations", "4", "--streams", "2")
	if k, _ := lab.TestOf[Kind](got); err != nil || k.stations() != 4 || !slices.Equal(k.Streams, []int{2}) {
		t.Errorf("--stations 4 --streams 2: %+v, %v", k, err)
	}
	if k, _ := lab.TestOf[Kind](lab.Scenarios["overlay"]); k.stations() != OverlayStationsDefault || !slices.Equal(k.Streams, []int{1, 4}) {
		t.Errorf("the flags changed the preset: %+v", k)
	}
	for _, bad := range []string{"0", "1001", "-3"} {
		if _, err := flags("overlay", "--stations", bad); err == nil || !strings.Contains(err.Error(), "--stations") {
			t.Errorf("--stations %s: %v, want refused", bad, err)
		}
	}
	if _, err := flags("quick", "--stations", "3"); err == nil || !strings.Contains(err.Error(), "overlay scenario") {
		t.Errorf("--stations on quick: %v", err)
	}
	if q, err := flags("quick", "--streams", "3"); err != nil || q.Has(lab.TestOverlay) {
		t.Errorf("--streams on quick: %v, %v", q.Tests, err)
	}
	if _, err := os.Stat(lab.FRRBGPd); err == nil {
		notes, err := s.PrepareKinds()
		if err != nil || len(notes) != 1 || !strings.Contains(notes[0], "at 50% of the DUT's NDR") {
			t.Errorf("prepare: %q, %v", notes, err)
		}
	}
	for dut, want := range map[string]string{
		"ovs":              "not ovs",
		"direct":           "not direct",
		"trestle:xdp@vlan": "only bin= and offloads",
		"linux-bridge:nft": "only bin= and offloads",
		"trestle@veth":     "only bin= and offloads",
	} {
		sc := s
		specs, err := parseSpecs(dut)
		if err != nil {
			if want != "" {
				t.Errorf("%s: %v", dut, err)
			}
			continue
		}
		sc.DUTs = specs
		if _, err := sc.PrepareKinds(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want refused with %q", dut, err, want)
		}
	}
}

// parseSpecs is MustSpecs with the error, for the tests' bad specs.
func parseSpecs(texts ...string) ([]lab.Spec, error) {
	var out []lab.Spec
	for _, t := range texts {
		v, err := lab.ParseSpec(t)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// TestOverlaySection: the overlay table from recorded results: medians
// over the repetitions, the stations pooled, each restart's loss, a DUT
// not run with its reason, a failed measure counted apart, the goals
// checked; the records survive the JSON.
func TestOverlaySection(t *testing.T) {
	res := func(dut string, rep int, rec OverlayRecord, errText string) lab.Result {
		r := lab.Result{DUT: dut, Rep: rep, Test: lab.TestOverlay, Param: rec.Measure, Error: errText}
		if err := r.SetRecord(rec); err != nil {
			t.Fatal(err)
		}
		return r
	}
	ev := func(lost int64) *lab.RestartEvent {
		return &lab.RestartEvent{Kind: lab.EventSIGTERM, Sent: 1000, Lost: lost}
	}
	var results []lab.Result
	for rep, f := range []float64{1, 1.2} {
		results = append(results,
			res("linux-bridge", rep+1, OverlayRecord{Measure: OverlayThroughput, NDR: 100e3 * f, PDR: 110e3 * f}, ""),
			res("linux-bridge", rep+1, OverlayRecord{Measure: OverlayTCP, Streams: 1, Bps: 8e9 * f}, ""),
			res("linux-bridge", rep+1, OverlayRecord{Measure: OverlayBroadcast, Sinks: 3, NDR: 50e3 * f}, ""),
			res("linux-bridge", rep+1, OverlayRecord{Measure: OverlayConverge, SamplesMs: []float64{50 * f, 60 * f}}, ""),
			res("linux-bridge", rep+1, OverlayRecord{Measure: OverlayMove, SamplesMs: []float64{40 * f}}, ""),
			res("linux-bridge", rep+1, OverlayRecord{Measure: OverlayFRR, Event: ev(70000)}, ""),
			res("trestle", rep+1, OverlayRecord{Measure: OverlayThroughput, NDR: 150e3 * f, PDR: 160e3 * f, Settings: map[string]string{"host A port p1": fmt.Sprintf("tc: rep %d", rep+1), "host A config": "[daemon]\n"}}, ""),
			res("trestle", rep+1, OverlayRecord{Measure: OverlayTCP, Streams: 1, Bps: 7e9 * f}, ""),
			res("trestle", rep+1, OverlayRecord{Measure: OverlayBroadcast, Sinks: 3, NDR: 80e3 * f}, ""),
			res("trestle", rep+1, OverlayRecord{Measure: OverlayConverge, SamplesMs: []float64{90 * f, 140 * f}, ZebraMs: []float64{40 * f, 90 * f}, Timeouts: 1}, ""),
			res("trestle", rep+1, OverlayRecord{Measure: OverlayMove, SamplesMs: []float64{45 * f}}, ""),
			res("trestle", rep+1, OverlayRecord{Measure: OverlayRestart, Event: ev(int64(rep))}, ""),
			res("trestle", rep+1, OverlayRecord{Measure: OverlayFRR, Event: ev(90000)}, ""),
		)
	}
	results = append(results,
		res("trestle:xdp", 1, OverlayRecord{Measure: OverlaySkipped, Skipped: "the overlay port tvx1000 stays down: no ndo_xdp_xmit"}, ""),
		res("trestle", 2, OverlayRecord{Measure: "setup"}, "bgpd exited"),
	)
	run := &lab.Run{DUTs: []string{"linux-bridge", "trestle:xdp", "trestle"}, Results: results}
	b, err := json.Marshal(run)
	if err != nil {
		t.Fatal(err)
	}
	var back lab.Run
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	term, md := lab.Sections(&back)
	if len(term) != 1 || len(md) != 1 {
		t.Fatalf("sections: %q %q", term, md)
	}
	for _, want := range []string{
		"DUT           64B NDR     PDR         NDR X LINUX-BRIDGE  BROADCAST, 3 VTEPS  TCP 1        TYPE-2 CONVERGENCE MS  MOVE FLIP MS  LOST, TRESTLE RESTART  LOST, FRR RESTART  REPETITIONS\n",
		"linux-bridge  110.0 kpps  121.0 kpps  -                   55.0 kpps           8.80 Gbit/s  60.0 (n=4)             44.0 (n=2)    - (no daemon)          70000, 70000       2\n",
		"trestle:xdp   -           -           -                   -                   -            -                      -             -                      -                  0 (not run: the overlay port tvx1000 stays down: no ndo_xdp_xmit)\n",
		"trestle       165.0 kpps  176.0 kpps  1.50x               88.0 kpps           7.70 Gbit/s  124.0 (n=4)            49.5 (n=2)    0, 1                   90000, 90000       2 (2 stations timed out; 1 failed: setup: bgpd exited)\n",
		"trestle (trestle's faster mode here): 64-byte NDR 1.50x the Linux bridge's overlay (goal: at least 1.3x): pass",
		"trestle (trestle's best mode for TCP here): TCP with 1 stream(s) 0.88x the Linux bridge's overlay (goal: no worse): fail",
		"trestle:xdp: not run (the overlay port tvx1000 stays down: no ndo_xdp_xmit): no goal checked",
		"trestle: type-2 convergence median 124.0 ms over 4 stations (goal: at most 100 ms): fail",
		"trestle: of which zebra's entry on B's kernel bridge: median 69.0 ms over 4 stations; the rest, B's daemon putting it in its table",
		"trestle: 1 frames lost across 2 trestle restarts (goal: 0): fail",
	} {
		if !strings.Contains(term[0], want) {
			t.Errorf("terminal lacks %q:\n%s", want, term[0])
		}
	}
	for _, want := range []string{"## Overlay", "| trestle | 165.0 kpps | 176.0 kpps | 1.50x | 88.0 kpps | 7.70 Gbit/s | 124.0 (n=4) | 49.5 (n=2) | 0, 1 | 90000, 90000 |", "- trestle: type-2 convergence median 124.0 ms", "### The overlay's settings\n\ntrestle:\n\n- host A port p1: tc: rep 1\n\nhost A config:\n\n```\n[daemon]\n```\n"} {
		if !strings.Contains(md[0], want) {
			t.Errorf("report.md lacks %q:\n%s", want, md[0])
		}
	}
	if term, md := lab.Sections(&lab.Run{DUTs: []string{"direct"}, Results: []lab.Result{{DUT: "direct", Test: lab.TestThroughput, Value: 1}}}); term != nil || md != nil {
		t.Errorf("a run without overlay results has sections: %q %q", term, md)
	}
	// report.md's section has the stations' chart, before the settings.
	dir := t.TempDir()
	mds, err := lab.MarkdownSections(dir, &back)
	if err != nil || len(mds) != 1 {
		t.Fatalf("report.md sections: %q, %v", mds, err)
	}
	chart := strings.Index(mds[0], "](overlay-stations.svg)")
	if chart < 0 || chart > strings.Index(mds[0], "### The overlay's settings") || !strings.Contains(mds[0], "| trestle | 165.0 kpps |") {
		t.Errorf("report.md's section: %s", mds[0])
	}
	doc, err := os.ReadFile(filepath.Join(dir, "overlay-stations.svg"))
	if err != nil || !strings.Contains(string(doc), "trestle: of which zebra") || !strings.Contains(string(doc), "linux-bridge: move") {
		t.Errorf("the chart: %v\n%s", err, doc)
	}
}

// TestExecuteOverlay runs the overlay kind for real, short: the Linux
// bridge and trestle forward h1 -> h2 through the overlay, FRR carries
// each new station to the other host and each move back, trestle's
// restart and FRR's are streamed through, TCP crosses, ARP for h2
// and ND for h2 cross the underlay until suppression is on at A, 300 stations at
// once become remote on the far host, with the memory they cost, a broadcast from
// h1 reaches the hosts of three remote VTEPs, trestle at XDP as at tc
// (its host ports' frames take the overlay's xdp way in); no namespace,
// FRR daemon or pinned datapath is left.
func TestExecuteOverlay(t *testing.T) {
	labtest.RequireRoot(t)
	for _, bin := range []string{lab.FRRZebra, lab.FRRBGPd, "iperf3", "nsenter", "chown"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%v (scripts/deps.sh installs FRR and iperf3)", err)
		}
	}
	sc := lab.Scenarios["overlay"]
	sc.Reps, sc.Timing, sc.IperfTime = 1, lab.TinyTiming(), time.Second
	// A trial passes on what it lost alone, not on whether the generator
	// kept its pace: on a loaded machine (a fresh-clone run at load 12)
	// the generator, starved of its CPU, fell short of the rates asked,
	// down to 358 pps in the broadcast to three remote VTEPs, for every
	// DUT, and the broadcast's search found no rate, though nothing was
	// lost.
	// Whether frames cross is what this test asks; the rates it records
	// are what the generator offered.
	sc.Timing.Search.Shortfall = 1
	lab.Configure(&sc, func(k Kind) Kind { k.Stations, k.Streams, k.Scale = 3, []int{1}, 300; return k })
	before := labtest.Ours(t)
	run, err := lab.Execute(context.Background(), lab.Config{Scenario: sc, Placement: "shared", Trestle: labtest.TrestleBinary(t), WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	type key struct{ dut, measure string }
	seen := map[key]OverlayRecord{}
	for _, r := range run.Results {
		var rec OverlayRecord
		if err := r.RecordOf(&rec); err != nil {
			t.Errorf("%s %s: %v (%s)", r.DUT, r.Param, err, r.Error)
			continue
		}
		if r.Error != "" {
			t.Errorf("%s %s: %s", r.DUT, r.Param, r.Error)
		}
		seen[key{r.DUT, rec.Measure}] = rec
	}
	for _, d := range []string{"linux-bridge", "trestle", "trestle:xdp"} {
		if rec := seen[key{d, OverlayThroughput}]; rec.NDR <= 0 {
			t.Errorf("%s: throughput %+v", d, rec)
		}
		if rec := seen[key{d, OverlayTCP}]; rec.Bps <= 0 || rec.Streams != 1 {
			t.Errorf("%s: TCP %+v", d, rec)
		}
		for _, m := range []string{OverlayConverge, OverlayMove} {
			if rec := seen[key{d, m}]; len(rec.SamplesMs)+rec.Timeouts != 3 || len(rec.SamplesMs) == 0 || slices.ContainsFunc(rec.SamplesMs, func(v float64) bool { return v <= 0 || v > 5000 }) {
				t.Errorf("%s: %s %+v, want 3 stations timed", d, m, rec)
			}
		}
		if rec := seen[key{d, OverlayBroadcast}]; rec.NDR <= 0 || rec.Sinks != 3 {
			t.Errorf("%s: broadcast to 3 VTEPs %+v", d, rec)
		}
		if rec := seen[key{d, OverlayFRR}]; rec.Event == nil || rec.Event.Sent == 0 || rec.Event.Received == 0 {
			t.Errorf("%s: FRR restart %+v", d, rec)
		}
		t.Logf("%s: ARP for h2 %+v; scale %+v", d, seen[key{d, OverlayNeigh}], seen[key{d, OverlayScale}])
		if rec := seen[key{d, OverlayNeigh}]; rec.Requests != OverlayNeighRequests || rec.CrossedOff < rec.Requests || rec.CrossedOn != 0 || rec.AnsweredOn < rec.Requests ||
			rec.NSCrossedOff < rec.Requests || rec.NSCrossedOn != 0 || rec.NSAnsweredOn < rec.Requests {
			t.Errorf("%s: ARP for h2, suppression off and on: %+v, want every ARP request and solicitation across with it off, none with it on, each answered", d, rec)
		}
		if rec := seen[key{d, OverlayScale}]; rec.MACs != 300 || rec.RemoteMs <= 0 || rec.LocalMs <= 0 || rec.LocalMs > rec.RemoteMs || !hasKeys(rec.MemoryKiB, "A zebra", "A bgpd", "B zebra", "B bgpd") {
			t.Errorf("%s: 300 stations at once: %+v", d, rec)
		}
	}
	for _, d := range []string{"trestle", "trestle:xdp"} {
		if rec := seen[key{d, OverlayRestart}]; rec.Event == nil || rec.Event.Sent == 0 || rec.Event.Received == 0 || rec.Event.BackMs <= 0 {
			t.Errorf("%s: restart %+v", d, rec)
		}
	}
	if rec := seen[key{"trestle", OverlayConverge}]; len(rec.ZebraMs) == 0 || !zebraFirst(rec.ZebraMs, rec.SamplesMs) {
		t.Errorf("trestle: zebra's entries %v, the table's %v: want zebra's first", rec.ZebraMs, rec.SamplesMs)
	}
	if rec := seen[key{"linux-bridge", OverlayConverge}]; len(rec.ZebraMs) != 0 {
		t.Errorf("linux-bridge: zebra's entries timed apart: %v", rec.ZebraMs)
	}
	if _, ok := seen[key{"linux-bridge", OverlayRestart}]; ok {
		t.Error("the Linux bridge has a trestle restart")
	}
	if rec, ok := seen[key{"trestle:xdp", OverlaySkipped}]; ok {
		t.Errorf("trestle:xdp not run: %s", rec.Skipped)
	}
	if left := labtest.Ours(t); len(left) != len(before) {
		t.Errorf("namespaces left: %v (before: %v)", left, before)
	}
	if term, _ := lab.Sections(run); len(term) != 1 || strings.Contains(term[0], "not run") || !strings.Contains(term[0], "(trestle's best mode for TCP here): TCP with 1 stream(s)") {
		t.Errorf("section: %q", term)
	}
}

// hasKeys says whether m has every key.
func hasKeys(m map[string]int64, keys ...string) bool {
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			return false
		}
	}
	return true
}

// zebraFirst says whether zebra's times can each be a part of a distinct
// station's time in the table's: zebra's entry comes before the table's,
// but a station whose zebra entry was not seen has a time in the table's
// alone, so the two lists are not paired and their medians may differ
// either way. With both sorted, the i-th smallest of zebra's k times must
// be at most the (n-k+i)-th smallest of the table's n.
func zebraFirst(zebra, table []float64) bool {
	if len(zebra) > len(table) {
		return false
	}
	z, tb := slices.Sorted(slices.Values(zebra)), slices.Sorted(slices.Values(table))
	for i, v := range z {
		if v > tb[len(tb)-len(z)+i] {
			return false
		}
	}
	return true
}

func TestZebraFirst(t *testing.T) {
	for _, c := range []struct {
		zebra, table []float64
		want         bool
	}{
		{[]float64{98.9, 70.5}, []float64{63.5, 99.9, 71.6}, true}, // a CI run: one station's zebra entry unseen
		{[]float64{60, 70}, []float64{65, 75}, true},
		{[]float64{80}, []float64{65, 75}, false},
		{[]float64{60, 70, 80}, []float64{65, 75}, false},
	} {
		if got := zebraFirst(c.zebra, c.table); got != c.want {
			t.Errorf("zebraFirst(%v, %v) = %v, want %v", c.zebra, c.table, got, c.want)
		}
	}
}
