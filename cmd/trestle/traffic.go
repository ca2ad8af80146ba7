package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/trestle/trestle/internal/frame"
	"github.com/trestle/trestle/internal/lab/gen"
	"github.com/trestle/trestle/internal/lab/sink"
	"github.com/trestle/trestle/internal/netnsutil"
)

// isTerminal says whether w is a terminal, for the live progress line.
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// signalContext ends on SIGINT or SIGTERM.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
}

func parseCPUs(s string) ([]int, error) {
	var cpus []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("--cpus %q: %q is not a CPU number", s, part)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("--cpus %q: bad range %q", s, part)
			}
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

func allowedCPUs() []int {
	var set unix.CPUSet
	var cpus []int
	if unix.SchedGetaffinity(0, &set) == nil {
		for i := 0; i < 1024; i++ {
			if set.IsSet(i) {
				cpus = append(cpus, i)
			}
		}
	}
	return cpus
}

func (e *env) genCmd() *cobra.Command {
	var (
		dev, dstMAC, srcMAC, size, sizes, mix, srcIP, dstIP, srcPort, dstPort, cpus, mode string
		rate                                                                              float64
		duration, interval                                                                time.Duration
		count                                                                             uint64
		flows, threads, batch, clockEvery, srcMACs, dstMACs                               int
		vlan                                                                              uint16
		ipv6, randomMACs                                                                  bool
	)
	c := &cobra.Command{
		Use:   "gen --dev IF [flags]",
		Short: "Send test frames out of a device at a set rate (or as fast as it goes)",
		Long: `Send UDP test frames out of one device. Each frame carries a signature, a flow
id, a per-flow sequence number and its send time, so 'trestle sink' on the
receiving side can count loss, reordering, duplicates and one-way latency.

In the default live mode an XDP program sends the frames through BPF_PROG_RUN
with live frames: no socket buffers, line rate from one core. A veth delivers
them only if its peer has an XDP program (e.g. 'trestle sink') or GRO on.
--mode packet uses an AF_PACKET socket instead, for devices where live frames
do not run.

Frame sizes are without the 4-byte FCS: --size 60 is the 64-byte frame of
RFC 2544. --size imix sends the simple IMIX 7:4:1 (60, 590 and 1514 bytes:
IP packets of 40, 576 and 1500; with --vlan 62, 594, 1518; with --ipv6 the
smallest is 78, which holds the test header); --sizes 64,594,1518 --mix 7,4,1 any mix.
The rate is held by the program itself; the figures printed count frames as
sent, L2 Mbit/s with the FCS and L1 Mbit/s with preamble and gap too.

Examples:
  trestle gen --dev veth0 --dst-mac 02:00:00:00:00:02 --rate 100000 --duration 10s
  trestle gen --dev veth0 --size imix --flows 16 --src-port 1000-1015 --count 1000000
  trestle gen --dev veth0 --cpus 0,1 --duration 5s --json     # two sending threads
  trestle gen --dev veth0 --src-mac 0a:66:6c:00:00:00 --src-macs 1000000 --random-macs   # a MAC flood`,
		Args: nargs(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dev == "" {
				return &usageError{cmd: cmd, err: errors.New("--dev IF is required: the device to send on")}
			}
			if !slices.Contains(genModes, mode) {
				return usagef("--mode %q: one of %s", mode, strings.Join(genModes, ", "))
			}
			o := gen.Options{Dev: dev, Mode: mode, Rate: rate, Duration: duration, Count: count, Flows: flows, VLAN: vlan, IPv6: ipv6, Batch: batch, ClockEvery: clockEvery,
				SrcMACs: srcMACs, DstMACs: dstMACs, RandomMACs: randomMACs}
			var err error
			if o.Mix, err = sizeMix(size, sizes, mix, vlan != 0, ipv6); err != nil {
				return &usageError{err: err}
			}
			if dstMAC != "" {
				if o.DstMAC, err = parseMACFlag("dst-mac", dstMAC); err != nil {
					return err
				}
			} else if o.DstMAC, err = peerMAC(dev); err != nil {
				return fmt.Errorf("--dst-mac not given and %v", err)
			}
			if srcMAC != "" {
				if o.SrcMAC, err = parseMACFlag("src-mac", srcMAC); err != nil {
					return err
				}
			}
			for _, r := range []struct {
				flag, v string
				into    *frame.IPRange
			}{{"--src-ip", srcIP, &o.SrcIPs}, {"--dst-ip", dstIP, &o.DstIPs}} {
				if r.v != "" {
					if *r.into, err = frame.ParseIPRange(r.v); err != nil {
						return usagef("%s: %w", r.flag, err)
					}
				}
			}
			for _, r := range []struct {
				flag, v string
				into    *frame.PortRange
			}{{"--src-port", srcPort, &o.SrcPorts}, {"--dst-port", dstPort, &o.DstPorts}} {
				if r.v != "" {
					if *r.into, err = frame.ParsePortRange(r.v); err != nil {
						return usagef("%s: %w", r.flag, err)
					}
				}
			}
			switch {
			case cpus != "":
				if o.CPUs, err = parseCPUs(cpus); err != nil {
					return &usageError{err: err}
				}
			case threads > 1:
				all := allowedCPUs()
				if threads > len(all) {
					return usagef("--threads %d: 1 to %d, the CPUs this process may use", threads, len(all))
				}
				o.CPUs = all[:threads]
			}
			return e.runGen(o, interval)
		},
	}
	f := c.Flags()
	f.StringVar(&dev, "dev", "", "device to send on (required)")
	f.StringVar(&mode, "mode", genModes[0], "live (XDP live frames) or packet (AF_PACKET socket)")
	f.StringVar(&dstMAC, "dst-mac", "", "destination MAC (default: the veth peer's)")
	f.StringVar(&srcMAC, "src-mac", "", "source MAC (default: the device's)")
	f.StringVar(&size, "size", "", "frame size without FCS (60-3368), or imix (default: the smallest that fits)")
	f.StringVar(&sizes, "sizes", "", "comma-separated frame sizes of a mix, e.g. 64,594,1518")
	f.StringVar(&mix, "mix", "", "weights of --sizes, e.g. 7,4,1 (default: equal)")
	f.Float64Var(&rate, "rate", 0, "frames per second in all (0: as fast as possible)")
	f.DurationVar(&duration, "duration", 0, "how long to send (e.g. 10s)")
	f.Uint64Var(&count, "count", 0, "how many frames to send")
	f.IntVar(&flows, "flows", 0, "number of flows (1-65536), spread over the address and port ranges (default: one per sending thread)")
	f.StringVar(&srcIP, "src-ip", "", "source address or range a-b (default 198.18.0.1 or 2001:2::1)")
	f.StringVar(&dstIP, "dst-ip", "", "destination address or range (default 198.18.0.2 or 2001:2::2)")
	f.StringVar(&srcPort, "src-port", "", "source UDP port or range (default 9)")
	f.StringVar(&dstPort, "dst-port", "", "destination UDP port or range (default 9)")
	vlanFlag(f, &vlan, "send 802.1Q-tagged frames of this VLAN (0: untagged)")
	f.BoolVar(&ipv6, "ipv6", false, "IPv6 instead of IPv4")
	f.IntVar(&srcMACs, "src-macs", 0, "source MACs: frame k from --src-mac plus k mod N in its low 24 bits\n(live mode; up to 16777216)")
	f.IntVar(&dstMACs, "dst-macs", 0, "destination MACs, a range like --src-macs")
	f.BoolVar(&randomMACs, "random-macs", false, "scatter the MAC ranges over the low 24 bits in an order that looks\nrandom (still N distinct addresses): a MAC flood from random sources")
	f.IntVar(&threads, "threads", 1, "sending threads, one per CPU (see --cpus)")
	f.StringVar(&cpus, "cpus", "", "CPUs of the sending threads, e.g. 0 or 0,1 or 0-3 (overrides --threads)")
	f.IntVar(&batch, "batch", 64, "live frames per batch inside the kernel (1-256); frames of a batch leave together")
	f.IntVar(&clockEvery, "clock-every", 16, "frames per clock reading (1-1024); 1 stamps every frame with its own time")
	f.DurationVar(&interval, "interval", 0, "print a line every interval (e.g. 1s)")
	f.BoolVar(&e.json, "json", false, "print a JSON summary")
	return c
}

