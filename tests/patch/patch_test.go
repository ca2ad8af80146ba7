package patch

// Patch port end-to-end tests (issue 12): one daemon runs three bridges
// chained br0 - br1 - br2 by patch ports, with h1 and h2 on br0, h3 on br1
// and h4 on br2, every host port in xdp or in tc mode. Hosts send hand-built
// frames and every host captures what reaches it (harness.VLANRun), so a copy too
// many, a copy missing or one back at its sender shows; tables, counters and
// show are read through the CLI as a user would.

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/testutil"
	"github.com/trestle/trestle/tests/harness"
)

// chainBridges are the chain's bridges in order, each patched to its
// neighbours, and the hosts on each.
var chainBridges = []struct {
	name  string
	hosts []int
}{{"br0", []int{1, 2}}, {"br1", []int{3}}, {"br2", []int{4}}}

// chainNames are the patch ports given a name in the config; the others
// have the default, "patch-" + the peer bridge.
var chainNames = map[[2]string]string{{"br2", "br1"}: "to-br1"}

func patchName(bridge, peer string) string {
	if n, ok := chainNames[[2]string{bridge, peer}]; ok {
		return n
	}
	return "patch-" + peer
}

// chainOf returns the index in chainBridges of host h's bridge.
func chainOf(h int) int {
	for i, b := range chainBridges {
		if slices.Contains(b.hosts, h) {
			return i
		}
	}
	panic(fmt.Sprintf("h%d is on no bridge of the chain", h))
}

// patchChain is a started chain; joined[i] says whether chainBridges[i] and
// chainBridges[i+1] are patched in the running config.
type patchChain struct {
	*harness.Lab
	mode   string
	joined [2]bool
	caps   map[int]*testutil.Capturer
}

func newPatchChain(t *testing.T, mode string) *patchChain {
	t.Helper()
	c := &patchChain{Lab: harness.NewLab(t, 4), mode: mode, joined: [2]bool{true, true}}
	c.WriteConfig(c.config())
	c.Start()
	for _, b := range c.Show().Bridges {
		for _, p := range b.Ports {
			if p.Interface != "" && (p.State != "up" || p.Mode != mode) {
				t.Fatalf("%s port %s: state %s mode %s (%s), want up in %s", b.Name, p.Interface, p.State, p.Mode, p.Reason, mode)
			}
		}
	}
	c.caps = map[int]*testutil.Capturer{}
	for i := 1; i <= len(c.Hosts); i++ {
		c.caps[i] = c.Host(i).Capture(t, "eth0")
	}
	return c
}

// config writes the chain with the patches joined says.
func (c *patchChain) config() string {
	var b strings.Builder
	fmt.Fprintf(&b, "[daemon]\nsocket = %q\n", c.Sock)
	for i, br := range chainBridges {
		fmt.Fprintf(&b, "\n[[bridge]]\nname = %q\n", br.name)
		for _, h := range br.hosts {
			fmt.Fprintf(&b, "\n[[bridge.port]]\ninterface = %q\nmode = %q\n", harness.PortName(h), c.mode)
		}
		for _, peer := range c.peers(i) {
			fmt.Fprintf(&b, "\n[[bridge.port]]\npatch = %q\n", peer)
			if n, ok := chainNames[[2]string{br.name, peer}]; ok {
				fmt.Fprintf(&b, "name = %q\n", n)
			}
		}
	}
	return b.String()
}

// reload joins or cuts the patches as joined says, with `trestle reload`.
func (c *patchChain) reload(joined [2]bool) {
	c.T.Helper()
	c.joined = joined
	c.WriteConfig(c.config())
	if out, err := c.CLI("reload"); err != nil {
		c.T.Fatalf("reload with patches %v: %v\n%s", joined, err, out)
	}
}

// peers returns the bridges that chainBridges[i] is patched to.
func (c *patchChain) peers(i int) []string {
	var ps []string
	if i > 0 && c.joined[i-1] {
		ps = append(ps, chainBridges[i-1].name)
	}
	if i+1 < len(chainBridges) && c.joined[i] {
		ps = append(ps, chainBridges[i+1].name)
	}
	return ps
}

