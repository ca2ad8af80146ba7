// Package scale tests a bridge of as many ports as a bridge takes
// (config.MaxPortsPerBridge, the Linux bridge's 1024): every port takes
// part in a flood, once, in both attach modes, and ports in slots far
// above the first 256 forward, learn and count like the first.
package scale

import (
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	tconfig "github.com/trestle/trestle/internal/config"
	"github.com/trestle/trestle/internal/netnsutil"
	"github.com/trestle/trestle/internal/testutil"
	"github.com/trestle/trestle/tests/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

// The switch's end of port i is "s<i>", the host end "h<i>", all host ends
// in one namespace with MAC 02:5c:00:00:HI:LO.
func swName(i int) string   { return fmt.Sprintf("s%d", i) }
func hostName(i int) string { return fmt.Sprintf("h%d", i) }
func hostMAC(i int) net.HardwareAddr {
	return net.HardwareAddr{2, 0x5c, 0, 0, byte(i >> 8), byte(i)}
}

// TestFloodEveryPort: a bridge of MaxPortsPerBridge ports floods a
// broadcast to every other port exactly once, from the first port and from
// the last, in each mode; a unicast to the last port's station, once
// learned, reaches it alone.
func TestFloodEveryPort(t *testing.T) {
	testutil.RequireNetns(t)
	n := tconfig.MaxPortsPerBridge
	sw := testutil.NewNS(t, "sw")
	hosts := testutil.NewNS(t, "hs")
	for _, ns := range []*testutil.NS{sw, hosts} {
		// No IPv6: its ND and MLD frames would be counted as floods.
		if err := ns.NoIPv6(); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	for i := range n {
		if err := netnsutil.Veth(&sw.NS, swName(i), &hosts.NS, hostName(i), netnsutil.VethOpts{MACB: hostMAC(i)}); err != nil {
			t.Fatalf("veth %d: %v", i, err)
		}
	}
	t.Logf("%d veth pairs in %v", n, time.Since(start).Round(time.Millisecond))

	for _, mode := range []string{"xdp", "tc"} {
		t.Run(mode, func(t *testing.T) {
			l := &harness.Lab{T: t, SW: sw, Dir: t.TempDir()}
			l.Sock = l.Dir + "/trestle.sock"
			l.Cfg = l.Dir + "/trestle.toml"
			var b strings.Builder
			fmt.Fprintf(&b, "[daemon]\nsocket = %q\n\n[[bridge]]\nname = \"big\"\n", l.Sock)
			for i := range n {
				fmt.Fprintf(&b, "\n[[bridge.port]]\ninterface = %q\nmode = %q\n", swName(i), mode)
			}
			l.WriteConfig(b.String())
			start := time.Now()
			l.Start()
			defer stop(t, l)
			waitForwarding(t, l, n)
			t.Logf("daemon with %d %s ports forwarding in %v", n, mode, time.Since(start).Round(time.Millisecond))

			last := n - 1
			for _, from := range []int{0, last} {
				before := rxPackets(t, hosts, "h", n)
				dropBefore := txDropped(t, sw, n)
				f := testutil.Frame(net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, hostMAC(from), 0x88b5,
					[]byte(fmt.Sprintf("flood from %d in %s", from, mode)))
				if err := hosts.RawSend(hostName(from), f); err != nil {
					t.Fatal(err)
				}
				got := waitDelta(t, hosts, n, before, uint64(n-1))
				dropAfter := txDropped(t, sw, n)
				var wrong []string
				kernelDrops := 0
				for i := range n {
					dropped := dropAfter[i] - dropBefore[i]
					want := uint64(1)
					if i == from {
						want = 0
					}
					if got[i]+dropped != want {
						wrong = append(wrong, fmt.Sprintf("%s: %d received, %d dropped by the kernel", hostName(i), got[i], dropped))
					}
					kernelDrops += int(dropped)
				}
				if len(wrong) > 0 {
					t.Errorf("a broadcast from %s: %d ports did not get exactly one copy: %s", hostName(from), len(wrong), first(wrong, 10))
				}
				if mode == "xdp" && kernelDrops > 0 {
					t.Errorf("a broadcast from %s: %d copies dropped by the veths, want none in xdp mode", hostName(from), kernelDrops)
				}
				// tc: each copy is a clone the veth queues on this CPU's
				// backlog, which takes net.core.netdev_max_backlog (1000 by
				// default) before it is next drained; the copies past it are
				// dropped and counted by the veth, as the Linux bridge's are
				// (docs/switching.md, "Ports at scale").
				t.Logf("a broadcast from %s in %s: %d of %d copies delivered, %d dropped by the kernel's backlog", hostName(from), mode, n-1-kernelDrops, n-1, kernelDrops)
			}
			// Both stations are learned by now (their broadcasts): a
			// frame from the first to the last port's station goes to it
			// alone.
			before := rxPackets(t, hosts, "h", n)
			f := testutil.Frame(hostMAC(last), hostMAC(0), 0x88b5, []byte("unicast to the last port"))
			if err := hosts.RawSend(hostName(0), f); err != nil {
				t.Fatal(err)
			}
			got := waitDelta(t, hosts, n, before, 1)
			for i := range n {
				want := uint64(0)
				if i == last {
					want = 1
				}
				if got[i] != want {
					t.Errorf("a unicast to %s: %s received %d", hostName(last), hostName(i), got[i])
				}
			}
			// The bridge is full: one more port is refused, saying so.
			if mode == "tc" {
				testutil.Veth(t, sw, "extra", sw, "extra-peer", "")
				out, err := l.CLI("port", "add", "big", "extra")
				if err == nil || !strings.Contains(out, fmt.Sprintf(`bridge "big" is full: it has %d ports, the most a bridge takes; put the next on another bridge`, n)) {
					t.Errorf("port add to a full bridge: %v %q", err, out)
				}
			}
			e, ok := l.FDBEntry(hostMAC(last))
			if !ok || e.Port != swName(last) {
				t.Errorf("the last port's station: %+v %v, want it learned on %s", e, ok, swName(last))
			}
			c := l.Stats(swName(last)).Counters
			if tx, rx := c.Get("tx_packets"), c.Get("rx_packets"); tx != 2 || rx != 1 {
				t.Errorf("the last port's counters: tx %d rx %d, want 2 (the first port's flood and unicast) and 1 (its own flood)", tx, rx)
			}
		})
	}
}

// stop ends the daemon and checks that it took its programs off. Taking
// a tc program off a port waits for an RCU grace period under the RTNL
// lock (the kernel's tcx detach), some 12 ms each here: 1024 ports take
// longer than the harness's 5 s before SIGKILL.
func stop(t *testing.T, l *harness.Lab) {
	t.Helper()
	start := time.Now()
	_ = l.Daemon.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-l.Daemon.Done():
	case <-time.After(2 * time.Minute):
		t.Errorf("the daemon did not stop within 2 minutes")
	}
	if err := l.Daemon.Stop(); err != nil && !strings.Contains(err.Error(), "terminated") {
		t.Errorf("daemon exit: %v", err)
	}
	t.Logf("the daemon stopped in %v", time.Since(start).Round(time.Millisecond))
	l.AssertNoPrograms()
}

// waitForwarding waits until every port of the bridge is up.
func waitForwarding(t *testing.T, l *harness.Lab, n int) {
	t.Helper()
	deadline := time.Now().Add(120 * time.Second)
	for {
		st := l.Show()
		up := 0
		for _, b := range st.Bridges {
			for _, p := range b.Ports {
				if p.State == "up" {
					up++
				}
			}
		}
		if up == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d ports up after 120 s", up, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// rxPackets reads the frames every host end received, in one dump.
func rxPackets(t *testing.T, ns *testutil.NS, prefix string, n int) []uint64 {
	t.Helper()
	return linkCounts(t, ns, prefix, n, func(s *netlink.LinkStatistics) uint64 { return s.RxPackets })
}

// txDropped reads what each switch end dropped on the way out: a veth
// counts there a frame its peer's backlog had no room for.
func txDropped(t *testing.T, ns *testutil.NS, n int) []uint64 {
	t.Helper()
	return linkCounts(t, ns, "s", n, func(s *netlink.LinkStatistics) uint64 { return s.TxDropped })
}

// linkCounts reads one counter of the links prefix0..prefix<n-1> in one dump.
func linkCounts(t *testing.T, ns *testutil.NS, prefix string, n int, get func(*netlink.LinkStatistics) uint64) []uint64 {
	t.Helper()
	c := make([]uint64, n)
	err := ns.NS.Do(func() error {
		var links []netlink.Link
		err := netnsutil.RetryIntr(func() (err error) {
			links, err = netlink.LinkList()
			return err
		})
		if err != nil {
			return err
		}
		for _, l := range links {
			var i int
			if _, err := fmt.Sscanf(l.Attrs().Name, prefix+"%d", &i); err != nil || i < 0 || i >= n {
				continue
			}
			if s := l.Attrs().Statistics; s != nil {
				c[i] = get(s)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitDelta waits until the host ends together received want frames more
// than before (or 2 s), then a little longer for any extra, and returns
// each one's count.
func waitDelta(t *testing.T, ns *testutil.NS, n int, before []uint64, want uint64) []uint64 {
	t.Helper()
	var d []uint64
	deadline := time.Now().Add(2 * time.Second)
	for {
		now := rxPackets(t, ns, "h", n)
		d = make([]uint64, n)
		var sum uint64
		for i := range n {
			d[i] = now[i] - before[i]
			sum += d[i]
		}
		if sum >= want || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	now := rxPackets(t, ns, "h", n)
	for i := range n {
		d[i] = now[i] - before[i]
	}
	return d
}

func first(s []string, n int) string {
	if len(s) > n {
		return strings.Join(s[:n], ", ") + fmt.Sprintf(" and %d more", len(s)-n)
	}
	return strings.Join(s, ", ")
}
