package macflood

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/lab"
	"github.com/trestle/trestle/internal/lab/gen"
	"github.com/trestle/trestle/internal/lab/labtest"
	"github.com/trestle/trestle/internal/lab/sink"
)

func TestMain(m *testing.M) { labtest.Main(m) }

// TestFloodAccounting: a stream's figures from the generator and the
// sinks, the summary of the two streams, the goal, and the two results.
func TestFloodAccounting(t *testing.T) {
	var w FloodWindow
	w.account(gen.Stats{Sent: 1000, Elapsed: 2 * time.Second}, sink.Snapshot{Received: 992, Lost: 10, Duplicates: 2}, sink.Snapshot{Received: 5})
	// 990 distinct of 1000: 10 lost; 990 frames in 2 s.
	if w.Lost != 10 || w.Gaps != 10 || w.Flooded != 5 || w.RatePPS != 495 || w.Offered != 500 || w.Seconds != 2 {
		t.Errorf("account: %+v", w)
	}

	rec := &Record{MaxEntries: 100, Sources: 1000,
		Base: FloodWindow{Sent: 1000, RatePPS: 500, Samples: []FloodSample{{Learned: 4, RSSKiB: 1000}, {Learned: 4, RSSKiB: 1100}},
			Side: &SideLearn{Addresses: 10, Learned: 10, Millis: 30}},
		Flood: FloodWindow{Flood: true, Sent: 1000, RatePPS: 460, Samples: []FloodSample{{Learned: 4, RSSKiB: 1200}, {Learned: 100, RSSKiB: 3000}, {Learned: 100, RSSKiB: 2000}},
			Side: &SideLearn{Addresses: 10, Learned: 10, Millis: 60}},
		Statics: []StaticCheck{{Before: true, After: true}, {Before: true, After: false}, {Before: true, After: true}},
	}
	s := SummarizeFlood(rec)
	if s.Lost != 0 || s.Ratio != 0.92 || s.MaxLearned != 100 || s.Above || s.StaticsKept != 2 || s.Statics != 3 ||
		s.RSSBefore != 1100 || s.RSSMax != 3000 || s.RSSAfter != 2000 || !s.GoalMet || s.SideFlood.Millis != 60 {
		t.Errorf("SummarizeFlood: %+v", s)
	}
	// The goal fails on a single frame lost, or below 90% of the rate.
	rec.Flood.Lost = 1
	if SummarizeFlood(rec).GoalMet {
		t.Errorf("a frame lost met the goal")
	}
	rec.Flood.Lost, rec.Flood.RatePPS = 0, 440
	if s := SummarizeFlood(rec); s.GoalMet || s.Ratio != 0.88 {
		t.Errorf("88%% of the rate: %+v", s)
	}
	// A table above its limit is said so; a table never read is -1.
	rec.Flood.Samples[1].Learned = 101
	if s := SummarizeFlood(rec); !s.Above || s.MaxLearned != 101 {
		t.Errorf("101 of 100: %+v", s)
	}
	if s := SummarizeFlood(&Record{Flood: FloodWindow{Samples: []FloodSample{{Learned: -1}}}}); s.MaxLearned != -1 || s.Above || s.GoalMet {
		t.Errorf("unread table, nothing sent: %+v", s)
	}

	// The newcomer: its first frame at h1 from its first sent on the BPF
	// clock, its entry from the same first frame; the goal wants both in
	// time and the known stream at 0 loss.
	var n Newcomer
	n.account(gen.Stats{Sent: 100, Elapsed: time.Second, First: 10 * time.Second}, sink.Snapshot{Received: 98, Duplicates: 1, First: 10*time.Second + 40*time.Millisecond})
	n.learnedAt(10*time.Second, 12500*time.Millisecond)
	if n.Sent != 100 || n.Received != 97 || n.Lost != 3 || !n.Delivered || n.DeliveredMs != 40 || !n.Learned || n.LearnedMs != 2500 {
		t.Errorf("newcomer: %+v", n)
	}
	var never Newcomer
	never.account(gen.Stats{Sent: 100, First: time.Second}, sink.Snapshot{})
	if never.Delivered || never.Lost != 100 || NewcomerGoal(&never) || NewcomerGoal(nil) {
		t.Errorf("a newcomer never delivered: %+v", never)
	}
	rec.Flood.Newcomer = &n
	if s := SummarizeFlood(rec); !s.NewcomerMet || s.Newcomer != &n {
		t.Errorf("newcomer in 40 ms and 2500 ms: %+v", s)
	}
	row := &FloodRow{DUT: "trestle:xdp", Rep: 1, Rec: rec, Sum: SummarizeFlood(rec)}
	if c := row.cells(); c[len(c)-2] != "40.0 ms / 2500 ms / 3 of 100" || c[len(c)-1] != "met" {
		t.Errorf("newcomer cells: %q", c)
	}
	for _, c := range []struct {
		edit func(*Newcomer)
		what string
	}{
		{func(n *Newcomer) { n.DeliveredMs = 1001 }, "delivered in 1001 ms"},
		{func(n *Newcomer) { n.LearnedMs = 5001 }, "learned in 5001 ms"},
		{func(n *Newcomer) { n.Learned = false }, "not learned"},
		{func(n *Newcomer) { n.Delivered = false }, "never delivered"},
	} {
		m := n
		c.edit(&m)
		rec.Flood.Newcomer = &m
		row := &FloodRow{DUT: "trestle:tc", Rep: 1, Rec: rec, Sum: SummarizeFlood(rec)}
		if row.Sum.NewcomerMet || row.cells()[len(row.cells())-1] != "NOT met" || !strings.Contains(strings.Join(floodWarnings([]*FloodRow{row}), "\n"), "newcomer missed its goal") {
			t.Errorf("a newcomer %s met its goal: %+v", c.what, row.Sum)
		}
	}
	// The known stream losing a frame fails the newcomer's goal too.
	rec.Flood.Newcomer, rec.Flood.Lost = &n, 1
	if SummarizeFlood(rec).NewcomerMet {
		t.Errorf("the newcomer's goal met with the known stream losing a frame")
	}
	rec.Flood.Lost, rec.Flood.Newcomer = 0, nil

	var got []lab.Result
	rec.Flood.RatePPS = 500
	if err := addFloodResults(lab.Result{DUT: "d", Rep: 1}, rec, nil, func(r lab.Result) { got = append(got, r) }); err != nil {
		t.Fatal(err)
	}
	var back Record
	if len(got) != 2 || got[0].Test != lab.TestMACFlood || got[0].Param != "lost" || got[0].RecordOf(&back) != nil || !reflect.DeepEqual(&back, rec) || got[0].Value != 0 ||
		got[1].Param != "rate" || got[1].Value != 1 || len(got[1].Record) != 0 || got[1].Unit != "ratio" {
		t.Errorf("results: %+v", got)
	}
	got = nil
	if err := addFloodResults(lab.Result{}, rec, errors.New("broke"), func(r lab.Result) { got = append(got, r) }); err != nil {
		t.Fatal(err)
	}
	if got[0].Error != "broke" || got[1].Error != "broke" {
		t.Errorf("results after an error: %+v", got)
	}
}

