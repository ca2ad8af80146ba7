// Package gen is `trestle gen`: a traffic generator that sends IPv4 or IPv6
// UDP frames carrying trestle's test header (internal/frame) out of one device.
//
// The live mode runs an XDP program through BPF_PROG_RUN with
// BPF_F_TEST_XDP_LIVE_FRAMES: every XDP_TX of the program is a frame sent by
// the device's XDP transmit path, without socket buffers. The program paces
// itself (a run that is too early sends nothing), so calls stay large: each
// call has a set-up cost, and many small calls would cap the rate. One
// sending thread per CPU in Options.CPUs, each pinned, each with its own share
// of the flows and of the rate.
//
// The packet mode writes the same frames to an AF_PACKET socket, for devices
// where live frames cannot run; it is slower and paces in Go.
package gen

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"time"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/trestle/trestle/internal/frame"
	labbpf "github.com/trestle/trestle/internal/lab/bpf"
	"github.com/trestle/trestle/internal/netnsutil"
	"github.com/trestle/trestle/internal/progrun"
)

// Options of one generator run.
type Options struct {
	Dev      string
	Mode     string // "live" (default) or "packet"
	DstMAC   net.HardwareAddr
	SrcMAC   net.HardwareAddr // default: the device's
	Mix      frame.Mix        // frame sizes without FCS and their weights
	Rate     float64          // frames per second in all; 0: as fast as possible
	Duration time.Duration    // 0 with Count 0: until ctx is done
	Count    uint64           // frames in all; 0: no limit
	Flows    int              // 1..65536; 0: one per sending thread
	SrcIPs   frame.IPRange
	DstIPs   frame.IPRange
	SrcPorts frame.PortRange
	DstPorts frame.PortRange
	VLAN     uint16
	IPv6     bool
	CPUs     []int // one sending thread on each; default: the CPU the call starts on
	Batch    int   // live frames per batch inside one BPF_PROG_RUN; default 64
	// ClockEvery is how many frames may go per reading of the clock (live
	// mode; default 16). A reading that finds k frames due sends them back
	// to back with the time of that reading, so 1 gives every frame its own
	// timestamp and more lets a sender that is behind catch up faster.
	ClockEvery int
	// SrcMACs and DstMACs, when above 1, make the source or destination
	// MAC a range: frame k takes the given address plus k mod N in its
	// low 24 bits (each sending thread a share of the range), for the
	// address learning and caching tests of RFC 2889. Live mode only.
	SrcMACs, DstMACs int
	// RandomMACs scatters a range's addresses over the low 24 bits in an
	// order that looks random (MACOffset): frame k takes the given address
	// plus MACOffset(k mod N), still N distinct addresses a cycle. A MAC
	// flood from random sources, as macof sends.
	RandomMACs bool
	// FlowBase is added to every flow id the frames carry (the flows are
	// FlowBase..FlowBase+Flows-1, at most 65535): a second generator's
	// frames then stay apart from the first's in a sink that tracks only
	// the low ids (it counts the others as bad_flow).
	FlowBase int
	// GroupMACs: each flow's destination MAC is its destination IP's
	// multicast MAC (01:00:5e:... for IPv4, 33:33:... for IPv6) in place
	// of DstMAC, so that flows to DstIPs of N groups go to N groups.
	GroupMACs bool
	// NetNS is the path of the network namespace Dev is in ("" for the
	// caller's); the sending threads enter it.
	NetNS string
}

// Stats is a running or final account.
type Stats struct {
	Sent     uint64        `json:"sent"`
	Bytes    uint64        `json:"bytes"` // frame bytes without FCS
	Elapsed  time.Duration `json:"elapsed_ns"`
	Declined uint64        `json:"declined"` // runs that sent nothing because pacing said wait
	// DevDropped is the growth of the device's tx_dropped counter during
	// the run: frames the generator handed to the device that it could not
	// send (a veth whose peer's queue was full). They are in Sent.
	DevDropped uint64 `json:"dev_dropped"`
	// ProgRuntime and ProgRuns are the kernel's run-time statistics of the
	// generator program over the run (live mode), when they are enabled
	// (ebpf.EnableStats): its own cost, without the device's.
	ProgRuntime time.Duration `json:"prog_runtime_ns,omitempty"`
	ProgRuns    uint64        `json:"prog_runs,omitempty"`
	// Rate is the rate asked for (Options.Rate; 0: as fast as it goes),
	// to hold the achieved one against (Behind).
	Rate float64 `json:"rate_requested,omitempty"`
	// First is when the first frame went (live mode), on the clock of
	// CLOCK_MONOTONIC and the sinks' BPF clock: to time what became of it.
	First time.Duration `json:"-"`
}