// genModes are what gen's --mode takes.
var genModes = []string{"live", "packet"}

// parseMACFlag reads a MAC address given to --flag.
func parseMACFlag(flag, s string) (net.HardwareAddr, error) {
	mac, err := net.ParseMAC(s)
	if err != nil || len(mac) != 6 {
		return nil, usagef("--%s %q: not a MAC address such as 02:00:00:00:00:01", flag, s)
	}
	return mac, nil
}

// genSummary is what `trestle gen --json` prints (docs/operations.md,
// "The JSON contract"): the end-to-end tests read it by these names.
type genSummary struct {
	Dev                string  `json:"dev"`
	Mode               string  `json:"mode"`
	Sizes              string  `json:"sizes"`
	Flows              int     `json:"flows"`
	RequestedPerSecond float64 `json:"requested_per_second"` // --rate; 0: as fast as it goes
	Sent               uint64  `json:"sent"`
	Bytes              uint64  `json:"bytes"`
	ElapsedSeconds     float64 `json:"elapsed_seconds"`
	Declined           uint64  `json:"declined"`
	SentPerSecond      float64 `json:"sent_per_second"`
	L2BitsPerSecond    float64 `json:"l2_bits_per_second"` // with the FCS
	L1BitsPerSecond    float64 `json:"l1_bits_per_second"` // with preamble and gap too
	DevDropped         uint64  `json:"dev_dropped"`
	FellBehind         bool    `json:"fell_behind"`
	BehindBy           float64 `json:"behind_by"` // the share of the rate it fell short by
}

