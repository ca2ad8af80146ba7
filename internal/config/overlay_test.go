package config

import (
	"net/netip"
	"testing"

	"github.com/trestle/trestle/internal/mode"
)

// TestParseOverlay reads overlay ports: the device they are, their mode,
// learning and defaults, and the VTEP.
func TestParseOverlay(t *testing.T) {
	cfg, err := Parse("t.toml", doc(
		`[daemon]`, `vtep = "192.0.2.1"`,
		`[[bridge]]`, `name = "br0"`,
		`[[bridge.port]]`, `interface = "veth-a"`, `vlan = 10`,
		`[[bridge.port]]`, `interface = "veth-b"`, `trunk = [20]`,
		`[[bridge.port]]`, `vxlan = 1000`, `vlan = 10`,
		`[[bridge.port]]`, `vxlan = 16777215`, `vlan = 20`, `mtu = 1400`, `dstport = 4790`, `mode = "tc"`,
		`[[bridge]]`, `name = "br1"`,
		`[[bridge.port]]`, `interface = "veth-c"`,
		`[[bridge.port]]`, `vxlan = 1`))
	if err != nil {
		t.Fatal(err)
	}
	if want := netip.MustParseAddr("192.0.2.1"); cfg.Daemon.VTEP != want {
		t.Errorf("vtep %v, want %v", cfg.Daemon.VTEP, want)
	}
	a, b, c := cfg.Bridges[0].Ports[2], cfg.Bridges[0].Ports[3], cfg.Bridges[1].Ports[1]
	for _, tc := range []struct {
		p            Port
		vni          uint32
		iface        string
		vlan         uint16
		mtu, dstport int
	}{
		{a, 1000, "tvx1000", 10, 0, DefaultDstPort},
		{b, 16777215, "tvx16777215", 20, 1400, 4790},
		{c, 1, "tvx1", 0, 0, DefaultDstPort},
	} {
		p := tc.p
		if !p.IsOverlay() || p.VXLAN != tc.vni || p.Interface != tc.iface || p.PortName() != tc.iface || p.VLAN != tc.vlan ||
			p.MTU != tc.mtu || p.DstPort != tc.dstport || p.Mode != mode.TC || !p.Has(flagNoLearn) {
			t.Errorf("overlay port %+v, want vni %d device %s vlan %d mtu %d dstport %d, tc, no learning", p, tc.vni, tc.iface, tc.vlan, tc.mtu, tc.dstport)
		}
		if len(tc.iface) > 15 {
			t.Errorf("device name %q is longer than IFNAMSIZ-1", tc.iface)
		}
	}
	if got := cfg.OverlayPorts(); len(got) != 3 || got[0].Bridge != "br0" || got[2].Bridge != "br1" || got[2].Port.VXLAN != 1 {
		t.Errorf("OverlayPorts %+v", got)
	}
	if cfg.Bridges[0].Ports[0].IsOverlay() {
		t.Error("an interface port is an overlay port")
	}
}

