package datapath

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

// Capture table tests (bpf/lib/capture.h): a frame in through
// BPF_PROG_TEST_RUN, the capture's record out: direction, verdict, reason,
// and the bytes as the port received or sent them.

func (r *rig) startCapture(slot int, in, out bool) *Capture {
	r.t.Helper()
	c, err := r.dp.StartCapture(CaptureSpec{Ifindex: r.port[slot], Bridge: 1, In: in, Out: out})
	if err != nil {
		r.t.Fatalf("start capture: %v", err)
	}
	r.t.Cleanup(c.Close)
	return c
}

// next is the capture's next record; none: ok false.
func next(t *testing.T, c *Capture) (CapturedFrame, bool) {
	t.Helper()
	f, err := c.Read(time.Now().Add(200 * time.Millisecond))
	if errors.Is(err, ErrCaptureTimeout) {
		return f, false
	}
	if err != nil {
		t.Fatalf("read capture: %v", err)
	}
	return f, true
}

type wantRec struct {
	dir, verdict uint8
	reason       tbpf.DropReason
	egress       int // slot; 0: none
	data         []byte
}

func (r *rig) wantRecord(t *testing.T, c *Capture, what string, w *wantRec) {
	t.Helper()
	f, ok := next(t, c)
	if w == nil {
		if ok {
			t.Errorf("%s: captured %+v, want nothing", what, f)
		}
		return
	}
	if !ok {
		t.Fatalf("%s: nothing captured", what)
	}
	egress := uint32(0)
	if w.egress != 0 {
		egress = r.port[w.egress]
	}
	if f.Dir != w.dir || f.Verdict != w.verdict || f.Egress != egress ||
		(w.verdict == VerdictDropped && f.Reason != w.reason) {
		t.Errorf("%s: dir %d verdict %d reason %s egress %d, want dir %d verdict %d reason %s egress %d",
			what, f.Dir, f.Verdict, f.Reason, f.Egress, w.dir, w.verdict, w.reason, egress)
	}
	if !bytes.Equal(f.Data, w.data) || f.Len != len(w.data) {
		t.Errorf("%s: captured %d bytes (len %d)\n% x\nwant %d\n% x", what, len(f.Data), f.Len, f.Data, len(w.data), w.data)
	}
	if d := time.Since(f.Time); d < 0 || d > time.Minute {
		t.Errorf("%s: timestamp %v is %v from now", what, f.Time, d)
	}
}

func TestCapture(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := newRig(t, m, 1024, [4]uint32{})
		before := r.dp.XDPProgram()
		c := r.startCapture(1, true, true)
		if r.dp.XDPProgram() == before {
			t.Fatal("the capture did not change the programs attachments get")
		}
		fromA := ipv4(bcast, macA)
		r.run(1, fromA)
		r.wantRecord(t, c, "broadcast from the port", &wantRec{dir: CaptureIn, verdict: VerdictFlooded, data: fromA})
		toA := ipv4(macA, macB)
		r.run(2, toA)
		r.wantRecord(t, c, "unicast to the port", &wantRec{dir: CaptureOut, verdict: VerdictForwarded, egress: 1, data: toA})
		toB := ipv4(macB, macA)
		r.run(1, toB)
		r.wantRecord(t, c, "unicast from the port", &wantRec{dir: CaptureIn, verdict: VerdictForwarded, egress: 2, data: toB})
		unknown := ipv4(macD, macC)
		r.run(3, unknown)
		r.wantRecord(t, c, "unknown unicast flooded", &wantRec{dir: CaptureOut, verdict: VerdictFlooded, egress: 1, data: unknown})
		r.run(3, ipv4(macB, macC))
		r.wantRecord(t, c, "unicast between two other ports", nil)
		bad := ipv4(macB, bcast)
		r.run(1, bad)
		r.wantRecord(t, c, "bad source", &wantRec{dir: CaptureIn, verdict: VerdictDropped, reason: tbpf.TrestleTrDropReasonTR_DROP_BAD_SRC, data: bad})
		hairpin := ipv4(macA, macA2)
		r.run(1, hairpin)
		r.wantRecord(t, c, "hairpin", &wantRec{dir: CaptureIn, verdict: VerdictDropped, reason: tbpf.TrestleTrDropReasonTR_DROP_HAIRPIN, data: hairpin})
		if _, err := r.dp.StartCapture(CaptureSpec{Ifindex: r.port[2], Bridge: 1, In: true}); !errors.Is(err, ErrCaptureRunning) {
			t.Errorf("a second capture: %v, want %v", err, ErrCaptureRunning)
		}
		if n, err := c.Lost(); err != nil || n != 0 {
			t.Errorf("lost %d (%v), want 0", n, err)
		}
		c.Close()
		if r.dp.XDPProgram() != before {
			t.Error("after the capture, attachments get another program than before it")
		}
	})
}

var macA2 = []byte{0x02, 0, 0, 0, 0, 0xa2}

func TestCaptureDirection(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := newRig(t, m, 1024, [4]uint32{})
		c := r.startCapture(1, false, true)
		r.run(1, ipv4(bcast, macA))
		r.wantRecord(t, c, "in, capturing out", nil)
		toA := ipv4(macA, macB)
		r.run(2, toA)
		r.wantRecord(t, c, "out", &wantRec{dir: CaptureOut, verdict: VerdictForwarded, egress: 1, data: toA})
		c.Close()
		c = r.startCapture(1, true, false)
		r.run(2, toA)
		r.wantRecord(t, c, "out, capturing in", nil)
		fromA := ipv4(macB, macA)
		r.run(1, fromA)
		r.wantRecord(t, c, "in", &wantRec{dir: CaptureIn, verdict: VerdictForwarded, egress: 2, data: fromA})
	})
}

