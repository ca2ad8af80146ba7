package forward

import (
	"bytes"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/testutil"
	"github.com/trestle/trestle/tests/harness"
)

// TestForwardingModes: in each mode three hosts ping each other and iperf3
// TCP runs through the switch with the hosts' default offloads; the learned
// table names each host on its port; the daemon leaves nothing attached.
func TestForwardingModes(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"auto", "xdp", "tc"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			l := harness.NewLab(t, 3)
			l.WriteConfig(l.Config("", func(int) string { return fmt.Sprintf("mode = %q\n", mode) }))
			l.Start()

			want := mode
			if mode == "auto" {
				want = "tc" // veth ports whose peers are host stacks
			}
			for _, p := range l.Show().Bridges[0].Ports {
				if p.State != "up" || p.Mode != want || p.Reason == "" {
					t.Errorf("port %s: state %s mode %s (%s), want up in %s with a reason", p.Interface, p.State, p.Mode, p.Reason, want)
				}
			}

			l.PingAll()
			es := l.FDB()
			for i := 1; i <= 3; i++ {
				found := false
				for _, e := range es {
					if e.MAC == harness.HostMAC(i).String() {
						found = true
						if e.Port != harness.PortName(i) || e.Bridge != "br0" || e.Static || e.VLAN != 0 {
							t.Errorf("fdb entry for h%d: %+v, want learned on %s", i, e, harness.PortName(i))
						}
					}
				}
				if !found {
					t.Errorf("fdb has no entry for h%d (%s): %+v", i, harness.HostMAC(i), es)
				}
			}

			bps, err := testutil.Iperf(t, l.Host(2), harness.HostIP(2), l.Host(1), 2, 1)
			if err != nil {
				t.Fatalf("iperf3 through trestle in %s mode: %v", mode, err)
			}
			if bps <= 0 {
				t.Fatalf("iperf3 moved nothing in %s mode", mode)
			}
			t.Logf("%s mode: iperf3 TCP h1 -> h2 %.2f Gbit/s (a sanity figure, not a benchmark)", mode, bps/1e9)
			if s := l.Stats(harness.PortName(1)); s.Counters.Get("rx_packets") == 0 || s.Mode != want {
				t.Errorf("stats for %s: %+v", harness.PortName(1), s)
			}

			l.Stop()
			if mode == "xdp" {
				// The daemon gave the peers their offloads back.
				out := l.Host(1).MustExec(t, "ethtool", "-k", "eth0")
				if !strings.Contains(out, "tx-checksum-ip-generic: on") {
					t.Errorf("h1 eth0 TX checksum offload not restored:\n%s", out)
				}
			}
		})
	}
}

// TestFlooding: unknown unicast reaches every other host, known unicast only
// its port, broadcast ARP works.
func TestFlooding(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"xdp", "tc"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			l := harness.NewLab(t, 3)
			l.WriteConfig(l.Config("", func(int) string { return fmt.Sprintf("mode = %q\n", mode) }))
			l.Start()

			caps := map[int]*testutil.Capturer{}
			for i := 1; i <= 3; i++ {
				caps[i] = l.Host(i).Capture(t, "eth0")
			}
			// ARP: h1 asks for h2 by broadcast; h3 sees the request too.
			if err := l.Host(1).Ping(harness.HostIP(2), 1); err != nil {
				t.Fatalf("ping h1 -> h2 (needs broadcast ARP): %v", err)
			}
			isARPFromH1 := func(f []byte) bool {
				return len(f) >= 14 && bytes.Equal(f[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}) &&
					bytes.Equal(f[6:12], harness.HostMAC(1)) && f[12] == 0x08 && f[13] == 0x06
			}
			if n := caps[3].WaitFor(isARPFromH1, 1, 2*time.Second); n < 1 {
				t.Errorf("h3 did not see h1's broadcast ARP request")
			}

			unknown := net.HardwareAddr{0x02, 0xee, 0, 0, 0, 0x99}
			if err := l.Host(1).RawSend("eth0", harness.Marked(unknown, harness.HostMAC(1), "unknown-unicast")); err != nil {
				t.Fatal(err)
			}
			for _, i := range []int{2, 3} {
				if n := caps[i].WaitFor(harness.HasMarker("unknown-unicast"), 1, 2*time.Second); n != 1 {
					t.Errorf("h%d got %d copies of the unknown unicast frame, want 1", i, n)
				}
			}
			if err := l.Host(1).RawSend("eth0", harness.Marked(harness.HostMAC(2), harness.HostMAC(1), "known-unicast")); err != nil {
				t.Fatal(err)
			}
			if n := caps[2].WaitFor(harness.HasMarker("known-unicast"), 1, 2*time.Second); n != 1 {
				t.Errorf("h2 got %d copies of the frame to its MAC, want 1", n)
			}
			if n := caps[3].WaitFor(harness.HasMarker("known-unicast"), 1, 500*time.Millisecond); n != 0 {
				t.Errorf("h3 got the frame to h2's known MAC: known unicast was flooded")
			}
			if n := caps[1].WaitFor(harness.HasMarker("unknown-unicast"), 1, 100*time.Millisecond); n != 0 {
				t.Errorf("the sender got its own flooded frame back")
			}
			if s := l.Stats(harness.PortName(1)); s.Counters.Get("flooded") == 0 {
				t.Errorf("port-h1 counted no flooded frames: %+v", s)
			}
			l.Stop()
		})
	}
}