// TestParseOverlayErrors has a case per overlay rule, with the exact
// messages.
func TestParseOverlayErrors(t *testing.T) {
	vtep := []string{`[daemon]`, `vtep = "192.0.2.1"`}
	with := func(lines ...string) []byte { return doc(append(append([]string{}, vtep...), lines...)...) }
	for _, tc := range []struct {
		name string
		data []byte
		want []string
	}{
		{"no vtep", doc(`[[bridge]]`, `name = "br0"`, `[[bridge.port]]`, `interface = "a"`, `[[bridge.port]]`, `vxlan = 1000`), []string{
			`t.toml:6: daemon.vtep: is required: bridge br0 has an overlay port (vxlan) at line 6, and FRR would otherwise silently use its router-id`}},
		{"vtep not an address", doc(`[daemon]`, `vtep = "host-a"`, `[[bridge]]`, `name = "br0"`, `[[bridge.port]]`, `interface = "a"`), []string{
			`t.toml:2: daemon.vtep: "host-a" is not an IPv4 or IPv6 address`}},
		{"vtep multicast", doc(`[daemon]`, `vtep = "239.1.1.1"`, `[[bridge]]`, `name = "br0"`, `[[bridge.port]]`, `interface = "a"`), []string{
			`t.toml:2: daemon.vtep: "239.1.1.1" is not a unicast address a VTEP can have`}},
		{"vni zero", with(`[[bridge]]`, `name = "br0"`, `[[bridge.port]]`, `vxlan = 0`), []string{
			`t.toml:6: bridge[0].port[0].vxlan: 0 is out of range 1..16777215`}},
		{"vni too big", with(`[[bridge]]`, `name = "br0"`, `[[bridge.port]]`, `vxlan = 16777216`), []string{
			`t.toml:6: bridge[0].port[0].vxlan: 16777216 is out of range 1..16777215`}},
		{"vni twice", with(`[[bridge]]`, `name = "br0"`, `[[bridge.port]]`, `vxlan = 7`,
			`[[bridge]]`, `name = "br1"`, `[[bridge.port]]`, `vxlan = 7`), []string{
			`t.toml:10: bridge[1].port[0].vxlan: VNI 7 is also an overlay port of bridge br0 at line 6`}},
		{"vxlan and interface", with(`[[bridge]]`, `name = "br0"`, `[[bridge.port]]`, `vxlan = 7`, `interface = "a"`), []string{
			`t.toml:7: bridge[0].port[0].interface: conflicts with vxlan at line 6: an overlay port is the VXLAN device the daemon creates for its VNI (interface)`}},
		{"device name taken", with(`[[bridge]]`, `name = "br0"`, `[[bridge.port]]`, `interface = "tvx7"`, `[[bridge]]`, `name = "br1"`, `[[bridge.port]]`, `vxlan = 7`), []string{
			`t.toml:10: bridge[1].port[0].vxlan: the overlay port's device "tvx7" is also a port of bridge br0 at line 6`}},
		{"an end of a way in", with(`[[bridge]]`, `name = "br0"`, `[[bridge.port]]`, `interface = "ttp7"`, `[[bridge.port]]`, `interface = "ttr07"`), []string{
			`t.toml:6: bridge[0].port[0].interface: "ttp7" is the name of an end of an overlay VNI's xdp way in, which the daemon makes (docs/overlay.md): not a port`}},
		{"an overlay object", with(`[[bridge]]`, `name = "br0"`, `[[bridge.port]]`, `interface = "tap7"`, `[[bridge.port]]`, `interface = "tbr7"`,
			`[[bridge.port]]`, `interface = "tap8"`, `[[bridge]]`, `name = "br1"`, `[[bridge.port]]`, `vxlan = 7`), []string{
			`t.toml:6: bridge[0].port[0].interface: "tap7" is VNI 7's advertise port's peer, which the daemon makes for the overlay port of bridge br1 at line 14 (docs/overlay.md): not a port`,
			`t.toml:8: bridge[0].port[1].interface: "tbr7" is VNI 7's kernel bridge, which the daemon makes for the overlay port of bridge br1 at line 14 (docs/overlay.md): not a port`}},
		{"xdp", with(`[[bridge]]`, `name = "br0"`, `[[bridge.port]]`, `vxlan = 7`, `mode = "xdp"`), []string{
			`t.toml:7: bridge[0].port[0].mode: an overlay port attaches at tc (the kernel encapsulates); "xdp" is not for it`}},
		{"learning", with(`[[bridge]]`, `name = "br0"`, `[[bridge.port]]`, `vxlan = 7`, `learning = true`), []string{
			`t.toml:7: bridge[0].port[0].learning: an overlay port learns its remote addresses from the control plane (FRR), never from frames; leave learning out`}},
		{"mtu on an interface", with(`[[bridge]]`, `name = "br0"`, `[[bridge.port]]`, `interface = "a"`, `mtu = 1400`, `dstport = 4789`), []string{
			`t.toml:7: bridge[0].port[0].mtu: is for overlay ports (vxlan) only`,
			`t.toml:8: bridge[0].port[0].dstport: is for overlay ports (vxlan) only`}},
		{"mtu range", with(`[[bridge]]`, `name = "br0"`, `[[bridge.port]]`, `vxlan = 7`, `mtu = 20`), []string{
			`t.toml:7: bridge[0].port[0].mtu: 20 is out of range 68..65535`}},
		{"vlan carried by no other port", with(`[[bridge]]`, `name = "br0"`, `[[bridge.port]]`, `interface = "a"`, `vlan = 10`, `[[bridge.port]]`, `vxlan = 7`, `vlan = 20`), []string{
			`t.toml:10: bridge[0].port[1].vlan: VLAN 20 is carried by no other port of bridge br0: the overlay would join nothing to it`}},
		{"two vnis one vlan", with(`[[bridge]]`, `name = "br0"`, `[[bridge.port]]`, `interface = "a"`, `vlan = 10`,
			`[[bridge.port]]`, `vxlan = 7`, `vlan = 10`, `[[bridge.port]]`, `vxlan = 8`, `vlan = 10`), []string{
			`t.toml:12: bridge[0].port[2].vxlan: VLAN 10 of bridge br0 has an overlay port already, at line 9: one VNI a VLAN`}},
		{"two vnis plain bridge", with(`[[bridge]]`, `name = "br0"`, `[[bridge.port]]`, `interface = "a"`,
			`[[bridge.port]]`, `vxlan = 7`, `[[bridge.port]]`, `vxlan = 8`), []string{
			`t.toml:10: bridge[0].port[2].vxlan: bridge br0 has an overlay port already, at line 8: a bridge that is not VLAN-aware carries one VNI; give each overlay port a vlan`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkErrors(t, tc.data, tc.want)
		})
	}
}
