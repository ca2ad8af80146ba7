package frame

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fixture is one frame written by testdata/make_fixtures.py: the Spec given
// to Build, the seq and ts then given to Stamp (0, 0: Build's own frame), and
// the bytes the Python script made from the layout, independently of Build.
type fixture struct {
	name  string
	spec  Spec
	seq   uint32
	ts    uint64
	frame []byte
}

// wantFixtures pins the set, so that a fixture lost from testdata fails
// rather than silently testing less.
var wantFixtures = []string{
	"imix_ipv4_1514",
	"imix_ipv4_590",
	"imix_ipv4_60",
	"ipv4_60",
	"ipv4_60_stamped",
	"ipv4_64_csum_ffff",
	"ipv4_vlan100_128",
	"ipv6_128",
	"ipv6_vlan100_odd_131",
	"ipv6_vlan4094_1518",
}

func loadFixtures(t testing.TB) []fixture {
	t.Helper()
	names, err := filepath.Glob("testdata/*.json")
	if err != nil {
		t.Fatal(err)
	}
	var out []fixture
	for _, path := range names {
		var j struct {
			Dst     string `json:"dst"`
			Src     string `json:"src"`
			VLAN    uint16 `json:"vlan"`
			IPv6    bool   `json:"ipv6"`
			SrcIP   string `json:"src_ip"`
			DstIP   string `json:"dst_ip"`
			SrcPort uint16 `json:"src_port"`
			DstPort uint16 `json:"dst_port"`
			Size    int    `json:"size"`
			Flow    uint16 `json:"flow"`
			Seq     uint32 `json:"seq"`
			TS      uint64 `json:"ts"`
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&j); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		name := strings.TrimSuffix(filepath.Base(path), ".json")
		text, err := os.ReadFile(strings.TrimSuffix(path, ".json") + ".hex")
		if err != nil {
			t.Fatal(err)
		}
		frame, err := hex.DecodeString(strings.Join(strings.Fields(string(text)), ""))
		if err != nil {
			t.Fatalf("%s.hex: %v", name, err)
		}
		out = append(out, fixture{
			name: name,
			spec: Spec{
				Dst: mustMAC(t, j.Dst), Src: mustMAC(t, j.Src),
				VLAN: j.VLAN, IPv6: j.IPv6,
				SrcIP: net.ParseIP(j.SrcIP), DstIP: net.ParseIP(j.DstIP),
				SrcPort: j.SrcPort, DstPort: j.DstPort,
				Size: j.Size, Flow: j.Flow,
			},
			seq: j.Seq, ts: j.TS, frame: frame,
		})
	}
	var got []string
	for _, f := range out {
		got = append(got, f.name)
	}
	if !slices.Equal(got, wantFixtures) {
		t.Fatalf("fixtures in testdata: %v, want %v", got, wantFixtures)
	}
	return out
}

