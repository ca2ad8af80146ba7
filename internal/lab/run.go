package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/trestle/trestle/internal/lab/sink"
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
	// (Value is the most of them; the events themselves are its Record).
	PerEvent []float64 `json:"per_event,omitempty"`

	// Directions: a search both ways (--bidirectional) gives each
	// direction's offered rate in the confirmation whose sum is Value
	// (h1 -> h2 first), and PDRDirections in the one that gave the PDR.
	Directions    []float64 `json:"directions_pps,omitempty"`
	PDRDirections []float64 `json:"pdr_directions_pps,omitempty"`
	// Record is the record of the result's kind (SetRecord, RecordOf): a
	// kind needs no line here. Records written before the registry keep
	// theirs under a key of their own (oldRecordKeys).
	Record json.RawMessage `json:"record,omitempty"`
}

// oldRecordKeys are the keys under which the runs recorded before the
// registry kept a kind's record, which was then a field of Result: such a
// run loads with the record in Record, as the kind reads it today.
var oldRecordKeys = []string{"restart", "mac_flood", "soak", "cores"}

// UnmarshalJSON reads a result, a record under one of oldRecordKeys (an
// older run's) into Record.
func (r *Result) UnmarshalJSON(b []byte) error {
	type plain Result
	if err := json.Unmarshal(b, (*plain)(r)); err != nil {
		return err
	}
	if len(r.Record) > 0 {
		return nil
	}
	var old map[string]json.RawMessage
	if err := json.Unmarshal(b, &old); err != nil {
		return err
	}
	for _, k := range oldRecordKeys {
		if v := old[k]; len(v) > 0 && string(v) != "null" {
			r.Record = v
			return nil
		}
	}
	return nil
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
	for _, k := range s.kinds() {
		t += k.Estimate(s, u.dut)
	}
	return t
}

// Estimate is a rough length of a run of s: its units' estimates summed.
func (s Scenario) Estimate() time.Duration {
	var t time.Duration
	for _, u := range plan(s) {
		t += estimate(s, u)
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
	if err := s.CheckSnoop(); err != nil {
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
	notes, err := s.PrepareKinds()
	if err != nil {
		return nil, err
	}
	run.Notes = append(run.Notes, notes...)
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
	d, err := v.NewDUT()
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
	if s.needs().Loop && t.DUT != nil {
		if err := t.AddLoop(); err != nil {
			return nil, err
		}
	}
	if s.needs().Multicast && t.DUT != nil {
		t.Multicast = &Multicast{Snoop: !v.NoSnoop}
	}
	t.Suppress = v.Suppress
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
		env.Persist, env.UpgradeTo, env.OtherBuild = true, needs.UpgradeTo, cfg.otherBuild
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
	if v.Suppress {
		rec.Settings["variant: suppress"] = "neighbour suppression on (trestle's neigh_suppress, the Linux bridge's on every port): what a bridge that answers ARP and neighbour solicitations costs its other frames"
	}
	if v.NoSnoop {
		rec.Settings["variant: nosnoop"] = "IGMP and MLD snooping off: every group floods"
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

	ur := &UnitRun{S: s, Rig: rig, Base: base, Add: add, Status: status, Notef: notef, Throughputs: map[FrameSize]float64{}, Flows: max(s.Flows, 1), Profile: cfg.Profile}
	if s.HasPacketTests() && !(v.Direct() && !needs.Direct) {
		sinkHosts := []int{1}
		if s.Bidirectional {
			sinkHosts = []int{0, 1}
		}
		if needs.AllHosts {
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
		tests := func() error { return ur.packetTests(ctx) }
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
	if len(s.phase(Stack)) > 0 {
		if err := ur.runPhase(ctx, Stack); err != nil {
			return out, err
		}
		if rec.Offloads == nil {
			_ = rig.recordOffloads()
			rec.Offloads = rig.Offloads
		}
	}
	return out, nil
}

// packetTests runs the kinds that need the generator and sinks: the
// PerSize kinds at each frame size in turn, then the PerUnit kinds.
func (u *UnitRun) packetTests(ctx context.Context) error {
	for _, size := range u.S.Sizes {
		u.Size = &SizeRun{Size: size}
		if err := u.runPhase(ctx, PerSize); err != nil {
			return err
		}
	}
	u.Size = nil
	return u.runPhase(ctx, PerUnit)
}

// FirstSize is the frame size of the tests that run at one: the first.
func (s Scenario) FirstSize() FrameSize {
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
		sr, trials, err := rig.Throughput(ctx, size, s.Timing.NDROnly(), flows, func(st SearchTrial) {
			n++
			status(fmt.Sprintf("throughput %s for the %s stream, trial %d: %s offered, loss %.3f%%", size.Label(), test, n, PPSText(st.Offered), 100*st.Loss))
		})
		if err != nil {
			return 0, 0, err
		}
		add(ResultOfSearch(base, TestThroughput, string(size), sr, trials))
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
func ResultOfSearch(base Result, test, param string, sr SearchResult, trials []TrialResult) Result {
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

// lostNote says how many frames a latency stream lost, "" for none.
func LostNote(tr TrialResult) string {
	if tr.Lost <= 0 {
		return ""
	}
	return fmt.Sprintf("%d frames lost", tr.Lost)
}

// shortNote says that a stream's generator did not hold the rate asked
// (SearchConfig.Held), so the latency is at a lighter load than its name
// says; "" when it held it.
func ShortNote(tr TrialResult, search SearchConfig) string {
	if search.Held(tr.Requested, tr.Offered) {
		return ""
	}
	return fmt.Sprintf("the generator offered %s of the %s asked (%.0f%% short): a lighter load than the share says",
		PPSText(tr.Offered), PPSText(tr.Requested), 100*(1-tr.Offered/tr.Requested))
}

// joinNotes joins the notes that are not empty with "; ".
func JoinNotes(notes ...string) string {
	return strings.Join(slices.DeleteFunc(notes, func(n string) bool { return n == "" }), "; ")
}

func PassWord(ok bool) string {
	if ok {
		return "pass"
	}
	return "fail"
}

func PPSText(v float64) string {
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

// CheckStream refuses a stream of a mac-flood or soak test that it cannot
// run: its load and duration.
func (s Scenario) CheckStream() error {
	if s.StreamRate <= 0 && (s.Load <= 0 || s.Load > 1) {
		return fmt.Errorf("%s: the stream's load %v: a fraction of the throughput above 0, up to 1", s.Name, s.Load)
	}
	if s.Duration <= 0 {
		return fmt.Errorf("%s: a duration above 0 is needed", s.Name)
	}
	return nil
}

// StreamRateText says what rate the stream of a mac-flood or soak test runs at.
func StreamRateText(s Scenario) string {
	if s.StreamRate > 0 {
		return PPSText(s.StreamRate)
	}
	return fmt.Sprintf("%.0f%% of the DUT's zero-loss throughput at %s, measured first", 100*s.Load, s.FirstSize().Label())
}
