// Package sink is `trestle sink`: an XDP program on a device that counts
// every frame, and for frames with trestle's test header (internal/frame)
// tracks loss, reordering and duplicates per flow and one-way latency.
//
// Loss and reordering are exact within a window of the last 64 sequence
// numbers of a flow: a frame that arrives after a higher one is reordered
// (and no longer lost); one seen before is a duplicate. Sequences start at 0,
// so start the sink before the generator. A frame below a flow's highest
// sequence number but sent after it starts a new run of the generator, so
// one sink counts several runs in a row. Latency is the sink's
// CLOCK_MONOTONIC minus the generator's timestamp, so both must run on the
// same host; it is kept in a log-linear histogram (16 sub-buckets per power
// of two: a percentile is within 6.25% of the true value).
package sink

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"

	labbpf "github.com/trestle/trestle/internal/lab/bpf"
	"github.com/trestle/trestle/internal/netnsutil"
)

// Options of a sink.
type Options struct {
	Dev      string
	Pass     bool // XDP_PASS the frames instead of dropping them
	MaxFlows int  // flow ids 0..MaxFlows-1 are tracked; default 4096, at most 65536
	// LatencyEvery samples the latency of one frame in this many (by
	// sequence number; a power of two, default 1: every frame). Reading the
	// clock is the sink's largest cost, so a sample lets it keep up with a
	// faster sender; loss, reordering and duplicates still count every frame.
	LatencyEvery int
	// NetNS is the path of the network namespace Dev is in ("" for the
	// caller's).
	NetNS string
}

// Sink is a loaded, attached sink.
type Sink struct {
	objs     labbpf.SinkObjects
	link     link.Link
	ncpu     int
	maxFlows int
	// Locked says that flows are updated under a lock: the device has more
	// than one receive queue.
	Locked bool
}

const (
	histBuckets = int(labbpf.SinkTrSinkLimitsTR_SINK_HIST_BUCKETS)
	subBits     = int(labbpf.SinkTrSinkLimitsTR_SINK_SUB_BITS)
	// Window is how far behind the highest sequence number a frame can be
	// and still be told apart as reordered or duplicate.
	Window = int(labbpf.SinkTrSinkLimitsTR_SINK_WINDOW)
)

