package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/trestle/trestle/internal/frame"
)

// FrameSize is an RFC 2544 frame size: bytes on the wire with the 4-byte
// FCS ("64"), or "imix" (the simple IMIX 7:4:1).
type FrameSize string

// RFC2544Sizes are the frame sizes RFC 2544 asks for on Ethernet, and IMIX.
var RFC2544Sizes = []FrameSize{"64", "128", "256", "512", "1024", "1280", "1518", "imix"}

// Mix is the generator's size mix for the frame size (the generator counts
// frames without FCS).
func (s FrameSize) Mix() (frame.Mix, error) {
	if s == "imix" {
		return frame.IMIX, nil
	}
	n, err := strconv.Atoi(string(s))
	if err != nil || n < 64 || n > frame.MaxSize+4 {
		return frame.Mix{}, fmt.Errorf("frame size %q: a number of bytes with FCS, 64..%d, or imix", s, frame.MaxSize+4)
	}
	return frame.Mix{Sizes: []int{n - 4}, Weights: []int{1}}, nil
}

// Label is the size for people: "64B" or "IMIX".
func (s FrameSize) Label() string {
	if s == "imix" {
		return "IMIX"
	}
	return string(s) + "B"
}

// WireBytes is the mean frame size with FCS.
func (s FrameSize) WireBytes() float64 {
	m, err := s.Mix()
	if err != nil {
		return 0
	}
	return m.MeanSize() + 4
}

// Timing is the trial phases of RFC 2544 section 23 and the search.
type Timing struct {
	Search SearchConfig
	Settle time.Duration // after the learning frames
	Drain  time.Duration // after the trial, before counting
}

// ndrOnly is t with no PDR: for the searches whose result is a zero-loss
// rate only (broadcast, tables, the rate of a stream).
func (t Timing) NDROnly() Timing {
	t.Search.PDRLoss = 0
	return t
}

// DefaultTiming is what the lab uses unless a scenario or flag says otherwise.
var DefaultTiming = Timing{Search: DefaultSearch, Settle: 200 * time.Millisecond, Drain: 500 * time.Millisecond}

// SearchTrials runs RFC 2544's throughput search with trials made from
// spec: each trial is spec at the search's rate and length. It returns the
// result and every trial run.
func (r *Rig) SearchTrials(ctx context.Context, spec TrialSpec, tm Timing, progress func(SearchTrial)) (SearchResult, []TrialResult, error) {
	var trials []TrialResult
	trial := func(ctx context.Context, rate float64, d time.Duration) (Outcome, error) {
		ts := spec
		ts.Rate, ts.Duration, ts.Count = rate, d, 0
		tr, err := r.Trial(ctx, ts)
		if err != nil {
			return Outcome{}, err
		}
		trials = append(trials, tr)
		return Outcome{Requested: rate, Offered: tr.Offered, Loss: tr.LossRatio}, nil
	}
	res, err := Search(ctx, tm.Search, trial, progress)
	return res, trials, err
}

// Throughput runs RFC 2544's throughput search from host 0 to host 1
// (and back, with r.Bidirectional: the rates are then the sums of both).
// With a mirror, every trial also counts what the span host received
// (TrialResult.Watched); the search goes by h2's frames alone.
func (r *Rig) Throughput(ctx context.Context, size FrameSize, tm Timing, flows int, progress func(SearchTrial)) (SearchResult, []TrialResult, error) {
	mix, err := size.Mix()
	if err != nil {
		return SearchResult{}, nil, err
	}
	spec := TrialSpec{From: 0, To: []int{1}, Mix: mix, Flows: flows, Learn: true, Settle: tm.Settle, Drain: tm.Drain, Both: r.Bidirectional}
	if m := r.T.Mirror; m != nil {
		spec.Watch = []int{m.SpanHost}
	}
	return r.SearchTrials(ctx, spec, tm, progress)
}

