package cni

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/trestle/trestle/internal/testutil"
)

// The plugin attaches only what the runtime gave the sandbox, talks only
// to a daemon the node allows, and takes back only what it made: each
// test here is an attack by whoever writes a network configuration, or
// names the interfaces a chained plugin reports.

// TestForeignSocket: a network names a socket of its own choosing (another
// daemon, or a program posing as one), and one that climbs out of the
// daemon's run directory. The plugin never connects there: ADD, CHECK,
// STATUS and GC are refused with code 7 saying how the node allows a
// socket, and DEL succeeds having asked nothing; ADD leaves nothing made.
func TestForeignSocket(t *testing.T) {
	t.Parallel()
	l := newLab(t, pods)
	evil := filepath.Join(t.TempDir(), "evil.sock")
	ln, err := net.Listen("unix", evil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var dialed atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			dialed.Add(1)
			c.Close()
		}
	}()
	c := testutil.NewNS(t, "c")
	for _, sock := range []string{evil, "/run/trestle/../.." + evil} {
		nw := l.network("foreign", map[string]any{"bridge": "pods", "socket": sock})
		if out, err := l.cnitool("add", nw, c); err == nil || !strings.Contains(err.Error(), "not a socket the node allows") || !strings.Contains(err.Error(), "/etc/trestle/cni-sockets") {
			t.Errorf("ADD naming the socket %s: %v: %s, want refused saying how to allow one", sock, err, out)
			_, _ = l.cnitool("del", nw, c)
		}
		for _, verb := range []string{"CHECK", "STATUS", "GC"} {
			env := []string{"CNI_COMMAND=" + verb, "CNI_CONTAINERID=foreign", "CNI_NETNS=" + c.Path, "CNI_IFNAME=eth0"}
			if _, e := l.plugin(map[string]any{"bridge": "pods", "socket": sock}, env...); e == nil || e.Code != types.ErrInvalidNetworkConfig {
				t.Errorf("%s naming the socket %s: %+v, want code 7", verb, sock, e)
			}
		}
		env := []string{"CNI_COMMAND=DEL", "CNI_CONTAINERID=foreign", "CNI_NETNS=" + c.Path, "CNI_IFNAME=eth0"}
		if _, e := l.plugin(map[string]any{"bridge": "pods", "socket": sock}, env...); e != nil {
			t.Errorf("DEL naming the socket %s: %+v, want success", sock, e)
		}
	}
	if n := dialed.Load(); n != 0 {
		t.Errorf("the plugin connected %d times to a socket the network chose", n)
	}
	if got := links(t, c); !slices.Equal(got, []string{"lo"}) {
		t.Errorf("a refused ADD left %v in the container", got)
	}
	if v := hostVeths(t, l.SW); len(v) != 0 {
		t.Errorf("a refused ADD left %v in the switch namespace", v)
	}
}