// towards returns the port by which chainBridges[i] reaches host h: the
// host's own port, or the patch port on the way to its bridge; false when
// the patches do not join them.
func (c *patchChain) towards(i, h int) (string, bool) {
	hb := chainOf(h)
	if hb == i {
		return harness.PortName(h), true
	}
	for j := min(i, hb); j < max(i, hb); j++ {
		if !c.joined[j] {
			return "", false
		}
	}
	next := i + 1
	if hb < i {
		next = i - 1
	}
	return patchName(chainBridges[i].name, chainBridges[next].name), true
}

// others returns every host that h reaches through the chain, h excluded.
func (c *patchChain) others(h int) []int {
	var hs []int
	for o := 1; o <= len(c.Hosts); o++ {
		if _, ok := c.towards(chainOf(h), o); ok && o != h {
			hs = append(hs, o)
		}
	}
	return hs
}

// hasPort reports whether bridge has a port of that name in the running config.
func (c *patchChain) hasPort(bridge, port string) bool {
	for i, br := range chainBridges {
		if br.name != bridge {
			continue
		}
		for _, h := range br.hosts {
			if harness.PortName(h) == port {
				return true
			}
		}
		for _, peer := range c.peers(i) {
			if patchName(br.name, peer) == port {
				return true
			}
		}
	}
	return false
}

// bcast is a broadcast from host h that reaches every host the chain joins
// it to, once.
func (c *patchChain) bcast(name string, h int) harness.VCase {
	return c.flood(name, h, harness.VFrame(harness.VLANBcast(), harness.HostMAC(h), name))
}

// flood is a frame from host from that reaches every host the chain joins
// it to, once.
func (c *patchChain) flood(name string, from int, frame []byte) harness.VCase {
	vc := harness.VCase{Name: name, From: from, Frame: frame, Recv: map[int][]byte{}}
	for _, o := range c.others(from) {
		vc.Recv[o] = frame
	}
	return vc
}

// unicast is a frame from host from to host to, received by to alone.
func unicast(name string, from, to int) harness.VCase {
	f := harness.VFrame(harness.HostMAC(to), harness.HostMAC(from), name)
	return harness.VCase{Name: name, From: from, Frame: f, Recv: map[int][]byte{to: f}}
}

// learnAll has every host broadcast once, which teaches every bridge where
// every host it reaches is. Once a lab: its markers are not unique beyond.
func (c *patchChain) learnAll() {
	c.T.Helper()
	var cases []harness.VCase
	for h := 1; h <= len(c.Hosts); h++ {
		cases = append(cases, c.bcast(fmt.Sprintf("learn-h%d", h), h))
	}
	harness.VLANRun(c.T, c.Lab, c.caps, cases)
}

// checkEntries: for each MAC in at, every bridge that reaches the host
// behind it (at[mac]) has one learned entry for it on the port towards that
// host; and no bridge has an entry on a port it does not have.
func (c *patchChain) checkEntries(at map[string]int) {
	c.T.Helper()
	es := c.FDB()
	got := map[[2]string]ctl.FDBEntry{}
	for _, e := range es {
		got[[2]string{e.Bridge, e.MAC}] = e
		if !c.hasPort(e.Bridge, e.Port) {
			c.T.Errorf("%s has an entry on port %q, which it does not have (patches %v): %+v", e.Bridge, e.Port, c.joined, e)
		}
	}
	for mac, h := range at {
		for i, br := range chainBridges {
			want, ok := c.towards(i, h)
			if !ok {
				continue
			}
			e, found := got[[2]string{br.name, mac}]
			if !found || e.Port != want || e.Static || e.VLAN != 0 {
				c.T.Errorf("%s: entry for %s (at h%d) %+v (found %v), want learned on %s\nfdb: %+v", br.name, mac, h, e, found, want, es)
			}
		}
	}
}