// BehindTolerance is how far below its rate a run may send and still be
// said to keep up. A run that keeps up sends within a few hundredths of a
// percent of its rate, in either mode (cmd/trestle's TestGenRate and
// TestGenSinkNoLoss log it): 1% short is falling behind.
const BehindTolerance = 0.01

// Behind is how far a run with a rate fell short of it, as a share of the
// rate (0.185: it sent 81.5% of the frames the rate asked for in its
// time), or 0 if it kept up to within BehindTolerance or had no rate. A
// sender that cannot keep up sends what it can: it never catches up more
// than a few milliseconds' worth, so the shortfall is lost for good.
func (s Stats) Behind() float64 {
	if s.Rate <= 0 || s.Elapsed <= 0 {
		return 0
	}
	if short := 1 - s.PPS()/s.Rate; short > BehindTolerance {
		return short
	}
	return 0
}

// PPS is the achieved rate.
func (s Stats) PPS() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Sent) / s.Elapsed.Seconds()
}

// L2Mbps counts frame bytes plus the 4-byte FCS; L1Mbps also the 8-byte
// preamble and 12-byte inter-frame gap, as a wire would carry them.
func (s Stats) L2Mbps() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Bytes+4*s.Sent) * 8 / s.Elapsed.Seconds() / 1e6
}

func (s Stats) L1Mbps() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Bytes+24*s.Sent) * 8 / s.Elapsed.Seconds() / 1e6
}

func (o *Options) defaults() error {
	if o.Mode == "" {
		o.Mode = "live"
	}
	if o.Mode != "live" && o.Mode != "packet" {
		return fmt.Errorf("mode %q: use live or packet", o.Mode)
	}
	if len(o.Mix.Sizes) == 0 {
		o.Mix = frame.Mix{Sizes: []int{frame.MinSize(o.VLAN != 0, o.IPv6)}, Weights: []int{1}}
	}
	if len(o.CPUs) == 0 {
		o.CPUs = []int{currentCPU()}
	}
	if o.Flows == 0 {
		// Each sending thread owns its flows, so each needs one.
		o.Flows = len(o.CPUs)
	}
	if o.Flows < 1 || o.Flows > 65536 {
		return fmt.Errorf("flows %d: must be 1..65536", o.Flows)
	}
	if o.Rate < 0 {
		return fmt.Errorf("rate %v: must be >= 0", o.Rate)
	}
	if o.Batch == 0 {
		o.Batch = 64
	}
	if o.Batch < 1 || o.Batch > 256 {
		return fmt.Errorf("batch %d: must be 1..256", o.Batch)
	}
	if o.ClockEvery == 0 {
		o.ClockEvery = 16
	}
	if o.ClockEvery < 1 || o.ClockEvery > 1024 {
		return fmt.Errorf("clock-every %d: must be 1..1024", o.ClockEvery)
	}
	for _, n := range []struct {
		name string
		v    int
	}{{"source", o.SrcMACs}, {"destination", o.DstMACs}} {
		if n.v < 0 || n.v > 1<<24 {
			return fmt.Errorf("%s MAC range of %d: must be 0..%d", n.name, n.v, 1<<24)
		}
		if n.v > 1 && o.Mode == "packet" {
			return fmt.Errorf("%s MAC range: live mode only", n.name)
		}
	}
	if o.RandomMACs && o.SrcMACs <= 1 && o.DstMACs <= 1 {
		return errors.New("random MACs: give a source or destination MAC range to scatter")
	}
	if o.FlowBase < 0 || o.FlowBase+o.Flows > 65536 {
		return fmt.Errorf("flow ids %d..%d: must be within 0..65535", o.FlowBase, o.FlowBase+o.Flows-1)
	}
	if len(o.DstMAC) != 6 {
		return errors.New("a destination MAC (--dst-mac) is needed")
	}
	if len(o.CPUs) > int(labbpf.GenTrGenLimitsTR_GEN_MAX_CPUS) {
		return fmt.Errorf("%d threads: at most %d", len(o.CPUs), labbpf.GenTrGenLimitsTR_GEN_MAX_CPUS)
	}
	return nil
}

