// Package macflood is the lab's mac-flood kind: a known stream from h1 to h2 runs twice,
// alone and while h3 sends frames from a million random source addresses
// to h4 at its generator's full rate. What a flood must not do (the
// datapath's rule 3, docs/architecture.md): slow or break the known stream, grow the table past
// its limit, evict static entries, or keep another bridge from learning.
package macflood

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/trestle/trestle/internal/frame"
	"github.com/trestle/trestle/internal/lab"
	"github.com/trestle/trestle/internal/lab/gen"
	"github.com/trestle/trestle/internal/lab/sink"
)

func init() { lab.Register(Kind{}, lab.TestRestart) }

const (
	// floodFlow is the flow id of the flood's frames: above every flow a
	// sink tracks, so every sink counts them apart, as bad_flow.
	floodFlow = 0xffff
	// floodStatics is how many static entries the flooded bridge gets.
	floodStatics = 4
	// sideAddrs are the new addresses the second bridge (Needs.SideHosts)
	// is taught in each stream, and sideLimit how long it may take to hold
	// them all.
	sideAddrs = 1000
	sideLimit = 5 * time.Second
	sidePoll  = 100 * time.Millisecond
	// floodLead and floodTail are the stream before the flood starts and
	// after it ends; sampleEvery how often the table, the memory and the
	// stream's rate are read.
	floodLead, floodTail = time.Second, time.Second
	sampleEvery          = time.Second
	// FloodMinRatio is the goal: the stream keeps this share of its rate.
	FloodMinRatio = 0.9
	// The newcomer (issue 29): a station that never sent, on h4's port,
	// starts a stream of newcomerPPS frames a second to h1 newcomerAfter
	// into the flood (at most a third of it), once the table is full, and
	// sends until the flood ends; its first frame at h1 and its entry in
	// the table are looked for every newcomerPoll. Goal (trestle): its
	// first frame delivered within NewcomerDeliverGoal of its first sent,
	// its entry there within NewcomerLearnGoal, and the known stream at 0
	// loss.
	newcomerAfter       = 3 * time.Second
	newcomerPPS         = 1000
	newcomerPoll        = 50 * time.Millisecond
	NewcomerDeliverGoal = time.Second
	NewcomerLearnGoal   = 5 * time.Second
)

var (
	// floodBase is the first of the flood's sources: locally administered
	// and unicast (0a:), so no offset in its low 24 bits is a host's
	// 02:00:00:.. address.
	floodBase = net.HardwareAddr{0x0a, 0x66, 0x6c, 0, 0, 0}
	// staticBase is the first static entry's address.
	staticBase = net.HardwareAddr{0x0e, 0x5a, 0, 0, 0, 1}
	// newcomerMAC is the newcomer's address: no host's, no flood source's.
	newcomerMAC = net.HardwareAddr{0x02, 0x4e, 0x43, 0, 0, 1}
	// sideBase is the first of the second bridge's new addresses; each
	// stream's are its own (the stream's number in the third byte).
	sideBase = net.HardwareAddr{0x02, 0xb0, 0, 0, 0, 0}
)

// Record is the mac-flood test through one DUT.
type Record struct {
	FrameSize  lab.FrameSize `json:"frame_size"`
	RatePPS    float64       `json:"rate_pps"`
	Throughput float64       `json:"throughput_pps,omitempty"` // measured; the rate is Load of it
	Load       float64       `json:"load,omitempty"`
	Sources    int           `json:"sources"`
	// FloodSeconds is the flood's length; the streams run floodLead
	// before it and floodTail after.
	FloodSeconds float64 `json:"flood_seconds"`
	// MaxEntries is the table size asked for; TableLimit the flooded
	// bridge's limit as the DUT states it, SideLimit the second bridge's.
	MaxEntries int           `json:"max_entries"`
	TableLimit string        `json:"table_limit"`
	SideLimit  string        `json:"side_table_limit,omitempty"`
	Statics    []StaticCheck `json:"statics"`
	Base       FloodWindow   `json:"without_flood"`
	Flood      FloodWindow   `json:"with_flood"`
	// Daemon is whose memory the samples hold.
	Daemon string `json:"daemon,omitempty"`
	// Unmeasured are the figures this DUT cannot give, and why.
	Unmeasured map[string]string `json:"unmeasured,omitempty"`
}

// StaticCheck is one static entry of the flooded bridge: there (static, on
// its port) before the streams and after the flood.
type StaticCheck struct {
	MAC    string `json:"mac"`
	Port   string `json:"port"`
	Before bool   `json:"before"`
	After  bool   `json:"after"`
	Found  string `json:"found,omitempty"` // what the table held after, when not the entry
}

