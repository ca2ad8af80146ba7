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

var Bin string

func TestMain(m *testing.M) {
	// TRESTLE_TEST_BIN runs the tests against another build, e.g. to see a
	// test fail against the build before a fix.
	if bin := os.Getenv("TRESTLE_TEST_BIN"); bin != "" {
		Bin = bin
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "trestle-bin")
	if err != nil {
		panic(err)
	}
	Bin = filepath.Join(dir, "trestle")
	if out, err := exec.Command("go", "build", "-o", Bin, ".").CombinedOutput(); err != nil {
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

// Lab is a switch namespace with n hosts, host i on port "port-hI" with
// eth0 02:00:00:00:00:0I and 10.78.0.I/24.
type Lab struct {
	T      *testing.T
	SW     *testutil.NS
	Hosts  []*testutil.NS
	Dir    string
	Sock   string
	Cfg    string
	Daemon *testutil.Proc
}

func HostMAC(i int) net.HardwareAddr { return net.HardwareAddr{2, 0, 0, 0, 0, byte(i)} }
func HostIP(i int) string            { return fmt.Sprintf("10.78.0.%d", i) }
func PortName(i int) string          { return fmt.Sprintf("port-h%d", i) }

func NewLab(t *testing.T, n int) *Lab {
	testutil.RequireRoot(t)
	testutil.RequireCmd(t, "ip", "iperf3", "ethtool")
	l := &Lab{T: t, Dir: t.TempDir()}
	l.Sock = filepath.Join(l.Dir, "trestle.sock")
	l.Cfg = filepath.Join(l.Dir, "trestle.toml")
	l.SW = testutil.NewNS(t, "sw")
	for i := 1; i <= n; i++ {
		h := testutil.NewNS(t, fmt.Sprintf("h%d", i))
		// No IPv6: its unsolicited ND and MLD frames would refresh entries
		// the aging test waits to see go, and add noise to the counters.
		for _, k := range []string{"net/ipv6/conf/all/disable_ipv6", "net/ipv6/conf/default/disable_ipv6"} {
			if err := h.Sysctl(k, "1"); err != nil {
				t.Fatal(err)
			}
		}
		testutil.Veth(t, l.SW, PortName(i), h, "eth0", "")
		h.MustExec(t, "ip", "link", "set", "dev", "eth0", "address", HostMAC(i).String())
		h.AddrAdd(t, "eth0", HostIP(i)+"/24")
		l.Hosts = append(l.Hosts, h)
	}
	return l
}

func (l *Lab) Host(i int) *testutil.NS { return l.Hosts[i-1] }

// Config writes a Config with one bridge of every host's port; extra is added
// to the bridge table, portExtra to each port table.
func (l *Lab) Config(bridgeExtra string, portExtra func(i int) string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[daemon]\nsocket = %q\n\n[[bridge]]\nname = \"br0\"\n%s\n", l.Sock, bridgeExtra)
	for i := 1; i <= len(l.Hosts); i++ {
		fmt.Fprintf(&b, "\n[[bridge.port]]\ninterface = %q\n", PortName(i))
		if portExtra != nil {
			b.WriteString(portExtra(i))
		}
	}
	return b.String()
}

func (l *Lab) WriteConfig(body string) {
	l.T.Helper()
	if err := os.WriteFile(l.Cfg, []byte(body), 0o644); err != nil {
		l.T.Fatal(err)
	}
}

// Start runs the daemon and waits for its socket.
func (l *Lab) Start() {
	l.T.Helper()
	l.Daemon = l.SW.Start(l.T, Bin, "run", "--config", l.Cfg)
	l.WaitSocket()
}

// CLI runs the trestle CLI against this lab's daemon.
func (l *Lab) CLI(args ...string) (string, error) {
	cmd := exec.Command(Bin, args...)
	cmd.Env = append(os.Environ(), "TRESTLE_SOCKET="+l.Sock)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func (l *Lab) CLIJSON(v any, args ...string) {
	l.T.Helper()
	out, err := l.CLI(append(args, "--json")...)
	if err != nil {
		l.T.Fatalf("trestle %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		l.T.Fatalf("trestle %s --json: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func (l *Lab) FDB() []ctl.FDBEntry {
	var es []ctl.FDBEntry
	l.CLIJSON(&es, "fdb", "show")
	return es
}

func (l *Lab) FDBEntry(mac net.HardwareAddr) (ctl.FDBEntry, bool) {
	for _, e := range l.FDB() {
		if e.MAC == mac.String() {
			return e, true
		}
	}
	return ctl.FDBEntry{}, false
}

// AllStats returns the counters of every port of every bridge.
func (l *Lab) AllStats() []ctl.PortStats {
	l.T.Helper()
	var ps []ctl.PortStats
	l.CLIJSON(&ps, "stats")
	return ps
}

func (l *Lab) Stats(port string) ctl.PortStats {
	l.T.Helper()
	ps := l.AllStats()
	for _, p := range ps {
		if p.Port == port {
			return p
		}
	}
	l.T.Fatalf("no stats for port %s", port)
	return ctl.PortStats{}
}

func (l *Lab) Show() ctl.Status {
	var st ctl.Status
	l.CLIJSON(&st, "show")
	return st
}

func (l *Lab) PingAll() {
	l.T.Helper()
	for i := 1; i <= len(l.Hosts); i++ {
		for j := 1; j <= len(l.Hosts); j++ {
			if i != j {
				if err := l.Host(i).Ping(HostIP(j), 2); err != nil {
					l.T.Fatalf("ping h%d -> h%d: %v", i, j, err)
				}
			}
		}
	}
}

// Stop ends the daemon with SIGTERM and checks that it left no program behind.
func (l *Lab) Stop() {
	l.T.Helper()
	if err := l.Daemon.Stop(); err != nil && !strings.Contains(err.Error(), "terminated") {
		l.T.Errorf("daemon exit: %v", err)
	}
	l.AssertNoPrograms()
}

func (l *Lab) AssertNoPrograms() {
	l.T.Helper()
	for k, id := range l.Programs() {
		l.T.Errorf("%s: program %d still attached", k, id)
	}
}

// Programs are the Programs attached to each interface of the switch's
// namespace, whatever its name now: "NAME/xdp", "NAME/tcx-ingress"...
func (l *Lab) Programs() map[string]ebpf.ProgramID {
	l.T.Helper()
	ids := map[string]ebpf.ProgramID{}
	err := l.SW.Do(func() error {
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
		l.T.Fatal(err)
	}
	return ids
}

func Marked(dst, src net.HardwareAddr, marker string) []byte {
	payload := make([]byte, 46)
	copy(payload, marker)
	return testutil.Frame(dst, src, 0x88b5, payload)
}

func HasMarker(marker string) func([]byte) bool {
	return func(f []byte) bool { return len(f) > 14 && bytes.HasPrefix(f[14:], []byte(marker)) }
}

// TestForwardingModes: in each mode three hosts ping each other and iperf3
// TCP runs through the switch with the hosts' default offloads; the learned
// table names each host on its port; the daemon leaves nothing attached.
func TestForwardingModes(t *testing.T) {
	for _, mode := range []string{"auto", "xdp", "tc"} {
		t.Run(mode, func(t *testing.T) {
			l := NewLab(t, 3)
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
					if e.MAC == HostMAC(i).String() {
						found = true
						if e.Port != PortName(i) || e.Bridge != "br0" || e.Static || e.VLAN != 0 {
							t.Errorf("fdb entry for h%d: %+v, want learned on %s", i, e, PortName(i))
						}
					}
				}
				if !found {
					t.Errorf("fdb has no entry for h%d (%s): %+v", i, HostMAC(i), es)
				}
			}

			bps, err := testutil.Iperf(t, l.Host(2), HostIP(2), l.Host(1), 2, 1)
			if err != nil {
				t.Fatalf("iperf3 through trestle in %s mode: %v", mode, err)
			}
			if bps <= 0 {
				t.Fatalf("iperf3 moved nothing in %s mode", mode)
			}
			t.Logf("%s mode: iperf3 TCP h1 -> h2 %.2f Gbit/s (a sanity figure, not a benchmark)", mode, bps/1e9)
			if s := l.Stats(PortName(1)); s.Counters.Get("rx_packets") == 0 || s.Mode != want {
				t.Errorf("stats for %s: %+v", PortName(1), s)
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
	for _, mode := range []string{"xdp", "tc"} {
		t.Run(mode, func(t *testing.T) {
			l := NewLab(t, 3)
			l.WriteConfig(l.Config("", func(int) string { return fmt.Sprintf("mode = %q\n", mode) }))
			l.Start()

			caps := map[int]*testutil.Capturer{}
			for i := 1; i <= 3; i++ {
				caps[i] = l.Host(i).Capture(t, "eth0")
			}
			// ARP: h1 asks for h2 by broadcast; h3 sees the request too.
			if err := l.Host(1).Ping(HostIP(2), 1); err != nil {
				t.Fatalf("ping h1 -> h2 (needs broadcast ARP): %v", err)
			}
			isARPFromH1 := func(f []byte) bool {
				return len(f) >= 14 && bytes.Equal(f[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}) &&
					bytes.Equal(f[6:12], HostMAC(1)) && f[12] == 0x08 && f[13] == 0x06
			}
			if n := caps[3].WaitFor(isARPFromH1, 1, 2*time.Second); n < 1 {
				t.Errorf("h3 did not see h1's broadcast ARP request")
			}

			unknown := net.HardwareAddr{0x02, 0xee, 0, 0, 0, 0x99}
			if err := l.Host(1).RawSend("eth0", Marked(unknown, HostMAC(1), "unknown-unicast")); err != nil {
				t.Fatal(err)
			}
			for _, i := range []int{2, 3} {
				if n := caps[i].WaitFor(HasMarker("unknown-unicast"), 1, 2*time.Second); n != 1 {
					t.Errorf("h%d got %d copies of the unknown unicast frame, want 1", i, n)
				}
			}
			if err := l.Host(1).RawSend("eth0", Marked(HostMAC(2), HostMAC(1), "known-unicast")); err != nil {
				t.Fatal(err)
			}
			if n := caps[2].WaitFor(HasMarker("known-unicast"), 1, 2*time.Second); n != 1 {
				t.Errorf("h2 got %d copies of the frame to its MAC, want 1", n)
			}
			if n := caps[3].WaitFor(HasMarker("known-unicast"), 1, 500*time.Millisecond); n != 0 {
				t.Errorf("h3 got the frame to h2's known MAC: known unicast was flooded")
			}
			if n := caps[1].WaitFor(HasMarker("unknown-unicast"), 1, 100*time.Millisecond); n != 0 {
				t.Errorf("the sender got its own flooded frame back")
			}
			if s := l.Stats(PortName(1)); s.Counters.Get("flooded") == 0 {
				t.Errorf("port-h1 counted no flooded frames: %+v", s)
			}
			l.Stop()
		})
	}
}

// TestStaticMoveFlush: a static entry wins over learning and survives a flush
// of learned entries; a MAC that moves ports is re-learned and counted.
func TestStaticMoveFlush(t *testing.T) {
	l := NewLab(t, 3)
	static := net.HardwareAddr{0x02, 0x5a, 0, 0, 0, 0x01}
	l.WriteConfig(l.Config(`
[[bridge.static]]
mac = "`+static.String()+`"
port = "port-h3"
`, nil))
	l.Start()
	l.PingAll()

	// A frame from h1 with the static address as source: the entry stays.
	if err := l.Host(1).RawSend("eth0", Marked(HostMAC(2), static, "spoof")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if e, ok := l.FDBEntry(static); !ok || !e.Static || e.Port != "port-h3" {
		t.Errorf("static entry after a frame from another port: %+v (found %v), want static on port-h3", e, ok)
	}

	// h1's address shows up behind port-h2: it moved.
	if err := l.Host(2).RawSend("eth0", Marked(HostMAC(3), HostMAC(1), "moved")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if e, _ := l.FDBEntry(HostMAC(1)); e.Port != "port-h2" {
		t.Errorf("h1's MAC after it moved: on %q, want port-h2", e.Port)
	}
	if s := l.Stats("port-h2"); s.Counters.Get("moved") != 1 {
		t.Errorf("port-h2 moved counter %d, want 1", s.Counters.Get("moved"))
	}
	// And back: h1 talks again from its own port.
	if err := l.Host(1).Ping(HostIP(3), 1); err != nil {
		t.Fatal(err)
	}
	if e, _ := l.FDBEntry(HostMAC(1)); e.Port != "port-h1" {
		t.Errorf("h1's MAC after it came back: on %q, want port-h1", e.Port)
	}

	out, err := l.CLI("fdb", "flush", "br0")
	if err != nil {
		t.Fatalf("fdb flush: %v\n%s", err, out)
	}
	es := l.FDB()
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
	l := NewLab(t, 2)
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
		if err := l.Host(1).RawSend("eth0", Marked(HostMAC(2), src, "limit")); err != nil {
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
	if err := l.Host(1).Ping(HostIP(2), 1); err != nil {
		t.Fatalf("ping after aging: %v", err)
	}
	if _, ok := l.FDBEntry(HostMAC(1)); !ok {
		t.Errorf("h1 not re-learned after its entries aged out")
	}
	l.Stop()
}

// TestBadFrames: malformed frames from a host are dropped and counted by
// reason, and the switch keeps forwarding.
func TestBadFrames(t *testing.T) {
	for _, mode := range []string{"xdp", "tc"} {
		t.Run(mode, func(t *testing.T) {
			l := NewLab(t, 2)
			l.WriteConfig(l.Config("", func(int) string { return fmt.Sprintf("mode = %q\n", mode) }))
			l.Start()
			l.PingAll()
			src, dst := HostMAC(1), HostMAC(2)
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
			before := l.Stats(PortName(1)).Drops
			capt := l.Host(2).Capture(t, "eth0")
			for _, b := range bad {
				if err := l.Host(1).RawSend("eth0", b.frame); err != nil {
					t.Fatalf("send %s frame: %v", b.reason, err)
				}
				want[b.reason]++
			}
			time.Sleep(200 * time.Millisecond)
			after := l.Stats(PortName(1)).Drops
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

// TestBadConfig: a bad file at start exits non-zero naming file, line and
// field; a bad file at reload keeps the running state.
func TestBadConfig(t *testing.T) {
	l := NewLab(t, 2)
	bad := l.Config("", nil) + "\n[[bridge.port]]\ninterface = \"port-h3\"\nmode = \"fast\"\n"
	l.WriteConfig(bad)
	out, err := l.SW.Exec(Bin, "run", "--config", l.Cfg)
	if err == nil {
		t.Fatalf("daemon accepted a bad config:\n%s", out)
	}
	line := strings.Count(bad[:strings.Index(bad, "mode = \"fast\"")], "\n") + 1
	wantMsg := fmt.Sprintf("%s:%d: bridge[0].port[2].mode", l.Cfg, line)
	if !strings.Contains(out, wantMsg) {
		t.Errorf("error does not name file:line and field (%q):\n%s", wantMsg, out)
	}
	if _, err := os.Stat(l.Sock); err == nil {
		t.Errorf("a rejected config still opened the control socket")
	}

	good := l.Config("", nil)
	l.WriteConfig(good)
	l.Start()
	l.PingAll()
	before := l.Show()

	// trestle reload with a bad file: refused, state kept.
	l.WriteConfig(bad)
	out, err = l.CLI("reload")
	if err == nil || !strings.Contains(out, "bridge[0].port[2].mode") {
		t.Errorf("reload of a bad file: err %v, output:\n%s", err, out)
	}
	// SIGHUP with a bad file: logged, state kept.
	if err := l.Daemon.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if !strings.Contains(l.Daemon.Out.String(), "reload rejected") {
		t.Errorf("SIGHUP with a bad file was not reported:\n%s", l.Daemon.Out.String())
	}
	after := l.Show()
	if fmt.Sprint(before.Bridges) != fmt.Sprint(after.Bridges) {
		t.Errorf("state changed after rejected reloads:\nbefore %+v\nafter  %+v", before.Bridges, after.Bridges)
	}
	l.PingAll()

	// A good reload that changes one port leaves the other forwarding.
	l.WriteConfig(l.Config("", func(i int) string {
		if i == 2 {
			return "max_macs = 10\n"
		}
		return ""
	}))
	if out, err := l.CLI("reload"); err != nil {
		t.Fatalf("reload: %v\n%s", err, out)
	}
	st := l.Show()
	if st.Bridges[0].Ports[0].Ifindex != before.Bridges[0].Ports[0].Ifindex || st.Bridges[0].Ports[1].MaxMACs != 10 {
		t.Errorf("after reload: %+v", st.Bridges[0].Ports)
	}
	// A new limit is written in place: neither port was detached, and
	// neither lost its counters or its learned entries.
	if strings.Contains(l.Daemon.Out.String(), `port removed`) || strings.Count(l.Daemon.Out.String(), `"port up"`) != 2 {
		t.Errorf("reload of a new max_macs detached or re-attached ports:\n%s", l.Daemon.Out.String())
	}
	if s := l.Stats(PortName(2)); s.Counters.Get("rx_packets") == 0 || s.Counters.Get("learned") == 0 {
		t.Errorf("port-h2 counters were reset by the reload: %+v", s)
	}
	if e, ok := l.FDBEntry(HostMAC(2)); !ok || e.Port != PortName(2) {
		t.Errorf("h2's entry lost by the reload: %+v %v", e, ok)
	}
	l.PingAll()
	l.Stop()
}

// TestMissingInterface: a port whose interface does not exist is down with
// the reason and comes up when the interface appears; one that vanishes goes
// down without taking the daemon with it.
func TestMissingInterface(t *testing.T) {
	l := NewLab(t, 2)
	body := l.Config("", nil) + "\n[[bridge.port]]\ninterface = \"port-h3\"\n"
	l.WriteConfig(body)
	l.Start()
	st := l.Show()
	p3 := st.Bridges[0].Ports[2]
	if p3.State != "down" || !strings.Contains(p3.Reason, `"port-h3" does not exist`) {
		t.Errorf("missing interface: %+v, want down with a reason naming it", p3)
	}
	l.PingAll()

	// The interface appears: the port comes up and h3 can talk.
	h3 := testutil.NewNS(t, "h3")
	testutil.Veth(t, l.SW, "port-h3", h3, "eth0", "")
	h3.AddrAdd(t, "eth0", HostIP(3)+"/24")
	deadline := time.Now().Add(5 * time.Second)
	for l.Show().Bridges[0].Ports[2].State != "up" && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if p := l.Show().Bridges[0].Ports[2]; p.State != "up" {
		t.Fatalf("port-h3 did not come up after its interface appeared: %+v", p)
	}
	if err := h3.Ping(HostIP(1), 2); err != nil {
		t.Errorf("ping h3 -> h1 after port-h3 came up: %v", err)
	}

	// It vanishes: the port goes down, the others keep forwarding.
	l.SW.MustExec(t, "ip", "link", "del", "port-h3")
	deadline = time.Now().Add(5 * time.Second)
	for l.Show().Bridges[0].Ports[2].State != "down" && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if p := l.Show().Bridges[0].Ports[2]; p.State != "down" || !strings.Contains(p.Reason, "deleted") {
		t.Errorf("port-h3 after its interface was deleted: %+v", p)
	}
	l.PingAll()
	select {
	case <-l.Daemon.Done():
		t.Fatalf("daemon died: %s", l.Daemon.Out.String())
	default:
	}
	l.Stop()
}

// TestXDPUnreachablePeer: in xdp mode a veth whose peer lives in a namespace
// the daemon cannot find stays down with the reason, instead of losing the
// frames redirected into it; other ports are unaffected.
func TestXDPUnreachablePeer(t *testing.T) {
	l := NewLab(t, 2)
	testutil.RequireCmd(t, "unshare", "umount")
	hidden := filepath.Join(t.TempDir(), "netns")
	if err := os.WriteFile(hidden, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("unshare", "--net="+hidden, "true").CombinedOutput(); err != nil {
		t.Skipf("cannot make a namespace outside /run/netns: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", hidden).Run() })
	err := l.SW.Do(func() error {
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
	l.WriteConfig(l.Config("", func(int) string { return "mode = \"xdp\"\n" }) + "\n[[bridge.port]]\ninterface = \"port-x\"\nmode = \"xdp\"\n")
	l.Start()
	px := l.Show().Bridges[0].Ports[2]
	if px.State != "down" || !strings.Contains(px.Reason, "mode xdp refused") {
		t.Errorf("xdp port with an unreachable peer: %+v, want down with the reason", px)
	}
	l.PingAll()
	l.Stop()
}

// TestReloadKeepsUnchangedPorts: a reload that only moves lines (a comment at
// the top) touches no port: learned entries, counters and CLI statics stay.
func TestReloadKeepsUnchangedPorts(t *testing.T) {
	l := NewLab(t, 2)
	body := l.Config("", nil)
	l.WriteConfig(body)
	l.Start()
	l.PingAll()
	extra := net.HardwareAddr{0x02, 0x5a, 0, 0, 0, 0x02}
	if out, err := l.CLI("fdb", "add", "br0", extra.String(), "port-h2"); err != nil {
		t.Fatalf("fdb add: %v\n%s", err, out)
	}
	before := len(l.FDB())
	rx := l.Stats("port-h1").Counters.Get("rx_packets")
	l.WriteConfig("# a comment moves every line down\n" + body)
	if out, err := l.CLI("reload"); err != nil {
		t.Fatalf("reload: %v\n%s", err, out)
	}
	if strings.Contains(l.Daemon.Out.String(), "port removed") {
		t.Errorf("a reload with no real change removed ports:\n%s", l.Daemon.Out.String())
	}
	if after := len(l.FDB()); after != before {
		t.Errorf("fdb had %d entries before the reload, %d after", before, after)
	}
	if got := l.Stats("port-h1").Counters.Get("rx_packets"); got < rx {
		t.Errorf("port-h1 counters were reset by the reload: rx %d then %d", rx, got)
	}
	if e, ok := l.FDBEntry(extra); !ok || !e.Static {
		t.Errorf("CLI static entry lost by the reload")
	}
	l.Stop()
}

// TestVLANLearned: a tagged frame is learned under its VID in both modes (at
// tc the kernel has moved the tag into metadata; XDP sees it in the frame).
func TestVLANLearned(t *testing.T) {
	for _, mode := range []string{"xdp", "tc"} {
		t.Run(mode, func(t *testing.T) {
			l := NewLab(t, 2)
			l.WriteConfig(l.Config("", func(int) string { return fmt.Sprintf("mode = %q\n", mode) }))
			l.Start()
			src := net.HardwareAddr{0x02, 0x77, 0, 0, 0, 1}
			payload := make([]byte, 50)
			payload[0], payload[1] = 0x00, 0x0a // TCI: VID 10
			payload[2], payload[3] = 0x88, 0xb5
			capt := l.Host(2).Capture(t, "eth0")
			if err := l.Host(1).RawSend("eth0", testutil.Frame(HostMAC(2), src, 0x8100, payload)); err != nil {
				t.Fatal(err)
			}
			isTagged := func(f []byte) bool {
				return len(f) > 16 && bytes.Equal(f[6:12], src) && f[12] == 0x81 && f[13] == 0 && f[15] == 10
			}
			if n := capt.WaitFor(isTagged, 1, 2*time.Second); n != 1 {
				t.Errorf("h2 got %d copies of the tagged frame, want 1 with its tag", n)
			}
			if e, ok := l.FDBEntry(src); !ok || e.VLAN != 10 || e.Port != "port-h1" {
				t.Errorf("tagged frame learned as %+v (found %v), want vlan 10 on port-h1", e, ok)
			}
			l.Stop()
		})
	}
}

// TestInterfaceRecreated: an interface deleted and created again under the
// same name while the daemon is busy ends up attached and up, once.
func TestInterfaceRecreated(t *testing.T) {
	for _, mode := range []string{"xdp", "tc"} {
		t.Run(mode, func(t *testing.T) {
			l := NewLab(t, 2)
			l.WriteConfig(l.Config("", func(int) string { return fmt.Sprintf("mode = %q\n", mode) }) +
				fmt.Sprintf("\n[[bridge.port]]\ninterface = \"port-x\"\nmode = %q\n", mode))
			l.SW.MustExec(t, "ip", "link", "add", "port-x", "type", "veth", "peer", "name", "peer-x")
			l.SW.MustExec(t, "ip", "link", "set", "port-x", "up")
			l.SW.MustExec(t, "ip", "link", "set", "peer-x", "up")
			l.Start()
			if p := l.Show().Bridges[0].Ports[2]; p.State != "up" {
				t.Fatalf("port-x not up: %+v", p)
			}
			// A busy daemon: the delete and the create queue up behind it.
			if err := l.Daemon.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			out, err := l.SW.Exec("sh", "-c", "printf 'link del port-x\\nlink add port-x type veth peer name peer-x\\nlink set port-x up\\nlink set peer-x up\\n' | ip -batch -")
			l.Daemon.Cmd.Process.Signal(syscall.SIGCONT)
			if err != nil {
				t.Fatalf("%v %s", err, out)
			}
			deadline := time.Now().Add(5 * time.Second)
			var p ctl.PortStatus
			for time.Now().Before(deadline) {
				if p = l.Show().Bridges[0].Ports[2]; p.State == "up" {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if p.State != "up" || p.Mode != mode {
				t.Fatalf("port-x after re-creation: %+v\n%s", p, l.Daemon.Out.String())
			}
			l.PingAll()
			l.Stop()
			err = l.SW.Do(func() error {
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
				if out := l.SW.MustExec(t, "ethtool", "-k", "peer-x"); !strings.Contains(out, "tx-checksum-ip-generic: on") {
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
	l := NewLab(t, 2)
	l.SW.MustExec(t, "ip", "link", "add", "lbr0", "type", "bridge")
	l.SW.MustExec(t, "ip", "link", "set", "lbr0", "up")
	l.WriteConfig(l.Config("", func(int) string { return "mode = \"xdp\"\n" }) + "\n[[bridge.port]]\ninterface = \"lbr0\"\n")
	l.Start()
	p := l.Show().Bridges[0].Ports[2]
	if p.State != "down" || !strings.Contains(p.Reason, "cannot take the XDP redirects") {
		t.Errorf("bridge device among xdp ports: %+v, want down with the reason", p)
	}
	l.PingAll()
	l.Stop()
}
