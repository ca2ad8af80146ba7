package datapath

import (
	"encoding/binary"
	"os"

	"errors"
	"fmt"
	"golang.org/x/sys/unix"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"

	tbpf "github.com/trestle/trestle/internal/bpf"
	"github.com/trestle/trestle/internal/clsact"
	"github.com/trestle/trestle/internal/mode"
	"github.com/trestle/trestle/internal/testutil"
)

// Datapath table tests: a frame and a map setup in, a verdict and counters out,
// through BPF_PROG_TEST_RUN, for the XDP and the tc build of the pipeline. The
// ports are veth pairs in a namespace of the test's own, because devmaps and
// the test run's ingress interface need real interfaces.

const (
	xdpDrop     = 1
	xdpRedirect = 4
	tcShot      = 2
	tcRedirect  = 7
)

type tmode struct {
	name     string
	drop     uint32
	redirect uint32
}

var modes = []tmode{
	{"xdp", xdpDrop, xdpRedirect},
	{"tc", tcShot, tcRedirect},
}

var (
	macA  = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x0a}
	macB  = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x0b}
	macC  = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x0c}
	macD  = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x0d}
	bcast = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
)

func frame(dst, src net.HardwareAddr, etype uint16, payloadLen int) []byte {
	b := make([]byte, 14+payloadLen)
	copy(b, dst)
	copy(b[6:], src)
	binary.BigEndian.PutUint16(b[12:], etype)
	return b
}

func ipv4(dst, src net.HardwareAddr) []byte { return frame(dst, src, 0x0800, 46) }

// embeddedSpec is the embedded program, read once for the package's tests:
// Load copies the spec it is given, and reading the object anew for each
// of the few hundred rigs was a tenth of a second of CPU each.
var embeddedSpec = sync.OnceValues(tbpf.LoadTrestle)

// rigSpecEdit, when set (by a test, and unset after it), changes the spec
// newRig loads: a smaller map, say.
var rigSpecEdit func(*ebpf.CollectionSpec)

// rig is one bridge of three ports (slots 1-3) plus an interface that is no port.
type rig struct {
	t    testing.TB
	ns   *testutil.NS
	dp   *Datapath
	m    tmode
	port [4]uint32 // ifindex by slot; [0] is the stranger
	// pooled: dp is the embedded program's, which goes to the rig pool
	// when the test ends (rigpool_test.go).
	pooled bool
}

func newRig(t testing.TB, m tmode, maxEntries uint32, maxMACs [4]uint32) *rig {
	testutil.RequireRoot(t)
	ns := testutil.NewNS(t, testutil.Prefix()+"dp")
	// No IPv6: the peers' own solicitations would reach ports that a test
	// attaches for real, and be counted.
	for _, k := range []string{"net/ipv6/conf/all/disable_ipv6", "net/ipv6/conf/default/disable_ipv6"} {
		if err := ns.Sysctl(k, "1"); err != nil {
			t.Fatal(err)
		}
	}
	r := &rig{t: t, ns: ns, m: m}
	err := ns.Do(func() error {
		for i := 0; i < 4; i++ {
			la := netlink.NewLinkAttrs()
			la.Name = fmt.Sprintf("p%d", i)
			v := &netlink.Veth{LinkAttrs: la, PeerName: fmt.Sprintf("q%d", i)}
			if err := netlink.LinkAdd(v); err != nil {
				return err
			}
			l, err := netlink.LinkByName(la.Name)
			if err != nil {
				return err
			}
			peer, err := netlink.LinkByName(v.PeerName)
			if err != nil {
				return err
			}
			if err := netlink.LinkSetUp(l); err != nil {
				return err
			}
			if err := netlink.LinkSetUp(peer); err != nil {
				return err
			}
			r.port[i] = uint32(l.Attrs().Index)
		}
		embedded, err := embeddedSpec()
		if err != nil {
			return err
		}
		spec := benchSpec(t)
		if spec == nil {
			spec = embedded
		}
		if rigSpecEdit != nil {
			spec = spec.Copy()
			rigSpecEdit(spec)
		}
		pooled := spec == embedded && rigSpecEdit == nil
		dp := (*Datapath)(nil)
		if pooled {
			dp = pooledDatapath()
		}
		if dp == nil {
			if dp, err = Load(Options{FDBCapacity: rigCapacity, Refresh: rigRefresh, Spec: spec}); err != nil {
				return err
			}
		}
		r.dp, r.pooled = dp, pooled
		var ports []PortInfo
		for slot := 1; slot <= 3; slot++ {
			p := PortInfo{Ifindex: r.port[slot], Bridge: 1, Slot: uint16(slot), MaxMACs: maxMACs[slot]}
			if err := dp.SetPort(p); err != nil {
				return err
			}
			ports = append(ports, p)
		}
		return dp.SetBridge(BridgeInfo{ID: 1, Name: "br0", MaxEntries: maxEntries, Ports: ports})
	})
	if err != nil {
		t.Fatalf("set up rig: %v", err)
	}
	// A test may put a datapath of its own in r.dp (a pinned one, say):
	// only the one made or taken here goes to the pool.
	made := r.dp
	t.Cleanup(func() {
		switch {
		case r.dp != nil && r.pooled && r.dp == made:
			releaseDatapath(r.dp, rigCapacity, r.ns)
		case r.dp != nil:
			r.dp.Close()
		}
	})
	return r
}

