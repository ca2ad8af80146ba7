package reconcile

import (
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
	"github.com/trestle/trestle/tests/harness"
)

// TestBadConfig: a bad file at start exits non-zero naming file, line and
// field; a bad file at reload keeps the running state.
func TestBadConfig(t *testing.T) {
	t.Parallel()
	l := harness.NewLab(t, 2)
	bad := l.Config("", nil) + "\n[[bridge.port]]\ninterface = \"port-h3\"\nmode = \"fast\"\n"
	l.WriteConfig(bad)
	out, err := l.SW.Exec(harness.Bin, "run", "--config", l.Cfg)
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
	if s := l.Stats(harness.PortName(2)); s.Counters.Get("rx_packets") == 0 || s.Counters.Get("learned") == 0 {
		t.Errorf("port-h2 counters were reset by the reload: %+v", s)
	}
	if e, ok := l.FDBEntry(harness.HostMAC(2)); !ok || e.Port != harness.PortName(2) {
		t.Errorf("h2's entry lost by the reload: %+v %v", e, ok)
	}
	l.PingAll()
	l.Stop()
}

// TestMissingInterface: a port whose interface does not exist is down with
// the reason and comes up when the interface appears; one that vanishes goes
// down without taking the daemon with it.
func TestMissingInterface(t *testing.T) {
	t.Parallel()
	l := harness.NewLab(t, 2)
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
	testutil.Attach(t, l.SW, "port-h3", h3, "eth0", nil, harness.HostIP(3)+"/24")
	deadline := time.Now().Add(5 * time.Second)
	for l.Show().Bridges[0].Ports[2].State != "up" && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if p := l.Show().Bridges[0].Ports[2]; p.State != "up" {
		t.Fatalf("port-h3 did not come up after its interface appeared: %+v", p)
	}
	if err := h3.Ping(harness.HostIP(1), 2); err != nil {
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
	t.Parallel()
	l := harness.NewLab(t, 2)
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
	t.Parallel()
	l := harness.NewLab(t, 2)
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

// TestInterfaceRecreated: an interface deleted and created again under the
// same name while the daemon is busy ends up attached and up, once.
func TestInterfaceRecreated(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"xdp", "tc"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			l := harness.NewLab(t, 2)
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
	t.Parallel()
	l := harness.NewLab(t, 2)
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
