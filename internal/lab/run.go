package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/trestle/trestle/internal/sink"
)

// Result is one measured figure of one DUT in one repetition.
type Result struct {
	DUT   string `json:"dut"`
	Rep   int    `json:"rep"`
	Chain int    `json:"chain"` // bridges in a row; 0 on the straight path
	Test  string `json:"test"`
	// Param tells results of one test apart: the frame size ("64",
	// "imix"), "streams=4", "load=50%".
	Param string  `json:"param"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"` // "pps", "bit/s", "frames", "addresses", "addresses/s", "ns"
	Note  string  `json:"note,omitempty"`
	Error string  `json:"error,omitempty"`

	Search  *SearchResult `json:"search,omitempty"`
	Trials  []TrialResult `json:"trials,omitempty"`
	Iperf   *IperfResult  `json:"iperf,omitempty"`
	Profile *Profile      `json:"profile,omitempty"`
	Table   *TableCheck   `json:"table,omitempty"` // the fdb-scale test's check of the filled table
	Latency *sink.Latency `json:"latency,omitempty"`
	CPU     []float64     `json:"cpu_busy,omitempty"`
	// PerEvent is the restart test's figure for each event, in order
	// (Value is the most of them); Restart the events themselves.
	PerEvent []float64      `json:"per_event,omitempty"`
	Restart  *RestartRecord `json:"restart,omitempty"`
	// The mac-flood and soak tests' records, with their results.
	Flood *FloodRecord `json:"mac_flood,omitempty"`
	Soak  *SoakRecord  `json:"soak,omitempty"`

	// Directions: a search both ways (--bidirectional) gives each
	// direction's offered rate in the confirmation whose sum is Value
	// (h1 -> h2 first), and PDRDirections in the one that gave the PDR.
	Directions    []float64 `json:"directions_pps,omitempty"`
	PDRDirections []float64 `json:"pdr_directions_pps,omitempty"`
	// Cores is the setting of a cores result (cores.go).
	Cores *CoresRecord `json:"cores,omitempty"`
	// Record is the record of a registered kind that has no field of its
	// own above (SetRecord, RecordOf): a new kind needs no line here.
	Record json.RawMessage `json:"record,omitempty"`
}

// Unit is the setting of one measured block: a DUT on one topology.
type UnitRecord struct {
	DUT       string                     `json:"dut"`
	Rep       int                        `json:"rep"`
	Chain     int                        `json:"chain"`
	Size      FrameSize                  `json:"size,omitempty"` // a BySize scenario's unit: its one frame size
	Settings  map[string]string          `json:"settings,omitempty"`
	Placement Placement                  `json:"placement"`
	Offloads  map[string]map[string]bool `json:"offloads,omitempty"`
	Skipped   string                     `json:"skipped,omitempty"`
	Seconds   float64                    `json:"seconds"`
}

// Machine describes where a run ran.
type Machine struct {
	Kernel   string  `json:"kernel"`
	CPUs     int     `json:"cpus"`
	CPUModel string  `json:"cpu_model"`
	MemoryGB float64 `json:"memory_gib"`
	Hostname string  `json:"hostname"`
	Commit   string  `json:"commit"`
}

// Run is everything a lab run did: the JSON file and the source of reports.
type Run struct {
	Scenario  string       `json:"scenario"`
	Title     string       `json:"title"`
	Seed      string       `json:"seed,omitempty"`
	Command   string       `json:"command"`
	Started   time.Time    `json:"started"`
	Seconds   float64      `json:"seconds"`
	Machine   Machine      `json:"machine"`
	Placement string       `json:"placement"`
	DUTs      []string     `json:"duts"`
	Sizes     []FrameSize  `json:"sizes,omitempty"`
	Reps      int          `json:"reps"`
	Timing    Timing       `json:"timing"`
	Goals     []Goal       `json:"goals,omitempty"`
	Units     []UnitRecord `json:"units"`
	Results   []Result     `json:"results"`
	Notes     []string     `json:"notes,omitempty"`

	// Bidirectional: the run sent both ways (Scenario.Bidirectional).
	Bidirectional bool `json:"bidirectional,omitempty"`
}