func sizeMix(size, sizes, weights string, vlan, ipv6 bool) (frame.Mix, error) {
	switch {
	case size != "" && sizes != "":
		return frame.Mix{}, errors.New("--size and --sizes: give one")
	case size == "imix":
		return frame.IMIXFor(vlan, ipv6), nil
	case size != "":
		n, err := strconv.Atoi(size)
		if err != nil {
			return frame.Mix{}, fmt.Errorf("--size %q: a number of bytes or imix", size)
		}
		return frame.Mix{Sizes: []int{n}, Weights: []int{1}}, nil
	case sizes != "":
		return frame.ParseMix(sizes, weights)
	}
	return frame.Mix{Sizes: []int{frame.MinSize(vlan, ipv6)}, Weights: []int{1}}, nil
}

func peerMAC(dev string) (net.HardwareAddr, error) {
	l, err := netlink.LinkByName(dev)
	if err != nil {
		return nil, fmt.Errorf("interface %q: %w", dev, err)
	}
	mac, err := netnsutil.PeerMAC(l)
	if err != nil {
		return nil, fmt.Errorf("cannot find the peer's MAC (%v): give --dst-mac", err)
	}
	return mac, nil
}

func rateLine(s gen.Stats) string {
	return fmt.Sprintf("%12.0f pps  %10.1f Mbit/s L2  %10.1f Mbit/s L1  sent %d", s.PPS(), s.L2Mbps(), s.L1Mbps(), s.Sent)
}

