package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/trestle/trestle/internal/frame"
	"github.com/trestle/trestle/internal/lab/gen"
	"github.com/trestle/trestle/internal/lab/sink"
)

// Placement says where the generator, the DUT's work and the sink run.
//
// "shared": nothing is moved. The generator's CPU also runs what its frames
// cause: a veth delivers on the sending CPU, so the DUT's forwarding and the
// sink run there too, frame after frame. The path cannot lose frames to a
// full queue (the sender waits for the work it caused), and its rate is that
// of the whole path on one core.
//
// "split": the DUT's ingress ports and the sinks' interfaces get threaded
// NAPI, pinned: the DUT's work to DUTCPU, the sinks to SinkCPU. Where the
// machine has a core for each, the generator, the DUT and the sink then do
// not share. On 2 cores, measured here, the generator's busy loop keeps a
// sink thread on its core from running and queues overflow: see
// docs/benchmarks.md.
type Placement struct {
	Mode    string         `json:"mode"`
	GenCPU  int            `json:"gen_cpu"`
	DUTCPU  int            `json:"dut_cpu"`
	SinkCPU int            `json:"sink_cpu"`
	Threads map[string]int `json:"napi_threads,omitempty"` // NAPI thread → CPU, as pinned
	// GenCPUs are the CPUs of the generator's threads where a test runs
	// more than one (the cores test), in order.
	GenCPUs []int `json:"gen_cpus,omitempty"`
}

// ChoosePlacement is the placement for mode ("auto", "shared", "split") on
// the CPUs this process may use.
func ChoosePlacement(mode string) (Placement, error) {
	cpus, err := AllowedCPUs()
	if err != nil {
		return Placement{}, err
	}
	if mode == "auto" {
		mode = "shared"
		if len(cpus) >= 3 {
			mode = "split"
		}
	}
	switch mode {
	case "shared":
		c := cpus[0]
		dut := c
		if len(cpus) > 1 {
			dut = cpus[1] // the DUT's own threads (daemon, OVS PMD), if it has any
		}
		return Placement{Mode: mode, GenCPU: c, DUTCPU: dut, SinkCPU: c}, nil
	case "split":
		if len(cpus) < 2 {
			return Placement{}, fmt.Errorf("placement split needs 2 CPUs, this process may use %d", len(cpus))
		}
		// With two CPUs the sinks go with the DUT, never with the
		// generator: its paced loop keeps its CPU busy, and a receiving
		// NAPI thread there is scheduled too late to empty a 256-frame
		// veth ring (a quarter of the frames lost at any rate, measured).
		p := Placement{Mode: mode, GenCPU: cpus[0], DUTCPU: cpus[1], SinkCPU: cpus[1]}
		if len(cpus) >= 3 {
			p.SinkCPU = cpus[2]
		}
		return p, nil
	}
	return Placement{}, fmt.Errorf("placement %q: not one of auto, shared, split", mode)
}

// Rig is a topology with its DUT set up, ready for trials.
type Rig struct {
	T     *Topo
	DUT   DUT
	Place Placement
	Env   *Env
	sinks map[int]*sink.Sink // by host index
	// Offloads records the features of the interfaces as measured.
	Offloads map[string]map[string]bool
	// groToggle: GRO goes on for the generator's trials only (see NewRig).
	groToggle bool
	// SinkFlows is the flow ids the sinks track (0: 64): the scenario's
	// flows, where it has more.
	SinkFlows int
	// Bidirectional: the tests from h1 to h2 that can (Throughput,
	// StreamsAt, LossCurve) run both ways at once (TrialSpec.Both).
	Bidirectional bool
}

func (r *Rig) setGRO(on bool) error {
	if r.T.DUT == nil {
		return nil
	}
	for _, p := range r.T.DUTPorts() {
		if err := r.T.DUT.Features(p, map[string]bool{"rx-gro": on}); err != nil {
			return err
		}
	}
	return nil
}

