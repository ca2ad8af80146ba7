package main

// End-to-end tests: the real binary runs as the daemon in a switch namespace,
// hosts in namespaces of their own send real traffic through it, and the CLI
// reads the daemon's state the way a user would. Every namespace belongs to
// the test and is removed when it ends, also on failure.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"

	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/testutil"
)

var trestleBin string

func TestMain(m *testing.M) {
	// TRESTLE_TEST_BIN runs the tests against another build, e.g. to see a
	// test fail against the build before a fix.
	if bin := os.Getenv("TRESTLE_TEST_BIN"); bin != "" {
		trestleBin = bin
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "trestle-bin")
	if err != nil {
		panic(err)
	}
	trestleBin = filepath.Join(dir, "trestle")
	if out, err := exec.Command("go", "build", "-o", trestleBin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build trestle: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if variantDir != "" {
		os.RemoveAll(variantDir)
	}
	os.Exit(code)
}

// swlab is a switch namespace with n hosts, host i on port "port-hI" with
// eth0 02:00:00:00:00:0I and 10.78.0.I/24.
type swlab struct {
	t      *testing.T
	sw     *testutil.NS
	hosts  []*testutil.NS
	dir    string
	sock   string
	cfg    string
	daemon *testutil.Proc
}

func hostMAC(i int) net.HardwareAddr { return net.HardwareAddr{2, 0, 0, 0, 0, byte(i)} }
func hostIP(i int) string            { return fmt.Sprintf("10.78.0.%d", i) }
func portName(i int) string          { return fmt.Sprintf("port-h%d", i) }

func newSwlab(t *testing.T, n int) *swlab {
	testutil.RequireRoot(t)
	testutil.RequireCmd(t, "ip", "iperf3", "ethtool")
	l := &swlab{t: t, dir: t.TempDir()}
	l.sock = filepath.Join(l.dir, "trestle.sock")
	l.cfg = filepath.Join(l.dir, "trestle.toml")
	l.sw = testutil.NewNS(t, "sw")
	for i := 1; i <= n; i++ {
		h := testutil.NewNS(t, fmt.Sprintf("h%d", i))
		// No IPv6: its unsolicited ND and MLD frames would refresh entries
		// the aging test waits to see go, and add noise to the counters.
		for _, k := range []string{"net/ipv6/conf/all/disable_ipv6", "net/ipv6/conf/default/disable_ipv6"} {
			if err := h.Sysctl(k, "1"); err != nil {
				t.Fatal(err)
			}
		}
		testutil.Veth(t, l.sw, portName(i), h, "eth0", "")
		h.MustExec(t, "ip", "link", "set", "dev", "eth0", "address", hostMAC(i).String())
		h.AddrAdd(t, "eth0", hostIP(i)+"/24")
		l.hosts = append(l.hosts, h)
	}
	return l
}

func (l *swlab) host(i int) *testutil.NS { return l.hosts[i-1] }

// config writes a config with one bridge of every host's port; extra is added
// to the bridge table, portExtra to each port table.
func (l *swlab) config(bridgeExtra string, portExtra func(i int) string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[daemon]\nsocket = %q\n\n[[bridge]]\nname = \"br0\"\n%s\n", l.sock, bridgeExtra)
	for i := 1; i <= len(l.hosts); i++ {
		fmt.Fprintf(&b, "\n[[bridge.port]]\ninterface = %q\n", portName(i))
		if portExtra != nil {
			b.WriteString(portExtra(i))
		}
	}
	return b.String()
}

func (l *swlab) writeConfig(body string) {
	l.t.Helper()
	if err := os.WriteFile(l.cfg, []byte(body), 0o644); err != nil {
		l.t.Fatal(err)
	}
}

// start runs the daemon and waits for its socket.
func (l *swlab) start() {
	l.t.Helper()
	l.daemon = l.sw.Start(l.t, trestleBin, "run", "--config", l.cfg)
	l.waitSocket()
}