// checkHosts checks the entries of every host's own MAC.
func (c *patchChain) checkHosts() {
	c.T.Helper()
	at := map[string]int{}
	for h := 1; h <= len(c.Hosts); h++ {
		at[harness.HostMAC(h).String()] = h
	}
	c.checkEntries(at)
}

// checkShow: `show --json` lists each bridge's host ports up in the chain's
// mode, and its patch ports as port objects with "patch": the peer bridge,
// named by their name, up, with no interface, ifindex or mode.
func (c *patchChain) checkShow() {
	c.T.Helper()
	st := c.Show()
	if len(st.Bridges) != len(chainBridges) {
		c.T.Fatalf("show lists %d bridges, want %d: %+v", len(st.Bridges), len(chainBridges), st.Bridges)
	}
	for i, br := range chainBridges {
		b := st.Bridges[i]
		if b.Name != br.name {
			c.T.Errorf("show: bridge %d is %q, want %q", i, b.Name, br.name)
			continue
		}
		var hosts, patches []string
		for _, p := range b.Ports {
			if p.Patch != "" {
				patches = append(patches, p.Patch)
				if p.Name != patchName(br.name, p.Patch) || p.Interface != "" || p.Ifindex != 0 || p.Mode != "" || p.State != "up" {
					c.T.Errorf("show: %s's patch port to %s: %+v, want it named %q, up, with no interface, ifindex or mode",
						br.name, p.Patch, p, patchName(br.name, p.Patch))
				}
				continue
			}
			hosts = append(hosts, p.Interface)
			if p.State != "up" || p.Mode != c.mode {
				c.T.Errorf("show: %s port %s: %+v, want up in %s", br.name, p.Interface, p, c.mode)
			}
		}
		var wantHosts []string
		for _, h := range br.hosts {
			wantHosts = append(wantHosts, harness.PortName(h))
		}
		slices.Sort(hosts)
		slices.Sort(patches)
		if !slices.Equal(hosts, wantHosts) || !slices.Equal(patches, c.peers(i)) {
			c.T.Errorf("show: %s has interface ports %q and patches to %q, want %q and %q (patches %v)\n%+v",
				br.name, hosts, patches, wantHosts, c.peers(i), c.joined, b.Ports)
		}
	}
}

// counters returns the counters of every port, by "bridge/port".
func (c *patchChain) counters() map[string]ctl.PortStats {
	c.T.Helper()
	m := map[string]ctl.PortStats{}
	for _, p := range c.AllStats() {
		m[p.Bridge+"/"+p.Port] = p
	}
	return m
}

// forChain runs f on a started chain in xdp mode, then in tc mode, and
// stops the daemon after it.
func forChain(t *testing.T, f func(t *testing.T, c *patchChain)) {
	harness.ForModes(t, func(t *testing.T, mode string) {
		c := newPatchChain(t, mode)
		f(t, c)
		c.Stop()
	})
}

// TestPatchChainPing: every pair of hosts pings across the chain, and each
// bridge's table holds each host on its own port or on the patch port
// towards it, named by the patch port's name.
func TestPatchChainPing(t *testing.T) {
	t.Parallel()
	forChain(t, func(t *testing.T, c *patchChain) {
		c.PingAll()
		c.checkHosts()
	})
}

// TestPatchChainShow: show lists patch ports with their peer and no mode or
// interface; stats lists them by name in their bridge.
func TestPatchChainShow(t *testing.T) {
	t.Parallel()
	forChain(t, func(t *testing.T, c *patchChain) {
		c.checkShow()
		out, err := c.CLI("show")
		if err != nil {
			t.Fatalf("show: %v\n%s", err, out)
		}
		st := c.counters()
		for i, br := range chainBridges {
			for _, peer := range c.peers(i) {
				name := patchName(br.name, peer)
				if !strings.Contains(out, name) {
					t.Errorf("show does not list %s's patch port %s:\n%s", br.name, name, out)
				}
				if _, ok := st[br.name+"/"+name]; !ok {
					t.Errorf("stats --json has no counters for %s's patch port %s: %v", br.name, name, st)
				}
			}
		}
	})
}