// offloadKeys are the features recorded for every interface.
var offloadKeys = []string{"rx-gro", "tx-checksum-ip-generic", "tx-tcp-segmentation", "tx-generic-segmentation"}

// NewRig builds the DUT on t.
func NewRig(ctx context.Context, t *Topo, d DUT, place Placement, env *Env) (*Rig, error) {
	r := &Rig{T: t, DUT: d, Place: place, Env: env, sinks: map[int]*sink.Sink{}}
	// GRO on every DUT port, before the DUT starts and for the whole unit:
	// a veth delivers XDP frames, which the generator sends, only into a
	// peer with GRO or an XDP program; and changing it later resets a
	// veth's queues under a DUT that holds sockets on them (Open vSwitch's
	// AF_XDP ports stopped forwarding when it was toggled).
	if g, ok := d.(interface{ groForPacketsOnly() bool }); ok && g.groForPacketsOnly() {
		r.groToggle = true
	} else if err := r.setGRO(true); err != nil {
		return nil, err
	}
	if t.DUT == nil {
		if _, ok := d.(direct); !ok {
			return nil, fmt.Errorf("DUT %s needs a topology with bridges", d.Name())
		}
	} else if err := d.Setup(ctx, t, env); err != nil {
		return nil, fmt.Errorf("set up %s: %w", d.Name(), err)
	}
	return r, nil
}

// Close detaches the sinks and tears the DUT down.
func (r *Rig) Close(ctx context.Context) error {
	r.StopPackets()
	return r.DUT.Teardown(ctx)
}

// StartPackets readies the rig for generator trials: a sink on each host in
// sinkHosts, and the placement.
func (r *Rig) StartPackets(ctx context.Context, sinkHosts []int) error {
	if r.groToggle {
		if err := r.setGRO(true); err != nil {
			return err
		}
	}
	for _, i := range sinkHosts {
		h := r.T.Hosts[i]
		s, err := sink.Start(sink.Options{Dev: h.If, NetNS: h.NS.Path, MaxFlows: max(64, r.SinkFlows), LatencyEvery: 64})
		if err != nil {
			r.StopPackets()
			return fmt.Errorf("sink on %s: %w", h.NS.Name, err)
		}
		r.sinks[i] = s
	}
	r.Place.Threads = map[string]int{}
	if r.Place.Mode == "split" {
		type pinning struct {
			ns  *NS
			dev string
			cpu int
		}
		var ps []pinning
		if r.T.DUT != nil {
			for _, p := range r.T.Ingress {
				ps = append(ps, pinning{r.T.DUT, p, r.Place.DUTCPU})
			}
		}
		for _, i := range sinkHosts {
			cpu := r.Place.SinkCPU
			if r.T.DUT == nil {
				cpu = r.Place.DUTCPU // the straight path: receiving is the only work
			}
			ps = append(ps, pinning{r.T.Hosts[i].NS, r.T.Hosts[i].If, cpu})
		}
		for _, p := range ps {
			names, err := p.ns.ThreadNAPI(ctx, p.dev, p.cpu)
			if err != nil {
				return err
			}
			for _, n := range names {
				r.Place.Threads[n] = p.cpu
			}
		}
	}
	return r.recordOffloads()
}

func (r *Rig) recordOffloads() error {
	r.Offloads = map[string]map[string]bool{}
	for _, h := range r.T.Hosts {
		f, err := h.NS.FeatureState(h.If, offloadKeys...)
		if err != nil {
			return err
		}
		r.Offloads[h.NS.Name+"/"+h.If] = f
	}
	if r.T.DUT != nil {
		for _, p := range r.T.DUTPorts() {
			f, err := r.T.DUT.FeatureState(p, offloadKeys...)
			if err != nil {
				return err
			}
			r.Offloads["dut/"+p] = f
		}
	}
	return nil
}

// StopPackets detaches the sinks, for the iperf3 tests that follow.
func (r *Rig) StopPackets() {
	for i, s := range r.sinks {
		s.Close()
		delete(r.sinks, i)
	}
	if r.groToggle {
		_ = r.setGRO(false)
	}
}

