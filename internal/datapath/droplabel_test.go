package datapath

import (
	"net"
	"testing"

	"github.com/vishvananda/netlink"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

// Every drop reason of bpf/types.h, reached through BPF_PROG_TEST_RUN and
// read back by the capture's reader: the record says dropped with the
// reason whose name `trestle capture` prints (tbpf.DropNames), said
// beyond a patch port where the drop was counted there, and the counter
// of that reason went up on the port the drop is counted on. The one drop
// helper (bpf/lib/drop.h) counts and notes each, so the counters and
// the capture agree.

// dropCase reaches one reason: set up the rig (its ports as newRig made
// them), then the frames, the last of which is dropped as it enters by
// slot (the port captured); counted on the port in slot at.
type dropCase struct {
	reason tbpf.DropReason
	name   string
	modes  string // "xdp", "tc", or "" for both
	vlan   bool   // on a VLAN-aware bridge (vrig, native VLAN 0)
	setup  func(t *testing.T, r *rig)
	slot   int
	frames [][]byte
	at     int
	beyond bool
}

// The reasons no table test reaches, and why.
var unreachableDrops = map[tbpf.DropReason]string{
	tbpf.TrestleTrDropReasonTR_DROP_TABLE_FULL: "no longer counted: a source the full table cannot take is forwarded, counted unlearned_full",
	tbpf.TrestleTrDropReasonTR_DROP_NO_PORT:    "a capture is of a port: a frame from an interface of no port is no port's to record",
	tbpf.TrestleTrDropReasonTR_DROP_STATE_FULL: "new connections go into filter_opening, an LRU map, whose update makes room by evicting: only memory the kernel cannot allocate fails it",
}

func dropCases() []dropCase {
	ll := func(last byte) net.HardwareAddr { return net.HardwareAddr{0x01, 0x80, 0xc2, 0, 0, last} }
	learn := func(slot int, mac net.HardwareAddr) func(t *testing.T, r *rig) {
		return func(t *testing.T, r *rig) { r.run(slot, ipv4(bcast, mac)) }
	}
	guard := func(t *testing.T, r *rig) {
		r.setPort(PortInfo{Ifindex: r.port[1], Bridge: 1, Slot: 1, Policy: tbpf.PortPolicy{Flags: tbpf.TrestleTrPortFlagsTR_PORT_IP_GUARD, GuardIPs: guardIPsOf(guardV4, guardV6, guardLL)}})
	}
	storm := func(kind int) func(t *testing.T, r *rig) {
		return func(t *testing.T, r *rig) {
			p := PortInfo{Ifindex: r.port[1], Bridge: 1, Slot: 1}
			p.Storm[kind] = 1 // a frame a second, a burst of StormBurst(1)
			r.setPort(p)
		}
	}
	stormed := func(f []byte) [][]byte {
		var fs [][]byte
		for i := 0; i <= int(StormBurst(1)); i++ {
			fs = append(fs, f)
		}
		return fs
	}
	one := func(f []byte) [][]byte { return [][]byte{f} }
	return []dropCase{
		{reason: tbpf.TrestleTrDropReasonTR_DROP_RUNT, name: "an ARP frame cut short", slot: 1, at: 1,
			frames: one(frame(bcast, macA, 0x0806, 27))},
		{reason: tbpf.TrestleTrDropReasonTR_DROP_ETHERTYPE, name: "a type field that is neither", slot: 1, at: 1,
			frames: one(frame(macB, macA, 0x05ff, 46))},
		{reason: tbpf.TrestleTrDropReasonTR_DROP_BAD_SRC, name: "a multicast source", slot: 1, at: 1,
			frames: one(ipv4(macB, mcast))},
		{reason: tbpf.TrestleTrDropReasonTR_DROP_RESERVED, name: "STP", slot: 1, at: 1,
			frames: one(frame(ll(0), macA, 0x0026, 46))},
		{reason: tbpf.TrestleTrDropReasonTR_DROP_HAIRPIN, name: "to a station on its ingress", slot: 1, at: 1,
			setup: learn(1, macA), frames: one(ipv4(macA, macA2))},
		{reason: tbpf.TrestleTrDropReasonTR_DROP_MAC_LIMIT, name: "a second source over max_macs 1", slot: 1, at: 1,
			setup: func(t *testing.T, r *rig) {
				r.setPort(PortInfo{Ifindex: r.port[1], Bridge: 1, Slot: 1, MaxMACs: 1})
				r.run(1, ipv4(bcast, macA))
			}, frames: one(ipv4(bcast, macD))},
		{reason: tbpf.TrestleTrDropReasonTR_DROP_NO_EGRESS, name: "to a station whose port is no port", slot: 1, at: 1,
			setup: func(t *testing.T, r *rig) {
				if err := r.ns.Do(func() error {
					return r.dp.AddFDB(FDBEntry{Bridge: 1, MAC: macC, Ifindex: r.port[0], Slot: 3, Static: true})
				}); err != nil {
					t.Fatal(err)
				}
			}, frames: one(ipv4(macC, macA))},
		{reason: tbpf.TrestleTrDropReasonTR_DROP_NO_BRIDGE, name: "a port of a bridge not set up", slot: 1, at: 1,
			setup:  func(t *testing.T, r *rig) { r.setPort(PortInfo{Ifindex: r.port[1], Bridge: 2, Slot: 1}) },
			frames: one(ipv4(bcast, macA))},
		{reason: tbpf.TrestleTrDropReasonTR_DROP_VLAN_UNTAGGED, name: "untagged on a trunk without a native VLAN", vlan: true,
			slot: 3, at: 3, frames: one(ipv4(bcast, macC))},
		{reason: tbpf.TrestleTrDropReasonTR_DROP_VLAN_TAGGED, name: "tagged on an access port", vlan: true,
			slot: 1, at: 1, frames: one(tagged(bcast, macA, 10))},
		{reason: tbpf.TrestleTrDropReasonTR_DROP_VLAN_NOT_CARRIED, name: "a VLAN the trunk does not carry", vlan: true,
			slot: 3, at: 3, frames: one(tagged(bcast, macC, 30))},
		{reason: tbpf.TrestleTrDropReasonTR_DROP_VLAN_EGRESS, name: "to a static entry on a port outside the VLAN", vlan: true,
			setup: func(t *testing.T, r *rig) {
				if err := r.ns.Do(func() error {
					return r.dp.AddFDB(FDBEntry{Bridge: 1, VLAN: 10, MAC: macD, Ifindex: r.port[2], Slot: 2, Static: true})
				}); err != nil {
					t.Fatal(err)
				}
			}, slot: 1, at: 1, frames: one(ipv4(macD, macA))},
		{reason: tbpf.TrestleTrDropReasonTR_DROP_PATCH_CHAIN, name: "a broadcast into a chain of bridges too long",
			setup: func(t *testing.T, r *rig) { lineOfBridges(t, r, tbpf.MaxPatchChain+1) },
			slot:  1, at: 2*tbpf.MaxPatchChain + 9, beyond: true, frames: one(frame(bcast, macA, 0x0806, 28))},
		{reason: tbpf.TrestleTrDropReasonTR_DROP_PROTECTED, name: "between two protected ports",
			setup: func(t *testing.T, r *rig) {
				r.setPort(PortInfo{Ifindex: r.port[1], Bridge: 1, Slot: 1, Policy: tbpf.PortPolicy{Flags: tbpf.TrestleTrPortFlagsTR_PORT_PROTECTED}})
				r.setPort(PortInfo{Ifindex: r.port[2], Bridge: 1, Slot: 2, Policy: tbpf.PortPolicy{Flags: tbpf.TrestleTrPortFlagsTR_PORT_PROTECTED}})
				r.run(2, ipv4(bcast, macB))
			}, slot: 1, at: 1, frames: one(ipv4(macB, macA))},
		{reason: tbpf.TrestleTrDropReasonTR_DROP_STORM_BROADCAST, name: "broadcast past its storm control", setup: storm(0),
			slot: 1, at: 1, frames: stormed(ipv4(bcast, macA))},
		{reason: tbpf.TrestleTrDropReasonTR_DROP_STORM_MULTICAST, name: "multicast past its storm control", setup: storm(1),
			slot: 1, at: 1, frames: stormed(ipv4(mcast, macA))},
		{reason: tbpf.TrestleTrDropReasonTR_DROP_STORM_UNKNOWN, name: "unknown unicast past its storm control", setup: storm(2),
			slot: 1, at: 1, frames: stormed(ipv4(macC, macA))},
		{reason: tbpf.TrestleTrDropReasonTR_DROP_SPAN, name: "into a span port",
			setup: func(t *testing.T, r *rig) { r.setPort(PortInfo{Ifindex: r.port[3], Bridge: 1, Slot: 3, Span: true}) },
			slot:  3, at: 3, frames: one(ipv4(bcast, macC))},
		{reason: tbpf.TrestleTrDropReasonTR_DROP_FILTERED, name: "a filter's default block",
			setup: func(t *testing.T, r *rig) {
				if err := r.ns.Do(func() error { return r.dp.SetFilterStage(true) }); err != nil {
					t.Fatal(err)
				}
				r.setFilter(&Filter{DefaultBlock: true})
			}, slot: 1, at: 1, frames: one(ipv4(bcast, macA))},
		{reason: tbpf.TrestleTrDropReasonTR_DROP_UNREADABLE, name: "a port rule and a SYN behind seven destination options headers",
			setup: func(t *testing.T, r *rig) {
				if err := r.ns.Do(func() error { return r.dp.SetFilterStage(true) }); err != nil {
					t.Fatal(err)
				}
				r.setFilter(&Filter{Rules: []FilterRule{{Block: true, Proto: 6, HasProto: true, DstPort: PortRange{22, 22}}}})
			}, slot: 1, at: 1, frames: one(pkt{src: macA, dst: bcast, proto: 6, sip: "2001:db8::1", dip: "2001:db8::2",
				sport: 40000, dport: 22, ext: []uint8{60, 60, 60, 60, 60, 60, 60}}.bytes())},
		{reason: tbpf.TrestleTrDropReasonTR_DROP_LOCKED, name: "a source not bound to a locked port",
			setup: func(t *testing.T, r *rig) { r.lock(1, true) }, slot: 1, at: 1, frames: one(ipv4(bcast, macA))},
		{reason: tbpf.TrestleTrDropReasonTR_DROP_SRC_STATIC, name: "another port's static entry as a source",
			setup: func(t *testing.T, r *rig) { r.addStatic(macB, 2) }, slot: 1, at: 1, frames: one(ipv4(bcast, macB))},
		{reason: tbpf.TrestleTrDropReasonTR_DROP_OVERLAY_MTU, name: "too long for an overlay port", modes: "tc",
			setup: func(t *testing.T, r *rig) {
				const mtu = 1450
				if err := r.ns.Do(func() error {
					l, err := netlink.LinkByIndex(int(r.port[2]))
					if err != nil {
						return err
					}
					if err := netlink.LinkSetMTU(l, mtu); err != nil {
						return err
					}
					var ports []PortInfo
					for slot := 1; slot <= 3; slot++ {
						ports = append(ports, PortInfo{Ifindex: r.port[slot], Bridge: 1, Slot: uint16(slot), Policy: tbpf.PortPolicy{}.With(tbpf.TrestleTrPortFlagsTR_PORT_OVERLAY, slot == 2)})
					}
					if err := r.dp.SetPort(ports[1]); err != nil {
						return err
					}
					return r.dp.SetBridge(BridgeInfo{ID: 1, Name: "br0", MaxEntries: 1024, Ports: ports, Overlay: true})
				}); err != nil {
					t.Fatal(err)
				}
				r.run(2, ipv4(macA, macC))
			}, slot: 1, at: 2, frames: one(frame(macC, macA, 0x0800, 1451))},
		{reason: tbpf.TrestleTrDropReasonTR_DROP_IPGUARD_ARP, name: "ARP with a forged sender", setup: guard,
			slot: 1, at: 1, frames: one(arpFrame(macA, 1, otherV4, guardV4))},
		{reason: tbpf.TrestleTrDropReasonTR_DROP_IPGUARD_ND, name: "an advertisement of another's address", setup: guard,
			slot: 1, at: 1, frames: one(ip6Frame(allNodes6, macA, guardLL, 58, icmp6(136, otherV6)))},
		{reason: tbpf.TrestleTrDropReasonTR_DROP_IPGUARD_IP, name: "IPv4 with a forged source", setup: guard,
			slot: 1, at: 1, frames: one(ip4Frame(bcast, macA, otherV4, 17, 1000, 2000))},
		{reason: tbpf.TrestleTrDropReasonTR_DROP_BPDU_GUARD, name: "a BPDU on a bpdu_guard port",
			setup: func(t *testing.T, r *rig) { r.setFlags(1, tbpf.TrestleTrPortFlagsTR_PORT_BPDU_GUARD) },
			slot:  1, at: 1, frames: one(bpdu(macA))},
		{reason: tbpf.TrestleTrDropReasonTR_DROP_PORT_BLOCKED, name: "from a blocked port",
			setup: func(t *testing.T, r *rig) { r.setFlags(1, tbpf.PortBlocked) },
			slot:  1, at: 1, frames: one(ipv4(bcast, macA))},
		{reason: tbpf.TrestleTrDropReasonTR_DROP_PORT_BLOCKED, name: "to a static entry on a blocked port",
			setup: func(t *testing.T, r *rig) { r.addStatic(macD, 2); r.setFlags(2, tbpf.PortBlocked) },
			slot:  1, at: 1, frames: one(ipv4(macD, macA))},
		{reason: tbpf.TrestleTrDropReasonTR_DROP_LOOP_PROBE, name: "a loop probe on a loop_detect bridge",
			setup: func(t *testing.T, r *rig) { r.setLoopDetect(true) },
			slot:  1, at: 1, frames: one(probe(macA, 7, 1, 2))},
		{reason: tbpf.TrestleTrDropReasonTR_DROP_DOUBLE_TAGGED, name: "a priority tag, then C-tag 20, on an access port",
			vlan: true, slot: 1, at: 1, frames: one(stack(tagged(macB, macA, 20), 0x8100, 5<<13))},
		{reason: tbpf.TrestleTrDropReasonTR_DROP_RA_GUARD, name: "a router advertisement from an ra_guard port", setup: svcGuard,
			slot: 1, at: 1, frames: one(ip6Frame(allNodes6, macA, guardLL, 58, icmp6(134, zeroV6)))},
		{reason: tbpf.TrestleTrDropReasonTR_DROP_DHCP_GUARD, name: "a DHCP offer from a dhcp_guard port", setup: svcGuard,
			slot: 1, at: 1, frames: one(ip4Frame(bcast, macA, guardV4, 17, 67, 68))},
	}
}

// An overlay port's MTU at XDP: the encapsulation's check (at tc, the
// forward's, in dropCases).
func xdpOverlayCase() dropCase {
	return dropCase{reason: tbpf.TrestleTrDropReasonTR_DROP_OVERLAY_MTU, name: "too long to encapsulate", modes: "xdp",
		slot: 1, at: 2, frames: [][]byte{udpFrame(macC, macA, 1000, 2000, viaRigMTU+1)}}
}

func TestCaptureDropLabels(t *testing.T) {
	cases := append(dropCases(), xdpOverlayCase())
	names := tbpf.DropNames()
	covered := map[tbpf.DropReason]bool{}
	for _, c := range cases {
		covered[c.reason] = true
	}
	for r := tbpf.DropReason(0); r < tbpf.DropReason(len(names)); r++ {
		if _, ok := unreachableDrops[r]; !covered[r] && !ok {
			t.Errorf("drop reason %s: no case reaches it, and none says why it cannot be reached", names[r])
		}
	}
	// Each case builds rigs of its own (a namespace and a datapath each):
	// side by side, as the package's other tests wait for this one.
	for _, c := range cases {
		t.Run(names[c.reason], func(t *testing.T) {
			t.Parallel()
			for _, m := range modes {
				if c.modes != "" && c.modes != m.name {
					continue
				}
				t.Run(m.name, func(t *testing.T) { c.run(t, m) })
			}
		})
	}
}

func (c dropCase) run(t *testing.T, m tmode) {
	var r *rig
	switch {
	case c.reason == tbpf.TrestleTrDropReasonTR_DROP_OVERLAY_MTU && m.name == "xdp":
		r, _ = viaRig(t)
		r.run(2, ipv4(macA, macC))
		if err := r.dp.SetEncap(1, 0, macC, Encap{Ifindex: r.port[3], Hdr: encapHdr(1)}); err != nil {
			t.Fatal(err)
		}
	case c.vlan:
		r = vrig(t, m, 0)
	default:
		r = newRig(t, m, 1024, [4]uint32{})
	}
	if c.setup != nil {
		c.setup(t, r)
	}
	capt := r.startCapture(c.slot, true, false)
	before := r.drops(c.at, c.reason)
	var f CapturedFrame
	for i, fr := range c.frames {
		got := r.run(c.slot, fr)
		rec, ok := next(t, capt)
		if !ok {
			t.Fatalf("%s: frame %d: nothing captured", c.name, i)
		}
		f = rec
		if i == len(c.frames)-1 && got != m.drop {
			t.Errorf("%s: verdict %d, want a drop", c.name, got)
		}
	}
	names := tbpf.DropNames()
	if f.Dir != CaptureIn || f.Verdict != VerdictDropped || f.Reason != c.reason || f.Beyond != c.beyond {
		label := "no reason"
		if int(f.Reason) < len(names) {
			label = names[f.Reason]
		}
		t.Errorf("%s: captured dir %d verdict %d reason %d (%s) beyond %t, want dropped (%s) beyond %t",
			c.name, f.Dir, f.Verdict, f.Reason, label, f.Beyond, names[c.reason], c.beyond)
	}
	if got := r.drops(c.at, c.reason) - before; got != 1 {
		t.Errorf("%s: %s drops on slot %d went up by %d, want 1", c.name, names[c.reason], c.at, got)
	}
}
