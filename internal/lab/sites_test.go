package lab

import (
	"os"
	"strings"
	"testing"
)

// TestLinuxVNIDoc: docs/overlay.md's Linux host of a mixed fabric is set
// up with the commands LinuxVNI gives (the overlay kind's stand-in and
// tests/overlay's Linux site), in their order, for the doc's VNI 1000 on
// host C: the doc cannot drift from what is tested.
func TestLinuxVNIDoc(t *testing.T) {
	b, err := os.ReadFile("../../docs/overlay.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n## A mixed fabric\n")
	if !ok {
		t.Fatal(`docs/overlay.md has no "## A mixed fabric"`)
	}
	if i := strings.Index(sec, "\n## "); i >= 0 {
		sec = sec[:i]
	}
	var want strings.Builder
	for _, c := range (LinuxVNI{VNI: 1000, Bridge: "br0", VXLAN: "vxlan1000", MTU: 1450, Ports: []string{"port-h1"}}).Commands("10.255.0.3") {
		want.WriteString(strings.Join(c, " ") + "\n")
	}
	if !strings.Contains(sec, "```sh\n"+want.String()+"```\n") {
		t.Errorf("docs/overlay.md, \"A mixed fabric\": no block of the Linux host's commands as LinuxVNI gives them:\n%s", want.String())
	}
}

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