// rigCapacity is the rig's learning table's size, rigRefresh its refresh
// interval.
const (
	rigCapacity = 1024
	rigRefresh  = time.Hour
)

// run sends one frame into the pipeline as if received on the port in slot.
func (r *rig) run(slot int, data []byte) uint32 {
	r.t.Helper()
	return r.runProg(r.prog(), slot, data)
}

// prog is the entry point of the rig's mode that attachments get now.
func (r *rig) prog() *ebpf.Program {
	r.t.Helper()
	return program(r.t, r.dp, r.m)
}

// program is dp's entry point of mode m that attachments get now, loaded
// if this is its first use.
func program(t testing.TB, dp *Datapath, m tmode) *ebpf.Program {
	t.Helper()
	p, err := dp.Program(mode.Mode(m.name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// runProg is run through prog, an entry point of the rig's mode.
func (r *rig) runProg(prog *ebpf.Program, slot int, data []byte) uint32 {
	r.t.Helper()
	var ret uint32
	// Every run on one CPU: the learning cache is per CPU, and the tests
	// must meet it, not sometimes miss it by moving.
	err := r.ns.Do(func() error {
		return onCPU0(func() error {
			opts := &ebpf.RunOptions{Data: data}
			if r.m.name == "xdp" {
				ctx := make([]byte, 24) // struct xdp_md: data_end at 4, ingress_ifindex at 12
				binary.LittleEndian.PutUint32(ctx[4:], uint32(len(data)))
				binary.LittleEndian.PutUint32(ctx[12:], r.port[slot])
				opts.Context = ctx
			} else {
				ctx := make([]byte, 44) // struct __sk_buff up to ifindex at 40
				binary.LittleEndian.PutUint32(ctx[40:], r.port[slot])
				opts.Context = ctx
			}
			var err error
			ret, err = prog.Run(opts)
			return err
		})
	})
	if err != nil {
		r.t.Fatalf("test run: %v", err)
	}
	return ret
}

// onCPU0 runs f with the calling thread on CPU 0: the memos are per CPU,
// and a test must meet the one it made.
func onCPU0(f func() error) error {
	var was, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &was); err != nil {
		return err
	}
	one.Set(0)
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		return err
	}
	defer unix.SchedSetaffinity(0, &was)
	return f()
}

func (r *rig) stats(slot int) tbpf.PortStats {
	r.t.Helper()
	s, err := r.dp.Stats(uint16(slot))
	if err != nil {
		r.t.Fatal(err)
	}
	return s
}

func (r *rig) drops(slot int, reason tbpf.DropReason) uint64 {
	return r.stats(slot).Drops[reason]
}

func (r *rig) lookup(mac net.HardwareAddr) (FDBEntry, bool) {
	r.t.Helper()
	es, err := r.dp.FDB()
	if err != nil {
		r.t.Fatal(err)
	}
	for _, e := range es {
		if e.MAC.String() == mac.String() {
			return e, true
		}
	}
	return FDBEntry{}, false
}

func (r *rig) wantVerdict(got, want uint32, what string) {
	r.t.Helper()
	if got != want {
		r.t.Fatalf("%s: verdict %d, want %d", what, got, want)
	}
}

func forEachMode(t *testing.T, f func(t *testing.T, m tmode)) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) { f(t, m) })
	}
}

