package datapath

import (
	"testing"

	"github.com/cilium/ebpf"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

// connection is a UDP or TCP connection between the rig's stations A (on
// slot 1, or from) and B (slot 2): its frame out and its frame back.
func connection(proto uint8, from int, sport uint16) (out, back pkt) {
	src, dst := macA, macB
	if from == 3 {
		src = macD
	}
	out = pkt{src: src, dst: dst, proto: proto, sip: "10.0.0.1", dip: "10.0.0.2", sport: sport, dport: 5000}
	back = pkt{src: dst, dst: src, proto: proto, sip: "10.0.0.2", dip: "10.0.0.1", sport: 5000, dport: sport}
	return out, back
}

func stateOfPort(t *testing.T, r *rig, sport uint16) State {
	t.Helper()
	states, err := r.dp.States()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range states {
		if s.From.Port() == sport || s.To.Port() == sport {
			return s
		}
	}
	t.Fatalf("no connection of port %d in %+v", sport, states)
	return State{}
}

// A TCP connection is established (its day-long timeout) only once its
// handshake was seen both ways, the reply from another port than the
// opener's: a tenant that answers its own SYN, or leaves it half-open,
// keeps the opening timeout.
func TestFilterStateHandshake(t *testing.T) {
	opening := uint64(tbpf.TrestleTrStateTimeoutsTR_STATE_TCP_OPENING) * 1e9
	day := uint64(tbpf.TrestleTrStateTimeoutsTR_STATE_TCP_ESTABLISHED) * 1e9
	forEachMode(t, func(t *testing.T, m tmode) {
		r := filterRig(t, m)
		r.setFilter(&Filter{DefaultBlock: true, Rules: []FilterRule{{In: 1, Proto: 6, HasProto: true, KeepState: true}}})

		// A forged reply from the opener's own port.
		syn, synack := connection(6, 1, 4001)
		synack.tcpFlags = 0x12
		synack.src, synack.dst = macA, macB
		r.wantVerdict(r.run(1, syn.bytes()), m.redirect, "the SYN")
		r.run(1, synack.bytes())
		ack := syn
		ack.tcpFlags = 0x10
		r.run(1, ack.bytes())
		if s := stateOfPort(t, r, 4001); s.Replied || s.Established || s.TimeoutNs != opening {
			t.Errorf("a reply forged from the opener's port: %+v, want not replied, not established, %d ns", s, opening)
		}

		// Half-open: SYN, SYN-ACK from B's port, no ACK.
		syn, synack = connection(6, 1, 4002)
		synack.tcpFlags = 0x12
		r.wantVerdict(r.run(1, syn.bytes()), m.redirect, "the SYN")
		r.wantVerdict(r.run(2, synack.bytes()), m.redirect, "the SYN-ACK")
		if s := stateOfPort(t, r, 4002); !s.Replied || s.Established || s.TimeoutNs != opening {
			t.Errorf("half-open: %+v, want replied, not established, %d ns", s, opening)
		}
		// The ACK establishes it, in the bridge's bounded table.
		ack = syn
		ack.tcpFlags = 0x10
		r.wantVerdict(r.run(1, ack.bytes()), m.redirect, "the ACK")
		if s := stateOfPort(t, r, 4002); !s.Established || !s.Held || s.TimeoutNs != day || s.Port != 1 {
			t.Errorf("after the handshake: %+v, want established, held, %d ns, opened from slot 1", s, day)
		}
		if n, ports, err := r.dp.StateCounts(1); err != nil || n != 1 || ports[1] != 1 {
			t.Errorf("counts: bridge %d, ports %v, %v; want 1 and slot 1: 1", n, ports, err)
		}
	})
}

// Each bridge and each port holds at most its bound of established
// connections; a connection over it still passes, held among the
// unestablished. A sweep counts them again.
func TestFilterStateBounds(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := filterRig(t, m)
		r.setFilter(&Filter{DefaultBlock: true, MaxStates: 2, MaxPortStates: 1, Rules: []FilterRule{
			{Proto: 17, HasProto: true, DstPort: PortRange{5000, 5000}, KeepState: true}}})
		open := func(from int, sport uint16) {
			t.Helper()
			out, back := connection(17, from, sport)
			r.wantVerdict(r.run(from, out.bytes()), m.redirect, "a frame out")
			r.wantVerdict(r.run(2, back.bytes()), m.redirect, "its reply")
			r.wantVerdict(r.run(2, back.bytes()), m.redirect, "its reply again")
		}
		open(1, 4001) // slot 1's one
		open(1, 4002) // over slot 1's bound
		open(3, 4003) // slot 3's one: the bridge's second
		for _, c := range []struct {
			sport uint16
			held  bool
		}{{4001, true}, {4002, false}, {4003, true}} {
			if s := stateOfPort(t, r, c.sport); !s.Established || s.Held != c.held {
				t.Errorf("connection from port %d: %+v, want established, held %v", c.sport, s, c.held)
			}
		}
		if n, ports, err := r.dp.StateCounts(1); err != nil || n != 2 || ports[1] != 1 || ports[3] != 1 {
			t.Errorf("counts: bridge %d, ports %v, %v; want 2, slots 1 and 3 one each", n, ports, err)
		}
		// The sweep removes nothing live, and counts the same.
		if n, err := r.dp.AgeStates(nil); err != nil || n != 0 {
			t.Fatalf("AgeStates: %d, %v", n, err)
		}
		if n, ports, err := r.dp.StateCounts(1); err != nil || n != 2 || ports[1] != 1 || ports[3] != 1 {
			t.Errorf("counts after a sweep: bridge %d, ports %v, %v; want 2, slots 1 and 3 one each", n, ports, err)
		}
		// A bound raised makes room: the connection over it moves in at
		// its next lookup (the new rule set ends every CPU's memo).
		r.setFilter(&Filter{DefaultBlock: true, MaxStates: 3, MaxPortStates: 2, Rules: []FilterRule{
			{Proto: 17, HasProto: true, DstPort: PortRange{5000, 5000}, KeepState: true}}})
		_, back := connection(17, 1, 4002)
		r.wantVerdict(r.run(2, back.bytes()), m.redirect, "the reply of the connection over the bound")
		if s := stateOfPort(t, r, 4002); !s.Held {
			t.Errorf("connection from port 4002 once there is room: %+v, want held", s)
		}
		if n, ports, err := r.dp.StateCounts(1); err != nil || n != 3 || ports[1] != 2 {
			t.Errorf("counts: bridge %d, ports %v, %v; want 3, slot 1: 2", n, ports, err)
		}
		// A sweep that removes them all counts 0.
		if n, err := r.dp.AgeStates(func(uint16) bool { return false }); err != nil || n != 3 {
			t.Fatalf("AgeStates: %d, %v; want 3 removed", n, err)
		}
		if n, ports, _ := r.dp.StateCounts(1); n != 0 || len(ports) != 0 {
			t.Errorf("counts after removing every connection: %d, %v; want none", n, ports)
		}
	})
}

