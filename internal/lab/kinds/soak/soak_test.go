package soak

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/lab"
	"github.com/trestle/trestle/internal/lab/labtest"
	"github.com/trestle/trestle/internal/lab/sink"
)

func TestMain(m *testing.M) { labtest.Main(m) }

func lat(p50, p90, p99 time.Duration) *sink.Latency {
	return &sink.Latency{Count: 100, P50: p50, P90: p90, P99: p99, P999: 2 * p99, Max: 3 * p99}
}

// TestSoakSummary: the goals from a record's windows and samples.
func TestSoakSummary(t *testing.T) {
	us := time.Microsecond
	rec := &Record{Sent: 1000, Received: 1000,
		Windows: []SoakWindow{{Latency: lat(10*us, 12*us, 20*us)}, {Latency: lat(30*us, 40*us, 90*us)}, {Latency: lat(11*us, 13*us, 24*us)}},
		Samples: []SoakSample{
			{T: 0, RSSKiB: 30000, Learned: 2, Maps: map[string]int{"fdb": 2, "states": 0}},
			{T: 60, RSSKiB: 31000, Learned: 2, Maps: map[string]int{"fdb": 2, "states": 0}},
			{T: 120, RSSKiB: 31500, Learned: 2, Maps: map[string]int{"fdb": 2, "states": 0}},
		}}
	s := SummarizeSoak(rec)
	// The middle window's spike is not the first or the last: p99 went
	// from 20 to 24 µs (20%), p50 from 10 to 11; memory grew 1.5 MiB.
	if !s.GoalMet || !s.Stable || !s.Flat || s.Windows != 3 || len(s.Latency) != 5 || s.Memory == nil || len(s.Maps) != 3 {
		t.Fatalf("SummarizeSoak: %+v", s)
	}
	if p99 := s.Latency[2]; p99.Name != "p99" || p99.First != float64(20*us) || p99.Last != float64(24*us) || p99.Max != float64(90*us) || !p99.OK {
		t.Errorf("p99: %+v", p99)
	}
	if s.MemorySlop != 750 { // KiB a minute: 1500 KiB over two minutes
		t.Errorf("memory slope %v KiB/min", s.MemorySlop)
	}
	if s.Maps[0].Name != "learned" || s.Maps[1].Name != "fdb" || s.Maps[2].Name != "states" {
		t.Errorf("maps: %+v", s.Maps)
	}

	// p99 30% up, above the 2 µs slack: not stable.
	rec.Windows[2].Latency = lat(10*us, 12*us, 26*us)
	if s := SummarizeSoak(rec); s.Stable || s.GoalMet || s.Latency[2].OK {
		t.Errorf("p99 20 -> 26 µs was stable: %+v", s.Latency)
	}
	// On a path of a few µs, one more µs is within the slack.
	rec.Windows = []SoakWindow{{Latency: lat(2*us, 3*us, 4*us)}, {Latency: lat(3*us, 4*us, 5*us)}}
	if s := SummarizeSoak(rec); !s.Stable {
		t.Errorf("2 -> 3 µs was not stable: %+v", s.Latency)
	}
	// p99.9 and the maximum are shown, not judged.
	rec.Windows[1].Latency.P999, rec.Windows[1].Latency.Max = time.Millisecond, time.Second
	if s := SummarizeSoak(rec); !s.Stable || s.Latency[3].OK || s.Latency[4].OK {
		t.Errorf("p99.9 and max drifted: %+v", s)
	}
	// One window says nothing of stability.
	if s := SummarizeSoak(&Record{Sent: 1, Windows: rec.Windows[:1]}); s.Stable || s.GoalMet {
		t.Errorf("one window: %+v", s)
	}

	// Memory 3 MiB up on 30 MiB is more than 2 MiB and 5%: not flat.
	rec.Samples[2].RSSKiB = 30000 + 3<<10
	if s := SummarizeSoak(rec); s.Flat || s.Memory.OK {
		t.Errorf("memory +3 MiB was flat: %+v", s.Memory)
	}
	rec.Samples[2].RSSKiB = 30000
	// A map that gained an entry is not flat.
	rec.Samples[1].Maps = map[string]int{"fdb": 3, "states": 0}
	if s := SummarizeSoak(rec); s.Flat || s.Maps[1].OK || s.Maps[1].Max != 3 {
		t.Errorf("fdb 2, 3, 2 was flat: %+v", s.Maps)
	}
	// One that lost an entry (an address aged out) did not grow: flat,
	// and so memory that shrank.
	rec.Samples[1].Maps = map[string]int{"fdb": 2, "states": 0}
	rec.Samples[2].Maps = map[string]int{"fdb": 1, "states": 0}
	rec.Samples[2].RSSKiB = 20000
	if s := SummarizeSoak(rec); !s.Flat || !s.Maps[1].OK || !s.Memory.OK {
		t.Errorf("fdb 2, 2, 1 and memory 30 -> 20 MiB were not flat: %+v %+v", s.Maps, s.Memory)
	}
	rec.Lost = 1
	if s := SummarizeSoak(rec); s.GoalMet || !s.Flat || !s.Stable {
		t.Errorf("a frame lost: %+v", s)
	}
}

