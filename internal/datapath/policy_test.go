package datapath

import (
	"encoding/binary"
	"testing"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

// Port policies through BPF_PROG_TEST_RUN (issue 13): learning = false and
// mac_limit_action = "forward".

// setPolicy rewrites the rig's port in slot with the policies given.
func (r *rig) setPolicy(slot int, maxMACs uint32, noLearning, limitForward bool) {
	r.t.Helper()
	r.setPort(PortInfo{Ifindex: r.port[slot], Bridge: 1, Slot: uint16(slot), MaxMACs: maxMACs,
		Policy: tbpf.PortPolicy{}.With(tbpf.TrestleTrPortFlagsTR_PORT_NO_LEARN, noLearning).With(tbpf.TrestleTrPortFlagsTR_PORT_LIMIT_FORWARD, limitForward)})
}

// setPort rewrites a port of the rig, and checks that it reads back so.
func (r *rig) setPort(p PortInfo) {
	r.t.Helper()
	if err := r.ns.Do(func() error { return r.dp.SetPort(p) }); err != nil {
		r.t.Fatal(err)
	}
	got, ok, err := r.dp.Port(p.Ifindex)
	if err != nil || !ok || !got.Equal(p) {
		r.t.Fatalf("port read back as %+v (%v, %v), want %+v", got, ok, err, p)
	}
}

func TestNoLearning(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := newRig(t, m, 1024, [4]uint32{})
		r.setPolicy(1, 0, true, false)
		// A's frames are forwarded (flooded: B unknown), A is not learned,
		// and a frame to A floods rather than going to port 1 alone.
		for i := 0; i < 3; i++ {
			r.wantVerdict(r.run(1, ipv4(macB, macA)), m.redirect, "from a port that does not learn")
		}
		if e, ok := r.lookup(macA); ok {
			t.Errorf("A learned on a port with learning off: %+v", e)
		}
		if s := r.stats(1); s.C[tbpf.Learned] != 0 || s.C[tbpf.RxPackets] != 3 || s.C[tbpf.Flooded] != 3 {
			t.Errorf("port 1: learned %d rx %d flooded %d, want 0 3 3", s.C[tbpf.Learned], s.C[tbpf.RxPackets], s.C[tbpf.Flooded])
		}
		r.wantVerdict(r.run(2, ipv4(macA, macB)), m.redirect, "to the station behind it")
		if s := r.stats(2); s.C[tbpf.Flooded] != 1 {
			t.Errorf("a frame to A did not flood: port 2 flooded %d", s.C[tbpf.Flooded])
		}
		// Known unicast still reaches the port: B is learned on port 2.
		r.wantVerdict(r.run(1, ipv4(macB, macA)), m.redirect, "known unicast from it")
		if s := r.stats(1); s.C[tbpf.Flooded] != 3 {
			t.Errorf("known unicast from port 1 flooded (flooded %d, want 3)", s.C[tbpf.Flooded])
		}
	})
}

func TestMACLimitForward(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := newRig(t, m, 1024, [4]uint32{})
		r.setPolicy(1, 1, false, true)
		r.wantVerdict(r.run(1, ipv4(bcast, macA)), m.redirect, "first address")
		r.wantVerdict(r.run(1, ipv4(bcast, macB)), m.redirect, "second address at max_macs, forwarded")
		r.wantVerdict(r.run(1, ipv4(bcast, macB)), m.redirect, "and again")
		if _, ok := r.lookup(macB); ok {
			t.Errorf("the address over the limit was learned")
		}
		s := r.stats(1)
		if s.C[tbpf.Unlearned] != 2 || s.C[tbpf.Learned] != 1 || s.Drops[tbpf.TrestleTrDropReasonTR_DROP_MAC_LIMIT] != 0 {
			t.Errorf("port 1: unlearned %d learned %d mac_limit drops %d, want 2 1 0", s.C[tbpf.Unlearned], s.C[tbpf.Learned], s.Drops[tbpf.TrestleTrDropReasonTR_DROP_MAC_LIMIT])
		}
		// Back to "drop": the next new source is dropped and counted.
		r.setPolicy(1, 1, false, false)
		r.wantVerdict(r.run(1, ipv4(bcast, macC)), m.drop, "new address at max_macs, dropped")
		if got := r.drops(1, tbpf.TrestleTrDropReasonTR_DROP_MAC_LIMIT); got != 1 {
			t.Errorf("mac_limit drops %d, want 1", got)
		}
	})
}

