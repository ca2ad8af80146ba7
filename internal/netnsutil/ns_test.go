package netnsutil_test

import (
	"net"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/trestle/trestle/internal/netnsutil"
	"github.com/trestle/trestle/internal/testutil"
)

// A host attached to a switch's namespace has its MAC and its addresses at
// once: an IPv6 address is not left tentative (NODAD), which the lab's own
// harness did not do before it was this one.
func TestAttachHost(t *testing.T) {
	testutil.RequireNetns(t)
	sw, h := testutil.NewNS(t, "sw"), testutil.NewNS(t, "h")
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 0x42}
	if err := netnsutil.Attach(&sw.NS, netnsutil.Host{NS: &h.NS, If: "eth0", MAC: mac, CIDR: "fd00:77::2/64", Port: "p1"}, 1); err != nil {
		t.Fatal(err)
	}
	if got, err := h.NS.MAC("eth0"); err != nil || got.String() != mac.String() {
		t.Fatalf("eth0's MAC = %v, %v; want %v", got, err, mac)
	}
	for _, e := range []struct {
		ns *testutil.NS
		If string
	}{{sw, "p1"}, {h, "eth0"}} {
		l, err := e.ns.Link(e.If)
		if err != nil {
			t.Fatal(err)
		}
		if l.Attrs().Flags&net.FlagUp == 0 || l.Attrs().NumRxQueues != 1 {
			t.Errorf("%s in %s: flags %v, %d rx queues; want up with 1", e.If, e.ns.Name, l.Attrs().Flags, l.Attrs().NumRxQueues)
		}
	}
	err := h.Do(func() error {
		l, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		addrs, err := netlink.AddrList(l, netlink.FAMILY_V6)
		if err != nil {
			return err
		}
		for _, a := range addrs {
			if a.IP.Equal(net.ParseIP("fd00:77::2")) {
				if a.Flags&unix.IFA_F_TENTATIVE != 0 {
					t.Errorf("fd00:77::2 is tentative (flags %#x): NODAD not set", a.Flags)
				}
				return nil
			}
		}
		t.Errorf("fd00:77::2 not on eth0: %v", addrs)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Bad input is an error, and leaves nothing behind.
func TestVethRefusesBadNames(t *testing.T) {
	testutil.RequireNetns(t)
	a, b := testutil.NewNS(t, "a"), testutil.NewNS(t, "b")
	for _, names := range [][2]string{{"", "b0"}, {"a0", "name-far-too-long"}} {
		err := netnsutil.Veth(&a.NS, names[0], &b.NS, names[1], netnsutil.VethOpts{})
		if err == nil || !strings.Contains(err.Error(), "must be 1..15 bytes") {
			t.Errorf("Veth(%q, %q) = %v, want an error on the name", names[0], names[1], err)
		}
	}
	if err := a.NS.AddrAdd("lo", "not-an-address"); err == nil {
		t.Error("AddrAdd took not-an-address")
	}
	if _, err := a.Link("a0"); err == nil {
		t.Error("a refused veth left a0 behind")
	}
}

// A command started by Start carries its death signal, and an existing
// SysProcAttr keeps what it had.
func TestStartSetsDeathSignal(t *testing.T) {
	cmd := exec.Command("true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := netnsutil.Start(cmd); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if cmd.SysProcAttr.Pdeathsig != syscall.SIGKILL || !cmd.SysProcAttr.Setpgid {
		t.Errorf("SysProcAttr %+v: want Pdeathsig SIGKILL and Setpgid kept", cmd.SysProcAttr)
	}
}

// FindByID finds a veth peer's namespace by the id the veth names, and
// again after that namespace is gone and another holds the id's place: a
// path it found before is used only while it still has the id.
func TestFindByIDAgain(t *testing.T) {
	testutil.RequireNetns(t)
	a := testutil.NewNS(t, "a")
	find := func(ifname string) (string, error) {
		var path string
		err := a.Do(func() error {
			l, err := netlink.LinkByName(ifname)
			if err != nil {
				return err
			}
			path, err = netnsutil.FindByID(l.Attrs().NetNsID)
			return err
		})
		return path, err
	}
	for i, name := range []string{"b", "c"} {
		// Not testutil.NewNS: the first goes before the test ends.
		peer, err := netnsutil.Add(testutil.Prefix() + "-findid-" + name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = peer.Delete() })
		ifname := "to" + name
		if err := netnsutil.Veth(&a.NS, ifname, peer, "back", netnsutil.VethOpts{}); err != nil {
			t.Fatal(err)
		}
		for range 2 { // looked for, then remembered
			if got, err := find(ifname); err != nil || got != peer.Path {
				t.Fatalf("peer %d of %s: %q (%v), want %q", i, ifname, got, err, peer.Path)
			}
		}
		if err := peer.Delete(); err != nil {
			t.Fatal(err)
		}
	}
}