// TrialSpec is one generator trial.
type TrialSpec struct {
	From int   // host index of the generator
	To   []int // host indexes whose sinks must receive every frame
	// Watch are hosts whose sinks count the trial's frames too, outside
	// the loss: the span host of a mirror (TrialResult.Watched).
	Watch    []int
	Rate     float64 // frames a second; 0: as fast as the generator goes
	Duration time.Duration
	Count    uint64 // instead of Duration: a burst of Count frames
	Mix      frame.Mix
	Flows    int
	DstMAC   net.HardwareAddr // default: host To[0]'s
	SrcMAC   net.HardwareAddr // default: host From's
	SrcMACs  int              // address ranges (RFC 2889)
	DstMACs  int
	SrcPorts frame.PortRange // the flows' UDP source ports (default: the generator's)
	// DstIPs are the flows' destination addresses (default: the
	// generator's); with GroupMACs each flow goes to its group's MAC
	// (gen.Options.GroupMACs), not DstMAC.
	DstIPs    frame.IPRange
	GroupMACs bool
	IPv6      bool          // IPv6 frames (with DstIPs of that family)
	Learn     bool          // send learning frames first (RFC 2544 section 23)
	Settle    time.Duration // after learning
	Drain     time.Duration // after the last frame, before counting
	// CPUs are the generator's sending threads, one on each, each with its
	// share of the flows and of the rate (default: the placement's GenCPU).
	CPUs []int
	// Both: host To[0] sends to host From at the same time, as CSIT's
	// bidirectional tests do (--bidirectional): two generators, each at
	// half of Rate (and of Count), each on the generator's CPU, and a
	// sink at each end. One receiving host only; the loss is over both.
	Both bool
}

// DirectionResult is one direction of a trial that ran both ways.
type DirectionResult struct {
	From       string        `json:"from"` // "h1"
	To         string        `json:"to"`
	Requested  float64       `json:"requested_pps"`
	Offered    float64       `json:"offered_pps"`
	Sent       uint64        `json:"sent"`
	DevDropped uint64        `json:"dev_dropped"`
	Received   uint64        `json:"received"`
	Lost       int64         `json:"lost"`
	LossRatio  float64       `json:"loss_ratio"`
	Latency    *sink.Latency `json:"latency,omitempty"`
}

// TrialResult is what a trial measured.
type TrialResult struct {
	Requested  float64       `json:"requested_pps"`
	Offered    float64       `json:"offered_pps"`
	Sent       uint64        `json:"sent"`
	DevDropped uint64        `json:"dev_dropped"`       // dropped by the generator's own device: the DUT's ingress queue was full
	Received   []uint64      `json:"received"`          // test frames each sink counted
	Watched    []uint64      `json:"watched,omitempty"` // test frames each sink of TrialSpec.Watch counted
	Lost       int64         `json:"lost"`              // frames expected and not received, over all sinks
	LossRatio  float64       `json:"loss_ratio"`
	Reordered  uint64        `json:"reordered"`
	Duplicated uint64        `json:"duplicated"`
	Latency    *sink.Latency `json:"latency,omitempty"`
	CPU        []float64     `json:"cpu_busy"` // busy share of each CPU during the trial
	Seconds    float64       `json:"seconds"`
	// Directions: a trial both ways (TrialSpec.Both) has the figures
	// above summed over its two directions, and each one's here:
	// h1 -> h2 first.
	Directions []DirectionResult `json:"directions,omitempty"`
}

// Trial runs one generator trial through the rig.
func (r *Rig) Trial(ctx context.Context, ts TrialSpec) (TrialResult, error) {
	res, _, err := r.trial(ctx, ts)
	return res, err
}