// Config is one lab run as the command line asked for it.
type Config struct {
	Scenario  Scenario
	Placement string // auto, shared, split
	Trestle   string // binary for the trestle DUT
	WorkDir   string
	Command   string
	Version   string
	// Profile adds to every throughput figure where a frame's time went:
	// the generator's, the DUT's and the sink's eBPF programs (see Profile).
	Profile bool
	// otherBuild makes, once a run, the trestle build the restart test's
	// upgrade events go to when none is given (Env.OtherBuild).
	otherBuild func(ctx context.Context) (TrestleBuild, error)
	// Progress gets a line about the work in hand; Logf gets notes.
	Progress func(line string)
	Logf     func(format string, args ...any)
}

type unit struct {
	rep   int
	dut   Spec
	chain int
	size  FrameSize // a BySize scenario's: the unit's one size ("": every size)
}

// plan is the units of a run: each repetition runs every DUT, in an order
// that rotates from one repetition to the next (ABC, BCA, CAB), so that no
// DUT is always measured first or last. A BySize scenario does so at each
// frame size in turn, the order rotating from size to size as well.
func plan(s Scenario) []unit {
	sizes := []FrameSize{""}
	if s.BySize && len(s.Sizes) > 1 {
		sizes = s.Sizes
	}
	var out []unit
	for rep := 1; rep <= s.Reps; rep++ {
		n := len(s.DUTs)
		for i, size := range sizes {
			for k := 0; k < n; k++ {
				d := s.DUTs[(k+rep-1+i)%n]
				chains := s.Chain
				if d.Direct() {
					chains = []int{0}
				}
				for _, c := range chains {
					out = append(out, unit{rep, d, c, size})
				}
			}
		}
	}
	return out
}

// forUnit is the scenario as unit u runs it: a BySize unit's one size.
func (s Scenario) forUnit(u unit) Scenario {
	if u.size != "" {
		s.Sizes = []FrameSize{u.size}
	}
	return s
}

// sizeNote names a BySize unit's size in the progress lines.
func sizeNote(u unit) string {
	if u.size == "" {
		return ""
	}
	return " " + u.size.Label()
}

// estimate is a rough length of a unit, for the time left.
func estimate(s Scenario, u unit) time.Duration {
	s = s.forUnit(u)
	t := 3 * time.Second // topology and DUT
	if v := u.dut; v.VLAN || v.Mirror || v.Capture || v.Filter.checked() {
		t += time.Second // the VLAN, mirror or filter check, the capture's start
	}
	tm := s.Timing
	trial := tm.Search.Trial + tm.Settle + tm.Drain
	for _, test := range s.Tests {
		switch test {
		case TestThroughput, TestFlood:
			per := 3*trial + tm.Search.Confirm
			if test == TestThroughput && tm.Search.HasPDR() {
				per += tm.Search.Confirm // the PDR's confirmation, above the NDR's
			}
			t += time.Duration(len(s.Sizes)) * per
		case TestLatency:
			t += time.Duration(len(s.Sizes)*len(s.Fractions)) * trial
		case TestLoadLatency:
			t += time.Duration(len(s.Sizes)*len(s.LoadShares)) * (tm.Search.Confirm + tm.Settle + tm.Drain)
		case TestLoss:
			t += time.Duration(len(s.Sizes)) * 5 * trial
		case TestB2B:
			t += time.Duration(len(s.Sizes)) * 10 * (tm.Settle + tm.Drain + 500*time.Millisecond)
		case TestTCP:
			t += time.Duration(len(s.Streams)) * (s.IperfTime + time.Second)
		case TestUDP:
			t += s.IperfTime + time.Second
		}
	}
	for _, k := range s.kinds() {
		t += k.Estimate(s, u.dut)
	}
	return t
}

