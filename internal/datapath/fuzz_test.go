package datapath

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/safchain/ethtool"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	tbpf "github.com/trestle/trestle/internal/bpf"
	"github.com/trestle/trestle/internal/mode"
	"github.com/trestle/trestle/internal/progrun"
	"github.com/trestle/trestle/internal/testutil"
)

// FuzzPipeline drives the switch program with random frames over random
// table states, through BPF_PROG_TEST_RUN, in both builds (xdp and tc), and
// checks what each frame did against the pipeline's invariants:
//
//   - its verdict is one of the pipeline's actions (xdp: drop, redirect; tc:
//     shot, redirect, stolen), and a drop verdict is a counted drop;
//   - rx = forwarded + flooded + dropped: a frame from a port adds one to
//     its rx and to exactly one of: tx of one other port (forwarded), its
//     flooded (flooded), one drop reason of the enum (dropped), with the
//     reason's own condition true (a bad_src frame has a bad source, a
//     hairpin's destination lives on its ingress...); a frame from an
//     interface that is no port adds one no_port drop and nothing else;
//   - no frame goes back out of its ingress, nor out of a port of another
//     bridge, nor (VLAN-aware bridges) out of a port that does not carry its
//     VLAN, or in another VLAN's counters, or tagged otherwise than its
//     egress port takes that VLAN (the xdp build's output bytes);
//   - a forward goes where the table says, a flood only for a group address
//     or a destination the table does not hold, to exactly the ports that
//     take it (tc copies are sent by the test run; xdp's flood sets with a
//     devmap program are run again in live-frames mode, which runs those
//     programs, to see where the copies go);
//   - a source is learned or moved only onto the port it came from; the
//     classified VLAN is the one 802.1Q says;
//   - the two builds decide alike (architecture.md rule 5), frame after frame.
//
// An input is a table state and up to eight frames (fuzzInput): two bridges
// over six veth ports, each bridge VLAN-aware or not, ports access or trunk
// (with or without a native VLAN), up or down (out of the flood list),
// protected, refusing kinds of flood, not learning, limited in addresses
// (drop or forward at the limit), bound to IP addresses (ip_guard),
// guarding against router advertisements (ra_guard) and DHCP servers
// (dhcp_guard), in any mix: a frame that goes on from a guarded port, and
// a guard's drop, must be what guardReason, the guard's model in Go, says,
// and a frame the guard drops is dropped for no later step's reason; a few
// static entries, some pointing where the control plane never would (a
// port of the other bridge, an interface that is no port); frames from a
// port or from an interface that is none.
// Patch ports, mirrors, storm control and the filter stage are left out:
// they are time-dependent (storm) or multiply copies across bridges, and
// have table tests of their own.
//
// The rig is set up once per process (loading the programs takes seconds),
// and the table is reset between inputs and between builds.
//
//	go test -run '^$' -fuzz '^FuzzPipeline$' -parallel 1 ./internal/datapath   (as root)
func FuzzPipeline(f *testing.F) {
	testutil.RequireRoot(f)
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	var r *fuzzRig
	tb := &procTB{}
	f.Cleanup(func() {
		if r != nil && testing.Verbose() {
			f.Logf("what the frames did: %s", r.reached())
		}
		for i := len(tb.cleanups) - 1; i >= 0; i-- {
			tb.cleanups[i]()
		}
	})
	f.Fuzz(func(t *testing.T, in []byte) {
		if r == nil {
			// Here rather than before f.Fuzz: the fuzzing coordinator
			// runs the target's body too, and never an input. A rig
			// that cannot be set up fails the input that asked.
			tb.TB = t
			r = newFuzzRig(tb)
			tb.TB = f
		}
		r.t = t
		r.check(decodeFuzzInput(in))
	})
}

// procTB is a testing.TB whose cleanups run when the fuzz target ends, not
// after the input that happened to set the rig up, and report to the target.
type procTB struct {
	testing.TB
	cleanups []func()
}

func (p *procTB) Cleanup(f func()) { p.cleanups = append(p.cleanups, f) }

const fuzzPorts = 6 // slots 1..6; p0 is an interface that is no port

// fuzzVIDs are the VLANs ports are made of; frames carry these and others.
var fuzzVIDs = [4]uint16{10, 20, 30, 4094}

// fuzzMACs are the stations frames come from and go to, and static entries name.
var fuzzMACs = func() (m [8]net.HardwareAddr) {
	for i := range m {
		m[i] = net.HardwareAddr{0x02, 0, 0, 0, 0, byte(i + 1)}
	}
	return m
}()

// fuzzPort is one port of the table state.
type fuzzPort struct {
	bridge                               uint16
	down                                 bool // attached, but out of its bridge's flood list
	trunk                                bool
	pvid                                 uint16   // VLAN-aware bridge: the access VLAN, or the trunk's native one (0: none)
	vlans                                []uint16 // a trunk's, sorted
	protected, noFlood, noMcast, noBcast bool
	noLearn, limitForward                bool
	locked                               bool
	ipGuard                              bool // bound to fuzzGuardIPs (bpf/lib/ipguard.h; guardReason is its model)
	raGuard, dhcpGuard                   bool // the guards of the network's services, in the same check
	maxMACs                              uint32
}

// fuzzGuardIPs are the addresses of every ip_guard port of an input;
// fuzzFrameBytes writes them (and others) where the check reads.
var fuzzGuardIPs = []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("fd00::1")}

func (p fuzzPort) info(ifindex uint32, slot uint16) PortInfo {
	return PortInfo{Ifindex: ifindex, Bridge: p.bridge, Slot: slot, MaxMACs: p.maxMACs, PVID: p.pvid,
		Trunk: p.trunk, VLANs: p.vlans, Policy: tbpf.PortPolicy{GuardIPs: guardIPsOf(p.guardIPs()...)}.
			With(tbpf.TrestleTrPortFlagsTR_PORT_NO_LEARN, p.noLearn).With(tbpf.TrestleTrPortFlagsTR_PORT_LIMIT_FORWARD, p.limitForward).
			With(tbpf.TrestleTrPortFlagsTR_PORT_PROTECTED, p.protected).With(tbpf.TrestleTrPortFlagsTR_PORT_NO_FLOOD, p.noFlood).
			With(tbpf.TrestleTrPortFlagsTR_PORT_NO_MFLOOD, p.noMcast).With(tbpf.TrestleTrPortFlagsTR_PORT_NO_BFLOOD, p.noBcast).
			With(tbpf.TrestleTrPortFlagsTR_PORT_LOCKED, p.locked).With(tbpf.TrestleTrPortFlagsTR_PORT_IP_GUARD, p.ipGuard).
			With(tbpf.TrestleTrPortFlagsTR_PORT_RA_GUARD, p.raGuard).With(tbpf.TrestleTrPortFlagsTR_PORT_DHCP_GUARD, p.dhcpGuard)}
}

// guarded says whether the pipeline asks the guard (tr_ipguard) about the port's frames.
func (p fuzzPort) guarded() bool { return p.ipGuard || p.raGuard || p.dhcpGuard }

func (p fuzzPort) guardIPs() []netip.Addr {
	if !p.ipGuard {
		return nil
	}
	return fuzzGuardIPs
}

// carries is PortInfo.Carries.
func (p fuzzPort) carries(vid uint16) bool {
	return p.info(0, 1).Carries(vid)
}

// fuzzTopo is the bridges and ports of an input.
type fuzzTopo struct {
	aware      [3]bool // by bridge id 1, 2
	stage      bool    // the VLAN stage's programs (on whenever a bridge is aware)
	maxEntries uint32
	port       [fuzzPorts + 1]fuzzPort // [0] unused: p0 is no port
}

func (t *fuzzTopo) equal(u *fuzzTopo) bool {
	if t.aware != u.aware || t.stage != u.stage || t.maxEntries != u.maxEntries {
		return false
	}
	for i := range t.port {
		a, b := t.port[i], u.port[i]
		if !a.info(0, 1).Equal(b.info(0, 1)) || a.down != b.down {
			return false
		}
	}
	return true
}

// up are the bridge's ports in its flood list.
func (t *fuzzTopo) up(bridge uint16) []int {
	var out []int
	for s := 1; s <= fuzzPorts; s++ {
		if t.port[s].bridge == bridge && !t.port[s].down {
			out = append(out, s)
		}
	}
	return out
}

// policy says whether a port of the bridge has a flood policy (its floods check each port).
func (t *fuzzTopo) policy(bridge uint16) bool {
	for s := 1; s <= fuzzPorts; s++ {
		if p := t.port[s]; p.bridge == bridge && (p.protected || p.noFlood || p.noMcast || p.noBcast) {
			return true
		}
	}
	return false
}

// vlanAware says whether the bridge's frames are classified into VLANs.
func (t *fuzzTopo) vlanAware(bridge uint16) bool { return t.aware[bridge] && t.stage }

