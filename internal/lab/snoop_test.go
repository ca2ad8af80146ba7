package lab

import (
	"slices"
	"strings"
	"testing"

	"github.com/trestle/trestle/internal/config"
)

// TestSpecNoSnoop: nosnoop is a variant of a bridge that can snoop, and
// refused where there is no bridge or no snooping to turn off.
func TestSpecNoSnoop(t *testing.T) {
	for _, c := range []struct {
		spec string
		err  string
	}{
		{spec: "trestle:tc@nosnoop"},
		{spec: "linux-bridge@nosnoop"},
		{spec: "ovs@nosnoop"},
		{spec: "direct@nosnoop", err: "it is for trestle, linux-bridge and ovs"},
		{spec: "floor@nosnoop", err: "it is for trestle, linux-bridge and ovs"},
		{spec: "trestle@nosnoop=1", err: "filter, nosnoop or suppress"},
	} {
		v, err := ParseSpec(c.spec)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want one with %q", c.spec, err, c.err)
			}
			continue
		}
		if err != nil || !v.NoSnoop || v.Text != c.spec {
			t.Errorf("%s: %+v, %v", c.spec, v, err)
		}
	}
}

// TestTrestleConfigSnoop: the multicast kind's topology gives every
// bridge multicast_snooping, one trestle takes; nosnoop's and a topology
// without the kind's ask, none.
func TestTrestleConfigSnoop(t *testing.T) {
	topo := func(m *Multicast) *Topo {
		return &Topo{Bridges: []Bridge{{Name: "br1", Ports: []string{"p1", "p2", "p3"}}}, Multicast: m}
	}
	text := trestleConfig(topo(&Multicast{Snoop: true}), &Env{}, "tc", "/run/x.sock")
	c, err := config.Parse("lab.toml", []byte(text))
	if err != nil || len(c.Bridges) != 1 || !c.Bridges[0].MulticastSnooping {
		t.Errorf("snooping: %v\n%s", err, text)
	}
	if f := topo(&Multicast{Snoop: true}).features(); f != "multicast snooping" {
		t.Errorf("features %q", f)
	}
	for _, m := range []*Multicast{nil, {Snoop: false}} {
		if text := trestleConfig(topo(m), &Env{}, "tc", "/run/x.sock"); strings.Contains(text, "multicast") {
			t.Errorf("%+v: a config with snooping:\n%s", m, text)
		}
		if f := topo(m).features(); f != "" {
			t.Errorf("%+v: features %q", m, f)
		}
	}
}

// TestLinuxBridgeSnoopArgs: snooping on is mcast_snooping with the
// querier, whose response interval is set first (it times the querier's
// start); off is mcast_snooping 0.
func TestLinuxBridgeSnoopArgs(t *testing.T) {
	on := Multicast{Snoop: true}.snoopArgs()
	if len(on) != 2 || !slices.Equal(on[1], []string{"mcast_querier", "1"}) || !slices.Equal(on[0], []string{"mcast_snooping", "1", "mcast_query_response_interval", "100"}) {
		t.Errorf("on: %q", on)
	}
	if off := (Multicast{}).snoopArgs(); len(off) != 1 || !slices.Equal(off[0], []string{"mcast_snooping", "0"}) {
		t.Errorf("off: %q", off)
	}
}

// TestParseBridgeMDB: `bridge -j mdb show` as iproute2 writes it, router
// ports beside the entries; an empty table; and output that is not JSON.
func TestParseBridgeMDB(t *testing.T) {
	out := `[{"mdb":[{"index":5,"dev":"br1","port":"p2","grp":"239.1.1.1","state":"temp","flags":[],"timer":"259.95"},` +
		`{"index":5,"dev":"br1","port":"p3","grp":"239.1.1.2","state":"temp","flags":[],"timer":"259.90"}],"router":{}}]`
	ms, err := parseBridgeMDB(out)
	want := []Membership{{Group: "239.1.1.1", Port: "p2"}, {Group: "239.1.1.2", Port: "p3"}}
	if err != nil || !slices.Equal(ms, want) {
		t.Errorf("%+v, %v", ms, err)
	}
	for _, empty := range []string{"", `[{"mdb":[],"router":{}}]`} {
		if ms, err := parseBridgeMDB(empty); err != nil || len(ms) != 0 {
			t.Errorf("%q: %+v, %v", empty, ms, err)
		}
	}
	if _, err := parseBridgeMDB("Error: oops"); err == nil || !strings.Contains(err.Error(), "Error: oops") {
		t.Errorf("not JSON: %v", err)
	}
}

// TestParseOVSMDB: `ovs-appctl mdb/show` as Open vSwitch writes it, its
// ports named from their OpenFlow numbers, a router port's querier row
// left out.
func TestParseOVSMDB(t *testing.T) {
	out := " port  VLAN  GROUP                Age\n    2     0  239.1.1.1              3\n    3     0  ff0e::1:2              1\n    4     0  querier                0\n"
	byNum := ovsPortNames("1,\"p1\"\n2,\"p2\"\n3,\"p3\"\n4,\"p4\"\n2,\"other\"\n", []string{"p1", "p2", "p3", "p4"})
	want := []Membership{{Group: "239.1.1.1", Port: "p2"}, {Group: "ff0e::1:2", Port: "p3"}}
	if ms := parseOVSMDB(out, byNum); !slices.Equal(ms, want) {
		t.Errorf("%+v, want %+v", ms, want)
	}
}

// TestSpecSuppress: suppress is a variant of trestle and the Linux bridge,
// which write neigh_suppress; refused for a DUT without neighbour
// suppression.
func TestSpecSuppress(t *testing.T) {
	for _, c := range []struct {
		spec string
		err  string
	}{
		{spec: "trestle:xdp@suppress"},
		{spec: "trestle@suppress,bin=/tmp/x"},
		{spec: "linux-bridge@suppress"},
		{spec: "ovs@suppress", err: "it is for trestle and linux-bridge"},
		{spec: "floor@suppress", err: "it is for trestle and linux-bridge"},
	} {
		v, err := ParseSpec(c.spec)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want one with %q", c.spec, err, c.err)
			}
			continue
		}
		if err != nil || !v.Suppress || v.Text != c.spec {
			t.Errorf("%s: %+v, %v", c.spec, v, err)
		}
	}
	topo := &Topo{Bridges: []Bridge{{Name: "br1", Ports: []string{"p1", "p2"}}}, Suppress: true}
	text := trestleConfig(topo, &Env{}, "xdp", "/run/x.sock")
	c, err := config.Parse("lab.toml", []byte(text))
	if err != nil || len(c.Bridges) != 1 || !c.Bridges[0].NeighSuppress {
		t.Errorf("suppress: %v\n%s", err, text)
	}
	if f := topo.features(); f != "neighbour suppression" {
		t.Errorf("features %q", f)
	}
	topo.Suppress = false
	if text := trestleConfig(topo, &Env{}, "xdp", "/run/x.sock"); strings.Contains(text, "neigh_suppress") {
		t.Errorf("a config with suppression:\n%s", text)
	}
}