// Execute runs the scenario. It returns what it measured even when it stops
// early (ctx cancelled, or an error that ends the run); every namespace and
// process it made is gone when it returns.
func Execute(ctx context.Context, cfg Config) (*Run, error) {
	s := cfg.Scenario
	if s.Unavailable != "" {
		return nil, fmt.Errorf("scenario %s cannot run yet: %s", s.Name, s.Unavailable)
	}
	if err := s.CheckJoins(); err != nil {
		return nil, err
	}
	if err := s.CheckFilters(); err != nil {
		return nil, err
	}
	if err := s.CheckFloor(); err != nil {
		return nil, err
	}
	if err := s.CheckBidirectional(); err != nil {
		return nil, err
	}
	place, err := ChoosePlacement(cfg.Placement)
	var placeNotes []string
	for _, k := range s.kinds() {
		if p, ok := k.(placer); ok {
			place, placeNotes, err = p.Place(s, cfg.Placement)
		}
	}
	if err != nil {
		return nil, err
	}
	run := &Run{
		Scenario: s.Name, Title: s.Title, Seed: s.Seed, Command: cfg.Command, Started: time.Now(),
		Machine: machine(cfg.Version), Placement: place.Mode, DUTs: SpecTexts(s.DUTs), Sizes: s.Sizes, Reps: s.Reps, Timing: s.Timing,
		Goals: s.Goals, Bidirectional: s.Bidirectional,
	}
	if placeNotes != nil {
		run.Notes = append(run.Notes, placeNotes...)
	} else if place.Mode == "shared" {
		run.Notes = append(run.Notes, fmt.Sprintf("placement shared: the generator runs on CPU %d, and so, frame by frame, do the DUT's forwarding and the sink (a veth delivers on the sending CPU); DUT threads of their own (trestle's daemon, Open vSwitch's PMD) on CPU %d", place.GenCPU, place.DUTCPU))
	}
	if s.Bidirectional {
		run.Notes = append(run.Notes, BidirectionalNote(s, place))
	}
	if s.has(TestLoadLatency) {
		run.Notes = append(run.Notes, loadLatencyNote(s))
	}
	if s.needs().Persist {
		var once sync.Once
		var built TrestleBuild
		var buildErr error
		cfg.otherBuild = func(ctx context.Context) (TrestleBuild, error) {
			once.Do(func() {
				if cfg.Progress != nil {
					cfg.Progress("building another trestle for the upgrade events: the switch program with its memos disabled")
				}
				built, buildErr = BuildVariant(ctx, filepath.Join(cfg.WorkDir, "variant"), cfg.Version)
			})
			return built, buildErr
		}
	}
	notes, err := s.prepare()
	if err != nil {
		return nil, err
	}
	run.Notes = append(run.Notes, notes...)
	units := plan(s)
	ests := make([]time.Duration, len(units))
	var total time.Duration
	for i, u := range units {
		ests[i] = estimate(s, u)
		total += ests[i]
	}
	unavailable := map[string]string{}
	notef := func(n string) { // a note a unit adds to the run's, once
		if !slices.Contains(run.Notes, n) {
			run.Notes = append(run.Notes, n)
		}
	}
	var spent, estDone time.Duration
	for i, u := range units {
		if ctx.Err() != nil {
			break
		}
		left := total - estDone
		if estDone > 0 {
			left = time.Duration(float64(left) * float64(spent) / float64(estDone))
		}
		status := func(what string) {
			if cfg.Progress != nil {
				cfg.Progress(fmt.Sprintf("[%d/%d] rep %d %s%s%s: %s  (~%s left)", i+1, len(units), u.rep, u.dut, chainNote(s, u), sizeNote(u), what, left.Round(time.Second)))
			}
		}
		rec := UnitRecord{DUT: u.dut.Text, Rep: u.rep, Chain: u.chain, Size: u.size}
		if why, ok := unavailable[u.dut.Text]; ok {
			rec.Skipped = why
			run.Units = append(run.Units, rec)
			continue
		}
		start := time.Now()
		res, err := runUnit(ctx, cfg, s.forUnit(u), u, i+1, place, &rec, status, notef)
		rec.Seconds = time.Since(start).Seconds()
		spent += time.Since(start)
		estDone += ests[i]
		run.Results = append(run.Results, res...)
		if err != nil {
			if errors.Is(err, ErrUnavailable) {
				unavailable[u.dut.Text] = err.Error()
				rec.Skipped = err.Error()
				run.Notes = append(run.Notes, fmt.Sprintf("%s skipped: %v", u.dut, err))
				if cfg.Logf != nil {
					cfg.Logf("%s skipped: %v", u.dut, err)
				}
			} else if ctx.Err() == nil {
				run.Results = append(run.Results, Result{DUT: u.dut.Text, Rep: u.rep, Chain: u.chain, Test: "unit", Error: err.Error()})
				if cfg.Logf != nil {
					cfg.Logf("%s (rep %d%s) failed: %v", u.dut, u.rep, chainNote(s, u), err)
				}
			}
		}
		run.Units = append(run.Units, rec)
	}
	run.Seconds = time.Since(run.Started).Seconds()
	return run, ctx.Err()
}