func TestDropReasons(t *testing.T) {
	cases := []struct {
		name   string
		slot   int
		frame  []byte
		reason tbpf.DropReason
		// The kernel's test run refuses skbs whose IPv4 header is cut short,
		// so tc sees this case only in the namespace tests.
		notTC bool
	}{
		{"no port", 0, ipv4(macB, macA), tbpf.TrestleTrDropReasonTR_DROP_NO_PORT, false},
		{"runt ipv4", 1, frame(macB, macA, 0x0800, 10), tbpf.TrestleTrDropReasonTR_DROP_RUNT, true},
		{"runt arp", 1, frame(bcast, macA, 0x0806, 27), tbpf.TrestleTrDropReasonTR_DROP_RUNT, false},
		{"runt vlan tag", 1, frame(macB, macA, 0x8100, 2), tbpf.TrestleTrDropReasonTR_DROP_RUNT, false},
		{"runt ipv6 in vlan", 1, append(frame(macB, macA, 0x8100, 0), 0, 10, 0x86, 0xdd, 1, 2, 3), tbpf.TrestleTrDropReasonTR_DROP_RUNT, false},
		{"ethertype neither length nor type", 1, frame(macB, macA, 0x05ff, 46), tbpf.TrestleTrDropReasonTR_DROP_ETHERTYPE, false},
		{"802.3 length past the end", 1, frame(macB, macA, 1500, 46), tbpf.TrestleTrDropReasonTR_DROP_ETHERTYPE, false},
		{"multicast source", 1, ipv4(macB, net.HardwareAddr{0x03, 0, 0, 0, 0, 1}), tbpf.TrestleTrDropReasonTR_DROP_BAD_SRC, false},
		{"zero source", 1, ipv4(macB, make(net.HardwareAddr, 6)), tbpf.TrestleTrDropReasonTR_DROP_BAD_SRC, false},
		{"stp", 1, frame(net.HardwareAddr{0x01, 0x80, 0xc2, 0, 0, 0}, macA, 0x0026, 46), tbpf.TrestleTrDropReasonTR_DROP_RESERVED, false},
		{"lldp", 1, frame(net.HardwareAddr{0x01, 0x80, 0xc2, 0, 0, 0x0e}, macA, 0x88cc, 46), tbpf.TrestleTrDropReasonTR_DROP_RESERVED, false},
	}
	forEachMode(t, func(t *testing.T, m tmode) {
		r := newRig(t, m, 1024, [4]uint32{})
		for _, c := range cases {
			if c.notTC && m.name == "tc" {
				continue
			}
			before := r.drops(c.slot, c.reason)
			r.wantVerdict(r.run(c.slot, c.frame), m.drop, c.name)
			if got := r.drops(c.slot, c.reason) - before; got != 1 {
				t.Errorf("%s: %s drops went up by %d, want 1", c.name, c.reason, got)
			}
		}
		if _, ok := r.lookup(macA); ok {
			t.Errorf("a dropped frame's source was learned")
		}
		// A well-formed 802.3 frame (length within the frame) still passes.
		r.wantVerdict(r.run(1, frame(macB, macA, 46, 46)), m.redirect, "802.3 frame")
	})
}

func TestLearnFloodForward(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := newRig(t, m, 1024, [4]uint32{})

		// Unknown unicast from A on port 1: learned, flooded to 2 and 3.
		r.wantVerdict(r.run(1, ipv4(macB, macA)), m.redirect, "unknown unicast")
		e, ok := r.lookup(macA)
		if !ok || e.Slot != 1 || e.Ifindex != r.port[1] || e.Static {
			t.Fatalf("A after first frame: %+v (found %v), want learned on slot 1", e, ok)
		}
		s1 := r.stats(1)
		if s1.C[tbpf.RxPackets] != 1 || s1.C[tbpf.Learned] != 1 || s1.C[tbpf.Flooded] != 1 {
			t.Errorf("port 1 after flood: rx %d learned %d flooded %d, want 1 1 1", s1.C[tbpf.RxPackets], s1.C[tbpf.Learned], s1.C[tbpf.Flooded])
		}
		for _, slot := range []int{2, 3} {
			if s := r.stats(slot); s.C[tbpf.TxPackets] != 1 || s.C[tbpf.TxBytes] != 60 {
				t.Errorf("port %d after flood: tx %d packets %d bytes, want 1 and 60", slot, s.C[tbpf.TxPackets], s.C[tbpf.TxBytes])
			}
		}
		if s1.C[tbpf.TxPackets] != 0 {
			t.Errorf("flood counted a transmit on the ingress port")
		}

		// B answers from port 2: A is known, so only port 1 gets it.
		r.wantVerdict(r.run(2, ipv4(macA, macB)), m.redirect, "known unicast")
		if s := r.stats(2); s.C[tbpf.Flooded] != 0 || s.C[tbpf.Learned] != 1 {
			t.Errorf("port 2: flooded %d learned %d, want 0 and 1", s.C[tbpf.Flooded], s.C[tbpf.Learned])
		}
		if s := r.stats(1); s.C[tbpf.TxPackets] != 1 {
			t.Errorf("port 1 tx %d, want 1", s.C[tbpf.TxPackets])
		}
		if s := r.stats(3); s.C[tbpf.TxPackets] != 1 {
			t.Errorf("port 3 got the known unicast too: tx %d, want 1", s.C[tbpf.TxPackets])
		}

		// Broadcast floods; a known source is not learned twice.
		r.wantVerdict(r.run(1, frame(bcast, macA, 0x0806, 28)), m.redirect, "broadcast")
		if s := r.stats(1); s.C[tbpf.Learned] != 1 || s.C[tbpf.Flooded] != 2 {
			t.Errorf("port 1 after broadcast: learned %d flooded %d, want 1 and 2", s.C[tbpf.Learned], s.C[tbpf.Flooded])
		}

		// To a station on the ingress port: dropped as hairpin.
		r.run(1, ipv4(macC, macD)) // D on port 1
		r.wantVerdict(r.run(1, ipv4(macD, macA)), m.drop, "hairpin")
		if got := r.drops(1, tbpf.TrestleTrDropReasonTR_DROP_HAIRPIN); got != 1 {
			t.Errorf("hairpin drops %d, want 1", got)
		}
	})
}