// TestExecuteMACFlood runs a small mac-flood through trestle in xdp mode
// and the Linux bridge: a flood from 10,000 sources fills a table of
// 4096, which holds no more; the static entries stay; the second bridge
// learns its 1000 addresses; every second has its sample; the newcomer's
// frames get through the full table, and trestle learns it.
func TestExecuteMACFlood(t *testing.T) {
	labtest.RequireRoot(t)
	bin := labtest.TrestleBinary(t)
	duts := []string{"trestle:xdp", "linux-bridge"}
	sc := lab.Scenario{Name: "test", DUTs: lab.MustSpecs(duts...), Hosts: 4, Chain: []int{1}, Sizes: []lab.FrameSize{"64"}, Tests: []lab.Kind{Kind{Sources: 10000}},
		StreamRate: 200e3, Duration: 2 * time.Second, MaxEntries: 4096, Reps: 1, Timing: lab.TinyTiming()}
	before := labtest.Ours(t)
	run, err := lab.Execute(context.Background(), lab.Config{Scenario: sc, Placement: "shared", Trestle: bin, WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range run.Results {
		if r.Error != "" {
			t.Errorf("%s %s %s: %s", r.DUT, r.Test, r.Param, r.Error)
		}
		rec := &Record{}
		if r.Test != lab.TestMACFlood || r.RecordOf(rec) != nil {
			continue
		}
		seen[r.DUT] = true
		s := SummarizeFlood(rec)
		t.Logf("%s: lost %d, rate %.3f, most learned %d, statics %d/%d, flood %.0f pps, %d at h4, bridge B %+v / %+v, RSS %d KiB",
			r.DUT, s.Lost, s.Ratio, s.MaxLearned, s.StaticsKept, s.Statics, rec.Flood.FloodOffered, rec.Flood.FloodDelivered, *s.SideBase, *s.SideFlood, s.RSSMax)
		if rec.Base.Sent == 0 || rec.Flood.Sent == 0 || rec.Flood.FloodSent == 0 || rec.Flood.FloodDelivered == 0 {
			t.Errorf("%s: nothing sent or flooded: %+v", r.DUT, rec)
		}
		if strings.HasPrefix(rec.TableLimit, "none:") {
			t.Logf("%s: %s: its table has no limit to check", r.DUT, rec.TableLimit)
		} else if lo, hi := floodFill(r.DUT, 4096, 4); s.MaxLearned < lo || s.MaxLearned > hi && !(s.MaxLearned == hi+1 && newcomerIn(r.DUT, rec)) {
			t.Errorf("%s: the table held at most %d learned addresses; a flood from 10,000 sources should fill %d to %d and no more", r.DUT, s.MaxLearned, lo, hi)
		}
		if s.StaticsKept != floodStatics {
			t.Errorf("%s: statics %+v", r.DUT, rec.Statics)
		}
		for _, side := range []*SideLearn{s.SideBase, s.SideFlood} {
			if side == nil || side.Learned != sideAddrs {
				t.Errorf("%s: the second bridge learned %+v", r.DUT, side)
			}
		}
		// The newcomer on h4's port: delivered through the full table, and
		// learned by trestle (room kept for ports under their fair share);
		// the times are the lab's to report, not this test's to judge.
		if n := rec.Flood.Newcomer; n == nil || n.Sent == 0 || !n.Delivered || strings.HasPrefix(r.DUT, "trestle") && !n.Learned || rec.Base.Newcomer != nil {
			t.Errorf("%s: newcomer %+v (without the flood: %+v)", r.DUT, n, rec.Base.Newcomer)
		} else {
			t.Logf("%s: newcomer %s", r.DUT, newcomerText(n))
		}
		if len(rec.Flood.Samples) < 3 || !rec.Flood.Samples[len(rec.Flood.Samples)/2].Flooding {
			t.Errorf("%s: samples %+v", r.DUT, rec.Flood.Samples)
		}
		switch r.DUT {
		case "trestle:xdp":
			if s.RSSMax == 0 || !strings.HasPrefix(rec.Daemon, "trestle (pid ") || !strings.HasPrefix(rec.TableLimit, "max_entries = 4096") {
				t.Errorf("trestle:xdp: memory %d KiB of %q, limit %q", s.RSSMax, rec.Daemon, rec.TableLimit)
			}
		case "linux-bridge":
			if s.RSSMax != 0 || rec.Unmeasured["memory"] == "" || !strings.HasPrefix(rec.TableLimit, "fdb_max_learned = 4096") && !strings.HasPrefix(rec.TableLimit, "none:") {
				t.Errorf("linux-bridge: memory %d KiB (%q), limit %q", s.RSSMax, rec.Unmeasured["memory"], rec.TableLimit)
			}
		}
	}
	for _, d := range duts {
		if !seen[d] {
			t.Errorf("%s: no mac-flood record", d)
		}
	}
	if left := labtest.Ours(t); len(left) != len(before) {
		t.Errorf("namespaces left: %v (before: %v)", left, before)
	}
}

// newcomerIn says whether trestle learned the newcomer into the room it
// keeps above the flood's mark: the table then holds one more.
func newcomerIn(dut string, rec *Record) bool {
	return strings.HasPrefix(dut, "trestle") && rec.Flood.Newcomer != nil && rec.Flood.Newcomer.Learned
}

// floodFill is what one port's flood fills a table of size entries over
// ports ports to, at least and at most: trestle stops it at its
// high-water mark, a sixteenth (rounded up) below, the room kept for the
// other ports' newcomers, and lets it learn its reserve, max(1, H / (2P)),
// a look, which the daemon's next look evicts again (docs/security.md "A
// table one port cannot starve"); the others fill it.
func floodFill(dut string, size, ports int) (lo, hi int) {
	if strings.HasPrefix(dut, "trestle") {
		h := (size + 15) / 16
		return size - h, size - h + max(1, h/(2*ports))
	}
	return size, size
}

// TestOldRecord: a mac-flood result recorded before the registry (its
// record under "mac_flood", as docs/lab/mac-flood.json has it, cut short)
// loads, and its row reads its record.
func TestOldRecord(t *testing.T) {
	old := `{"duts": ["trestle:xdp"], "results": [{"dut": "trestle:xdp", "rep": 1, "chain": 1, "test": "mac-flood", "param": "lost", "value": 0, "unit": "frames",
	"mac_flood": {"frame_size": "64", "rate_pps": 1157687.360455468, "throughput_pps": 2315374.720910936, "load": 0.5, "sources": 1000000, "flood_seconds": 30, "max_entries": 65536,
	"table_limit": "max_entries = 65536", "statics": [{"mac": "0e:5a:00:00:00:01", "port": "p2", "before": true, "after": true}],
	"without_flood": {"flood": false, "sent": 37079953, "received": 37079953, "lost": 0, "rate_pps": 1158748.5499710313, "seconds": 31.999999483,
		"samples": [{"t_s": 1.001703977, "flooding": false, "learned": 4, "entries": 8, "rss_kib": 32848, "stream_pps": 1137453.8472250479, "flood_pps": 0}],
		"side_learning": {"addresses": 1000, "learned": 1000, "ms": 98.369193, "reads": 1, "last_read_ms": 8.63222}},
	"with_flood": {"flood": true, "sent": 36679565, "received": 36679565, "lost": 0, "rate_pps": 1146236.3914205667, "seconds": 32.000000414, "flood_sent": 61367616, "flood_delivered": 4062984,
		"samples": [{"t_s": 1.00005891, "flooding": false, "learned": 4, "entries": 8, "rss_kib": 31344, "stream_pps": 1139975.6580073026, "flood_pps": 0}],
		"side_learning": {"addresses": 1000, "learned": 1000, "ms": 215.129751, "reads": 1, "last_read_ms": 197.336458}},
	"daemon": "trestle (pid 15408)"}}]}`
	var run lab.Run
	if err := json.Unmarshal([]byte(old), &run); err != nil {
		t.Fatal(err)
	}
	rows := Floods(&run)
	if len(rows) != 1 || rows[0].Rec.Sources != 1000000 || rows[0].Rec.Flood.FloodSent != 61367616 || !rows[0].Sum.GoalMet || rows[0].Sum.StaticsKept != 1 || rows[0].Sum.SideFlood.Learned != 1000 {
		t.Fatalf("rows of an old run: %+v", rows)
	}
}