func chainNote(s Scenario, u unit) string {
	if len(s.Chain) > 1 && u.chain > 0 {
		return fmt.Sprintf(" x%d", u.chain)
	}
	return ""
}

// runUnit builds one topology, sets the DUT up, runs the scenario's tests
// and tears everything down.
func runUnit(ctx context.Context, cfg Config, s Scenario, u unit, index int, place Placement, rec *UnitRecord, status, notef func(string)) (out []Result, err error) {
	v := u.dut
	d, err := v.newDUT()
	if err != nil {
		return nil, err
	}
	if _, ok := d.(*ovsDUT); ok {
		if err := OVSAvailable(); err != nil {
			return nil, err
		}
	}
	if len(rec.Settings) == 0 {
		rec.Settings = map[string]string{}
	}
	status("building the topology")
	// Each unit's names are its own: a DUT's files in the work directory
	// are named after its namespace.
	n := NewNet(fmt.Sprintf("u%d", index))
	defer func() {
		if cerr := n.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	t, err := Build(ctx, n, s.shape(u.dut, u.chain))
	if err != nil {
		return nil, err
	}
	if s.needs().SideHosts && t.DUT != nil {
		if err := t.AddSide(sideHosts); err != nil {
			return nil, err
		}
	}
	if len(v.Offloads) > 0 {
		for _, h := range t.Hosts {
			if err := h.NS.Features(h.If, v.Offloads); err != nil {
				return nil, fmt.Errorf("variant %s: %w", u.dut, err)
			}
		}
	}
	if v.VLAN {
		if err := t.SetVLANs(); err != nil {
			return nil, fmt.Errorf("variant %s: %w", u.dut, err)
		}
	}
	if v.Mirror {
		if err := t.SetMirror(); err != nil {
			return nil, fmt.Errorf("variant %s: %w", u.dut, err)
		}
	}
	if v.Filter != nil {
		if err := t.SetFilter(*v.Filter); err != nil {
			return nil, fmt.Errorf("variant %s: %w", u.dut, err)
		}
	}
	env := &Env{Trestle: cfg.Trestle, WorkDir: cfg.WorkDir, DUTCPU: place.DUTCPU, Log: cfg.Logf}
	needs := s.needs()
	if needs.Persist {
		env.Persist, env.UpgradeTo, env.OtherBuild = true, s.UpgradeTo, cfg.otherBuild
	}
	env.MaxEntries = needs.MaxEntries
	if s.MaxEntries > 0 {
		env.MaxEntries = s.MaxEntries
	}
	status("setting up " + u.dut.Text)
	rig, err := NewRig(ctx, t, d, place, env)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := rig.Close(context.Background()); cerr != nil && err == nil {
			err = cerr
		}
	}()
	for k, val := range d.Settings() {
		rec.Settings[k] = val
	}
	if len(v.Offloads) > 0 {
		rec.Settings["variant: host offloads"] = fmt.Sprint(v.Offloads)
	}
	if t.VLANs != nil {
		rec.Settings["variant: vlan"] = t.VLANSettings()
		status("checking the VLANs: h1 untagged on VLAN 10, h2 tagged on the trunk, VLAN 20 apart")
		found, err := rig.CheckVLANs(ctx)
		if err != nil {
			return nil, err
		}
		rec.Settings["vlan check"] = found
	}
	if t.Mirror != nil {
		rec.Settings["variant: mirror"] = t.MirrorSettings()
		status("checking the mirror: the span host gets what goes into h1's port and what comes out of it")
		found, err := rig.CheckMirror(ctx)
		if err != nil {
			return nil, err
		}
		rec.Settings["mirror check"] = found
	}
	if v.Filter != nil {
		rec.Settings["variant: filter"] = v.Filter.String()
	}
	if t.Filter.checked() {
		status("checking the filter: the generator's frame passes, one to another port does not, h2's reply as the state says")
		found, err := rig.CheckFilter(ctx)
		if err != nil {
			return nil, err
		}
		rec.Settings["filter check"] = found
	}
	base := Result{DUT: u.dut.Text, Rep: u.rep, Chain: u.chain}
	add := func(r Result) { out = append(out, r) }

	if s.hasPacketTests() && !(v.Direct() && !s.has(TestThroughput) && !s.has(TestLatency) && !s.has(TestLoss) && !s.has(TestB2B) && !needs.Direct) {
		sinkHosts := []int{1}
		if s.Bidirectional {
			sinkHosts = []int{0, 1}
		}
		if s.has(TestFlood) || needs.AllHosts {
			sinkHosts = nil
			for i := range t.Hosts {
				sinkHosts = append(sinkHosts, i)
			}
		}
		if m := t.Mirror; m != nil && !slices.Contains(sinkHosts, m.SpanHost) {
			sinkHosts = append(sinkHosts, m.SpanHost)
		}
		rig.SinkFlows, rig.Bidirectional = s.Flows, s.Bidirectional
		if err := rig.StartPackets(ctx, sinkHosts); err != nil {
			return out, err
		}
		rec.Placement, rec.Offloads = rig.Place, rig.Offloads
		tests := func() error { return packetTests(ctx, s, cfg.Profile, rig, base, add, status, notef) }
		if v.Capture {
			err = rig.withCapture(ctx, rec.Settings, status, tests)
		} else {
			err = tests()
		}
		if err != nil {
			return out, err
		}
		rig.StopPackets()
	} else {
		rec.Placement = place
	}
	if s.has(TestTCP) || s.has(TestUDP) {
		if err := iperfTests(ctx, s, rig, base, add, status); err != nil {
			return out, err
		}
		if rec.Offloads == nil {
			_ = rig.recordOffloads()
			rec.Offloads = rig.Offloads
		}
	}
	return out, nil
}