func TestRefreshIsNotAWrite(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := newRig(t, m, 1024, [4]uint32{})
		r.run(1, ipv4(macB, macA))
		e1, _ := r.lookup(macA)
		time.Sleep(20 * time.Millisecond)
		r.run(1, ipv4(macB, macA))
		e2, _ := r.lookup(macA)
		// Refresh is an hour in this rig: a second frame must not touch the entry.
		if e2.Age < e1.Age {
			t.Errorf("entry was rewritten by a frame from a known, fresh source (age %v then %v)", e1.Age, e2.Age)
		}
	})
}

func TestMoveAndStatic(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := newRig(t, m, 1024, [4]uint32{})
		r.run(1, ipv4(macB, macA))
		r.wantVerdict(r.run(2, ipv4(macB, macA)), m.redirect, "moved source")
		e, _ := r.lookup(macA)
		if e.Slot != 2 {
			t.Errorf("A after moving: slot %d, want 2", e.Slot)
		}
		if s := r.stats(2); s.C[tbpf.Moved] != 1 || s.C[tbpf.Learned] != 0 {
			t.Errorf("port 2: moved %d learned %d, want 1 and 0", s.C[tbpf.Moved], s.C[tbpf.Learned])
		}

		// A static entry for C on port 3 wins over learning from port 2,
		// and the frame that tried is dropped (issue 29).
		err := r.ns.Do(func() error {
			return r.dp.AddFDB(FDBEntry{Bridge: 1, MAC: macC, Ifindex: r.port[3], Slot: 3, Static: true})
		})
		if err != nil {
			t.Fatal(err)
		}
		r.wantVerdict(r.run(2, ipv4(macD, macC)), m.drop, "static source from elsewhere")
		if got := r.drops(2, tbpf.TrestleTrDropReasonTR_DROP_SRC_STATIC); got != 1 {
			t.Errorf("src_static drops on port 2: %d, want 1", got)
		}
		e, _ = r.lookup(macC)
		if !e.Static || e.Slot != 3 {
			t.Errorf("static C after a frame from port 2: %+v, want static on slot 3", e)
		}
		if s := r.stats(2); s.C[tbpf.Moved] != 1 {
			t.Errorf("a static entry was counted as moved")
		}
		// And it forwards to its port.
		before := r.stats(3).C[tbpf.TxPackets]
		r.wantVerdict(r.run(1, ipv4(macC, macD)), m.redirect, "to static")
		if r.stats(3).C[tbpf.TxPackets] != before+1 {
			t.Errorf("frame to static C did not go out of port 3")
		}
	})
}

