package harness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"

	"github.com/trestle/trestle/internal/clsact"
	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/testutil"
)

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

// HostMAC, HostIP and PortName are host i's eth0 address, its IP and its
// port on the switch.
func HostMAC(i int) net.HardwareAddr { return net.HardwareAddr{2, 0, 0, 0, 0, byte(i)} }
func HostIP(i int) string            { return fmt.Sprintf("10.78.0.%d", i) }
func PortName(i int) string          { return fmt.Sprintf("port-h%d", i) }

// NewLab makes the switch namespace and n hosts; it skips the test under
// -short (testutil.RequireNetns).
func NewLab(t *testing.T, n int) *Lab {
	testutil.RequireNetns(t)
	testutil.RequireCmd(t, "ip", "iperf3", "ethtool")
	l := LabOn(t, testutil.NewNS(t, "sw"))
	for i := 1; i <= n; i++ {
		h := testutil.NewNS(t, fmt.Sprintf("h%d", i))
		// No IPv6: its unsolicited ND and MLD frames would refresh entries
		// the aging test waits to see go, and add noise to the counters.
		if err := h.NoIPv6(); err != nil {
			t.Fatal(err)
		}
		testutil.Attach(t, l.SW, PortName(i), h, "eth0", HostMAC(i), HostIP(i)+"/24")
		l.Hosts = append(l.Hosts, h)
	}
	return l
}

// LabOn is a Lab of a switch namespace and hosts made elsewhere (the
// overlay's tests build theirs with the lab's Sites), with its own
// directory, socket and config.
func LabOn(t *testing.T, sw *testutil.NS, hosts ...*testutil.NS) *Lab {
	l := &Lab{T: t, Dir: t.TempDir(), SW: sw, Hosts: hosts}
	l.Sock = filepath.Join(l.Dir, "trestle.sock")
	l.Cfg = filepath.Join(l.Dir, "trestle.toml")
	return l
}

func (l *Lab) Host(i int) *testutil.NS { return l.Hosts[i-1] }

// Config is a config with one bridge of every host's port; extra is added
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

// Programs are the programs attached to each interface of the switch's
// namespace, whatever its name now: "NAME/xdp", "NAME/tcx-ingress"...,
// "NAME/tc-filter" (a trestle daemon's clsact filter; a second one's
// "NAME/tc-filter/1").
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
			// A port added at run time is attached in a tc filter.
			fids, err := clsact.Any(lk.Attrs().Index)
			if err != nil {
				return fmt.Errorf("tc filter on %s: %w", name, err)
			}
			for i, id := range fids {
				k := name + "/tc-filter"
				if i > 0 { // two daemons' on one interface
					k = fmt.Sprintf("%s/%d", k, i)
				}
				ids[k] = id
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
