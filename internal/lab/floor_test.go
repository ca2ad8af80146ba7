package lab

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/cilium/ebpf"

	labbpf "github.com/trestle/trestle/internal/lab/bpf"
)

// TestFloorPlan: the program of each port of the floor and its variants:
// the plain floor redirects each port to the other, floor@vlan pushes the
// access VLAN's tag toward the trunk and takes it off the other way, and
// floor@mirror sends each of the two traffic ports' frames to the other
// and to the span port, which only receives.
func TestFloorPlan(t *testing.T) {
	br := []Bridge{{Name: "b0", Ports: []string{"p1", "p2"}}}
	got := func(plan []floorPort) string {
		var s []string
		for _, p := range plan {
			s = append(s, fmt.Sprintf("%s:%s>%s/%d", p.in, p.prog, strings.Join(p.out, "+"), p.tci))
		}
		return strings.Join(s, " ")
	}
	for _, c := range []struct {
		name string
		t    Topo
		want string
	}{
		{"plain", Topo{Bridges: br}, "p1:trestle_floor>p2/0 p2:trestle_floor>p1/0"},
		{"vlan", Topo{Bridges: br, VLANs: map[string]PortVLAN{"p1": {Access: 10}, "p2": {Trunk: []uint16{10, 20}}}},
			"p1:trestle_floor_push>p2/10 p2:trestle_floor_pop>p1/10"},
		{"mirror", Topo{Bridges: []Bridge{{Name: "b0", Ports: []string{"p1", "p2", "p3"}}}, Mirror: &Mirror{Name: "m0", Ports: []string{"p1"}, To: "p3"}},
			"p1:trestle_floor_mirror>p2+p3/0 p2:trestle_floor_mirror>p1+p3/0"},
	} {
		plan, err := floorPlan(&c.t, false)
		if err != nil || got(plan) != c.want {
			t.Errorf("%s: %q, %v; want %q", c.name, got(plan), err, c.want)
		}
		// floor:tc: the same frames to the same ports, by the tc twins.
		plan, err = floorPlan(&c.t, true)
		want := strings.NewReplacer("trestle_floor_mirror", "trestle_floor_tc_mirror", "trestle_floor_push", "trestle_floor_tc_push",
			"trestle_floor_pop", "trestle_floor_tc_pop", "trestle_floor>", "trestle_floor_tc>").Replace(c.want)
		if err != nil || got(plan) != want {
			t.Errorf("%s at tc: %q, %v; want %q", c.name, got(plan), err, want)
		}
		for _, p := range plan {
			if !p.tc || !strings.HasPrefix(p.says, "tc: ") {
				t.Errorf("%s at tc: port %s: tc %v, %q", c.name, p.in, p.tc, p.says)
			}
		}
	}
	for name, tp := range map[string]Topo{
		"trunk without the VLAN": {Bridges: br, VLANs: map[string]PortVLAN{"p1": {Access: 10}, "p2": {Trunk: []uint16{20}}}},
		"two access ports":       {Bridges: br, VLANs: map[string]PortVLAN{"p1": {Access: 10}, "p2": {Access: 10}}},
		"span port elsewhere":    {Bridges: []Bridge{{Name: "b0", Ports: []string{"p1", "p2", "p3"}}}, Mirror: &Mirror{Name: "m0", Ports: []string{"p1"}, To: "p9"}},
	} {
		if _, err := floorPlan(&tp, false); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// BenchmarkFloorProgram is the floor programs' cost a frame through
// BPF_PROG_TEST_RUN with a repeat count, the instrument of the switch's
// BenchmarkPipeline (the redirect is asked for, not carried out; the
// kernel's loop adds a few ns of its own): what the same loop costs a
// program that does nothing but ask. The tag push and pop are left out (a
// repeated run hands each repetition the frame the last one changed), and
// so is floor:tc@mirror (its clone is transmitted for real).
//
//	go test -run '^$' -bench FloorProgram ./internal/lab (as root)
func BenchmarkFloorProgram(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root to load eBPF programs")
	}
	spec, err := labbpf.LoadFloor()
	if err != nil {
		b.Fatal(err)
	}
	// The loopback, which every namespace has: the programs only ask.
	if err := spec.Variables[labbpf.FloorVarTcOut].Set(uint32(1)); err != nil {
		b.Fatal(err)
	}
	var objs labbpf.FloorObjects
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		b.Fatal(err)
	}
	defer objs.Close()
	for _, e := range []struct {
		m   *ebpf.Map
		key uint32
	}{{objs.Egress, 0}, {objs.Copies, 0}, {objs.Copies, 1}} {
		if err := e.m.Put(e.key, uint32(1)); err != nil {
			b.Fatal(err)
		}
	}
	data := make([]byte, 60)
	copy(data, []byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00})
	for _, c := range []struct {
		name string
		prog *ebpf.Program
		want uint32
	}{
		{"xdp", objs.TrestleFloor, 4},              // XDP_REDIRECT
		{"xdp-mirror", objs.TrestleFloorMirror, 4}, // XDP_REDIRECT
		{"tc", objs.TrestleFloorTc, 7},             // TC_ACT_REDIRECT
	} {
		b.Run(c.name, func(b *testing.B) {
			ret, per, err := c.prog.Benchmark(data, b.N, nil)
			if err != nil {
				b.Fatal(err)
			}
			if ret != c.want {
				b.Fatalf("returned %d, want %d", ret, c.want)
			}
			b.ReportMetric(float64(per.Nanoseconds()), "ns/frame")
		})
	}
}