func TestLimits(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := newRig(t, m, 3, [4]uint32{0, 1, 0, 0})
		// Port 1 may hold one address.
		r.wantVerdict(r.run(1, ipv4(bcast, macA)), m.redirect, "first address")
		r.wantVerdict(r.run(1, ipv4(bcast, macB)), m.drop, "second address over max_macs")
		if got := r.drops(1, tbpf.TrestleTrDropReasonTR_DROP_MAC_LIMIT); got != 1 {
			t.Errorf("mac_limit drops %d, want 1", got)
		}
		if _, ok := r.lookup(macB); ok {
			t.Errorf("address over the port limit was learned")
		}
		// The known address still passes.
		r.wantVerdict(r.run(1, ipv4(bcast, macA)), m.redirect, "known address at the limit")

		// The bridge holds three, its high-water mark two (issue 29): A,
		// then C on port 2; D on port 2, which holds its fair share (one),
		// is forwarded unlearned; E on port 3, under its share, takes the
		// last room; F finds the table full and is forwarded unlearned.
		r.run(2, ipv4(bcast, macC))
		r.wantVerdict(r.run(2, ipv4(bcast, macD)), m.redirect, "port at its fair share past the mark")
		r.wantVerdict(r.run(3, ipv4(bcast, macE)), m.redirect, "port under its fair share past the mark")
		r.wantVerdict(r.run(3, ipv4(bcast, macF)), m.redirect, "bridge table full")
		r.wantEntry(macD, 0, false, "past the mark, at the fair share")
		r.wantEntry(macE, 3, false, "past the mark, under the fair share")
		r.wantEntry(macF, 0, false, "table full")
		for slot, want := range map[int]uint64{2: 1, 3: 1} {
			s := r.stats(slot)
			if s.C[tbpf.UnlearnedFull] != want || s.C[tbpf.Unlearned] != want {
				t.Errorf("port %d: unlearned_full %d unlearned %d, want %d", slot, s.C[tbpf.UnlearnedFull], s.C[tbpf.Unlearned], want)
			}
			r.wantDrops(slot, tbpf.TrestleTrDropReasonTR_DROP_TABLE_FULL, 0, "a full table forwards")
		}
	})
}

func TestDropNamesComplete(t *testing.T) {
	seen := map[string]bool{}
	for i, n := range tbpf.DropNames() {
		if n == "" || n == fmt.Sprintf("drop_%d", i) || seen[n] {
			t.Errorf("drop reason %d has no unique name (%q)", i, n)
		}
		seen[n] = true
	}
}

func TestDelPortUnknownIsNoError(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := newRig(t, m, 16, [4]uint32{})
		err := r.ns.Do(func() error { return r.dp.DelPort(r.port[0], 0) })
		if err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			t.Fatal(err)
		}
	})
}

func tagged(dst, src net.HardwareAddr, vid uint16) []byte {
	b := frame(dst, src, 0x8100, 4+46)
	binary.BigEndian.PutUint16(b[14:], vid)
	binary.BigEndian.PutUint16(b[16:], 0x0800)
	return b
}

// An address is learned per VLAN: the same MAC in two VLANs is two entries,
// and a destination known only in another VLAN is unknown here.
func TestLearningPerVLAN(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := newRig(t, m, 1024, [4]uint32{})
		r.wantVerdict(r.run(1, tagged(macB, macA, 10)), m.redirect, "tagged unknown unicast")
		r.wantVerdict(r.run(2, tagged(macB, macA, 20)), m.redirect, "same MAC in another VLAN")
		es, err := r.dp.FDB()
		if err != nil {
			t.Fatal(err)
		}
		got := map[uint16]uint16{}
		for _, e := range es {
			if e.MAC.String() == macA.String() {
				got[e.VLAN] = e.Slot
			}
		}
		if len(got) != 2 || got[10] != 1 || got[20] != 2 {
			t.Errorf("A's entries by VLAN: %v, want vlan 10 on slot 1 and vlan 20 on slot 2", got)
		}
		if s := r.stats(2); s.C[tbpf.Moved] != 0 || s.C[tbpf.Learned] != 1 {
			t.Errorf("the same MAC in another VLAN counted as a move: %+v", s)
		}
		// To A in VLAN 10 goes to port 1 only; to A untagged is unknown: flooded.
		before := r.stats(1).C[tbpf.Flooded]
		r.wantVerdict(r.run(3, tagged(macA, macC, 10)), m.redirect, "known in vlan 10")
		if r.stats(3).C[tbpf.Flooded] != 0 {
			t.Errorf("a frame to a MAC known in its VLAN was flooded")
		}
		r.wantVerdict(r.run(3, ipv4(macA, macC)), m.redirect, "untagged to a MAC known only tagged")
		if r.stats(3).C[tbpf.Flooded] != 1 || r.stats(1).C[tbpf.Flooded] != before {
			t.Errorf("untagged frame to a MAC learned only in VLANs was not flooded")
		}
	})
}