func (r *Rig) trial(ctx context.Context, ts TrialSpec) (TrialResult, gen.Stats, error) {
	var res TrialResult
	var g gen.Stats
	from := r.T.Hosts[ts.From]
	if len(ts.To) == 0 {
		return res, g, errors.New("trial: no receiving host")
	}
	sinks := make([]*sink.Sink, len(ts.To)+len(ts.Watch))
	for k, i := range append(slices.Clone(ts.To), ts.Watch...) {
		if sinks[k] = r.sinks[i]; sinks[k] == nil {
			return res, g, fmt.Errorf("trial: no sink on host %d", i+1)
		}
	}
	watched := sinks[len(ts.To):]
	sinks = sinks[:len(ts.To)]
	var back *sink.Sink // the sink of the reverse direction (Both)
	if ts.Both {
		if len(ts.To) != 1 || ts.DstMAC != nil {
			return res, g, errors.New("trial both ways: one receiving host, at its own address")
		}
		if back = r.sinks[ts.From]; back == nil {
			return res, g, fmt.Errorf("trial both ways: no sink on host %d", ts.From+1)
		}
		sinks = append(sinks, back)
	}
	if ts.Learn && r.DUT.Learns() {
		// Each receiving host announces itself, and the sender too, so
		// the bridges know where every address in the trial is.
		for _, i := range append([]int{ts.From}, ts.To...) {
			if err := LearnFrame(r.T.Hosts[i]); err != nil {
				return res, g, err
			}
		}
		SleepCtx(ctx, ts.Settle)
	}
	// The sinks time 1 frame in 64: thousands a second, at the cost of
	// none of the rate (timing every frame cost the generator 3-23%).
	for _, s := range sinks {
		if err := s.SetLatencyEvery(64); err != nil {
			return res, g, err
		}
	}
	for _, s := range append(slices.Clone(sinks), watched...) {
		if err := s.Reset(); err != nil {
			return res, g, err
		}
	}
	dst := ts.DstMAC
	if dst == nil {
		dst = r.T.Hosts[ts.To[0]].MAC
	}
	mix := ts.Mix
	if from.VLAN != 0 {
		// The generator's frames leave through XDP, past the host's tc
		// tagging: they carry the tag themselves, on top of the size asked
		// for (a tagged 64-byte frame is 68 bytes, as on a real trunk).
		mix = tagged(mix)
	}
	o := gen.Options{
		Dev: from.If, NetNS: from.NS.Path, DstMAC: dst, SrcMAC: ts.SrcMAC, Mix: mix, Rate: ts.Rate,
		Duration: ts.Duration, Count: ts.Count, Flows: ts.Flows, CPUs: ts.genCPUs(r.Place), Batch: 64,
		SrcMACs: ts.SrcMACs, DstMACs: ts.DstMACs, VLAN: from.VLAN, SrcPorts: ts.SrcPorts,
		DstIPs: ts.DstIPs, GroupMACs: ts.GroupMACs, IPv6: ts.IPv6,
	}
	if ts.Both {
		return r.trialBoth(ctx, ts, o, sinks, watched)
	}
	cpu0, _ := ReadCPU()
	g, err := gen.Run(ctx, o, 0, nil)
	if err != nil {
		return res, g, fmt.Errorf("generator on %s: %w", from.NS.Name, err)
	}
	cpu1, _ := ReadCPU()
	SleepCtx(ctx, ts.Drain)
	res = TrialResult{Requested: ts.Rate, Offered: g.PPS(), Sent: g.Sent, DevDropped: g.DevDropped, Seconds: g.Elapsed.Seconds(), CPU: CPUBusy(cpu0, cpu1)}
	snaps, hist, err := snapshots(sinks)
	if err != nil {
		return res, g, err
	}
	var received uint64
	for _, snap := range snaps {
		res.Received = append(res.Received, snap.Received)
		received += snap.Received
		res.Reordered += snap.Reordered
		res.Duplicated += snap.Duplicates
	}
	for _, s := range watched {
		snap, err := s.Snapshot()
		if err != nil {
			return res, g, err
		}
		res.Watched = append(res.Watched, snap.Received)
	}
	want := g.Sent * uint64(len(sinks))
	res.Lost = int64(want) - int64(received)
	if want > 0 {
		res.LossRatio = max(float64(res.Lost), 0) / float64(want)
	}
	if l := sink.Summarize(hist); l.Count > 0 {
		res.Latency = &l
	}
	return res, g, ctx.Err()
}

