package datapath

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	tbpf "github.com/trestle/trestle/internal/bpf"
)

// Capture (bpf/lib/capture.h): copies of the frames of one port, through a
// ring buffer. Its code is in the programs only while a capture runs (a
// load-time constant, architecture.md rule 6): StartCapture creates the ring,
// loads the build with capture_on on the same maps and makes it the one
// Attach and Upgrade give; the caller moves every attachment to it. Stop
// makes the build without capture the current one again, the caller moves
// the attachments back, and Close unloads the capture build and its ring.

// CaptureRingSize is the capture ring's size in bytes: about 5,000 full
// frames of slack for the reader.
const CaptureRingSize = 8 << 20

// SnapMax is the most of a frame a capture keeps.
const SnapMax = int(tbpf.TrestleTrCaptureLimitsTR_CAPTURE_SNAP)

// ErrCaptureRunning: one capture at a time.
var ErrCaptureRunning = errors.New("a capture is running already")

// CaptureSpec says which frames to capture.
type CaptureSpec struct {
	Ifindex uint32 // the port, an interface of bridge Bridge
	Bridge  uint16
	// Walks: the bridge has patch ports, so frames that came in on other
	// bridges may leave by the port.
	Walks   bool
	In, Out bool // what the port receives, what the bridge sends out of it
	Snaplen int  // bytes kept of each frame, at most SnapMax; 0: SnapMax
	// RingSize is the ring's size in bytes, a power of two of at least
	// a page; 0: CaptureRingSize.
	RingSize uint32
}

// Capture is the running capture.
type Capture struct {
	d    *Datapath
	spec CaptureSpec
	ring *ebpf.Map
	rd   *ringbuf.Reader
	// wall - monotonic: the records are stamped with bpf_ktime_get_ns.
	offset int64
	closed bool
}

// Direction of a captured frame.
const (
	CaptureIn  = uint8(tbpf.TrestleTrCaptureDirTR_CAPTURE_IN)
	CaptureOut = uint8(tbpf.TrestleTrCaptureDirTR_CAPTURE_OUT)
)

// Verdicts of a captured frame.
const (
	VerdictForwarded = uint8(tbpf.TrestleTrCaptureVerdictTR_CAPTURE_FORWARDED)
	VerdictFlooded   = uint8(tbpf.TrestleTrCaptureVerdictTR_CAPTURE_FLOODED)
	VerdictDropped   = uint8(tbpf.TrestleTrCaptureVerdictTR_CAPTURE_DROPPED)
)

// CapturedFrame is one record: the frame's bytes as they came in (in) or
// as they left (out), cut at the snap length.
type CapturedFrame struct {
	Time    time.Time
	Dir     uint8 // CaptureIn or CaptureOut
	Verdict uint8
	// Reason: dropped, why (tbpf.NumDrops: no reason was noted, or, from
	// a build before drops beyond patch ports carried theirs, one there).
	Reason tbpf.DropReason
	// Beyond: dropped in a bridge beyond a patch port, counted on the
	// patch port the frame entered it by.
	Beyond bool
	Egress uint32 // forwarded: the ifindex it left by (0: through patch ports)
	Len    int    // the frame's length on the wire
	Data   []byte
}

// StartCapture loads the capture build and makes it the one attachments
// get from now on; the caller moves them (Upgrade), and Stops and Closes
// the capture when it ends.
func (d *Datapath) StartCapture(s CaptureSpec) (*Capture, error) {
	if d.capture != nil {
		return nil, ErrCaptureRunning
	}
	if s.Snaplen <= 0 || s.Snaplen > SnapMax {
		s.Snaplen = SnapMax
	}
	if s.RingSize == 0 {
		s.RingSize = CaptureRingSize
	}
	ring, err := ebpf.NewMap(&ebpf.MapSpec{Name: "tr_capture", Type: ebpf.RingBuf, MaxEntries: s.RingSize})
	if err != nil {
		return nil, fmt.Errorf("start capture: create its ring: %w", err)
	}
	c := &Capture{d: d, spec: s, ring: ring}
	d.capture = c
	next := d.stage
	next.capture = true
	if err := d.loadModes(next, d.progs[d.stage].modes()); err != nil {
		c.Close()
		return nil, fmt.Errorf("start capture: load the programs with capture: %w", err)
	}
	if c.rd, err = ringbuf.NewReader(ring); err != nil {
		c.Close()
		return nil, fmt.Errorf("start capture: read its ring: %w", err)
	}
	var zero uint32
	if err := d.objs.CaptureLost.Put(zero, make([]uint64, d.ncpu)); err != nil {
		c.Close()
		return nil, fmt.Errorf("start capture: reset its lost counter: %w", err)
	}
	conf := tbpf.TrestleTrCaptureConf{Ifindex: s.Ifindex, Bridge: s.Bridge,
		// The datapath keeps 4 bytes more: a tag put back may push the
		// last of them in.
		Snaplen: uint32(min(s.Snaplen+4, SnapMax))}
	if s.In {
		conf.Dirs |= CaptureIn
	}
	if s.Out {
		conf.Dirs |= CaptureOut
	}
	if s.Walks {
		conf.Walks = 1
	}
	if err := d.objs.CaptureConf.Put(zero, conf); err != nil {
		c.Close()
		return nil, fmt.Errorf("start capture: write its config: %w", err)
	}
	var mono unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &mono)
	c.offset = time.Now().UnixNano() - mono.Nano()
	d.stage = next
	d.log("capture started", "ifindex", s.Ifindex)
	return c, nil
}

