package frame

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// TestTimeCode: the one-byte codes of RFC 3376 4.1.1, decoded as the RFC
// does, give the time back (rounded down above 128).
func TestTimeCode(t *testing.T) {
	decode := func(c uint8) uint32 {
		if c < 128 {
			return uint32(c)
		}
		return (uint32(c&0x0f) | 0x10) << ((c>>4)&0x07 + 3)
	}
	for _, v := range []uint32{0, 1, 100, 125, 127, 128, 250, 1000, 3600, 31744, 40000} {
		got := decode(TimeCode(v))
		if got > v || (v <= 31744 && v-got >= max(1, v/16)) || (v > 31744 && got != 31744) {
			t.Errorf("TimeCode(%d) = %#x, which says %d", v, TimeCode(v), got)
		}
	}
}

// TestQueries: the querier's queries, tagged, as gopacket reads them.
func TestQueries(t *testing.T) {
	mac := net.HardwareAddr{0x02, 0, 0, 0, 0, 1}
	g4, g6 := netip.MustParseAddr("239.1.1.1"), netip.MustParseAddr("ff3e::1")
	ll := netip.MustParseAddr("fe80::1")
	for _, c := range []struct {
		name  string
		f     []byte
		group string
	}{
		{"IGMPv3 general", IGMPv3QueryOf([]Tag{CTag(10)}, mac, netip.IPv4Unspecified(), netip.Addr{}, 10*time.Second, 125*time.Second), "0.0.0.0"},
		{"IGMPv3 group", IGMPv3QueryOf(nil, mac, netip.IPv4Unspecified(), g4, time.Second, 300*time.Second), "239.1.1.1"},
		{"MLDv2 general", MLDv2Query([]Tag{CTag(10)}, mac, ll, netip.Addr{}, 10*time.Second, 125*time.Second), "::"},
		{"MLDv2 group", MLDv2Query(nil, mac, ll, g6, time.Second, 125*time.Second), "ff3e::1"},
	} {
		p := gopacket.NewPacket(c.f, layers.LayerTypeEthernet, gopacket.Default)
		if el := p.ErrorLayer(); el != nil {
			t.Errorf("%s: %v", c.name, el.Error())
			continue
		}
		if q, ok := p.Layer(layers.LayerTypeIGMP).(*layers.IGMP); ok {
			if q.Type != layers.IGMPMembershipQuery || q.GroupAddress.String() != c.group || q.RobustnessValue != 2 || q.MaxResponseTime == 0 {
				t.Errorf("%s: %+v", c.name, q)
			}
			continue
		}
		if q, ok := p.Layer(layers.LayerTypeMLDv2MulticastListenerQuery).(*layers.MLDv2MulticastListenerQueryMessage); ok {
			if q.MulticastAddress.String() != c.group || q.QueriersRobustnessVariable != 2 || q.QQI() != 125*time.Second {
				t.Errorf("%s: %+v", c.name, q)
			}
			continue
		}
		t.Errorf("%s: no query in %v", c.name, p)
	}
}