// snapshots reads the sinks, with their latency histograms summed.
func snapshots(sinks []*sink.Sink) ([]sink.Snapshot, []uint64, error) {
	var out []sink.Snapshot
	var hist []uint64
	for _, s := range sinks {
		snap, err := s.Snapshot()
		if err != nil {
			return out, hist, err
		}
		out = append(out, snap)
		if hist == nil {
			hist = make([]uint64, len(snap.Hist))
		}
		for i, n := range snap.Hist {
			hist[i] += n
		}
	}
	return out, hist, nil
}

// trialBoth runs a trial both ways: o (from host ts.From) and its mirror
// image from host ts.To[0], each at half the rate, at once. sinks are the
// two ends' sinks, ts.To[0]'s first; the sinks are reset and the learning
// frames sent. It returns the forward generator's figures as the trial's
// gen.Stats.
func (r *Rig) trialBoth(ctx context.Context, ts TrialSpec, o gen.Options, sinks, watched []*sink.Sink) (TrialResult, gen.Stats, error) {
	var res TrialResult
	from, to := r.T.Hosts[ts.From], r.T.Hosts[ts.To[0]]
	o.Rate, o.Count = ts.Rate/2, ts.Count/2
	back := o
	back.Dev, back.NetNS, back.DstMAC, back.VLAN, back.Mix = to.If, to.NS.Path, from.MAC, to.VLAN, ts.Mix
	if to.VLAN != 0 {
		back.Mix = tagged(ts.Mix)
	}
	cpu0, _ := ReadCPU()
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fwdc, backc := GoGen(gctx, o), GoGen(gctx, back)
	fwd, rev := <-fwdc, <-backc
	cpu1, _ := ReadCPU()
	for _, g := range []struct {
		r  GenResult
		on *Host
	}{{fwd, from}, {rev, to}} {
		if g.r.Err != nil {
			return res, fwd.S, fmt.Errorf("generator on %s: %w", g.on.NS.Name, g.r.Err)
		}
	}
	SleepCtx(ctx, ts.Drain)
	snaps, hist, err := snapshots(sinks)
	if err != nil {
		return res, fwd.S, err
	}
	res = TrialResult{Requested: ts.Rate, Offered: fwd.S.PPS() + rev.S.PPS(), Sent: fwd.S.Sent + rev.S.Sent, DevDropped: fwd.S.DevDropped + rev.S.DevDropped,
		Seconds: max(fwd.S.Elapsed, rev.S.Elapsed).Seconds(), CPU: CPUBusy(cpu0, cpu1)}
	for k, d := range []struct {
		g        gen.Stats
		from, to int
	}{{fwd.S, ts.From, ts.To[0]}, {rev.S, ts.To[0], ts.From}} {
		snap := snaps[k]
		dr := DirectionResult{From: fmt.Sprintf("h%d", d.from+1), To: fmt.Sprintf("h%d", d.to+1), Requested: o.Rate, Offered: d.g.PPS(),
			Sent: d.g.Sent, DevDropped: d.g.DevDropped, Received: snap.Received, Lost: int64(d.g.Sent) - int64(snap.Received)}
		if d.g.Sent > 0 {
			dr.LossRatio = max(float64(dr.Lost), 0) / float64(d.g.Sent)
		}
		if l := sink.Summarize(snap.Hist); l.Count > 0 {
			dr.Latency = &l
		}
		res.Directions = append(res.Directions, dr)
		res.Received = append(res.Received, snap.Received)
		res.Lost += dr.Lost
		res.Reordered += snap.Reordered
		res.Duplicated += snap.Duplicates
	}
	for _, s := range watched {
		snap, err := s.Snapshot()
		if err != nil {
			return res, fwd.S, err
		}
		res.Watched = append(res.Watched, snap.Received)
	}
	if res.Sent > 0 {
		res.LossRatio = max(float64(res.Lost), 0) / float64(res.Sent)
	}
	if l := sink.Summarize(hist); l.Count > 0 {
		res.Latency = &l
	}
	return res, fwd.S, ctx.Err()
}