func currentCPU() int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err == nil {
		for i := 0; i < 1024; i++ {
			if set.IsSet(i) {
				return i
			}
		}
	}
	return 0
}

// flowSpecs builds one Spec per flow at the first size.
func flowSpecs(o *Options, src net.HardwareAddr) ([]frame.Spec, error) {
	srcIPs, dstIPs := o.SrcIPs, o.DstIPs
	if srcIPs.First == nil {
		srcIPs = DefaultSrcIPs(o.IPv6)
	}
	if dstIPs.First == nil {
		dstIPs = DefaultDstIPs(o.IPv6)
	}
	sp, dp := o.SrcPorts, o.DstPorts
	if sp.First == 0 && sp.Last == 0 {
		sp = frame.PortRange{First: DefaultPort, Last: DefaultPort}
	}
	if dp.First == 0 && dp.Last == 0 {
		dp = frame.PortRange{First: DefaultPort, Last: DefaultPort}
	}
	base := frame.Spec{Dst: o.DstMAC, Src: src, VLAN: o.VLAN, IPv6: o.IPv6, Size: o.Mix.Sizes[0]}
	specs, err := frame.Flows(base, o.Flows, srcIPs, dstIPs, sp, dp)
	for i := range specs {
		specs[i].Flow += uint16(o.FlowBase)
		if o.GroupMACs {
			g, ok := netip.AddrFromSlice(specs[i].DstIP)
			if !ok || !g.Unmap().IsMulticast() {
				return nil, fmt.Errorf("group MACs: flow %d's destination %v is not a multicast group", i, specs[i].DstIP)
			}
			specs[i].Dst = frame.GroupMAC(g.Unmap())
		}
	}
	return specs, err
}

// MACOffset is what the generator adds to the low 24 bits of a range's
// first address for the range's k-th address: k, or with random a
// permutation of the 24-bit numbers (multiplications by odd numbers and
// right xor-shifts, each one-to-one), so that N offsets are N distinct
// addresses. It mirrors bpf/lab/gen.c's mac_offset.
func MACOffset(k uint32, random bool) uint32 {
	if !random {
		return k
	}
	x := (k * 0x9e3779b1) & 0xffffff
	x ^= x >> 13
	x = (x * 0x5bd1e995) & 0xffffff
	x ^= x >> 11
	return x
}

// DefaultPort is the UDP source and destination port of the frames when
// Options gives none: discard (RFC 863), which a host stack drops quietly.
const DefaultPort = 9

// DefaultSrcIPs and DefaultDstIPs are the addresses of the frames when
// Options gives none: 198.18.0.1 to 198.18.0.2 (2001:2::1 to 2001:2::2).
// The lab's filter rules pass exactly these.
func DefaultSrcIPs(v6 bool) frame.IPRange { return defaultRange(v6, 1) }
func DefaultDstIPs(v6 bool) frame.IPRange { return defaultRange(v6, 2) }

// defaultRange is 198.18.0.N or 2001:2::N: the benchmarking ranges of RFC 2544 and RFC 5180.
func defaultRange(v6 bool, n byte) frame.IPRange {
	ip := net.IPv4(198, 18, 0, n).To4()
	if v6 {
		ip = net.ParseIP(fmt.Sprintf("2001:2::%d", n))
	}
	return frame.IPRange{First: ip, Last: ip}
}