func packetTests(ctx context.Context, s Scenario, profile bool, rig *Rig, base Result, add func(Result), status, notef func(string)) error {
	tm := s.Timing
	flows := max(s.Flows, 1)
	tputs := map[FrameSize]float64{} // the throughput found at each size
	for _, size := range s.Sizes {
		var tput float64
		var unpaced float64
		if s.has(TestThroughput) {
			n := 0
			sr, trials, err := rig.Throughput(ctx, size, tm, flows, func(st SearchTrial) {
				n++
				status(fmt.Sprintf("throughput %s, trial %d: %s offered, loss %.3f%%", size.Label(), n, pps(st.Offered), 100*st.Loss))
			})
			if err != nil {
				return err
			}
			r := searchResult(base, TestThroughput, string(size), sr, trials)
			if len(trials) > 0 {
				r.CPU = trials[len(trials)-1].CPU
				unpaced = trials[0].Offered
			}
			if profile {
				status(fmt.Sprintf("profile %s: a trial without and one with BPF run-time statistics", size.Label()))
				p, err := rig.Profile(ctx, size, tm.Search.Confirm, tm)
				if err != nil {
					return err
				}
				r.Profile = &p
			}
			add(r)
			tput = sr.Throughput
			tputs[size] = tput
			if rig.T.Mirror != nil && tput > 0 {
				// The passing confirmation is the last trial: the rate found.
				add(spanResult(base, size, trials[len(trials)-1]))
			}
			if s.has(TestLoadLatency) {
				if err := loadLatency(ctx, s, rig, size, sr, base, add, status); err != nil {
					return err
				}
			}
		}
		if s.has(TestLatency) && tput > 0 {
			status(fmt.Sprintf("latency %s at %v of %s", size.Label(), s.Fractions, pps(tput)))
			trials, err := rig.StreamsAt(ctx, size, flows, tput, s.Fractions, tm.Search.Trial, tm)
			if err != nil {
				return err
			}
			for i, tr := range trials {
				r := base
				r.Test, r.Param, r.Unit = TestLatency, fmt.Sprintf("%s@%.0f%%", size, 100*s.Fractions[i]), "ns"
				r.Trials, r.CPU = []TrialResult{tr}, tr.CPU
				if tr.Latency != nil {
					r.Value, r.Latency = float64(tr.Latency.P50), tr.Latency
				}
				r.Note = joinNotes(lostNote(tr), shortNote(tr, tm.Search))
				add(r)
			}
		}
		if s.has(TestLoss) {
			maxRate := unpaced
			if maxRate == 0 {
				maxRate = tput * 1.5
			}
			status(fmt.Sprintf("loss curve %s from %s", size.Label(), pps(maxRate)))
			trials, err := rig.LossCurve(ctx, size, maxRate, tm.Search.Trial, tm)
			if err != nil {
				return err
			}
			for _, tr := range trials {
				r := base
				r.Test, r.Param, r.Value, r.Unit = TestLoss, fmt.Sprintf("%s@%.0f%%", size, 100*tr.Requested/maxRate), 100*tr.LossRatio, "% lost"
				r.Trials, r.CPU = []TrialResult{tr}, tr.CPU
				add(r)
			}
		}
		if s.has(TestB2B) {
			maxBurst := uint64(max(unpaced, tput) * 2) // two seconds at full rate
			if maxBurst < 1000 {
				maxBurst = 1000
			}
			status(fmt.Sprintf("back-to-back %s up to %d frames", size.Label(), maxBurst))
			n, trials, err := rig.BackToBack(ctx, size, maxBurst, 3, tm)
			if err != nil {
				return err
			}
			r := base
			r.Test, r.Param, r.Value, r.Unit, r.Trials = TestB2B, string(size), float64(n), "frames", trials
			if n == maxBurst {
				r.Note = "no loss at the longest burst tried"
			}
			add(r)
		}
		if s.has(TestFlood) && len(rig.T.Hosts) > 2 {
			n := 0
			mix, err := size.Mix()
			if err != nil {
				return err
			}
			tm := tm.ndrOnly()
			to := []int{}
			for i := 1; i < len(rig.T.Hosts); i++ {
				to = append(to, i)
			}
			bcast := net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
			spec := TrialSpec{From: 0, To: to, Mix: mix, DstMAC: bcast, Learn: true, Settle: tm.Settle, Drain: tm.Drain}
			sr, trials, err := rig.SearchTrials(ctx, spec, tm, func(st SearchTrial) {
				n++
				status(fmt.Sprintf("broadcast %s to %d ports, trial %d: %s offered, loss %.3f%%", size.Label(), len(to), n, pps(st.Offered), 100*st.Loss))
			})
			if err != nil {
				return err
			}
			add(searchResult(base, TestFlood, string(size), sr, trials))
		}
	}
	u := &UnitRun{S: s, Rig: rig, Base: base, Add: add, Status: status, Notef: notef, Throughputs: tputs, Flows: flows}
	for _, k := range s.kinds() {
		if k.Needs(s).Learning && !rig.DUT.Learns() {
			continue
		}
		if err := k.Run(ctx, u); err != nil {
			return err
		}
	}
	return nil
}