// Start loads the sink and attaches it to opts.Dev in native XDP mode.
func Start(opts Options) (*Sink, error) {
	var s *Sink
	err := netnsutil.Do(opts.NetNS, func() error {
		l, err := netlink.LinkByName(opts.Dev)
		if err != nil {
			return fmt.Errorf("sink: interface %q: %w", opts.Dev, err)
		}
		// One receive queue: NAPI runs the program for one frame at a
		// time, and the flows need no lock.
		if s, err = load(opts, l.Attrs().NumRxQueues != 1); err != nil {
			return err
		}
		s.link, err = link.AttachXDP(link.XDPOptions{Program: s.objs.TrestleSink, Interface: l.Attrs().Index, Flags: link.XDPDriverMode})
		if err != nil {
			s.objs.Close()
			return fmt.Errorf("attach sink to %q (native XDP): %w", opts.Dev, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// load loads the sink's program and maps without attaching them.
func load(opts Options, locked bool) (*Sink, error) {
	if opts.MaxFlows == 0 {
		opts.MaxFlows = 4096
	}
	if opts.MaxFlows < 1 || opts.MaxFlows > 65536 {
		return nil, fmt.Errorf("max flows %d: must be 1..65536", opts.MaxFlows)
	}
	if opts.LatencyEvery == 0 {
		opts.LatencyEvery = 1
	}
	spec, err := labbpf.LoadSink()
	if err != nil {
		return nil, err
	}
	spec.Maps[labbpf.SinkMapFlows].MaxEntries = uint32(opts.MaxFlows)
	vars := map[string]uint32{labbpf.SinkVarLocked: 0}
	if locked {
		vars[labbpf.SinkVarLocked] = 1
	}
	if opts.Pass {
		vars[labbpf.SinkVarVerdict] = 2 // XDP_PASS
	}
	for name, v := range vars {
		if err := spec.Variables[name].Set(v); err != nil {
			return nil, fmt.Errorf("set %s: %w", name, err)
		}
	}
	s := &Sink{maxFlows: opts.MaxFlows, Locked: locked}
	if err := spec.LoadAndAssign(&s.objs, nil); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("load sink: %+v", ve)
		}
		return nil, fmt.Errorf("load sink: %w", err)
	}
	if s.ncpu, err = ebpf.PossibleCPU(); err != nil {
		s.objs.Close()
		return nil, err
	}
	if err := s.SetLatencyEvery(opts.LatencyEvery); err != nil {
		s.objs.Close()
		return nil, err
	}
	return s, nil
}

// SetLatencyEvery changes the latency sample (Options.LatencyEvery) of a
// running sink.
func (s *Sink) SetLatencyEvery(n int) error {
	if n < 1 || n&(n-1) != 0 || n > 1<<20 {
		return fmt.Errorf("latency sample 1 in %d: must be a power of two up to %d", n, 1<<20)
	}
	if err := s.objs.LatencyMask.Set(uint32(n - 1)); err != nil {
		return fmt.Errorf("set latency sample: %w", err)
	}
	return nil
}

// Reset zeroes every counter, flow and histogram bucket, so that one sink
// serves several generator runs (each starts its sequences at 0). Call it
// when no test traffic is arriving.
func (s *Sink) Reset() error {
	zero := make([]labbpf.SinkTrSinkFlow, s.maxFlows)
	keys := make([]uint32, s.maxFlows)
	for i := range keys {
		keys[i] = uint32(i)
	}
	if _, err := s.objs.Flows.BatchUpdate(keys, zero, nil); err != nil {
		return fmt.Errorf("reset sink flows: %w", err)
	}
	if err := s.objs.Totals.Put(uint32(0), make([]labbpf.SinkTrSinkStats, s.ncpu)); err != nil {
		return fmt.Errorf("reset sink totals: %w", err)
	}
	per := make([]uint64, s.ncpu)
	for i := 0; i < histBuckets; i++ {
		if err := s.objs.Latency.Put(uint32(i), per); err != nil {
			return fmt.Errorf("reset latency bucket %d: %w", i, err)
		}
	}
	return nil
}

// ProgramStats is the kernel's run-time statistics of the sink program
// (zero unless ebpf.EnableStats is in force).
func (s *Sink) ProgramStats() (*ebpf.ProgramStats, error) { return s.objs.TrestleSink.Stats() }

// Close detaches and unloads the sink.
func (s *Sink) Close() {
	if s.link != nil {
		s.link.Close()
	}
	s.objs.Close()
}

// Snapshot is the sink's counters at one moment.
type Snapshot struct {
	At            time.Time
	Packets       uint64 // every frame
	Bytes         uint64
	Unsigned      uint64 // frames without the test header
	UnsignedBytes uint64
	BadFlow       uint64 // signed frames whose flow id is beyond MaxFlows
	Received      uint64 // signed frames counted in a flow
	SignedBytes   uint64
	Lost          int64
	Reordered     uint64
	Duplicates    uint64
	Flows         int // flows with at least one frame
	Runs          int // generator runs: the most times one flow started again at 0
	First, Last   time.Duration
	Hist          []uint64
}

// Snapshot reads the counters.
func (s *Sink) Snapshot() (Snapshot, error) {
	snap := Snapshot{At: time.Now(), Hist: make([]uint64, histBuckets)}
	var tot []labbpf.SinkTrSinkStats
	if err := s.objs.Totals.Lookup(uint32(0), &tot); err != nil {
		return snap, fmt.Errorf("read sink totals: %w", err)
	}
	for _, t := range tot {
		snap.Packets += t.Packets
		snap.Bytes += t.Bytes
		snap.Unsigned += t.UnsignedPackets
		snap.UnsignedBytes += t.UnsignedBytes
		snap.BadFlow += t.BadFlow
	}
	var f labbpf.SinkTrSinkFlow
	for i := 0; i < s.maxFlows; i++ {
		if err := s.objs.Flows.Lookup(uint32(i), &f); err != nil {
			return snap, fmt.Errorf("read flow %d: %w", i, err)
		}
		if f.Seen == 0 {
			continue
		}
		snap.Flows++
		snap.Runs = max(snap.Runs, int(f.Runs))
		snap.Received += f.Received
		snap.SignedBytes += f.Bytes
		snap.Lost += f.Lost
		snap.Reordered += f.Reordered
		snap.Duplicates += f.Duplicates
		first, last := time.Duration(f.FirstNs), time.Duration(f.LastNs)
		if snap.First == 0 || first < snap.First {
			snap.First = first
		}
		if last > snap.Last {
			snap.Last = last
		}
	}
	per := make([]uint64, s.ncpu)
	for i := 0; i < histBuckets; i++ {
		if err := s.objs.Latency.Lookup(uint32(i), &per); err != nil {
			return snap, fmt.Errorf("read latency bucket %d: %w", i, err)
		}
		for _, n := range per {
			snap.Hist[i] += n
		}
	}
	return snap, nil
}

// FlowReceived is the frames counted in each of flows 0..n-1 (n at most
// MaxFlows): which of several streams, each a flow of its own, reached
// the sink.
func (s *Sink) FlowReceived(n int) ([]uint64, error) {
	if n < 0 || n > s.maxFlows {
		return nil, fmt.Errorf("sink: flows 0..%d: it tracks %d", n-1, s.maxFlows)
	}
	out := make([]uint64, n)
	var f labbpf.SinkTrSinkFlow
	for i := range out {
		if err := s.objs.Flows.Lookup(uint32(i), &f); err != nil {
			return nil, fmt.Errorf("read flow %d: %w", i, err)
		}
		out[i] = f.Received
	}
	return out, nil
}

// Sub is what happened between an earlier snapshot and this one.
func (a Snapshot) Sub(b Snapshot) Snapshot {
	d := Snapshot{
		At: a.At, Packets: a.Packets - b.Packets, Bytes: a.Bytes - b.Bytes,
		Unsigned: a.Unsigned - b.Unsigned, UnsignedBytes: a.UnsignedBytes - b.UnsignedBytes,
		BadFlow: a.BadFlow - b.BadFlow, Received: a.Received - b.Received, SignedBytes: a.SignedBytes - b.SignedBytes,
		Lost: a.Lost - b.Lost, Reordered: a.Reordered - b.Reordered, Duplicates: a.Duplicates - b.Duplicates,
		Flows: a.Flows, Runs: a.Runs, First: a.First, Last: a.Last, Hist: make([]uint64, len(a.Hist)),
	}
	for i := range a.Hist {
		d.Hist[i] = a.Hist[i] - b.Hist[i]
	}
	return d
}

// BucketRange is the range of latencies, in ns, that bucket i holds.
func BucketRange(i int) (lo, hi uint64) {
	sub := 1 << subBits
	if i < sub {
		return uint64(i), uint64(i)
	}
	e := i/sub + subBits - 1
	m := uint64(sub + i%sub)
	shift := uint(e - subBits)
	return m << shift, (m+1)<<shift - 1
}

// Bucket is the histogram bucket of a latency in ns; it mirrors the sink's C.
func Bucket(ns uint64) int {
	sub := uint64(1) << subBits
	if ns < sub {
		return int(ns)
	}
	e := 63
	for ns>>uint(e) == 0 {
		e--
	}
	return (e-subBits+1)*int(sub) + int((ns>>uint(e-subBits))&(sub-1))
}

// Latency summarizes a histogram.
type Latency struct {
	Count uint64        `json:"count"`
	Min   time.Duration `json:"min_ns"`
	P50   time.Duration `json:"p50_ns"`
	P90   time.Duration `json:"p90_ns"`
	P99   time.Duration `json:"p99_ns"`
	P999  time.Duration `json:"p99_9_ns"`
	Max   time.Duration `json:"max_ns"`
}

// Summarize computes percentiles: each is the midpoint of the bucket that
// holds it; Min and Max are the low and high ends of the outermost buckets.
func Summarize(hist []uint64) Latency {
	var l Latency
	for _, n := range hist {
		l.Count += n
	}
	if l.Count == 0 {
		return l
	}
	first, last := -1, 0
	for i, n := range hist {
		if n > 0 {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	lo, _ := BucketRange(first)
	_, hi := BucketRange(last)
	l.Min, l.Max = time.Duration(lo), time.Duration(hi)
	pct := func(p float64) time.Duration {
		rank := uint64(math.Ceil(p * float64(l.Count)))
		if rank < 1 {
			rank = 1
		}
		var seen uint64
		for i, n := range hist {
			seen += n
			if seen >= rank {
				lo, hi := BucketRange(i)
				return time.Duration((lo + hi) / 2)
			}
		}
		return l.Max
	}
	l.P50, l.P90, l.P99, l.P999 = pct(0.50), pct(0.90), pct(0.99), pct(0.999)
	return l
}

// Summary is what `trestle sink --json` prints: the command writes it
// and scripts and the end-to-end tests read it, by its JSON names.
type Summary struct {
	Dev           string  `json:"dev"`
	ElapsedS      float64 `json:"elapsed_seconds"`
	Packets       uint64  `json:"packets"`
	Bytes         uint64  `json:"bytes"`
	Received      uint64  `json:"received"` // frames with the test header
	ReceivedBytes uint64  `json:"received_bytes"`
	Unsigned      uint64  `json:"unsigned"`
	BadFlow       uint64  `json:"bad_flow"`
	Lost          int64   `json:"lost"`
	Reordered     uint64  `json:"reordered"`
	Duplicated    uint64  `json:"duplicated"`
	Flows         int     `json:"flows"`
	Runs          int     `json:"runs"`                // generator runs seen (each starts its sequences at 0)
	RxPPS         float64 `json:"received_per_second"` // signed frames from the first to the last
	Latency       Latency `json:"latency"`
}
