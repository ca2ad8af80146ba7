package lab

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/trestle/trestle/internal/lab/gen"
	"github.com/trestle/trestle/internal/lab/sink"
)

// TestFloodAccounting: a stream's figures from the generator and the
// sinks, the summary of the two streams, the goal, and the two results.
func TestFloodAccounting(t *testing.T) {
	var w FloodWindow
	w.account(gen.Stats{Sent: 1000, Elapsed: 2 * time.Second}, sink.Snapshot{Received: 992, Lost: 10, Duplicates: 2}, sink.Snapshot{Received: 5})
	// 990 distinct of 1000: 10 lost; 990 frames in 2 s.
	if w.Lost != 10 || w.Gaps != 10 || w.Flooded != 5 || w.RatePPS != 495 || w.Offered != 500 || w.Seconds != 2 {
		t.Errorf("account: %+v", w)
	}

	rec := &FloodRecord{MaxEntries: 100, Sources: 1000,
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
	if s := SummarizeFlood(&FloodRecord{Flood: FloodWindow{Samples: []FloodSample{{Learned: -1}}}}); s.MaxLearned != -1 || s.Above || s.GoalMet {
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

	var got []Result
	rec.Flood.RatePPS = 500
	addFloodResults(Result{DUT: "d", Rep: 1}, rec, nil, func(r Result) { got = append(got, r) })
	if len(got) != 2 || got[0].Test != TestMACFlood || got[0].Param != "lost" || got[0].Flood != rec || got[0].Value != 0 ||
		got[1].Param != "rate" || got[1].Value != 1 || got[1].Flood != nil || got[1].Unit != "ratio" {
		t.Errorf("results: %+v", got)
	}
	got = nil
	addFloodResults(Result{}, rec, errors.New("broke"), func(r Result) { got = append(got, r) })
	if got[0].Error != "broke" || got[1].Error != "broke" {
		t.Errorf("results after an error: %+v", got)
	}
}

func TestMACFloodScenario(t *testing.T) {
	s := Scenarios["mac-flood"]
	if sources(s) != 1000000 || s.MaxEntries != 65536 || s.Duration != 30*time.Second || s.Load != 0.5 || s.Hosts != 4 || !s.has(TestThroughput) || !s.has(TestMACFlood) {
		t.Errorf("mac-flood: %+v", s)
	}
	if _, err := s.PrepareKinds(); err != nil {
		t.Error(err)
	}
	var total time.Duration
	for _, u := range plan(s) {
		total += estimate(s, u)
	}
	if total < 4*time.Minute || total > 12*time.Minute {
		t.Errorf("mac-flood estimated at %v", total)
	}
	for _, c := range []struct {
		edit func(*Scenario)
		want string
	}{
		{func(s *Scenario) { s.Load = 0 }, "load 0"},
		{func(s *Scenario) { s.Duration = 0 }, "duration above 0"},
		{func(s *Scenario) {
			Configure(s, func(k MACFloodTest) MACFloodTest { k.Sources = 1<<24 + 1; return k })
		}, "sources"},
		{func(s *Scenario) { s.Hosts = 3 }, "need 4"},
	} {
		bad := s
		c.edit(&bad)
		if _, err := bad.PrepareKinds(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("checkStream: %v, want %q", err, c.want)
		}
	}
	notes, _ := s.PrepareKinds()
	if len(notes) != 1 || !strings.Contains(notes[0], "1000000 source addresses") || !strings.Contains(notes[0], "Table size asked of every DUT: 65536") {
		t.Errorf("notes: %q", notes)
	}
}

// TestLearningFrames: n broadcast frames from n addresses counting up in
// the low 24 bits, with the lab's learning ethertype.
func TestLearningFrames(t *testing.T) {
	fs := learningFrames(net.HardwareAddr{2, 0xb0, 1, 0, 0, 0xfe}, 3)
	want := []string{"02:b0:01:00:00:fe", "02:b0:01:00:00:ff", "02:b0:01:00:01:00"}
	for i, f := range fs {
		if len(f) != 60 || net.HardwareAddr(f[6:12]).String() != want[i] || f[0] != 0xff || f[12] != 0x88 || f[13] != 0xb5 {
			t.Errorf("frame %d: %x", i, f)
		}
	}
	if got := macPlus(net.HardwareAddr{0x0e, 0x5a, 0, 0xff, 0xff, 0xff}, 1).String(); got != "0e:5a:00:00:00:00" {
		t.Errorf("macPlus wraps within the low 24 bits: %s", got)
	}
}

// TestTableParsers: each DUT's table as its tools print it.
func TestTableParsers(t *testing.T) {
	stats := `Statistics for bridge "br1":
  Current/maximum MAC entries in the table: 65536/65536
  Current static MAC entries in the table : 4
  Total number of learned MAC entries     : 70531
  Total number of expired MAC entries     : 0
  Total number of evicted MAC entries     : 4995
  Total number of port moved MAC entries  : 0
`
	tr, err := parseOVSStats(stats)
	if err != nil || tr.Learned != 65532 || tr.Entries != 65536 || tr.Evicted != 4995 {
		t.Errorf("parseOVSStats: %+v %v", tr, err)
	}
	if _, err := parseOVSStats("ovs-appctl: no such bridge"); err == nil {
		t.Errorf("parseOVSStats took an answer without a size")
	}

	fdb := ` port  VLAN  MAC                Age
    1     0  0e:5a:00:00:00:01  static
    2     0  02:00:00:00:00:01    3
    1     0  02:b0:00:00:00:05    0
`
	names := "65534,brs\n1,q1\n1,p2\n65534,br1\n2,p1\n2,q2\n"
	m := parseOVSFDB(fdb, names, []string{"p1", "p2"})
	if len(m) != 3 || m["0e:5a:00:00:00:01"] != (fdbEntry{"p2", true}) || m["02:00:00:00:00:01"] != (fdbEntry{"p1", false}) {
		t.Errorf("parseOVSFDB for br1: %v", m)
	}
	if m := parseOVSFDB(fdb, names, []string{"q1", "q2"}); m["02:b0:00:00:00:05"] != (fdbEntry{"q1", false}) {
		t.Errorf("parseOVSFDB for brs, whose port 1 is q1: %v", m)
	}

	js := `[{"mac":"02:00:00:00:00:01","ifname":"p1","master":"br1","state":""},
{"mac":"0E:5A:00:00:00:01","ifname":"p2","master":"br1","state":"static"},
{"mac":"aa:bb:cc:dd:ee:ff","ifname":"p1","vlan":1,"flags":["self"],"state":"permanent"},
{"mac":"12:34:56:78:9a:bc","ifname":"br1","master":"br1","state":"permanent"}]`
	bm, err := parseBridgeFDB(js, "br1")
	if err != nil || len(bm) != 2 || bm["0e:5a:00:00:00:01"] != (fdbEntry{"p2", true}) || bm["02:00:00:00:00:01"] != (fdbEntry{"p1", false}) {
		t.Errorf("parseBridgeFDB: %v %v", bm, err)
	}

	// IFLA_LINKINFO { IFLA_INFO_KIND, IFLA_INFO_DATA { ..., N_LEARNED, MAX_LEARNED } }.
	info := nl.NewRtAttr(unix.IFLA_LINKINFO|unix.NLA_F_NESTED, nil)
	info.AddRtAttr(nl.IFLA_INFO_KIND, nl.NonZeroTerminated("bridge"))
	data := info.AddRtAttr(nl.IFLA_INFO_DATA|unix.NLA_F_NESTED, nil)
	data.AddRtAttr(unix.IFLA_BR_AGEING_TIME, nl.Uint32Attr(30000))
	data.AddRtAttr(unix.IFLA_BR_FDB_N_LEARNED, nl.Uint32Attr(4096))
	data.AddRtAttr(unix.IFLA_BR_FDB_MAX_LEARNED, nl.Uint32Attr(65536))
	mtu := nl.NewRtAttr(unix.IFLA_MTU, nl.Uint32Attr(1500))
	msg := append(mtu.Serialize(), info.Serialize()...)
	n, limit, ok, err := parseBridgeLearned(msg)
	if err != nil || !ok || n != 4096 || limit != 65536 {
		t.Errorf("parseBridgeLearned: %d %d %v %v", n, limit, ok, err)
	}
	old := nl.NewRtAttr(unix.IFLA_LINKINFO, nil)
	old.AddRtAttr(nl.IFLA_INFO_DATA, nil).AddRtAttr(unix.IFLA_BR_AGEING_TIME, nl.Uint32Attr(30000))
	if _, _, ok, err := parseBridgeLearned(old.Serialize()); ok || err != nil {
		t.Errorf("a kernel without the attributes: ok %v, %v", ok, err)
	}
}

// TestCPUOthers: /proc/PID/stat read past a command with spaces and
// parentheses, with the time of the children it waited for; kernel
// threads told apart; and the machine's others read.
func TestCPUOthers(t *testing.T) {
	p, kernel, ok := ParseProcStat("4242 (a (b) c) S 17 4242 4242 0 -1 4194560 100 0 0 0 250 30 7 5 20 0 1 0 5 0 0")
	if !ok || kernel || p.ppid != 17 || p.Ticks != 292 {
		t.Errorf("parseProcStat: %+v kernel %v ok %v", p, kernel, ok)
	}
	if _, kernel, _ := ParseProcStat("22 (ksoftirqd/1) S 2 0 0 0 -1 69238848 0 0 0 0 0 2742 0 0 20 0 1 0 13 0 0"); !kernel {
		t.Errorf("ksoftirqd is a kernel thread")
	}
	if _, _, ok := ParseProcStat("9 (x) S 1"); ok {
		t.Errorf("a short line parsed")
	}
	if _, err := cpuOthers(); err != nil {
		t.Error(err)
	}
}

// TestExecuteMACFlood runs a small mac-flood through trestle in xdp mode
// and the Linux bridge: a flood from 10,000 sources fills a table of
// 4096, which holds no more; the static entries stay; the second bridge
// learns its 1000 addresses; every second has its sample; the newcomer's
// frames get through the full table, and trestle learns it.
func TestExecuteMACFlood(t *testing.T) {
	requireRoot(t)
	bin := trestleBinary(t)
	duts := []string{"trestle:xdp", "linux-bridge"}
	sc := Scenario{Name: "test", DUTs: MustSpecs(duts...), Hosts: 4, Chain: []int{1}, Sizes: []FrameSize{"64"}, Tests: []Kind{MACFloodTest{Sources: 10000}},
		StreamRate: 200e3, Duration: 2 * time.Second, MaxEntries: 4096, Reps: 1, Timing: TinyTiming()}
	before := ours(t, runPrefix)
	run, err := Execute(context.Background(), Config{Scenario: sc, Placement: "shared", Trestle: bin, WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range run.Results {
		if r.Error != "" {
			t.Errorf("%s %s %s: %s", r.DUT, r.Test, r.Param, r.Error)
		}
		if r.Flood == nil {
			continue
		}
		seen[r.DUT] = true
		rec := r.Flood
		s := SummarizeFlood(rec)
		t.Logf("%s: lost %d, rate %.3f, most learned %d, statics %d/%d, flood %.0f pps, %d at h4, bridge B %+v / %+v, RSS %d KiB",
			r.DUT, s.Lost, s.Ratio, s.MaxLearned, s.StaticsKept, s.Statics, rec.Flood.FloodOffered, rec.Flood.FloodDelivered, *s.SideBase, *s.SideFlood, s.RSSMax)
		if rec.Base.Sent == 0 || rec.Flood.Sent == 0 || rec.Flood.FloodSent == 0 || rec.Flood.FloodDelivered == 0 {
			t.Errorf("%s: nothing sent or flooded: %+v", r.DUT, rec)
		}
		if strings.HasPrefix(rec.TableLimit, "none:") {
			t.Logf("%s: %s: its table has no limit to check", r.DUT, rec.TableLimit)
		} else if want := floodFill(r.DUT, 4096); s.MaxLearned != want && !(s.MaxLearned == want+1 && newcomerIn(r.DUT, rec)) {
			t.Errorf("%s: the table held at most %d learned addresses; a flood from 10,000 sources should fill %d and no more", r.DUT, s.MaxLearned, want)
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
	if left := ours(t, runPrefix); len(left) != len(before) {
		t.Errorf("namespaces left: %v (before: %v)", left, before)
	}
}

// newcomerIn says whether trestle learned the newcomer into the room it
// keeps above the flood's mark: the table then holds one more.
func newcomerIn(dut string, rec *FloodRecord) bool {
	return strings.HasPrefix(dut, "trestle") && rec.Flood.Newcomer != nil && rec.Flood.Newcomer.Learned
}

// sources is the flood's source addresses of s's mac-flood test.
func sources(s Scenario) int {
	k, _ := TestOf[MACFloodTest](s)
	return k.Sources
}

// floodFill is what one port's flood fills a table of max entries to:
// trestle stops it at its high-water mark, a sixteenth (rounded up) below,
// the room kept for the other ports' newcomers (issue 29, docs/security.md
// "A table one port cannot starve"); the others fill it.
func floodFill(dut string, max int) int {
	if strings.HasPrefix(dut, "trestle") {
		return max - (max+15)/16
	}
	return max
}
