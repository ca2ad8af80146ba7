package overlay

import (
	"bytes"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/testutil"
)

// TestOverlayMTU: a frame whose L2 payload is longer than the overlay's
// MTU (1450) is dropped with reason overlay_mtu, counted on the overlay
// port, and never reaches the other host (no fragments in the underlay);
// one of 1450 crosses. A flood's copy to the overlay likewise, while its
// local copy (to h2, in the same VNI on a plain bridge) still goes. Site
// 1's hosts have an MTU of 1500 here: hosts that do not know the
// overlay's. On a plain bridge (the clone flood) and a VLAN-aware one
// (each copy tagged for its port, the forward's tag taken off).
func TestOverlayMTU(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, mode string
		la         layout
	}{{"plain", "tc", oneVNI}, {"vlan", "tc", vlanAware}, {"xdp-plain", "xdp", oneVNI}, {"xdp-vlan", "xdp", vlanAware}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			overlayMTUDrops(t, c.mode, c.la)
		})
	}
}

// overlayMTUDrops is TestOverlayMTU with site 1's hosts in mode hostMode
// and its layout la: at XDP, a unicast is checked against the vxlan
// device's MTU before it goes into the xdp way in, and a flood's copy in
// the devmap program.
func overlayMTUDrops(t *testing.T, hostMode string, la layout) {
	ss := newSitesMode(t, false, hostMode, alternate, la, bridgePerVNI)
	a, b := ss[0], ss[1]
	waitFlood(t, a, b)
	for i := 1; i <= 2; i++ {
		a.Host(i).MustExec(t, "ip", "link", "set", "dev", "eth0", "mtu", "1500")
	}
	pingFirst(t, a.Host(1), b.ip(1))
	drops := func() uint64 { return a.Stats("tvx1000").Drops["overlay_mtu"] }
	before := drops()

	// An IPv4 packet of 1450 bytes (ICMP payload 1422) crosses, unfragmented.
	ping := func(payload int) error {
		_, err := a.Host(1).Exec("ping", "-c", "2", "-i", "0.2", "-W", "2", "-M", "do", "-s", fmt.Sprint(payload), b.ip(1))
		return err
	}
	if err := ping(overlayMTU - 28); err != nil {
		t.Fatalf("ping of an IPv4 packet of %d bytes across: %v", overlayMTU, err)
	}
	if got := drops(); got != before {
		t.Errorf("overlay_mtu went from %d to %d for packets that fit", before, got)
	}
	// One byte more: both requests dropped at site 1's overlay port.
	if err := ping(overlayMTU - 27); err == nil {
		t.Errorf("a ping of an IPv4 packet of %d bytes crossed an overlay of MTU %d", overlayMTU+1, overlayMTU)
	}
	if got := drops(); got != before+2 {
		t.Errorf("overlay_mtu on tvx1000: %d after 2 packets of %d bytes, want %d", got, overlayMTU+1, before+2)
	}

	// A broadcast: its copy to the overlay is dropped when it is too long,
	// its local copy (to h2) goes all the same.
	local := a.Host(2).Capture(t, "eth0")
	remote := b.Host(1).Capture(t, "eth0")
	bcast := net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	send := func(marker string, payload int) {
		p := make([]byte, payload)
		copy(p, marker)
		if err := a.Host(1).RawSend("eth0", testutil.Frame(bcast, a.mac(1), 0x88b5, p)); err != nil {
			t.Fatal(err)
		}
	}
	marked := func(marker string) func([]byte) bool {
		return func(f []byte) bool { return len(f) > 14 && bytes.HasPrefix(f[14:], []byte(marker)) }
	}
	before = drops()
	send("mtu-fits", overlayMTU)
	send("mtu-over", overlayMTU+1)
	// h2 is in the VNI only on the plain bridge (on the VLAN-aware one it
	// is in VLAN 20, another VNI).
	want, wait := 1, 5*time.Second
	if la == vlanAware {
		want, wait = 0, time.Second
	}
	if n := local.WaitFor(marked("mtu-over"), want, wait); n != want {
		t.Errorf("site 1's h2 got %d copies of the broadcast too long for the overlay, want %d", n, want)
	}
	if n := remote.WaitFor(marked("mtu-fits"), 1, 5*time.Second); n != 1 {
		t.Errorf("site 2's h1 got %d copies of the broadcast of payload %d, want 1", n, overlayMTU)
	}
	if n := remote.WaitFor(marked("mtu-over"), 1, time.Second); n != 0 {
		t.Errorf("site 2's h1 got %d copies of the broadcast of payload %d, want none", n, overlayMTU+1)
	}
	if got := drops(); got != before+1 {
		t.Errorf("overlay_mtu on tvx1000: %d after a broadcast too long, want %d", got, before+1)
	}
}