func (e *env) runGen(o gen.Options, interval time.Duration) error {
	ctx, stop := signalContext()
	defer stop()
	tty := !e.json && interval == 0 && isTerminal(e.stderr)
	every := interval
	if tty {
		every = 500 * time.Millisecond
	}
	var prev gen.Stats
	progress := func(s gen.Stats) {
		d := s
		d.Sent, d.Bytes, d.Elapsed = s.Sent-prev.Sent, s.Bytes-prev.Bytes, s.Elapsed-prev.Elapsed
		prev = s
		if tty {
			left := ""
			if o.Duration > 0 {
				left = fmt.Sprintf("  %.1fs/%.1fs", s.Elapsed.Seconds(), o.Duration.Seconds())
			}
			fmt.Fprintf(e.stderr, "\r%s%s ", rateLine(d), left)
			return
		}
		if !e.json {
			fmt.Fprintf(e.stdout, "%7.1fs %s\n", s.Elapsed.Seconds(), rateLine(d))
		}
	}
	res, err := gen.Run(ctx, o, every, progress)
	if tty {
		fmt.Fprintln(e.stderr)
	}
	if err != nil {
		return err
	}
	mixDesc := o.Mix.String()
	if len(o.Mix.Sizes) == 0 {
		mixDesc = "default"
	}
	behind := res.Behind()
	if e.json {
		return e.printJSON(genSummary{
			Dev: o.Dev, Mode: o.Mode, Sizes: mixDesc, Flows: o.Flows, RequestedPerSecond: o.Rate,
			Sent: res.Sent, Bytes: res.Bytes, ElapsedSeconds: res.Elapsed.Seconds(), Declined: res.Declined,
			SentPerSecond: res.PPS(), L2BitsPerSecond: 1e6 * res.L2Mbps(), L1BitsPerSecond: 1e6 * res.L1Mbps(), DevDropped: res.DevDropped,
			FellBehind: behind > 0, BehindBy: behind,
		})
	}
	fmt.Fprintf(e.stdout, "sent %d frames (%s) in %.3fs: %.0f pps, %.1f Mbit/s L2, %.1f Mbit/s L1\n",
		res.Sent, mixDesc, res.Elapsed.Seconds(), res.PPS(), res.L2Mbps(), res.L1Mbps())
	if behind > 0 {
		fmt.Fprintf(e.stdout, "fell behind its rate: %.0f pps of the %.0f asked for (%.1f%% short): the sender could not keep up, and frames it was late with were not sent%s\n",
			res.PPS(), o.Rate, 100*behind, behindHint(o))
	}
	if res.DevDropped > 0 {
		fmt.Fprintf(e.stdout, "%s dropped %d of them (tx_dropped): its peer did not take them fast enough\n", o.Dev, res.DevDropped)
	}
	return nil
}

// behindHint is what may help a generator that fell behind.
func behindHint(o gen.Options) string {
	if o.Mode == "packet" {
		return " (packet mode makes a system call a frame; live mode, the default, is faster)"
	}
	if len(o.CPUs) < 2 {
		return " (--threads or --cpus add sending threads)"
	}
	return ""
}