// The learning cache (bpf/lib/fdb.h) must never change what the table says:
// a deleted entry is learned again by the next frame, and a station that
// moves back and forth is seen moving every time.
func TestLearningCacheHidesNothing(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := newRig(t, m, 1024, [4]uint32{})
		for i := 0; i < 3; i++ {
			r.run(1, ipv4(bcast, macA))
		}
		if s := r.stats(1); s.C[tbpf.Learned] != 1 {
			t.Fatalf("A learned %d times from one port, want 1", s.C[tbpf.Learned])
		}
		// The control plane deletes A (a flush, aging, trestle fdb del).
		if err := r.ns.Do(func() error { _, err := r.dp.DelFDB(1, 0, macA); return err }); err != nil {
			t.Fatal(err)
		}
		r.run(1, ipv4(bcast, macA))
		if _, ok := r.lookup(macA); !ok || r.stats(1).C[tbpf.Learned] != 2 {
			t.Errorf("A was not learned again after its entry was deleted (learned %d)", r.stats(1).C[tbpf.Learned])
		}
		// Back and forth between ports 1 and 2: three moves.
		r.run(2, ipv4(bcast, macA))
		r.run(1, ipv4(bcast, macA))
		r.run(2, ipv4(bcast, macA))
		e, _ := r.lookup(macA)
		if moved := r.stats(1).C[tbpf.Moved] + r.stats(2).C[tbpf.Moved]; moved != 3 || e.Slot != 2 {
			t.Errorf("A moved %d times and is on slot %d, want 3 moves and slot 2", moved, e.Slot)
		}

		// The destination memo: B on port 3, and frames from D (port 1)
		// to B go to port 3; B moves to port 2, and they go to port 2.
		// Deleted, B is unknown: flooded. Written static on port 3, to B
		// goes to port 3.
		to := func(what string, wantSlot int, wantFlood bool) {
			t.Helper()
			tx := [4]uint64{}
			for s := 1; s <= 3; s++ {
				tx[s] = r.stats(s).C[tbpf.TxPackets]
			}
			fl := r.stats(1).C[tbpf.Flooded]
			r.wantVerdict(r.run(1, ipv4(macB, macD)), m.redirect, what)
			if wantFlood {
				if r.stats(1).C[tbpf.Flooded] != fl+1 {
					t.Errorf("%s: not flooded", what)
				}
				return
			}
			for s := 1; s <= 3; s++ {
				got := r.stats(s).C[tbpf.TxPackets] - tx[s]
				if want := map[bool]uint64{true: 1, false: 0}[s == wantSlot]; got != want {
					t.Errorf("%s: port %d sent %d frames, want %d", what, s, got, want)
				}
			}
		}
		r.run(3, ipv4(bcast, macB))
		to("to B on port 3", 3, false)
		to("to B on port 3 again (from the memo)", 3, false)
		r.run(2, ipv4(bcast, macB))
		to("to B after it moved to port 2", 2, false)
		if err := r.ns.Do(func() error { _, err := r.dp.DelFDB(1, 0, macB); return err }); err != nil {
			t.Fatal(err)
		}
		to("to B after its entry was deleted", 0, true)
		r.run(2, ipv4(bcast, macB)) // learned again on port 2
		to("to B learned again", 2, false)
		err := r.ns.Do(func() error {
			return r.dp.AddFDB(FDBEntry{Bridge: 1, MAC: macB, Ifindex: r.port[3], Slot: 3, Static: true})
		})
		if err != nil {
			t.Fatal(err)
		}
		to("to B written static on port 3", 3, false)
	})
}

// A port whose ifindex is above the index array's range is found by hash.
func TestLargeIfindex(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := newRig(t, m, 1024, [4]uint32{})
		const big = 70000
		err := r.ns.Do(func() error {
			la := netlink.NewLinkAttrs()
			la.Name, la.Index = "pbig", big
			if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "qbig"}); err != nil {
				return err
			}
			l, err := netlink.LinkByName("pbig")
			if err != nil {
				return err
			}
			if l.Attrs().Index != big {
				return fmt.Errorf("pbig got ifindex %d, not %d", l.Attrs().Index, big)
			}
			return r.dp.SetPort(PortInfo{Ifindex: big, Bridge: 1, Slot: 4})
		})
		if err != nil {
			t.Fatal(err)
		}
		r.port[0] = big // run() takes slot 0 as the interface to send on
		r.wantVerdict(r.run(0, ipv4(bcast, macD)), m.redirect, "frame from a port with a large ifindex")
		if e, ok := r.lookup(macD); !ok || e.Ifindex != big || e.Slot != 4 {
			t.Errorf("D from ifindex %d: %+v (found %v)", big, e, ok)
		}
		if err := r.ns.Do(func() error { return r.dp.DelPort(big, 4) }); err != nil {
			t.Fatal(err)
		}
		before := r.drops(0, tbpf.TrestleTrDropReasonTR_DROP_NO_PORT)
		r.wantVerdict(r.run(0, ipv4(bcast, macD)), m.drop, "frame from a deleted port")
		if r.drops(0, tbpf.TrestleTrDropReasonTR_DROP_NO_PORT) != before+1 {
			t.Errorf("a frame from a deleted large-ifindex port was not counted as no_port")
		}
	})
}