func TestSoakScenario(t *testing.T) {
	s := lab.Scenarios["soak"]
	if s.Duration != 10*time.Minute || soakOf(s).Window != time.Minute || s.Load != 0.9 || s.Flows != 1000 || s.FirstSize() != "imix" || !s.Has(lab.TestSoak) {
		t.Errorf("soak: %+v", s)
	}
	spec, err := soakSpec(s, s.Timing)
	if err != nil || spec.Flows != 1000 || spec.SrcPorts.First != 1024 || spec.SrcPorts.Last != 2023 || len(spec.Mix.Sizes) != 3 {
		t.Errorf("soakSpec: %+v %v", spec, err)
	}
	if _, err := s.PrepareKinds(); err != nil {
		t.Error(err)
	}
	bad := s
	bad.Flows = 70000
	if _, err := bad.PrepareKinds(); err == nil || !strings.Contains(err.Error(), "70000 flows") {
		t.Errorf("checkStream of 70000 flows: %v", err)
	}
	for _, c := range []struct{ d, w, want time.Duration }{
		{10 * time.Minute, 0, time.Minute}, {3 * time.Minute, 0, 30 * time.Second}, {3 * time.Second, 0, time.Second}, {time.Hour, 5 * time.Minute, 5 * time.Minute},
	} {
		if got := soakWindow(c.d, c.w); got != c.want {
			t.Errorf("soakWindow(%v, %v) = %v, want %v", c.d, c.w, got, c.want)
		}
	}
	if got := slope([]float64{0, 1, 2}, []float64{1, 3, 5}); got != 2 {
		t.Errorf("slope %v", got)
	}
	if got := slope([]float64{5}, []float64{1}); got != 0 {
		t.Errorf("slope of one point %v", got)
	}
}

