package datapath

import (
	"bytes"
	"encoding/binary"
	"testing"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

// encapCounts is what a frame to the overlay port of slot 2 changed there:
// sent, sent encapsulated, dropped too long for the overlay.
type encapCounts struct{ tx, encap, tooLong uint64 }

func (r *rig) encapCounts(slot int) encapCounts {
	s := r.stats(slot)
	return encapCounts{s.C[tbpf.TxPackets], s.C[tbpf.Encap], s.Drops[tbpf.TrestleTrDropReasonTR_DROP_OVERLAY_MTU]}
}

func (c encapCounts) minus(d encapCounts) encapCounts {
	return encapCounts{c.tx - d.tx, c.encap - d.encap, c.tooLong - d.tooLong}
}

// ipv6Frame is an IPv6 frame of payloadLen bytes after the Ethernet header.
func ipv6Frame(dst, src []byte, payloadLen int) []byte {
	b := frame(dst, src, 0x86dd, payloadLen)
	b[14] = 0x60
	binary.BigEndian.PutUint16(b[18:], uint16(payloadLen-40))
	b[20], b[21] = 17, 64
	return b
}

// tcEncapRig is a tc rig whose slot 2 is an overlay port (its device's MTU
// viaRigMTU) with C behind it and, unless noEntry, C's outer header hdr
// written (into the underlay device of slot 3). kind: "plain" (a bridge
// that is not VLAN-aware: A on slot 1; C also with VID 7); "vlan" (VLAN-aware, the overlay
// port an access port of VLAN 20, as the daemon makes it: A on slot 1, of
// VLAN 10, and the trunk of slot 3); "trunk" (VLAN-aware, the overlay port
// a trunk of VLANs 10 and 20, C in VLAN 10: a frame from slot 1 leaves it
// tagged, the tag pushed at tc held outside the frame's bytes, as the
// kernel holds the tag of every frame it receives).
func tcEncapRig(t *testing.T, kind string, hdr [EncapHdrLen]byte, noEntry bool) *rig {
	t.Helper()
	var r *rig
	var cVLAN uint16
	switch kind {
	case "plain":
		r, _ = viaRig(t)
		r.m = modes[1]
		r.wantVerdict(r.run(2, ipv4(bcast, macC)), tcRedirect, "C's first frame (a flood)")
		// A bridge that is not VLAN-aware keys its table by the outer
		// VID a frame carries: C's tagged frames of VID 7 too.
		r.wantVerdict(r.run(2, addTag(ipv4(bcast, macC), 7)), tcRedirect, "C's first frame of VID 7 (a flood)")
		if !noEntry {
			if err := r.dp.SetEncap(1, 7, macC, Encap{Ifindex: r.port[3], Hdr: hdr}); err != nil {
				t.Fatal(err)
			}
		}
	case "vlan", "trunk":
		r = vrig(t, modes[1], 0)
		cVLAN = 20
		overlay := PortInfo{Ifindex: r.port[2], Bridge: 1, Slot: 2, PVID: 20, Policy: tbpf.PortPolicy{Flags: tbpf.TrestleTrPortFlagsTR_PORT_OVERLAY}}
		if kind == "trunk" {
			cVLAN = 10
			overlay.PVID, overlay.Trunk, overlay.VLANs = 0, true, []uint16{10, 20}
		}
		ports := []PortInfo{
			{Ifindex: r.port[1], Bridge: 1, Slot: 1, PVID: 10},
			overlay,
			{Ifindex: r.port[3], Bridge: 1, Slot: 3, Trunk: true, VLANs: []uint16{10, 20}},
		}
		err := r.ns.Do(func() error {
			if err := setMTU(r.port[2], viaRigMTU); err != nil {
				return err
			}
			if err := r.dp.SetPort(ports[1]); err != nil {
				return err
			}
			return r.dp.SetBridge(BridgeInfo{ID: 1, Name: "br0", MaxEntries: 1024, Ports: ports, VLANAware: true, VLANs: []uint16{10, 20}, Overlay: true})
		})
		if err != nil {
			t.Fatal(err)
		}
		first := ipv4(bcast, macC)
		if kind == "trunk" {
			first = addTag(first, 10)
		}
		r.run(2, first)
		if e, ok := r.lookup(macC); !ok || e.Slot != 2 || e.VLAN != cVLAN {
			t.Fatalf("C after its first frame: %+v, %v; want on slot 2 in VLAN %d", e, ok, cVLAN)
		}
	}
	if !noEntry {
		if err := r.dp.SetEncap(1, cVLAN, macC, Encap{Ifindex: r.port[3], Hdr: hdr}); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// TestEncapTC: at tc, a known unicast frame to a station behind an overlay
// port whose outer header the control plane wrote is encapsulated by the
// tc program (bpf/lib/overlay.h, tr_vxlan_encap_tc) and redirected into the
// underlay device, not the vxlan device, counted sent and encapsulated on
// the overlay port: byte for byte the header XDP writes (checkEncap), then
// the frame as the vxlan device would have got it, its tag inside whether
// the frame carried it in its bytes or the kernel held it outside them;
// untagged for an access overlay port; a CHECKSUM_COMPLETE skb's sum kept
// true. One too long for the overlay's MTU is dropped there, counted, and
// not sent. A station without an entry, or
// a frame tc cannot encapsulate (ARP: the kernel grows only IP packets),
// goes to the vxlan device unchanged, as before.
func TestEncapTC(t *testing.T) {
	const mtu = viaRigMTU
	hdr := encapHdr(0x123456)
	udp := udpFrame(macC, macA, 1000, 2000, 100)
	cases := []struct {
		name    string
		kind    string // tcEncapRig's
		noEntry bool
		slot    int
		in      []byte
		verdict uint32
		inner   []byte // the frame inside the outer header; nil: not encapsulated
		out     []byte // not encapsulated: the frame as it leaves (nil: dropped)
		want    encapCounts
	}{
		{name: "plain", kind: "plain", slot: 1, in: udp, verdict: tcRedirect, inner: udp, want: encapCounts{1, 1, 0}},
		{name: "plain, IPv6", kind: "plain", slot: 1, in: ipv6Frame(macC, macA, 80), verdict: tcRedirect, inner: ipv6Frame(macC, macA, 80), want: encapCounts{1, 1, 0}},
		{name: "plain, tagged in its bytes: the tag inside", kind: "plain", slot: 1, in: addTag(udp, 0xa007), verdict: tcRedirect, inner: addTag(udp, 0xa007), want: encapCounts{1, 1, 0}},
		{name: "plain, at the MTU", kind: "plain", slot: 1, in: frame(macC, macA, 0x0800, mtu), verdict: tcRedirect, inner: frame(macC, macA, 0x0800, mtu), want: encapCounts{1, 1, 0}},
		{name: "plain, one byte over the MTU: dropped", kind: "plain", slot: 1, in: frame(macC, macA, 0x0800, mtu+1), verdict: tcShot, want: encapCounts{0, 0, 1}},
		{name: "plain, ARP: the vxlan device", kind: "plain", slot: 1, in: frame(macC, macA, 0x0806, 28), verdict: tcRedirect, out: frame(macC, macA, 0x0806, 28), want: encapCounts{1, 0, 0}},
		{name: "plain, no entry: the vxlan device", kind: "plain", noEntry: true, slot: 1, in: udp, verdict: tcRedirect, out: udp, want: encapCounts{1, 0, 0}},
		{name: "plain, no entry, one byte over the MTU: dropped", kind: "plain", noEntry: true, slot: 1, in: frame(macC, macA, 0x0800, mtu+1), verdict: tcShot, want: encapCounts{0, 0, 1}},
		{name: "VLAN-aware, from a trunk to an access overlay port: untagged", kind: "vlan", slot: 3, in: addTag(udp, 20), verdict: tcRedirect, inner: udp, want: encapCounts{1, 1, 0}},
		{name: "VLAN-aware, from an access port to a trunk overlay port: the tag held outside the bytes, inside", kind: "trunk", slot: 1, in: udp, verdict: tcRedirect, inner: addTag(udp, 10), want: encapCounts{1, 1, 0}},
		{name: "VLAN-aware, over the MTU: dropped", kind: "vlan", slot: 3, in: addTag(frame(macC, macA, 0x0800, mtu+1), 20), verdict: tcShot, want: encapCounts{0, 0, 1}},
	}
	rigs := map[[2]any]*rig{}
	for _, c := range cases {
		k := [2]any{c.kind, c.noEntry}
		r := rigs[k]
		if r == nil {
			r = tcEncapRig(t, c.kind, hdr, c.noEntry)
			rigs[k] = r
		}
		before := r.encapCounts(2)
		ret, out := r.runOut(c.slot, c.in)
		if got := r.encapCounts(2).minus(before); got != c.want {
			t.Errorf("%s: slot 2 counted %+v, want %+v", c.name, got, c.want)
		}
		if ret != c.verdict {
			t.Errorf("%s: verdict %d, want %d", c.name, ret, c.verdict)
			continue
		}
		switch {
		case c.inner != nil:
			if len(out) != EncapHdrLen+len(c.inner) {
				t.Errorf("%s: %d bytes out, want %d (the header and the frame):\n% x", c.name, len(out), EncapHdrLen+len(c.inner), out)
				continue
			}
			checkEncap(t, c.name, out, c.inner, hdr)
		case c.out != nil && !bytes.Equal(out, c.out):
			t.Errorf("%s: left as\n% x\nwant, unchanged,\n% x", c.name, out, c.out)
		}
	}

	// A socket buffer whose checksum covers the whole packet (a NIC's
	// CHECKSUM_COMPLETE): the test run checks that it still does once the
	// program is done (it fails with EBADMSG if not), and so that the
	// bytes written in front are summed into it.
	const checksumComplete = 1 << 2 // BPF_F_TEST_SKB_CHECKSUM_COMPLETE
	for _, c := range []struct {
		kind, name string
		slot       int
		in, inner  []byte
	}{
		{"plain", "IPv4", 1, udp, udp},
		{"plain", "IPv6", 1, ipv6Frame(macC, macA, 80), ipv6Frame(macC, macA, 80)},
		{"trunk", "the tag held outside the bytes, inside", 1, udp, addTag(udp, 10)},
	} {
		r := rigs[[2]any{c.kind, false}]
		ret, out, err := r.runOutFlags(c.slot, c.in, checksumComplete)
		if err != nil || ret != tcRedirect {
			t.Errorf("CHECKSUM_COMPLETE, %s: verdict %d, %v; want a redirect, the skb's sum true", c.name, ret, err)
			continue
		}
		if len(out) != EncapHdrLen+len(c.inner) {
			t.Errorf("CHECKSUM_COMPLETE, %s: %d bytes out, want %d", c.name, len(out), EncapHdrLen+len(c.inner))
			continue
		}
		checkEncap(t, "CHECKSUM_COMPLETE, "+c.name, out, c.inner, hdr)
	}

	// The same flow, the same UDP source port, as XDP gives it; another
	// flow, another.
	r := rigs[[2]any{"plain", false}]
	_, out := r.runOut(1, udp)
	sport := binary.BigEndian.Uint16(out[34:])
	r.m = modes[0]
	_, outXDP := r.runOut(1, udp)
	r.m = modes[1]
	if len(outXDP) != len(out) || !bytes.Equal(outXDP, out) {
		t.Errorf("the same frame encapsulated in XDP and at tc differs:\nxdp % x\ntc  % x", outXDP, out)
	}
	ports := map[uint16]bool{}
	for p := uint16(0); p < 8; p++ {
		_, out = r.runOut(1, udpFrame(macC, macA, 1000+p, 2000, 100))
		ports[binary.BigEndian.Uint16(out[34:])] = true
	}
	if len(ports) < 2 {
		t.Errorf("8 flows differing in their source port all took UDP source port %v (the first, %d)", ports, sport)
	}
}

// TestEncapNoXDP: an entry whose underlay device takes no XDP redirect
// (Encap.NoXDP) is read back so, is not used in XDP (the frame takes the
// way in, unchanged), and is used at tc.
func TestEncapNoXDP(t *testing.T) {
	r, _ := viaRig(t)
	r.wantVerdict(r.run(2, ipv4(bcast, macC)), xdpRedirect, "C's first frame (a flood)")
	hdr := encapHdr(7)
	e := Encap{Ifindex: r.port[3], Hdr: hdr, NoXDP: true}
	if err := r.dp.SetEncap(1, 0, macC, e); err != nil {
		t.Fatal(err)
	}
	es, err := r.dp.Encaps()
	if got := es[EncapKey{Bridge: 1, MAC: [6]byte(macC)}]; err != nil || !got.NoXDP || got.Ifindex != e.Ifindex {
		t.Errorf("Encaps() = %+v, %v; want C's with NoXDP", es, err)
	}
	in := udpFrame(macC, macA, 1000, 2000, 100)
	before := r.encapCounts(2)
	ret, out := r.runOut(1, in)
	if ret != xdpRedirect || !bytes.Equal(out, in) {
		t.Errorf("XDP, an entry without XDP: verdict %d, frame changed %v; want the way in, the frame as it is", ret, !bytes.Equal(out, in))
	}
	if got := r.encapCounts(2).minus(before); got != (encapCounts{1, 0, 0}) {
		t.Errorf("XDP, an entry without XDP: slot 2 counted %+v, want sent, not encapsulated", got)
	}
	r.m = modes[1]
	ret, out = r.runOut(1, in)
	if ret != tcRedirect || len(out) != EncapHdrLen+len(in) {
		t.Fatalf("tc, an entry without XDP: verdict %d, %d bytes; want encapsulated", ret, len(out))
	}
	checkEncap(t, "tc, an entry without XDP", out, in, hdr)
}
