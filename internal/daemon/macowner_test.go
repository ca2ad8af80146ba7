package daemon

import (
	"net"
	"strings"
	"testing"

	"github.com/trestle/trestle/internal/ctl"
)

// A bound address has one owner: port add's allowed_macs and fdb add are
// refused an address another port learned or holds by the CLI, with the
// holder named; the port that holds it may bind it.
func TestMACHolder(t *testing.T) {
	w := newWorld(t)
	for _, n := range []string{"p1", "p2", "p3", "p4"} {
		w.sys.add(n, "veth")
	}
	w.mustApply(bridges("br0=p1,p2"))
	b := w.d.bridges["br0"]
	p1 := w.port("br0", "p1")
	gw := "02:00:00:00:00:01"
	w.dp.learn(b.id, p1.slot, p1.ifindex, gw, 0)

	// The gateway, learned on the uplink p1: neither a new port's
	// allowed_macs nor a static on p2 takes it.
	_, err := w.portAdd("br0", "p3", "", "locked=true", "allowed_macs="+gw)
	if err == nil || !strings.Contains(err.Error(), `port "p1" holds it: learned there`) {
		t.Errorf("port add with p1's learned address: %v", err)
	}
	err = w.d.fdbAdd(ctl.Request{Bridge: "br0", MAC: gw, Port: "p2"})
	if err == nil || !strings.Contains(err.Error(), `port "p1" holds it: learned there`) {
		t.Errorf("fdb add of p1's learned address on p2: %v", err)
	}
	if e := w.dp.fdb[fdbKeyOf(b.id, 0, net.HardwareAddr{2, 0, 0, 0, 0, 1})]; e.Slot != p1.slot || e.Static {
		t.Errorf("the gateway's entry changed: %+v", e)
	}
	// On the port that learned it, the static is taken.
	if err := w.d.fdbAdd(ctl.Request{Bridge: "br0", MAC: gw, Port: "p1"}); err != nil {
		t.Fatalf("fdb add on the port that learned it: %v", err)
	}
	// A CLI static holds its address against the CLI and port add.
	err = w.d.fdbAdd(ctl.Request{Bridge: "br0", MAC: gw, Port: "p2"})
	if err == nil || !strings.Contains(err.Error(), `port "p1" holds it: a static entry from trestle fdb add`) {
		t.Errorf("fdb add over p1's CLI static: %v", err)
	}
	_, err = w.portAdd("br0", "p4", "", "locked=true", "allowed_macs="+gw)
	if err == nil || !strings.Contains(err.Error(), `port "p1" holds it: a static entry from trestle fdb add`) {
		t.Errorf("port add over p1's CLI static: %v", err)
	}
	// An address no one holds is bound.
	if _, err := w.portAdd("br0", "p3", "", "locked=true", "allowed_macs=02:00:00:00:00:03"); err != nil {
		t.Fatalf("port add of a free address: %v", err)
	}
}