func (e *env) sinkCmd() *cobra.Command {
	var (
		dev                string
		interval, duration time.Duration
		pass               bool
		maxFlows, latEvery int
	)
	c := &cobra.Command{
		Use:   "sink --dev IF [flags]",
		Short: "Count test frames arriving on a device: loss, reordering, duplicates, latency",
		Long: `Attach an XDP program to a device that counts every frame and, for frames
from 'trestle gen', per-flow loss, reordering and duplicates (exact within the
last 64 sequence numbers of a flow) and one-way latency (generator and sink
must run on the same host: they share its clock). Frames without the test
header are counted apart. Start the sink before the generator: sequences
start at 0, and frames before the first one seen count as lost. One sink
can count several generator runs in a row: a frame sent later than a higher
sequence number of its flow starts a new run.

It runs until Ctrl-C, SIGTERM or --duration, then prints a summary and
detaches. Frames are dropped after counting unless --pass.

Examples:
  trestle sink --dev veth1 --interval 1s
  trestle sink --dev veth1 --duration 30s --json`,
		Args: nargs(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dev == "" {
				return &usageError{cmd: cmd, err: errors.New("--dev IF is required: the device to receive on")}
			}
			return e.runSink(sink.Options{Dev: dev, Pass: pass, MaxFlows: maxFlows, LatencyEvery: latEvery}, interval, duration)
		},
	}
	f := c.Flags()
	f.StringVar(&dev, "dev", "", "device to receive on (required)")
	f.DurationVar(&interval, "interval", 0, "print a line every interval (e.g. 1s)")
	f.DurationVar(&duration, "duration", 0, "stop after this long (default: until interrupted)")
	f.BoolVar(&pass, "pass", false, "pass frames on to the stack instead of dropping them")
	f.IntVar(&latEvery, "latency-every", 1, "sample the latency of one frame in N (a power of two), for a faster sink")
	f.IntVar(&maxFlows, "max-flows", 4096, "flow ids tracked (1-65536); frames of others count as bad_flow")
	f.BoolVar(&e.json, "json", false, "print a JSON summary")
	return c
}

func (e *env) runSink(o sink.Options, interval, duration time.Duration) error {
	s, err := sink.Start(o)
	if err != nil {
		return err
	}
	defer s.Close()
	ctx, stop := signalContext()
	defer stop()
	if duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, duration)
		defer cancel()
	}
	start := time.Now()
	prev, err := s.Snapshot()
	if err != nil {
		return err
	}
	if !e.json {
		fmt.Fprintf(e.stderr, "sink on %s: counting; Ctrl-C to stop\n", o.Dev)
	}
	var tick <-chan time.Time
	if interval > 0 {
		t := time.NewTicker(interval)
		defer t.Stop()
		tick = t.C
	}
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-tick:
			cur, err := s.Snapshot()
			if err != nil {
				return err
			}
			d := cur.Sub(prev)
			secs := cur.At.Sub(prev.At).Seconds()
			prev = cur
			if !e.json {
				l := sink.Summarize(d.Hist)
				fmt.Fprintf(e.stdout, "%7.1fs rx %10.0f pps  lost %d  reordered %d  dup %d  unsigned %d  latency p50 %v p99 %v\n",
					time.Since(start).Seconds(), float64(d.Packets)/secs, d.Lost, d.Reordered, d.Duplicates, d.Unsigned, l.P50, l.P99)
			}
		}
	}
	fin, err := s.Snapshot()
	if err != nil {
		return err
	}
	sum := sink.Summary{
		Dev: o.Dev, ElapsedS: time.Since(start).Seconds(), Packets: fin.Packets, Bytes: fin.Bytes,
		Received: fin.Received, ReceivedBytes: fin.SignedBytes, Unsigned: fin.Unsigned, BadFlow: fin.BadFlow, Lost: fin.Lost,
		Reordered: fin.Reordered, Duplicated: fin.Duplicates, Flows: fin.Flows, Runs: fin.Runs, Latency: sink.Summarize(fin.Hist),
	}
	if span := fin.Last - fin.First; span > 0 && fin.Received > 1 {
		sum.RxPPS = float64(fin.Received-1) / span.Seconds()
	}
	if e.json {
		return e.printJSON(sum)
	}
	l := sum.Latency
	fmt.Fprintf(e.stdout, "received %d test frames in %d flows from %d generator run(s) (%d frames in all, %d without the test header)\n", sum.Received, sum.Flows, sum.Runs, sum.Packets, sum.Unsigned)
	fmt.Fprintf(e.stdout, "lost %d  reordered %d  duplicated %d  bad flow id %d\n", sum.Lost, sum.Reordered, sum.Duplicated, sum.BadFlow)
	fmt.Fprintf(e.stdout, "latency min %v  p50 %v  p90 %v  p99 %v  p99.9 %v  max %v\n", l.Min, l.P50, l.P90, l.P99, l.P999, l.Max)
	return nil
}
