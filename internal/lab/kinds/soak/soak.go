// Package soak is the lab's soak kind: one long stream at a share of the zero-loss
// rate, read in windows: no frame lost, latency that does not drift, and
// a daemon whose memory and maps do not grow.
package soak

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/trestle/trestle/internal/frame"
	"github.com/trestle/trestle/internal/lab"
	"github.com/trestle/trestle/internal/lab/gen"
	"github.com/trestle/trestle/internal/lab/sink"
)

func init() { lab.Register(Kind{}, lab.TestMACFlood) }

const (
	// LatencyDrift and LatencySlack are how far a soak's last window's
	// p50, p90 and p99 may be from its first's and be stable: 25%, or
	// 2 µs where that is more (a bucket of the sink's histogram is 6.25%
	// wide, and on a path of a few µs one bucket is most of it).
	LatencyDrift = 0.25
	LatencySlack = 2 * time.Microsecond
	// MemoryDrift and MemorySlack are how much a daemon's resident memory
	// may grow from a soak's first sample to its last and be flat: 5%, or
	// 2 MiB where that is more (a Go daemon's heap breathes with its
	// garbage collector).
	MemoryDrift = 0.05
	MemorySlack = 2 << 10 // KiB
	// soakPortBase is the first UDP source port of the soak's flows.
	soakPortBase = 1024
	// soakRelearn is how often both ends of a soak's stream send a
	// learning frame, as hosts that speak do: well inside every DUT's
	// default aging time (300 s), so that the stream's destination never
	// ages out of the table and the stream stays forwarded, not flooded.
	// (The first soak runs had none: h2 aged out at 300 s, and p50 rose
	// with the flood from then on.)
	soakRelearn = 30 * time.Second
)

// Record is the soak test through one DUT.
type Record struct {
	FrameSize  lab.FrameSize `json:"frame_size"`
	Flows      int           `json:"flows"`
	SrcPorts   string        `json:"src_ports"`
	RatePPS    float64       `json:"rate_pps"`
	Throughput float64       `json:"ndr_pps"` // the zero-loss rate found first; the rate is Load of it
	Load       float64       `json:"load"`
	// Seconds is the stream's length asked for; WindowSeconds the windows'
	// of loss and latency, SampleSeconds how often memory and maps were read.
	Seconds       float64 `json:"seconds"`
	WindowSeconds float64 `json:"window_seconds"`
	SampleSeconds float64 `json:"sample_seconds"`
	// The whole stream, every frame due at h2.
	Sent       uint64        `json:"sent"`
	DevDropped uint64        `json:"dev_dropped"`
	Received   uint64        `json:"received"`
	Lost       int64         `json:"lost"`
	Reordered  uint64        `json:"reordered"`
	Duplicated uint64        `json:"duplicated"`
	Offered    float64       `json:"offered_pps"`
	Elapsed    float64       `json:"elapsed_seconds"`
	Latency    *sink.Latency `json:"latency,omitempty"`
	Windows    []SoakWindow  `json:"windows"`
	Samples    []SoakSample  `json:"samples"`
	// Maps are the eBPF maps of the programs on the DUT's ports, as read
	// at the start (arrays' sizes are fixed; the samples count the others).
	Maps       []lab.MapSize     `json:"maps,omitempty"`
	Daemon     string            `json:"daemon,omitempty"`
	Unmeasured map[string]string `json:"unmeasured,omitempty"`
}

// SoakWindow is one window of the stream, as h2's sink saw it.
type SoakWindow struct {
	From     float64 `json:"from_s"`
	To       float64 `json:"to_s"`
	Received uint64  `json:"received"`
	// Gaps are the sequence numbers the sink found missing: frames lost
	// in the window (the stream's total loss is exact, a window's is this).
	Gaps       int64         `json:"sequence_gaps"`
	Reordered  uint64        `json:"reordered"`
	Duplicated uint64        `json:"duplicated"`
	RatePPS    float64       `json:"rate_pps"`
	Latency    *sink.Latency `json:"latency,omitempty"`
	CPU        []float64     `json:"cpu_busy,omitempty"`
	OtherCPU   float64       `json:"other_cpu_seconds"` // as FloodWindow's
}

// SoakSample is one reading of the DUT during the stream.
type SoakSample struct {
	T      float64 `json:"t_s"`
	RSSKiB uint64  `json:"rss_kib,omitempty"`
	// Learned is the bridge's learned addresses (-1: not read); Maps the
	// entries of each counted map, by name.
	Learned int            `json:"learned"`
	Maps    map[string]int `json:"maps,omitempty"`
}