// firstSize is the frame size of the tests that run at one: the first.
func (s Scenario) firstSize() FrameSize {
	if len(s.Sizes) > 0 {
		return s.Sizes[0]
	}
	return "64"
}

// loadRate is the rate of a stream at s.Load of the DUT's throughput at
// size, which the unit found already (tputs) or searches for now (adding
// its result); or s.StreamRate, with no search. test names the test that
// asks, for errors.
func loadRate(ctx context.Context, s Scenario, rig *Rig, size FrameSize, tputs map[FrameSize]float64, flows int, base Result, add func(Result), status func(string), test string) (rate, tput float64, err error) {
	if s.StreamRate > 0 {
		return s.StreamRate, 0, nil
	}
	tput, ok := tputs[size]
	if !ok {
		n := 0
		sr, trials, err := rig.Throughput(ctx, size, s.Timing.ndrOnly(), flows, func(st SearchTrial) {
			n++
			status(fmt.Sprintf("throughput %s for the %s stream, trial %d: %s offered, loss %.3f%%", size.Label(), test, n, pps(st.Offered), 100*st.Loss))
		})
		if err != nil {
			return 0, 0, err
		}
		add(searchResult(base, TestThroughput, string(size), sr, trials))
		tput = sr.Throughput
		tputs[size] = tput
	}
	if tput <= 0 {
		return 0, 0, fmt.Errorf("%s: no zero-loss throughput at %s to run the stream at %.0f%% of", test, size.Label(), 100*s.Load)
	}
	return tput * s.Load, tput, nil
}