// TestStaticMoveFlush: a static entry wins over learning and survives a flush
// of learned entries; a MAC that moves ports is re-learned and counted.
func TestStaticMoveFlush(t *testing.T) {
	t.Parallel()
	l := harness.NewLab(t, 3)
	static := net.HardwareAddr{0x02, 0x5a, 0, 0, 0, 0x01}
	l.WriteConfig(l.Config(`
[[bridge.static]]
mac = "`+static.String()+`"
port = "port-h3"
`, nil))
	l.Start()
	l.PingAll()

	// A frame from h1 with the static address as source: the entry stays.
	if err := l.Host(1).RawSend("eth0", harness.Marked(harness.HostMAC(2), static, "spoof")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if e, ok := l.FDBEntry(static); !ok || !e.Static || e.Port != "port-h3" {
		t.Errorf("static entry after a frame from another port: %+v (found %v), want static on port-h3", e, ok)
	}

	// h1's address shows up behind port-h2: it moved.
	if err := l.Host(2).RawSend("eth0", harness.Marked(harness.HostMAC(3), harness.HostMAC(1), "moved")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if e, _ := l.FDBEntry(harness.HostMAC(1)); e.Port != "port-h2" {
		t.Errorf("h1's MAC after it moved: on %q, want port-h2", e.Port)
	}
	if s := l.Stats("port-h2"); s.Counters.Get("moved") != 1 {
		t.Errorf("port-h2 moved counter %d, want 1", s.Counters.Get("moved"))
	}
	// And back: h1 talks again from its own port.
	if err := l.Host(1).Ping(harness.HostIP(3), 1); err != nil {
		t.Fatal(err)
	}
	if e, _ := l.FDBEntry(harness.HostMAC(1)); e.Port != "port-h1" {
		t.Errorf("h1's MAC after it came back: on %q, want port-h1", e.Port)
	}

	// By port and by VLAN (0: untagged, as every entry of this bridge).
	macs := func(es []ctl.FDBEntry) string {
		var m []string
		for _, e := range es {
			m = append(m, e.MAC)
		}
		return strings.Join(m, " ")
	}
	var es []ctl.FDBEntry
	if l.CLIJSON(&es, "fdb", "show", "br0", "--port", "port-h1"); macs(es) != harness.HostMAC(1).String() {
		t.Errorf("fdb show br0 --port port-h1: %s, want h1's address alone", macs(es))
	}
	if l.CLIJSON(&es, "fdb", "show", "br0", "--port", "port-h3", "--vlan", "0"); macs(es) != macs([]ctl.FDBEntry{{MAC: harness.HostMAC(3).String()}, {MAC: static.String()}}) &&
		macs(es) != macs([]ctl.FDBEntry{{MAC: static.String()}, {MAC: harness.HostMAC(3).String()}}) {
		t.Errorf("fdb show br0 --port port-h3 --vlan 0: %s, want h3's address and the static one", macs(es))
	}
	if l.CLIJSON(&es, "fdb", "show", "br0", "--vlan", "7"); len(es) != 0 {
		t.Errorf("fdb show br0 --vlan 7: %s, want none", macs(es))
	}
	if out, err := l.CLI("fdb", "flush", "br0", "--port", "port-h1", "--vlan", "0"); err != nil || out != "removed 1 learned entries\n" {
		t.Errorf("fdb flush br0 --port port-h1 --vlan 0: %v %q", err, out)
	}
	if _, ok := l.FDBEntry(harness.HostMAC(1)); ok {
		t.Errorf("h1's address is there after a flush of port-h1")
	}
	if _, ok := l.FDBEntry(harness.HostMAC(2)); !ok {
		t.Errorf("a flush of port-h1 took h2's address from port-h2")
	}
	if out, err := l.CLI("fdb", "flush", "br0", "--port", "port-h9"); err == nil || !strings.Contains(out, `bridge "br0" has no port "port-h9"`) {
		t.Errorf("fdb flush of a port that is not there: %v %q", err, out)
	}

	out, err := l.CLI("fdb", "flush", "br0")
	if err != nil {
		t.Fatalf("fdb flush: %v\n%s", err, out)
	}
	es = l.FDB()
	if len(es) != 1 || es[0].MAC != static.String() || !es[0].Static {
		t.Errorf("after flush: %+v, want only the static entry", es)
	}

	// Static entries from the CLI, and deleting them.
	extra := net.HardwareAddr{0x02, 0x5a, 0, 0, 0, 0x02}
	if out, err := l.CLI("fdb", "add", "br0", extra.String(), "port-h2", "--vlan", "7"); err != nil {
		t.Fatalf("fdb add: %v\n%s", err, out)
	}
	if e, ok := l.FDBEntry(extra); !ok || !e.Static || e.VLAN != 7 || e.Port != "port-h2" {
		t.Errorf("entry added from the CLI: %+v", e)
	}
	if out, err := l.CLI("fdb", "del", "br0", extra.String(), "--vlan", "7"); err != nil {
		t.Fatalf("fdb del: %v\n%s", err, out)
	}
	if _, ok := l.FDBEntry(extra); ok {
		t.Errorf("entry still there after fdb del")
	}
	if out, err := l.CLI("fdb", "add", "br0", extra.String(), "port-h9"); err == nil || !strings.Contains(out, `"port-h9" is not a port`) {
		t.Errorf("fdb add to a missing port: %v %s", err, out)
	}
	l.Stop()
}

// TestAgingAndLimits: a short aging time removes idle entries; a port at its
// max_macs stops learning and counts the drop.
func TestAgingAndLimits(t *testing.T) {
	t.Parallel()
	l := harness.NewLab(t, 2)
	l.WriteConfig(l.Config(`aging = "2s"`, func(i int) string {
		if i == 1 {
			return "max_macs = 3\n"
		}
		return ""
	}))
	l.Start()

	// Ten source addresses from h1; only three may be learned.
	for k := 0; k < 10; k++ {
		src := net.HardwareAddr{0x02, 0xaa, 0, 0, 0, byte(k + 1)}
		if err := l.Host(1).RawSend("eth0", harness.Marked(harness.HostMAC(2), src, "limit")); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(200 * time.Millisecond)
	onH1 := 0
	for _, e := range l.FDB() {
		if e.Port == "port-h1" {
			onH1++
		}
	}
	if onH1 > 3 {
		t.Errorf("port-h1 holds %d addresses, max_macs is 3", onH1)
	}
	s := l.Stats("port-h1")
	if s.Drops["mac_limit"] < 7 {
		t.Errorf("mac_limit drops %d, want at least 7 (%d learned)", s.Drops["mac_limit"], onH1)
	}

	// Idle entries go after the aging time (2s, swept every 0.5s).
	deadline := time.Now().Add(10 * time.Second)
	for len(l.FDB()) > 0 && time.Now().Before(deadline) {
		time.Sleep(250 * time.Millisecond)
	}
	if es := l.FDB(); len(es) > 0 {
		t.Fatalf("entries still there 10s after traffic stopped with aging 2s: %+v", es)
	}
	// With its addresses aged out, the port learns again.
	if err := l.Host(1).Ping(harness.HostIP(2), 1); err != nil {
		t.Fatalf("ping after aging: %v", err)
	}
	if _, ok := l.FDBEntry(harness.HostMAC(1)); !ok {
		t.Errorf("h1 not re-learned after its entries aged out")
	}
	l.Stop()
}

// TestBadFrames: malformed frames from a host are dropped and counted by
// reason, and the switch keeps forwarding.
func TestBadFrames(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"xdp", "tc"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			l := harness.NewLab(t, 2)
			l.WriteConfig(l.Config("", func(int) string { return fmt.Sprintf("mode = %q\n", mode) }))
			l.Start()
			l.PingAll()
			src, dst := harness.HostMAC(1), harness.HostMAC(2)
			bad := []struct {
				frame  []byte
				reason string
			}{
				{testutil.Frame(dst, src, 0x0800, make([]byte, 6)), "runt"},
				{testutil.Frame(dst, src, 0x0806, make([]byte, 10)), "runt"},
				{testutil.Frame(dst, src, 0x05ff, make([]byte, 46)), "bad_ethertype"},
				{testutil.Frame(dst, src, 1500, make([]byte, 46)), "bad_ethertype"},
				{testutil.Frame(net.HardwareAddr{0x01, 0x80, 0xc2, 0, 0, 0}, src, 0x0026, make([]byte, 46)), "reserved_address"},
				{testutil.Frame(net.HardwareAddr{0x01, 0x80, 0xc2, 0, 0, 0x0e}, src, 0x88cc, make([]byte, 46)), "reserved_address"},
				{testutil.Frame(dst, net.HardwareAddr{0x01, 0, 0x5e, 0, 0, 1}, 0x0800, make([]byte, 46)), "bad_source"},
			}
			want := map[string]uint64{}
			before := l.Stats(harness.PortName(1)).Drops
			capt := l.Host(2).Capture(t, "eth0")
			for _, b := range bad {
				if err := l.Host(1).RawSend("eth0", b.frame); err != nil {
					t.Fatalf("send %s frame: %v", b.reason, err)
				}
				want[b.reason]++
			}
			time.Sleep(200 * time.Millisecond)
			after := l.Stats(harness.PortName(1)).Drops
			for reason, n := range want {
				if got := after[reason] - before[reason]; got != n {
					t.Errorf("%s drops went up by %d, want %d", reason, got, n)
				}
			}
			for _, f := range capt.Frames() {
				for _, b := range bad {
					if bytes.Equal(f, b.frame) {
						t.Errorf("a %s frame reached h2", b.reason)
					}
				}
			}
			l.PingAll()
			l.Stop()
		})
	}
}
