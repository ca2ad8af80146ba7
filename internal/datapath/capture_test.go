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
	egress       int    // slot; 0: none
	data         []byte // nil: the frame sent
}

// capCase is a frame sent into the pipeline as received on slot, and the
// record the capture must have of it (nil: none).
type capCase struct {
	name  string
	slot  int
	frame []byte
	want  *wantRec
}

func (r *rig) capRun(t *testing.T, c *Capture, cases []capCase) {
	t.Helper()
	for _, cc := range cases {
		r.run(cc.slot, cc.frame)
		if cc.want != nil && cc.want.data == nil {
			w := *cc.want
			w.data = cc.frame
			cc.want = &w
		}
		r.wantRecord(t, c, cc.name, cc.want)
	}
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
	// The stamp is the kernel's monotonic clock plus wall - monotonic as
	// read once when the capture began: the two reads of that difference
	// are microseconds apart, and the wall clock may be slewed since, so a
	// frame stamped just now may read a few microseconds ahead.
	if d := time.Since(f.Time); d < -time.Millisecond || d > time.Minute {
		t.Errorf("%s: timestamp %v is %v from now", what, f.Time, d)
	}
}

func TestCapture(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := newRig(t, m, 1024, [4]uint32{})
		before := r.prog()
		c := r.startCapture(1, true, true)
		if r.prog() == before {
			t.Fatal("the capture did not change the programs attachments get")
		}
		r.capRun(t, c, []capCase{
			{"broadcast from the port", 1, ipv4(bcast, macA), &wantRec{dir: CaptureIn, verdict: VerdictFlooded}},
			{"unicast to the port", 2, ipv4(macA, macB), &wantRec{dir: CaptureOut, verdict: VerdictForwarded, egress: 1}},
			{"unicast from the port", 1, ipv4(macB, macA), &wantRec{dir: CaptureIn, verdict: VerdictForwarded, egress: 2}},
			{"unknown unicast flooded", 3, ipv4(macD, macC), &wantRec{dir: CaptureOut, verdict: VerdictFlooded, egress: 1}},
			{"unicast between two other ports", 3, ipv4(macB, macC), nil},
			{"bad source", 1, ipv4(macB, bcast), &wantRec{dir: CaptureIn, verdict: VerdictDropped, reason: tbpf.TrestleTrDropReasonTR_DROP_BAD_SRC}},
			{"hairpin", 1, ipv4(macA, macA2), &wantRec{dir: CaptureIn, verdict: VerdictDropped, reason: tbpf.TrestleTrDropReasonTR_DROP_HAIRPIN}},
		})
		if _, err := r.dp.StartCapture(CaptureSpec{Ifindex: r.port[2], Bridge: 1, In: true}); !errors.Is(err, ErrCaptureRunning) {
			t.Errorf("a second capture: %v, want %v", err, ErrCaptureRunning)
		}
		if n, err := c.Lost(); err != nil || n != 0 {
			t.Errorf("lost %d (%v), want 0", n, err)
		}
		c.Close()
		if r.prog() != before {
			t.Error("after the capture, attachments get another program than before it")
		}
	})
}

var macA2 = []byte{0x02, 0, 0, 0, 0, 0xa2}

func TestCaptureDirection(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := newRig(t, m, 1024, [4]uint32{})
		c := r.startCapture(1, false, true)
		r.capRun(t, c, []capCase{
			{"in, capturing out", 1, ipv4(bcast, macA), nil},
			{"out", 2, ipv4(macA, macB), &wantRec{dir: CaptureOut, verdict: VerdictForwarded, egress: 1}},
		})
		c.Close()
		c = r.startCapture(1, true, false)
		r.capRun(t, c, []capCase{
			{"out, capturing in", 2, ipv4(macA, macB), nil},
			{"in", 1, ipv4(macB, macA), &wantRec{dir: CaptureIn, verdict: VerdictForwarded, egress: 2}},
		})
	})
}

// In a VLAN-aware bridge an out frame is as its port sends it: tagged on a
// trunk, untagged on an access port, with the priority it came with.
func TestCaptureVLAN(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := vrig(t, m, 0)
		trunk := r.startCapture(3, true, true)
		access := ipv4(bcast, macA)
		tagged := tagTCI(bcast, macB, 0x8100, 5<<13|20)
		r.capRun(t, trunk, []capCase{
			{"access to trunk", 1, access, &wantRec{dir: CaptureOut, verdict: VerdictFlooded, egress: 3, data: addTag(access, 10)}},
			{"trunk in", 3, tagged, &wantRec{dir: CaptureIn, verdict: VerdictFlooded}},
		})
		trunk.Close()
		r.capRun(t, r.startCapture(2, true, true), []capCase{
			{"trunk to access", 3, tagged, &wantRec{dir: CaptureOut, verdict: VerdictFlooded, egress: 2, data: untag(tagged)}},
			{"another VLAN's", 3, tagTCI(bcast, macB, 0x8100, 10), nil},
		})
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
	captured := r.prog()
	err := r.ns.Do(func() error { return r.dp.SetVLANStage(true) })
	if err != nil {
		t.Fatal(err)
	}
	both := r.prog()
	if both == captured {
		t.Fatal("the VLAN stage did not change the capture's program")
	}
	r.capRun(t, c, []capCase{{"with both stages", 1, ipv4(bcast, macA), &wantRec{dir: CaptureIn, verdict: VerdictFlooded}}})
	c.Close()
	if p := r.prog(); p == nil || p == both || p == captured {
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
		r.capRun(t, c, []capCase{
			{"flood across patches", 1, ipv4(macB, macA), &wantRec{dir: CaptureOut, verdict: VerdictFlooded, egress: 3}},
			{"answer across patches", 3, ipv4(macA, macB), &wantRec{dir: CaptureIn, verdict: VerdictForwarded, egress: 1}},
			{"known unicast across patches", 1, ipv4(macB, macA), &wantRec{dir: CaptureOut, verdict: VerdictForwarded, egress: 3}},
			{"p2 to p1", 2, ipv4(macA, macC), nil},
		})
	})
}

// Frames the ring has no room for are counted: with a ring of one page
// nobody reads, every frame is captured or lost, and some are lost.
func TestCaptureLost(t *testing.T) {
	r := newRig(t, modes[0], 1024, [4]uint32{})
	c, err := r.dp.StartCapture(CaptureSpec{Ifindex: r.port[1], Bridge: 1, In: true, RingSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const sent = 100
	for i := 0; i < sent; i++ {
		r.run(1, ipv4(bcast, macA))
	}
	captured := 0
	for {
		if _, ok := next(t, c); !ok {
			break
		}
		captured++
	}
	lost, err := c.Lost()
	if err != nil || lost == 0 || captured+int(lost) != sent {
		t.Errorf("%d frames: %d captured, %d lost (%v); want every one either, some lost", sent, captured, lost, err)
	}
}

// A snap length keeps the first bytes of a frame and says its whole length;
// a tag put back in front of them (tc) does not make it keep more.
func TestCaptureSnaplen(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := newRig(t, m, 1024, [4]uint32{})
		c, err := r.dp.StartCapture(CaptureSpec{Ifindex: r.port[1], Bridge: 1, In: true, Snaplen: 20})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		sent := ipv4(bcast, macA)
		r.run(1, sent)
		f, ok := next(t, c)
		if !ok || !bytes.Equal(f.Data, sent[:20]) || f.Len != len(sent) {
			t.Errorf("snaplen 20: captured %v % x (len %d), want % x (len %d)", ok, f.Data, f.Len, sent[:20], len(sent))
		}
	})
}