func mustMAC(t testing.TB, s string) net.HardwareAddr {
	t.Helper()
	m, err := net.ParseMAC(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// onesSum is the RFC 1071 reference sum, written apart from the package's:
// pad to even length, add the big-endian words in 32 bits, fold.
func onesSum(parts ...[]byte) uint16 {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	if len(b)%2 == 1 {
		b = append(b, 0)
	}
	var s uint32
	for i := 0; i < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

// headers finds the IP and UDP headers of f from its own bytes, not from a
// Layout, and returns the UDP pseudo-header.
func headers(t *testing.T, f []byte) (l3, l4 int, pseudo []byte) {
	t.Helper()
	l3 = 14
	et := binary.BigEndian.Uint16(f[12:])
	if et == 0x8100 {
		l3 = 18
		et = binary.BigEndian.Uint16(f[16:])
	}
	switch et {
	case 0x0800:
		l4 = l3 + int(f[l3]&0x0f)*4
		pseudo = append(pseudo, f[l3+12:l3+20]...)
		pseudo = append(pseudo, 0, f[l3+9], f[l4+4], f[l4+5])
	case 0x86dd:
		l4 = l3 + 40
		pseudo = append(pseudo, f[l3+8:l3+40]...)
		pseudo = append(pseudo, 0, 0, f[l4+4], f[l4+5], 0, 0, 0, f[l3+6])
	default:
		t.Fatalf("ethertype %#04x", et)
	}
	return l3, l4, pseudo
}

// verifySums checks f's lengths and checksums from scratch.
func verifySums(t *testing.T, f []byte) {
	t.Helper()
	l3, l4, pseudo := headers(t, f)
	if f[l3]>>4 == 4 {
		if got := onesSum(f[l3:l4]); got != 0xffff {
			t.Errorf("IPv4 header sums to %#04x, want 0xffff", got)
		}
		if n := int(binary.BigEndian.Uint16(f[l3+2:])); n != len(f)-l3 {
			t.Errorf("IPv4 total length %d, want %d", n, len(f)-l3)
		}
	} else if n := int(binary.BigEndian.Uint16(f[l3+4:])); n != len(f)-l4 {
		t.Errorf("IPv6 payload length %d, want %d", n, len(f)-l4)
	}
	if n := int(binary.BigEndian.Uint16(f[l4+4:])); n != len(f)-l4 {
		t.Errorf("UDP length %d, want %d", n, len(f)-l4)
	}
	if c := binary.BigEndian.Uint16(f[l4+6:]); c == 0 {
		t.Errorf("UDP checksum 0: means none")
	}
	if got := onesSum(pseudo, f[l4:]); got != 0xffff {
		t.Errorf("UDP datagram sums to %#04x, want 0xffff", got)
	}
}

// rebuild is what Stamp must equal: Build, then seq and ts written, then the
// UDP checksum computed from scratch by the reference sum.
func rebuild(t *testing.T, s Spec, seq uint32, ts uint64) []byte {
	t.Helper()
	f, _, err := Build(s)
	if err != nil {
		t.Fatal(err)
	}
	_, l4, pseudo := headers(t, f)
	binary.BigEndian.PutUint32(f[l4+12:], seq)
	binary.BigEndian.PutUint64(f[l4+16:], ts)
	binary.BigEndian.PutUint16(f[l4+6:], 0)
	c := ^onesSum(pseudo, f[l4:])
	if c == 0 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(f[l4+6:], c)
	return f
}

func TestFixtures(t *testing.T) {
	for _, fx := range loadFixtures(t) {
		t.Run(fx.name, func(t *testing.T) {
			verifySums(t, fx.frame)

			f, l, err := Build(fx.spec)
			if err != nil {
				t.Fatal(err)
			}
			base := UDPCsumBase(f, l)
			viaBase := slices.Clone(f)
			Stamp(f, l, fx.seq, fx.ts)
			if !bytes.Equal(f, fx.frame) {
				t.Errorf("Build+Stamp:\n%s\nwant:\n%s", hex.Dump(f), hex.Dump(fx.frame))
			}
			StampWithBase(viaBase, l, base, fx.seq, fx.ts)
			if !bytes.Equal(viaBase, fx.frame) {
				t.Errorf("Build+StampWithBase:\n%s\nwant:\n%s", hex.Dump(viaBase), hex.Dump(fx.frame))
			}

			h, ok := Parse(fx.frame)
			if want := (TestHeader{Flow: fx.spec.Flow, Seq: fx.seq, TS: fx.ts}); !ok || h != want {
				t.Errorf("Parse = %+v, %v; want %+v, true", h, ok, want)
			}
		})
	}
}

// The fixture for the RFC 768 rule must really exercise it.
func TestFixtureCsumFFFF(t *testing.T) {
	for _, fx := range loadFixtures(t) {
		if fx.name != "ipv4_64_csum_ffff" {
			continue
		}
		_, l, err := Build(fx.spec)
		if err != nil {
			t.Fatal(err)
		}
		if c := binary.BigEndian.Uint16(fx.frame[l.UDPCsum:]); c != 0xffff {
			t.Fatalf("UDP checksum %#04x, want 0xffff", c)
		}
		if b := UDPCsumBase(fx.frame, l); b != 0xffff {
			t.Fatalf("UDPCsumBase = %#04x, want 0xffff", b)
		}
	}
}

func TestMinSize(t *testing.T) {
	for _, tc := range []struct {
		vlan, ipv6 bool
		want       int
	}{
		{false, false, 60},
		{true, false, 62},
		{false, true, 78},
		{true, true, 82},
	} {
		if got := MinSize(tc.vlan, tc.ipv6); got != tc.want {
			t.Errorf("MinSize(vlan %v, ipv6 %v) = %d, want %d", tc.vlan, tc.ipv6, got, tc.want)
		}
	}
}

func spec4() Spec {
	return Spec{
		Dst:   net.HardwareAddr{2, 0, 0, 0, 0, 2},
		Src:   net.HardwareAddr{2, 0, 0, 0, 0, 1},
		SrcIP: net.IPv4(198, 18, 0, 1), DstIP: net.IPv4(198, 19, 0, 1),
		SrcPort: 1024, DstPort: 9, Size: 60,
	}
}

func spec6() Spec {
	s := spec4()
	s.IPv6 = true
	s.SrcIP, s.DstIP = net.ParseIP("2001:2::1"), net.ParseIP("2001:2::2")
	s.Size = 78
	return s
}

// The header lengths are the four that bpf/lab/gen.c switches on.
func TestLayout(t *testing.T) {
	for _, tc := range []struct {
		name string
		vlan uint16
		ipv6 bool
		want Layout
	}{
		{"ipv4", 0, false, Layout{L3: 14, L4: 34, Test: 42, UDPCsum: 40, IPCsum: 24, HdrLen: 42}},
		{"ipv4 vlan", 7, false, Layout{L3: 18, L4: 38, Test: 46, UDPCsum: 44, IPCsum: 28, HdrLen: 46}},
		{"ipv6", 0, true, Layout{L3: 14, L4: 54, Test: 62, UDPCsum: 60, IPCsum: -1, HdrLen: 62}},
		{"ipv6 vlan", 7, true, Layout{L3: 18, L4: 58, Test: 66, UDPCsum: 64, IPCsum: -1, HdrLen: 66}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := spec4()
			if tc.ipv6 {
				s = spec6()
			}
			s.VLAN = tc.vlan
			s.Size = MinSize(tc.vlan != 0, tc.ipv6)
			f, l, err := Build(s)
			if err != nil {
				t.Fatal(err)
			}
			if l != tc.want {
				t.Errorf("layout %+v, want %+v", l, tc.want)
			}
			if len(f) != s.Size {
				t.Errorf("len %d, want %d", len(f), s.Size)
			}
			verifySums(t, f)
		})
	}
}

func TestBuildErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(*Spec)
		field string // the error must name it
	}{
		{"short dst", func(s *Spec) { s.Dst = s.Dst[:5] }, "Dst"},
		{"nil src", func(s *Spec) { s.Src = nil }, "Src"},
		{"long src", func(s *Spec) { s.Src = make(net.HardwareAddr, 8) }, "Src"},
		{"vlan 4095", func(s *Spec) { s.VLAN = 4095 }, "VLAN"},
		{"vlan 4096", func(s *Spec) { s.VLAN = 4096 }, "VLAN"},
		{"v6 src in v4", func(s *Spec) { s.SrcIP = net.ParseIP("2001:2::1") }, "SrcIP"},
		{"nil dst ip", func(s *Spec) { s.DstIP = nil }, "DstIP"},
		{"v4 in v6", func(s *Spec) { *s = spec6(); s.DstIP = net.IPv4(10, 0, 0, 1) }, "DstIP"},
		{"v4-mapped in v6", func(s *Spec) { *s = spec6(); s.SrcIP = net.ParseIP("::ffff:10.0.0.1") }, "SrcIP"},
		{"size 0", func(s *Spec) { s.Size = 0 }, "Size"},
		{"size 59", func(s *Spec) { s.Size = 59 }, "Size"},
		{"size 61 vlan", func(s *Spec) { s.VLAN = 1; s.Size = 61 }, "Size"},
		{"size 77 v6", func(s *Spec) { *s = spec6(); s.Size = 77 }, "Size"},
		{"size 81 v6 vlan", func(s *Spec) { *s = spec6(); s.VLAN = 1; s.Size = 81 }, "Size"},
		{"size max+1", func(s *Spec) { s.Size = MaxSize + 1 }, "Size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := spec4()
			tc.edit(&s)
			_, _, err := Build(s)
			if !errors.Is(err, ErrSpec) {
				t.Fatalf("err %v, want ErrSpec", err)
			}
			if !strings.Contains(err.Error(), tc.field+" ") {
				t.Errorf("err %q does not name %s", err, tc.field)
			}
		})
	}
	// The edges that are fine.
	for _, edit := range []func(*Spec){
		func(s *Spec) { s.VLAN = 4094; s.Size = 62 },
		func(s *Spec) { s.Size = MaxSize },
		func(s *Spec) { s.SrcIP = s.SrcIP.To4() },
		func(s *Spec) { s.SrcPort, s.DstPort = 0, 65535 },
	} {
		s := spec4()
		edit(&s)
		if _, _, err := Build(s); err != nil {
			t.Errorf("%+v: %v", s, err)
		}
	}
}

