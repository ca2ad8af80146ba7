package frame

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"
)

// Every proper prefix of a fixture that cuts into the test header fails;
// the frame cut right after it still parses.
func TestParseTruncated(t *testing.T) {
	for _, fx := range loadFixtures(t) {
		_, l, err := Build(fx.spec)
		if err != nil {
			t.Fatal(err)
		}
		end := l.Test + TestHeaderLen
		for n := range end {
			if h, ok := Parse(fx.frame[:n]); ok {
				t.Errorf("%s cut to %d bytes: parsed %+v", fx.name, n, h)
			}
		}
		if _, ok := Parse(fx.frame[:end]); !ok {
			t.Errorf("%s cut after the test header (%d bytes): not parsed", fx.name, end)
		}
	}
}

func TestParseGarbage(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		b := make([]byte, r.IntN(200))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		// Random bytes almost never reach the magic; make the headers
		// plausible often enough that the deeper checks run too.
		if len(b) >= 14 && r.IntN(2) == 0 {
			binary.BigEndian.PutUint16(b[12:], []uint16{0x0800, 0x86dd, 0x8100, 0x88a8}[r.IntN(4)])
		}
		Parse(b)
	}
	for _, b := range [][]byte{nil, {}, make([]byte, 13), make([]byte, 14), make([]byte, 60), bytes.Repeat([]byte{0xff}, 100)} {
		if _, ok := Parse(b); ok {
			t.Errorf("Parse(% x) ok", b)
		}
	}
}

// mutate returns a fixture frame changed by edit, with l its layout.
func mutate(t *testing.T, name string, edit func(f []byte, l Layout) []byte) []byte {
	t.Helper()
	for _, fx := range loadFixtures(t) {
		if fx.name == name {
			_, l, err := Build(fx.spec)
			if err != nil {
				t.Fatal(err)
			}
			return edit(slices.Clone(fx.frame), l)
		}
	}
	t.Fatalf("no fixture %s", name)
	return nil
}