// TestExecuteSoak runs a short soak through trestle in xdp mode: windows
// with latency, samples of its memory and of every map, the table's two
// hosts in the fdb map all along.
func TestExecuteSoak(t *testing.T) {
	labtest.RequireRoot(t)
	bin := labtest.TrestleBinary(t)
	sc := lab.Scenario{Name: "test", DUTs: lab.MustSpecs("trestle:xdp"), Hosts: 2, Chain: []int{1}, Sizes: []lab.FrameSize{"imix"}, Tests: []lab.Kind{Kind{Window: time.Second}},
		Flows: 100, Load: 0.5, Duration: 3 * time.Second, Reps: 1, Timing: lab.TinyTiming()}
	before := labtest.Ours(t)
	run, err := lab.Execute(context.Background(), lab.Config{Scenario: sc, Placement: "shared", Trestle: bin, WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var rec *Record
	for _, r := range run.Results {
		if r.Error != "" {
			t.Errorf("%s %s %s: %s", r.DUT, r.Test, r.Param, r.Error)
		}
		if r.Test == lab.TestSoak {
			rec = &Record{}
			if err := r.RecordOf(rec); err != nil {
				t.Fatal(err)
			}
		}
	}
	if rec == nil {
		t.Fatalf("no soak record: %+v", run.Results)
	}
	s := SummarizeSoak(rec)
	t.Logf("%d sent at %.0f pps (NDR %.0f), lost %d, %d windows, latency %+v, memory %+v, maps %+v", rec.Sent, rec.Offered, rec.Throughput, rec.Lost, len(rec.Windows), s.Latency, s.Memory, s.Maps)
	if rec.Sent == 0 || len(rec.Windows) < 2 || len(rec.Samples) < 3 || rec.Latency == nil || s.Memory == nil || s.Memory.First <= 0 {
		t.Errorf("soak record: %+v", rec)
	}
	for _, w := range rec.Windows {
		if w.Received == 0 || w.Latency == nil {
			t.Errorf("window %+v", w)
		}
	}
	fdb := false
	for _, m := range s.Maps {
		if strings.HasPrefix(m.Name, "fdb ") {
			fdb = true
			if m.Min != 2 || m.Max != 2 {
				t.Errorf("the fdb map held %v..%v entries, want h1's and h2's", m.Min, m.Max)
			}
		}
	}
	if !fdb {
		t.Errorf("no fdb map among %+v", s.Maps)
	}
	if left := labtest.Ours(t); len(left) != len(before) {
		t.Errorf("namespaces left: %v (before: %v)", left, before)
	}
}

// soakOf is s's soak test.
func soakOf(s lab.Scenario) Kind {
	k, _ := lab.TestOf[Kind](s)
	return k
}

// TestOldRecord: a soak result recorded before the registry (its record
// under "soak", as docs/lab/soak.json has it, cut short) loads, and its
// row reads its record.
func TestOldRecord(t *testing.T) {
	old := `{"duts": ["trestle:xdp"], "results": [{"dut": "trestle:xdp", "rep": 1, "chain": 1, "test": "soak", "param": "imix", "value": 92503, "unit": "frames",
	"soak": {"frame_size": "imix", "flows": 1000, "src_ports": "1024-2023", "rate_pps": 2644777.7036843374, "ndr_pps": 2938641.892982597, "load": 0.9, "seconds": 600, "window_seconds": 60, "sample_seconds": 10,
	"sent": 1499538584, "dev_dropped": 92503, "received": 1499446081, "lost": 92503, "offered_pps": 2499230.994701758, "elapsed_seconds": 599.99999487,
	"latency": {"count": 23428250, "min_ns": 9728, "p50_ns": 16895, "p90_ns": 25087, "p99_ns": 46079, "p99_9_ns": 75775, "max_ns": 1900543},
	"windows": [{"from_s": 0, "to_s": 60.009555764, "received": 158755435, "rate_pps": 2645502.5866936697, "latency": {"count": 2481000, "min_ns": 9728, "p50_ns": 16895, "p90_ns": 17919, "p99_ns": 32255, "p99_9_ns": 37887, "max_ns": 102399}, "other_cpu_seconds": 0.04}],
	"samples": [{"t_s": 0, "rss_kib": 35544, "learned": 2, "maps": {"fdb (id 602601)": 2}}, {"t_s": 10.009556274, "rss_kib": 35544, "learned": 2, "maps": {"fdb (id 602601)": 2}}],
	"daemon": "trestle (pid 12041)"}}]}`
	var run lab.Run
	if err := json.Unmarshal([]byte(old), &run); err != nil {
		t.Fatal(err)
	}
	rows := Soaks(&run)
	if len(rows) != 1 || rows[0].Rec.Lost != 92503 || len(rows[0].Rec.Windows) != 1 || rows[0].Rec.Windows[0].Latency.P50 != 16895 || len(rows[0].Rec.Samples) != 2 || rows[0].Sum.GoalMet {
		t.Fatalf("rows of an old run: %+v", rows)
	}
}
