package frrconf

import (
	"strings"
	"testing"
)

func TestBGPd(t *testing.T) {
	ibgp := BGPd(Site{Name: "a", ASN: 65000, RouterID: "10.0.0.1", Peers: []Peer{{"192.0.2.2", 65000}, {"192.0.2.3", 65000}}})
	want := `hostname bgpd-a
router bgp 65000
 bgp router-id 10.0.0.1
 no bgp default ipv4-unicast
 bgp graceful-restart
 bgp graceful-restart preserve-fw-state
 neighbor 192.0.2.2 remote-as 65000
 neighbor 192.0.2.2 timers 3 9
 neighbor 192.0.2.2 timers connect 1
 neighbor 192.0.2.2 advertisement-interval 0
 neighbor 192.0.2.3 remote-as 65000
 neighbor 192.0.2.3 timers 3 9
 neighbor 192.0.2.3 timers connect 1
 neighbor 192.0.2.3 advertisement-interval 0
 address-family l2vpn evpn
  neighbor 192.0.2.2 activate
  neighbor 192.0.2.3 activate
  advertise-all-vni
 exit-address-family
`
	if ibgp != want {
		t.Errorf("iBGP:\n%s\nwant:\n%s", ibgp, want)
	}
	ebgp := BGPd(Site{Name: "1", ASN: 65001, RouterID: "10.0.0.1", Peers: []Peer{{"192.0.2.2", 65002}}})
	for _, line := range []string{" no bgp ebgp-requires-policy\n", " neighbor 192.0.2.2 remote-as 65002\n", "  autort rfc8365-compatible\n"} {
		if !strings.Contains(ebgp, line) {
			t.Errorf("eBGP lacks %q:\n%s", line, ebgp)
		}
	}
	if strings.Contains(ibgp, "rfc8365") || strings.Contains(ibgp, "ebgp-requires-policy") {
		t.Error("iBGP has eBGP's lines")
	}
	if z := Zebra(Site{Name: "a"}); z != "hostname zebra-a\n" {
		t.Errorf("zebra: %q", z)
	}
}