func TestParseCases(t *testing.T) {
	be := binary.BigEndian
	// The stamped fixture's header; frames that parse must give it.
	stamped := TestHeader{Flow: 0, Seq: 0x01020304, TS: 0x1122334455667788}
	for _, tc := range []struct {
		name string
		base string // fixture
		edit func(f []byte, l Layout) []byte
		ok   bool
	}{
		{"as is", "ipv4_60_stamped", func(f []byte, l Layout) []byte { return f }, true},
		{"bad magic", "ipv4_60_stamped", func(f []byte, l Layout) []byte { f[l.Test+1]++; return f }, false},
		{"magic byte-swapped", "ipv4_60_stamped", func(f []byte, l Layout) []byte {
			be.PutUint16(f[l.Test:], 0x5274)
			return f
		}, false},
		{"TCP", "ipv4_60_stamped", func(f []byte, l Layout) []byte { f[l.L3+9] = 6; return f }, false},
		{"IPv4 version 5", "ipv4_60_stamped", func(f []byte, l Layout) []byte { f[l.L3] = 0x55; return f }, false},
		{"IHL 4", "ipv4_60_stamped", func(f []byte, l Layout) []byte { f[l.L3] = 0x44; return f }, false},
		{"later fragment", "ipv4_60_stamped", func(f []byte, l Layout) []byte { be.PutUint16(f[l.L3+6:], 0x2001); return f }, false},
		{"first fragment", "ipv4_60_stamped", func(f []byte, l Layout) []byte { be.PutUint16(f[l.L3+6:], 0x2000); return f }, true},
		{"IP length short of the test header", "ipv4_60_stamped", func(f []byte, l Layout) []byte {
			be.PutUint16(f[l.L3+2:], 20+8+15)
			return f
		}, false},
		{"UDP length short of the test header", "ipv4_60_stamped", func(f []byte, l Layout) []byte {
			be.PutUint16(f[l.L4+4:], 8+15)
			return f
		}, false},
		{"ARP", "ipv4_60_stamped", func(f []byte, l Layout) []byte { be.PutUint16(f[12:], 0x0806); return f }, false},
		{"IPv4 options", "ipv4_60_stamped", func(f []byte, l Layout) []byte {
			// IHL 6: a 4-byte option (NOP NOP NOP EOL) pushes UDP along.
			g := slices.Concat(f[:l.L3+20], []byte{1, 1, 1, 0}, f[l.L3+20:])
			g[l.L3] = 0x46
			be.PutUint16(g[l.L3+2:], be.Uint16(g[l.L3+2:])+4)
			return g
		}, true},
		{"802.1ad tag", "ipv4_60_stamped", func(f []byte, l Layout) []byte {
			return slices.Concat(f[:12], []byte{0x88, 0xa8, 0x00, 0x05}, f[12:])
		}, true},
		{"802.1Q tag", "ipv4_60_stamped", func(f []byte, l Layout) []byte {
			return slices.Concat(f[:12], []byte{0x81, 0x00, 0x0f, 0xfe}, f[12:])
		}, true},
		{"two tags", "ipv4_60_stamped", func(f []byte, l Layout) []byte {
			return slices.Concat(f[:12], []byte{0x88, 0xa8, 0x00, 0x05, 0x81, 0x00, 0x00, 0x07}, f[12:])
		}, false},
		{"IPv6 version 4", "ipv6_128", func(f []byte, l Layout) []byte { f[l.L3] = 0x40; return f }, false},
		{"IPv6 hop-by-hop header", "ipv6_128", func(f []byte, l Layout) []byte { f[l.L3+6] = 0; return f }, false},
		{"IPv6 payload length short", "ipv6_vlan100_odd_131", func(f []byte, l Layout) []byte {
			be.PutUint16(f[l.L3+4:], 8+15)
			return f
		}, false},
		{"IPv6 untagged copy of a tagged frame", "ipv6_vlan100_odd_131", func(f []byte, l Layout) []byte {
			return slices.Concat(f[:12], f[16:])
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := mutate(t, tc.base, tc.edit)
			h, ok := Parse(f)
			if ok != tc.ok {
				t.Fatalf("Parse ok = %v, want %v (%+v)", ok, tc.ok, h)
			}
			if !ok {
				return
			}
			want := stamped
			if tc.base == "ipv6_128" {
				want = TestHeader{Flow: 2}
			} else if tc.base == "ipv6_vlan100_odd_131" {
				want = TestHeader{Flow: 0xbeef}
			}
			if h != want {
				t.Errorf("Parse = %+v, want %+v", h, want)
			}
		})
	}
}

// FuzzParse: Parse must not panic, must not write to its input, and what it
// finds must be where a test header is. The seeds are the fixtures and a few
// cut-off and retagged forms of them, so plain `go test` runs those.
func FuzzParse(f *testing.F) {
	for _, fx := range loadFixtures(f) {
		f.Add(fx.frame)
		f.Add(fx.frame[:len(fx.frame)/2])
		f.Add(fx.frame[:14])
		f.Add(slices.Concat(fx.frame[:12], []byte{0x88, 0xa8, 0, 1}, fx.frame[12:]))
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		in := slices.Clone(b)
		h, ok := Parse(b)
		if !bytes.Equal(in, b) {
			t.Fatal("Parse changed its input")
		}
		if !ok {
			if h != (TestHeader{}) {
				t.Fatalf("not ok but %+v", h)
			}
			return
		}
		// The header Parse reports is 16 bytes of b that start with the
		// magic.
		var th [TestHeaderLen]byte
		binary.BigEndian.PutUint16(th[0:], Magic)
		binary.BigEndian.PutUint16(th[2:], h.Flow)
		binary.BigEndian.PutUint32(th[4:], h.Seq)
		binary.BigEndian.PutUint64(th[8:], h.TS)
		if !bytes.Contains(b, th[:]) {
			t.Fatalf("Parse = %+v, not in the frame", h)
		}
	})
}