// Ports 1 and 2 protected, port 3 with flood = false: known unicast between
// the protected ports is dropped as protected; a broadcast from port 1
// reaches port 3 only; unknown unicast from port 1 reaches no port.
func TestProtected(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := newRig(t, m, 1024, [4]uint32{})
		var ports []PortInfo
		for slot := 1; slot <= 3; slot++ {
			p := PortInfo{Ifindex: r.port[slot], Bridge: 1, Slot: uint16(slot), Policy: tbpf.PortPolicy{}.With(tbpf.TrestleTrPortFlagsTR_PORT_PROTECTED, slot < 3).With(tbpf.TrestleTrPortFlagsTR_PORT_NO_FLOOD, slot == 3)}
			r.setPort(p)
			ports = append(ports, p)
		}
		if err := r.ns.Do(func() error {
			return r.dp.SetBridge(BridgeInfo{ID: 1, Name: "br0", MaxEntries: 1024, Ports: ports, Policy: true})
		}); err != nil {
			t.Fatal(err)
		}
		flooded := m.redirect // xdp: one broadcast redirect; tc: clones, the frame consumed
		if m.name == "tc" {
			flooded = tcStolen
		}
		r.wantVerdict(r.run(1, ipv4(bcast, macA)), flooded, "broadcast from a protected port")
		r.wantVerdict(r.run(2, ipv4(bcast, macB)), flooded, "broadcast from the other")
		if m.name == "tc" {
			// tc clones each copy itself (xdp's devmap program, which
			// decides there, does not run in a test run).
			if s2, s3 := r.stats(2), r.stats(3); s2.C[tbpf.TxPackets] != 0 || s3.C[tbpf.TxPackets] != 2 {
				t.Errorf("broadcasts: protected port 2 sent %d, port 3 %d; want 0 and 2", s2.C[tbpf.TxPackets], s3.C[tbpf.TxPackets])
			}
			r.run(1, ipv4(macD, macA)) // unknown unicast: port 2 protected, port 3 takes no such flood
			if s2, s3 := r.stats(2), r.stats(3); s2.C[tbpf.TxPackets] != 0 || s3.C[tbpf.TxPackets] != 2 {
				t.Errorf("unknown unicast: port 2 sent %d, port 3 %d; want 0 and 2", s2.C[tbpf.TxPackets], s3.C[tbpf.TxPackets])
			}
		}
		r.wantVerdict(r.run(1, ipv4(macB, macA)), m.drop, "known unicast between protected ports")
		if got := r.drops(1, tbpf.TrestleTrDropReasonTR_DROP_PROTECTED); got != 1 {
			t.Errorf("protected drops %d, want 1", got)
		}
	})
}

// fwdMemoIngress is the ingress ifindex of CPU 0's decision memo
// (struct tr_fwd_memo, first in the cpu_cache value; bpf/lib/memo.h).
func (r *rig) fwdMemoIngress() uint32 {
	r.t.Helper()
	var vals [][]byte
	if err := r.dp.objs.CpuCache.Lookup(uint32(0), &vals); err != nil {
		r.t.Fatalf("read cpu_cache: %v", err)
	}
	return binary.LittleEndian.Uint32(vals[0][16:])
}

