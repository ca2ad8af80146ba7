package datapath

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"testing"
	"time"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

// encapHdr is an outer header as the control plane writes it: to the
// underlay's next hop, 192.0.2.1 -> 192.0.2.2, UDP to 4789, VXLAN with
// vni. The fields the datapath writes hold junk, which SetEncap clears.
func encapHdr(vni uint32) [EncapHdrLen]byte {
	var h [EncapHdrLen]byte
	copy(h[0:], net.HardwareAddr{0x02, 0xee, 0, 0, 0, 2})
	copy(h[6:], net.HardwareAddr{0x02, 0xee, 0, 0, 0, 1})
	binary.BigEndian.PutUint16(h[12:], 0x0800)
	ip := h[14:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], 0xdead) // tot_len
	binary.BigEndian.PutUint16(ip[6:], 0x4000) // DF
	ip[8], ip[9] = 64, 17
	binary.BigEndian.PutUint16(ip[10:], 0xbeef) // check
	copy(ip[12:], net.IPv4(192, 0, 2, 1).To4())
	copy(ip[16:], net.IPv4(192, 0, 2, 2).To4())
	udp := h[34:]
	binary.BigEndian.PutUint16(udp[0:], 0x1234) // source
	binary.BigEndian.PutUint16(udp[2:], 4789)
	binary.BigEndian.PutUint16(udp[4:], 0x5678) // len
	binary.BigEndian.PutUint16(udp[6:], 0x9abc) // check
	udp[8] = 0x08
	binary.BigEndian.PutUint32(udp[12:], vni<<8)
	return h
}

// udpFrame is an IPv4/UDP frame of payloadLen bytes after the Ethernet
// header, between 10.0.0.1 and 10.0.0.2 with these ports.
func udpFrame(dst, src net.HardwareAddr, sport, dport uint16, payloadLen int) []byte {
	b := frame(dst, src, 0x0800, payloadLen)
	ip := b[14:]
	ip[0] = 0x45
	ip[9] = 17
	copy(ip[12:], net.IPv4(10, 0, 0, 1).To4())
	copy(ip[16:], net.IPv4(10, 0, 0, 2).To4())
	binary.BigEndian.PutUint16(ip[20:], sport)
	binary.BigEndian.PutUint16(ip[22:], dport)
	return b
}