// FloodWindow is one stream from h1 to h2, with or without the flood.
type FloodWindow struct {
	Flood bool `json:"flood"`
	// The stream: every frame is due at h2 (see RestartEvent.account).
	Sent       uint64  `json:"sent"`
	DevDropped uint64  `json:"dev_dropped"`
	Received   uint64  `json:"received"`
	Lost       int64   `json:"lost"`
	Gaps       int64   `json:"sequence_gaps"`
	Reordered  uint64  `json:"reordered"`
	Duplicated uint64  `json:"duplicated"`
	Flooded    uint64  `json:"flooded"` // stream frames h3 counted: the DUT did not know h2
	Offered    float64 `json:"offered_pps"`
	// RatePPS is the distinct frames h2 received a second of the stream.
	RatePPS float64 `json:"rate_pps"`
	Seconds float64 `json:"seconds"`
	// The flood, from h3 to h4's learned address: frames sent, the rate
	// it reached, those h4 received, and those that reached h1 or h2 (the
	// DUT flooded them: it had lost h4's entry or never had it).
	FloodSent      uint64    `json:"flood_sent,omitempty"`
	FloodOffered   float64   `json:"flood_offered_pps,omitempty"`
	FloodDelivered uint64    `json:"flood_delivered,omitempty"`
	FloodLeaked    uint64    `json:"flood_leaked,omitempty"`
	CPU            []float64 `json:"cpu_busy,omitempty"`
	// OtherCPU is the CPU time processes other than the lab's and the
	// DUT's took during the stream, in seconds (cpuOthers): on a shared
	// machine, what was not there for the measurement.
	OtherCPU float64       `json:"other_cpu_seconds"`
	Samples  []FloodSample `json:"samples"`
	// Side is the second bridge learning new addresses midway.
	Side *SideLearn `json:"side_learning,omitempty"`
	// Newcomer is the new station's stream, with the flood only.
	Newcomer *Newcomer `json:"newcomer,omitempty"`
	Note     string    `json:"note,omitempty"`
}

// Newcomer is a station that never sent before starting a stream on h4's
// port while the flood runs: how soon its frames got through and its
// address into the flooded bridge's table, and what it lost.
type Newcomer struct {
	MAC     string  `json:"mac"`
	Port    string  `json:"port"`
	StartS  float64 `json:"start_s"` // since the flood started
	RatePPS float64 `json:"rate_pps"`
	// Sent, Received (distinct frames at h1) and Lost over its stream.
	Sent     uint64 `json:"sent"`
	Received uint64 `json:"received"`
	Lost     int64  `json:"lost"`
	// DeliveredMs runs from its first frame sent to its first frame at
	// h1, both on the BPF clock (the generator's and the sink's).
	Delivered   bool    `json:"delivered"`
	DeliveredMs float64 `json:"delivered_ms,omitempty"`
	// LearnedMs runs from its first frame sent to the end of the table
	// read that found its entry on its port (so it holds that read,
	// ReadMs: a dump of the DUT's whole table); Reads are the reads made.
	Learned   bool    `json:"learned"`
	LearnedMs float64 `json:"learned_ms,omitempty"`
	Reads     int     `json:"table_reads"`
	ReadMs    float64 `json:"last_read_ms,omitempty"`
	// Found is where the table held its address otherwise.
	Found string `json:"found,omitempty"`
	Note  string `json:"note,omitempty"`
}

// account fills the newcomer's stream from its generator's run and h1's
// sink after it.
func (n *Newcomer) account(g gen.Stats, at sink.Snapshot) {
	var ev lab.RestartEvent
	ev.Account(g, at, nil)
	n.Sent, n.Received, n.Lost = ev.Sent, ev.Received-min(ev.Duplicated, ev.Received), ev.Lost
	n.Delivered = at.Received > 0 && g.First > 0
	if n.Delivered {
		n.DeliveredMs = lab.Millis(max(at.First-g.First, 0))
	}
}

// learnedAt notes the newcomer's entry found at mono (CLOCK_MONOTONIC),
// its first frame having gone at first.
func (n *Newcomer) learnedAt(first, mono time.Duration) {
	n.Learned, n.LearnedMs = true, lab.Millis(max(mono-first, 0))
}

// NewcomerGoal says whether a newcomer met the goal: delivered within
// NewcomerDeliverGoal and learned within NewcomerLearnGoal.
func NewcomerGoal(n *Newcomer) bool {
	return n != nil && n.Delivered && n.DeliveredMs <= lab.Millis(NewcomerDeliverGoal) && n.Learned && n.LearnedMs <= lab.Millis(NewcomerLearnGoal)
}