// searchResult is the Result of an RFC 2544 search: its figure, or, when no
// rate passed, an error rather than a figure of 0. The PDR, if the search
// looked for one, is in its Search.
func searchResult(base Result, test, param string, sr SearchResult, trials []TrialResult) Result {
	r := base
	r.Test, r.Param, r.Value, r.Unit, r.Note = test, param, sr.Throughput, "pps", sr.Note
	r.Search, r.Trials = &sr, trials
	r.Directions, r.PDRDirections = directionsAt(sr, trials, sr.Throughput, false), directionsAt(sr, trials, sr.PDR, true)
	if sr.Throughput == 0 {
		// Not a figure of 0: the DUT lost frames at every rate tried.
		r.Error, r.Note = "no zero-loss rate: "+sr.Note, ""
	}
	return r
}

// directionsAt is each direction's offered rate in the confirmation of a
// search both ways that passed (its NDR goal, or with pdr its PDR goal)
// at rate: nil for a search one way, or none.
func directionsAt(sr SearchResult, trials []TrialResult, rate float64, pdr bool) []float64 {
	if rate <= 0 || len(trials) != len(sr.Trials) {
		return nil
	}
	for i, st := range sr.Trials {
		pass := st.Pass
		if pdr {
			pass = st.PDRPass
		}
		if !st.Confirm || !pass || st.Offered != rate || len(trials[i].Directions) == 0 {
			continue
		}
		var out []float64
		for _, d := range trials[i].Directions {
			out = append(out, d.Offered)
		}
		return out
	}
	return nil
}

// loadLatency is CSIT's latency under load: after the throughput search
// at size, a stream of the search's frames at each of s.LoadShares of the
// PDR (of the NDR if the search looked for no PDR), for a confirmation's
// length, 1 frame in 64 timed by the sink (StreamsAt). Each stream is a
// Result whose Value is the p50 and whose Latency has the rest.
func loadLatency(ctx context.Context, s Scenario, rig *Rig, size FrameSize, sr SearchResult, base Result, add func(Result), status func(string)) error {
	ref, what := sr.PDR, "PDR"
	if !sr.Config.HasPDR() {
		ref, what = sr.Throughput, "NDR"
	}
	var trials []TrialResult
	if ref > 0 {
		status(fmt.Sprintf("latency under load %s at %s of the %s, %s", size.Label(), sharesText(s.LoadShares), what, pps(ref)))
		var err error
		if trials, err = rig.StreamsAt(ctx, size, max(s.Flows, 1), ref, s.LoadShares, s.Timing.Search.Confirm, s.Timing); err != nil {
			return err
		}
	}
	for i, share := range s.LoadShares {
		r := base
		r.Test, r.Param, r.Unit = TestLoadLatency, fmt.Sprintf("%s@%.0f%%", size, 100*share), "ns"
		r.Note = fmt.Sprintf("%.0f%% of the %s, %s", 100*share, what, pps(ref))
		if i >= len(trials) {
			r.Error = fmt.Sprintf("no %s at %s to take %.0f%% of", what, size.Label(), 100*share)
			add(r)
			continue
		}
		tr := trials[i]
		r.Trials, r.CPU = []TrialResult{tr}, tr.CPU
		if tr.Latency != nil {
			r.Value, r.Latency = float64(tr.Latency.P50), tr.Latency
		} else {
			r.Error = "the sink timed no frame"
		}
		r.Note = joinNotes(r.Note, lostNote(tr), shortNote(tr, s.Timing.Search))
		add(r)
	}
	return nil
}

// lostNote says how many frames a latency stream lost, "" for none.
func lostNote(tr TrialResult) string {
	if tr.Lost <= 0 {
		return ""
	}
	return fmt.Sprintf("%d frames lost", tr.Lost)
}

// shortNote says that a stream's generator did not hold the rate asked
// (SearchConfig.Held), so the latency is at a lighter load than its name
// says; "" when it held it.
func shortNote(tr TrialResult, search SearchConfig) string {
	if search.Held(tr.Requested, tr.Offered) {
		return ""
	}
	return fmt.Sprintf("the generator offered %s of the %s asked (%.0f%% short): a lighter load than the share says",
		pps(tr.Offered), pps(tr.Requested), 100*(1-tr.Offered/tr.Requested))
}