// StreamsAt runs a stream of the throughput search's own frames (flows
// of them) for d at each fraction of rate, as the latency tests do (RFC
// 2544's at fractions of the NDR, CSIT's at shares of the PDR): the sinks
// time 1 frame in 64, as in every trial of the search and in the soak, so
// the streams are the load the search measured, and not the heavier one
// of timing every frame (which cost the generator 3-23% of its rate in
// a first latency-under-load run here). With r.Bidirectional both ways.
func (r *Rig) StreamsAt(ctx context.Context, size FrameSize, flows int, rate float64, fractions []float64, d time.Duration, tm Timing) ([]TrialResult, error) {
	mix, err := size.Mix()
	if err != nil {
		return nil, err
	}
	var out []TrialResult
	for _, f := range fractions {
		tr, err := r.Trial(ctx, TrialSpec{From: 0, To: []int{1}, Rate: rate * f, Duration: d, Mix: mix, Flows: flows,
			Learn: true, Settle: tm.Settle, Drain: tm.Drain, Both: r.Bidirectional})
		if err != nil {
			return out, err
		}
		out = append(out, tr)
	}
	return out, nil
}

// LossCurve offers 100% of max, then 90%, ... down to 10% (RFC 2544 section
// 26.3), stopping after two rates in a row without loss, as the RFC allows;
// with r.Bidirectional both ways.
func (r *Rig) LossCurve(ctx context.Context, size FrameSize, maxRate float64, d time.Duration, tm Timing) ([]TrialResult, error) {
	mix, err := size.Mix()
	if err != nil {
		return nil, err
	}
	var out []TrialResult
	clean := 0
	for pct := 100; pct >= 10 && clean < 2; pct -= 10 {
		tr, err := r.Trial(ctx, TrialSpec{From: 0, To: []int{1}, Rate: maxRate * float64(pct) / 100, Duration: d, Mix: mix, Learn: true, Settle: tm.Settle, Drain: tm.Drain, Both: r.Bidirectional})
		if err != nil {
			return out, err
		}
		out = append(out, tr)
		if tr.Lost <= 0 {
			clean++
		} else {
			clean = 0
		}
	}
	return out, nil
}