// Unestablished connections are an LRU: a flood of new ones never finds
// the table full (the least recently used goes), and never touches an
// established connection.
func TestFilterStateEarlyDrop(t *testing.T) {
	const size = 64
	rigSpecEdit = func(s *ebpf.CollectionSpec) { s.Maps[tbpf.TrestleMapFilterHalfopen].InnerMap.MaxEntries = size }
	defer func() { rigSpecEdit = nil }()
	forEachMode(t, func(t *testing.T, m tmode) {
		r := filterRig(t, m)
		r.setFilter(&Filter{DefaultBlock: true, Rules: []FilterRule{
			{In: 1, Proto: 17, HasProto: true, KeepState: true}}})
		out, back := connection(17, 1, 4000)
		r.wantVerdict(r.run(1, out.bytes()), m.redirect, "the connection out")
		r.wantVerdict(r.run(2, back.bytes()), m.redirect, "its reply")
		for i := 0; i < 20*size; i++ {
			f, _ := connection(17, 1, uint16(10000+i))
			r.wantVerdict(r.run(1, f.bytes()), m.redirect, "a new connection of the flood")
		}
		if n := r.drops(1, tbpf.TrestleTrDropReasonTR_DROP_STATE_FULL); n != 0 {
			t.Errorf("state_full drops: %d, want none", n)
		}
		// The established connection outlives the flood; the newest of
		// the flood is still tracked.
		r.wantVerdict(r.run(2, back.bytes()), m.redirect, "the established connection's reply after the flood")
		_, last := connection(17, 1, uint16(10000+20*size-1))
		r.wantVerdict(r.run(2, last.bytes()), m.redirect, "the reply of the flood's newest")
		states, err := r.dp.States()
		if err != nil {
			t.Fatal(err)
		}
		if len(states) > size+1 {
			t.Errorf("%d connections tracked, want at most %d", len(states), size+1)
		}
		if s := stateOfPort(t, r, 4000); !s.Held {
			t.Errorf("the established connection: %+v, want held", s)
		}
	})
}