// FloodSample is one reading a second into a stream.
type FloodSample struct {
	T        float64 `json:"t_s"` // since the stream started
	Flooding bool    `json:"flooding"`
	// Learned is the flooded bridge's learned addresses (-1: not read);
	// Entries and Evicted as in TableReading.
	Learned int    `json:"learned"`
	Entries int    `json:"entries,omitempty"`
	Evicted int64  `json:"evicted,omitempty"`
	RSSKiB  uint64 `json:"rss_kib,omitempty"`
	// StreamPPS is the stream's frames h2 received since the last
	// sample, a second; FloodPPS the flood's that h4 received.
	StreamPPS float64 `json:"stream_pps"`
	FloodPPS  float64 `json:"flood_pps"`
}

// SideLearn is the second bridge taught new addresses: how many it held
// and how long it took to hold them all (or the limit).
// Millis runs from the first frame sent to the end of the table read
// that found them all: it includes that read (ReadMs), which is the
// DUT's answer to a full dump of its table.
type SideLearn struct {
	Addresses int     `json:"addresses"`
	Learned   int     `json:"learned"`
	Millis    float64 `json:"ms"`
	Reads     int     `json:"reads"`
	ReadMs    float64 `json:"last_read_ms"`
	Note      string  `json:"note,omitempty"`
}

// account fills the stream's figures from the generator's run and the
// sinks' counts after it: to is h2's, watch h3's.
func (w *FloodWindow) account(g gen.Stats, to, watch sink.Snapshot) {
	var ev lab.RestartEvent
	ev.Account(g, to, &watch)
	w.Sent, w.DevDropped, w.Offered, w.Seconds = ev.Sent, ev.DevDropped, ev.Offered, ev.Seconds
	w.Received, w.Lost, w.Gaps, w.Reordered, w.Duplicated, w.Flooded = ev.Received, ev.Lost, ev.Gaps, ev.Reordered, ev.Duplicated, ev.Flooded
	if w.Seconds > 0 {
		w.RatePPS = float64(int64(w.Sent)-w.Lost) / w.Seconds
	}
}

// FloodSummary is a DUT's mac-flood test summed up, with its goal.
type FloodSummary struct {
	Lost                int64   // the stream's frames lost with the flood
	BaseRate, FloodRate float64 // the stream's received rate without, with
	Ratio               float64 // FloodRate / BaseRate
	// MaxLearned is the most the flooded bridge held in any sample, -1 if
	// never read; Above says whether that was more than MaxEntries.
	MaxLearned             int
	Above                  bool
	StaticsKept, Statics   int
	RSSBefore              uint64 // KiB: the last sample of the stream without the flood
	RSSMax, RSSAfter       uint64 // the most of the stream with it, and its last sample
	SideBase, SideFlood    *SideLearn
	GoalMet                bool // Lost == 0 and Ratio >= FloodMinRatio
	StreamLostWithoutFlood int64
	// Newcomer is the new station's stream under the flood (nil: none);
	// NewcomerMet its goal: NewcomerGoal, with the known stream at 0 loss.
	Newcomer    *Newcomer
	NewcomerMet bool
}

// SummarizeFlood sums a record up.
func SummarizeFlood(rec *Record) FloodSummary {
	s := FloodSummary{Lost: rec.Flood.Lost, BaseRate: rec.Base.RatePPS, FloodRate: rec.Flood.RatePPS, MaxLearned: -1,
		Statics: len(rec.Statics), SideBase: rec.Base.Side, SideFlood: rec.Flood.Side, StreamLostWithoutFlood: rec.Base.Lost}
	if s.BaseRate > 0 {
		s.Ratio = s.FloodRate / s.BaseRate
	}
	for _, w := range []FloodWindow{rec.Base, rec.Flood} {
		for _, p := range w.Samples {
			if p.Learned > s.MaxLearned {
				s.MaxLearned = p.Learned
			}
		}
	}
	s.Above = rec.MaxEntries > 0 && s.MaxLearned > rec.MaxEntries
	for _, c := range rec.Statics {
		if c.Before && c.After {
			s.StaticsKept++
		}
	}
	if n := len(rec.Base.Samples); n > 0 {
		s.RSSBefore = rec.Base.Samples[n-1].RSSKiB
	}
	for _, p := range rec.Flood.Samples {
		s.RSSMax = max(s.RSSMax, p.RSSKiB)
		s.RSSAfter = p.RSSKiB
	}
	s.GoalMet = rec.Flood.Sent > 0 && s.Lost <= 0 && s.Ratio >= FloodMinRatio
	s.Newcomer = rec.Flood.Newcomer
	s.NewcomerMet = NewcomerGoal(s.Newcomer) && rec.Flood.Sent > 0 && s.Lost <= 0
	return s
}