// TestChainedHostDevices: a chained plugin names the host's devices that
// are no sandbox's: an overlay VNI's idle veth (tapVNI: through it the
// bridge's floods would reach the VNI), with the host's own namespace
// given as the sandbox's and its peer as CNI_IFNAME; a TAP that is a port
// of a trestle bridge already; a TAP with the host's address (a VPN's).
// Each ADD is refused naming the device and why, and makes no port; and
// trestle port add refuses the overlay's device too.
func TestChainedHostDevices(t *testing.T) {
	t.Parallel()
	const vni = 4242
	l := prepareLab(t)
	l.SW.AddrAdd(t, "lo", "10.255.42.1/32")
	// No FRR here: the daemon asks no host's bgpd (frr_vty_dir empty).
	l.WriteConfig(fmt.Sprintf("[daemon]\nsocket = %q\nvtep = \"10.255.42.1\"\nfrr_vty_dir = %q\n\n%s\n[[bridge]]\nname = \"ovl\"\n[[bridge.port]]\nvxlan = %d\n", l.Sock, t.TempDir(), pods, vni))
	l.Start()
	adv, advPeer := fmt.Sprintf("tad%d", vni), fmt.Sprintf("tap%d", vni)
	if !slices.Contains(links(t, l.SW), advPeer) {
		t.Fatalf("the overlay made no %s: %v", advPeer, links(t, l.SW))
	}
	fixtures := nameFixture(t)
	path := "CNI_PATH=" + pluginDir + ":" + toolsDir + ":" + fixtures
	chained := l.network("chained", map[string]any{"bridge": "pods"}, map[string]any{"type": "name-fixture"})
	noPort := func(what, iface string) {
		t.Helper()
		for _, p := range l.ports() {
			if p.Interface == iface && strings.HasPrefix(p.Owner, chained+" ") {
				t.Errorf("%s: the attacker got port %+v", what, p)
				_, _ = l.CLI("port", "del", p.Bridge, p.Interface)
			}
		}
	}

	// The overlay's veth, the host's own namespace as the sandbox's.
	out, err := l.cnitool("add", chained, l.SW, path, "TARGET="+advPeer, "CNI_IFNAME="+adv)
	if err == nil || !strings.Contains(err.Error(), advPeer) || !strings.Contains(err.Error(), "is the host's") {
		t.Errorf("chained ADD naming %s in the host's namespace: %v: %s, want refused naming it", advPeer, err, out)
	}
	noPort("the overlay's veth", advPeer)
	// The daemon refuses it as a run-time port, whoever asks.
	if out, err := l.CLI("port", "add", "pods", advPeer); err == nil || !strings.Contains(out, fmt.Sprintf("VNI %d's advertise port's peer", vni)) {
		t.Errorf("port add %s: %v: %s, want refused as the overlay's", advPeer, err, out)
		_, _ = l.CLI("port", "del", "pods", advPeer)
	}

	// A TAP that is a port already (a VM's, added by its ifup script).
	pre := testutil.Prefix()
	vmTAP := pre + "vm"
	openTAP(t, l.SW, vmTAP)
	if out, err := l.CLI("port", "add", "pods", vmTAP, "owner=qemu/"+vmTAP); err != nil {
		t.Fatalf("port add %s: %v: %s", vmTAP, err, out)
	}
	attacker := testutil.NewNS(t, "attacker")
	out, err = l.cnitool("add", chained, attacker, path, "TARGET="+vmTAP)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q is already a port of bridge \"pods\"", vmTAP)) {
		t.Errorf("chained ADD naming the port %s: %v: %s, want refused naming it", vmTAP, err, out)
	}
	if p, ok := l.port("qemu/" + vmTAP); !ok || p.Interface != vmTAP {
		t.Errorf("the VM's port after the attack: %+v (found %t)", p, ok)
	}

	// A TAP with the host's address: the host's own.
	hostTAP := pre + "vpn"
	openTAP(t, l.SW, hostTAP)
	l.SW.AddrAdd(t, hostTAP, "192.0.2.77/24")
	out, err = l.cnitool("add", chained, attacker, path, "TARGET="+hostTAP)
	if err == nil || !strings.Contains(err.Error(), hostTAP) || !strings.Contains(err.Error(), "host's address") {
		t.Errorf("chained ADD naming %s, which has a host address: %v: %s, want refused naming it", hostTAP, err, out)
	}
	noPort("the host's TAP", hostTAP)
}

// TestDelOwnsOnly: DEL deletes the host end only when this owner's ADD
// made it (it bears the owner's mark). A same-named interface someone
// else made, and the veth another network's ADD made for the same
// container and interface, survive a DEL, which succeeds all the same.
func TestDelOwnsOnly(t *testing.T) {
	t.Parallel()
	l := newLab(t, pods)
	a := l.network("a", map[string]any{"bridge": "pods"})
	b := l.network("b", map[string]any{"bridge": "pods"})
	c := testutil.NewNS(t, "c")
	// The host end's name is the plugin's: "tr" and 13 hex digits of a
	// SHA-256 of the container id and the interface.
	h := sha256.Sum256([]byte(containerID(c.Path) + "\x00eth0"))
	name := "tr" + hex.EncodeToString(h[:])[:13]

	l.SW.MustExec(t, "ip", "link", "add", name, "type", "veth", "peer", "name", testutil.Prefix()+"other")
	if _, err := l.cnitool("del", a, c); err != nil {
		t.Errorf("DEL with someone else's %s there: %v, want success", name, err)
	}
	if !slices.Contains(links(t, l.SW), name) {
		t.Errorf("DEL deleted %s, which its ADD did not make", name)
	}
	l.SW.MustExec(t, "ip", "link", "del", name)

	r := l.add(a, c)
	if hostName(t, r) != name {
		t.Fatalf("the host end is %s, want %s", hostName(t, r), name)
	}
	if _, err := l.cnitool("del", b, c); err != nil {
		t.Errorf("DEL of network b for a's container: %v, want success", err)
	}
	if !slices.Contains(links(t, l.SW), name) {
		t.Errorf("network b's DEL deleted %s, which network a's ADD made", name)
	}
	if _, ok := l.port(owner(a, r)); !ok {
		t.Errorf("network b's DEL removed a's port")
	}
	l.must("check", a, c)
	l.must("del", a, c)
	if slices.Contains(links(t, l.SW), name) {
		t.Errorf("a's own DEL left %s", name)
	}
}