// BackToBack finds the longest burst at the generator's full rate that
// passes without loss (RFC 2544 section 26.4), bisecting the burst length
// up to maxBurst frames; each length must pass reps times.
func (r *Rig) BackToBack(ctx context.Context, size FrameSize, maxBurst uint64, reps int, tm Timing) (uint64, []TrialResult, error) {
	mix, err := size.Mix()
	if err != nil {
		return 0, nil, err
	}
	var trials []TrialResult
	passes := func(n uint64) (bool, error) {
		for i := 0; i < reps; i++ {
			tr, err := r.Trial(ctx, TrialSpec{From: 0, To: []int{1}, Count: n, Mix: mix, Learn: true, Settle: tm.Settle, Drain: tm.Drain})
			if err != nil {
				return false, err
			}
			trials = append(trials, tr)
			if tr.Lost > 0 {
				return false, nil
			}
		}
		return true, nil
	}
	ok, err := passes(maxBurst)
	if err != nil || ok {
		return maxBurst, trials, err
	}
	lo, hi := uint64(0), maxBurst
	for hi-lo > max(1, maxBurst/100) {
		mid := (lo + hi) / 2
		ok, err := passes(mid)
		if err != nil {
			return lo, trials, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, trials, nil
}

// learnBase is the first address of the learning ranges of RFC 2889 tests:
// locally administered, far from the hosts' 02:00:00:00:xx:xx.
var learnBase = net.HardwareAddr{0x02, 0x10, 0x00, 0x00, 0x00, 0x00}

// cacheTrial is one round of RFC 2889's address tests: host 0 (the learning
// port) sends n frames from n addresses at learnRate to host 1; then host 1
// sends one frame to each of them. Frames that host 2 (the monitor port)
// sees were flooded: their address was not in the table. It returns the
// frames forwarded to host 0 and the ones flooded to host 2.
func (r *Rig) cacheTrial(ctx context.Context, n int, learnRate float64, tm Timing) (forwarded, flooded uint64, offered float64, err error) {
	mix := frame.Mix{Sizes: []int{60}, Weights: []int{1}}
	learn := TrialSpec{From: 0, To: []int{1}, Rate: learnRate, Count: uint64(n), Mix: mix, SrcMAC: learnBase, SrcMACs: n, Learn: true, Settle: tm.Settle, Drain: tm.Drain}
	lt, err := r.Trial(ctx, learn)
	if err != nil {
		return 0, 0, 0, err
	}
	test := TrialSpec{From: 1, To: []int{0, 2}, Rate: learnRate, Count: uint64(n), Mix: mix, DstMAC: learnBase, DstMACs: n, Drain: tm.Drain}
	tr, err := r.Trial(ctx, test)
	if err != nil {
		return 0, 0, 0, err
	}
	return tr.Received[0], tr.Received[1], lt.Offered, nil
}

// tableLearnRate is the rate at which TableThroughput teaches a DUT its
// table: slow enough for every DUT here to learn every address (RFC 2889's
// caching test holds 131,072 at 100k/s for the Linux bridge and trestle).
const TableLearnRate = 200e3

// TableCheck is what TableThroughput found of the table it filled: host 0
// sent one frame to each of the learned addresses; those forwarded reached
// host 1, those flooded (not in the table) reached host 2 as well.
type TableCheck struct {
	Addresses int    `json:"addresses"`
	Forwarded uint64 `json:"forwarded"`
	Flooded   uint64 `json:"flooded"`
}

// Held says whether the DUT held every address.
func (c TableCheck) Held() bool {
	return c.Forwarded == uint64(c.Addresses) && c.Flooded == 0
}

func (c TableCheck) String() string {
	if c.Held() {
		return fmt.Sprintf("held all %d addresses (a frame to each reached h2, none was flooded to h3)", c.Addresses)
	}
	return fmt.Sprintf("did not hold all %d addresses: %d frames to them reached h2, %d were flooded to h3", c.Addresses, c.Forwarded, c.Flooded)
}

// FillTable teaches the DUT n addresses (a range from learnBase) behind
// host 1's port, RFC 2889's way of filling a table: host 1 sends a frame from
// each. With a third host it then checks the table: host 0 sends one frame
// to each address and host 2 watches for any flooded, so that a throughput
// figure never silently stands for a smaller table (nil without a third host).
func (r *Rig) FillTable(ctx context.Context, n int, tm Timing) (*TableCheck, error) {
	small := frame.Mix{Sizes: []int{60}, Weights: []int{1}}
	_, err := r.Trial(ctx, TrialSpec{From: 1, To: []int{1}, Rate: TableLearnRate, Count: uint64(n), Mix: small,
		DstMAC: r.T.Hosts[0].MAC, SrcMAC: learnBase, SrcMACs: n, Learn: true, Settle: tm.Settle, Drain: tm.Drain})
	if err != nil {
		return nil, fmt.Errorf("learn %d addresses: %w", n, err)
	}
	if len(r.T.Hosts) < 3 {
		return nil, nil
	}
	tr, err := r.Trial(ctx, TrialSpec{From: 0, To: []int{1, 2}, Rate: TableLearnRate, Count: uint64(n), Mix: small,
		DstMAC: learnBase, DstMACs: n, Drain: tm.Drain})
	if err != nil {
		return nil, fmt.Errorf("check %d learned addresses: %w", n, err)
	}
	return &TableCheck{Addresses: n, Forwarded: tr.Received[0], Flooded: tr.Received[1]}, nil
}

// TableThroughput is RFC 2544's throughput search with a table FillTable
// filled with n addresses: host 0 sends to host 1 as in the plain search,
// or, with spread, each frame to the next of the n addresses, so that every
// frame is a lookup of another entry in a table of n: the worst case for any
// cache, the CPU's included.
func (r *Rig) TableThroughput(ctx context.Context, size FrameSize, n int, spread bool, tm Timing, progress func(SearchTrial)) (SearchResult, []TrialResult, error) {
	mix, err := size.Mix()
	if err != nil {
		return SearchResult{}, nil, err
	}
	spec := TrialSpec{From: 0, To: []int{1}, Mix: mix, Learn: true, Settle: tm.Settle, Drain: tm.Drain}
	if spread {
		spec.DstMAC, spec.DstMACs = learnBase, n
	}
	return r.SearchTrials(ctx, spec, tm, progress)
}

// AddressCaching finds how many addresses the DUT holds (RFC 2889 section
// 5.7): the largest n up to maxAddrs for which host 1's frames to n learned
// addresses all reach host 0 and none is flooded to host 2.
func (r *Rig) AddressCaching(ctx context.Context, maxAddrs int, learnRate float64, tm Timing, progress func(n int, ok bool)) (int, error) {
	if !r.DUT.Learns() {
		return 0, fmt.Errorf("%s does not learn addresses", r.DUT.Name())
	}
	check := func(n int) (bool, error) {
		fwd, fl, _, err := r.cacheTrial(ctx, n, learnRate, tm)
		ok := err == nil && fwd == uint64(n) && fl == 0
		if progress != nil && err == nil {
			progress(n, ok)
		}
		return ok, err
	}
	lo, hi := 0, maxAddrs
	if ok, err := check(hi); err != nil || ok {
		return hi, err
	}
	for hi-lo > max(1, maxAddrs/256) {
		mid := (lo + hi) / 2
		ok, err := check(mid)
		if err != nil {
			return lo, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, nil
}

// LearningRate finds the highest rate of new addresses the DUT learns
// without missing one (RFC 2889 section 5.8): n addresses sent at the rate,
// then every one of them must be known. The table must hold n addresses. It
// returns the rate the learning frames were offered at in the best passing
// trial (which can be below the rate asked for, when the path is slower),
// and whether the highest rate asked for passed: then the limit was not the
// DUT's learning.
func (r *Rig) LearningRate(ctx context.Context, n int, maxRate float64, tm Timing, progress func(rate float64, ok bool)) (float64, bool, error) {
	if !r.DUT.Learns() {
		return 0, false, fmt.Errorf("%s does not learn addresses", r.DUT.Name())
	}
	check := func(rate float64) (bool, float64, error) {
		fwd, fl, offered, err := r.cacheTrial(ctx, n, rate, tm)
		ok := err == nil && fwd == uint64(n) && fl == 0
		if progress != nil && err == nil {
			progress(offered, ok)
		}
		return ok, offered, err
	}
	ok, offered, err := check(maxRate)
	if err != nil || ok {
		return offered, ok, err
	}
	lo, hi, best := 0.0, math.Min(maxRate, offered), 0.0
	for hi-lo > tm.Search.Resolution*hi {
		mid := (lo + hi) / 2
		ok, offered, err := check(mid)
		if err != nil {
			return best, false, err
		}
		if ok {
			lo, best = mid, offered
		} else {
			hi = mid
		}
	}
	return best, false, nil
}

// IperfResult is one iperf3 run.
type IperfResult struct {
	Proto       string  `json:"proto"`
	Streams     int     `json:"streams"`
	BitsPerSec  float64 `json:"bits_per_second"`
	Retransmits int     `json:"retransmits,omitempty"`
	JitterMs    float64 `json:"jitter_ms,omitempty"`
	LostPercent float64 `json:"lost_percent,omitempty"`
	Packets     int     `json:"packets,omitempty"`
	Lost        int     `json:"lost_packets,omitempty"`
	// RcvbufErrors: datagrams the server's host dropped because the iperf3
	// socket's buffer was full (UDP RcvbufErrors in the server namespace's
	// /proc/net/snmp, during the run): lost at the receiver, not on the path.
	RcvbufErrors int       `json:"receiver_buffer_drops,omitempty"`
	CPU          []float64 `json:"cpu_busy"`
	Seconds      float64   `json:"seconds"`
}

var iperfPort = 5201

// udpRcvbufErrors reads the UDP RcvbufErrors counter of a namespace.
func udpRcvbufErrors(ctx context.Context, ns *NS) (int64, error) {
	out, err := ns.Run(ctx, "cat", "/proc/net/snmp")
	if err != nil {
		return 0, err
	}
	return snmpField(out, "Udp", "RcvbufErrors")
}

// snmpField finds one counter in /proc/net/snmp's text: a header line
// "Proto: Name1 Name2 ..." followed by "Proto: v1 v2 ...".
func snmpField(text, proto, name string) (int64, error) {
	lines := strings.Split(text, "\n")
	for i := 0; i+1 < len(lines); i++ {
		head, vals := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(head) == 0 || head[0] != proto+":" || len(vals) != len(head) || vals[0] != head[0] {
			continue
		}
		for k, h := range head {
			if h == name {
				return strconv.ParseInt(vals[k], 10, 64)
			}
		}
	}
	return 0, fmt.Errorf("no %s %s in /proc/net/snmp", proto, name)
}

// Iperf runs iperf3 from host client to host server: TCP with streams
// parallel streams, or UDP at udpRate (iperf3's -b, e.g. "1G").
func (r *Rig) Iperf(ctx context.Context, client, server int, proto string, streams int, d time.Duration, udpRate string) (IperfResult, error) {
	res := IperfResult{Proto: proto, Streams: streams}
	c, s := r.T.Hosts[client], r.T.Hosts[server]
	iperfPort++
	port := strconv.Itoa(iperfPort)
	srv, err := s.NS.Start("iperf3", "-s", "-1", "-p", port, "-J")
	if err != nil {
		return res, err
	}
	defer srv.StopWith(syscall.SIGTERM, 2*time.Second)
	// Wait until it listens: a client too early is refused, and a one-off
	// server (-1) would not serve a second try.
	for deadline := time.Now().Add(10 * time.Second); ; {
		out, _ := s.NS.Run(ctx, "ss", "-Hltn", "sport = :"+port)
		if strings.TrimSpace(out) != "" {
			break
		}
		select {
		case <-srv.Done():
			return res, fmt.Errorf("iperf3 server exited: %v: %s", srv.Err(), srv.Output())
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("iperf3 server in %s not listening on %s after 10s", s.NS.Name, port)
		}
	}
	args := []string{"-c", s.IP, "-p", port, "-t", strconv.Itoa(int(math.Max(1, d.Seconds()))), "-P", strconv.Itoa(streams), "-J", "--connect-timeout", "5000"}
	if proto == "udp" {
		args = append(args, "-u", "-b", udpRate)
	}
	var out string
	buf0, bufErr := udpRcvbufErrors(ctx, s.NS)
	cpu0, _ := ReadCPU()
	out, err = c.NS.Run(ctx, "iperf3", args...)
	cpu1, _ := ReadCPU()
	res.CPU = CPUBusy(cpu0, cpu1)
	if buf1, err1 := udpRcvbufErrors(ctx, s.NS); bufErr == nil && err1 == nil {
		res.RcvbufErrors = int(buf1 - buf0)
	}
	var j struct {
		End struct {
			SumSent struct {
				BitsPerSecond float64 `json:"bits_per_second"`
				Retransmits   int     `json:"retransmits"`
			} `json:"sum_sent"`
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
				Seconds       float64 `json:"seconds"`
			} `json:"sum_received"`
			Sum struct {
				BitsPerSecond float64 `json:"bits_per_second"`
				JitterMs      float64 `json:"jitter_ms"`
				LostPercent   float64 `json:"lost_percent"`
				LostPackets   int     `json:"lost_packets"`
				Packets       int     `json:"packets"`
				Seconds       float64 `json:"seconds"`
			} `json:"sum"`
		} `json:"end"`
		Error string `json:"error"`
	}
	if jerr := json.Unmarshal([]byte(out), &j); jerr != nil {
		if err != nil {
			return res, fmt.Errorf("iperf3 %s: %w", proto, err)
		}
		return res, fmt.Errorf("iperf3 %s: %v: %.300s", proto, jerr, out)
	}
	if j.Error != "" {
		return res, fmt.Errorf("iperf3 %s: %s", proto, j.Error)
	}
	if proto == "udp" {
		res.BitsPerSec, res.JitterMs, res.LostPercent = j.End.Sum.BitsPerSecond, j.End.Sum.JitterMs, j.End.Sum.LostPercent
		res.Packets, res.Lost, res.Seconds = j.End.Sum.Packets, j.End.Sum.LostPackets, j.End.Sum.Seconds
	} else {
		res.BitsPerSec, res.Retransmits, res.Seconds = j.End.SumReceived.BitsPerSecond, j.End.SumSent.Retransmits, j.End.SumReceived.Seconds
	}
	if res.BitsPerSec <= 0 {
		return res, errors.New("iperf3 moved nothing")
	}
	return res, nil
}

// TrialTime is a search trial with its settling and draining.
func TrialTime(tm Timing) time.Duration { return tm.Search.Trial + tm.Settle + tm.Drain }

// IperfRunTime is how long each iperf3 run lasts: IperfTime, or 5 s.
func IperfRunTime(s Scenario) time.Duration {
	if s.IperfTime == 0 {
		return 5 * time.Second
	}
	return s.IperfTime
}

// TinyTiming is the timing of the lab's own tests that run a scenario:
// short trials, and a search that asks whether each DUT forwards, not
// whether it loses nothing (Open vSwitch's userspace datapath drops a few
// frames at most rates here, and a zero-loss search can then find no rate).
func TinyTiming() Timing {
	tm := DefaultTiming
	tm.Search.Trial, tm.Search.Confirm = 300*time.Millisecond, 500*time.Millisecond
	tm.Settle, tm.Drain = 50*time.Millisecond, 100*time.Millisecond
	tm.Search.LossGoal = 0.05
	return tm
}
