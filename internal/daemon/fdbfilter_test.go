package daemon

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/datapath"
)

// TestFDBFilters: fdb show and fdb flush take the entries of a port and of
// a VLAN (0: untagged), in one bridge or in every one; flush leaves static
// entries; a port that is not there is an error that names it.
func TestFDBFilters(t *testing.T) {
	d, tbl := bigTable(t, 0) // br0 (id 1): p1 slot 1, p2 slot 2; br1 (id 2): q1 slot 3
	add := func(bridge, vlan, slot uint16, last byte, static bool) {
		mac := net.HardwareAddr{2, 0, 0, 0, 0, last}
		tbl.fdb[fdbKeyOf(bridge, vlan, mac)] = datapath.FDBEntry{Bridge: bridge, VLAN: vlan, MAC: mac, Slot: slot, Static: static, Age: time.Second}
	}
	add(1, 10, 1, 1, false) // br0 p1 VLAN 10
	add(1, 20, 1, 2, false) // br0 p1 VLAN 20
	add(1, 10, 2, 3, false) // br0 p2 VLAN 10
	add(1, 10, 2, 4, true)  // br0 p2 VLAN 10, static
	add(2, 0, 3, 5, false)  // br1 q1 untagged
	vlan := func(v uint16) *uint16 { return &v }
	show := func(req ctl.Request) string {
		t.Helper()
		es, err := d.fdbShowOf(req)
		if err != nil {
			t.Fatalf("fdb show %+v: %v", req, err)
		}
		var last []string
		for _, e := range es {
			last = append(last, e.MAC[len(e.MAC)-2:])
		}
		return strings.Join(last, " ")
	}
	for _, c := range []struct {
		req  ctl.Request
		want string
	}{
		{ctl.Request{}, "01 03 04 02 05"}, // by bridge, VLAN and MAC
		{ctl.Request{Bridge: "br0", Port: "p1"}, "01 02"},
		{ctl.Request{OnlyVLAN: vlan(10)}, "01 03 04"},
		{ctl.Request{Bridge: "br0", Port: "p2", OnlyVLAN: vlan(10)}, "03 04"},
		{ctl.Request{Port: "q1"}, "05"},
		{ctl.Request{OnlyVLAN: vlan(0)}, "05"},
		{ctl.Request{Bridge: "br0", OnlyVLAN: vlan(0)}, ""},
	} {
		if got := show(c.req); got != c.want {
			t.Errorf("fdb show %+v: %q, want %q", c.req, got, c.want)
		}
	}
	for _, c := range []struct {
		req  ctl.Request
		want string
	}{
		{ctl.Request{Bridge: "br0", Port: "q1"}, `bridge "br0" has no port "q1"`},
		{ctl.Request{Port: "nosuch"}, `no bridge has a port "nosuch"`},
		{ctl.Request{OnlyVLAN: vlan(4095)}, "vlan 4095: a VLAN is 0 (untagged) to 4094"},
		{ctl.Request{Bridge: "br9"}, `no bridge "br9"`},
	} {
		if _, err := d.fdbShowOf(c.req); err == nil || err.Error() != c.want {
			t.Errorf("fdb show %+v: %v, want %q", c.req, err, c.want)
		}
		if _, err := d.fdbFlush(c.req); err == nil || err.Error() != c.want {
			t.Errorf("fdb flush %+v: %v, want %q", c.req, err, c.want)
		}
	}
	if show(ctl.Request{}) != "01 03 04 02 05" {
		t.Fatal("a refused flush removed entries")
	}

	for _, c := range []struct {
		req     ctl.Request
		removed int
		left    string
	}{
		{ctl.Request{Bridge: "br0", Port: "p2", OnlyVLAN: vlan(10)}, 1, "01 04 02 05"}, // the static entry stays
		{ctl.Request{Bridge: "br0", OnlyVLAN: vlan(20)}, 1, "01 04 05"},
		{ctl.Request{Bridge: "br1", OnlyVLAN: vlan(10)}, 0, "01 04 05"},
		{ctl.Request{Bridge: "br0", Port: "p1"}, 1, "04 05"},
	} {
		res, err := d.fdbFlush(c.req)
		if err != nil || res.Removed != c.removed {
			t.Errorf("fdb flush %+v: removed %d, %v; want %d", c.req, res.Removed, err, c.removed)
		}
		if got := show(ctl.Request{}); got != c.left {
			t.Errorf("after fdb flush %+v: %q, want %q", c.req, got, c.left)
		}
	}
}
