package ctl

import (
	"encoding/json"
	"reflect"
	"testing"
)

// Counters are fields of the port's object, in the daemon's order, and
// come back in that order.
func TestCountsJSON(t *testing.T) {
	p := PortStats{Bridge: "br0", Port: "eth1", Mode: "xdp",
		Counters: Counts{{"rx_packets", 3}, {"rx_bytes", 180}, {"flooded", 1}},
		Drops:    map[string]uint64{"runt": 2}}
	b, err := json.Marshal([]PortStats{p})
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"bridge":"br0","port":"eth1","mode":"xdp","rx_packets":3,"rx_bytes":180,"flooded":1,"drops":{"runt":2}}]`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	var back []PortStats
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, []PortStats{p}) {
		t.Fatalf("round trip: %+v", back)
	}
	if back[0].Counters.Get("rx_bytes") != 180 || back[0].Counters.Get("nonesuch") != 0 || back[0].Counters.Has("nonesuch") {
		t.Fatalf("Get: %+v", back[0].Counters)
	}

	v := VLANStats{Bridge: "br0", VLAN: 10, Counters: Counts{{"tx_packets", 7}}}
	if b, err = json.Marshal(v); err != nil || string(b) != `{"bridge":"br0","vlan":10,"ports":[],"tx_packets":7}` {
		t.Fatalf("VLAN: %s %v", b, err)
	}
	var vb VLANStats
	if err := json.Unmarshal([]byte(`{"bridge":"b","vlan":5,"ports":["a"],"rx_packets":1,"future":{"x":1},"tx_packets":2}`), &vb); err != nil {
		t.Fatal(err)
	}
	if vb.VLAN != 5 || len(vb.Ports) != 1 || !reflect.DeepEqual(vb.Counters, Counts{{"rx_packets", 1}, {"tx_packets", 2}}) {
		t.Fatalf("VLAN back: %+v", vb)
	}
	if err := json.Unmarshal([]byte(`[1,2]`), &vb); err == nil {
		t.Fatal("an array read as a VLAN's counters")
	}
}