// joinNotes joins the notes that are not empty with "; ".
func joinNotes(notes ...string) string {
	return strings.Join(slices.DeleteFunc(notes, func(n string) bool { return n == "" }), "; ")
}

// sharesText is "10, 50 and 90%".
func sharesText(shares []float64) string {
	var parts []string
	for _, f := range shares {
		parts = append(parts, fmt.Sprintf("%.0f", 100*f))
	}
	if len(parts) > 1 {
		return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1] + "%"
	}
	return strings.Join(parts, "") + "%"
}

// loadLatencyNote says how the latency-load test measures, for the run's notes.
func loadLatencyNote(s Scenario) string {
	return fmt.Sprintf("latency under load (CSIT): after each throughput search, a stream of the search's own frames for %v (a confirmation's length) at %s of the PDR just found "+
		"(of the NDR when no PDR was looked for); the sink times 1 frame in 64 of each flow, as in every search trial and the soak, against the generator's clock reading stamped in it "+
		"(one-way; the sink's histogram has buckets 6.25%% wide, a percentile is its bucket's midpoint, the max its top bucket's upper end); "+
		"p50, p90, p99, p99.9 and max of each stream, and how many frames were timed", s.Timing.Search.Confirm, sharesText(s.LoadShares))
}

func passWord(ok bool) string {
	if ok {
		return "pass"
	}
	return "fail"
}

func iperfTests(ctx context.Context, s Scenario, rig *Rig, base Result, add func(Result), status func(string)) error {
	secs := s.IperfTime
	if secs == 0 {
		secs = 5 * time.Second
	}
	if s.has(TestTCP) {
		for _, n := range s.Streams {
			status(fmt.Sprintf("iperf3 TCP, %d stream(s), %v", n, secs))
			ir, err := rig.Iperf(ctx, 0, 1, "tcp", n, secs, "")
			r := base
			r.Test, r.Param, r.Unit = TestTCP, fmt.Sprintf("streams=%d", n), "bit/s"
			if err != nil {
				r.Error = err.Error()
			} else {
				r.Value, r.Iperf, r.CPU = ir.BitsPerSec, &ir, ir.CPU
			}
			add(r)
		}
	}
	if s.has(TestUDP) {
		status(fmt.Sprintf("iperf3 UDP at %s, %v", s.UDPRate, secs))
		ir, err := rig.Iperf(ctx, 0, 1, "udp", 1, secs, s.UDPRate)
		param := "rate=" + s.UDPRate
		// Three figures: what arrived, what was lost, and the jitter.
		for _, f := range []struct {
			test, unit string
			v          float64
		}{{TestUDP, "bit/s", ir.BitsPerSec}, {TestUDP + "-loss", "% lost", ir.LostPercent}, {TestUDP + "-jitter", "ms", ir.JitterMs}} {
			r := base
			r.Test, r.Param, r.Unit = f.test, param, f.unit
			if err != nil {
				r.Error = err.Error()
			} else {
				r.Value, r.CPU = f.v, ir.CPU
				if f.test == TestUDP {
					r.Iperf = &ir
				}
				if f.test == TestUDP+"-loss" && ir.Lost > 0 {
					r.Note = fmt.Sprintf("%d of %d lost datagrams were dropped by the receiving socket's full buffer (UDP RcvbufErrors), not on the path", min(ir.RcvbufErrors, ir.Lost), ir.Lost)
				}
			}
			add(r)
		}
	}
	return nil
}

func pps(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2f Mpps", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1f kpps", v/1e3)
	}
	return fmt.Sprintf("%.0f pps", v)
}

func machine(version string) Machine {
	m := Machine{CPUs: runtime.NumCPU(), Commit: version}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb float64
		fmt.Sscanf(strings.TrimPrefix(strings.SplitN(string(b), "\n", 2)[0], "MemTotal:"), "%f", &kb)
		m.MemoryGB = kb / (1 << 20)
	}
	m.Hostname, _ = os.Hostname()
	if m.Commit == "" || m.Commit == "dev" {
		// Not built by the Makefile: say which tree it was, if this is one.
		if out, err := exec.Command("git", "describe", "--tags", "--always", "--dirty").Output(); err == nil {
			m.Commit = strings.TrimSpace(string(out)) + " (go build)"
		}
	}
	return m
}