// benchSpec is the program the rig loads: the embedded one, or for
// BenchmarkPipeline a variant object named by TRESTLE_BENCH_OBJ (built by
// scripts/stage-costs.sh with one stage taken out).
func benchSpec(t testing.TB) *ebpf.CollectionSpec {
	f := os.Getenv("TRESTLE_BENCH_OBJ")
	if _, isBench := t.(*testing.B); f == "" || !isBench {
		return nil
	}
	spec, err := ebpf.LoadCollectionSpec(f)
	if err != nil {
		t.Fatalf("TRESTLE_BENCH_OBJ: %v", err)
	}
	return spec
}

// BenchmarkPipeline is the switch program's cost a frame by where the frame
// leaves the pipeline, through BPF_PROG_TEST_RUN with a repeat count (the
// redirect itself is not carried out; the kernel's loop adds a few ns). The
// differences between the cases are the costs of the stages between their
// exits: go test -run '^$' -bench Pipeline ./internal/datapath (as root).
func BenchmarkPipeline(b *testing.B) {
	for _, m := range modes {
		b.Run(m.name, func(b *testing.B) {
			for _, c := range []struct {
				name  string
				slot  int
				frame []byte
			}{
				{"1-no-port", 0, ipv4(macB, macA)},
				{"3-bad-source", 1, ipv4(macB, net.HardwareAddr{0x03, 0, 0, 0, 0, 1})},
				{"4-reserved", 1, frame(net.HardwareAddr{0x01, 0x80, 0xc2, 0, 0, 0}, macA, 0x0026, 46)},
				{"7-hairpin", 1, ipv4(macD, macA)},
				{"7-forward", 1, ipv4(macB, macA)},
				{"6-flood", 1, ipv4(bcast, macA)},
			} {
				b.Run(c.name, func(b *testing.B) {
					r := newRig(b, m, 1024, [4]uint32{})
					// A on port 1, B on port 2, D on port 1: all learned.
					r.run(1, ipv4(bcast, macA))
					r.run(2, ipv4(bcast, macB))
					r.run(1, ipv4(bcast, macD))
					b.ResetTimer()
					per := r.bench(c.slot, c.frame, b.N)
					b.ReportMetric(float64(per.Nanoseconds()), "ns/frame")
				})
			}
		})
	}
}

