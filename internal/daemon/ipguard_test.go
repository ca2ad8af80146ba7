package daemon

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// IP guard (issue 29): the port written with ip_guard and its addresses
// (allowed_ips and the EUI-64 link-local address of a locked port's
// allowed_macs), rewritten when they change and cleared when it goes off;
// a run-time port takes the keys and answers them.
func TestIPGuardApply(t *testing.T) {
	w := newWorld(t)
	for _, n := range []string{"p1", "p2", "p3", "p4"} {
		w.sys.add(n, "veth")
	}
	cfg := func(p1 string) string {
		return strings.Replace(bridges("br0=p1,p2"), "interface = \"p1\"\n", "interface = \"p1\"\n"+p1+"\n", 1)
	}
	written := func(name string) string {
		p := w.port("br0", name).written
		return fmt.Sprintf("%t %v", p.IPGuard(), p.Policy.GuardIPs)
	}
	w.mustApply(cfg("ip_guard = true\nallowed_ips = [\"fd00::5\", \"10.0.0.5\"]\nlocked = true\nallowed_macs = [\"02:00:00:00:00:05\"]"))
	if got, want := written("p1"), "true [10.0.0.5 fd00::5 fe80::ff:fe00:5]"; got != want {
		t.Errorf("p1 written %s, want %s", got, want)
	}
	if got := written("p2"); got != "false []" {
		t.Errorf("p2 written %s, want no ip_guard", got)
	}
	w.mustApply(cfg("ip_guard = true\nallowed_ips = [\"10.0.0.6\"]"))
	if got, want := written("p1"), "true [10.0.0.6]"; got != want {
		t.Errorf("p1 after its addresses changed: %s, want %s", got, want)
	}
	w.mustApply(cfg(""))
	if got := written("p1"); got != "false []" {
		t.Errorf("p1 after ip_guard off: %s", got)
	}

	e, err := w.portAdd("br0", "p3", "", "ip_guard=true", "allowed_ips=10.0.0.7,fd00::7")
	if err != nil {
		t.Fatalf("port add with ip_guard: %v", err)
	}
	if !e.IPGuard || !slices.Equal(e.AllowedIPs, []string{"10.0.0.7", "fd00::7"}) {
		t.Errorf("port add answered ip_guard %t allowed_ips %v", e.IPGuard, e.AllowedIPs)
	}
	if got, want := written("p3"), "true [10.0.0.7 fd00::7]"; got != want {
		t.Errorf("run-time p3 written %s, want %s", got, want)
	}
	if _, err := w.portAdd("br0", "p4", "", "ip_guard=true"); err == nil || !strings.Contains(err.Error(), "ip_guard: binds the port to its addresses, and it lists none") {
		t.Errorf("port add of ip_guard without addresses: %v", err)
	}
}