// TestPatchChainFlood: a broadcast, a multicast or an unknown unicast from
// any host reaches every other host once across the chain and never comes
// back to its sender; known unicast reaches its host alone, whichever
// bridges lie between.
func TestPatchChainFlood(t *testing.T) {
	t.Parallel()
	forChain(t, func(t *testing.T, c *patchChain) {
		var cases []harness.VCase
		for h := 1; h <= 4; h++ {
			cases = append(cases, c.bcast(fmt.Sprintf("bcast-h%d", h), h))
		}
		for _, h := range []int{1, 3, 4} {
			name := fmt.Sprintf("unknown-h%d", h)
			cases = append(cases, c.flood(name, h, harness.VFrame(harness.VLANUnknown(), harness.HostMAC(h), name)))
		}
		cases = append(cases,
			c.flood("mcast-h2", 2, harness.VFrame(harness.VLANMcast(), harness.HostMAC(2), "mcast-h2")),
			c.flood("mcast-h4", 4, harness.VFrame(harness.VLANMcast(), harness.HostMAC(4), "mcast-h4")),
		)
		for _, p := range [][2]int{{1, 4}, {4, 1}, {4, 2}, {3, 1}, {2, 3}, {3, 4}, {1, 2}, {2, 1}, {4, 3}} {
			cases = append(cases, unicast(fmt.Sprintf("h%d-to-h%d", p[0], p[1]), p[0], p[1]))
		}
		harness.VLANRun(t, c.Lab, c.caps, cases)
		c.checkHosts()
	})
}

// TestPatchChainCounters: a frame that crosses a patch counts as tx on the
// patch port it leaves by and rx on the peer's patch port, in packets and
// bytes; ports it does not cross count nothing.
func TestPatchChainCounters(t *testing.T) {
	t.Parallel()
	forChain(t, func(t *testing.T, c *patchChain) {
		c.learnAll()
		const n = 20
		// Each phase: n frames from a host; how many each port must count
		// in and out ("bridge/port": rx, tx).
		for _, ph := range []struct {
			name string
			from int
			dst  net.HardwareAddr
			recv []int
			want map[string][2]uint64
		}{
			{"h1-to-h3", 1, harness.HostMAC(3), []int{3}, map[string][2]uint64{
				"br0/port-h1": {n, 0}, "br0/patch-br1": {0, n}, "br1/patch-br0": {n, 0}, "br1/port-h3": {0, n},
			}},
			{"h4-to-h1", 4, harness.HostMAC(1), []int{1}, map[string][2]uint64{
				"br2/port-h4": {n, 0}, "br2/to-br1": {0, n}, "br1/patch-br2": {n, 0},
				"br1/patch-br0": {0, n}, "br0/patch-br1": {n, 0}, "br0/port-h1": {0, n},
			}},
			{"h2-to-h1", 2, harness.HostMAC(1), []int{1}, map[string][2]uint64{
				"br0/port-h2": {n, 0}, "br0/port-h1": {0, n},
			}},
			{"bcast-h1", 1, harness.VLANBcast(), []int{2, 3, 4}, map[string][2]uint64{
				"br0/port-h1": {n, 0}, "br0/port-h2": {0, n}, "br0/patch-br1": {0, n},
				"br1/patch-br0": {n, 0}, "br1/port-h3": {0, n}, "br1/patch-br2": {0, n},
				"br2/to-br1": {n, 0}, "br2/port-h4": {0, n},
			}},
			{"bcast-h3", 3, harness.VLANBcast(), []int{1, 2, 4}, map[string][2]uint64{
				"br1/port-h3": {n, 0}, "br1/patch-br0": {0, n}, "br1/patch-br2": {0, n},
				"br0/patch-br1": {n, 0}, "br0/port-h1": {0, n}, "br0/port-h2": {0, n},
				"br2/to-br1": {n, 0}, "br2/port-h4": {0, n},
			}},
		} {
			before := c.counters()
			f := harness.VFrame(ph.dst, harness.HostMAC(ph.from), ph.name)
			for k := 0; k < n; k++ {
				if err := c.Host(ph.from).RawSend("eth0", f); err != nil {
					t.Fatal(err)
				}
			}
			for _, h := range ph.recv {
				if got := c.caps[h].WaitFor(harness.HasVMarker(ph.name), n, 2*time.Second); got != n {
					t.Errorf("%s: h%d received %d of %d frames", ph.name, h, got, n)
				}
			}
			time.Sleep(100 * time.Millisecond)
			after := c.counters()
			if len(after) != 8 {
				t.Errorf("stats lists %d ports, want 8 (4 host ports, 4 patch ports): %v", len(after), after)
			}
			// The bytes of one frame, as the ingress host port counts them.
			in := fmt.Sprintf("%s/%s", chainBridges[chainOf(ph.from)].name, harness.PortName(ph.from))
			perFrame := (after[in].Counters.Get("rx_bytes") - before[in].Counters.Get("rx_bytes")) / n
			if perFrame != uint64(len(f)) {
				t.Errorf("%s: %s counted %d bytes a frame, want %d", ph.name, in, perFrame, len(f))
			}
			for port, a := range after {
				b := before[port]
				rx, tx := a.Counters.Get("rx_packets")-b.Counters.Get("rx_packets"), a.Counters.Get("tx_packets")-b.Counters.Get("tx_packets")
				rxb, txb := a.Counters.Get("rx_bytes")-b.Counters.Get("rx_bytes"), a.Counters.Get("tx_bytes")-b.Counters.Get("tx_bytes")
				w := ph.want[port]
				if rx != w[0] || tx != w[1] || rxb != w[0]*perFrame || txb != w[1]*perFrame {
					t.Errorf("%s: %s counted rx %d (%d bytes) tx %d (%d bytes), want rx %d tx %d of %d bytes\nbefore %+v\nafter  %+v",
						ph.name, port, rx, rxb, tx, txb, w[0], w[1], perFrame, b, a)
				}
			}
		}
	})
}

