package daemon

import (
	"errors"
	"net"
	"net/netip"
	"testing"

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

// TestOverlayNeighsReadFails: a read of the VNI's bridge's neighbours that
// fails (say, a netlink dump interrupted) loses none of the remote
// neighbours already taken: they stay until a read says otherwise.
func TestOverlayNeighsReadFails(t *testing.T) {
	w := newOvWorld(t)
	k := &neighKernel{ovKernel: w.k}
	ovl := newOverlayState(k, w.odp)
	ovl.nextHop, ovl.hasAddr = w.d.ovl.nextHop, w.d.ovl.hasAddr
	w.d.ovl = ovl
	w.sys.add("p1", "veth")
	w.sys.add("p2", "veth")
	w.mustApply(ovConfig)
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
