package multicast

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/trestle/trestle/internal/lab"
	"github.com/trestle/trestle/internal/lab/labtest"
)

func TestMain(m *testing.M) { labtest.Main(m) }

// TestMulticastKind: the multicast kind is registered with its preset
// (snooping DUTs and their nosnoop baselines), has a section of its own,
// and refuses what it cannot run; its flags set its settings, and more
// groups or listeners grow the scenario's hosts.
func TestMulticastKind(t *testing.T) {
	if lab.KindOf(TestMulticast) == nil || !lab.OwnSection(TestMulticast) {
		t.Fatalf("multicast: registered %v, own section %v", lab.KindOf(TestMulticast) != nil, lab.OwnSection(TestMulticast))
	}
	s, ok := lab.Scenarios["multicast"]
	if !ok || !s.Has(TestMulticast) || s.Hosts != 11 || s.Reps < 3 || !s.HasPacketTests() {
		t.Fatalf("multicast preset: %+v", s)
	}
	if got := strings.Join(lab.SpecTexts(s.DUTs), ","); got != "trestle:xdp,trestle:tc,linux-bridge,ovs,trestle:tc@nosnoop,linux-bridge@nosnoop" {
		t.Errorf("multicast preset's DUTs: %s", got)
	}
	if n := lab.KindOf(TestMulticast).Needs(s); !n.Multicast || !n.AllHosts || n.Direct {
		t.Errorf("needs: %+v", n)
	}
	notes, err := s.PrepareKinds()
	if err != nil || len(notes) != 1 || !strings.Contains(notes[0], "239.1.1.4: h8, h9; hosts h10..h11 join none") || !strings.Contains(notes[0], "2.5 kpps to each group") {
		t.Errorf("prepare: %q, %v", notes, err)
	}
	for _, c := range []struct {
		edit func(*lab.Scenario)
		want string
	}{
		{func(s *lab.Scenario) { lab.Configure(s, func(k Kind) Kind { k.Rate = 0; return k }) }, "rate 0"},
		{func(s *lab.Scenario) { lab.Configure(s, func(k Kind) Kind { k.Groups = 65; return k }) }, "65 groups"},
		{func(s *lab.Scenario) { lab.Configure(s, func(k Kind) Kind { k.Listeners = 0; return k }) }, "0 listeners"},
		{func(s *lab.Scenario) { s.Hosts = 9 }, "need 10"},
	} {
		bad := s
		c.edit(&bad)
		if _, err := bad.PrepareKinds(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("prepare: %v, want %q", err, c.want)
		}
	}
	flags := func(args ...string) (lab.Scenario, error) {
		f := pflag.NewFlagSet("lab", pflag.ContinueOnError)
		lab.DeclareFlags(f)
		if err := f.Parse(args); err != nil {
			return lab.Scenario{}, err
		}
		sc := s
		return sc, sc.SetFlags(f)
	}
	sc, err := flags("--mcast-groups", "8", "--mcast-listeners", "3", "--mcast-rate", "1000")
	if k, _ := lab.TestOf[Kind](sc); err != nil || k.Groups != 8 || k.Listeners != 3 || k.Rate != 1000 || sc.Hosts != 1+8*3+2 {
		t.Errorf("--mcast-groups 8 --mcast-listeners 3 --mcast-rate 1000: %+v, %d hosts, %v", k, sc.Hosts, err)
	}
	if _, err := sc.PrepareKinds(); err != nil {
		t.Errorf("prepare after the flags: %v", err)
	}
	if sc, err := flags("--mcast-groups", "1"); err != nil || sc.Hosts != s.Hosts {
		t.Errorf("fewer groups shrank the hosts: %d, %v", sc.Hosts, err)
	}
	if k, _ := lab.TestOf[Kind](s); k.Groups != DefaultGroups || k.Listeners != DefaultListeners || k.Rate != DefaultRate {
		t.Errorf("the flags changed the preset: %+v", k)
	}
	if _, err := flags("--mcast-groups", "65"); err == nil {
		t.Errorf("--mcast-groups 65 taken")
	}
	sc, err = flags("--mcast-family", "ipv6")
	k, _ := lab.TestOf[Kind](sc)
	if err != nil || !k.IPv6 || k.group(0) != "ff0e::1:1" || k.group(3) != "ff0e::1:4" {
		t.Errorf("--mcast-family ipv6: %+v, %v", k, err)
	}
	if notes, err := sc.PrepareKinds(); err != nil || len(notes) != 1 || !strings.Contains(notes[0], "multicast (ipv6)") || !strings.Contains(notes[0], "MLDv2 reports") || !strings.Contains(notes[0], "ff0e::1:4: h8, h9") {
		t.Errorf("prepare, ipv6: %q, %v", notes, err)
	}
	if _, err := flags("--mcast-family", "ipx"); err == nil || !strings.Contains(err.Error(), "ipv4 or ipv6") {
		t.Errorf("--mcast-family ipx: %v", err)
	}
}

