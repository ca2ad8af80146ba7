// Package cores is the lab's cores kind (issue 16, seed 000: OpenBSD's veb(4) spread its work
// over cores where bridge(4) saturated one): the zero-loss rate of a DUT
// against the number of CPUs that forward.
//
// A veth delivers on the sending CPU: the generator's live frames enter
// the DUT's port on the CPU that sent them (the peer's queue is the
// sender's CPU modulo the queues), the DUT's XDP program or its stack runs
// there in the same softirq, and so does the sink at the far end. So with
// one generator thread on each of N CPUs, each thread sending its own flow,
// each CPU forwards its own frames, start to end: the aggregate rate
// against N is how the DUT's forwarding scales with the cores given to it,
// and anything the CPUs share (a lock, a counter, a queue) shows as a
// factor below N. Every veth end gets as many queues as the largest count,
// for every count, so that the topology is the same from 1 CPU to N.
package cores

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/trestle/trestle/internal/frame"
	"github.com/trestle/trestle/internal/lab"
	labbpf "github.com/trestle/trestle/internal/lab/bpf"
)

func init() { lab.Register(Kind{}, lab.TestSoak) }

// coresPortBase is the first UDP source port of the cores test's flows:
// flow i (generator thread i) comes from port coresPortBase+i, so that a
// stack that hashes flows (the Linux bridge's and tc's egress queue)
// tells them apart.
const coresPortBase = 1024

// Record is the setting of one figure of the cores test.
type Record struct {
	FrameSize lab.FrameSize `json:"frame_size"`
	CPUs      int           `json:"cpus"`     // generator threads, each on a CPU of its own
	GenCPUs   []int         `json:"gen_cpus"` // the CPUs, in thread order
	Flows     int           `json:"flows"`    // one per thread
	SrcPorts  string        `json:"src_ports"`
	Queues    int           `json:"queues"` // receive and transmit queues of every veth end
	// DUTCPU is where the DUT's own threads run (trestle's daemon, Open
	// vSwitch's ovs-vswitchd and its PMD thread); DUTShared says that one
	// of the generator's threads runs there too at this count.
	DUTCPU    int  `json:"dut_cpu"`
	DUTShared bool `json:"dut_cpu_shared"`
	// Seconds is the search's length, OtherCPU the CPU time processes
	// other than the lab's and the DUT's took meanwhile (cpuOthers): on a
	// shared machine, what was not there for the measurement.
	Seconds  float64 `json:"seconds"`
	OtherCPU float64 `json:"other_cpu_seconds"`
}

// DefaultCoreCounts are the counts the cores test measures unless told:
// 1, 2, 4, ... up to n, and n.
func DefaultCoreCounts(n int) []int {
	var out []int
	for c := 1; c < n; c *= 2 {
		out = append(out, c)
	}
	return append(out, max(n, 1))
}

// CheckPlacement refuses CPU counts the machine cannot give the cores
// test (above the CPUs this process may use, below 1, or repeated) and a
// placement other than auto or shared ("" is auto).
func (k Kind) CheckPlacement(placement string) error {
	if placement != "" && placement != "auto" && placement != "shared" {
		return fmt.Errorf("cores: placement %q: the cores test places the generator's threads itself, each on the CPU that forwards its frames (shared); split would move the forwarding off them", placement)
	}
	cpus, err := lab.AllowedCPUs()
	if err != nil {
		return err
	}
	return checkCoreCounts(k.Counts, len(cpus))
}

func checkCoreCounts(counts []int, ncpu int) error {
	if len(counts) == 0 {
		return errors.New("cores: no CPU counts to measure")
	}
	for i, n := range counts {
		switch {
		case n < 1:
			return fmt.Errorf("cores: %d CPUs: at least 1", n)
		case n > int(labbpf.GenTrGenLimitsTR_GEN_MAX_CPUS):
			return fmt.Errorf("cores: %d CPUs: the generator runs at most %d threads", n, labbpf.GenTrGenLimitsTR_GEN_MAX_CPUS)
		case n > ncpu:
			return fmt.Errorf("cores: %d CPUs asked for, but this machine lets the lab use %d: each count is generator threads on CPUs of their own, and each CPU forwards its thread's frames; give counts up to %d (--cpus %s), or run on a machine with more CPUs",
				n, ncpu, ncpu, intsText(DefaultCoreCounts(ncpu)))
		case slices.Contains(counts[:i], n):
			return fmt.Errorf("cores: %d CPUs given twice", n)
		}
	}
	return nil
}