// TestPatchChainMove: an address that moves from a host on one bridge to a
// host on another is learned again in every bridge, counted as a move on the
// port it now appears on in each, and unicast to it follows it.
func TestPatchChainMove(t *testing.T) {
	t.Parallel()
	forChain(t, func(t *testing.T, c *patchChain) {
		c.learnAll()
		m := net.HardwareAddr{0x02, 0x6d, 0, 0, 0, 0x01}
		harness.VLANRun(t, c.Lab, c.caps, []harness.VCase{c.flood("m-at-h1", 1, harness.VFrame(harness.VLANBcast(), m, "m-at-h1"))})
		c.checkEntries(map[string]int{m.String(): 1})

		// reachM: frames to m from every other host reach h alone, three
		// from each, so that more than one CPU has the path to m in its
		// memo of the last unicast path when m moves next.
		reachM := func(h int) {
			t.Helper()
			var cases []harness.VCase
			for _, o := range c.others(h) {
				for k := range 3 {
					name := fmt.Sprintf("to-m-at-h%d-from-h%d-%d", h, o, k)
					f := harness.VFrame(m, harness.HostMAC(o), name)
					cases = append(cases, harness.VCase{Name: name, From: o, Frame: f, Recv: map[int][]byte{h: f}})
				}
			}
			harness.VLANRun(t, c.Lab, c.caps, cases)
		}
		reachM(1)

		// moveTo: host h sends from m to host to; then every bridge has m
		// towards h, each whose port for m changed counts one move on the
		// new port, and frames to m reach h alone.
		at := 1
		moveTo := func(h, to int) {
			t.Helper()
			before := c.counters()
			name := fmt.Sprintf("m-at-h%d", h)
			f := harness.VFrame(harness.HostMAC(to), m, name)
			harness.VLANRun(t, c.Lab, c.caps, []harness.VCase{{Name: name, From: h, Frame: f, Recv: map[int][]byte{to: f}}})
			c.checkEntries(map[string]int{m.String(): h})
			after := c.counters()
			for i, br := range chainBridges {
				port, _ := c.towards(i, h)
				was, _ := c.towards(i, at)
				want := uint64(0)
				if port != was {
					want = 1
				}
				key := br.name + "/" + port
				if got := after[key].Counters.Get("moved") - before[key].Counters.Get("moved"); got != want {
					t.Errorf("m moved from h%d to h%d: %s counted %d moves, want %d", at, h, key, got, want)
				}
			}
			at = h
			reachM(h)
		}
		moveTo(4, 1) // br0 -> br2: crosses every bridge
		moveTo(2, 4) // br2 -> br0, to the other host there
		moveTo(3, 1) // br0 -> br1, the middle: br2 still has m towards br1
	})
}