// TestCheckSnoop: @nosnoop is taken in the multicast scenario and refused
// in one with no kind that turns snooping on, where it would change nothing.
func TestCheckSnoop(t *testing.T) {
	if err := lab.Scenarios["multicast"].CheckSnoop(); err != nil {
		t.Errorf("multicast: %v", err)
	}
	s := lab.Scenario{Name: "plain", DUTs: lab.MustSpecs("trestle", "trestle@nosnoop"), Hosts: 2, Chain: []int{1}}
	if err := s.CheckSnoop(); err == nil || !strings.Contains(err.Error(), `DUT "trestle@nosnoop"`) || !strings.Contains(err.Error(), "plain has no multicast test") {
		t.Errorf("without a multicast test: %v", err)
	}
	s.DUTs = lab.MustSpecs("trestle")
	if err := s.CheckSnoop(); err != nil {
		t.Errorf("no @nosnoop: %v", err)
	}
}

// stream is a record of 4 groups at 2 listeners each and 2 hosts that
// joined none, each listener getting own of its group's 1000 frames and
// stray of each other group's, each non-listener other of each group's.
func stream(snoop bool, own, stray, other uint64) Record {
	rec := Record{Snoop: snoop, Snooping: "how it snoops", Groups: []string{"239.1.1.1", "239.1.1.2", "239.1.1.3", "239.1.1.4"},
		RatePerGroup: 500, Sent: 4000, Seconds: 2, Offered: 2000}
	if snoop {
		rec.JoinMs = 50
	}
	k := Kind{Groups: 4, Listeners: 2}
	for i := 1; i <= 10; i++ {
		h := Host{Name: fmt.Sprintf("h%d", i+1), Group: k.groupOf(i)}
		for g := range 4 {
			switch {
			case h.Group == g:
				h.Got = append(h.Got, own)
			case h.Group >= 0:
				h.Got = append(h.Got, stray)
			default:
				h.Got = append(h.Got, other)
			}
		}
		rec.Hosts = append(rec.Hosts, h)
	}
	return rec
}