// LearnFrame sends one broadcast frame from the host's address with the
// IEEE local experimental ethertype: bridges learn the address, the sinks
// count it apart (it carries no test header).
func LearnFrame(h *Host) error {
	if err := sendFrame(h, learningFrame(h.MAC)); err != nil {
		return fmt.Errorf("learning frame from %s: %w", h.NS.Name, err)
	}
	return nil
}

// sendFrame sends f out of the host's interface through a packet socket,
// so through its stack's egress (a tagged host's tc program tags it).
func sendFrame(h *Host, f []byte) error { return SendFrames(h, [][]byte{f}) }

func SleepCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// cpuTimes is /proc/stat's per-CPU busy and total jiffies.
type CPUTimes struct{ busy, Total []uint64 }

func ReadCPU() (CPUTimes, error) {
	var c CPUTimes
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return c, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || !strings.HasPrefix(f[0], "cpu") || f[0] == "cpu" {
			continue
		}
		var total, idle uint64
		for i, s := range f[1:] {
			v, _ := strconv.ParseUint(s, 10, 64)
			if i == 7 { // steal: time the hypervisor took, not ours
				continue
			}
			if i >= 8 { // guest times are already in user
				break
			}
			total += v
			if i == 3 || i == 4 { // idle, iowait
				idle += v
			}
		}
		c.busy = append(c.busy, total-idle)
		c.Total = append(c.Total, total)
	}
	return c, nil
}

func CPUBusy(a, b CPUTimes) []float64 {
	var out []float64
	for i := range b.Total {
		if i >= len(a.Total) || b.Total[i] <= a.Total[i] {
			out = append(out, 0)
			continue
		}
		out = append(out, float64(b.busy[i]-a.busy[i])/float64(b.Total[i]-a.Total[i]))
	}
	return out
}

// Profile is where one frame's time went, from two unpaced trials: one
// plain, one with the kernel's BPF run-time statistics on (which cost a
// clock reading before and after every program run: Overhead is what that
// did to the rate).
type Profile struct {
	OfferedPlain float64  `json:"offered_pps_without_stats"`
	Offered      float64  `json:"offered_pps_with_stats"`
	Overhead     float64  `json:"overhead"`     // 1 - with/without
	FrameNs      float64  `json:"frame_ns"`     // 1e9 / offered with stats: a frame's whole time on the sending CPU
	GenNs        float64  `json:"gen_ns"`       // the generator program, a frame
	DUTNs        float64  `json:"dut_ns"`       // the DUT's eBPF programs, all their runs for a frame
	SinkNs       float64  `json:"sink_ns"`      // the sink program, a frame
	DUTPrograms  []string `json:"dut_programs"` // what ran on the DUT's ports
	Placement    string   `json:"placement"`
}