// TestPatchChainReload: a reload that removes the middle patch (br1 - br2)
// cuts the chain cleanly: br2's host is out of reach of the others, the
// entries learned on the removed patch ports are gone, the rest of the
// chain keeps its entries and counters and forwards on; a reload that puts
// the patch back joins the chain again.
func TestPatchChainReload(t *testing.T) {
	t.Parallel()
	forChain(t, func(t *testing.T, c *patchChain) {
		c.PingAll()
		c.checkHosts()
		rx := c.counters()

		c.reload([2]bool{true, false})
		c.checkShow()
		// The removed ports' entries go with them (checkEntries reports
		// any entry on a port its bridge does not have); the others stay.
		deadline := time.Now().Add(3 * time.Second)
		for time.Now().Before(deadline) && slices.ContainsFunc(c.FDB(), func(e ctl.FDBEntry) bool { return !c.hasPort(e.Bridge, e.Port) }) {
			time.Sleep(100 * time.Millisecond)
		}
		c.checkHosts()
		after := c.counters()
		for port, a := range after {
			if b, ok := rx[port]; !ok || a.Counters.Get("rx_packets") < b.Counters.Get("rx_packets") || a.Counters.Get("tx_packets") < b.Counters.Get("tx_packets") {
				t.Errorf("%s: counters went from %+v to %+v across the reload", port, b, a)
			}
		}
		for _, gone := range []string{"br1/patch-br2", "br2/to-br1"} {
			if _, ok := after[gone]; ok {
				t.Errorf("stats still lists the removed patch port %s", gone)
			}
		}

		// br2 is alone: h4 reaches nobody, nobody reaches h4.
		harness.VLANRun(t, c.Lab, c.caps, []harness.VCase{
			c.bcast("cut-bcast-h1", 1),
			c.bcast("cut-bcast-h3", 3),
			c.bcast("cut-bcast-h4", 4),
			c.flood("cut-unknown-h2", 2, harness.VFrame(harness.VLANUnknown(), harness.HostMAC(2), "cut-unknown-h2")),
			unicast("cut-h1-to-h3", 1, 3),
			unicast("cut-h3-to-h2", 3, 2),
			{Name: "cut-h4-to-h1", From: 4, Frame: harness.VFrame(harness.HostMAC(1), harness.HostMAC(4), "cut-h4-to-h1")},
		})
		// To h4's MAC, still known in br0 towards br1: br1 no longer knows
		// it and floods it in br1 only; h4 must not see it.
		if err := c.Host(1).RawSend("eth0", harness.VFrame(harness.HostMAC(4), harness.HostMAC(1), "cut-h1-to-h4")); err != nil {
			t.Fatal(err)
		}
		if got := c.caps[4].WaitFor(harness.HasVMarker("cut-h1-to-h4"), 0, 300*time.Millisecond); got != 0 {
			t.Errorf("h4 received %d frames from h1 with the chain cut", got)
		}
		for _, p := range [][2]int{{1, 4}, {3, 4}, {4, 2}} {
			if err := c.Host(p[0]).Ping(harness.HostIP(p[1]), 1); err == nil {
				t.Errorf("ping h%d -> h%d answered with the chain cut", p[0], p[1])
			}
		}
		for _, p := range [][2]int{{1, 3}, {3, 2}, {2, 1}} {
			if err := c.Host(p[0]).Ping(harness.HostIP(p[1]), 2); err != nil {
				t.Errorf("ping h%d -> h%d with the middle patch removed: %v", p[0], p[1], err)
			}
		}

		c.reload([2]bool{true, true})
		c.checkShow()
		c.PingAll()
		c.checkHosts()
		// Neither reload detached or re-attached a host port.
		var removed, up int
		for _, line := range strings.Split(c.Daemon.Out.String(), "\n") {
			if strings.Contains(line, "port=port-h") {
				if strings.Contains(line, `"port removed"`) {
					removed++
				}
				if strings.Contains(line, `"port up"`) {
					up++
				}
			}
		}
		if removed != 0 || up != 4 {
			t.Errorf("the reloads removed host ports %d times and brought them up %d times (want 0 and 4, at start):\n%s", removed, up, c.Daemon.Out.String())
		}
		harness.VLANRun(t, c.Lab, c.caps, []harness.VCase{
			c.bcast("joined-bcast-h4", 4),
			c.bcast("joined-bcast-h1", 1),
			unicast("joined-h2-to-h4", 2, 4),
		})
	})
}

