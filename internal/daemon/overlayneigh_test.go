package daemon

import (
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/datapath"
	"github.com/trestle/trestle/internal/overlay"
)

// neighKernel is the overlay's fake kernel with IP neighbours on the VNIs'
// bridges: zebra's remote ones, and a read that fails when err is set.
type neighKernel struct {
	*ovKernel
	remote []overlay.IPNeigh
	err    error
}

func (k *neighKernel) IPNeighs(int) ([]overlay.IPNeigh, error) {
	if k.err != nil {
		return nil, k.err
	}
	return k.remote, nil
}

func (k *neighKernel) SetIPNeigh(int, netip.Addr, net.HardwareAddr) error { return nil }
func (k *neighKernel) DelIPNeigh(int, netip.Addr) error                   { return nil }

// neighWorld gives w's daemon an overlay on kernel k, and applies
// ovConfig on two veth ports.
func (w *ovWorld) neighWorld(k overlay.Kernel) {
	ovl := newOverlayState(k, w.odp)
	ovl.nextHop, ovl.hasAddr = w.d.ovl.nextHop, w.d.ovl.hasAddr
	w.d.ovl = ovl
	w.sys.add("p1", "veth")
	w.sys.add("p2", "veth")
	w.mustApply(ovConfig)
}

// TestOverlayNeighsReadFails: a read of the VNI's bridge's neighbours that
// fails (say, a netlink dump interrupted) loses none of the remote
// neighbours already taken: they stay until a read says otherwise.
func TestOverlayNeighsReadFails(t *testing.T) {
	w := newOvWorld(t)
	k := &neighKernel{ovKernel: w.k}
	w.neighWorld(k)
	mac, _ := net.ParseMAC("02:00:00:00:00:77")
	ip := netip.MustParseAddr("fd00::77")
	k.remote = []overlay.IPNeigh{{IP: ip, MAC: mac, Remote: true}}
	w.d.syncOverlayNeighs()
	if got := w.d.ovl.neighs[1000][ip]; got.String() != mac.String() {
		t.Fatalf("remote neighbours after a read: %v, want %s at %s", w.d.ovl.neighs, ip, mac)
	}
	k.err = errors.New("dump interrupted")
	w.d.syncOverlayNeighs()
	if got := w.d.ovl.neighs[1000][ip]; got.String() != mac.String() {
		t.Errorf("remote neighbours after a read that failed: %v, want %s at %s kept", w.d.ovl.neighs, ip, mac)
	}
	k.err, k.remote = nil, nil
	w.d.syncOverlayNeighs()
	if len(w.d.ovl.neighs[1000]) != 0 {
		t.Errorf("remote neighbours after a read with none: %v", w.d.ovl.neighs)
	}
}

// localKernel keeps the local neighbours written on the VNIs' bridges, as
// the kernel does, and gives them back with zebra's remote ones.
type localKernel struct {
	*neighKernel
	local map[netip.Addr]net.HardwareAddr
}

func (k *localKernel) IPNeighs(br int) ([]overlay.IPNeigh, error) {
	out, err := k.neighKernel.IPNeighs(br)
	for ip, mac := range k.local {
		out = append(out, overlay.IPNeigh{IP: ip, MAC: mac})
	}
	return out, err
}

func (k *localKernel) SetIPNeigh(_ int, ip netip.Addr, mac net.HardwareAddr) error {
	k.local[ip] = mac
	return nil
}

func (k *localKernel) DelIPNeigh(_ int, ip netip.Addr) error {
	delete(k.local, ip)
	return nil
}

// TestOverlayLearnedNeighs: a neighbour the bridge learned in the overlay
// port's VLAN is given to FRR (the VNI's bridge) as a static one is, and
// taken back when it goes.
func TestOverlayLearnedNeighs(t *testing.T) {
	w := newOvWorld(t)
	k := &localKernel{neighKernel: &neighKernel{ovKernel: w.k}, local: map[netip.Addr]net.HardwareAddr{}}
	w.neighWorld(k)
	p := w.d.overlayPorts()[0]
	mac, _ := net.ParseMAC("02:00:00:00:00:42")
	ip := netip.MustParseAddr("10.0.0.42")
	key := datapath.NeighKey{Bridge: p.bridge.id, VLAN: overlayVLAN(p), Addr: ip}
	w.d.neighs.set(key, &learnedNeigh{mac: mac, slot: 1, seen: time.Now()})
	w.d.syncOverlayNeighs()
	if got := k.local[ip]; got.String() != mac.String() {
		t.Fatalf("the VNI's bridge's local neighbours %v, want %s at %s", k.local, ip, mac)
	}
	w.d.neighs.drop(key)
	w.d.syncOverlayNeighs()
	if _, ok := k.local[ip]; ok {
		t.Errorf("the VNI's bridge still has %s after it went: %v", ip, k.local)
	}
}