// floodPlan is what both streams of a DUT share.
type floodPlan struct {
	mix     frame.Mix
	rate    float64
	flows   int
	flood   time.Duration
	sources int
	tables  lab.Tables // nil: the DUT's table cannot be read
	bridge  string     // the flooded bridge
	tm      lab.Timing
}

// macFloodTest runs the mac-flood test through a rig of 4 hosts (and a
// side bridge): the stream at rate frames a second of size without the
// flood and then with it, and its two results.
func macFloodTest(ctx context.Context, s lab.Scenario, k Kind, rig *lab.Rig, size lab.FrameSize, rate, tput float64, base lab.Result, add func(lab.Result), status func(string)) error {
	if len(rig.T.Hosts) < 4 || len(rig.T.Bridges) == 0 {
		return errors.New("mac-flood: needs 4 hosts on a bridge")
	}
	mix, err := size.Mix()
	if err != nil {
		return err
	}
	rec := &Record{FrameSize: size, RatePPS: rate, Sources: k.Sources, FloodSeconds: s.Duration.Seconds(), MaxEntries: s.MaxEntries, Unmeasured: map[string]string{}}
	if tput > 0 {
		rec.Throughput, rec.Load = tput, rate/tput
	}
	p := floodPlan{mix: mix, rate: rate, flows: max(s.Flows, 1), flood: s.Duration, sources: k.Sources, bridge: rig.T.Bridges[0].Name, tm: s.Timing}
	if tb, ok := rig.DUT.(lab.Tables); ok {
		p.tables = tb
	} else {
		rec.Unmeasured["table"] = rig.DUT.Name() + " has no table the lab can read"
	}
	if _, what, err := lab.DaemonRSS(rig.DUT); err != nil {
		rec.Unmeasured["memory"] = err.Error()
	} else {
		rec.Daemon = what
	}
	var runErr error
	if p.tables != nil {
		status("mac-flood: the table limit and the static entries")
		runErr = floodSetup(ctx, rig, p, s.MaxEntries, rec)
	}
	for _, flood := range []bool{false, true} {
		if runErr != nil {
			break
		}
		what := "alone"
		if flood {
			what = fmt.Sprintf("with a flood from %d random sources", p.sources)
		}
		status(fmt.Sprintf("mac-flood: the stream of %s at %s, %s (%v)", size.Label(), lab.PPSText(rate), what, floodLead+p.flood+floodTail))
		w, err := floodWindow(ctx, rig, p, flood)
		if err != nil {
			runErr = fmt.Errorf("mac-flood: the stream %s: %w", what, err)
			w.Note = err.Error()
		}
		if flood {
			rec.Flood = w
		} else {
			rec.Base = w
		}
	}
	if runErr == nil && p.tables != nil {
		runErr = checkStatics(ctx, rig, p, rec.Statics, false)
	}
	if rig.T.Side == nil {
		rec.Unmeasured["second bridge"] = "no second bridge on this topology"
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := addFloodResults(base, rec, runErr, add); err != nil {
		return err
	}
	return runErr
}

// floodSetup limits both bridges' tables where the DUT takes a limit at
// run time, gives the flooded bridge its static entries (on h2's port)
// and checks they are there.
func floodSetup(ctx context.Context, r *lab.Rig, p floodPlan, maxEntries int, rec *Record) error {
	var err error
	if rec.TableLimit, err = p.tables.TableLimit(ctx, r.T, p.bridge, maxEntries); err != nil {
		return err
	}
	if r.T.Side != nil {
		if rec.SideLimit, err = p.tables.TableLimit(ctx, r.T, r.T.Side.Name, maxEntries); err != nil {
			return err
		}
	}
	port := r.T.Hosts[1].Port
	for i := 0; i < floodStatics; i++ {
		mac := lab.MACPlus(staticBase, i)
		if err := p.tables.AddStatic(ctx, r.T, p.bridge, port, mac); err != nil {
			return fmt.Errorf("static entry %s on %s: %w", mac, port, err)
		}
		rec.Statics = append(rec.Statics, StaticCheck{MAC: mac.String(), Port: port})
	}
	return checkStatics(ctx, r, p, rec.Statics, true)
}

// checkStatics reads the flooded bridge's table and marks each static
// entry found (static, on its port) before the streams, or after.
func checkStatics(ctx context.Context, r *lab.Rig, p floodPlan, cs []StaticCheck, before bool) error {
	es, err := p.tables.FDBEntries(ctx, r.T, p.bridge)
	if err != nil {
		return err
	}
	for i := range cs {
		e, ok := es[cs[i].MAC]
		there := ok && e.Static && e.Port == cs[i].Port
		if before {
			cs[i].Before = there
			continue
		}
		cs[i].After = there
		switch {
		case !ok:
			cs[i].Found = "gone"
		case !there:
			cs[i].Found = fmt.Sprintf("on %s, static %v", e.Port, e.Static)
		}
	}
	return nil
}

// floodWindow runs one stream: learning frames from every host, the
// stream from h1 to h2 for lead + flood + tail, and with flood the flood
// from h3 to h4 after lead, on the DUT's CPU (the stream's path runs on
// the generator's). Every second a sampler reads the flooded bridge's
// table, the daemon's memory and the rates at h2 and h4; midway the side
// bridge is taught new addresses.
func floodWindow(ctx context.Context, r *lab.Rig, p floodPlan, flood bool) (FloodWindow, error) {
	w := FloodWindow{Flood: flood}
	hosts := r.T.Hosts
	for _, h := range hosts {
		if err := lab.LearnFrame(h); err != nil {
			return w, err
		}
	}
	lab.SleepCtx(ctx, p.tm.Settle)
	var sinks []*sink.Sink
	for i := range hosts {
		s := r.Sink(i)
		if s == nil {
			return w, fmt.Errorf("no sink on h%d", i+1)
		}
		if err := s.Reset(); err != nil {
			return w, err
		}
		sinks = append(sinks, s)
	}
	stream := gen.Options{Dev: hosts[0].If, NetNS: hosts[0].NS.Path, DstMAC: hosts[1].MAC, Mix: p.mix, Rate: p.rate, Flows: p.flows,
		Duration: floodLead + p.flood + floodTail, CPUs: []int{r.Place.GenCPU}, Batch: 64}
	flooder := gen.Options{Dev: hosts[2].If, NetNS: hosts[2].NS.Path, DstMAC: hosts[3].MAC, SrcMAC: floodBase,
		SrcMACs: p.sources, RandomMACs: true, Mix: frame.Mix{Sizes: []int{60}, Weights: []int{1}},
		Duration: p.flood, Flows: 1, FlowBase: floodFlow, CPUs: []int{r.Place.DUTCPU}, Batch: 64}

	cpu0, _ := lab.ReadCPU()
	others0, _ := lab.CPUOthers()
	start := time.Now()
	smp := &floodSampler{rig: r, p: p, start: start, to: sinks[1], at: sinks[3]}
	sctx, stopSampling := context.WithCancel(ctx)
	var sampled sync.WaitGroup
	sampled.Add(1)
	go func() { defer sampled.Done(); smp.run(sctx) }()
	defer func() { stopSampling(); sampled.Wait() }()

	// The generators stop with the window, whatever ends it.
	gctx, stopGens := context.WithCancel(ctx)
	var streamDone, floodDone <-chan lab.GenResult
	var st, fl lab.GenResult
	streaming, flooding := true, false
	var newcomerDone chan *Newcomer
	defer func() {
		stopGens()
		if streaming {
			<-streamDone
		}
		if flooding {
			<-floodDone
		}
		if newcomerDone != nil {
			<-newcomerDone
		}
	}()
	streamDone = lab.GoGen(gctx, stream)
	lab.SleepCtx(ctx, floodLead)
	if snap, err := sinks[1].Snapshot(); err != nil {
		return w, err
	} else if snap.Received == 0 {
		w.Note = fmt.Sprintf("the stream had not reached h2 %v after it started", floodLead)
	}
	if flood && ctx.Err() == nil {
		smp.setFlooding(true)
		flooding = true
		floodDone = lab.GoGen(gctx, flooder)
		newcomerDone = make(chan *Newcomer, 1)
		go func() { newcomerDone <- newcomer(gctx, r, p, sinks[0]) }()
	}
	if r.T.Side != nil && p.tables != nil {
		lab.SleepCtx(ctx, p.flood/2)
		n := 0
		if flood {
			n = 1
		}
		side, err := sideLearn(ctx, r, p.tables, n)
		if err != nil {
			return w, fmt.Errorf("the second bridge learning: %w", err)
		}
		w.Side = side
	}
	if flooding {
		fl = <-floodDone
		flooding = false
		smp.setFlooding(false)
	}
	if newcomerDone != nil {
		w.Newcomer = <-newcomerDone
		newcomerDone = nil
	}
	st = <-streamDone
	streaming = false
	cpu1, _ := lab.ReadCPU()
	w.CPU = lab.CPUBusy(cpu0, cpu1)
	if others1, err := lab.CPUOthers(); err == nil && others1 >= others0 {
		w.OtherCPU = float64(others1-others0) / lab.ClockTicks
	}
	if st.Err != nil && ctx.Err() == nil {
		return w, fmt.Errorf("the stream's generator on %s: %w", hosts[0].NS.Name, st.Err)
	}
	if fl.Err != nil && ctx.Err() == nil {
		return w, fmt.Errorf("the flood's generator on %s: %w", hosts[2].NS.Name, fl.Err)
	}
	lab.SleepCtx(ctx, p.tm.Drain)
	stopSampling()
	sampled.Wait()
	w.Samples = smp.samples
	snaps := make([]sink.Snapshot, len(sinks))
	for i, s := range sinks {
		var err error
		if snaps[i], err = s.Snapshot(); err != nil {
			return w, err
		}
	}
	w.account(st.S, snaps[1], snaps[2])
	if flood {
		w.FloodSent, w.FloodOffered = fl.S.Sent, fl.S.PPS()
		w.FloodDelivered = snaps[3].BadFlow
		w.FloodLeaked = snaps[0].BadFlow + snaps[1].BadFlow
	}
	return w, ctx.Err()
}

// newcomer runs the newcomer's stream, from a new address on h4's port to
// h1, from newcomerAfter into the flood (at most a third of it) to its
// end, and reads the flooded bridge's table every newcomerPoll until it
// holds the newcomer's entry on that port; at is h1's sink.
func newcomer(ctx context.Context, r *lab.Rig, p floodPlan, at *sink.Sink) *Newcomer {
	hosts := r.T.Hosts
	h := hosts[3]
	after := min(newcomerAfter, p.flood/3)
	n := &Newcomer{MAC: newcomerMAC.String(), Port: h.Port, StartS: after.Seconds(), RatePPS: newcomerPPS}
	start := time.Now()
	var notes []string
	if p.tables == nil {
		notes = append(notes, "its entry not looked for: the DUT's table cannot be read")
	} else if es, err := p.tables.FDBEntries(ctx, r.T, p.bridge); err != nil {
		notes = append(notes, "the table before it sent: "+err.Error())
	} else if e, ok := es[n.MAC]; ok {
		notes = append(notes, fmt.Sprintf("in the table before it sent, on %s", e.Port))
	}
	lab.SleepCtx(ctx, after-time.Since(start))
	if ctx.Err() != nil {
		n.Note = "the window ended before it started"
		return n
	}
	o := gen.Options{Dev: h.If, NetNS: h.NS.Path, DstMAC: hosts[0].MAC, SrcMAC: newcomerMAC, Mix: p.mix, Rate: newcomerPPS,
		Duration: p.flood - after, Flows: 1, CPUs: []int{r.Place.DUTCPU}, Batch: 64}
	done := lab.GoGen(ctx, o)
	tick := time.NewTicker(newcomerPoll)
	defer tick.Stop()
	var found time.Duration
	var res lab.GenResult
	readErr := ""
	for waiting := true; waiting; {
		select {
		case res = <-done:
			waiting = false
			continue
		case <-tick.C:
		}
		if p.tables == nil || found > 0 {
			continue
		}
		t1 := time.Now()
		es, err := p.tables.FDBEntries(ctx, r.T, p.bridge)
		if err != nil {
			readErr = err.Error()
			continue
		}
		n.Reads++
		n.ReadMs = lab.Millis(time.Since(t1))
		if e, ok := es[n.MAC]; ok && e.Port == h.Port {
			found = lab.Monotonic()
			n.Found = ""
		} else if ok {
			n.Found = fmt.Sprintf("on %s, static %v", e.Port, e.Static)
		}
	}
	if res.Err != nil && ctx.Err() == nil {
		notes = append(notes, fmt.Sprintf("its generator on %s: %v", h.NS.Name, res.Err))
	}
	if readErr != "" && found == 0 {
		notes = append(notes, "reading the table: "+readErr)
	}
	// Its last frames are due at h1 before the sink is read.
	lab.SleepCtx(ctx, p.tm.Drain)
	if snap, err := at.Snapshot(); err != nil {
		notes = append(notes, "h1's sink: "+err.Error())
	} else {
		n.account(res.S, snap)
	}
	if found > 0 && res.S.First > 0 {
		n.learnedAt(res.S.First, found)
	}
	n.Note = strings.Join(notes, "; ")
	return n
}

// floodSampler reads, every sampleEvery until stopped, the flooded
// bridge's table, the daemon's memory and the rates at h2 and h4.
type floodSampler struct {
	rig     *lab.Rig
	p       floodPlan
	start   time.Time
	to, at  *sink.Sink // h2's and h4's
	mu      sync.Mutex
	floods  bool
	samples []FloodSample
}

func (s *floodSampler) setFlooding(on bool) {
	s.mu.Lock()
	s.floods = on
	s.mu.Unlock()
}

func (s *floodSampler) run(ctx context.Context) {
	tick := time.NewTicker(sampleEvery)
	defer tick.Stop()
	last := time.Now()
	var lastTo, lastAt uint64
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			smp := FloodSample{T: now.Sub(s.start).Seconds(), Learned: -1}
			s.mu.Lock()
			smp.Flooding = s.floods
			s.mu.Unlock()
			dt := now.Sub(last).Seconds()
			last = now
			if snap, err := s.to.Snapshot(); err == nil {
				smp.StreamPPS = float64(snap.Received-min(lastTo, snap.Received)) / dt
				lastTo = snap.Received
			}
			if snap, err := s.at.Snapshot(); err == nil {
				smp.FloodPPS = float64(snap.BadFlow-min(lastAt, snap.BadFlow)) / dt
				lastAt = snap.BadFlow
			}
			if s.p.tables != nil {
				if tr, err := s.p.tables.ReadTable(ctx, s.rig.T, s.p.bridge); err == nil {
					smp.Learned, smp.Entries, smp.Evicted = tr.Learned, tr.Entries, tr.Evicted
				}
			}
			if kib, _, err := lab.DaemonRSS(s.rig.DUT); err == nil {
				smp.RSSKiB = kib
			}
			s.mu.Lock()
			s.samples = append(s.samples, smp)
			s.mu.Unlock()
		}
	}
}

