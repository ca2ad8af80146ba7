package mode

import (
	"errors"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, s := range Names {
		if m, err := Parse(s); err != nil || m.String() != s {
			t.Errorf("Parse(%q) = %q, %v", s, m, err)
		}
	}
	if _, err := Parse("fast"); err == nil || !strings.Contains(err.Error(), "auto, xdp, tc") {
		t.Errorf("Parse(fast): %v", err)
	}
}

var (
	veth      = Link{Name: "v", Type: "veth", PeerFixable: true}
	vethStuck = Link{Name: "v", Type: "veth", PeerProblem: "no namespace has it"}
	tap       = Link{Name: "t", Type: "tuntap", TakesRedirects: true}
	nic       = Link{Name: "eth1", Type: "device", Physical: true, NativeXDP: true, TakesRedirects: true}
	// A NIC whose driver has no XDP at all: not native, no ndo_xdp_xmit.
	oldNIC   = Link{Name: "eth2", Type: "device", Physical: true}
	lbridge  = Link{Name: "br9", Type: "bridge"}
	xdpPorts = Bridge{XDPPorts: []string{"eth1"}}
)

func TestDecide(t *testing.T) {
	for _, c := range []struct {
		name       string
		configured Mode
		l          Link
		b          Bridge
		want       Mode // "" for not attached
		fixPeer    bool
		csumOff    bool
		why        string
	}{
		{"auto veth", Auto, veth, Bridge{}, TC, false, false, "veth peer is a host"},
		{"auto tap", Auto, tap, Bridge{}, TC, false, false, "TAP device"},
		{"auto nic", Auto, nic, Bridge{}, XDP, false, false, "physical NIC"},
		{"auto nic without native XDP", Auto, oldNIC, Bridge{}, TC, false, false, "no native XDP"},
		{"auto nic beside a port that takes no redirects", Auto, nic, Bridge{NoRedirects: []string{"br9"}}, TC, false, false, `"br9" of this bridge`},
		{"auto bridge device", Auto, lbridge, Bridge{}, TC, false, false, "bridge device"},
		{"xdp veth prepares its peer", XDP, veth, Bridge{}, XDP, true, true, "configured"},
		{"xdp veth whose peer is out of reach", XDP, vethStuck, Bridge{}, "", false, false, "no namespace has it"},
		{"tc veth beside xdp ports gets GRO on its peer", TC, veth, xdpPorts, TC, true, false, "configured"},
		// Its peer has GRO on already (the daemon's own fix, kept).
		{"tc veth that already takes redirects", TC, Link{Type: "veth", TakesRedirects: true}, xdpPorts, TC, true, false, "configured"},
		{"tc tap beside xdp ports", Auto, tap, xdpPorts, TC, false, false, "TAP"},
		// Defect 1: a NIC at tc whose driver has no ndo_xdp_xmit cannot
		// take the xdp ports' redirects, whatever its device type says.
		{"nic without ndo_xdp_xmit beside xdp ports", Auto, oldNIC, xdpPorts, "", false, false, "no ndo_xdp_xmit"},
		{"tc nic without ndo_xdp_xmit beside xdp ports", TC, oldNIC, xdpPorts, "", false, false, "no ndo_xdp_xmit"},
		{"bridge device beside xdp ports", TC, lbridge, xdpPorts, "", false, false, `use mode = "tc" on those`},
		{"veth stuck beside xdp ports", TC, vethStuck, xdpPorts, "", false, false, "cannot be prepared"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := Decide(c.configured, c.l, c.b)
			if d.Mode != c.want || d.FixPeer != c.fixPeer || d.PeerCsumOff != c.csumOff || !strings.Contains(d.Why, c.why) {
				t.Errorf("Decide = %+v, want mode %q fixPeer %v csumOff %v, why containing %q", d, c.want, c.fixPeer, c.csumOff, c.why)
			}
		})
	}
}

func TestFallback(t *testing.T) {
	refused := errors.New("operation not supported")
	if d := Fallback(refused, nic, Bridge{}); d.Mode != TC || !strings.Contains(d.Why, "operation not supported") {
		t.Errorf("fallback of a NIC: %+v", d)
	}
	// A NIC that refused XDP and has no ndo_xdp_xmit cannot stay in a
	// bridge with XDP ports (defect 1: it used to be taken as able to).
	if d := Fallback(refused, oldNIC, xdpPorts); d.Mode != "" {
		t.Errorf("fallback of a NIC without ndo_xdp_xmit beside xdp ports: %+v, want not attached", d)
	}
}