// A flood set written while one of the bridge's ports has lost its
// interface (deleted beside the port's removal, its link event not yet
// taken: a container's veth that a CNI DEL deletes while another pod's
// port is added) leaves that member out instead of failing the write, in
// place and when the set is replaced by a bigger one; the link event's
// apply then removes the port.
func TestFloodSetMemberGone(t *testing.T) {
	r := newRig(t, modes[0], 1024, [4]uint32{})
	err := r.ns.Do(func() error {
		extra, err := morePorts(r, 3)
		if err != nil {
			return err
		}
		ports := []PortInfo{{Ifindex: r.port[1], Bridge: 1, Slot: 1}, {Ifindex: r.port[2], Bridge: 1, Slot: 2}, extra[0]}
		set := func(ports []PortInfo) error {
			return r.dp.SetBridge(BridgeInfo{ID: 1, Name: "br0", MaxEntries: 1024, Ports: ports})
		}
		if err := set(ports); err != nil {
			return err
		}
		if err := netlink.LinkDel(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Index: int(extra[0].Ifindex)}}); err != nil {
			return err
		}
		if err := set(ports); err != nil {
			return fmt.Errorf("rewritten in place: %w", err)
		}
		if err := set(append(ports, extra[1:]...)); err != nil {
			return fmt.Errorf("outgrown: %w", err)
		}
		held, err := members(r.dp.floods[1])
		if err != nil {
			return err
		}
		if len(held) != 4 || held[extra[0].Ifindex] {
			return fmt.Errorf("flood set holds %v, want the four ports whose interfaces are there", held)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A port's tc filter that another takes off (its clsact qdisc deleted)
// is put back by Restore, with the program it ran; one that is there is
// left alone, and its detach removes it.
func TestFilterRestore(t *testing.T) {
	r := newRig(t, modes[1], 1024, [4]uint32{})
	err := r.ns.Do(func() error {
		idx := int(r.port[1])
		a, err := r.dp.Attach(idx, mode.TC, HookFilter)
		if err != nil {
			return err
		}
		want, err := a.ProgramID()
		if err != nil {
			return err
		}
		if put, err := r.dp.Restore(a); err != nil || put {
			return fmt.Errorf("Restore of a filter that is there: %v, %v", put, err)
		}
		if err := netlink.QdiscDel(&netlink.Clsact{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: idx, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT}}); err != nil {
			return err
		}
		if _, ok, err := clsact.Program(idx, r.dp.place); err != nil || ok {
			return fmt.Errorf("filter after its qdisc went: %v, %v", ok, err)
		}
		if put, err := r.dp.Restore(a); err != nil || !put {
			return fmt.Errorf("Restore of a removed filter: %v, %v", put, err)
		}
		if id, ok, err := clsact.Program(idx, r.dp.place); err != nil || !ok || id != want {
			return fmt.Errorf("restored filter runs %d (%v, %v), want %d", id, ok, err, want)
		}
		if err := a.Detach(); err != nil {
			return err
		}
		if _, ok, err := clsact.Program(idx, r.dp.place); err != nil || ok {
			return fmt.Errorf("filter after its detach: %v, %v", ok, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// morePorts makes n veths in r's namespace (called inside it) and sets
// them as ports of bridge 1 in the slots after r's: ports beyond r's four
// for a flood set to grow with.
func morePorts(r *rig, n int) ([]PortInfo, error) {
	var out []PortInfo
	for i := range n {
		la := netlink.NewLinkAttrs()
		la.Name = fmt.Sprintf("more%d", i)
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: fmt.Sprintf("morepeer%d", i)}); err != nil {
			return nil, err
		}
		l, err := netlink.LinkByName(la.Name)
		if err != nil {
			return nil, err
		}
		p := PortInfo{Ifindex: uint32(l.Attrs().Index), Bridge: 1, Slot: uint16(4 + i)}
		if err := r.dp.SetPort(p); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func (r *rig) bench(slot int, data []byte, n int) time.Duration {
	var per time.Duration
	err := r.ns.Do(func() error {
		// The library's Benchmark takes no context, and the ingress
		// interface is in the context: runRepeat issues the test run directly.
		var err error
		per, err = r.runRepeat(slot, data, uint32(n))
		return err
	})
	if err != nil {
		r.t.Fatalf("bench run: %v", err)
	}
	return per
}

// A flood set written in place keeps the members that leave until the
// bridge's new copy is live: they take room too. A bridge of three ports
// (a set of four) whose ports two others replace must get a bigger set,
// not a refusal (found by FuzzPipeline). Both kinds of set: the plain one
// and the program one of a bridge with port policies.
func TestFloodSetPortsReplaced(t *testing.T) {
	for _, policy := range []bool{false, true} {
		t.Run(fmt.Sprintf("policy=%v", policy), func(t *testing.T) {
			r := newRig(t, modes[0], 1024, [4]uint32{})
			err := r.ns.Do(func() error {
				la := netlink.NewLinkAttrs()
				la.Name = "p4"
				if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "q4"}); err != nil {
					return err
				}
				l, err := netlink.LinkByName("p4")
				if err != nil {
					return err
				}
				ports := []PortInfo{{Ifindex: r.port[1], Bridge: 1, Slot: 1}, {Ifindex: r.port[2], Bridge: 1, Slot: 2}, {Ifindex: r.port[3], Bridge: 1, Slot: 3}}
				if err := r.dp.SetBridge(BridgeInfo{ID: 1, Name: "br0", MaxEntries: 1024, Ports: ports, Policy: policy}); err != nil {
					return err
				}
				ports = []PortInfo{ports[0], {Ifindex: r.port[0], Bridge: 1, Slot: 4}, {Ifindex: uint32(l.Attrs().Index), Bridge: 1, Slot: 5}}
				for _, p := range ports[1:] {
					if err := r.dp.SetPort(p); err != nil {
						return err
					}
				}
				if err := r.dp.SetBridge(BridgeInfo{ID: 1, Name: "br0", MaxEntries: 1024, Ports: ports, Policy: policy}); err != nil {
					return fmt.Errorf("replace two of three ports: %w", err)
				}
				set := r.dp.floods[1]
				if policy {
					set = r.dp.vlanFloods[1]
				}
				held, err := members(set)
				if err != nil {
					return err
				}
				if len(held) != 3 || !held[r.port[1]] || !held[r.port[0]] || !held[uint32(l.Attrs().Index)] {
					return fmt.Errorf("flood set holds %v, want the three new ports", held)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}