// Stop makes the build without capture the one attachments get; the caller
// moves them back (Upgrade), then Closes the capture.
func (c *Capture) Stop() error {
	_ = c.d.objs.CaptureConf.Put(uint32(0), tbpf.TrestleTrCaptureConf{})
	if c.d.capture != c || !c.d.stage.capture {
		return nil
	}
	// The VLAN stage may have changed while the capture ran.
	next := c.d.stage
	next.capture = false
	if err := c.d.loadModes(next, c.d.progs[c.d.stage].modes()); err != nil {
		return fmt.Errorf("stop capture: load the programs without capture: %w", err)
	}
	c.d.stage = next
	return nil
}

// Close unloads the capture build and its ring (a program still attached
// keeps its own reference: Stop and move the attachments first). It ends a
// Read that is waiting.
func (c *Capture) Close() {
	if c.closed {
		return
	}
	c.closed = true
	if err := c.Stop(); err != nil {
		c.d.log("capture: a build without capture could not be loaded; ports keep the capture's", "err", err)
	}
	if c.rd != nil {
		c.rd.Close()
	}
	for st, s := range c.d.progs {
		if st.capture {
			s.close()
			delete(c.d.progs, st)
		}
	}
	c.ring.Close()
	if c.d.capture == c {
		c.d.capture = nil
	}
	c.d.log("capture stopped", "ifindex", c.spec.Ifindex)
}

// Lost counts the records the ring had no room for.
func (c *Capture) Lost() (uint64, error) {
	per := make([]uint64, c.d.ncpu)
	if err := c.d.objs.CaptureLost.Lookup(uint32(0), &per); err != nil {
		return 0, fmt.Errorf("read the capture's lost counter: %w", err)
	}
	var n uint64
	for _, v := range per {
		n += v
	}
	return n, nil
}

// ErrCaptureTimeout: Read found nothing before its deadline.
var ErrCaptureTimeout = errors.New("no frame before the deadline")

// Read waits for the next frame until deadline (zero: no deadline).
func (c *Capture) Read(deadline time.Time) (CapturedFrame, error) {
	raw, ok, err := readRing(c.rd, deadline)
	if err != nil {
		return CapturedFrame{}, err
	}
	if !ok {
		return CapturedFrame{}, ErrCaptureTimeout
	}
	return decodeCapture(raw, c.offset, c.spec.Snaplen)
}

// readRing waits for a ring's next record until deadline (zero: none);
// false: none came.
func readRing(rd *ringbuf.Reader, deadline time.Time) ([]byte, bool, error) {
	rd.SetDeadline(deadline)
	rec, err := rd.Read()
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, ringbuf.ErrFlushed) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return rec.RawSample, true, nil
}

// decodeCapture turns a ring record into the frame as it came in or left:
// a tag the kernel held outside the bytes goes back in, and an out frame's
// tag is what its port made of it.
func decodeCapture(raw []byte, offset int64, snaplen int) (CapturedFrame, error) {
	var r tbpf.TrestleTrCaptureRec
	n := binary.Size(r)
	if len(raw) < n {
		return CapturedFrame{}, fmt.Errorf("capture record of %d bytes, shorter than its header", len(raw))
	}
	if err := binary.Read(bytes.NewReader(raw[:n]), binary.NativeEndian, &r); err != nil {
		return CapturedFrame{}, err
	}
	data := raw[n:]
	if int(r.Caplen) < len(data) {
		data = data[:r.Caplen]
	}
	f := CapturedFrame{Time: time.Unix(0, int64(r.TsNs)+offset), Dir: r.Dir, Verdict: r.Verdict,
		Reason: tbpf.DropReason(r.Reason), Beyond: r.Beyond != 0, Egress: r.Egress, Len: int(r.Len)}
	buf := append([]byte(nil), data...)
	if r.MetaProto != 0 {
		// The tag's TPID is in network order, as the skb holds it.
		proto := uint16(r.MetaProto>>8 | r.MetaProto<<8)
		buf = insertTag(buf, proto, r.MetaTci)
		f.Len += 4
	}
	if r.Dir == CaptureOut {
		var delta int
		buf, delta = retag(buf, r.Tag, r.Vid)
		f.Len += delta
	}
	if len(buf) > snaplen {
		buf = buf[:snaplen]
	}
	f.Data = buf
	return f, nil
}

const tpid8021Q = 0x8100

// insertTag puts an 802.1Q-style tag after the two addresses.
func insertTag(b []byte, proto, tci uint16) []byte {
	if len(b) < 12 {
		return b
	}
	out := make([]byte, 0, len(b)+4)
	out = append(out, b[:12]...)
	out = binary.BigEndian.AppendUint16(out, proto)
	out = binary.BigEndian.AppendUint16(out, tci)
	return append(out, b[12:]...)
}

// retag does to a frame's outer tag what the datapath's tr_tag_to did on
// its way out (bpf/lib/vlan.h): take off an outer 802.1Q tag, or give the
// frame one of vid (the one it has, VID rewritten, priority kept; or a new
// one, priority 0). It returns the frame and its change in length.
func retag(b []byte, op uint8, vid uint16) ([]byte, int) {
	tagged := len(b) >= 16 && binary.BigEndian.Uint16(b[12:]) == tpid8021Q
	switch op {
	case uint8(tbpf.TrestleTrCaptureTagTR_CAPTURE_TAG_UNTAG):
		if !tagged {
			return b, 0
		}
		return append(b[:12:12], b[16:]...), -4
	case uint8(tbpf.TrestleTrCaptureTagTR_CAPTURE_TAG_VID):
		if tagged {
			tci := binary.BigEndian.Uint16(b[14:])
			binary.BigEndian.PutUint16(b[14:], tci&0xf000|vid)
			return b, 0
		}
		return insertTag(b, tpid8021Q, vid), 4
	}
	return b, 0
}

// Pending is how many bytes of records the ring holds unread.
func (c *Capture) Pending() int { return c.rd.AvailableBytes() }
