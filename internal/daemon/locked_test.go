package daemon

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/datapath"
)

// Locked ports (issue 29): the port written locked, its allowed_macs
// written as its static entries and taken out with them, its learned
// entries flushed when it becomes locked, and addresses bound to one port
// refused to another and to the CLI.
func TestLockedPortApply(t *testing.T) {
	w := newWorld(t)
	for _, n := range []string{"p1", "p2", "p3"} {
		w.sys.add(n, "veth")
	}
	cfg := func(p1, p2 string) string {
		s := strings.Replace(bridges("br0=p1,p2"), "interface = \"p1\"\n", "interface = \"p1\"\n"+p1+"\n", 1)
		return strings.Replace(s, "interface = \"p2\"\n", "interface = \"p2\"\n"+p2+"\n", 1)
	}
	entries := func() []string {
		var out []string
		for _, e := range w.dp.fdb {
			out = append(out, fmt.Sprintf("%s/%d@%d static=%t", e.MAC, e.VLAN, e.Slot, e.Static))
		}
		slices.Sort(out)
		return out
	}
	w.mustApply(cfg(`locked = true`+"\n"+`allowed_macs = ["02:00:00:00:00:01", "02:00:00:00:00:02"]`, ""))
	p1, p2 := w.port("br0", "p1"), w.port("br0", "p2")
	if !p1.written.Policy.Has(flagLocked) || p2.written.Policy.Has(flagLocked) {
		t.Errorf("written locked: p1 %t p2 %t, want true false", p1.written.Policy.Has(flagLocked), p2.written.Policy.Has(flagLocked))
	}
	want := []string{fmt.Sprintf("02:00:00:00:00:01/0@%d static=true", p1.slot), fmt.Sprintf("02:00:00:00:00:02/0@%d static=true", p1.slot)}
	if got := entries(); !slices.Equal(got, want) {
		t.Errorf("entries %v, want %v", got, want)
	}

	// p2 learns; locked by a reload, its learned entries go, statics stay.
	b := w.d.bridges["br0"]
	w.dp.learn(b.id, p2.slot, p2.ifindex, "02:00:00:00:00:33", 0)
	w.dp.fdb[fdbKeyOf(b.id, 0, net.HardwareAddr{2, 0, 0, 0, 0, 0x44})] = datapath.FDBEntry{Bridge: b.id, MAC: net.HardwareAddr{2, 0, 0, 0, 0, 0x44}, Slot: p2.slot, Ifindex: uint32(p2.ifindex), Static: true}
	w.mustApply(cfg(`locked = true`+"\n"+`allowed_macs = ["02:00:00:00:00:01"]`, `locked = true`))
	p2 = w.port("br0", "p2")
	if !p2.written.Policy.Has(flagLocked) {
		t.Errorf("p2 not written locked")
	}
	// 02:..:02 left p1's allowed_macs: its static went too.
	want = []string{fmt.Sprintf("02:00:00:00:00:01/0@%d static=true", p1.slot), fmt.Sprintf("02:00:00:00:00:44/0@%d static=true", p2.slot)}
	if got := entries(); !slices.Equal(got, want) {
		t.Errorf("after p2 locked: entries %v, want %v", got, want)
	}

	// The CLI may not take or drop an address a port is bound to.
	err := w.d.fdbAdd(ctl.Request{Bridge: "br0", MAC: "02:00:00:00:00:01", Port: "p2"})
	if err == nil || !strings.Contains(err.Error(), `bound to locked port "p1" by its allowed_macs`) {
		t.Errorf("fdb add of p1's allowed address on p2: %v", err)
	}
	// Nor may a run-time port.
	_, err = w.portAdd("br0", "p3", "", "locked=true", "allowed_macs=02:00:00:00:00:01")
	if err == nil || !strings.Contains(err.Error(), `02:00:00:00:00:01 is bound to port "p1" already`) {
		t.Errorf("port add with p1's allowed address: %v", err)
	}
	e, err := w.portAdd("br0", "p3", "", "locked=true", "allowed_macs=02:00:00:00:00:03")
	if err != nil {
		t.Fatalf("port add, locked: %v", err)
	}
	if !e.Locked || !slices.Equal(e.AllowedMACs, []string{"02:00:00:00:00:03"}) {
		t.Errorf("port add answered locked %t allowed %v", e.Locked, e.AllowedMACs)
	}
	p3 := w.port("br0", "p3")
	if _, ok := w.dp.fdb[fdbKeyOf(b.id, 0, net.HardwareAddr{2, 0, 0, 0, 0, 3})]; !ok || !p3.written.Policy.Has(flagLocked) {
		t.Errorf("run-time port's allowed address not in the table (%v) or the port not locked (%t)", entries(), p3.written.Policy.Has(flagLocked))
	}
}