// ipv4Sum is the RFC 1071 checksum of an IPv4 header: 0 over a header
// with a valid check.
func ipv4Sum(h []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(h); i += 2 {
		s += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

// checkEncap checks that out is inner behind the outer header hdr as the
// datapath completes it, and returns its UDP source port.
func checkEncap(t *testing.T, what string, out, inner []byte, hdr [EncapHdrLen]byte) uint16 {
	t.Helper()
	if len(out) != EncapHdrLen+len(inner) {
		t.Fatalf("%s: %d bytes out, want %d (the header and the frame)", what, len(out), EncapHdrLen+len(inner))
	}
	if !bytes.Equal(out[EncapHdrLen:], inner) {
		t.Errorf("%s: the inner frame changed:\n% x\nwant\n% x", what, out[EncapHdrLen:], inner)
	}
	if !bytes.Equal(out[:14], hdr[:14]) {
		t.Errorf("%s: outer Ethernet % x, want % x", what, out[:14], hdr[:14])
	}
	ip, udp := out[14:34], out[34:50]
	if n := binary.BigEndian.Uint16(ip[2:]); int(n) != len(out)-14 {
		t.Errorf("%s: tot_len %d, want %d", what, n, len(out)-14)
	}
	if s := ipv4Sum(ip); s != 0 {
		t.Errorf("%s: IPv4 header checksum does not verify (%#04x): % x", what, s, ip)
	}
	want := append([]byte{}, hdr[14:34]...)
	copy(want[2:4], ip[2:4])
	copy(want[10:12], ip[10:12])
	if !bytes.Equal(ip, want) {
		t.Errorf("%s: IPv4 header % x, want % x but tot_len and check", what, ip, want)
	}
	if n := binary.BigEndian.Uint16(udp[4:]); int(n) != len(out)-34 {
		t.Errorf("%s: UDP len %d, want %d", what, n, len(out)-34)
	}
	if c := binary.BigEndian.Uint16(udp[6:]); c != 0 {
		t.Errorf("%s: UDP check %#04x, want 0", what, c)
	}
	if !bytes.Equal(udp[2:4], hdr[36:38]) || !bytes.Equal(udp[8:], hdr[42:50]) {
		t.Errorf("%s: UDP destination and VXLAN % x, want % x", what, udp, hdr[34:50])
	}
	sport := binary.BigEndian.Uint16(udp[0:])
	if sport < 49152 {
		t.Errorf("%s: UDP source port %d, want 49152-65535", what, sport)
	}
	return sport
}

// BenchmarkEncap: a known unicast frame from an xdp port, to a port that
// is no overlay port, to an overlay port through its way in (no entry),
// and encapsulated. XDP's test run with a repeat count runs the program
// on the frame the last run left, which encapsulation grows: here each
// frame is one test run (repeat 1), and ns/frame the kernel's own timing
// of it, which includes the timer's cost; compare the cases with each
// other, not with BenchmarkPipeline.
func BenchmarkEncap(b *testing.B) {
	for _, c := range []struct {
		name  string
		dst   net.HardwareAddr
		encap bool
	}{
		{"forward", macB, false},
		{"overlay-way-in", macC, false},
		{"overlay-encap", macC, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			r, _ := viaRig(b)
			// A on port 1, B on port 3, C behind the overlay port 2.
			r.run(1, ipv4(bcast, macA))
			r.run(3, ipv4(bcast, macB))
			r.run(2, ipv4(bcast, macC))
			if c.encap {
				if err := r.dp.SetEncap(1, 0, macC, Encap{Ifindex: r.port[3], Hdr: encapHdr(1)}); err != nil {
					b.Fatal(err)
				}
			}
			data := udpFrame(c.dst, macA, 1000, 2000, 46)
			b.ResetTimer()
			var total time.Duration
			err := r.ns.Do(func() error {
				for i := 0; i < b.N; i++ {
					d, err := r.runRepeat(1, data, 1)
					if err != nil {
						return err
					}
					total += d
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "ns/frame")
		})
	}
}

// TestEncap: a known unicast frame from an xdp port to a station behind an
// overlay port (slot 2, its vxlan device's MTU 1450) whose outer header
// the control plane wrote is encapsulated in XDP and redirected, counted
// sent and encapsulated on the overlay port; one too long for the overlay
// is dropped and counted as overlay_mtu there; a station without an entry
// is reached through the way in, the frame unchanged; at tc the frame is
// encapsulated as in XDP.
func TestEncap(t *testing.T) {
	const mtu = viaRigMTU
	r, _ := viaRig(t)
	underlay := r.port[3]
	// C behind the overlay port, A on slot 1.
	r.wantVerdict(r.run(2, ipv4(macA, macC)), xdpRedirect, "C's first frame (a flood)")
	r.wantVerdict(r.run(1, ipv4(macC, macA)), xdpRedirect, "A to C")

	type counts struct{ tx, encap, tooLong uint64 }
	read := func() counts {
		s := r.stats(2)
		return counts{s.C[tbpf.TxPackets], s.C[tbpf.Encap], s.Drops[tbpf.TrestleTrDropReasonTR_DROP_OVERLAY_MTU]}
	}
	delta := func(what string, before counts, want counts) {
		t.Helper()
		a := read()
		if got := (counts{a.tx - before.tx, a.encap - before.encap, a.tooLong - before.tooLong}); got != want {
			t.Errorf("%s: slot 2 counted %+v, want %+v", what, got, want)
		}
	}

	// No entry: the way in, the frame as it was. (The stream's second
	// frame: the decision memo remembers it, and a new entry must make
	// it forget, else the next frames keep the way in. Nor may it
	// remember an encapsulated frame: the same flow again checks that.)
	in := udpFrame(macC, macA, 1000, 2000, 100)
	c := read()
	ret, out := r.runOut(1, in)
	if ret != xdpRedirect || !bytes.Equal(out, in) {
		t.Errorf("without an entry: verdict %d, frame changed %v; want a redirect of the frame as it is", ret, !bytes.Equal(out, in))
	}
	delta("without an entry", c, counts{1, 0, 0})

	hdr := encapHdr(0x123456)
	if err := r.dp.SetEncap(1, 0, macC, Encap{Ifindex: underlay, Hdr: hdr}); err != nil {
		t.Fatal(err)
	}
	es, err := r.dp.Encaps()
	if err != nil {
		t.Fatal(err)
	}
	stored := hdr
	for _, off := range []int{16, 17, 24, 25, 34, 35, 38, 39, 40, 41} {
		stored[off] = 0
	}
	key := EncapKey{Bridge: 1, MAC: [6]byte(macC)}
	if len(es) != 1 || es[key] != (Encap{Ifindex: underlay, Hdr: stored}) {
		t.Errorf("Encaps() = %+v, want only %+v with the per-frame fields 0", es, key)
	}

	c = read()
	ret, out = r.runOut(1, in)
	if ret != xdpRedirect {
		t.Fatalf("encapsulated: verdict %d, want a redirect", ret)
	}
	sport := checkEncap(t, "encapsulated", out, in, hdr)
	delta("encapsulated", c, counts{1, 1, 0})
	_, out = r.runOut(1, in)
	if again := checkEncap(t, "the same flow again", out, in, hdr); again != sport {
		t.Errorf("the same flow: UDP source port %d, then %d", sport, again)
	}
	ports2 := map[uint16]bool{}
	for p := uint16(0); p < 8; p++ {
		_, out = r.runOut(1, udpFrame(macC, macA, 1000+p, 2000, 100))
		ports2[checkEncap(t, "another flow", out, udpFrame(macC, macA, 1000+p, 2000, 100), hdr)] = true
	}
	if len(ports2) < 2 {
		t.Errorf("8 flows differing in their source port all took UDP source port %v", ports2)
	}

	// The overlay's MTU: at it goes, one byte over is dropped.
	at := frame(macC, macA, 0x0800, mtu)
	c = read()
	ret, out = r.runOut(1, at)
	if ret != xdpRedirect {
		t.Errorf("a frame at the overlay's MTU: verdict %d, want a redirect", ret)
	} else {
		checkEncap(t, "at the MTU", out, at, hdr)
	}
	delta("at the MTU", c, counts{1, 1, 0})
	c = read()
	if ret := r.run(1, frame(macC, macA, 0x0800, mtu+1)); ret != xdpDrop {
		t.Errorf("a frame one byte over the overlay's MTU: verdict %d, want dropped", ret)
	}
	delta("one byte over the MTU", c, counts{0, 0, 1})

	// At tc the same entry encapsulates too (TestEncapTC has its cases).
	r.m = modes[1]
	c = read()
	ret, out = r.runOut(1, in)
	r.m = modes[0]
	if ret != tcRedirect {
		t.Errorf("at tc: verdict %d, want a redirect", ret)
	} else if tcSport := checkEncap(t, "at tc", out, in, hdr); tcSport != sport {
		t.Errorf("at tc: UDP source port %d, in XDP %d: the same flow", tcSport, sport)
	}
	delta("at tc", c, counts{1, 1, 0})

	// Gone: the way in again; gone twice is no error.
	for i := 0; i < 2; i++ {
		if err := r.dp.DelEncap(1, 0, macC); err != nil {
			t.Fatalf("DelEncap (%d): %v", i, err)
		}
	}
	c = read()
	ret, out = r.runOut(1, in)
	if ret != xdpRedirect || !bytes.Equal(out, in) {
		t.Errorf("after DelEncap: verdict %d, frame changed %v; want the way in", ret, !bytes.Equal(out, in))
	}
	delta("after DelEncap", c, counts{1, 0, 0})
	if es, err := r.dp.Encaps(); err != nil || len(es) != 0 {
		t.Errorf("Encaps() after DelEncap: %+v, %v", es, err)
	}

	// Bad input: refused, nothing written.
	bad := hdr
	bad[14] = 0x46 // IPv4 options
	if err := r.dp.SetEncap(1, 0, macC, Encap{Ifindex: underlay, Hdr: bad}); !errors.Is(err, ErrEncapHeader) {
		t.Errorf("SetEncap with IPv4 options: %v, want ErrEncapHeader", err)
	}
	bad = hdr
	bad[23] = 6 // TCP
	if err := r.dp.SetEncap(1, 0, macC, Encap{Ifindex: underlay, Hdr: bad}); !errors.Is(err, ErrEncapHeader) {
		t.Errorf("SetEncap over TCP: %v, want ErrEncapHeader", err)
	}
	if err := r.dp.SetEncap(1, 0, macC[:5], Encap{Ifindex: underlay, Hdr: hdr}); err == nil {
		t.Error("SetEncap with a 5-byte MAC: no error")
	}
	if err := r.dp.SetEncap(1, 0, macC, Encap{Hdr: hdr}); err == nil {
		t.Error("SetEncap without an underlay device: no error")
	}
	if es, err := r.dp.Encaps(); err != nil || len(es) != 0 {
		t.Errorf("Encaps() after refused writes: %+v, %v", es, err)
	}
}

// TestEncapVLAN: in a VLAN-aware bridge the entry is the station's in its
// VLAN, and a frame from a trunk to an access overlay port is untagged
// before it is encapsulated.
func TestEncapVLAN(t *testing.T) {
	r := vrig(t, modes[0], 0)
	ports := []PortInfo{
		{Ifindex: r.port[1], Bridge: 1, Slot: 1, PVID: 10},
		{Ifindex: r.port[2], Bridge: 1, Slot: 2, PVID: 20, Policy: tbpf.PortPolicy{Flags: tbpf.TrestleTrPortFlagsTR_PORT_OVERLAY}},
		{Ifindex: r.port[3], Bridge: 1, Slot: 3, Trunk: true, VLANs: []uint16{10, 20}},
	}
	err := r.ns.Do(func() error {
		if err := r.dp.SetPort(ports[1]); err != nil {
			return err
		}
		return r.dp.SetBridge(BridgeInfo{ID: 1, Name: "br0", MaxEntries: 1024, Ports: ports, VLANAware: true, VLANs: []uint16{10, 20}, Overlay: true})
	})
	if err != nil {
		t.Fatal(err)
	}
	r.wantVerdict(r.run(2, ipv4(macA, macC)), xdpRedirect, "C's first frame in VLAN 20 (a flood)")
	hdr := encapHdr(20)
	// An entry in another VLAN is not C's in VLAN 20.
	if err := r.dp.SetEncap(1, 10, macC, Encap{Ifindex: r.port[1], Hdr: hdr}); err != nil {
		t.Fatal(err)
	}
	in := addTag(udpFrame(macC, macA, 1000, 2000, 100), 20)
	ret, out := r.runOut(3, in)
	if ret != xdpRedirect || !bytes.Equal(out, untag(in)) {
		t.Errorf("an entry in VLAN 10 only: verdict %d, out % x; want the way in, untagged", ret, out)
	}
	if err := r.dp.SetEncap(1, 20, macC, Encap{Ifindex: r.port[1], Hdr: hdr}); err != nil {
		t.Fatal(err)
	}
	before := r.stats(2).C[tbpf.Encap]
	ret, out = r.runOut(3, in)
	if ret != xdpRedirect {
		t.Fatalf("from the trunk in VLAN 20: verdict %d, want a redirect", ret)
	}
	checkEncap(t, "from the trunk in VLAN 20", out, untag(in), hdr)
	if n := r.stats(2).C[tbpf.Encap] - before; n != 1 {
		t.Errorf("encap on the overlay port went up by %d, want 1", n)
	}
}