// coresPlacement is the cores test's placement: shared (each generator
// thread's CPU forwards its frames; split would move the forwarding to
// other CPUs, which is what the test must not do), the generator's threads
// on the first CPUs the process may use, and the DUT's own threads on the
// CPU after the largest count's, or, where the machine has none spare, on
// its last CPU, which a generator thread then shares at the largest counts.
func coresPlacement(k Kind, mode string) (lab.Placement, error) {
	if err := k.CheckPlacement(mode); err != nil {
		return lab.Placement{}, err
	}
	cpus, err := lab.AllowedCPUs()
	if err != nil {
		return lab.Placement{}, err
	}
	n := slices.Max(k.Counts)
	p := lab.Placement{Mode: "shared", GenCPU: cpus[0], SinkCPU: cpus[0], GenCPUs: cpus[:n], DUTCPU: cpus[len(cpus)-1]}
	if len(cpus) > n {
		p.DUTCPU = cpus[n]
	}
	return p, nil
}

// coresNotes say what the cores test's placement can and cannot show.
func coresNotes(k Kind, p lab.Placement) []string {
	n := slices.Max(k.Counts)
	notes := []string{fmt.Sprintf("cores: with N CPUs the generator runs N threads, one on each of CPUs %s (the first N), each sending its own flow (UDP source port %d+i); "+
		"a veth delivers on the sending CPU, so each of those CPUs also runs the DUT's forwarding of its thread's frames and the sink's counting of them: the figure is the path's, on N CPUs at once. "+
		"Every veth end has %d queues at every count; CPU busy is each CPU's share of non-idle time in the confirmation trial", intsText(p.GenCPUs), coresPortBase, n)}
	if slices.Contains(p.GenCPUs, p.DUTCPU) {
		k := slices.Index(p.GenCPUs, p.DUTCPU) + 1
		notes = append(notes, fmt.Sprintf("cores: this machine has no CPU to spare beyond the %d the largest count takes: the DUT's own threads (trestle's daemon, idle while it forwards; Open vSwitch's PMD thread, which forwards every frame of its userspace datapath and polls without pause) run on CPU %d, "+
			"which generator thread %d shares from %d CPUs on. Open vSwitch's figures from that count on are of a PMD thread that shares its core, not of more cores forwarding: it needs a core of its own, and its forwarding stays on one thread (pmd-cpu-mask names one CPU) at every count", n, p.DUTCPU, k, k))
	} else {
		notes = append(notes, fmt.Sprintf("cores: the DUT's own threads (trestle's daemon; Open vSwitch's PMD thread, one, which forwards every frame of its userspace datapath) run on CPU %d, apart from every generator thread", p.DUTCPU))
	}
	return notes
}

func intsText(v []int) string {
	var s []string
	for _, x := range v {
		s = append(s, fmt.Sprint(x))
	}
	return strings.Join(s, ",")
}

// Kind is the cores test: the zero-loss rate with the generator on
// each of Counts CPUs, on the straight path too.
type Kind struct {
	Counts []int
}

func (Kind) Name() string { return lab.TestCores }

// Needs: every veth end of a cores unit has the largest count's queues, so
// that each generator thread's CPU has a queue of its own.
func (k Kind) Needs(lab.Scenario) lab.Needs {
	n := lab.Needs{Direct: true}
	if len(k.Counts) > 0 {
		n.Queues = slices.Max(k.Counts)
	}
	return n
}

// Estimate is a rough length of a unit's cores test.
func (k Kind) Estimate(s lab.Scenario, _ lab.Spec) time.Duration {
	tm := s.Timing
	trial := tm.Search.Trial + tm.Settle + tm.Drain
	return time.Duration(len(s.Sizes)*len(k.Counts)) * (4*trial + tm.Search.Confirm)
}

func (k Kind) Describe(lab.Scenario) string {
	return fmt.Sprintf("CPUs:     %s (the generator's threads, each CPU forwarding its own)", intsText(k.Counts))
}

func (k Kind) Place(_ lab.Scenario, mode string) (lab.Placement, []string, error) {
	p, err := coresPlacement(k, mode)
	if err != nil {
		return p, nil, err
	}
	return p, coresNotes(k, p), nil
}

func (k Kind) Run(ctx context.Context, u *lab.UnitRun) error {
	return coresTest(ctx, u.S, k.Counts, u.Rig, u.Base, u.Add, u.Status)
}

