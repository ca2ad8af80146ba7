package datapath

import (
	"testing"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

// Port policies through BPF_PROG_TEST_RUN (issue 13): learning = false and
// mac_limit_action = "forward".

// setPolicy rewrites the rig's port in slot with the policies given.
func (r *rig) setPolicy(slot int, maxMACs uint32, noLearning, limitForward bool) {
	r.t.Helper()
	err := r.ns.Do(func() error {
		return r.dp.SetPort(PortInfo{Ifindex: r.port[slot], Bridge: 1, Slot: uint16(slot), MaxMACs: maxMACs,
			NoLearning: noLearning, LimitForward: limitForward})
	})
	if err != nil {
		r.t.Fatal(err)
	}
	p, ok, err := r.dp.Port(r.port[slot])
	if err != nil || !ok || p.NoLearning != noLearning || p.LimitForward != limitForward {
		r.t.Fatalf("port read back as %+v (%v, %v)", p, ok, err)
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
		if s := r.stats(1); s.Learned != 0 || s.RxPackets != 3 || s.Flooded != 3 {
			t.Errorf("port 1: learned %d rx %d flooded %d, want 0 3 3", s.Learned, s.RxPackets, s.Flooded)
		}
		r.wantVerdict(r.run(2, ipv4(macA, macB)), m.redirect, "to the station behind it")
		if s := r.stats(2); s.Flooded != 1 {
			t.Errorf("a frame to A did not flood: port 2 flooded %d", s.Flooded)
		}
		// Known unicast still reaches the port: B is learned on port 2.
		r.wantVerdict(r.run(1, ipv4(macB, macA)), m.redirect, "known unicast from it")
		if s := r.stats(1); s.Flooded != 3 {
			t.Errorf("known unicast from port 1 flooded (flooded %d, want 3)", s.Flooded)
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
		if s.Unlearned != 2 || s.Learned != 1 || s.Drops[tbpf.TrestleTrDropReasonTR_DROP_MAC_LIMIT] != 0 {
			t.Errorf("port 1: unlearned %d learned %d mac_limit drops %d, want 2 1 0", s.Unlearned, s.Learned, s.Drops[tbpf.TrestleTrDropReasonTR_DROP_MAC_LIMIT])
		}
		// Back to "drop": the next new source is dropped and counted.
		r.setPolicy(1, 1, false, false)
		r.wantVerdict(r.run(1, ipv4(bcast, macC)), m.drop, "new address at max_macs, dropped")
		if got := r.drops(1, tbpf.TrestleTrDropReasonTR_DROP_MAC_LIMIT); got != 1 {
			t.Errorf("mac_limit drops %d, want 1", got)
		}
	})
}