// Run sends until the duration or count is reached or ctx is done, calling
// progress (if non-nil) about every interval with the totals so far.
func Run(ctx context.Context, o Options, interval time.Duration, progress func(Stats)) (Stats, error) {
	if err := o.defaults(); err != nil {
		return Stats{}, err
	}
	var l netlink.Link
	err := netnsutil.Do(o.NetNS, func() (err error) {
		l, err = netlink.LinkByName(o.Dev)
		return err
	})
	if err != nil {
		return Stats{}, fmt.Errorf("gen: interface %q: %w", o.Dev, err)
	}
	src := o.SrcMAC
	if src == nil {
		src = l.Attrs().HardwareAddr
	}
	specs, err := flowSpecs(&o, src)
	if err != nil {
		return Stats{}, err
	}
	drops0 := txDropped(o.NetNS, l.Attrs().Index)
	var s Stats
	if o.Mode == "packet" {
		if o.Duration > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, o.Duration)
			defer cancel()
		}
		s, err = runPacket(ctx, o, l.Attrs().Index, specs, interval, progress)
	} else {
		// Live mode times the duration from its first frame, in the program.
		s, err = runLive(ctx, o, l.Attrs().Index, specs, interval, progress)
	}
	if d := txDropped(o.NetNS, l.Attrs().Index); d > drops0 {
		s.DevDropped = d - drops0
	}
	s.Rate = o.Rate
	return s, err
}

// txDropped is the device's tx_dropped counter, 0 if it cannot be read.
func txDropped(ns string, ifindex int) uint64 {
	var n uint64
	_ = netnsutil.Do(ns, func() error {
		l, err := netlink.LinkByIndex(ifindex)
		if err == nil && l.Attrs().Statistics != nil {
			n = l.Attrs().Statistics.TxDropped
		}
		return nil
	})
	return n
}

// pinThread locks the calling goroutine to its thread, moves the thread
// into the namespace at ns (if not "") and onto cpu. The caller must never
// unlock the thread: it ends with the goroutine instead of serving others
// in the wrong namespace or on one CPU.
func pinThread(cpu int, ns string) error {
	runtime.LockOSThread()
	if ns != "" {
		h, err := netns.GetFromPath(ns)
		if err != nil {
			return fmt.Errorf("open namespace %s: %w", ns, err)
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			return fmt.Errorf("enter namespace %s: %w", ns, err)
		}
	}
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("pin sending thread to CPU %d: %w", cpu, err)
	}
	return nil
}

type liveGen struct {
	objs labbpf.GenObjects
	ncpu int
}

func loadLive(o *Options, specs []frame.Spec) (*liveGen, []byte, error) {
	spec, err := labbpf.LoadGen()
	if err != nil {
		return nil, nil, err
	}
	nsizes := len(o.Mix.Sizes)
	pattern := o.Mix.Pattern()
	if len(pattern) > int(labbpf.GenTrGenLimitsTR_GEN_MAX_PATTERN) {
		return nil, nil, fmt.Errorf("size mix %s: %d slots, at most %d", o.Mix, len(pattern), labbpf.GenTrGenLimitsTR_GEN_MAX_PATTERN)
	}
	maxSize := 0
	for _, s := range o.Mix.Sizes {
		if s > maxSize {
			maxSize = s
		}
	}
	spec.Maps[labbpf.GenMapTemplates].MaxEntries = uint32(len(specs) * nsizes)
	spec.Maps[labbpf.GenMapSeqs].MaxEntries = uint32(len(specs))

	// Templates, and the header length every template shares.
	tmpls := make([]labbpf.GenTrGenTmpl, 0, len(specs)*nsizes)
	hdrLen := 0
	var first []byte
	for _, fs := range specs {
		for _, size := range o.Mix.Sizes {
			fs.Size = size
			f, lay, err := frame.Build(fs)
			if err != nil {
				return nil, nil, err
			}
			if first == nil && size == maxSize {
				first = f
			}
			hdrLen = lay.Test
			var t labbpf.GenTrGenTmpl
			copy(t.Hdr[:], f[:lay.Test])
			t.CsumBase = frame.UDPCsumBase(f, lay)
			t.Size = uint16(size)
			t.Flow = uint32(fs.Flow)
			tmpls = append(tmpls, t)
		}
	}
	sets := map[string]any{
		labbpf.GenVarHdrLen:     uint32(hdrLen),
		labbpf.GenVarNsizes:     uint32(nsizes),
		labbpf.GenVarPatternLen: uint32(len(pattern)),
		labbpf.GenVarMaxSize:    uint32(maxSize),
		labbpf.GenVarMaxBurstNs: uint64(10 * time.Millisecond),
		labbpf.GenVarClockEvery: uint32(o.ClockEvery),
		labbpf.GenVarSrcMacs:    uint32(max(o.SrcMACs, 1)),
		labbpf.GenVarDstMacs:    uint32(max(o.DstMACs, 1)),
		labbpf.GenVarRandomMacs: boolU32(o.RandomMACs),
	}
	for name, v := range sets {
		if err := spec.Variables[name].Set(v); err != nil {
			return nil, nil, fmt.Errorf("set %s: %w", name, err)
		}
	}
	g := &liveGen{}
	if err := spec.LoadAndAssign(&g.objs, nil); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, nil, fmt.Errorf("load generator: %+v", ve)
		}
		return nil, nil, fmt.Errorf("load generator: %w", err)
	}
	for i := range tmpls {
		if err := g.objs.Templates.Put(uint32(i), &tmpls[i]); err != nil {
			g.objs.Close()
			return nil, nil, fmt.Errorf("write template %d: %w", i, err)
		}
	}
	for i, p := range pattern {
		if err := g.objs.Pattern.Put(uint32(i), uint32(p)); err != nil {
			g.objs.Close()
			return nil, nil, fmt.Errorf("write size pattern: %w", err)
		}
	}
	return g, first, nil
}