// coresTest runs the RFC 2544 search from h1 to h2 at each frame size with
// the generator on each count of CPUs.
func coresTest(ctx context.Context, s lab.Scenario, counts []int, rig *lab.Rig, base lab.Result, add func(lab.Result), status func(string)) error {
	tm := s.Timing
	for _, size := range s.Sizes {
		mix, err := size.Mix()
		if err != nil {
			return err
		}
		for _, n := range counts {
			if n > len(rig.Place.GenCPUs) {
				return fmt.Errorf("cores: %d CPUs, but the placement has %d for the generator", n, len(rig.Place.GenCPUs))
			}
			cpus := rig.Place.GenCPUs[:n]
			ports := frame.PortRange{First: coresPortBase, Last: uint16(coresPortBase + n - 1)}
			spec := lab.TrialSpec{From: 0, To: []int{1}, Mix: mix, Flows: n, SrcPorts: ports, CPUs: cpus, Learn: true, Settle: tm.Settle, Drain: tm.Drain}
			k := 0
			start := time.Now()
			others0, oerr := lab.CPUOthers()
			sr, trials, err := rig.SearchTrials(ctx, spec, tm, func(st lab.SearchTrial) {
				k++
				status(fmt.Sprintf("%s on %d CPU(s), trial %d: %s offered, loss %.3f%%", size.Label(), n, k, lab.PPSText(st.Offered), 100*st.Loss))
			})
			if err != nil {
				return err
			}
			r := lab.ResultOfSearch(base, lab.TestCores, coresParam(size, n), sr, trials)
			if len(trials) > 0 {
				r.CPU = trials[len(trials)-1].CPU
			}
			rec := Record{FrameSize: size, CPUs: n, GenCPUs: cpus, Flows: n, SrcPorts: ports.String(), Queues: rig.T.Shape.Queues,
				DUTCPU: rig.Place.DUTCPU, DUTShared: slices.Contains(cpus, rig.Place.DUTCPU), Seconds: time.Since(start).Seconds()}
			if others1, err := lab.CPUOthers(); err == nil && oerr == nil && others1 >= others0 {
				rec.OtherCPU = float64(others1-others0) / lab.ClockTicks
			}
			if err := r.SetRecord(rec); err != nil {
				return err
			}
			add(r)
		}
	}
	return nil
}

// coresParam is a cores result's Param: "64 cpus=2".
func coresParam(size lab.FrameSize, n int) string { return fmt.Sprintf("%s cpus=%d", size, n) }

// Preset is the cores scenario, its counts up to every CPU the lab may use.
func (Kind) Preset() lab.Scenario {
	counts := []int{1, 2}
	if cpus, err := lab.AllowedCPUs(); err == nil {
		counts = DefaultCoreCounts(len(cpus))
	}
	return lab.Scenario{
		Name: "cores", Title: "Cores: zero-loss throughput against the number of CPUs forwarding", Seed: "000_5de8b09844379080.txt",
		About: "a 2-port bridge: 64-byte zero-loss throughput (the RFC 2544 search) with the generator on 1, 2, 4 ... N CPUs (--cpus; default 1, 2, 4 ... up to every CPU the lab may use), " +
			"one thread and one flow per CPU; a veth delivers on the sending CPU, so each CPU forwards its own thread's frames start to end (the DUT's XDP program or stack, the sink): " +
			"the aggregate rate against the CPU count, each count's factor over 1 CPU (2.0 from 1 to 2 CPUs is perfect scaling; less is what the CPUs share: a lock, a counter, a queue), and every CPU's load. " +
			"The OpenBSD benchmarks of veb(4) saw it spread its work over cores where bridge(4) saturated one. " +
			"On a 2-CPU machine 1 -> 2 is the only step, and at 2 CPUs the generator, the forwarding and the sink share both CPUs: the factor says whether two CPUs forward twice as much, not how far it goes on; " +
			"Open vSwitch's userspace datapath forwards on one PMD thread, which needs a core of its own and has none spare there (at 2 CPUs it shares one with a generator thread, and the report says so). " +
			"On a bigger machine give the counts: --cpus 1,2,4,8 (each at most the machine's CPUs, which the lab checks); with a CPU beyond the largest count, the DUT's own threads (the PMD) get it. " +
			"direct, the floor, the Linux bridge, trestle in xdp and in its default (tc) mode, Open vSwitch; 3 repetitions, about 15 minutes on 2 CPUs",
		DUTs:  lab.MustSpecs("direct", "floor", "linux-bridge", "trestle:xdp", "trestle", "ovs"),
		Hosts: 2, Chain: []int{1}, Sizes: []lab.FrameSize{"64"}, Tests: []lab.Kind{Kind{Counts: counts}}, Reps: 3, Timing: lab.DefaultTiming,
	}
}

// Flags: --cpus, the CPU counts; a scenario without a cores test refuses
// it.
func (Kind) Flags() []lab.Flag {
	return []lab.Flag{{
		Name: "cpus", Type: lab.FlagInts, Lo: 1, Hi: 1024, For: "the cores scenario",
		Usage: "cores: the CPU counts to measure, comma-separated (default 1,2,4,... up to\nevery CPU the lab may use)",
		Set:   lab.Sets(func(c Kind, n []int) (Kind, error) { c.Counts = n; return c, nil }),
	}}
}