// The decision memo (bpf/lib/memo.h) never outlives the configuration it
// was made from: once a frame from D to B has gone from port 1 to port 3
// twice (the second, which found B in the destination memo, makes the
// decision memo), a port made protected, a span port, or a port removed
// decides the next frame as the pipeline would.
func TestDecisionMemoFollowsConfig(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := newRig(t, m, 1024, [4]uint32{})
		r.run(3, ipv4(bcast, macB))
		known := func(what string) {
			t.Helper()
			for i := 0; i < 2; i++ {
				tx := r.stats(3).C[tbpf.TxPackets]
				r.wantVerdict(r.run(1, ipv4(macB, macD)), m.redirect, what)
				if r.stats(3).C[tbpf.TxPackets] != tx+1 {
					t.Fatalf("%s: not sent to port 3", what)
				}
			}
			if got := r.fwdMemoIngress(); got != r.port[1] {
				t.Fatalf("%s: the decision memo names ingress %d, want port 1's %d", what, got, r.port[1])
			}
		}
		port := func(slot int) PortInfo {
			return PortInfo{Ifindex: r.port[slot], Bridge: 1, Slot: uint16(slot)}
		}
		dropped := func(what string, reason tbpf.DropReason) {
			t.Helper()
			n := r.drops(1, reason)
			r.wantVerdict(r.run(1, ipv4(macB, macD)), m.drop, what)
			if r.drops(1, reason) != n+1 {
				t.Errorf("%s: not counted as dropped: %s", what, reason)
			}
		}

		known("D to B")
		p1, p3 := port(1), port(3)
		p1.Policy, p3.Policy = p1.Policy.With(tbpf.TrestleTrPortFlagsTR_PORT_PROTECTED, true), p3.Policy.With(tbpf.TrestleTrPortFlagsTR_PORT_PROTECTED, true)
		r.setPort(p1)
		r.setPort(p3)
		dropped("both ports protected", tbpf.TrestleTrDropReasonTR_DROP_PROTECTED)

		p1.Policy, p3.Policy = p1.Policy.With(tbpf.TrestleTrPortFlagsTR_PORT_PROTECTED, false), p3.Policy.With(tbpf.TrestleTrPortFlagsTR_PORT_PROTECTED, false)
		r.setPort(p1)
		r.setPort(p3)
		known("D to B, unprotected")
		p1.Span = true
		r.setPort(p1)
		dropped("port 1 made a span port", tbpf.TrestleTrDropReasonTR_DROP_SPAN)

		p1.Span = false
		r.setPort(p1)
		known("D to B again")
		if err := r.ns.Do(func() error { return r.dp.DelPort(r.port[3], 3) }); err != nil {
			t.Fatal(err)
		}
		tx := r.stats(3).C[tbpf.TxPackets]
		r.run(1, ipv4(macB, macD))
		if r.stats(3).C[tbpf.TxPackets] != tx {
			t.Errorf("a frame went to port 3 after it was removed")
		}
	})
}

// While the control plane writes (cfg_gen odd: configChanging), no memo is
// used or made: a frame meets the configuration being written, not one from
// before; the memo comes back once it is whole (configChanged).
func TestDecisionMemoWaitsForWrites(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := newRig(t, m, 1024, [4]uint32{})
		r.run(3, ipv4(bcast, macB))
		for i := 0; i < 2; i++ {
			r.run(1, ipv4(macB, macD))
		}
		if got := r.fwdMemoIngress(); got != r.port[1] {
			t.Fatalf("no decision memo for D to B: ingress %d", got)
		}
		// Half a write: port 1 protected, port 3 not yet. A frame from
		// port 2 to B makes no memo.
		protect := func(slot int) {
			t.Helper()
			v := tbpf.Port{Bridge: 1, Slot: uint16(slot), Flags: tbpf.PortProtected}
			if err := r.dp.portMap(r.port[slot]).Put(r.port[slot], &v); err != nil {
				t.Fatal(err)
			}
		}
		r.dp.configChanging()
		protect(1)
		for i := 0; i < 3; i++ {
			r.run(2, ipv4(macB, macD))
		}
		if got := r.fwdMemoIngress(); got != r.port[1] {
			t.Errorf("a decision memo was made while the configuration was being written (ingress %d)", got)
		}
		// Port 3 protected too: from port 1 to B is dropped at once, not
		// forwarded from the memo made before the write began.
		n := r.drops(1, tbpf.TrestleTrDropReasonTR_DROP_PROTECTED)
		protect(3)
		r.wantVerdict(r.run(1, ipv4(macB, macD)), m.drop, "both protected, mid-write")
		if r.drops(1, tbpf.TrestleTrDropReasonTR_DROP_PROTECTED) != n+1 {
			t.Errorf("mid-write: not dropped as protected")
		}
		var err error
		r.dp.configChanged(&err)
		if err != nil {
			t.Fatal(err)
		}
		// D moved back to port 1 mid-write: the first frame moves it to
		// port 2, the second finds it there and B in the table (the move
		// voided the memos), the third makes the memo.
		for i := 0; i < 3; i++ {
			r.run(2, ipv4(macB, macD))
		}
		if got := r.fwdMemoIngress(); got != r.port[2] {
			t.Errorf("no decision memo once the write ended: ingress %d, want port 2's %d", got, r.port[2])
		}
	})
}