// TestMulticastSection: the multicast table from recorded streams:
// medians with the least and most over the repetitions, ministat's
// summary with 3 or more, trestle with snooping warned of where a
// listener missed frames or a host got a group it did not join (a peer's
// figures and a flooding baseline's not), and a DUT that cannot snoop said
// not measured; the records survive the run's JSON.
func TestMulticastSection(t *testing.T) {
	run := &lab.Run{DUTs: []string{"trestle:xdp", "linux-bridge", "trestle:tc@nosnoop", "floor"}}
	add := func(dut string, rep int, rec Record, errText string) {
		r := lab.Result{DUT: dut, Rep: rep, Test: TestMulticast, Param: "non-listener", Unit: "pps", Value: rec.nonListenerPPS(), Error: errText}
		if err := r.SetRecord(rec); err != nil {
			t.Fatal(err)
		}
		run.Results = append(run.Results, r)
	}
	add("trestle:xdp", 1, stream(true, 1000, 0, 0), "")
	add("trestle:xdp", 2, stream(true, 1000, 0, 0), "")
	add("trestle:xdp", 3, stream(true, 900, 0, 20), "")
	add("linux-bridge", 1, stream(true, 1000, 0, 2), "")
	add("trestle:tc@nosnoop", 1, stream(false, 1000, 1000, 1000), "")
	add("trestle:tc@nosnoop", 2, stream(false, 1000, 1000, 1000), "")
	add("trestle:tc@nosnoop", 3, stream(false, 950, 950, 950), "")
	add("floor", 1, Record{Unmeasured: "floor has no IGMP snooping the lab can turn on or off"}, "")

	term, md := labtest.Section(t, run)
	term = regexp.MustCompile(` {2,}`).ReplaceAllString(term, " ")
	lacks(t, "terminal", term, []string{
		"trestle:xdp on 2.0 kpps 50 ms 500 pps (450 pps..500 pps) 100.0% (90.0%..100.0%) 0 pps 0 pps (0 pps..40 pps) 0.0% (0.0%..2.0%) 2 of 3\n",
		"linux-bridge on 2.0 kpps 50 ms 500 pps 100.0% 0 pps 4 pps 0.2% 1 of 1\n",
		"trestle:tc@nosnoop off 2.0 kpps - 500 pps (475 pps..500 pps) 100.0% (95.0%..100.0%) 1.5 kpps (1.4 kpps..1.5 kpps) 2.0 kpps (1.9 kpps..2.0 kpps) 100.0% (95.0%..100.0%) 2 of 3\n",
		"floor none not measured - - - - - - -",
		"trestle:xdp listener, own group pps: N 3 Min 450 Max 500 Median 500 Avg 483.3 Stddev 28.9",
		"warning: trestle:xdp: a listener got less than 99% of its group's frames in 1 of 3 (#3 90.0%)",
		"warning: trestle:xdp: hosts got frames of groups they did not join, snooping on, in 1 of 3 (#3)",
		"not measured: floor has no IGMP snooping",
	})
	if strings.Contains(term, "warning: linux-bridge") || strings.Contains(term, "warning: trestle:tc@nosnoop") {
		t.Errorf("a peer's or a baseline's figures warned of:\n%s", term)
	}
	lacks(t, "markdown", md, []string{
		"## Multicast",
		"| trestle:xdp | on | 2.0 kpps | 50 ms | 500 pps (450 pps..500 pps) |",
		"- trestle:xdp #3, of 1000 a group: h2 *900/0/0/0; h3 *900/0/0/0; h4 0/*900/0/0;",
		"h10 20/20/20/20; h11 20/20/20/20",
		"- linux-bridge: how it snoops",
	})
	if term, md := (Kind{}).Section(&lab.Run{DUTs: []string{"trestle"}}); term != "" || md != "" {
		t.Errorf("a run without multicast results has a section: %q %q", term, md)
	}
}

// TestMulticastUnsnooping: a DUT with no snooping the lab can turn on or
// off is not measured: the unit is skipped as unavailable, with a result
// that says why.
func TestMulticastUnsnooping(t *testing.T) {
	d, err := lab.ParseDUT("direct")
	if err != nil {
		t.Fatal(err)
	}
	var got []lab.Result
	u := &lab.UnitRun{S: lab.Scenarios["multicast"], Rig: &lab.Rig{T: &lab.Topo{}, DUT: d}, Base: lab.Result{DUT: "direct", Rep: 1},
		Add: func(r lab.Result) { got = append(got, r) }, Status: func(string) {}, Notef: func(string) {}}
	err = Kind{Groups: 1, Listeners: 1, Rate: DefaultRate}.Run(context.Background(), u)
	if !errors.Is(err, lab.ErrUnavailable) || !strings.Contains(err.Error(), "no IGMP snooping") {
		t.Errorf("run: %v, want the DUT unavailable", err)
	}
	var rec Record
	if len(got) != 1 || got[0].RecordOf(&rec) != nil || rec.Unmeasured == "" {
		t.Errorf("results: %+v", got)
	}
}