// variants are the four header shapes, each at the sizes where checksums
// could go wrong: the minimum, odd lengths, and the maximum.
func variants() []Spec {
	var out []Spec
	for _, ipv6 := range []bool{false, true} {
		for _, vlan := range []uint16{0, 100} {
			s := spec4()
			if ipv6 {
				s = spec6()
			}
			s.VLAN = vlan
			s.Flow = 0x1234 + vlan
			lo := MinSize(vlan != 0, ipv6)
			for _, size := range []int{lo, lo + 1, 128, 1517, 1518, MaxSize} {
				s.Size = size
				out = append(out, s)
			}
		}
	}
	return out
}

func randStamp(r *rand.Rand, i int) (uint32, uint64) {
	switch i {
	case 0:
		return 0, 0
	case 1:
		return ^uint32(0), ^uint64(0)
	case 2:
		return 0xffff0000, 0x0000ffff0000ffff
	}
	return r.Uint32(), r.Uint64()
}

func TestStampMatchesRebuild(t *testing.T) {
	r := rand.New(rand.NewPCG(2544, 1))
	for _, s := range variants() {
		tmpl, l, err := Build(s)
		if err != nil {
			t.Fatal(err)
		}
		base := UDPCsumBase(tmpl, l)
		f := slices.Clone(tmpl) // stamped over and over, as a sender's buffer is
		for i := range 300 {
			seq, ts := randStamp(r, i)
			want := rebuild(t, s, seq, ts)
			Stamp(f, l, seq, ts)
			if !bytes.Equal(f, want) {
				t.Fatalf("%+v seq %#x ts %#x: Stamp\n%s\nwant\n%s", s, seq, ts, hex.Dump(f), hex.Dump(want))
			}
			g := slices.Clone(tmpl)
			StampWithBase(g, l, base, seq, ts)
			if !bytes.Equal(g, want) {
				t.Fatalf("%+v seq %#x ts %#x: StampWithBase\n%s\nwant\n%s", s, seq, ts, hex.Dump(g), hex.Dump(want))
			}
			if b := UDPCsumBase(f, l); b != base {
				t.Fatalf("UDPCsumBase of a stamped frame %#04x, of the template %#04x", b, base)
			}
		}
	}
}