// sideLearn teaches the side bridge sideAddrs new addresses (the n-th set)
// from its first host and waits until its table holds them all on that
// host's port, or sideLimit.
func sideLearn(ctx context.Context, r *lab.Rig, tb lab.Tables, n int) (*SideLearn, error) {
	side := r.T.Side
	h := side.Hosts[0]
	first := append(net.HardwareAddr(nil), sideBase...)
	first[2] = byte(n)
	sl := &SideLearn{Addresses: sideAddrs}
	t0 := time.Now()
	if err := lab.SendFrames(h, lab.LearningFrames(first, sideAddrs)); err != nil {
		return nil, err
	}
	for {
		t1 := time.Now()
		es, err := tb.FDBEntries(ctx, r.T, side.Name)
		if err != nil {
			return nil, err
		}
		sl.Reads++
		sl.ReadMs = lab.Millis(time.Since(t1))
		sl.Learned = 0
		for i := 0; i < sideAddrs; i++ {
			if e, ok := es[lab.MACPlus(first, i).String()]; ok && e.Port == h.Port {
				sl.Learned++
			}
		}
		sl.Millis = lab.Millis(time.Since(t0))
		if sl.Learned == sideAddrs || ctx.Err() != nil {
			return sl, ctx.Err()
		}
		if time.Since(t0) >= sideLimit {
			sl.Note = fmt.Sprintf("held %d of %d after %v", sl.Learned, sideAddrs, sideLimit)
			return sl, nil
		}
		lab.SleepCtx(ctx, sidePoll)
	}
}