// TestPatchChainStatic: a static entry names a patch port: `fdb add` on
// br0's patch port takes unicast to the address into br1, never flooded in
// br0, and `fdb show` lists it on the patch port; learning further down the
// chain narrows it to the host that has it.
func TestPatchChainStatic(t *testing.T) {
	t.Parallel()
	forChain(t, func(t *testing.T, c *patchChain) {
		c.learnAll()
		s := net.HardwareAddr{0x02, 0x5a, 0, 0, 0, 0x12}
		port := patchName("br0", "br1")
		if out, err := c.CLI("fdb", "add", "br0", s.String(), port); err != nil {
			t.Fatalf("fdb add br0 %s %s: %v\n%s", s, port, err, out)
		}
		// entries lists the entries of s, bridge by bridge.
		entries := func() []string {
			var es []string
			for _, e := range c.FDB() {
				if e.MAC == s.String() {
					es = append(es, fmt.Sprintf("%s %s static %v vlan %d", e.Bridge, e.Port, e.Static, e.VLAN))
				}
			}
			slices.Sort(es)
			return es
		}
		static := fmt.Sprintf("br0 %s static true vlan 0", port)
		if got := entries(); !slices.Equal(got, []string{static}) {
			t.Errorf("entries of %s after fdb add: %q, want %q", s, got, static)
		}
		toS := func(name string, recv ...int) harness.VCase {
			f := harness.VFrame(s, harness.HostMAC(2), name)
			vc := harness.VCase{Name: name, From: 2, Frame: f, Recv: map[int][]byte{}}
			for _, h := range recv {
				vc.Recv[h] = f
			}
			return vc
		}
		harness.VLANRun(t, c.Lab, c.caps, []harness.VCase{
			// Unknown beyond br0: flooded in br1 and br2, not in br0.
			toS("to-s-unknown", 3, 4),
			// h4 has it: br1 and br2 learn it, br0's static stays.
			c.flood("s-at-h4", 4, harness.VFrame(harness.VLANBcast(), s, "s-at-h4")),
			toS("to-s-at-h4", 4),
		})
		want := []string{static, "br1 patch-br2 static false vlan 0", "br2 port-h4 static false vlan 0"}
		if got := entries(); !slices.Equal(got, want) {
			t.Errorf("entries of %s once h4 sent from it: %q, want %q", s, got, want)
		}
	})
}