// share splits n into k parts that differ by at most one; part i.
func share(n uint64, k, i int) uint64 {
	q, r := n/uint64(k), n%uint64(k)
	if uint64(i) < r {
		return q + 1
	}
	return q
}

func runLive(ctx context.Context, o Options, ifindex int, specs []frame.Spec, interval time.Duration, progress func(Stats)) (Stats, error) {
	g, data, err := loadLive(&o, specs)
	if err != nil {
		return Stats{}, err
	}
	defer g.objs.Close()

	threads := len(o.CPUs)
	for i, cpu := range o.CPUs {
		st := labbpf.GenTrGenCpu{
			FlowFirst:  uint32(i),
			FlowStep:   uint32(threads),
			Nflows:     uint32((len(specs) - i + threads - 1) / threads),
			DurationNs: uint64(o.Duration),
			// Thread i takes MACs i, i+threads, ... of each range.
			SrcMacCursor: uint32(i % max(o.SrcMACs, 1)),
			DstMacCursor: uint32(i % max(o.DstMACs, 1)),
			MacStep:      uint32(threads),
		}
		if st.Nflows == 0 {
			return Stats{}, fmt.Errorf("%d threads but %d flows: give each thread a flow", threads, len(specs))
		}
		if o.Rate > 0 {
			st.IntervalNs = uint64(float64(threads) * 1e9 / o.Rate)
			if st.IntervalNs == 0 {
				st.IntervalNs = 1
			}
		}
		if o.Count > 0 {
			st.Limit = share(o.Count, threads, i)
		}
		if err := g.objs.Cpus.Put(uint32(cpu), &st); err != nil {
			return Stats{}, fmt.Errorf("set up CPU %d: %w", cpu, err)
		}
	}

	// The sending window runs from the first frame of any CPU to the last
	// frame of any, plus one pacing slot for that last frame.
	read := func() (Stats, []labbpf.GenTrGenCpu) {
		var s Stats
		var first, last uint64
		sts := make([]labbpf.GenTrGenCpu, len(o.CPUs))
		for i, cpu := range o.CPUs {
			st := &sts[i]
			if g.objs.Cpus.Lookup(uint32(cpu), st) != nil {
				continue
			}
			s.Sent += st.Sent
			s.Bytes += st.Bytes
			s.Declined += st.Declined
			if st.FirstNs != 0 && (first == 0 || st.FirstNs < first) {
				first = st.FirstNs
			}
			if st.Sent > 0 && st.LastNs+st.IntervalNs > last {
				last = st.LastNs + st.IntervalNs
			}
		}
		if first != 0 && last > first {
			s.Elapsed = time.Duration(last - first)
		}
		s.First = time.Duration(first)
		return s, sts
	}
	finished := func(sts []labbpf.GenTrGenCpu) bool {
		now := monotonicNs()
		for _, st := range sts {
			switch {
			case st.Limit > 0 && st.Sent >= st.Limit:
			case st.DurationNs > 0 && st.FirstNs > 0 && now-st.FirstNs >= st.DurationNs:
			default:
				return false
			}
		}
		return true
	}

	ctxIn := make([]byte, 24) // struct xdp_md: data_end at 4, ingress_ifindex at 12
	putU32(ctxIn[4:], uint32(len(data)))
	putU32(ctxIn[12:], uint32(ifindex))

	senders := make([]*sender, len(o.CPUs))
	errs := make(chan error, threads)
	for i, cpu := range o.CPUs {
		senders[i] = &sender{cpu: cpu, tid: make(chan int, 1)}
		go func(sd *sender) {
			errs <- sd.run(g, data, ctxIn, o.Batch, o.NetNS)
		}(senders[i])
	}
	tids := make([]int, len(senders))
	for i, sd := range senders {
		tids[i] = <-sd.tid
	}

	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	lastProgress := time.Now()
	var runErr error
	running := threads
	stopping := false
	for running > 0 {
		select {
		case err := <-errs:
			running--
			if err != nil && runErr == nil {
				runErr = err
			}
			if !stopping {
				stopping = true
				stopAll(g, tids)
			}
		case <-poll.C:
			s, sts := read()
			if !stopping && (ctx.Err() != nil || finished(sts)) {
				stopping = true
			}
			if stopping {
				// A call runs until its repeat count or a signal: set the
				// flag that makes the program send nothing more, then
				// interrupt each sending thread until it returns.
				stopAll(g, tids)
			}
			if progress != nil && interval > 0 && time.Since(lastProgress) >= interval {
				lastProgress = time.Now()
				progress(s)
			}
		}
	}
	s, _ := read()
	if ps, err := g.objs.TrestleGen.Stats(); err == nil {
		s.ProgRuntime, s.ProgRuns = ps.Runtime, ps.RunCount
	}
	return s, runErr
}