// lacks fails t for each of wants that text does not hold.
func lacks(t *testing.T, what, text string, wants []string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(text, want) {
			t.Errorf("%s lacks %q:\n%s", what, want, text)
		}
	}
}

// TestMulticastScenario streams to two groups for real: IPv4 (IGMPv3)
// through trestle (xdp) and the Linux bridge with snooping and trestle
// (tc) without, IPv6 (MLDv2) through trestle (tc) with snooping. With
// snooping the table holds both listeners, each gets its own group's
// frames and no other's, and the host that joined none gets nothing;
// without, that host gets every group's frames; the runs leave no
// namespace.
func TestMulticastScenario(t *testing.T) {
	labtest.RequireRoot(t)
	bin := labtest.TrestleBinary(t)
	for _, c := range []struct {
		ipv6 bool
		duts []string
	}{
		{false, []string{"trestle:xdp", "linux-bridge", "trestle:tc@nosnoop"}},
		{true, []string{"trestle:tc"}},
	} {
		sc := lab.Scenario{Name: "test", DUTs: lab.MustSpecs(c.duts...), Hosts: 4, Chain: []int{1}, Sizes: []lab.FrameSize{"64"},
			Tests: []lab.Kind{Kind{Groups: 2, Listeners: 1, Rate: 1000, IPv6: c.ipv6}}, Reps: 1, Timing: lab.TinyTiming()}
		before := labtest.Ours(t)
		run := labtest.Execute(t, sc, bin)
		seen := map[string]bool{}
		for _, r := range run.Results {
			if r.Test != TestMulticast {
				continue
			}
			var rec Record
			if err := r.RecordOf(&rec); err != nil {
				t.Fatal(err)
			}
			seen[r.DUT] = true
			checkStream(t, r.DUT, rec, c.ipv6)
		}
		for _, d := range c.duts {
			if !seen[d] {
				t.Errorf("%s: no multicast result", d)
			}
		}
		if left := labtest.Ours(t); len(left) != len(before) {
			t.Errorf("namespaces left: %v (before: %v)", left, before)
		}
	}
}

// checkStream holds a real stream's record to what the DUT's snooping
// promises: a listener gets at least half its group's frames (a busy
// machine may lose some; the rest is the subject), with snooping not one
// of a group it did not join, and without it at least half of those too.
func checkStream(t *testing.T, dut string, rec Record, ipv6 bool) {
	t.Helper()
	var hs []string
	for _, h := range rec.Hosts {
		hs = append(hs, h.Name+" "+h.gotText())
	}
	t.Logf("%s %s: snoop %v, table in %.0f ms, sent %d: %s", dut, rec.Family, rec.Snoop, rec.JoinMs, rec.Sent, strings.Join(hs, "; "))
	if rec.Sent == 0 || len(rec.Hosts) != 3 || (rec.Family == "ipv6") != ipv6 || ipv6 && !strings.HasPrefix(rec.Groups[0], "ff0e:") {
		t.Fatalf("%s: %+v", dut, rec)
	}
	half := uint64(rec.perGroup() / 2)
	for _, h := range rec.Hosts {
		for g, n := range h.Got {
			switch {
			case g == h.Group && n < half:
				t.Errorf("%s: %s got %d of its group's %.0f frames", dut, h.Name, n, rec.perGroup())
			case g != h.Group && rec.Snoop && n != 0:
				t.Errorf("%s: %s got %d frames of %s, which it did not join", dut, h.Name, n, rec.Groups[g])
			case g != h.Group && !rec.Snoop && n < half:
				t.Errorf("%s: %s got %d frames of %s without snooping, want them flooded", dut, h.Name, n, rec.Groups[g])
			}
		}
	}
	if rec.Snoop != !strings.HasSuffix(dut, "@nosnoop") || rec.Snoop && rec.JoinMs <= 0 {
		t.Errorf("%s: snoop %v, table in %v ms", dut, rec.Snoop, rec.JoinMs)
	}
}