// cli runs the trestle CLI against this lab's daemon.
func (l *swlab) cli(args ...string) (string, error) {
	cmd := exec.Command(trestleBin, args...)
	cmd.Env = append(os.Environ(), "TRESTLE_SOCKET="+l.sock)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func (l *swlab) cliJSON(v any, args ...string) {
	l.t.Helper()
	out, err := l.cli(append(args, "--json")...)
	if err != nil {
		l.t.Fatalf("trestle %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		l.t.Fatalf("trestle %s --json: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func (l *swlab) fdb() []ctl.FDBEntry {
	var es []ctl.FDBEntry
	l.cliJSON(&es, "fdb", "show")
	return es
}

func (l *swlab) fdbEntry(mac net.HardwareAddr) (ctl.FDBEntry, bool) {
	for _, e := range l.fdb() {
		if e.MAC == mac.String() {
			return e, true
		}
	}
	return ctl.FDBEntry{}, false
}

// allStats returns the counters of every port of every bridge.
func (l *swlab) allStats() []ctl.PortStats {
	l.t.Helper()
	var ps []ctl.PortStats
	l.cliJSON(&ps, "stats")
	return ps
}

func (l *swlab) stats(port string) ctl.PortStats {
	l.t.Helper()
	ps := l.allStats()
	for _, p := range ps {
		if p.Port == port {
			return p
		}
	}
	l.t.Fatalf("no stats for port %s", port)
	return ctl.PortStats{}
}

func (l *swlab) show() ctl.Status {
	var st ctl.Status
	l.cliJSON(&st, "show")
	return st
}

func (l *swlab) pingAll() {
	l.t.Helper()
	for i := 1; i <= len(l.hosts); i++ {
		for j := 1; j <= len(l.hosts); j++ {
			if i != j {
				if err := l.host(i).Ping(hostIP(j), 2); err != nil {
					l.t.Fatalf("ping h%d -> h%d: %v", i, j, err)
				}
			}
		}
	}
}

// stop ends the daemon with SIGTERM and checks that it left no program behind.
func (l *swlab) stop() {
	l.t.Helper()
	if err := l.daemon.Stop(); err != nil && !strings.Contains(err.Error(), "terminated") {
		l.t.Errorf("daemon exit: %v", err)
	}
	l.assertNoPrograms()
}

func (l *swlab) assertNoPrograms() {
	l.t.Helper()
	for k, id := range l.programs() {
		l.t.Errorf("%s: program %d still attached", k, id)
	}
}

// programs are the programs attached to each interface of the switch's
// namespace, whatever its name now: "NAME/xdp", "NAME/tcx-ingress"...
func (l *swlab) programs() map[string]ebpf.ProgramID {
	l.t.Helper()
	ids := map[string]ebpf.ProgramID{}
	err := l.sw.Do(func() error {
		links, err := netlink.LinkList()
		if err != nil {
			return err
		}
		for _, lk := range links {
			name := lk.Attrs().Name
			if x := lk.Attrs().Xdp; x != nil && x.Attached {
				ids[name+"/xdp"] = ebpf.ProgramID(x.ProgId)
			}
			for _, at := range []ebpf.AttachType{ebpf.AttachTCXIngress, ebpf.AttachTCXEgress} {
				res, err := link.QueryPrograms(link.QueryOptions{Target: lk.Attrs().Index, Attach: at})
				if err != nil {
					return fmt.Errorf("query tcx on %s: %w", name, err)
				}
				for i, p := range res.Programs {
					ids[fmt.Sprintf("%s/%v/%d", name, at, i)] = p.ID
				}
			}
		}
		return nil
	})
	if err != nil {
		l.t.Fatal(err)
	}
	return ids
}

func marked(dst, src net.HardwareAddr, marker string) []byte {
	payload := make([]byte, 46)
	copy(payload, marker)
	return testutil.Frame(dst, src, 0x88b5, payload)
}

func hasMarker(marker string) func([]byte) bool {
	return func(f []byte) bool { return len(f) > 14 && bytes.HasPrefix(f[14:], []byte(marker)) }
}

// TestForwardingModes: in each mode three hosts ping each other and iperf3
// TCP runs through the switch with the hosts' default offloads; the learned
// table names each host on its port; the daemon leaves nothing attached.
func TestForwardingModes(t *testing.T) {
	for _, mode := range []string{"auto", "xdp", "tc"} {
		t.Run(mode, func(t *testing.T) {
			l := newSwlab(t, 3)
			l.writeConfig(l.config("", func(int) string { return fmt.Sprintf("mode = %q\n", mode) }))
			l.start()

			want := mode
			if mode == "auto" {
				want = "tc" // veth ports whose peers are host stacks
			}
			for _, p := range l.show().Bridges[0].Ports {
				if p.State != "up" || p.Mode != want || p.Reason == "" {
					t.Errorf("port %s: state %s mode %s (%s), want up in %s with a reason", p.Interface, p.State, p.Mode, p.Reason, want)
				}
			}

			l.pingAll()
			es := l.fdb()
			for i := 1; i <= 3; i++ {
				found := false
				for _, e := range es {
					if e.MAC == hostMAC(i).String() {
						found = true
						if e.Port != portName(i) || e.Bridge != "br0" || e.Static || e.VLAN != 0 {
							t.Errorf("fdb entry for h%d: %+v, want learned on %s", i, e, portName(i))
						}
					}
				}
				if !found {
					t.Errorf("fdb has no entry for h%d (%s): %+v", i, hostMAC(i), es)
				}
			}

			bps, err := testutil.Iperf(t, l.host(2), hostIP(2), l.host(1), 2, 1)
			if err != nil {
				t.Fatalf("iperf3 through trestle in %s mode: %v", mode, err)
			}
			if bps <= 0 {
				t.Fatalf("iperf3 moved nothing in %s mode", mode)
			}
			t.Logf("%s mode: iperf3 TCP h1 -> h2 %.2f Gbit/s (a sanity figure, not a benchmark)", mode, bps/1e9)
			if s := l.stats(portName(1)); s.Counters.Get("rx_packets") == 0 || s.Mode != want {
				t.Errorf("stats for %s: %+v", portName(1), s)
			}

			l.stop()
			if mode == "xdp" {
				// The daemon gave the peers their offloads back.
				out := l.host(1).MustExec(t, "ethtool", "-k", "eth0")
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
	for _, mode := range []string{"xdp", "tc"} {
		t.Run(mode, func(t *testing.T) {
			l := newSwlab(t, 3)
			l.writeConfig(l.config("", func(int) string { return fmt.Sprintf("mode = %q\n", mode) }))
			l.start()

			caps := map[int]*testutil.Capturer{}
			for i := 1; i <= 3; i++ {
				caps[i] = l.host(i).Capture(t, "eth0")
			}
			// ARP: h1 asks for h2 by broadcast; h3 sees the request too.
			if err := l.host(1).Ping(hostIP(2), 1); err != nil {
				t.Fatalf("ping h1 -> h2 (needs broadcast ARP): %v", err)
			}
			isARPFromH1 := func(f []byte) bool {
				return len(f) >= 14 && bytes.Equal(f[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}) &&
					bytes.Equal(f[6:12], hostMAC(1)) && f[12] == 0x08 && f[13] == 0x06
			}
			if n := caps[3].WaitFor(isARPFromH1, 1, 2*time.Second); n < 1 {
				t.Errorf("h3 did not see h1's broadcast ARP request")
			}

			unknown := net.HardwareAddr{0x02, 0xee, 0, 0, 0, 0x99}
			if err := l.host(1).RawSend("eth0", marked(unknown, hostMAC(1), "unknown-unicast")); err != nil {
				t.Fatal(err)
			}
			for _, i := range []int{2, 3} {
				if n := caps[i].WaitFor(hasMarker("unknown-unicast"), 1, 2*time.Second); n != 1 {
					t.Errorf("h%d got %d copies of the unknown unicast frame, want 1", i, n)
				}
			}
			if err := l.host(1).RawSend("eth0", marked(hostMAC(2), hostMAC(1), "known-unicast")); err != nil {
				t.Fatal(err)
			}
			if n := caps[2].WaitFor(hasMarker("known-unicast"), 1, 2*time.Second); n != 1 {
				t.Errorf("h2 got %d copies of the frame to its MAC, want 1", n)
			}
			if n := caps[3].WaitFor(hasMarker("known-unicast"), 1, 500*time.Millisecond); n != 0 {
				t.Errorf("h3 got the frame to h2's known MAC: known unicast was flooded")
			}
			if n := caps[1].WaitFor(hasMarker("unknown-unicast"), 1, 100*time.Millisecond); n != 0 {
				t.Errorf("the sender got its own flooded frame back")
			}
			if s := l.stats(portName(1)); s.Counters.Get("flooded") == 0 {
				t.Errorf("port-h1 counted no flooded frames: %+v", s)
			}
			l.stop()
		})
	}
}

// TestStaticMoveFlush: a static entry wins over learning and survives a flush
// of learned entries; a MAC that moves ports is re-learned and counted.
func TestStaticMoveFlush(t *testing.T) {
	l := newSwlab(t, 3)
	static := net.HardwareAddr{0x02, 0x5a, 0, 0, 0, 0x01}
	l.writeConfig(l.config(`
[[bridge.static]]
mac = "`+static.String()+`"
port = "port-h3"
`, nil))
	l.start()
	l.pingAll()

	// A frame from h1 with the static address as source: the entry stays.
	if err := l.host(1).RawSend("eth0", marked(hostMAC(2), static, "spoof")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if e, ok := l.fdbEntry(static); !ok || !e.Static || e.Port != "port-h3" {
		t.Errorf("static entry after a frame from another port: %+v (found %v), want static on port-h3", e, ok)
	}

	// h1's address shows up behind port-h2: it moved.
	if err := l.host(2).RawSend("eth0", marked(hostMAC(3), hostMAC(1), "moved")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if e, _ := l.fdbEntry(hostMAC(1)); e.Port != "port-h2" {
		t.Errorf("h1's MAC after it moved: on %q, want port-h2", e.Port)
	}
	if s := l.stats("port-h2"); s.Counters.Get("moved") != 1 {
		t.Errorf("port-h2 moved counter %d, want 1", s.Counters.Get("moved"))
	}
	// And back: h1 talks again from its own port.
	if err := l.host(1).Ping(hostIP(3), 1); err != nil {
		t.Fatal(err)
	}
	if e, _ := l.fdbEntry(hostMAC(1)); e.Port != "port-h1" {
		t.Errorf("h1's MAC after it came back: on %q, want port-h1", e.Port)
	}

	out, err := l.cli("fdb", "flush", "br0")
	if err != nil {
		t.Fatalf("fdb flush: %v\n%s", err, out)
	}
	es := l.fdb()
	if len(es) != 1 || es[0].MAC != static.String() || !es[0].Static {
		t.Errorf("after flush: %+v, want only the static entry", es)
	}

	// Static entries from the CLI, and deleting them.
	extra := net.HardwareAddr{0x02, 0x5a, 0, 0, 0, 0x02}
	if out, err := l.cli("fdb", "add", "br0", extra.String(), "port-h2", "--vlan", "7"); err != nil {
		t.Fatalf("fdb add: %v\n%s", err, out)
	}
	if e, ok := l.fdbEntry(extra); !ok || !e.Static || e.VLAN != 7 || e.Port != "port-h2" {
		t.Errorf("entry added from the CLI: %+v", e)
	}
	if out, err := l.cli("fdb", "del", "br0", extra.String(), "--vlan", "7"); err != nil {
		t.Fatalf("fdb del: %v\n%s", err, out)
	}
	if _, ok := l.fdbEntry(extra); ok {
		t.Errorf("entry still there after fdb del")
	}
	if out, err := l.cli("fdb", "add", "br0", extra.String(), "port-h9"); err == nil || !strings.Contains(out, `"port-h9" is not a port`) {
		t.Errorf("fdb add to a missing port: %v %s", err, out)
	}
	l.stop()
}

// TestAgingAndLimits: a short aging time removes idle entries; a port at its
// max_macs stops learning and counts the drop.
func TestAgingAndLimits(t *testing.T) {
	l := newSwlab(t, 2)
	l.writeConfig(l.config(`aging = "2s"`, func(i int) string {
		if i == 1 {
			return "max_macs = 3\n"
		}
		return ""
	}))
	l.start()

	// Ten source addresses from h1; only three may be learned.
	for k := 0; k < 10; k++ {
		src := net.HardwareAddr{0x02, 0xaa, 0, 0, 0, byte(k + 1)}
		if err := l.host(1).RawSend("eth0", marked(hostMAC(2), src, "limit")); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(200 * time.Millisecond)
	onH1 := 0
	for _, e := range l.fdb() {
		if e.Port == "port-h1" {
			onH1++
		}
	}
	if onH1 > 3 {
		t.Errorf("port-h1 holds %d addresses, max_macs is 3", onH1)
	}
	s := l.stats("port-h1")
	if s.Drops["mac_limit"] < 7 {
		t.Errorf("mac_limit drops %d, want at least 7 (%d learned)", s.Drops["mac_limit"], onH1)
	}

	// Idle entries go after the aging time (2s, swept every 0.5s).
	deadline := time.Now().Add(10 * time.Second)
	for len(l.fdb()) > 0 && time.Now().Before(deadline) {
		time.Sleep(250 * time.Millisecond)
	}
	if es := l.fdb(); len(es) > 0 {
		t.Fatalf("entries still there 10s after traffic stopped with aging 2s: %+v", es)
	}
	// With its addresses aged out, the port learns again.
	if err := l.host(1).Ping(hostIP(2), 1); err != nil {
		t.Fatalf("ping after aging: %v", err)
	}
	if _, ok := l.fdbEntry(hostMAC(1)); !ok {
		t.Errorf("h1 not re-learned after its entries aged out")
	}
	l.stop()
}

// TestBadFrames: malformed frames from a host are dropped and counted by
// reason, and the switch keeps forwarding.
func TestBadFrames(t *testing.T) {
	for _, mode := range []string{"xdp", "tc"} {
		t.Run(mode, func(t *testing.T) {
			l := newSwlab(t, 2)
			l.writeConfig(l.config("", func(int) string { return fmt.Sprintf("mode = %q\n", mode) }))
			l.start()
			l.pingAll()
			src, dst := hostMAC(1), hostMAC(2)
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
			before := l.stats(portName(1)).Drops
			capt := l.host(2).Capture(t, "eth0")
			for _, b := range bad {
				if err := l.host(1).RawSend("eth0", b.frame); err != nil {
					t.Fatalf("send %s frame: %v", b.reason, err)
				}
				want[b.reason]++
			}
			time.Sleep(200 * time.Millisecond)
			after := l.stats(portName(1)).Drops
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
			l.pingAll()
			l.stop()
		})
	}
}

// TestBadConfig: a bad file at start exits non-zero naming file, line and
// field; a bad file at reload keeps the running state.
func TestBadConfig(t *testing.T) {
	l := newSwlab(t, 2)
	bad := l.config("", nil) + "\n[[bridge.port]]\ninterface = \"port-h3\"\nmode = \"fast\"\n"
	l.writeConfig(bad)
	out, err := l.sw.Exec(trestleBin, "run", "--config", l.cfg)
	if err == nil {
		t.Fatalf("daemon accepted a bad config:\n%s", out)
	}
	line := strings.Count(bad[:strings.Index(bad, "mode = \"fast\"")], "\n") + 1
	wantMsg := fmt.Sprintf("%s:%d: bridge[0].port[2].mode", l.cfg, line)
	if !strings.Contains(out, wantMsg) {
		t.Errorf("error does not name file:line and field (%q):\n%s", wantMsg, out)
	}
	if _, err := os.Stat(l.sock); err == nil {
		t.Errorf("a rejected config still opened the control socket")
	}

	good := l.config("", nil)
	l.writeConfig(good)
	l.start()
	l.pingAll()
	before := l.show()

	// trestle reload with a bad file: refused, state kept.
	l.writeConfig(bad)
	out, err = l.cli("reload")
	if err == nil || !strings.Contains(out, "bridge[0].port[2].mode") {
		t.Errorf("reload of a bad file: err %v, output:\n%s", err, out)
	}
	// SIGHUP with a bad file: logged, state kept.
	if err := l.daemon.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if !strings.Contains(l.daemon.Out.String(), "reload rejected") {
		t.Errorf("SIGHUP with a bad file was not reported:\n%s", l.daemon.Out.String())
	}
	after := l.show()
	if fmt.Sprint(before.Bridges) != fmt.Sprint(after.Bridges) {
		t.Errorf("state changed after rejected reloads:\nbefore %+v\nafter  %+v", before.Bridges, after.Bridges)
	}
	l.pingAll()

	// A good reload that changes one port leaves the other forwarding.
	l.writeConfig(l.config("", func(i int) string {
		if i == 2 {
			return "max_macs = 10\n"
		}
		return ""
	}))
	if out, err := l.cli("reload"); err != nil {
		t.Fatalf("reload: %v\n%s", err, out)
	}
	st := l.show()
	if st.Bridges[0].Ports[0].Ifindex != before.Bridges[0].Ports[0].Ifindex || st.Bridges[0].Ports[1].MaxMACs != 10 {
		t.Errorf("after reload: %+v", st.Bridges[0].Ports)
	}
	// A new limit is written in place: neither port was detached, and
	// neither lost its counters or its learned entries.
	if strings.Contains(l.daemon.Out.String(), `port removed`) || strings.Count(l.daemon.Out.String(), `"port up"`) != 2 {
		t.Errorf("reload of a new max_macs detached or re-attached ports:\n%s", l.daemon.Out.String())
	}
	if s := l.stats(portName(2)); s.Counters.Get("rx_packets") == 0 || s.Counters.Get("learned") == 0 {
		t.Errorf("port-h2 counters were reset by the reload: %+v", s)
	}
	if e, ok := l.fdbEntry(hostMAC(2)); !ok || e.Port != portName(2) {
		t.Errorf("h2's entry lost by the reload: %+v %v", e, ok)
	}
	l.pingAll()
	l.stop()
}

// TestMissingInterface: a port whose interface does not exist is down with
// the reason and comes up when the interface appears; one that vanishes goes
// down without taking the daemon with it.
func TestMissingInterface(t *testing.T) {
	l := newSwlab(t, 2)
	body := l.config("", nil) + "\n[[bridge.port]]\ninterface = \"port-h3\"\n"
	l.writeConfig(body)
	l.start()
	st := l.show()
	p3 := st.Bridges[0].Ports[2]
	if p3.State != "down" || !strings.Contains(p3.Reason, `"port-h3" does not exist`) {
		t.Errorf("missing interface: %+v, want down with a reason naming it", p3)
	}
	l.pingAll()

	// The interface appears: the port comes up and h3 can talk.
	h3 := testutil.NewNS(t, "h3")
	testutil.Veth(t, l.sw, "port-h3", h3, "eth0", "")
	h3.AddrAdd(t, "eth0", hostIP(3)+"/24")
	deadline := time.Now().Add(5 * time.Second)
	for l.show().Bridges[0].Ports[2].State != "up" && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if p := l.show().Bridges[0].Ports[2]; p.State != "up" {
		t.Fatalf("port-h3 did not come up after its interface appeared: %+v", p)
	}
	if err := h3.Ping(hostIP(1), 2); err != nil {
		t.Errorf("ping h3 -> h1 after port-h3 came up: %v", err)
	}

	// It vanishes: the port goes down, the others keep forwarding.
	l.sw.MustExec(t, "ip", "link", "del", "port-h3")
	deadline = time.Now().Add(5 * time.Second)
	for l.show().Bridges[0].Ports[2].State != "down" && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if p := l.show().Bridges[0].Ports[2]; p.State != "down" || !strings.Contains(p.Reason, "deleted") {
		t.Errorf("port-h3 after its interface was deleted: %+v", p)
	}
	l.pingAll()
	select {
	case <-l.daemon.Done():
		t.Fatalf("daemon died: %s", l.daemon.Out.String())
	default:
	}
	l.stop()
}

// TestXDPUnreachablePeer: in xdp mode a veth whose peer lives in a namespace
// the daemon cannot find stays down with the reason, instead of losing the
// frames redirected into it; other ports are unaffected.
func TestXDPUnreachablePeer(t *testing.T) {
	l := newSwlab(t, 2)
	testutil.RequireCmd(t, "unshare", "umount")
	hidden := filepath.Join(t.TempDir(), "netns")
	if err := os.WriteFile(hidden, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("unshare", "--net="+hidden, "true").CombinedOutput(); err != nil {
		t.Skipf("cannot make a namespace outside /run/netns: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", hidden).Run() })
	err := l.sw.Do(func() error {
		la := netlink.NewLinkAttrs()
		la.Name = "port-x"
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "hidden0"}); err != nil {
			return err
		}
		peer, err := netlink.LinkByName("hidden0")
		if err != nil {
			return err
		}
		f, err := os.Open(hidden)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := netlink.LinkSetNsFd(peer, int(f.Fd())); err != nil {
			return err
		}
		return netlink.LinkSetUp(&netlink.Veth{LinkAttrs: la})
	})
	if err != nil {
		t.Fatal(err)
	}
	l.writeConfig(l.config("", func(int) string { return "mode = \"xdp\"\n" }) + "\n[[bridge.port]]\ninterface = \"port-x\"\nmode = \"xdp\"\n")
	l.start()
	px := l.show().Bridges[0].Ports[2]
	if px.State != "down" || !strings.Contains(px.Reason, "mode xdp refused") {
		t.Errorf("xdp port with an unreachable peer: %+v, want down with the reason", px)
	}
	l.pingAll()
	l.stop()
}

// TestReloadKeepsUnchangedPorts: a reload that only moves lines (a comment at
// the top) touches no port: learned entries, counters and CLI statics stay.
func TestReloadKeepsUnchangedPorts(t *testing.T) {
	l := newSwlab(t, 2)
	body := l.config("", nil)
	l.writeConfig(body)
	l.start()
	l.pingAll()
	extra := net.HardwareAddr{0x02, 0x5a, 0, 0, 0, 0x02}
	if out, err := l.cli("fdb", "add", "br0", extra.String(), "port-h2"); err != nil {
		t.Fatalf("fdb add: %v\n%s", err, out)
	}
	before := len(l.fdb())
	rx := l.stats("port-h1").Counters.Get("rx_packets")
	l.writeConfig("# a comment moves every line down\n" + body)
	if out, err := l.cli("reload"); err != nil {
		t.Fatalf("reload: %v\n%s", err, out)
	}
	if strings.Contains(l.daemon.Out.String(), "port removed") {
		t.Errorf("a reload with no real change removed ports:\n%s", l.daemon.Out.String())
	}
	if after := len(l.fdb()); after != before {
		t.Errorf("fdb had %d entries before the reload, %d after", before, after)
	}
	if got := l.stats("port-h1").Counters.Get("rx_packets"); got < rx {
		t.Errorf("port-h1 counters were reset by the reload: rx %d then %d", rx, got)
	}
	if e, ok := l.fdbEntry(extra); !ok || !e.Static {
		t.Errorf("CLI static entry lost by the reload")
	}
	l.stop()
}

// TestVLANLearned: a tagged frame is learned under its VID in both modes (at
// tc the kernel has moved the tag into metadata; XDP sees it in the frame).
func TestVLANLearned(t *testing.T) {
	for _, mode := range []string{"xdp", "tc"} {
		t.Run(mode, func(t *testing.T) {
			l := newSwlab(t, 2)
			l.writeConfig(l.config("", func(int) string { return fmt.Sprintf("mode = %q\n", mode) }))
			l.start()
			src := net.HardwareAddr{0x02, 0x77, 0, 0, 0, 1}
			payload := make([]byte, 50)
			payload[0], payload[1] = 0x00, 0x0a // TCI: VID 10
			payload[2], payload[3] = 0x88, 0xb5
			capt := l.host(2).Capture(t, "eth0")
			if err := l.host(1).RawSend("eth0", testutil.Frame(hostMAC(2), src, 0x8100, payload)); err != nil {
				t.Fatal(err)
			}
			isTagged := func(f []byte) bool {
				return len(f) > 16 && bytes.Equal(f[6:12], src) && f[12] == 0x81 && f[13] == 0 && f[15] == 10
			}
			if n := capt.WaitFor(isTagged, 1, 2*time.Second); n != 1 {
				t.Errorf("h2 got %d copies of the tagged frame, want 1 with its tag", n)
			}
			if e, ok := l.fdbEntry(src); !ok || e.VLAN != 10 || e.Port != "port-h1" {
				t.Errorf("tagged frame learned as %+v (found %v), want vlan 10 on port-h1", e, ok)
			}
			l.stop()
		})
	}
}

// TestInterfaceRecreated: an interface deleted and created again under the
// same name while the daemon is busy ends up attached and up, once.
func TestInterfaceRecreated(t *testing.T) {
	for _, mode := range []string{"xdp", "tc"} {
		t.Run(mode, func(t *testing.T) {
			l := newSwlab(t, 2)
			l.writeConfig(l.config("", func(int) string { return fmt.Sprintf("mode = %q\n", mode) }) +
				fmt.Sprintf("\n[[bridge.port]]\ninterface = \"port-x\"\nmode = %q\n", mode))
			l.sw.MustExec(t, "ip", "link", "add", "port-x", "type", "veth", "peer", "name", "peer-x")
			l.sw.MustExec(t, "ip", "link", "set", "port-x", "up")
			l.sw.MustExec(t, "ip", "link", "set", "peer-x", "up")
			l.start()
			if p := l.show().Bridges[0].Ports[2]; p.State != "up" {
				t.Fatalf("port-x not up: %+v", p)
			}
			// A busy daemon: the delete and the create queue up behind it.
			if err := l.daemon.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			out, err := l.sw.Exec("sh", "-c", "printf 'link del port-x\\nlink add port-x type veth peer name peer-x\\nlink set port-x up\\nlink set peer-x up\\n' | ip -batch -")
			l.daemon.Cmd.Process.Signal(syscall.SIGCONT)
			if err != nil {
				t.Fatalf("%v %s", err, out)
			}
			deadline := time.Now().Add(5 * time.Second)
			var p ctl.PortStatus
			for time.Now().Before(deadline) {
				if p = l.show().Bridges[0].Ports[2]; p.State == "up" {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if p.State != "up" || p.Mode != mode {
				t.Fatalf("port-x after re-creation: %+v\n%s", p, l.daemon.Out.String())
			}
			l.pingAll()
			l.stop()
			err = l.sw.Do(func() error {
				lk, err := netlink.LinkByName("port-x")
				if err != nil {
					return err
				}
				if x := lk.Attrs().Xdp; x != nil && x.Attached {
					t.Errorf("port-x: XDP program left after exit")
				}
				res, err := link.QueryPrograms(link.QueryOptions{Target: lk.Attrs().Index, Attach: ebpf.AttachTCXIngress})
				if err == nil && len(res.Programs) > 0 {
					t.Errorf("port-x: tcx program left after exit")
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if mode == "xdp" {
				if out := l.sw.MustExec(t, "ethtool", "-k", "peer-x"); !strings.Contains(out, "tx-checksum-ip-generic: on") {
					t.Errorf("peer-x TX checksum offload not restored:\n%s", out)
				}
			}
		})
	}
}

// TestXDPRefusesDeviceWithoutXDP: a device that cannot take XDP redirects (here
// a Linux bridge device) in a bridge with xdp ports would drop their frames
// unseen; the daemon keeps it down and says why.
func TestXDPRefusesDeviceWithoutXDP(t *testing.T) {
	l := newSwlab(t, 2)
	l.sw.MustExec(t, "ip", "link", "add", "lbr0", "type", "bridge")
	l.sw.MustExec(t, "ip", "link", "set", "lbr0", "up")
	l.writeConfig(l.config("", func(int) string { return "mode = \"xdp\"\n" }) + "\n[[bridge.port]]\ninterface = \"lbr0\"\n")
	l.start()
	p := l.show().Bridges[0].Ports[2]
	if p.State != "down" || !strings.Contains(p.Reason, "cannot take the XDP redirects") {
		t.Errorf("bridge device among xdp ports: %+v, want down with the reason", p)
	}
	l.pingAll()
	l.stop()
}