func stopAll(g *liveGen, tids []int) {
	_ = g.objs.StopAll.Set(uint32(1))
	for _, tid := range tids {
		_ = unix.Tgkill(unix.Getpid(), tid, unix.SIGURG)
	}
}

func nonZero(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// sender is one pinned thread issuing BPF_PROG_RUN calls.
type sender struct {
	cpu int
	tid chan int
}

// run issues one long live-frames call on a pinned thread; the program paces
// and counts. A call ends early with EINTR when the thread is signalled,
// which is how it is stopped; Go's own signals can interrupt it too, so a
// call that ends before the stop flag is set is issued again (the program's
// state is in maps and carries on).
func (sd *sender) run(g *liveGen, data, ctxIn []byte, batch int, ns string) error {
	err := pinThread(sd.cpu, ns)
	sd.tid <- unix.Gettid()
	if err != nil {
		return err
	}
	for {
		var stop uint32
		if err := g.objs.StopAll.Get(&stop); err == nil && stop != 0 {
			return nil
		}
		err := liveRun(g.objs.TrestleGen.FD(), data, ctxIn, 1<<31, uint32(batch))
		if err != nil && err != unix.EINTR {
			return fmt.Errorf("run generator on CPU %d: %w", sd.cpu, err)
		}
	}
}

// liveRun is BPF_PROG_TEST_RUN with live frames, issued directly: the
// library's wrapper restarts an interrupted run, and interrupting it is how
// a long run is stopped.
func liveRun(progFD int, data, ctxIn []byte, repeat, batch uint32) error {
	_, err := progrun.Run(progFD, progrun.Options{Data: data, Context: ctxIn, Repeat: repeat,
		Flags: unix.BPF_F_TEST_XDP_LIVE_FRAMES, BatchSize: batch})
	return err
}

func boolU32(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

func putU32(b []byte, v uint32) {
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
}

func monotonicNs() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}