// Drift is one figure at a soak's first window or sample and at its last.
type Drift struct {
	Name        string
	First, Last float64
	Min, Max    float64
	OK          bool
}

// SoakSummary is a DUT's soak summed up, with its goals.
type SoakSummary struct {
	Lost       int64
	Windows    int
	Latency    []Drift // p50, p90, p99 (judged), p99.9 and max (not judged)
	Stable     bool    // every judged percentile within the drift
	Memory     *Drift  // KiB; nil: no daemon
	MemorySlop float64 // KiB a minute, the least-squares slope
	Maps       []Drift // each counted map's entries; the bridge's table as "learned"
	Flat       bool    // memory and every map
	GoalMet    bool
}

// judged are the percentiles whose drift decides stability: p99.9 and
// the maximum rest on a handful of frames a window, where one preemption of
// a shared machine's CPU moves them.
var judged = map[string]bool{"p50": true, "p90": true, "p99": true}

// SummarizeSoak sums a record up.
func SummarizeSoak(rec *Record) SoakSummary {
	s := SoakSummary{Lost: rec.Lost, Windows: len(rec.Windows), Stable: true, Flat: true}
	var lats []*sink.Latency
	for _, w := range rec.Windows {
		if w.Latency != nil && w.Latency.Count > 0 {
			lats = append(lats, w.Latency)
		}
	}
	if len(lats) < 2 {
		s.Stable = false
	} else {
		for _, p := range []struct {
			name string
			of   func(*sink.Latency) time.Duration
		}{
			{"p50", func(l *sink.Latency) time.Duration { return l.P50 }},
			{"p90", func(l *sink.Latency) time.Duration { return l.P90 }},
			{"p99", func(l *sink.Latency) time.Duration { return l.P99 }},
			{"p99.9", func(l *sink.Latency) time.Duration { return l.P999 }},
			{"max", func(l *sink.Latency) time.Duration { return l.Max }},
		} {
			var v []float64
			for _, l := range lats {
				v = append(v, float64(p.of(l)))
			}
			d := drift(p.name, v)
			d.OK = math.Abs(d.Last-d.First) <= max(LatencyDrift*d.First, float64(LatencySlack))
			if judged[p.name] && !d.OK {
				s.Stable = false
			}
			s.Latency = append(s.Latency, d)
		}
	}
	var rss, ts []float64
	learned := []float64{}
	maps := map[string][]float64{}
	for _, p := range rec.Samples {
		if p.RSSKiB > 0 {
			rss = append(rss, float64(p.RSSKiB))
			ts = append(ts, p.T)
		}
		if p.Learned >= 0 {
			learned = append(learned, float64(p.Learned))
		}
		for name, n := range p.Maps {
			maps[name] = append(maps[name], float64(n))
		}
	}
	if len(rss) > 0 {
		d := drift("rss", rss)
		d.OK = d.Last-d.First <= max(MemoryDrift*d.First, MemorySlack)
		s.Memory = &d
		s.MemorySlop = slope(ts, rss) * 60
		s.Flat = s.Flat && d.OK
	}
	names := make([]string, 0, len(maps))
	for n := range maps {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(learned) > 0 {
		s.Maps = append(s.Maps, drift("learned", learned))
	}
	for _, n := range names {
		s.Maps = append(s.Maps, drift(n, maps[n]))
	}
	for i := range s.Maps {
		// A map may lose entries (an address ages out), never gain
		// past its first sample's.
		s.Maps[i].OK = s.Maps[i].Max <= s.Maps[i].First
		s.Flat = s.Flat && s.Maps[i].OK
	}
	s.GoalMet = rec.Sent > 0 && s.Lost <= 0 && s.Stable && s.Flat
	return s
}

func drift(name string, v []float64) Drift {
	d := Drift{Name: name, First: v[0], Last: v[len(v)-1], Min: v[0], Max: v[0]}
	for _, x := range v {
		d.Min, d.Max = min(d.Min, x), max(d.Max, x)
	}
	return d
}

// slope is the least-squares slope of y against x (0 for fewer than two
// distinct x).
func slope(x, y []float64) float64 {
	n := float64(len(x))
	var sx, sy, sxx, sxy float64
	for i := range x {
		sx, sy, sxx, sxy = sx+x[i], sy+y[i], sxx+x[i]*x[i], sxy+x[i]*y[i]
	}
	den := n*sxx - sx*sx
	if n < 2 || den == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / den
}

// soakSpec is the soak's traffic from h1 to h2: the search's trials and
// the stream are the same frames.
func soakSpec(s lab.Scenario, tm lab.Timing) (lab.TrialSpec, error) {
	mix, err := s.FirstSize().Mix()
	if err != nil {
		return lab.TrialSpec{}, err
	}
	flows := max(s.Flows, 1)
	return lab.TrialSpec{From: 0, To: []int{1}, Mix: mix, Flows: flows, Learn: true, Settle: tm.Settle, Drain: tm.Drain,
		SrcPorts: frame.PortRange{First: soakPortBase, Last: uint16(soakPortBase + flows - 1)}}, nil
}

// soakTest finds the zero-loss rate of the soak's traffic (a result of
// its own), then runs the stream at s.Load of it for s.Duration.
func soakTest(ctx context.Context, s lab.Scenario, window time.Duration, rig *lab.Rig, base lab.Result, add func(lab.Result), status func(string)) error {
	size := s.FirstSize()
	spec, err := soakSpec(s, s.Timing)
	if err != nil {
		return err
	}
	n := 0
	sr, trials, err := rig.SearchTrials(ctx, spec, s.Timing.NDROnly(), func(st lab.SearchTrial) {
		n++
		status(fmt.Sprintf("soak: zero-loss rate of %s in %d flows, trial %d: %s offered, loss %.3f%%", size.Label(), spec.Flows, n, lab.PPSText(st.Offered), 100*st.Loss))
	})
	if err != nil {
		return err
	}
	add(lab.ResultOfSearch(base, lab.TestThroughput, string(size), sr, trials))
	if sr.Throughput <= 0 {
		return fmt.Errorf("soak: no zero-loss rate of %s to run the stream at %.0f%% of", size.Label(), 100*s.Load)
	}
	rec := &Record{FrameSize: size, Flows: spec.Flows, SrcPorts: spec.SrcPorts.String(), Throughput: sr.Throughput, Load: s.Load,
		RatePPS: s.Load * sr.Throughput, Seconds: s.Duration.Seconds(), Unmeasured: map[string]string{}}
	err = soak(ctx, rig, s, window, spec, rec, status)
	r := base
	r.Test, r.Param, r.Unit, r.Value = lab.TestSoak, string(size), "frames", float64(rec.Lost)
	if rerr := r.SetRecord(rec); rerr != nil {
		return rerr
	}
	if err != nil {
		r.Error = err.Error()
	}
	if ctx.Err() == nil {
		add(r)
	}
	return err
}

// soakWindow is the window length for a stream of d: w, or with none a
// minute, or a sixth of a shorter stream (at least a second).
func soakWindow(d, w time.Duration) time.Duration {
	if w > 0 {
		return w
	}
	return max(min(time.Minute, d/6), time.Second)
}

// soak runs the stream and reads it window by window.
func soak(ctx context.Context, r *lab.Rig, s lab.Scenario, window time.Duration, spec lab.TrialSpec, rec *Record, status func(string)) error {
	every := max(window/6, time.Second)
	rec.WindowSeconds, rec.SampleSeconds = window.Seconds(), every.Seconds()
	to := r.Sink(1)
	if to == nil {
		return errors.New("soak: no sink on h2")
	}
	tb, _ := r.DUT.(lab.Tables)
	if tb == nil {
		rec.Unmeasured["table"] = r.DUT.Name() + " has no table the lab can read"
	}
	if _, what, err := lab.DaemonRSS(r.DUT); err != nil {
		rec.Unmeasured["memory"] = err.Error()
	} else {
		rec.Daemon = what
	}
	maps, err := r.MapSizes()
	if err != nil {
		return err
	}
	rec.Maps = maps
	if len(maps) == 0 {
		rec.Unmeasured["maps"] = "no eBPF program on the DUT's ports"
	}
	bridge := r.T.Bridges[0].Name
	sample := func(t float64) {
		p := SoakSample{T: t, Learned: -1}
		if kib, _, err := lab.DaemonRSS(r.DUT); err == nil {
			p.RSSKiB = kib
		}
		if tb != nil {
			if tr, err := tb.ReadTable(ctx, r.T, bridge); err == nil {
				p.Learned = tr.Learned
			}
		}
		if ms, err := r.MapSizes(); err == nil {
			for _, m := range ms {
				if m.Entries >= 0 {
					if p.Maps == nil {
						p.Maps = map[string]int{}
					}
					p.Maps[fmt.Sprintf("%s (id %d)", m.Name, m.ID)] = m.Entries
				}
			}
		}
		rec.Samples = append(rec.Samples, p)
	}

	for _, i := range []int{spec.From, spec.To[0]} {
		if err := lab.LearnFrame(r.T.Hosts[i]); err != nil {
			return err
		}
	}
	lab.SleepCtx(ctx, spec.Settle)
	if err := to.SetLatencyEvery(64); err != nil {
		return err
	}
	if err := to.Reset(); err != nil {
		return err
	}
	from := r.T.Hosts[spec.From]
	o := gen.Options{Dev: from.If, NetNS: from.NS.Path, DstMAC: r.T.Hosts[spec.To[0]].MAC, Mix: spec.Mix, Rate: rec.RatePPS,
		Duration: s.Duration, Flows: spec.Flows, SrcPorts: spec.SrcPorts, CPUs: []int{r.Place.GenCPU}, Batch: 64}
	gctx, stop := context.WithCancel(ctx)
	defer stop()
	start := time.Now()
	done := lab.GoGen(gctx, o)
	sample(0)
	prev, err := to.Snapshot()
	if err != nil {
		stop()
		<-done
		return err
	}
	cpuPrev, _ := lab.ReadCPU()
	othersPrev, _ := lab.CPUOthers()
	from0 := 0.0
	closeWindow := func(t float64) error {
		snap, err := to.Snapshot()
		if err != nil {
			return err
		}
		cpu, _ := lab.ReadCPU()
		others, _ := lab.CPUOthers()
		d := snap.Sub(prev)
		w := SoakWindow{From: from0, To: t, Received: d.Received, Gaps: d.Lost, Reordered: d.Reordered, Duplicated: d.Duplicates, CPU: lab.CPUBusy(cpuPrev, cpu)}
		if others >= othersPrev {
			w.OtherCPU = float64(others-othersPrev) / lab.ClockTicks
		}
		if t > from0 {
			w.RatePPS = float64(d.Received) / (t - from0)
		}
		if l := sink.Summarize(d.Hist); l.Count > 0 {
			w.Latency = &l
		}
		rec.Windows = append(rec.Windows, w)
		prev, cpuPrev, othersPrev, from0 = snap, cpu, others, t
		return nil
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	nextWindow, nextLearn := start.Add(window), start.Add(soakRelearn)
	var g lab.GenResult
loop:
	for {
		select {
		case g = <-done:
			break loop
		case now := <-tick.C:
			t := now.Sub(start).Seconds()
			if !now.Before(nextLearn) {
				for _, i := range []int{spec.From, spec.To[0]} {
					if err := lab.LearnFrame(r.T.Hosts[i]); err != nil {
						status("soak: " + err.Error())
					}
				}
				nextLearn = nextLearn.Add(soakRelearn)
			}
			sample(t)
			if !now.Before(nextWindow) {
				if err := closeWindow(t); err != nil {
					stop()
					<-done
					return err
				}
				nextWindow = nextWindow.Add(window)
				last := rec.Windows[len(rec.Windows)-1]
				status(fmt.Sprintf("soak: %v of %v at %s: window %d: %d gaps, p99 %v", time.Since(start).Round(time.Second), s.Duration, lab.PPSText(rec.RatePPS),
					len(rec.Windows), last.Gaps, latencyP99(last.Latency)))
			}
		}
	}
	if g.Err != nil && ctx.Err() == nil {
		return fmt.Errorf("soak: generator on %s: %w", from.NS.Name, g.Err)
	}
	lab.SleepCtx(ctx, spec.Drain)
	end := time.Since(start).Seconds()
	// The last window, if the stream ran a while past the one before.
	if end-from0 > window.Seconds()/2 || len(rec.Windows) == 0 {
		if err := closeWindow(end); err != nil {
			return err
		}
	}
	sample(end)
	last, err := to.Snapshot()
	if err != nil {
		return err
	}
	var ev lab.RestartEvent
	ev.Account(g.S, last, nil)
	rec.Sent, rec.DevDropped, rec.Received, rec.Lost = ev.Sent, ev.DevDropped, ev.Received, ev.Lost
	rec.Reordered, rec.Duplicated, rec.Offered, rec.Elapsed = ev.Reordered, ev.Duplicated, ev.Offered, ev.Seconds
	if l := sink.Summarize(last.Hist); l.Count > 0 {
		rec.Latency = &l
	}
	return ctx.Err()
}

func latencyP99(l *sink.Latency) time.Duration {
	if l == nil {
		return 0
	}
	return l.P99
}

// Kind is the soak test: a stream at Load of the zero-loss rate for
// Duration, its figures per Window (0: a sixth of the duration, at most a
// minute).
type Kind struct {
	Window time.Duration
}

func (Kind) Name() string                 { return lab.TestSoak }
func (Kind) Preset() lab.Scenario         { return soakPreset }
func (Kind) Needs(lab.Scenario) lab.Needs { return lab.Needs{OneWay: true} }

func (Kind) Estimate(s lab.Scenario, _ lab.Spec) time.Duration {
	tm := s.Timing
	trial := tm.Search.Trial + tm.Settle + tm.Drain
	return 3*trial + tm.Search.Confirm + s.Duration + tm.Settle + tm.Drain
}

// Prepare refuses a soak it cannot run, and says how it measures.
func (k Kind) Prepare(s lab.Scenario) ([]string, error) {
	if err := s.CheckStream(); err != nil {
		return nil, err
	}
	if s.Flows < 1 || s.Flows > 65536-soakPortBase {
		return nil, fmt.Errorf("soak: %d flows: 1..%d (one UDP source port each, from %d)", s.Flows, 65536-soakPortBase, soakPortBase)
	}
	w := soakWindow(s.Duration, k.Window)
	return []string{fmt.Sprintf("soak: the RFC 2544 search for the zero-loss rate of %s frames in %d flows (UDP source ports from %d), then a stream at %s for %v; "+
		"per %v window: the sequence gaps h2's sink found, its rate and the latency percentiles of 1 frame in 64 per flow (one-way, the generator's timestamp to the sink's clock); "+
		"every %v: the daemon's VmRSS, the bridge's learned addresses and the entries of every hash map of the eBPF programs on the DUT's ports (counted key by key from the lab; arrays are fixed). "+
		"Stable: p50, p90 and p99 of the last window within %.0f%% (or %v) of the first's; flat: memory grown by at most %.0f%% (or %d MiB), no map's entries above its first sample's. Both ends send a learning frame every %v, as hosts that speak do, so the stream's destination never ages out",
		s.FirstSize().Label(), max(s.Flows, 1), soakPortBase, lab.StreamRateText(s), s.Duration, w, max(w/6, time.Second), 100*LatencyDrift, LatencySlack, 100*MemoryDrift, MemorySlack>>10, soakRelearn)}, nil
}

func (k Kind) Run(ctx context.Context, u *lab.UnitRun) error {
	return soakTest(ctx, u.S, soakWindow(u.S.Duration, k.Window), u.Rig, u.Base, u.Add, u.Status)
}

// Flags: the stream's rate (--load) and length (--duration), and
// --window, the soak's windows, at most its duration; a scenario without a
// soak refuses them. A --duration given alone below the window
// takes the window back to its default, a sixth of the soak.
func (Kind) Flags() []lab.Flag {
	return []lab.Flag{lab.LoadFlag(), lab.DurationFlag(), {
		Name: "window", Type: lab.FlagDuration, For: "the soak scenario", Usage: "soak: the windows of loss and latency (default 1m)",
		Set: func(s *lab.Scenario, v any) error {
			w := v.(time.Duration)
			if w <= 0 || w > s.Duration {
				return fmt.Errorf("--window %v: above 0, at most the duration (%v)", w, s.Duration)
			}
			return lab.Sets(func(k Kind, w time.Duration) (Kind, error) { k.Window = w; return k, nil })(s, w)
		},
		Absent: func(s *lab.Scenario, given func(string) bool) error {
			if k, _ := lab.TestOf[Kind](*s); given("duration") && k.Window > s.Duration {
				k.Window = 0 // a sixth of a short soak
				lab.Configure(s, func(Kind) Kind { return k })
			}
			return nil
		},
	}}
}

// soakPreset is the soak scenario: ten minutes of IMIX through trestle.
var soakPreset = lab.Scenario{
	Name: "soak", Title: "Soak: 10 minutes at 90% of the zero-loss rate, IMIX, 1000 flows",
	About: "a 2-port bridge: the zero-loss rate (NDR, the RFC 2544 search) of IMIX frames in 1000 flows (UDP source ports 1024-2023, each flow with its own sequence numbers), " +
		"then a stream at 90% of it for --duration (default 10m): loss and latency percentiles per minute, the daemon's resident memory and the size of every eBPF map of the programs on the DUT's ports " +
		"(hash maps counted key by key, arrays fixed) every 10 s, and the learning table's size. " +
		"Goals: 0 frames lost; p50, p90 and p99 of the last minute within 25% (or 2 us) of the first's; the daemon's memory flat and no map growing. trestle in xdp and in its default mode",
	DUTs: lab.MustSpecs("trestle:xdp", "trestle"), Hosts: 2, Chain: []int{1},
	Sizes: []lab.FrameSize{"imix"}, Tests: []lab.Kind{Kind{Window: time.Minute}}, Reps: 1, Timing: lab.DefaultTiming, Flows: 1000,
	Load: 0.9, Duration: 10 * time.Minute,
}