// When seq and ts bring the sum to 0xffff, the checksum is 0 and must be sent
// as 0xffff; and Stamp must work on from a field holding 0xffff.
func TestStampZeroChecksum(t *testing.T) {
	r := rand.New(rand.NewPCG(768, 1))
	for _, s := range variants() {
		tmpl, l, err := Build(s)
		if err != nil {
			t.Fatal(err)
		}
		base := UDPCsumBase(tmpl, l)
		// The seq whose low word is ^base completes the sum to 0xffff.
		for _, z := range []struct {
			seq uint32
			ts  uint64
		}{
			{uint32(^base), 0},
			{0, uint64(^base) << 48},
			{uint32(^base) << 16, 0xffff_0000_ffff_0000},
		} {
			want := rebuild(t, s, z.seq, z.ts)
			if c := binary.BigEndian.Uint16(want[l.UDPCsum:]); c != 0xffff {
				t.Fatalf("test bug: rebuild gives %#04x", c)
			}
			f := slices.Clone(tmpl)
			Stamp(f, l, z.seq, z.ts)
			if !bytes.Equal(f, want) {
				t.Fatalf("%+v: Stamp to a zero checksum: %#04x", s, binary.BigEndian.Uint16(f[l.UDPCsum:]))
			}
			g := slices.Clone(tmpl)
			StampWithBase(g, l, base, z.seq, z.ts)
			if !bytes.Equal(g, want) {
				t.Fatalf("%+v: StampWithBase to a zero checksum: %#04x", s, binary.BigEndian.Uint16(g[l.UDPCsum:]))
			}
			seq, ts := r.Uint32(), r.Uint64()
			Stamp(f, l, seq, ts)
			if want := rebuild(t, s, seq, ts); !bytes.Equal(f, want) {
				t.Fatalf("%+v: Stamp from a checksum of 0xffff is wrong", s)
			}
		}
	}
}