// In a VLAN-aware bridge an out frame is as its port sends it: tagged on a
// trunk, untagged on an access port, with the priority it came with.
func TestCaptureVLAN(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := vrig(t, m, 0)
		trunk := r.startCapture(3, true, true)
		access := ipv4(bcast, macA)
		r.run(1, access)
		r.wantRecord(t, trunk, "access to trunk", &wantRec{dir: CaptureOut, verdict: VerdictFlooded, egress: 3, data: addTag(access, 10)})
		tagged := tagTCI(bcast, macB, 0x8100, 5<<13|20)
		r.run(3, tagged)
		r.wantRecord(t, trunk, "trunk in", &wantRec{dir: CaptureIn, verdict: VerdictFlooded, data: tagged})
		trunk.Close()
		acc := r.startCapture(2, true, true)
		r.run(3, tagged)
		r.wantRecord(t, acc, "trunk to access", &wantRec{dir: CaptureOut, verdict: VerdictFlooded, egress: 2, data: untag(tagged)})
		r.run(3, tagTCI(bcast, macB, 0x8100, 10))
		r.wantRecord(t, acc, "another VLAN's", nil)
	})
}

func TestRetag(t *testing.T) {
	plain := ipv4(macB, macA)
	tagged := addTag(plain, 5<<13|10)
	cases := []struct {
		name  string
		in    []byte
		op    uint8
		vid   uint16
		want  []byte
		delta int
	}{
		{"keep", tagged, 0, 0, tagged, 0},
		{"untag", tagged, 1, 0, plain, -4},
		{"untag untagged", plain, 1, 0, plain, 0},
		{"tag", plain, 2, 20, addTag(plain, 20), 4},
		{"rewrite keeps priority", tagged, 2, 20, addTag(plain, 5<<13|20), 0},
	}
	for _, c := range cases {
		in := append([]byte(nil), c.in...)
		got, delta := retag(in, c.op, c.vid)
		if !bytes.Equal(got, c.want) || delta != c.delta {
			t.Errorf("%s: % x (%d), want % x (%d)", c.name, got, delta, c.want, c.delta)
		}
	}
	// A tag the kernel held outside the bytes goes back after the addresses.
	rec := make([]byte, binary.Size(tbpf.TrestleTrCaptureRec{}))
	binary.NativeEndian.PutUint32(rec[8:], uint32(len(plain)))
	binary.NativeEndian.PutUint32(rec[12:], uint32(len(plain)))
	binary.NativeEndian.PutUint16(rec[20:], 5<<13|10)
	binary.BigEndian.PutUint16(rec[22:], 0x8100)
	rec[26] = CaptureIn
	f, err := decodeCapture(append(rec, plain...), 0, SnapMax)
	if err != nil || !bytes.Equal(f.Data, tagged) || f.Len != len(tagged) {
		t.Errorf("metadata tag: % x (len %d, %v), want % x", f.Data, f.Len, err, tagged)
	}
}

// The VLAN stage turned on while a capture runs: the build with both
// captures, and the capture's end leaves the build with the VLAN stage.
func TestCaptureAcrossVLANStage(t *testing.T) {
	r := newRig(t, modes[0], 1024, [4]uint32{})
	c := r.startCapture(1, true, true)
	captured := r.dp.XDPProgram()
	err := r.ns.Do(func() error { return r.dp.SetVLANStage(true) })
	if err != nil {
		t.Fatal(err)
	}
	both := r.dp.XDPProgram()
	if both == captured {
		t.Fatal("the VLAN stage did not change the capture's program")
	}
	fromA := ipv4(bcast, macA)
	r.run(1, fromA)
	r.wantRecord(t, c, "with both stages", &wantRec{dir: CaptureIn, verdict: VerdictFlooded, data: fromA})
	c.Close()
	if p := r.dp.XDPProgram(); p == nil || p == both || p == captured {
		t.Fatalf("after the capture: program %v, want the VLAN stage's without capture", p)
	}
	if !r.dp.VLANStage() {
		t.Error("the capture's end turned the VLAN stage off")
	}
}

// Frames that cross patch ports (patchChain: p1 in br1, p2 in br2, p3 in
// br3): a flood from p1 reaches p3's capture as out, a forward as out to p3,
// and p3's answer is in, forwarded to p1 across both patches.
func TestCapturePatch(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := newRig(t, m, 1024, [4]uint32{})
		patchChain(t, r)
		c, err := r.dp.StartCapture(CaptureSpec{Ifindex: r.port[3], Bridge: 3, Walks: true, In: true, Out: true})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		unknown := ipv4(macB, macA)
		r.run(1, unknown)
		r.wantRecord(t, c, "flood across patches", &wantRec{dir: CaptureOut, verdict: VerdictFlooded, egress: 3, data: unknown})
		answer := ipv4(macA, macB)
		r.run(3, answer)
		r.wantRecord(t, c, "answer across patches", &wantRec{dir: CaptureIn, verdict: VerdictForwarded, egress: 1, data: answer})
		r.run(1, unknown)
		r.wantRecord(t, c, "known unicast across patches", &wantRec{dir: CaptureOut, verdict: VerdictForwarded, egress: 3, data: unknown})
		r.run(2, ipv4(macA, macC))
		r.wantRecord(t, c, "p2 to p1", nil)
	})
}
