package lab

import "testing"

// TestEstablishedAll: an FRR restart's stream counts FRR back once every
// session of the site is up (Site.WaitSessions), read from `show bgp
// summary json`.
func TestEstablishedAll(t *testing.T) {
	for _, c := range []struct {
		name string
		out  string
		n    int
		want bool
	}{
		{"up", `{"l2VpnEvpn":{"routerId":"10.255.0.1","peers":{"192.0.2.2":{"state":"Established","pfxRcd":2}}}}`, 1, true},
		{"connecting", `{"l2VpnEvpn":{"peers":{"192.0.2.2":{"state":"Active"}}}}`, 1, false},
		{"one of two", `{"l2VpnEvpn":{"peers":{"192.0.2.2":{"state":"Established"},"192.0.2.3":{"state":"OpenSent"}}}}`, 2, false},
		{"a peer missing", `{"l2VpnEvpn":{"peers":{"192.0.2.2":{"state":"Established"}}}}`, 2, false},
		{"no BGP yet", `{}`, 1, false},
		{"a family without peers", `{"ipv4Unicast":{},"l2VpnEvpn":{"peers":{"192.0.2.2":{"state":"Established"}}}}`, 1, true},
		{"not JSON", `% BGP instance not found`, 1, false},
	} {
		if got := establishedAll(c.out, c.n); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
