package daemon

import (
	"strings"
	"testing"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

// native_tagged and qinq (issue 29): written as the port's flags on a
// VLAN-aware bridge, given by show and port add, and qinq refused at run
// time on a bridge that is not VLAN-aware.
func TestVLANTagsApply(t *testing.T) {
	w := newWorld(t)
	for _, n := range []string{"p1", "p2", "p3", "p4", "p5"} {
		w.sys.add(n, "veth")
	}
	w.mustApply(`[[bridge]]
name = "br0"
[[bridge.port]]
interface = "p1"
trunk = [10, 20]
native = 10
native_tagged = true
[[bridge.port]]
interface = "p2"
vlan = 10
qinq = true
[[bridge]]
name = "br1"
[[bridge.port]]
interface = "p4"
`)
	p1, p2 := w.port("br0", "p1"), w.port("br0", "p2")
	if !p1.written.Policy.Has(tbpf.TrestleTrPortFlagsTR_PORT_NATIVE_TAGGED) || p1.written.Policy.Has(tbpf.TrestleTrPortFlagsTR_PORT_QINQ) || p1.written.PVID != 10 {
		t.Errorf("p1 written native_tagged %t qinq %t pvid %d, want a native_tagged trunk of native 10", p1.written.Policy.Has(tbpf.TrestleTrPortFlagsTR_PORT_NATIVE_TAGGED), p1.written.Policy.Has(tbpf.TrestleTrPortFlagsTR_PORT_QINQ), p1.written.PVID)
	}
	if !p2.written.Policy.Has(tbpf.TrestleTrPortFlagsTR_PORT_QINQ) || p2.written.Policy.Has(tbpf.TrestleTrPortFlagsTR_PORT_NATIVE_TAGGED) {
		t.Errorf("p2 written qinq %t native_tagged %t, want qinq only", p2.written.Policy.Has(tbpf.TrestleTrPortFlagsTR_PORT_QINQ), p2.written.Policy.Has(tbpf.TrestleTrPortFlagsTR_PORT_NATIVE_TAGGED))
	}
	st, err := w.d.status()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range st.Bridges {
		for _, p := range b.Ports {
			want := map[string][2]bool{"p1": {true, false}, "p2": {false, true}}[p.Interface]
			if p.NativeTagged != want[0] || p.QinQ != want[1] {
				t.Errorf("show: %s native_tagged %t qinq %t, want %t %t", p.Interface, p.NativeTagged, p.QinQ, want[0], want[1])
			}
		}
	}

	e, err := w.portAdd("br0", "p3", "", "qinq=true")
	if err != nil {
		t.Fatalf("port add qinq=true: %v", err)
	}
	if !e.QinQ || e.VLAN != 1 || !w.port("br0", "p3").written.Policy.Has(tbpf.TrestleTrPortFlagsTR_PORT_QINQ) {
		t.Errorf("port add answered qinq %t vlan %d (written %t), want a qinq access port of VLAN 1", e.QinQ, e.VLAN, w.port("br0", "p3").written.Policy.Has(tbpf.TrestleTrPortFlagsTR_PORT_QINQ))
	}
	_, err = w.portAdd("br1", "p5", "", "qinq=true")
	if err == nil || !strings.Contains(err.Error(), `qinq: is for access ports of a VLAN-aware bridge, and bridge "br1" is not one`) {
		t.Errorf("port add qinq=true on a bridge that is not VLAN-aware: %v", err)
	}
	if _, ok := w.list("br1")["p5"]; ok {
		t.Errorf("a refused port was added")
	}
}