// addFloodResults adds the test's two results: the stream's frames lost
// with the flood (the record with it), and its received rate with the
// flood against without.
func addFloodResults(base lab.Result, rec *Record, err error, add func(lab.Result)) error {
	sum := SummarizeFlood(rec)
	lost := base
	lost.Test, lost.Param, lost.Unit, lost.Value = lab.TestMACFlood, "lost", "frames", float64(sum.Lost)
	if err := lost.SetRecord(rec); err != nil {
		return err
	}
	rate := base
	rate.Test, rate.Param, rate.Unit, rate.Value = lab.TestMACFlood, "rate", "ratio", sum.Ratio
	rate.Note = fmt.Sprintf("%s with the flood, %s without", lab.PPSText(sum.FloodRate), lab.PPSText(sum.BaseRate))
	if err != nil {
		lost.Error, rate.Error = err.Error(), err.Error()
	}
	add(lost)
	add(rate)
	return nil
}

// Kind is the mac-flood test: a stream from h1 to h2 while h3
// floods the bridge from Sources random addresses, on a learning bridge
// with a second bridge of side hosts.
type Kind struct {
	Sources int
}

func (Kind) Name() string { return lab.TestMACFlood }

func (Kind) Needs(lab.Scenario) lab.Needs {
	return lab.Needs{Learning: true, AllHosts: true, SideHosts: true, OneWay: true}
}