// TestPatchVLAN: VLAN-aware bridges joined by a trunk patch, br0 [h1
// access 10, h2 access 20, patch trunk 10,20] - br1 [patch trunk 10,20, h3
// access 10, h4 trunk 10,20]: a frame keeps its VLAN across the patch and
// leaves each port as that port takes it. In xdp mode a flood that reaches
// two ports is one broadcast whose devmap program untags each access
// port's copy.
func TestPatchVLAN(t *testing.T) {
	t.Parallel()
	harness.ForModes(t, func(t *testing.T, mode string) {
		l := harness.NewLab(t, 4)
		port := func(i int, vlans string) string {
			return fmt.Sprintf("[[bridge.port]]\ninterface = %q\nmode = %q\n%s\n", harness.PortName(i), mode, vlans)
		}
		trunk := "trunk = [10, 20]\n"
		l.WriteConfig(fmt.Sprintf("[daemon]\nsocket = %q\n", l.Sock) +
			"[[bridge]]\nname = \"br0\"\n" + port(1, "vlan = 10") + port(2, "vlan = 20") + "[[bridge.port]]\npatch = \"br1\"\n" + trunk +
			"[[bridge]]\nname = \"br1\"\n[[bridge.port]]\npatch = \"br0\"\n" + trunk + port(3, "vlan = 10") + port(4, trunk))
		l.Start()
		caps := map[int]*testutil.Capturer{}
		for i := 1; i <= 4; i++ {
			caps[i] = l.Host(i).Capture(t, "eth0")
		}
		h1, h2, h4 := harness.HostMAC(1), harness.HostMAC(2), harness.HostMAC(4)
		harness.VLANRun(t, l, caps, []harness.VCase{
			{Name: "b10", From: 1, Frame: harness.VFrame(harness.VLANBcast(), h1, "b10"), Recv: map[int][]byte{
				3: harness.VFrame(harness.VLANBcast(), h1, "b10"),
				4: harness.VFrame(harness.VLANBcast(), h1, "b10", harness.CTag(10)),
			}},
			{Name: "b20", From: 2, Frame: harness.VFrame(harness.VLANBcast(), h2, "b20"), Recv: map[int][]byte{
				4: harness.VFrame(harness.VLANBcast(), h2, "b20", harness.CTag(20)),
			}},
			{Name: "t10", From: 4, Frame: harness.VFrame(harness.VLANBcast(), h4, "t10", harness.CTagP(3, 10)), Recv: map[int][]byte{
				1: harness.VFrame(harness.VLANBcast(), h4, "t10"),
				3: harness.VFrame(harness.VLANBcast(), h4, "t10"),
			}},
			{Name: "t20", From: 4, Frame: harness.VFrame(harness.VLANBcast(), h4, "t20", harness.CTag(20)), Recv: map[int][]byte{
				2: harness.VFrame(harness.VLANBcast(), h4, "t20"),
			}},
			// Known unicast across the patch, both ways.
			{Name: "a10-to-h4", From: 1, Frame: harness.VFrame(h4, h1, "a10-to-h4"), Recv: map[int][]byte{
				4: harness.VFrame(h4, h1, "a10-to-h4", harness.CTag(10)),
			}},
			{Name: "t10-to-h1", From: 4, Frame: harness.VFrame(h1, h4, "t10-to-h1", harness.CTagP(5, 10)), Recv: map[int][]byte{
				1: harness.VFrame(h1, h4, "t10-to-h1"),
			}},
			{Name: "t20-to-h2", From: 4, Frame: harness.VFrame(h2, h4, "t20-to-h2", harness.CTag(20)), Recv: map[int][]byte{
				2: harness.VFrame(h2, h4, "t20-to-h2"),
			}},
		})
		// br1 learned h1 in VLAN 10 and h2 in VLAN 20, both on its patch.
		for _, e := range l.FDB() {
			if e.Bridge == "br1" && (e.MAC == h1.String() || e.MAC == h2.String()) {
				want := map[string]uint16{h1.String(): 10, h2.String(): 20}[e.MAC]
				if e.VLAN != want || e.Port != "patch-br0" {
					t.Errorf("br1 learned %s as %+v, want VLAN %d on patch-br0", e.MAC, e, want)
				}
			}
		}
		l.Stop()
	})
}