// vlans are every VLAN the bridge's ports carry, sorted.
func (t *fuzzTopo) vlans(bridge uint16) []uint16 {
	var out []uint16
	for s := 1; s <= fuzzPorts; s++ {
		p := t.port[s]
		if p.bridge != bridge {
			continue
		}
		if p.trunk {
			out = append(out, p.vlans...)
		} else if p.pvid != 0 {
			out = append(out, p.pvid)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// fuzzStatic is a static entry of the table state.
type fuzzStatic struct {
	bridge, vlan, slot uint16
	mac                net.HardwareAddr
	ifindexOf          int // the slot whose interface the entry names (0: p0, no port); normally slot
}

// fuzzFrame is one frame of an input, received on slot (0: p0, no port), on cpu.
type fuzzFrame struct {
	slot int
	cpu  int
	data []byte
}

type fuzzInput struct {
	topo    fuzzTopo
	statics []fuzzStatic
	frames  []fuzzFrame
}

// decodeFuzzInput reads an input (layout in fuzzSeed, which writes them).
func decodeFuzzInput(in []byte) fuzzInput {
	r := testutil.NewFuzzBytes(in)
	var out fuzzInput
	t := &out.topo
	b0 := r.Byte()
	t.aware[1], t.aware[2] = b0&1 != 0, b0&2 != 0
	t.stage = t.aware[1] || t.aware[2] || b0&4 != 0
	inFirst := [4]int{3, 2, 5, 6}[b0>>3&3] // ports of bridge 1; the rest are bridge 2's
	t.maxEntries = [4]uint32{1024, 3, 1024, 1}[b0>>5&3]
	for s := 1; s <= fuzzPorts; s++ {
		a, v, pol := r.Byte(), r.Byte(), r.Byte()
		p := fuzzPort{bridge: 1}
		if s > inFirst {
			p.bridge = 2
		}
		switch a & 7 {
		case 1:
			p.maxMACs = 1
		case 2:
			p.maxMACs, p.limitForward = 2, true
		}
		p.down = a>>3&7 == 7
		p.ipGuard = a>>6 == 3
		// Values and a bit that meant nothing before the service guards,
		// so that older inputs decode to the ports they did: a&7 of 5 to
		// 7 (no limit), and v's bit 0 (read by no VLAN layout).
		p.dhcpGuard = a&7 >= 5
		p.raGuard = v&1 != 0
		if pol>>6 == 3 {
			p.protected, p.noFlood, p.noMcast, p.noBcast, p.noLearn = pol&1 != 0, pol&2 != 0, pol&4 != 0, pol&8 != 0, pol&16 != 0
			p.locked = pol&32 != 0
		}
		if t.aware[p.bridge] {
			if v&2 == 0 {
				p.pvid = fuzzVIDs[v>>2&3]
			} else {
				p.trunk = true
				for i, vid := range fuzzVIDs {
					if v>>2&(1<<i) != 0 {
						p.vlans = append(p.vlans, vid)
					}
				}
				if len(p.vlans) == 0 {
					p.vlans = []uint16{fuzzVIDs[0]}
				}
				if n := int(v >> 6); n > 0 {
					p.pvid = p.vlans[(n-1)%len(p.vlans)]
				}
			}
		}
		t.port[s] = p
	}
	for n := int(r.Byte() % 5); n > 0; n-- {
		e0, e1 := r.Byte(), r.Byte()
		st := fuzzStatic{bridge: 1 + uint16(e0&1), vlan: [8]uint16{0, 10, 20, 30, 4094, 1, 0, 10}[e0>>1&7],
			mac: fuzzMACs[e0>>4&7], slot: 1 + uint16(e1%fuzzPorts)}
		st.ifindexOf = int(st.slot)
		switch e1 >> 6 {
		case 2: // the interface of another slot: the entry's slot and ifindex disagree
			st.ifindexOf = 1 + int(st.slot)%fuzzPorts
		case 3: // an interface that is no port
			st.ifindexOf = 0
		}
		out.statics = append(out.statics, st)
	}
	for n := 1 + int(r.Byte()%8); n > 0; n-- {
		h := r.Byte()
		fr := fuzzFrame{slot: int(h % (fuzzPorts + 1)), cpu: int(h >> 7)}
		fr.data = fuzzFrameBytes(r)
		out.frames = append(out.frames, fr)
		if r.Done() {
			break
		}
	}
	return out
}

// fuzzMAC picks an address: mostly the stations, sometimes the addresses
// the pipeline treats apart.
func fuzzMAC(r *testutil.FuzzBytes) net.HardwareAddr {
	c := r.Byte()
	switch c & 15 {
	case 8:
		return net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	case 9:
		return net.HardwareAddr{0x01, 0x00, 0x5e, 0, 0, c >> 4}
	case 10:
		return net.HardwareAddr{0x01, 0x80, 0xc2, 0, 0, c >> 4} // 802.1D reserved
	case 11:
		return net.HardwareAddr{0x01, 0x80, 0xc2, 0, 0, 0x10 | c>>4} // just above them
	case 12:
		return make(net.HardwareAddr, 6)
	case 13:
		m := make(net.HardwareAddr, 6)
		r.Fill(m)
		return m
	}
	return fuzzMACs[c&7]
}

// fuzzFrameBytes builds a frame, biased to well-formed Ethernet, 802.1Q and
// 802.1ad tags, and the IPv4, IPv6 and ARP headers the parser checks, with
// the lengths around the parser's limits; or raw bytes.
func fuzzFrameBytes(r *testutil.FuzzBytes) []byte {
	k := r.Byte()
	if k&7 == 7 {
		b := make([]byte, 14+int(r.Byte()))
		r.Fill(b)
		return b
	}
	b := append([]byte{}, fuzzMAC(r)...)
	if c := r.Byte(); c>>4 == 15 {
		b = append(b, fuzzMAC(r)...)
	} else {
		b = append(b, fuzzMACs[c&7]...) // mostly a station: a source that is none is dropped at once
	}
	tags := int(k >> 3 & 3)
	for i := 0; i < tags; i++ {
		c := r.Byte()
		tpid := [4]uint16{0x8100, 0x8100, 0x88a8, 0x8100}[c&3]
		if tags == 3 && i == 0 {
			tpid = 0x88a8 // QinQ
		}
		vid := [8]uint16{0, 10, 20, 30, 4094, 4095, 1, 0}[c>>2&7]
		if c>>2&7 == 7 {
			vid = (uint16(r.Byte())<<8 | uint16(r.Byte())) & 0xfff
		}
		b = binary.BigEndian.AppendUint16(b, tpid)
		b = binary.BigEndian.AppendUint16(b, uint16(c>>5)<<13|vid)
	}
	var etype uint16
	var minLen int
	c := r.Byte()
	switch k >> 5 {
	case 0, 7:
		etype, minLen = 0x0800, 20
	case 1:
		etype, minLen = 0x86dd, 40
	case 2:
		etype, minLen = 0x0806, 28
	case 3:
		etype = 0x88cc // LLDP
	case 4:
		etype = 0 // 802.3 length: set below
	case 5:
		etype = 1501 + uint16(c&31) // neither a length nor a type, and beyond
	case 6:
		etype = (uint16(r.Byte())<<8 | uint16(r.Byte()))
	}
	n := [8]int{0, minLen - 1, minLen, 46, 1500, 64, 8, 0}[c>>5]
	if c>>5 == 7 {
		n = int(r.Byte()) * 6
	}
	n = max(n, 0)
	if etype == 0 {
		etype = uint16(min(n, 1500))
		if c&1 != 0 {
			etype++ // the length overruns the frame
		}
	}
	b = binary.BigEndian.AppendUint16(b, etype)
	// The switch reads no payload beyond its length: a pattern of one
	// byte of the input, so that a frame takes a few bytes of it.
	payload := make([]byte, n)
	x := r.Byte()
	for i := 0; i < n; i++ {
		payload[i] = x ^ byte(i*131)
	}
	if n > 0 && etype == 0x0800 {
		payload[0] = 0x45
	} else if n > 0 && etype == 0x86dd {
		payload[0] = 0x60
	}
	guardAddrs(etype, payload, x)
	if (etype == 0x0800 || etype == 0x86dd) && x>>5 >= 5 {
		s := r.Byte()
		serviceFrame(etype, payload, x, s, r.Byte())
	}
	b = append(b, payload...)
	if c&30 == 30 { // cut short
		b = b[:int(r.Byte())%(len(b)+1)]
	}
	return b
}

// guardAddrs writes, as the pattern byte x says, the addresses ip_guard
// checks into an IPv4, IPv6 or ARP payload: a port's (fuzzGuardIPs), the
// unspecified one, or the pattern's; with a DHCP client's ports, an
// advertisement or a solicitation and its target, an ARP probe.
func guardAddrs(etype uint16, b []byte, x byte) {
	v4, v6 := fuzzGuardIPs[0].As4(), fuzzGuardIPs[1].As16()
	own := x&3 == 1
	unspec := x&3 == 2
	switch {
	case etype == 0x0800 && len(b) >= 20:
		if own {
			copy(b[12:], v4[:])
		} else if unspec {
			copy(b[12:], make([]byte, 4))
			b[6], b[7], b[9] = 0, 0, 17
			if len(b) >= 24 && x&4 != 0 {
				copy(b[20:], []byte{0, 68, 0, 67})
			}
		}
	case etype == 0x86dd && len(b) >= 40:
		if own {
			copy(b[8:], v6[:])
		} else if unspec {
			copy(b[8:], make([]byte, 16))
		}
		if x&4 != 0 {
			b[6] = 58
			if len(b) >= 41 {
				b[40] = [2]byte{135, 136}[x>>3&1]
			}
			if len(b) >= 64 && x&16 != 0 {
				copy(b[48:], v6[:])
			}
		}
	case etype == 0x0806 && len(b) >= 28:
		b[2], b[3], b[4], b[5] = 0x08, 0, 6, 4
		if own {
			copy(b[14:], v4[:])
		} else if unspec {
			copy(b[14:], make([]byte, 4))
			b[6], b[7] = 0, 1
			if x&16 != 0 {
				copy(b[24:], v4[:])
			}
		}
	}
}

// serviceFrame makes an IPv4 or IPv6 payload whose pattern byte x asks for
// it (x>>5 of 5 to 7; guardAddrs has written its source) into one the
// guards of the network's services read, as the two bytes s and u say.
//
// IPv4: UDP (TCP for s>>5 of 7 without options) with DHCP's ports by s&3
// (67 -> 68, 68 -> 67, 67 -> 67, 68 -> 68); s>>2&3 a whole packet, a first
// fragment, or a later one (offset in either byte); s&16 options (a header
// of 6 to 13 words, whose end may lie past the frame); u&0x80 DF.
//
// IPv6: s&3 none, one, as many extension headers as the guard reads, or
// one more, of the types from s>>2&7 on (hop-by-hop, destination options,
// routing, fragment, AH; s&32: the fragment header is a later fragment's);
// then by s>>6 ICMPv6 of type by u&7 (RA and redirect among them, the
// target of an NA or NS the port's if x&16), UDP from 547 (u&1) or 546
// with the DHCPv6 message type u>>1&15, or TCP or no next header from
// port 547. Whatever lies past the payload's end is left out.
func serviceFrame(etype uint16, b []byte, x, s, u byte) {
	put := func(o int, v ...byte) {
		for i, c := range v {
			if o+i < len(b) {
				b[o+i] = c
			}
		}
	}
	switch {
	case etype == 0x0800 && len(b) >= 20:
		ihl := 5
		if s&16 != 0 {
			ihl += 1 + int(s>>5)
		}
		b[0], b[9] = 0x40|byte(ihl), 17
		if s>>5 == 7 && s&16 == 0 {
			b[9] = 6
		}
		frag := [4]uint16{0, 0x2000, 0x0001, 0x2100}[s>>2&3] // whole, first (MF), later, later with MF
		if u&0x80 != 0 {
			frag |= 0x4000
		}
		binary.BigEndian.PutUint16(b[6:], frag)
		ports := [4][2]byte{{67, 68}, {68, 67}, {67, 67}, {68, 68}}[s&3]
		put(ihl*4, 0, ports[0], 0, ports[1])
	case etype == 0x86dd && len(b) >= 40:
		types := [5]byte{0, 60, 43, 44, 51}
		next, at := 6, 40 // where the next header's number goes, where the header goes
		for i := range [4]int{0, 1, fuzzGuardExtHdrs, fuzzGuardExtHdrs + 1}[s&3] {
			t := types[(int(s>>2&7)+i)%len(types)]
			put(next, t)
			next = at
			switch t {
			case 44:
				fo := uint16(1) // offset 0, more fragments: the first
				if s&32 != 0 {
					fo = 8 << 3 // offset 8 (64 bytes), the last
				}
				put(at+1, 0, byte(fo>>8), byte(fo))
				at += 8
			case 51:
				put(at+1, 1) // (1 + 2) * 4 bytes
				at += 12
			default:
				put(at+1, 0)
				at += 8
			}
		}
		switch s >> 6 {
		case 0:
			put(next, 58)
			put(at, [8]byte{134, 137, 133, 135, 136, 131, 143, 128}[u&7], 0)
			if x&16 != 0 {
				v6 := fuzzGuardIPs[1].As16()
				put(at+8, v6[:]...)
			}
		case 1, 2:
			put(next, 17)
			if u&1 != 0 {
				put(at, 0x02, 0x23, 0x02, 0x22) // 547 -> 546
			} else {
				put(at, 0x02, 0x22, 0x02, 0x23) // 546 -> 547
			}
			put(at+8, u>>1&15)
		case 3:
			put(next, [2]byte{6, 59}[u&1])
			put(at, 0x02, 0x23, 0x02, 0x22)
			put(at+8, 2)
		}
	}
}

// guardReason is bpf/lib/ipguard.h's tr_ipguard in Go: why the guard drops
// a frame from port p (ip_guard, bound to p.guardIPs(); ra_guard;
// dhcp_guard; any of them), or TR_DROP__MAX when it passes. off is where
// the frame's payload starts after its tags, proto its EtherType. It
// follows the C check for check, in its order: where several reasons
// apply, the one the C returns first wins (ip_guard's source check before
// an RA's, an RA before ip_guard's ND rules, ip_guard's reason for what is
// hidden, then ra_guard's, then dhcp_guard's).
func guardReason(b []byte, off int, proto uint16, p fuzzPort) tbpf.DropReason {
	const (
		pass  = tbpf.TrestleTrDropReasonTR_DROP__MAX
		arpR  = tbpf.TrestleTrDropReasonTR_DROP_IPGUARD_ARP
		ndR   = tbpf.TrestleTrDropReasonTR_DROP_IPGUARD_ND
		ipR   = tbpf.TrestleTrDropReasonTR_DROP_IPGUARD_IP
		raR   = tbpf.TrestleTrDropReasonTR_DROP_RA_GUARD
		dhcpR = tbpf.TrestleTrDropReasonTR_DROP_DHCP_GUARD
	)
	ipg, ips := p.ipGuard, p.guardIPs()
	// What is not read (more tags, more extension headers, a header cut
	// short) is dropped by the first guard of the port that could be fooled.
	hidden := dhcpR
	switch {
	case ipg:
		hidden = ndR
	case p.raGuard:
		hidden = raR
	}
	at := func(o, n int) []byte {
		if o < 0 || o+n > len(b) {
			return nil
		}
		return b[o : o+n]
	}
	known := func(a []byte) bool {
		ad, _ := netip.AddrFromSlice(a)
		return slices.Contains(ips, ad.Unmap()) && (len(a) == 4 || !ad.Is4In6())
	}
	zero := func(a []byte) bool { return bytes.Equal(a, make([]byte, len(a))) }
	// ifIPG is ip_guard's reason r, or a pass on a port without ip_guard.
	ifIPG := func(r tbpf.DropReason) tbpf.DropReason {
		if ipg {
			return r
		}
		return pass
	}
	switch proto {
	case 0x0806:
		if !ipg {
			return pass
		}
		h, spa := at(off, 8), at(off+14, 4)
		if h == nil || h[2] != 8 || h[3] != 0 || h[4] != 6 || h[5] != 4 || spa == nil {
			return arpR
		}
		if zero(spa) {
			if h[6] != 0 || h[7] != 1 {
				return arpR
			}
			if spa = at(off+24, 4); spa == nil {
				return arpR
			}
		}
		if known(spa) {
			return pass
		}
		return arpR
	case 0x0800:
		h := at(off, 20)
		if h == nil || h[0]>>4 != 4 || h[0]&15 < 5 {
			return ifIPG(ipR)
		}
		ports := at(off+int(h[0]&15)*4, 4)
		udp, first := h[9] == 17, (int(h[6]&0x1f)<<8|int(h[7])) == 0
		if ipg {
			if zero(h[12:16]) {
				// 0.0.0.0: only a DHCP client's, which no guard drops.
				if !udp || !first || !bytes.Equal(ports, []byte{0, 68, 0, 67}) {
					return ipR
				}
				return pass
			}
			if !known(h[12:16]) {
				return ipR
			}
		}
		if p.dhcpGuard && udp && first && bytes.Equal(ports, []byte{0, 67, 0, 68}) {
			return dhcpR
		}
		return pass
	case 0x86dd:
		h := at(off, 40)
		if h == nil || h[0]>>4 != 6 {
			return ifIPG(ipR)
		}
		unspec := false
		if ipg {
			unspec = zero(h[8:24])
			if !unspec && !known(h[8:24]) {
				return ipR
			}
		}
		orIP := func() tbpf.DropReason { // what passes ip_guard only from a source of the port's
			if unspec {
				return ipR
			}
			return pass
		}
		nh, x := h[6], off+40
		ext := func(nh byte) bool { return nh == 0 || nh == 43 || nh == 44 || nh == 51 || nh == 60 }
		for i := 0; i < fuzzGuardExtHdrs && ext(nh); i++ {
			e := at(x, 4)
			if e == nil {
				return hidden
			}
			was := nh
			nh = e[0]
			switch was {
			case 44:
				if (int(e[2])<<8|int(e[3]))&0xfff8 != 0 {
					return orIP() // a later fragment: no transport header
				}
				x += 8
			case 51:
				x += (int(e[1]) + 2) * 4
			default:
				x += (int(e[1]) + 1) * 8
			}
		}
		if ext(nh) {
			return hidden
		}
		if nh == 17 && p.dhcpGuard {
			// From port 547, a server's or relay's reply (RFC 8415 7.3);
			// the type after the 8-byte UDP header.
			if sp, mt := at(x, 2), at(x+8, 1); sp != nil && sp[0] == 2 && sp[1] == 0x23 && mt != nil &&
				(mt[0] == 2 || mt[0] == 7 || mt[0] == 10 || mt[0] == 13) {
				return dhcpR
			}
		}
		if nh != 58 {
			return orIP()
		}
		ic := at(x, 4)
		if ic == nil {
			return hidden
		}
		if p.raGuard && (ic[0] == 134 || ic[0] == 137) {
			return raR
		}
		switch {
		case !ipg:
			return pass
		case unspec && (ic[0] == 131 || ic[0] == 143):
			return pass
		case unspec && ic[0] != 135:
			return ipR
		case !unspec && ic[0] != 136:
			return pass
		}
		if t := at(x+8, 16); t != nil && known(t) {
			return pass
		}
		return ndR
	case 0x8100, 0x88a8:
		// A third tag: what it hides is not read.
		if ipg {
			return ipR
		}
		return hidden
	}
	return pass
}

// fuzzGuardExtHdrs is TR_GUARD_EXTHDRS: the IPv6 extension headers the
// guard reads; a frame with more hides its transport header.
const fuzzGuardExtHdrs = 4

// fuzzSeeds are the seed corpus: table states and frames written out by
// hand (the cases a reader checks first), and random inputs from a fixed
// seed, which the decoder turns into mostly well-formed frames.
func fuzzSeeds() [][]byte {
	var out [][]byte
	ipv4 := func(dst, src byte) []byte { return []byte{0x00, dst, src, 0x03 << 5, 0} } // kind IPv4, 46-byte payload
	// A port is three bytes: limits and down, VLANs, policies.
	var plain [fuzzPorts][3]byte
	seed := func(b0 byte, ports [fuzzPorts][3]byte, statics [][2]byte, frames ...[]byte) []byte {
		s := []byte{b0}
		for _, p := range ports {
			s = append(s, p[:]...)
		}
		s = append(s, byte(len(statics)))
		for _, st := range statics {
			s = append(s, st[0], st[1])
		}
		s = append(s, byte(len(frames)-1))
		for _, fr := range frames {
			s = append(s, fr...)
		}
		return s
	}
	// Learn, flood, forward and hairpin in two unaware bridges of three.
	out = append(out, seed(0, plain, nil,
		append([]byte{1}, ipv4(1, 0)...), // A -> B from p1: flood
		append([]byte{2}, ipv4(0, 1)...), // B -> A from p2: forward to p1
		append([]byte{4}, ipv4(0, 2)...), // C -> A from p4: A is in the other bridge: flood
		append([]byte{1}, ipv4(1, 0)...), // A -> B again: forward to p2
	))
	// A frame from no port, a broadcast, a reserved destination.
	out = append(out, seed(0, plain, nil,
		append([]byte{0}, ipv4(1, 0)...),
		append([]byte{3}, ipv4(8, 0)...),
		append([]byte{3}, ipv4(10, 0)...),
	))
	// Bridge 1 VLAN-aware: p1 access 10, p2 access 20, p3 trunk of 10, 20
	// with native 10; tagged and untagged frames among them.
	vp := plain
	vp[0], vp[1], vp[2] = [3]byte{0, 0 << 2}, [3]byte{0, 1 << 2}, [3]byte{0, 2 | 3<<2 | 1<<6}
	tagged := func(dst, src, vidSel byte) []byte { return []byte{1 << 3, dst, src, vidSel << 2, 0x03 << 5, 0} }
	out = append(out, seed(1, vp, nil,
		append([]byte{1}, ipv4(1, 0)...),      // untagged on the access port of 10: flood in 10
		append([]byte{3}, tagged(0, 1, 1)...), // tagged 10 on the trunk to A: forward, untagged
		append([]byte{3}, tagged(0, 1, 2)...), // tagged 20 on the trunk to A: A unknown in 20: flood
		append([]byte{1}, tagged(1, 0, 1)...), // tagged on an access port: dropped
	))
	// Both bridges aware, trunks without native, a static entry on a port
	// that does not carry its VLAN, and one naming the other bridge's port.
	vp2 := vp
	vp2[2] = [3]byte{0, 2 | 3<<2}
	vp2[3], vp2[4], vp2[5] = [3]byte{0, 2 | 15<<2}, [3]byte{0, 3 << 2}, [3]byte{0, 0}
	out = append(out, seed(3, vp2, [][2]byte{{3<<4 | 1<<1, 1}, {4<<4 | 2<<1, 3}},
		append([]byte{1}, ipv4(3, 0)...),
		append([]byte{3}, ipv4(4, 1)...),
		append([]byte{4}, tagged(3, 5, 4)...),
		append([]byte{6}, ipv4(8, 6)...),
	))
	// Policies: protected ports, a port refusing broadcast, a port at its
	// address limit, a port that does not learn, a port that is down.
	pp := plain
	const pol = 0xc0
	pp[0], pp[1], pp[2], pp[3], pp[4] = [3]byte{0, 0, pol | 1}, [3]byte{0, 0, pol | 1 | 8}, [3]byte{1, 0, 0}, [3]byte{0, 0, pol | 16}, [3]byte{7 << 3, 0, 0}
	out = append(out, seed(0, pp, nil,
		append([]byte{1}, ipv4(8, 0)...),
		append([]byte{3}, ipv4(0, 2)...),
		append([]byte{3}, ipv4(0, 3)...),
		append([]byte{5}, ipv4(8, 5)...),
	))
	// One bridge of one port (bridge 2 of p6), and a full table.
	out = append(out, seed(2<<3|3<<5, plain, nil,
		append([]byte{6}, ipv4(8, 0)...),
		append([]byte{1}, ipv4(8, 1)...),
		append([]byte{2}, ipv4(8, 2)...),
		append([]byte{1}, ipv4(2, 3)...),
	))
	// ip_guard on p1 (and p2): IPv4 from its address and another, ARP from
	// its address and another, an NA of its address and of another, a DAD
	// solicitation of another's, and a frame of p3, which has none.
	gp := plain
	gp[0], gp[1] = [3]byte{0xc0, 0, 0}, [3]byte{0xc0, 0, 0}
	guarded := func(kind, x byte) []byte { return []byte{kind, 1, 0, 0x60, x} } // to B from A, 46 bytes, pattern x
	big := func(kind, x byte) []byte { return []byte{kind, 1, 0, 0xa0, x} }     // 64 bytes of payload
	out = append(out, seed(0, gp, nil,
		append([]byte{1}, guarded(0x00, 1)...),
		append([]byte{1}, guarded(0x00, 0)...),
		append([]byte{1}, guarded(0x40, 1)...),
		append([]byte{1}, guarded(0x40, 0)...),
		append([]byte{1}, big(0x20, 1|4|8|16)...),
		append([]byte{2}, big(0x20, 1|4|8)...),
		append([]byte{2}, big(0x20, 2|4)...),
		append([]byte{3}, guarded(0x00, 0)...),
	))
	// The guards of the network's services: p1 ra_guard, p2 dhcp_guard, p3
	// all three guards, p4 ip_guard and ra_guard, p5 ip_guard and
	// dhcp_guard, p6 none. A service frame is IPv6 (kind 0x20, 1500 bytes
	// of payload) or IPv4 (kind 0, 46 bytes), to B from A, its source by x
	// (0xa0 another's, 0xa1 the port's, 0xa2 unspecified), then the two
	// bytes serviceFrame reads.
	sp := plain
	sp[0], sp[1], sp[2], sp[3], sp[4] = [3]byte{0, 1, 0}, [3]byte{5, 0, 0}, [3]byte{0xc5, 1, 0}, [3]byte{0xc0, 1, 0}, [3]byte{0xc5, 0, 0}
	v6 := func(slot, x, s, u byte) []byte { return []byte{slot, 0x20, 1, 0, 0x80, x, s, u} }
	v4 := func(slot, x, s, u byte) []byte { return []byte{slot, 0x00, 1, 0, 0x60, x, s, u} }
	const ra, redirect, na = 0, 1, 4                                                   // u: ICMPv6 types
	from547 := func(typ byte) byte { return 1 | typ<<1 }                               // u: DHCPv6 from port 547
	const icmp, udp, other, later = 0, 1 << 6, 3 << 6, 32                              // s: what follows the IPv6 header
	const ext1, extAll, extHidden, fragHdr, ah = 1, 2, 3, 3 << 2, 4 << 2               // s: extension headers
	const c2s, s2s, first, laterFrag, laterMF, opts = 1, 2, 1 << 2, 2 << 2, 3 << 2, 16 // s: IPv4
	// Router advertisements and redirects, behind no, one, the most read
	// and one more extension headers, on ports with and without ra_guard.
	out = append(out, seed(0, sp, nil,
		v6(1, 0xa0, icmp, ra),            // ra_guard
		v6(1, 0xa0, icmp|ext1, redirect), // ra_guard
		v6(1, 0xa0, icmp|extAll, ra),     // ra_guard: read
		v6(1, 0xa0, icmp|extHidden, ra),  // ra_guard: hidden
		v6(1, 0xa0, icmp, na),            // goes on
		v6(4, 0xa1, icmp, ra),            // ra_guard, from the port's address
		v6(4, 0xa1, udp|extHidden, 0),    // ipguard_nd: hidden from ip_guard first
		v6(6, 0xa0, icmp|extAll, ra),     // goes on: no guard
	))
	out = append(out, seed(0, sp, nil,
		v6(4, 0xa2, icmp, ra),                                 // ra_guard before ip_guard's rule for ::
		v6(4, 0xa0, icmp, ra),                                 // ipguard_ip: the source first
		v6(4, 0xb1, icmp, na),                                 // goes on: its own target
		v6(3, 0xa1, icmp|extAll|fragHdr, redirect),            // ra_guard, behind a fragment header
		v6(3, 0xa1, icmp|ext1|fragHdr|later, ra),              // goes on: a later fragment
		[]byte{1, 0x20, 1, 0, 0xe0, 8, 0xa0, icmp | ext1, ra}, // ra_guard: the ICMPv6 header cut off
		[]byte{1, 0x38, 1, 0, 0, 0, 0, 0x80, 0xa0, icmp, na},  // ra_guard: three tags
		[]byte{2, 0x38, 1, 0, 0, 0, 0, 0x80, 0xa0, icmp, na},  // dhcp_guard: three tags
	))
	// DHCPv4 servers' and clients' messages, whole and in fragments.
	out = append(out, seed(0, sp, nil,
		v4(2, 0xa0, 0, 0),         // dhcp_guard: 67 -> 68
		v4(2, 0xa0, c2s, 0),       // goes on: 68 -> 67
		v4(2, 0xa0, first, 0),     // dhcp_guard: a first fragment
		v4(2, 0xa0, laterFrag, 0), // goes on: a later one
		v4(2, 0xa0, opts, 0x80),   // dhcp_guard: options, DF
		v4(5, 0xa2, c2s, 0),       // goes on: a client from 0.0.0.0
		v4(5, 0xa1, 0, 0),         // dhcp_guard: from the port's address
		v4(5, 0xa0, 0, 0),         // ipguard_ip: the source first
	))
	out = append(out, seed(0, sp, nil,
		v4(2, 0xa0, laterMF, 0),   // goes on
		v4(2, 0xa0, 7<<5, 0),      // goes on: TCP
		v4(2, 0xa0, s2s, 0),       // goes on: 67 -> 67
		v4(5, 0xa2, 0, 0),         // ipguard_ip: 0.0.0.0 is a client's only
		v4(3, 0xa1, 0, 0),         // dhcp_guard
		v4(2, 0xa0, opts|7<<5, 0), // goes on: the UDP header past the frame
		v4(1, 0xa0, 0, 0),         // goes on: ra_guard only
		v4(6, 0xa0, first, 0),     // goes on: no guard
	))
	// DHCPv6 servers' and relays' replies, and what is none.
	out = append(out, seed(0, sp, nil,
		v6(2, 0xa0, udp, from547(2)),                    // dhcp_guard: ADVERTISE
		v6(2, 0xa0, udp, from547(7)),                    // dhcp_guard: REPLY
		v6(2, 0xa0, udp, from547(10)),                   // dhcp_guard: RECONFIGURE
		v6(2, 0xa0, udp, from547(13)),                   // dhcp_guard: RELAY-REPL
		v6(2, 0xa0, udp, 1<<1),                          // goes on: SOLICIT from 546
		v6(2, 0xa0, udp, from547(12)),                   // goes on: RELAY-FORW
		v6(2, 0xa0, udp|ext1|fragHdr, from547(2)),       // dhcp_guard: a first fragment
		v6(2, 0xa0, udp|ext1|fragHdr|later, from547(2)), // goes on: a later one
	))
	out = append(out, seed(0, sp, nil,
		v6(1, 0xa0, udp, from547(2)),           // goes on: ra_guard only
		v6(3, 0xa1, udp|extAll, from547(7)),    // dhcp_guard
		v6(2, 0xa0, other, 0),                  // goes on: TCP from 547
		v6(2, 0xa0, udp|extHidden, from547(2)), // dhcp_guard: hidden
		v6(2, 0xa0, udp|ext1|ah, from547(2)),   // dhcp_guard: behind AH
		v6(5, 0xa0, udp, from547(2)),           // ipguard_ip: the source first
		v6(2, 0xa0, icmp, ra),                  // goes on: dhcp_guard only
		v6(2, 0xa0, icmp|extHidden, ra),        // dhcp_guard: hidden
	))
	rng := rand.New(rand.NewPCG(16, 2))
	for i := 0; i < 24; i++ {
		b := make([]byte, 40+rng.IntN(200))
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		out = append(out, b)
	}
	return out
}

// fuzzRig is the rig of FuzzPipeline: p1..p6 and p0 in a namespace of its
// own, the datapath loaded once, the table state of the last input.
type fuzzRig struct {
	t     testing.TB
	ns    *testutil.NS
	dp    *Datapath
	ifidx [fuzzPorts + 1]uint32
	topo  *fuzzTopo      // as written
	seen  map[string]int // what the frames did, by build and outcome: what a run reached
	cpus  []int          // those the process may run on; a frame runs on one of them
}

func newFuzzRig(t testing.TB) *fuzzRig {
	ns := testutil.NewNS(t, testutil.Prefix()+"fz")
	for _, k := range []string{"net/ipv6/conf/all/disable_ipv6", "net/ipv6/conf/default/disable_ipv6"} {
		if err := ns.Sysctl(k, "1"); err != nil {
			t.Fatal(err)
		}
	}
	r := &fuzzRig{t: t, ns: ns, seen: map[string]int{}}
	var cpus unix.CPUSet
	if err := unix.SchedGetaffinity(0, &cpus); err != nil {
		t.Fatal(err)
	}
	for c := 0; c < 1024; c++ {
		if cpus.IsSet(c) {
			r.cpus = append(r.cpus, c)
		}
	}
	err := ns.Do(func() error {
		for i := 0; i <= fuzzPorts; i++ {
			la := netlink.NewLinkAttrs()
			la.Name = fmt.Sprintf("p%d", i)
			v := &netlink.Veth{LinkAttrs: la, PeerName: fmt.Sprintf("q%d", i)}
			if err := netlink.LinkAdd(v); err != nil {
				return err
			}
			for _, name := range []string{la.Name, v.PeerName} {
				l, err := netlink.LinkByName(name)
				if err != nil {
					return err
				}
				if err := netlink.LinkSetUp(l); err != nil {
					return err
				}
				if name == la.Name {
					r.ifidx[i] = uint32(l.Attrs().Index)
				}
			}
		}
		// GRO on the peers: without it (or an XDP program there) a veth
		// takes no XDP redirects, and the live runs' copies go nowhere.
		et, err := ethtool.NewEthtool()
		if err != nil {
			return err
		}
		defer et.Close()
		for i := 1; i <= fuzzPorts; i++ {
			if err := et.Change(fmt.Sprintf("q%d", i), map[string]bool{"rx-gro": true}); err != nil {
				return fmt.Errorf("GRO on q%d: %w", i, err)
			}
		}
		spec, err := embeddedSpec()
		if err != nil {
			return err
		}
		dp, err := Load(Options{FDBCapacity: 1024, Refresh: time.Hour, Spec: spec})
		if err != nil {
			return err
		}
		r.dp = dp
		// Both modes' entry points without and with the VLAN stage,
		// loaded now rather than by the first input that needs them.
		for _, m := range modes {
			if _, err := dp.Program(mode.Mode(m.name)); err != nil {
				return err
			}
		}
		if err := dp.SetVLANStage(true); err != nil {
			return err
		}
		return dp.SetVLANStage(false)
	})
	if err != nil {
		t.Fatalf("set up the fuzz rig: %v", err)
	}
	t.Cleanup(func() { r.dp.Close() })
	return r
}

// apply writes the input's bridges and ports, unless they are those written;
// in the rig's namespace, where the devmaps find the interfaces.
func (r *fuzzRig) apply(t *fuzzTopo) error {
	if r.topo != nil && r.topo.equal(t) {
		return nil
	}
	r.topo = nil
	if err := r.dp.SetVLANStage(t.stage); err != nil {
		return err
	}
	for s := 1; s <= fuzzPorts; s++ {
		if err := r.dp.SetPort(t.port[s].info(r.ifidx[s], uint16(s))); err != nil {
			return err
		}
	}
	for id := uint16(1); id <= 2; id++ {
		b := BridgeInfo{ID: id, Name: fmt.Sprintf("br%d", id), MaxEntries: t.maxEntries, Policy: t.policy(id)}
		for _, s := range t.up(id) {
			b.Ports = append(b.Ports, t.port[s].info(r.ifidx[s], uint16(s)))
		}
		if t.aware[id] {
			b.VLANAware, b.VLANs = true, t.vlans(id)
		}
		if err := r.dp.SetBridge(b); err != nil {
			return err
		}
	}
	r.topo = t
	return nil
}

// reset empties the table and writes the input's static entries.
func (r *fuzzRig) reset(in *fuzzInput) error {
	es, err := r.dp.FDB()
	if err != nil {
		return err
	}
	if _, err := r.dp.DelFDBs(es); err != nil {
		return err
	}
	for _, st := range in.statics {
		e := FDBEntry{Bridge: st.bridge, VLAN: st.vlan, MAC: st.mac, Ifindex: r.ifidx[st.ifindexOf], Slot: st.slot, Static: true}
		if err := r.dp.AddFDB(e); err != nil {
			return err
		}
	}
	return nil
}

// fuzzSnap is every counter a frame may move.
type fuzzSnap struct {
	port [fuzzPorts + 1]tbpf.PortStats
	vlan map[[2]uint16]tbpf.VLANStats // by bridge, VID
}

func (r *fuzzRig) snap() (fuzzSnap, error) {
	s := fuzzSnap{vlan: map[[2]uint16]tbpf.VLANStats{}}
	for slot := range s.port {
		var err error
		if s.port[slot], err = r.dp.Stats(uint16(slot)); err != nil {
			return s, err
		}
	}
	vs, err := r.dp.VLANs()
	if err != nil {
		return s, err
	}
	for _, v := range vs {
		st, err := r.dp.VLANStats(v.Index)
		if err != nil {
			return s, err
		}
		s.vlan[[2]uint16{v.Bridge, v.VID}] = st
	}
	return s, nil
}

// exec runs one frame through the build of m on cpu, as received on slot's
// interface: in a normal test run (the verdict, and at xdp the frame as the
// program left it), or live (xdp: redirects are carried out, and the flood
// sets' devmap programs run).
func (r *fuzzRig) exec(m tmode, slot, cpu int, data []byte, live bool) (uint32, []byte, error) {
	var ret uint32
	var out []byte
	err := r.ns.Do(func() error {
		var was, one unix.CPUSet
		if err := unix.SchedGetaffinity(0, &was); err != nil {
			return err
		}
		one.Set(r.cpus[cpu%len(r.cpus)])
		if err := unix.SchedSetaffinity(0, &one); err != nil {
			return err
		}
		defer unix.SchedSetaffinity(0, &was)
		prog, err := r.dp.Program(mode.Mode(m.name))
		if err != nil {
			return err
		}
		var ctx []byte
		if m.name == "xdp" {
			ctx = make([]byte, 24) // struct xdp_md: data_end at 4, ingress_ifindex at 12
			binary.LittleEndian.PutUint32(ctx[4:], uint32(len(data)))
			binary.LittleEndian.PutUint32(ctx[12:], r.ifidx[slot])
		} else {
			ctx = make([]byte, 44) // struct __sk_buff up to ifindex at 40
			binary.LittleEndian.PutUint32(ctx[40:], r.ifidx[slot])
		}
		if live {
			for {
				_, err := progrun.Run(prog.FD(), progrun.Options{Data: data, Context: ctx, Repeat: 1, Flags: unix.BPF_F_TEST_XDP_LIVE_FRAMES})
				if !errors.Is(err, unix.EINTR) {
					return err
				}
			}
		}
		opts := &ebpf.RunOptions{Data: data, Context: ctx}
		if m.name == "xdp" {
			out = make([]byte, len(data)+64)
			opts.DataOut = out
		}
		ret, err = prog.Run(opts)
		out = opts.DataOut
		return err
	})
	return ret, out, err
}

// Actions as the counters tell them.
const (
	actDrop = iota
	actForward
	actFlood
)

var actNames = []string{"drop", "forward", "flood"}

// fuzzOutcome is what one frame did in one build.
type fuzzOutcome struct {
	refused error // the kernel's test run refused the frame
	verdict uint32
	action  int
	reason  tbpf.DropReason
	egress  int    // forward: the slot
	tx      []int  // slots whose tx moved (a flood's copies, where the build counts them)
	txDrop  []int  // slots that counted a copy they could not send (tc)
	txKnown bool   // tx holds every copy of a flood
	vlan    uint16 // the frame's FDB VLAN (classified on an aware bridge)
	learned [3]uint64
	out     []byte
	liveTx  []int // xdp floods through a program flood set: the copies of the live run
	liveRan bool
	tooLong bool // longer than the rig's veths take: the live run can send no copy
}

func (o fuzzOutcome) String() string {
	if o.refused != nil {
		return fmt.Sprintf("refused by the test run: %v", o.refused)
	}
	s := fmt.Sprintf("verdict %d, %s", o.verdict, actNames[o.action])
	switch o.action {
	case actDrop:
		s += " " + o.reason.String()
	case actForward:
		s += fmt.Sprintf(" to slot %d", o.egress)
	}
	s += fmt.Sprintf(", vlan %d, tx %v (complete %v), tx_dropped %v, learned/moved/unlearned %v", o.vlan, o.tx, o.txKnown, o.txDrop, o.learned)
	if o.liveRan {
		s += fmt.Sprintf(", live copies %v", o.liveTx)
	}
	return s
}

// copies are the slots a flood's copies were for: sent, or not sendable.
func (o fuzzOutcome) copies() []int {
	c := slices.Concat(o.tx, o.txDrop)
	slices.Sort(c)
	return c
}

// kind is what a frame did, in the words of the fuzz target's tally.
func (o fuzzOutcome) kind(in *fuzzInput, fr fuzzFrame) string {
	if o.refused != nil {
		return "refused"
	}
	where := "unaware"
	if fr.slot != 0 && in.topo.vlanAware(in.topo.port[fr.slot].bridge) {
		where = "aware"
	}
	switch o.action {
	case actDrop:
		return "drop " + o.reason.String()
	case actForward:
		return where + " forward"
	}
	if o.liveRan {
		return where + " flood (live)"
	}
	return where + " flood"
}

// reached is the tally of what frames did, sorted.
func (r *fuzzRig) reached() string {
	var out []string
	for k, n := range r.seen {
		out = append(out, fmt.Sprintf("%s: %d", k, n))
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// check runs an input's frames through both builds and checks each.
func (r *fuzzRig) check(in fuzzInput) {
	t := r.t
	t.Helper()
	prev := r.topo
	if err := r.ns.Do(func() error { return r.apply(&in.topo) }); err != nil {
		// The writes go from the last input's state to this one's.
		was := "nothing"
		if prev != nil {
			was = prev.String()
		}
		t.Fatalf("write the table state: %v\n%s\nover the state written before:\n%s", err, in.describe(nil), was)
	}
	var got [2][]fuzzOutcome
	for mi, m := range modes {
		if err := r.ns.Do(func() error { return r.reset(&in) }); err != nil {
			t.Fatalf("reset the table: %v", err)
		}
		for i, fr := range in.frames {
			o, bad := r.frame(m, &in, fr)
			got[mi] = append(got[mi], o)
			r.seen[m.name+" "+o.kind(&in, fr)]++
			if len(bad) > 0 {
				t.Fatalf("%s build, frame %d: %s\n  what it did: %s\n%s", m.name, i, strings.Join(bad, "\n  "), o, in.describe(got[:]))
			}
		}
	}
	if bad := compareBuilds(got[0], got[1]); len(bad) > 0 {
		t.Fatalf("the builds disagree: %s\n%s", strings.Join(bad, "\n  "), in.describe(got[:]))
	}
}

func (t *fuzzTopo) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "table state: aware %v, VLAN stage %v, max_entries %d\n", t.aware[1:], t.stage, t.maxEntries)
	for s := 1; s <= fuzzPorts; s++ {
		fmt.Fprintf(&b, "  slot %d: %+v\n", s, t.port[s])
	}
	return b.String()
}

// describe is the input, and what its frames did, for a failure's message.
func (in *fuzzInput) describe(got [][]fuzzOutcome) string {
	var b strings.Builder
	b.WriteString(in.topo.String())
	for _, st := range in.statics {
		fmt.Fprintf(&b, "  static: bridge %d vlan %d %s on slot %d (interface of slot %d)\n", st.bridge, st.vlan, st.mac, st.slot, st.ifindexOf)
	}
	for i, fr := range in.frames {
		fmt.Fprintf(&b, "frame %d from slot %d on cpu %d, %d bytes: %x", i, fr.slot, fr.cpu, len(fr.data), fr.data[:min(len(fr.data), 96)])
		if len(fr.data) > 96 {
			b.WriteString("...")
		}
		b.WriteString("\n")
		for mi, g := range got {
			if i < len(g) {
				fmt.Fprintf(&b, "  %s: %s\n", modes[mi].name, g[i])
			}
		}
	}
	return b.String()
}

// frame runs one frame through one build and checks what it did.
func (r *fuzzRig) frame(m tmode, in *fuzzInput, fr fuzzFrame) (fuzzOutcome, []string) {
	t := r.t
	var o fuzzOutcome
	if len(fr.data) < 14 {
		// The test run takes no frame shorter than an Ethernet header.
		o.refused = errors.New("shorter than 14 bytes")
		return o, nil
	}
	before, err := r.snap()
	if err != nil {
		t.Fatal(err)
	}
	ret, out, err := r.exec(m, fr.slot, fr.cpu, fr.data, false)
	after, serr := r.snap()
	if serr != nil {
		t.Fatal(serr)
	}
	if err != nil {
		o.refused = err
		if !errors.Is(err, unix.EINVAL) {
			return o, []string{fmt.Sprintf("test run: %v", err)}
		}
		if d := diffSnaps(before, after); d != "" {
			return o, []string{"the test run refused the frame, yet counters moved: " + d}
		}
		return o, nil
	}
	o.verdict, o.out = ret, out
	es, err := r.dp.FDB()
	if err != nil {
		t.Fatal(err)
	}
	bad := r.judge(m, in, fr, &o, before, after, es)
	if len(bad) == 0 && m.name == "xdp" && o.action == actFlood && fr.slot != 0 {
		b := in.topo.port[fr.slot].bridge
		if in.topo.vlanAware(b) || in.topo.policy(b) {
			bad = r.live(m, in, fr, &o)
		}
	}
	return o, bad
}

// liveMaxLen is the longest frame the kernel redirects at XDP into the
// rig's veths: their MTU, the Ethernet header and one VLAN tag.
const liveMaxLen = 1500 + 14 + 4

// live runs an xdp flood again with live frames, whose redirects the kernel
// carries out: the devmap program of each copy counts it where it leaves.
// Learning made the table what the first run left, so the frame floods
// the same way (storm control, which would not, is not in the family).
func (r *fuzzRig) live(m tmode, in *fuzzInput, fr fuzzFrame, o *fuzzOutcome) []string {
	before, err := r.snap()
	if err != nil {
		r.t.Fatal(err)
	}
	if _, _, err := r.exec(m, fr.slot, fr.cpu, fr.data, true); err != nil {
		return []string{fmt.Sprintf("live test run: %v", err)}
	}
	after, err := r.snap()
	if err != nil {
		r.t.Fatal(err)
	}
	o.liveRan = true
	var bad []string
	for s := 0; s <= fuzzPorts; s++ {
		d := delta(before.port[s], after.port[s])
		if d.C[tbpf.TxPackets] > 1 {
			bad = append(bad, fmt.Sprintf("live run: slot %d sent %d copies", s, d.C[tbpf.TxPackets]))
		}
		if d.C[tbpf.TxPackets] == 1 {
			o.liveTx = append(o.liveTx, s)
		}
		if s == fr.slot && (d.C[tbpf.Flooded] != 1 || sumDrops(d) != 0) {
			bad = append(bad, fmt.Sprintf("live run: did not flood again (flooded %d, drops %d)", d.C[tbpf.Flooded], sumDrops(d)))
		}
	}
	want := in.floodSet(fr, o.vlan)
	if len(o.out) > liveMaxLen {
		// The kernel redirects no frame longer than the egress MTU
		// allows (xdp_ok_fwd_dev): no copy reaches a devmap program.
		want, o.tooLong = nil, true
	}
	if !slices.Equal(o.liveTx, want) {
		bad = append(bad, fmt.Sprintf("live run: copies left by slots %v, want %v", o.liveTx, want))
	}
	return bad
}

func delta(a, b tbpf.PortStats) tbpf.PortStats {
	var d tbpf.PortStats
	for i := range d.C {
		d.C[i] = b.C[i] - a.C[i]
	}
	for i := range d.Drops {
		d.Drops[i] = b.Drops[i] - a.Drops[i]
	}
	return d
}

func sumDrops(d tbpf.PortStats) uint64 {
	var n uint64
	for _, v := range d.Drops {
		n += v
	}
	return n
}

// diffSnaps names the counters that differ, "" if none.
func diffSnaps(a, b fuzzSnap) string {
	var out []string
	for s := range a.port {
		if a.port[s] != b.port[s] {
			out = append(out, fmt.Sprintf("slot %d", s))
		}
	}
	for k, v := range b.vlan {
		if a.vlan[k] != v {
			out = append(out, fmt.Sprintf("vlan %d of bridge %d", k[1], k[0]))
		}
	}
	return strings.Join(out, ", ")
}

// parsed is the frame as the parser (bpf/lib/parse.h) reads it.
type parsed struct {
	reason tbpf.DropReason // RUNT or ETHERTYPE when malformed
	ok     bool
	outer  uint16 // TPID of the outer tag; 0: none
	tci    uint16 // its TCI
	vid    uint16 // the VID the FDB of an unaware bridge keys it by
	l3     int    // where the payload starts, after the tags
	proto  uint16 // its EtherType
	tags   int    // tags read (up to two)
}

func parseFrame(b []byte) parsed {
	p := parsed{ok: true}
	off := 14
	proto := binary.BigEndian.Uint16(b[12:])
	for i := 0; i < 2 && (proto == 0x8100 || proto == 0x88a8); i++ {
		if len(b) < off+4 {
			return parsed{reason: tbpf.TrestleTrDropReasonTR_DROP_RUNT}
		}
		if i == 0 {
			p.outer, p.tci = proto, binary.BigEndian.Uint16(b[off:])
			p.vid = p.tci & 0xfff
		}
		proto = binary.BigEndian.Uint16(b[off+2:])
		off += 4
		p.tags++
	}
	rest := len(b) - off
	need := map[uint16]int{0x0800: 20, 0x86dd: 40, 0x0806: 28}[proto]
	switch {
	case proto < 0x600 && (proto > 1500 || int(proto) > rest):
		return parsed{reason: tbpf.TrestleTrDropReasonTR_DROP_ETHERTYPE}
	case proto >= 0x600 && rest < need:
		return parsed{reason: tbpf.TrestleTrDropReasonTR_DROP_RUNT}
	}
	p.l3, p.proto = off, proto
	return p
}

func isMulticast(mac []byte) bool { return mac[0]&1 != 0 }
func isZero(mac []byte) bool      { return bytes.Equal(mac, make([]byte, 6)) }
func isReserved(mac []byte) bool {
	return bytes.Equal(mac[:5], []byte{0x01, 0x80, 0xc2, 0, 0}) && mac[5]&0xf0 == 0
}
func isBroadcast(mac []byte) bool { return bytes.Equal(mac, bytes.Repeat([]byte{0xff}, 6)) }

// refuses says whether port p keeps a flooded frame to dst from port in off.
func refuses(in, p fuzzPort, dst []byte) bool {
	switch {
	case in.protected && p.protected:
		return true
	case isBroadcast(dst):
		return p.noBcast
	case isMulticast(dst):
		return p.noMcast
	}
	return p.noFlood
}

// floodSet is where a flood of the frame in vlan goes: the up ports of its
// bridge but the ingress, that carry its VLAN (aware bridges) and take
// its kind of flood (bridges with policies).
func (in *fuzzInput) floodSet(fr fuzzFrame, vlan uint16) []int {
	t := &in.topo
	ip := t.port[fr.slot]
	var out []int
	for _, s := range t.up(ip.bridge) {
		p := t.port[s]
		if s == fr.slot || t.vlanAware(ip.bridge) && !p.carries(vlan) || t.policy(ip.bridge) && refuses(ip, p, fr.data[:6]) {
			continue
		}
		out = append(out, s)
	}
	return out
}

// judge classifies what a frame did from the counters and checks it.
func (r *fuzzRig) judge(m tmode, in *fuzzInput, fr fuzzFrame, o *fuzzOutcome, before, after fuzzSnap, fdb []FDBEntry) []string {
	var bad []string
	badf := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	t := &in.topo
	xdp := m.name == "xdp"
	verdictDrop := o.verdict == m.drop
	switch {
	case verdictDrop, o.verdict == m.redirect, !xdp && o.verdict == tcStolen:
	default:
		badf("verdict %d is none of the pipeline's actions", o.verdict)
	}

	var d [fuzzPorts + 1]tbpf.PortStats
	var drops, tx uint64
	for s := range d {
		d[s] = delta(before.port[s], after.port[s])
		drops += sumDrops(d[s])
		tx += d[s].C[tbpf.TxPackets]
		if d[s].C[tbpf.TxPackets] > 0 {
			o.tx = append(o.tx, s)
		}
		if d[s].C[tbpf.TxPackets] > 1 {
			badf("slot %d sent %d copies of one frame", s, d[s].C[tbpf.TxPackets])
		}
		switch n := d[s].C[tbpf.TxDropped]; {
		case n > 1:
			badf("slot %d could not send %d copies of one frame", s, n)
		case n == 1:
			o.txDrop = append(o.txDrop, s)
			if len(fr.data) <= 1514 {
				// The kernel refuses a clone into a veth only when it
				// is longer than the MTU allows.
				badf("slot %d could not send a copy of a %d-byte frame", s, len(fr.data))
			}
		}
	}
	for s := range d {
		if sumDrops(d[s]) > 0 {
			for reason, n := range d[s].Drops {
				if n > 0 {
					o.reason = tbpf.DropReason(reason)
				}
			}
			if s != fr.slot {
				badf("a drop counted on slot %d, not the ingress %d", s, fr.slot)
			}
		}
	}
	vd := map[[2]uint16]tbpf.VLANStats{}
	for k, v := range after.vlan {
		var dv tbpf.VLANStats
		for i := range dv.C {
			dv.C[i] = v.C[i] - before.vlan[k].C[i]
		}
		if dv != (tbpf.VLANStats{}) {
			vd[k] = dv
		}
	}

	if fr.slot == 0 {
		// From an interface that is no port: one no_port drop, nothing else.
		o.action = actDrop
		if drops != 1 || d[0].Drops[tbpf.TrestleTrDropReasonTR_DROP_NO_PORT] != 1 || !verdictDrop {
			badf("a frame from no port: drops %d, no_port %d, verdict %d", drops, d[0].Drops[tbpf.TrestleTrDropReasonTR_DROP_NO_PORT], o.verdict)
		}
		d[0].Drops[tbpf.TrestleTrDropReasonTR_DROP_NO_PORT] = 0
		if d != ([fuzzPorts + 1]tbpf.PortStats{}) || len(vd) > 0 {
			badf("a frame from no port moved counters beyond its drop")
		}
		return bad
	}

	ip := t.port[fr.slot]
	br := ip.bridge
	aware := t.vlanAware(br)
	dst, src := fr.data[:6], fr.data[6:12]
	pf := parseFrame(fr.data)

	// rx = forwarded + flooded + dropped.
	ind := d[fr.slot]
	if ind.C[tbpf.RxPackets] != 1 || ind.C[tbpf.RxBytes] != uint64(len(fr.data)) {
		badf("rx %d packets %d bytes, want 1 and %d", ind.C[tbpf.RxPackets], ind.C[tbpf.RxBytes], len(fr.data))
	}
	for s := range d {
		if s != fr.slot && (d[s].C[tbpf.RxPackets] != 0 || d[s].C[tbpf.Flooded] != 0 || d[s].C[tbpf.Learned] != 0 ||
			d[s].C[tbpf.Moved] != 0 || d[s].C[tbpf.Unlearned] != 0) {
			badf("slot %d, not the ingress, counted rx, flooded or learning: %v", s, d[s].C)
		}
	}
	flooded := ind.C[tbpf.Flooded]
	switch {
	case drops == 1 && flooded == 0 && tx == 0:
		o.action = actDrop
	case drops == 0 && flooded == 1:
		o.action = actFlood
	case drops == 0 && flooded == 0 && tx == 1:
		o.action = actForward
		o.egress = o.tx[0]
	default:
		badf("rx 1, but forwarded (tx) %d, flooded %d, dropped %d", tx, flooded, drops)
		return bad
	}
	if verdictDrop != (o.action == actDrop) {
		badf("verdict %d for a frame counted as %s", o.verdict, actNames[o.action])
	}
	if o.action == actFlood && o.verdict != m.redirect && !(xdp == false && o.verdict == tcStolen) {
		badf("a flood with verdict %d", o.verdict)
	}
	o.learned = [3]uint64{ind.C[tbpf.Learned], ind.C[tbpf.Moved], ind.C[tbpf.Unlearned]}
	if n := o.learned[0] + o.learned[1] + o.learned[2]; n > 1 {
		badf("learned %d, moved %d, unlearned %d: more than one of them", o.learned[0], o.learned[1], o.learned[2])
	}

	// The frame's VLAN: the VLAN counted as receiving it (aware), or its outer VID.
	o.vlan = pf.vid
	var classified []uint16
	for k, v := range vd {
		if k[0] != br {
			badf("VLAN %d of bridge %d counted a frame of bridge %d", k[1], k[0], br)
			continue
		}
		if v.C[tbpf.VLANRxPackets] == 1 {
			classified = append(classified, k[1])
		}
	}
	if !aware && len(vd) > 0 {
		badf("VLAN counters moved for a frame of a bridge that is not VLAN-aware: %v", vd)
	}
	if aware {
		switch len(classified) {
		case 0:
		case 1:
			o.vlan = classified[0]
		default:
			badf("classified into VLANs %v", classified)
		}
		for k, v := range vd {
			if k[0] == br && k[1] != o.vlan {
				badf("VLAN %d's counters moved for a frame of VLAN %d: %v", k[1], o.vlan, v.C)
			}
		}
		if len(classified) == 1 {
			v := vd[[2]uint16{br, o.vlan}]
			if v.C[tbpf.VLANRxBytes] != uint64(len(fr.data)) {
				badf("VLAN %d rx bytes %d, want %d", o.vlan, v.C[tbpf.VLANRxBytes], len(fr.data))
			}
			if !ip.carries(o.vlan) {
				badf("classified into VLAN %d, which the ingress port does not carry", o.vlan)
			}
			if pf.outer == 0x8100 && pf.vid != 0 {
				if o.vlan != pf.vid {
					badf("a frame tagged %d classified into VLAN %d", pf.vid, o.vlan)
				}
			} else if o.vlan != ip.pvid {
				badf("an untagged frame classified into VLAN %d, the port's untagged VLAN is %d", o.vlan, ip.pvid)
			} else if !ip.trunk && pf.tags == 2 {
				badf("a frame with a second tag behind a priority tag or an S-tag went on from an access port")
			}
			if (v.C[tbpf.VLANFlooded] == 1) != (o.action == actFlood) || v.C[tbpf.VLANFlooded] > 1 {
				badf("VLAN flooded %d for a %s", v.C[tbpf.VLANFlooded], actNames[o.action])
			}
		} else if o.action != actDrop {
			badf("a frame of a VLAN-aware bridge went on without a VLAN")
		}
	}

	// Where copies went: never the ingress, another bridge, or a port
	// outside the frame's VLAN.
	if len(o.txDrop) > 0 && o.action != actFlood {
		badf("a %s counted copies it could not send", actNames[o.action])
	}
	for _, s := range o.copies() {
		switch p := t.port[s]; {
		case s == fr.slot:
			badf("a copy went back out of its ingress, slot %d", s)
		case s == 0:
			badf("a copy was counted on slot 0 (no port)")
		case p.bridge != br:
			badf("a copy left by slot %d, a port of bridge %d, not %d", s, p.bridge, br)
		case aware && !p.carries(o.vlan):
			badf("a copy of VLAN %d left by slot %d, which does not carry it", o.vlan, s)
		}
	}

	entry := func(mac []byte) (FDBEntry, bool) {
		for _, e := range fdb {
			if e.Bridge == br && e.VLAN == o.vlan && bytes.Equal(e.MAC, mac) {
				return e, true
			}
		}
		return FDBEntry{}, false
	}
	if o.learned[0]+o.learned[1] == 1 {
		if e, ok := entry(src); !ok || e.Slot != uint16(fr.slot) || e.Ifindex != r.ifidx[fr.slot] || e.Static {
			badf("learned or moved, but the table has %+v (found %v)", e, ok)
		}
		if ip.noLearn {
			badf("a port that does not learn learned")
		}
		if ip.locked {
			badf("a locked port learned")
		}
	}
	// A frame that went on came from a source bound to its port if the
	// port is locked, and never from another port's static entry. Whose
	// an entry is, is the interface it names (as the datapath asks, and
	// dropReasonHolds): an entry whose slot names another port is still
	// the interface's.
	if o.action != actDrop && !isMulticast(src) {
		e, ok := entry(src)
		ours := ok && e.Ifindex == r.ifidx[fr.slot]
		switch {
		case ip.locked && (!ours || !e.Static):
			badf("a frame from locked slot %d went on from %s, not bound to it (%+v, found %v)", fr.slot, net.HardwareAddr(src), e, ok)
		case ok && e.Static && !ours:
			badf("a frame from slot %d went on from %s, a static entry of another interface (%+v)", fr.slot, net.HardwareAddr(src), e)
		}
	}
	if o.action != actDrop && ip.guarded() {
		if g := guardReason(fr.data, pf.l3, pf.proto, ip); g != tbpf.TrestleTrDropReasonTR_DROP__MAX {
			badf("a frame from guarded slot %d went on, but the guard drops it as %s", fr.slot, g)
		}
	}
	full := d[fr.slot].C[tbpf.UnlearnedFull]
	if full > o.learned[2] {
		badf("unlearned_full %d over unlearned %d", full, o.learned[2])
	}
	// A source the table refused (issue 29) goes on unlearned, counted
	// unlearned_full too.
	if o.learned[2] == 1 && full == 0 && !(ip.limitForward && ip.maxMACs > 0) {
		badf("unlearned on a port without mac_limit_action forward")
	}

	switch o.action {
	case actForward:
		e, ok := entry(dst)
		out := t.port[o.egress]
		switch {
		case isMulticast(dst):
			badf("a group address was forwarded as unicast")
		case !ok || int(e.Slot) != o.egress || e.Ifindex != r.ifidx[o.egress]:
			badf("forwarded to slot %d, the table says %+v (found %v)", o.egress, e, ok)
		case ip.protected && out.protected:
			badf("forwarded between protected ports")
		}
		if xdp {
			if want := egressBytes(fr.data, pf, aware, out, o.vlan); !bytes.Equal(o.out, want) {
				badf("left as\n    %x\n  want\n    %x", o.out, want)
			}
		}
	case actFlood:
		if e, ok := entry(dst); ok && !isMulticast(dst) {
			badf("flooded a frame whose destination the table holds: %+v", e)
		}
		want := in.floodSet(fr, o.vlan)
		// Where each build counts the copies in a test run: tc sends
		// them; xdp counts them itself only in an unaware bridge without
		// policies (else the devmap programs do, checked live).
		o.txKnown = !xdp || !aware && !t.policy(br)
		if o.txKnown && !slices.Equal(o.copies(), want) {
			badf("flooded to slots %v (and could not send to %v), want %v", o.tx, o.txDrop, want)
		}
		if xdp {
			want := fr.data
			if aware {
				want = egressBytes(fr.data, pf, true, fuzzPort{trunk: true}, o.vlan)
			}
			if !bytes.Equal(o.out, want) {
				badf("flooded as\n    %x\n  want\n    %x", o.out, want)
			}
		}
	case actDrop:
		bad = append(bad, in.dropReasonHolds(fr, o, pf, fdb, r.ifidx[fr.slot])...)
	}
	return bad
}

// egressBytes is the frame as it leaves port out in vlan: an unaware
// bridge's unchanged; an aware bridge's without its 802.1Q tag where out
// takes the VLAN untagged, else with an outer 802.1Q tag of the VLAN (the
// frame's own, its VID rewritten, or a new one with PCP 0).
func egressBytes(b []byte, pf parsed, aware bool, out fuzzPort, vlan uint16) []byte {
	if !aware {
		return b
	}
	ctag := pf.outer == 0x8100
	if !out.trunk || out.pvid == vlan {
		if ctag {
			return append(append([]byte{}, b[:12]...), b[16:]...)
		}
		return b
	}
	if ctag {
		o := append([]byte{}, b...)
		binary.BigEndian.PutUint16(o[14:], pf.tci&0xf000|vlan)
		return o
	}
	o := append([]byte{}, b[:12]...)
	o = binary.BigEndian.AppendUint16(o, 0x8100)
	o = binary.BigEndian.AppendUint16(o, vlan)
	return append(o, b[12:]...)
}

// dropReasonHolds checks that a drop's reason is true of the frame.
func (in *fuzzInput) dropReasonHolds(fr fuzzFrame, o *fuzzOutcome, pf parsed, fdb []FDBEntry, ingress uint32) []string {
	t := &in.topo
	ip := t.port[fr.slot]
	br := ip.bridge
	dst, src := fr.data[:6], fr.data[6:12]
	nobr := len(t.up(br)) == 0
	var why string
	switch o.reason {
	case tbpf.TrestleTrDropReasonTR_DROP_NO_BRIDGE:
		if !nobr {
			why = "its bridge has ports up"
		}
	case tbpf.TrestleTrDropReasonTR_DROP_RUNT, tbpf.TrestleTrDropReasonTR_DROP_ETHERTYPE:
		// VLAN ingress reads the outer tag too, and calls a short one runt.
		if pf.ok || pf.reason != o.reason {
			why = fmt.Sprintf("the parser's rules say %v (ok %v)", pf.reason, pf.ok)
		}
	case tbpf.TrestleTrDropReasonTR_DROP_BAD_SRC:
		if !isMulticast(src) && !isZero(src) {
			why = "its source is a station"
		}
	case tbpf.TrestleTrDropReasonTR_DROP_RESERVED:
		if !isReserved(dst) {
			why = "its destination is no reserved address"
		}
	case tbpf.TrestleTrDropReasonTR_DROP_HAIRPIN:
		found := false
		for _, e := range fdb {
			if e.Bridge == br && e.VLAN == o.vlan && bytes.Equal(e.MAC, dst) && e.Ifindex == ingress {
				found = true
			}
		}
		if !found {
			why = "its destination does not live on its ingress"
		}
	case tbpf.TrestleTrDropReasonTR_DROP_MAC_LIMIT:
		if ip.maxMACs == 0 || ip.limitForward {
			why = "its port has no max_macs that drops"
		}
	case tbpf.TrestleTrDropReasonTR_DROP_TABLE_FULL, tbpf.TrestleTrDropReasonTR_DROP_NO_EGRESS:
	case tbpf.TrestleTrDropReasonTR_DROP_VLAN_UNTAGGED, tbpf.TrestleTrDropReasonTR_DROP_VLAN_TAGGED,
		tbpf.TrestleTrDropReasonTR_DROP_VLAN_NOT_CARRIED, tbpf.TrestleTrDropReasonTR_DROP_VLAN_EGRESS:
		if !t.vlanAware(br) {
			why = "its bridge is not VLAN-aware"
		}
	case tbpf.TrestleTrDropReasonTR_DROP_DOUBLE_TAGGED:
		switch {
		case !t.vlanAware(br) || ip.trunk:
			why = "its port is no access port of a VLAN-aware bridge"
		case pf.tags < 2 || pf.outer == 0x8100 && pf.vid != 0:
			why = "it has no second tag behind a priority tag or an S-tag"
		}
	case tbpf.TrestleTrDropReasonTR_DROP_PROTECTED:
		if !ip.protected {
			why = "its port is not protected"
		}
	case tbpf.TrestleTrDropReasonTR_DROP_LOCKED, tbpf.TrestleTrDropReasonTR_DROP_SRC_STATIC:
		// Bound: a static entry of the ingress; another's: of another port.
		bound, other := false, false
		for _, e := range fdb {
			if e.Bridge == br && e.VLAN == o.vlan && bytes.Equal(e.MAC, src) && e.Static {
				bound, other = e.Ifindex == ingress, e.Ifindex != ingress
			}
		}
		switch {
		case o.reason == tbpf.TrestleTrDropReasonTR_DROP_LOCKED && !ip.locked:
			why = "its port is not locked"
		case o.reason == tbpf.TrestleTrDropReasonTR_DROP_LOCKED && bound:
			why = "its source is a static entry of its port"
		case o.reason == tbpf.TrestleTrDropReasonTR_DROP_SRC_STATIC && !other:
			why = "its source is no static entry of another port"
		case o.reason == tbpf.TrestleTrDropReasonTR_DROP_SRC_STATIC && ip.locked:
			why = "its port is locked, which decides first"
		}
	case tbpf.TrestleTrDropReasonTR_DROP_IPGUARD_ARP, tbpf.TrestleTrDropReasonTR_DROP_IPGUARD_ND, tbpf.TrestleTrDropReasonTR_DROP_IPGUARD_IP,
		tbpf.TrestleTrDropReasonTR_DROP_RA_GUARD, tbpf.TrestleTrDropReasonTR_DROP_DHCP_GUARD:
		if !ip.guarded() {
			why = "its port has no guard"
		} else if g := guardReason(fr.data, pf.l3, pf.proto, ip); g == tbpf.TrestleTrDropReasonTR_DROP__MAX {
			why = "the guard passes it"
		} else if g != o.reason {
			why = fmt.Sprintf("the guard says %s", g)
		}
	default:
		why = "no port or bridge of the table state has what it takes"
	}
	var bad []string
	if why != "" {
		bad = append(bad, fmt.Sprintf("dropped as %s, but %s", o.reason, why))
	}
	// The checklist's first steps, in order: a frame that fails one is
	// dropped for it, whatever else is wrong with it.
	switch {
	case nobr:
		if o.reason != tbpf.TrestleTrDropReasonTR_DROP_NO_BRIDGE {
			bad = append(bad, "a frame of a bridge with no port up was not dropped as no_bridge")
		}
	case !pf.ok:
		if o.reason != pf.reason && o.reason != tbpf.TrestleTrDropReasonTR_DROP_RUNT {
			bad = append(bad, fmt.Sprintf("a malformed frame (%s) dropped as %s", pf.reason, o.reason))
		}
	case ip.guarded() && !beforeGuard[o.reason]:
		// The guard (step 3b) drops what it drops before anything later
		// in the checklist looks at the frame.
		if g := guardReason(fr.data, pf.l3, pf.proto, ip); g != tbpf.TrestleTrDropReasonTR_DROP__MAX && g != o.reason {
			bad = append(bad, fmt.Sprintf("a frame the guard drops as %s was dropped as %s, a later step's reason", g, o.reason))
		}
	}
	return bad
}

// beforeGuard are the reasons of the checklist's steps before the guard's:
// which port and bridge, the parser, the VLAN's ingress, the source.
var beforeGuard = map[tbpf.DropReason]bool{
	tbpf.TrestleTrDropReasonTR_DROP_NO_BRIDGE: true, tbpf.TrestleTrDropReasonTR_DROP_RUNT: true,
	tbpf.TrestleTrDropReasonTR_DROP_ETHERTYPE: true, tbpf.TrestleTrDropReasonTR_DROP_VLAN_UNTAGGED: true,
	tbpf.TrestleTrDropReasonTR_DROP_VLAN_TAGGED: true, tbpf.TrestleTrDropReasonTR_DROP_VLAN_NOT_CARRIED: true,
	tbpf.TrestleTrDropReasonTR_DROP_DOUBLE_TAGGED: true, tbpf.TrestleTrDropReasonTR_DROP_BAD_SRC: true,
}

// compareBuilds says where the xdp and the tc build decided otherwise. It
// stops at the first frame one build's test run refused: the tables part there.
func compareBuilds(x, c []fuzzOutcome) []string {
	var bad []string
	for i := range x {
		a, b := x[i], c[i]
		if a.refused != nil || b.refused != nil {
			break
		}
		if a.action != b.action || a.action == actDrop && a.reason != b.reason || a.action == actForward && a.egress != b.egress ||
			a.vlan != b.vlan || a.learned != b.learned {
			bad = append(bad, fmt.Sprintf("frame %d: xdp: %s; tc: %s", i, a, b))
			break
		}
		if a.action == actFlood {
			xs := a.tx
			if a.liveRan {
				xs = a.liveTx
			}
			if (a.txKnown || a.liveRan && !a.tooLong) && !slices.Equal(xs, b.copies()) {
				bad = append(bad, fmt.Sprintf("frame %d: flooded to %v at xdp, %v at tc", i, xs, b.copies()))
				break
			}
		}
	}
	return bad
}