// Estimate: two streams (without and with the flood), each with its
// learning frames, lead, tail and drain; the static entries; a search
// first if the scenario has none.
func (Kind) Estimate(s lab.Scenario, _ lab.Spec) time.Duration {
	tm := s.Timing
	trial := tm.Search.Trial + tm.Settle + tm.Drain
	t := 2*(s.Duration+floodLead+floodTail+tm.Settle+tm.Drain) + 2*time.Second
	if s.StreamRate == 0 && !s.Has(lab.TestThroughput) {
		t += 3*trial + tm.Search.Confirm
	}
	return t
}

// Prepare refuses a mac-flood test it cannot run, and says how it measures.
func (k Kind) Prepare(s lab.Scenario) ([]string, error) {
	if err := s.CheckStream(); err != nil {
		return nil, err
	}
	if k.Sources < 1 || k.Sources > 1<<24 {
		return nil, fmt.Errorf("mac-flood: %d sources: 1..%d", k.Sources, 1<<24)
	}
	if s.Hosts < 4 {
		return nil, fmt.Errorf("mac-flood: %d hosts: the stream and the flood need 4", s.Hosts)
	}
	return []string{fmt.Sprintf("mac-flood: a stream h1 -> h2 (%s frames at %s) for %v, once alone and once while h3 sends 64-byte frames to h4 (learned) "+
		"from %d source addresses scattered at random over 0a:66:6c:xx:xx:xx (each sent once a cycle) at its generator's full rate for %v, starting %v into the stream; "+
		"the stream's generator on CPU of the placement's generator, the flood's on the DUT's CPU. "+
		"Lost = frames sent less the distinct frames h2 counted; rate = those frames a second of the stream; flooded = stream frames h3 counted. "+
		"Every %v: the flooded bridge's learned addresses (trestle: the datapath's per-port counts through its control socket; the Linux bridge: IFLA_BR_FDB_N_LEARNED; "+
		"Open vSwitch: ovs-appctl fdb/stats-show, less its static entries), the daemon's VmRSS, the stream's rate at h2 and the flood's at h4. "+
		"Static entries: %d on h2's port, added before the streams (trestle fdb add, bridge fdb add ... static, ovs-appctl fdb/add), looked for after the flood. "+
		"The second bridge (brs, hosts s1 and s2) is taught %d new addresses from s1 midway through each stream, its table read every %v until it holds them all (at most %v). "+
		"A newcomer, %s, never seen before, streams %d frames a second from h4's port to h1 from %v into the flood (at most a third of it) to its end, on the DUT's CPU: "+
		"the time from its first frame sent to its first at h1 (the generator's and the sink's BPF clock), to its entry on h4's port (the table read every %v), and its frames lost; "+
		"goal for trestle: delivered within %v, learned within %v, the stream at 0 lost. "+
		"Table size asked of every DUT: %d",
		s.FirstSize().Label(), lab.StreamRateText(s), floodLead+s.Duration+floodTail, k.Sources, s.Duration, floodLead, sampleEvery, floodStatics, sideAddrs, sidePoll, sideLimit,
		newcomerMAC, newcomerPPS, newcomerAfter, newcomerPoll, NewcomerDeliverGoal, NewcomerLearnGoal, s.MaxEntries)}, nil
}

func (k Kind) Run(ctx context.Context, u *lab.UnitRun) error {
	size, rate, tput, err := u.LoadRate(ctx, "mac-flood")
	if err != nil {
		return err
	}
	return macFloodTest(ctx, u.S, k, u.Rig, size, rate, tput, u.Base, u.Add, u.Status)
}

// Flags: the stream's rate (--load or --rate), the flood's length
// (--duration), the DUTs' table (--max-entries) and its source addresses
// (--sources); a scenario without a mac-flood test refuses them.
func (Kind) Flags() []lab.Flag {
	return []lab.Flag{lab.LoadFlag(), lab.RateFlag(), lab.DurationFlag(), lab.MaxEntriesFlag(), {
		Name: "sources", Type: lab.FlagInt, Lo: 1, Hi: 1 << 24, For: "the mac-flood scenario",
		Usage: "mac-flood: the flood's random source addresses (default 1000000)",
		Set:   lab.Sets(func(m Kind, n int) (Kind, error) { m.Sources = n; return m, nil }),
	}}
}