// UDPCsumBase's documented relation to the checksum Build writes.
func TestUDPCsumBase(t *testing.T) {
	for _, s := range variants() {
		f, l, err := Build(s)
		if err != nil {
			t.Fatal(err)
		}
		c := binary.BigEndian.Uint16(f[l.UDPCsum:])
		base := UDPCsumBase(f, l)
		if want := ^c; c == 0xffff && base != 0xffff || c != 0xffff && base != want {
			t.Errorf("%+v: checksum %#04x, base %#04x", s, c, base)
		}
		_, l4, pseudo := headers(t, f)
		binary.BigEndian.PutUint16(f[l4+6:], 0)
		if want := onesSum(pseudo, f[l4:]); base != want {
			t.Errorf("%+v: base %#04x, reference sum %#04x", s, base, want)
		}
	}
}

func TestBuildFields(t *testing.T) {
	s := spec4()
	s.VLAN = 0xabc
	s.Size = 100
	s.Flow = 0xfeed
	f, l, err := Build(s)
	if err != nil {
		t.Fatal(err)
	}
	be := binary.BigEndian
	for _, c := range []struct {
		what      string
		got, want uint64
	}{
		{"TPID", uint64(be.Uint16(f[12:])), 0x8100},
		{"TCI", uint64(be.Uint16(f[14:])), 0x0abc},
		{"ethertype", uint64(be.Uint16(f[16:])), 0x0800},
		{"version/IHL", uint64(f[l.L3]), 0x45},
		{"TOS", uint64(f[l.L3+1]), 0},
		{"ID", uint64(be.Uint16(f[l.L3+4:])), 0},
		{"flags/frag", uint64(be.Uint16(f[l.L3+6:])), 0x4000},
		{"TTL", uint64(f[l.L3+8]), 64},
		{"proto", uint64(f[l.L3+9]), 17},
		{"sport", uint64(be.Uint16(f[l.L4:])), 1024},
		{"dport", uint64(be.Uint16(f[l.L4+2:])), 9},
		{"magic", uint64(be.Uint16(f[l.Test:])), Magic},
		{"flow", uint64(be.Uint16(f[l.Test+2:])), 0xfeed},
		{"seq", uint64(be.Uint32(f[l.Test+4:])), 0},
		{"ts", be.Uint64(f[l.Test+8:]), 0},
	} {
		if c.got != c.want {
			t.Errorf("%s = %#x, want %#x", c.what, c.got, c.want)
		}
	}
	if f[l.Test] != 0x74 || f[l.Test+1] != 0x52 {
		t.Errorf("magic bytes % x, want 74 52", f[l.Test:l.Test+2])
	}
	if !bytes.Equal(f[l.Test+TestHeaderLen:], make([]byte, len(f)-l.Test-TestHeaderLen)) {
		t.Errorf("payload after the test header is not zeros")
	}

	s6 := spec6()
	s6.Size = 200
	f, l, err = Build(s6)
	if err != nil {
		t.Fatal(err)
	}
	if got := be.Uint32(f[l.L3:]); got != 0x60000000 {
		t.Errorf("version/class/label %#08x, want 0x60000000", got)
	}
	if f[l.L3+6] != 17 || f[l.L3+7] != 64 {
		t.Errorf("next header %d hop limit %d, want 17 64", f[l.L3+6], f[l.L3+7])
	}
}

func TestIMIXFor(t *testing.T) {
	for _, c := range []struct {
		vlan, ipv6 bool
		want       []int
	}{
		{false, false, []int{60, 590, 1514}},
		{true, false, []int{62, 594, 1518}},
		{false, true, []int{78, 590, 1514}},
		{true, true, []int{82, 594, 1518}},
	} {
		m := IMIXFor(c.vlan, c.ipv6)
		if !slices.Equal(m.Sizes, c.want) || !slices.Equal(m.Weights, []int{7, 4, 1}) {
			t.Errorf("IMIXFor(%v, %v) = %v, want sizes %v 7:4:1", c.vlan, c.ipv6, m, c.want)
		}
	}
	if !slices.Equal(IMIXFor(false, false).Sizes, IMIX.Sizes) {
		t.Errorf("IMIXFor(false, false) is not IMIX")
	}
}