// A connection is its VLAN's: the same addresses and ports in another VLAN
// are another connection, which the one tracked does not pass.
func TestFilterStateVLAN(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := filterRig(t, m)
		r.setFilter(&Filter{DefaultBlock: true, Rules: []FilterRule{
			{In: 1, Proto: 17, HasProto: true, KeepState: true}}})
		tag := func(p pkt, vid uint16) pkt { p.vid = vid; return p }
		out, back := connection(17, 1, 4000)
		r.wantVerdict(r.run(1, tag(out, 10).bytes()), m.redirect, "the connection out, in VLAN 10")
		r.wantVerdict(r.run(2, tag(back, 10).bytes()), m.redirect, "its reply in VLAN 10")
		before := r.drops(2, tbpf.TrestleTrDropReasonTR_DROP_FILTERED)
		r.wantVerdict(r.run(2, tag(back, 20).bytes()), m.drop, "the same reply in VLAN 20")
		r.wantVerdict(r.run(2, back.bytes()), m.drop, "the same reply untagged")
		if n := r.drops(2, tbpf.TrestleTrDropReasonTR_DROP_FILTERED) - before; n != 2 {
			t.Errorf("filtered drops of the replies outside VLAN 10: %d, want 2", n)
		}
		if s := stateOfPort(t, r, 4000); s.VLAN != 10 || !s.Established {
			t.Errorf("the connection: %+v, want VLAN 10, established", s)
		}
	})
}

// Each bridge has its own table of unestablished connections: a flood of
// new connections in one bridge, many times the table, evicts none of
// another bridge's.
func TestFilterHalfOpenPerBridge(t *testing.T) {
	const size = 64
	rigSpecEdit = func(s *ebpf.CollectionSpec) { s.Maps[tbpf.TrestleMapFilterHalfopen].InnerMap.MaxEntries = size }
	defer func() { rigSpecEdit = nil }()
	forEachMode(t, func(t *testing.T, m tmode) {
		r := filterRig(t, m)
		keep := &Filter{DefaultBlock: true, Rules: []FilterRule{{Proto: 17, HasProto: true, KeepState: true}}}
		// br0: slots 1 and 2; br1: slot 3 and the rig's spare port, slot 4.
		b0 := []PortInfo{{Ifindex: r.port[1], Bridge: 1, Slot: 1}, {Ifindex: r.port[2], Bridge: 1, Slot: 2}}
		b1 := []PortInfo{{Ifindex: r.port[3], Bridge: 2, Slot: 3}, {Ifindex: r.port[0], Bridge: 2, Slot: 4}}
		if err := r.ns.Do(func() error {
			if err := r.dp.SetBridge(BridgeInfo{ID: 1, Name: "br0", MaxEntries: 1024, Ports: b0, Filter: keep}); err != nil {
				return err
			}
			for _, p := range b1 {
				if err := r.dp.SetPort(p); err != nil {
					return err
				}
			}
			return r.dp.SetBridge(BridgeInfo{ID: 2, Name: "br1", MaxEntries: 1024, Ports: b1, Filter: keep})
		}); err != nil {
			t.Fatal(err)
		}
		other, _ := connection(17, 3, 4000)
		r.wantVerdict(r.run(3, other.bytes()), m.redirect, "br1's connection out")
		for i := 0; i < 20*size; i++ {
			f, _ := connection(17, 1, uint16(10000+i))
			r.run(1, f.bytes())
		}
		states, err := r.dp.States()
		if err != nil {
			t.Fatal(err)
		}
		held := map[uint16]int{}
		found := false
		for _, s := range states {
			held[s.Bridge]++
			found = found || (s.Bridge == 2 && (s.From.Port() == 4000 || s.To.Port() == 4000))
		}
		if !found {
			t.Errorf("br1's unestablished connection was evicted by br0's flood: %v", held)
		}
		if held[1] > size || held[1] == 0 {
			t.Errorf("br0 tracks %d connections, want its table's %d at most", held[1], size)
		}
		if n := r.drops(1, tbpf.TrestleTrDropReasonTR_DROP_STATE_FULL); n != 0 {
			t.Errorf("state_full drops in the flood: %d, want none", n)
		}
	})
}
