package daemon

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// The neighbour table's static entries follow the model: written for a
// port that forwards with ip_guard and one allowed MAC, gone when its link
// goes down, back when it is up, gone when the keys go; neigh_suppress is
// the bridge's flag; neigh show names the port.
func TestNeighApply(t *testing.T) {
	w := newWorld(t)
	for _, n := range []string{"p1", "p2", "p3"} {
		w.sys.add(n, "veth")
	}
	cfg := func(bridgeKeys, p1 string) string {
		s := strings.Replace(bridges("br0=p1,p2"), "name = \"br0\"\n", "name = \"br0\"\n"+bridgeKeys, 1)
		return strings.Replace(s, "interface = \"p1\"\n", "interface = \"p1\"\n"+p1+"\n", 1)
	}
	bound := "ip_guard = true\nallowed_ips = [\"10.0.0.5\", \"fd00::5\"]\nlocked = true\nallowed_macs = [\"02:00:00:00:00:05\"]"
	table := func() string {
		es, _ := w.dp.Neighs()
		var out []string
		for _, e := range es {
			out = append(out, fmt.Sprintf("%d/%d %v=%v@%d", e.Bridge, e.VLAN, e.Addr, e.MAC, e.Slot))
		}
		return strings.Join(out, " ")
	}
	w.mustApply(cfg("neigh_suppress = true\n", bound))
	id, slot := w.d.bridges["br0"].id, w.port("br0", "p1").slot
	want := fmt.Sprintf("%[1]d/0 10.0.0.5=02:00:00:00:00:05@%[2]d %[1]d/0 fd00::5=02:00:00:00:00:05@%[2]d %[1]d/0 fe80::ff:fe00:5=02:00:00:00:00:05@%[2]d", id, slot)
	if got := table(); got != want {
		t.Errorf("table %q, want %q", got, want)
	}
	if !w.dp.bridges[id].NeighSuppress {
		t.Errorf("br0 written without neigh_suppress")
	}
	ns, err := w.d.neighShow("br0")
	if err != nil || len(ns) != 3 || ns[0].Port != "p1" || ns[0].Origin != "static" || ns[0].IP != "10.0.0.5" {
		t.Errorf("neigh show br0: %+v (%v)", ns, err)
	}
	if _, err := w.d.neighShow("nope"); err == nil {
		t.Errorf("neigh show of no bridge: no error")
	}

	w.sys.set("p1", func(l *Link) { l.Running = false })
	w.d.reconcile()
	if got := table(); got != "" {
		t.Errorf("table with p1's link down %q, want empty", got)
	}
	w.sys.set("p1", func(l *Link) { l.Running = true })
	w.d.reconcile()
	if got := table(); got != want {
		t.Errorf("table with p1 up again %q, want %q", got, want)
	}

	w.mustApply(cfg("", "ip_guard = true\nallowed_ips = [\"10.0.0.5\"]"))
	if got := table(); got != "" {
		t.Errorf("table without allowed_macs %q, want empty", got)
	}
	if w.dp.bridges[id].NeighSuppress {
		t.Errorf("br0 still written with neigh_suppress")
	}
	// A run-time port's keys make entries too.
	w.mustPortAdd("br0", "p3", "", "ip_guard=true", "allowed_ips=10.0.0.7", "locked=true", "allowed_macs=02:00:00:00:00:07")
	p3 := w.port("br0", "p3").slot
	if got := table(); !slices.Contains(strings.Fields(got), fmt.Sprintf("10.0.0.7=02:00:00:00:00:07@%d", p3)) {
		t.Errorf("table after port add %q, want 10.0.0.7 of p3", got)
	}
}