// dutPrograms opens the eBPF programs attached to the DUT's ports (XDP and
// tcx ingress), by ID.
func (r *Rig) dutPrograms() ([]*ebpf.Program, []string, error) {
	if r.T.DUT == nil {
		return nil, nil, nil
	}
	var progs []*ebpf.Program
	var names []string
	seen := map[ebpf.ProgramID]bool{}
	add := func(id ebpf.ProgramID, where string) error {
		if id == 0 || seen[id] {
			return nil
		}
		seen[id] = true
		p, err := ebpf.NewProgramFromID(id)
		if err != nil {
			return fmt.Errorf("open program %d on %s: %w", id, where, err)
		}
		name := fmt.Sprint(id)
		if info, err := p.Info(); err == nil {
			name = info.Name
		}
		progs = append(progs, p)
		names = append(names, fmt.Sprintf("%s (id %d) on %s", name, id, where))
		return nil
	}
	err := r.T.DUT.Do(func() error {
		for _, port := range r.T.DUTPorts() {
			l, err := netlink.LinkByName(port)
			if err != nil {
				return err
			}
			if x := l.Attrs().Xdp; x != nil && x.Attached {
				if err := add(ebpf.ProgramID(x.ProgId), port+" (xdp)"); err != nil {
					return err
				}
			}
			res, err := link.QueryPrograms(link.QueryOptions{Target: l.Attrs().Index, Attach: ebpf.AttachTCXIngress})
			if err == nil {
				for _, p := range res.Programs {
					if err := add(p.ID, port+" (tcx ingress)"); err != nil {
						return err
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		for _, p := range progs {
			p.Close()
		}
		return nil, nil, err
	}
	return progs, names, nil
}

// Profile runs the two trials of a Profile from host 0 to host 1.
func (r *Rig) Profile(ctx context.Context, size FrameSize, d time.Duration, tm Timing) (Profile, error) {
	pr := Profile{Placement: r.Place.Mode}
	mix, err := size.Mix()
	if err != nil {
		return pr, err
	}
	spec := TrialSpec{From: 0, To: []int{1}, Duration: d, Mix: mix, Learn: true, Settle: tm.Settle, Drain: tm.Drain}
	plain, err := r.Trial(ctx, spec)
	if err != nil {
		return pr, err
	}
	progs, names, err := r.dutPrograms()
	if err != nil {
		return pr, err
	}
	defer func() {
		for _, p := range progs {
			p.Close()
		}
	}()
	pr.DUTPrograms = names
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		return pr, fmt.Errorf("enable BPF run-time statistics: %w", err)
	}
	defer stats.Close()
	progTime := func() time.Duration {
		var t time.Duration
		for _, p := range progs {
			if s, err := p.Stats(); err == nil {
				t += s.Runtime
			}
		}
		return t
	}
	sk := r.sinks[1]
	sink0, _ := sk.ProgramStats()
	dut0 := progTime()
	on, g, err := r.trial(ctx, spec)
	if err != nil {
		return pr, err
	}
	dut1 := progTime()
	sink1, _ := sk.ProgramStats()
	pr.OfferedPlain, pr.Offered = plain.Offered, on.Offered
	if plain.Offered > 0 {
		pr.Overhead = 1 - on.Offered/plain.Offered
	}
	if on.Offered > 0 {
		pr.FrameNs = 1e9 / on.Offered
	}
	if g.Sent > 0 {
		pr.GenNs = float64(g.ProgRuntime) / float64(g.Sent)
		pr.DUTNs = float64(dut1-dut0) / float64(g.Sent)
	}
	if n := on.Received; len(n) > 0 && n[0] > 0 && sink0 != nil && sink1 != nil {
		pr.SinkNs = float64(sink1.Runtime-sink0.Runtime) / float64(n[0])
	}
	return pr, nil
}

// GenResult is how a generator run ended.
type GenResult struct {
	S   gen.Stats
	Err error
}

// GoGen runs the generator until o or ctx ends it; its result comes on the
// channel.
func GoGen(ctx context.Context, o gen.Options) <-chan GenResult {
	ch := make(chan GenResult, 1)
	go func() { s, err := gen.Run(ctx, o, 0, nil); ch <- GenResult{s, err} }()
	return ch
}

// Monotonic is CLOCK_MONOTONIC: the BPF programs' clock.
func Monotonic() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return time.Duration(ts.Nano())
}

// Sink is the sink on host i (0: h1), nil without one.
func (r *Rig) Sink(i int) *sink.Sink { return r.sinks[i] }

// AllowedCPUs are the CPUs this process may run on, in order.
func AllowedCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("the CPUs this process may use: %w", err)
	}
	var cpus []int
	for i := 0; i < 1024; i++ {
		if set.IsSet(i) {
			cpus = append(cpus, i)
		}
	}
	return cpus, nil
}

// genCPUs are the CPUs of a trial's generator threads: its own, or the
// placement's generator CPU.
func (ts TrialSpec) genCPUs(p Placement) []int {
	if len(ts.CPUs) > 0 {
		return ts.CPUs
	}
	return []int{p.GenCPU}
}
