package lab

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// Kind is a test kind of the lab: one unit that says what it needs of a
// unit and when it runs in it (Needs), how long it takes (Estimate), and
// how it runs and what it records (Run, adding Results whose Test is its
// Name, or its twins'). A kind's value is its test spec: its own settings
// are its fields (tcp.Kind{Streams: []int{1, 4}}), and a scenario's Tests
// are such values. A kind registers itself (Register); a unit runs the
// scenario's tests in the order of Kinds, phase by phase (Phase). As
// the DUT interface does, a kind may have optional powers, found by type
// assertion: flags of its own (flagger), a check of its settings with a
// note for the run (preparer), a placement of its own (placer) and a
// check of the placement asked (placementChecker), words for
// the scenario's description (describer, testsLiner), a report section of
// its own (Reporter), a preset scenario of its own (presetter).
//
// Adding a kind is a package of internal/lab/kinds (its kind, record,
// section and test; kinds/idle is one) and its line in kinds/all. Its
// record goes in Result.Record.
type Kind interface {
	Name() string
	// Needs is what a unit of s must set up for the kind.
	Needs(s Scenario) Needs
	// Estimate is how long the kind adds to a unit of s with dut.
	Estimate(s Scenario, dut Spec) time.Duration
	// Run measures the kind in one unit (at one frame size, u.Size, for
	// a PerSize kind).
	Run(ctx context.Context, u *UnitRun) error
}

// Phase is when in a unit a kind runs.
type Phase int

const (
	// PerUnit: once a unit, after the PerSize kinds, the generator and
	// sinks up.
	PerUnit Phase = iota
	// PerSize: at each frame size in turn, the generator and sinks up,
	// with what the kinds before it found at that size (SizeRun).
	PerSize
	// Stack: once a unit, after the generator and sinks stop: traffic
	// between the hosts' own stacks (iperf3).
	Stack
)

// Needs is what a kind asks of a unit.
type Needs struct {
	// Phase is when the kind runs.
	Phase Phase
	// Learning: the kind measures a learning bridge, and is skipped on a
	// DUT that does not learn.
	Learning bool
	// Direct: the kind runs on the straight path too (its figures are the
	// baseline of a ratio); the generator and sinks start there only for
	// such a kind. (Stack kinds run on every DUT.)
	Direct bool
	// AllHosts: a sink on every host, not only h2's (what floods is counted).
	AllHosts bool
	// MaxEntries: the learning table must hold this many addresses (0:
	// the DUT's default).
	MaxEntries int
	// Persist: a trestle daemon pins its datapath, which outlives it;
	// UpgradeTo is the build its upgrades go to ("": Env.OtherBuild's).
	Persist   bool
	UpgradeTo string
	// SideHosts: the DUT has a second bridge with hosts of its own.
	SideHosts bool
	// Queues: every veth end has this many queues (0: the default).
	Queues int
	// OneWay: the kind's streams go one way, at a share of the one-way
	// throughput (--bidirectional is refused).
	OneWay bool
	// Loop: the DUT's bridge has two ports more, joined outside it by a
	// bridge of their own once the kind closes the loop (Topo.Loop), and
	// the DUT's loop protection on (LoopGuard).
	Loop bool
	// Multicast: the DUT's bridges snoop IGMP and MLD, or, in its
	// nosnoop variant, flood every group (Topo.Multicast, Snooper).
	Multicast bool
}

// merge is what two kinds need together.
func (n Needs) merge(o Needs) Needs {
	return Needs{
		Learning: n.Learning || o.Learning, Direct: n.Direct || o.Direct, AllHosts: n.AllHosts || o.AllHosts,
		MaxEntries: max(n.MaxEntries, o.MaxEntries), Persist: n.Persist || o.Persist, UpgradeTo: cmp.Or(n.UpgradeTo, o.UpgradeTo), SideHosts: n.SideHosts || o.SideHosts,
		Queues: max(n.Queues, o.Queues), OneWay: n.OneWay || o.OneWay, Loop: n.Loop || o.Loop,
		Multicast: n.Multicast || o.Multicast,
	}
}

// UnitRun is what a kind runs with in one unit: the scenario as the unit
// runs it, the rig, and where its results go.
type UnitRun struct {
	S   Scenario
	Rig *Rig
	// Base is every result's DUT, repetition and chain length.
	Base Result
	// Add records a result; Status says what is running; Notef adds a
	// note to the run.
	Add           func(Result)
	Status, Notef func(string)
	// Throughputs are the throughput found at each frame size by the
	// unit's throughput test, if it ran one.
	Throughputs map[FrameSize]float64
	// Flows is the flow count of the unit's streams (at least 1).
	Flows int
	// Profile: the throughput test measures where a frame's time goes.
	Profile bool
	// Size is what the PerSize kinds found so far at the frame size in
	// hand (nil outside that phase).
	Size *SizeRun
}

// SizeRun is a frame size of a unit, and what its PerSize kinds found at
// it for the next ones.
type SizeRun struct {
	Size FrameSize
	// Search is the throughput search's result (nil: none ran), its
	// NDR Throughput (0: none found), and Unpaced the rate its first
	// trial offered (the generator's unpaced rate; 0 without one).
	Search     *SearchResult
	Throughput float64
	Unpaced    float64
}

// LoadRate is the first frame size and the rate of a stream at the
// scenario's Load of the DUT's throughput there (see loadRate), for test.
func (u *UnitRun) LoadRate(ctx context.Context, test string) (size FrameSize, rate, tput float64, err error) {
	size = u.S.FirstSize()
	rate, tput, err = loadRate(ctx, u.S, u.Rig, size, u.Throughputs, u.Flows, u.Base, u.Add, u.Status, test)
	return size, rate, tput, err
}

// SetRecord sets a kind's record of r (Result.Record).
func (r *Result) SetRecord(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("%s result: record: %w", r.Test, err)
	}
	r.Record = b
	return nil
}

// RecordOf reads r's kind's record into v.
func (r Result) RecordOf(v any) error {
	if len(r.Record) == 0 {
		return fmt.Errorf("%s result of %s: no record", r.Test, r.DUT)
	}
	if err := json.Unmarshal(r.Record, v); err != nil {
		return fmt.Errorf("%s result of %s: record: %w", r.Test, r.DUT, err)
	}
	return nil
}

// describer is a kind that adds a line to its scenario's description
// (Scenario.Describe): "" for none.
type describer interface {
	Describe(s Scenario) string
}

// Reporter is a kind with a report section of its own: its results are
// left out of the report's tables of medians, and the report adds its
// section (terminal text and Markdown) where the run has its results.
type Reporter interface {
	Kind
	Section(run *Run) (terminal, markdown string)
}

// ChartReporter is a Reporter whose Markdown has charts: the report takes
// the section of report.md from SectionIn, which writes its charts into
// dir (report.md's directory), and only the terminal's from Section.
type ChartReporter interface {
	Reporter
	SectionIn(dir string, run *Run) (markdown string, err error)
}

// twinned is a kind that also records results under other tests' names
// (restart's restart-flooded): they go to its section too.
type twinned interface {
	Twins() []string
}

// placer is a kind that places a run's threads itself, with notes on what
// its placement can show (they stand for the placement's usual note).
type placer interface {
	Place(s Scenario, mode string) (Placement, []string, error)
}

// placementChecker is a kind that refuses a placement (--placement) or
// settings the machine cannot give it, before a run.
type placementChecker interface {
	CheckPlacement(placement string) error
}

// CheckPlacement refuses a placement ("" is auto) or a setting that a kind
// of s cannot run with on this machine (the cores kind: its CPU counts).
func (s Scenario) CheckPlacement(placement string) error {
	for _, k := range s.kinds() {
		if c, ok := k.(placementChecker); ok {
			if err := c.CheckPlacement(placement); err != nil {
				return err
			}
		}
	}
	return nil
}

// preparer is a kind that checks its settings before a run, and says how
// it measures in the run's notes.
type preparer interface {
	Prepare(s Scenario) (notes []string, err error)
}

// prepare checks the settings of the kinds of s, and gathers their notes.
func (s Scenario) PrepareKinds() ([]string, error) {
	var notes []string
	for _, k := range s.kinds() {
		if p, ok := k.(preparer); ok {
			n, err := p.Prepare(s)
			if err != nil {
				return nil, err
			}
			notes = append(notes, n...)
		}
	}
	return notes, nil
}

// testsLiner is a kind with words for the Tests line of its scenario's
// description: "" for none.
type testsLiner interface {
	TestsLine(s Scenario) string
}

// flagger is a kind with flags of its own on `trestle lab`, declared as
// rows (Flag).
type flagger interface {
	Flags() []Flag
}

// Flag is a flag of a kind on `trestle lab`, declared as a row, as a
// configuration key is (internal/config/keys.go): its name and help, the
// type and range of its value, which scenarios take it and what it sets.
// The core declares it, reads it, checks its range and refuses it where it
// means nothing; the kind says only what the value does (Set).
type Flag struct {
	Name  string
	Usage string
	Type  FlagType
	// Lo, Hi: the range of an Int, or of each of Ints (both 0: any).
	Lo, Hi int
	// For names the scenarios the flag is for, when a scenario without
	// the kind refuses it ("the mac-flood scenario"); "": such a scenario
	// ignores it.
	For string
	// Set sets the value (a string, int, []int or time.Duration, in
	// range) on the scenario's test of the kind (Sets makes one from a
	// function of the kind's value); it may refuse it.
	Set func(s *Scenario, v any) error
	// Absent, if set, is what a scenario with the kind does when the flag
	// is not given (given says whether another flag was).
	Absent func(s *Scenario, given func(flag string) bool) error
}

// FlagType is the type of a Flag's value.
type FlagType int

const (
	FlagString   FlagType = iota
	FlagInt               // a number in Lo..Hi
	FlagInts              // comma-separated numbers, each in Lo..Hi
	FlagDuration          // a Go duration ("2s")
	FlagFloat             // a number with a fraction ("0.5")
)

// Sets is a Flag's Set from a change of the kind's value T by the flag's
// value V (an error refuses the value).
func Sets[T Kind, V any](change func(k T, v V) (T, error)) func(s *Scenario, v any) error {
	return func(s *Scenario, v any) error {
		k, ok := TestOf[T](*s)
		if !ok {
			return nil
		}
		k, err := change(k, v.(V))
		if err != nil {
			return err
		}
		Configure(s, func(T) T { return k })
		return nil
	}
}

// DeclareFlags declares every registered kind's flags on f (a name that
// two kinds take, once, with the first one's help).
func DeclareFlags(f *pflag.FlagSet) {
	for _, k := range Kinds {
		fl, ok := k.(flagger)
		if !ok {
			continue
		}
		for _, r := range fl.Flags() {
			if f.Lookup(r.Name) != nil {
				continue
			}
			switch r.Type {
			case FlagString, FlagInts:
				f.String(r.Name, "", r.Usage)
			case FlagInt:
				f.Int(r.Name, 0, r.Usage)
			case FlagDuration:
				f.Duration(r.Name, 0, r.Usage)
			case FlagFloat:
				f.Float64(r.Name, 0, r.Usage)
			}
		}
	}
}

// value is the value of r given on f, checked against its range.
func (r Flag) value(f *pflag.FlagSet) (any, error) {
	switch r.Type {
	case FlagInt:
		n, _ := f.GetInt(r.Name)
		if (r.Lo != 0 || r.Hi != 0) && (n < r.Lo || n > r.Hi) {
			return nil, fmt.Errorf("--%s %d: a number in %d..%d", r.Name, n, r.Lo, r.Hi)
		}
		return n, nil
	case FlagInts:
		v, _ := f.GetString(r.Name)
		return ParseInts("--"+r.Name, v, r.Lo, r.Hi)
	case FlagDuration:
		return f.GetDuration(r.Name)
	case FlagFloat:
		return f.GetFloat64(r.Name)
	}
	return f.GetString(r.Name)
}

// SetFlags sets s's tests from the kinds' flags given on f, kind by kind
// in the order of Kinds, row by row; the first bad one is the error. A
// flag that several kinds take (--duration: mac-flood's and soak's) is
// set by each of s's kinds that takes it, and refused, with the scenarios
// its rows are for, only when none of s's kinds takes it.
func (s *Scenario) SetFlags(f *pflag.FlagSet) error {
	taken, forText := map[string]bool{}, map[string][]string{}
	for _, k := range Kinds {
		if fl, ok := k.(flagger); ok {
			for _, r := range fl.Flags() {
				taken[r.Name] = taken[r.Name] || s.has(k.Name())
				if r.For != "" && !slices.Contains(forText[r.Name], r.For) {
					forText[r.Name] = append(forText[r.Name], r.For)
				}
			}
		}
	}
	for _, k := range Kinds {
		fl, ok := k.(flagger)
		if !ok {
			continue
		}
		for _, r := range fl.Flags() {
			has := s.has(k.Name())
			if !f.Changed(r.Name) {
				if has && r.Absent != nil {
					if err := r.Absent(s, f.Changed); err != nil {
						return err
					}
				}
				continue
			}
			if !has {
				if !taken[r.Name] && len(forText[r.Name]) > 0 {
					return fmt.Errorf("--%s is for %s, not %s", r.Name, strings.Join(forText[r.Name], " or "), s.Name)
				}
				continue
			}
			v, err := r.value(f)
			if err != nil {
				return err
			}
			if err := r.Set(s, v); err != nil {
				return err
			}
		}
	}
	return nil
}

// SplitList is a comma-separated list's items, trimmed, the empty ones
// left out.
func SplitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// ParseInts reads a flag's comma-separated numbers, each in lo..hi.
func ParseInts(flag, s string, lo, hi int) ([]int, error) {
	var out []int
	for _, p := range SplitList(s) {
		n, err := strconv.Atoi(p)
		if err != nil || n < lo || n > hi {
			return nil, fmt.Errorf("%s %q: %q is not a number in %d..%d", flag, s, p, lo, hi)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: empty", flag)
	}
	return out, nil
}

// presetter is a kind with a preset scenario of its own.
type presetter interface {
	Preset() Scenario
}

// Kinds are the test kinds, in the order a unit runs them and the report
// places their sections: each a package of internal/lab/kinds, registered
// (Register). cmd/trestle and the tests import internal/lab/kinds/all, so
// that every kind is registered; the core imports none.
var Kinds []Kind

// registered are the kinds of their own packages, in the order they
// registered, each with the kind it runs after.
var registered []placement

type placement struct {
	k     Kind
	after string
}

// Register adds a kind of its own package to Kinds, right after the kind
// named after (the one it runs after; its section goes after that one's;
// "": the first), and its preset, if it has one, to Scenarios. A kind's
// package calls it from its init: adding a kind is its folder and its line
// in internal/lab/kinds/all. Until the kind it runs after registers, it
// runs last: a kind's own tests, which register it alone, run it. A kind
// registered twice, or after a kind never registered, is a mistake in the
// code (TestKindsRegistry).
func Register(k Kind, after string) {
	if KindOf(k.Name()) != nil {
		panic(fmt.Sprintf("lab: kind %q registered twice", k.Name()))
	}
	registered = append(registered, placement{k, after})
	Kinds = placed(nil, registered)
	if ps, ok := k.(presetter); ok {
		sc := ps.Preset()
		Scenarios[sc.Name] = sc
	}
}

// placed is kinds with each of regs right after the kind it runs after,
// once that one is there; those whose kind is not (yet) go last, in the
// order they registered.
func placed(kinds []Kind, regs []placement) []Kind {
	left := slices.Clone(regs)
	for moved := true; moved; {
		moved = false
		for i, p := range left {
			at := slices.IndexFunc(kinds, func(k Kind) bool { return k.Name() == p.after })
			if at < 0 && p.after != "" {
				continue
			}
			kinds = slices.Insert(kinds, at+1, p.k)
			left = slices.Delete(left, i, i+1)
			moved = true
			break
		}
	}
	for _, p := range left {
		kinds = append(kinds, p.k)
	}
	return kinds
}

// Unplaced are the kinds registered after a kind that never was (none:
// every kind is where it runs).
func Unplaced() []string {
	var out []string
	for _, p := range registered {
		if p.after != "" && KindOf(p.after) == nil {
			out = append(out, p.k.Name()+" after "+p.after)
		}
	}
	return out
}

// KindOf is the registered kind of a test name (nil: none).
func KindOf(test string) Kind {
	for _, k := range Kinds {
		if k.Name() == test {
			return k
		}
	}
	return nil
}

// TestsOf are the registered kinds of names with no settings of their own:
// tests for a scenario whose kinds need none (a kind with settings is
// written as its value, tcp.Kind{Streams: ...}). A name not registered is
// a mistake in the code.
func TestsOf(names ...string) []Kind {
	out := make([]Kind, len(names))
	for i, n := range names {
		if out[i] = KindOf(n); out[i] == nil {
			panic(fmt.Sprintf("lab: no test kind %q", n))
		}
	}
	return out
}

// kinds are the tests that s runs, each with its settings, in the order
// of Kinds.
func (s Scenario) kinds() []Kind {
	var out []Kind
	for _, k := range Kinds {
		for _, t := range s.Tests {
			if t.Name() == k.Name() {
				out = append(out, t)
				break
			}
		}
	}
	return out
}

// TestOf is s's test of kind T, if it has one.
func TestOf[T Kind](s Scenario) (T, bool) {
	for _, t := range s.Tests {
		if k, ok := t.(T); ok {
			return k, true
		}
	}
	var zero T
	return zero, false
}

// Configure changes the settings of s's test of kind T with f, if s has
// one (the command line's flags: --streams on a tcp.Kind). s's tests are
// copied first: a preset's stay as they are.
func Configure[T Kind](s *Scenario, f func(T) T) {
	s.Tests = slices.Clone(s.Tests)
	for i, t := range s.Tests {
		if k, ok := t.(T); ok {
			s.Tests[i] = f(k)
		}
	}
}

// WithoutTest is s without its test of kind name.
func (s *Scenario) WithoutTest(name string) {
	s.Tests = slices.DeleteFunc(slices.Clone(s.Tests), func(t Kind) bool { return t.Name() == name })
}

// phase is the kinds of s that run in phase p, in the order of Kinds.
func (s Scenario) phase(p Phase) []Kind {
	var out []Kind
	for _, k := range s.kinds() {
		if k.Needs(s).Phase == p {
			out = append(out, k)
		}
	}
	return out
}

// runPhase runs the kinds of phase p, skipping those that need a learning
// bridge on a DUT that does not learn.
func (u *UnitRun) runPhase(ctx context.Context, p Phase) error {
	for _, k := range u.S.phase(p) {
		if k.Needs(u.S).Learning && !u.Rig.DUT.Learns() {
			continue
		}
		if err := k.Run(ctx, u); err != nil {
			return err
		}
	}
	return nil
}

// needs is what the registered kinds of s need together.
func (s Scenario) needs() Needs {
	var n Needs
	for _, k := range s.kinds() {
		n = n.merge(k.Needs(s))
	}
	return n
}

// hasPacketTests says whether s has a kind that runs with the generator
// and sinks up.
func (s Scenario) HasPacketTests() bool {
	return len(s.phase(PerSize))+len(s.phase(PerUnit)) > 0
}

// reporters are the kinds of the run that have a report section, in the
// order of Kinds: the order of the report's sections.
func reporters(run *Run) []Reporter {
	var out []Reporter
	for _, k := range Kinds {
		if r, ok := k.(Reporter); ok && run.hasTest(k.Name()) {
			out = append(out, r)
		}
	}
	return out
}

// Sections are the report sections of the run's kinds that have one, in
// the order of Kinds, for the report to add (without the Markdown of a
// ChartReporter: MarkdownSections has it).
func Sections(run *Run) (terminal, markdown []string) {
	for _, r := range reporters(run) {
		t, m := r.Section(run)
		if t != "" {
			terminal = append(terminal, t)
		}
		if m != "" {
			markdown = append(markdown, m)
		}
	}
	return terminal, markdown
}

// MarkdownSections are the sections of report.md of the run's kinds that
// have one, in the order of Kinds, the charts of each written into dir.
func MarkdownSections(dir string, run *Run) ([]string, error) {
	var out []string
	for _, r := range reporters(run) {
		var m string
		if c, ok := r.(ChartReporter); ok {
			var err error
			if m, err = c.SectionIn(dir, run); err != nil {
				return out, err
			}
		} else {
			_, m = r.Section(run)
		}
		if m != "" {
			out = append(out, m)
		}
	}
	return out, nil
}

// OwnSection says whether results of test go to a kind's own report
// section rather than the tables of medians.
func OwnSection(test string) bool {
	for _, k := range Kinds {
		if _, ok := k.(Reporter); !ok {
			continue
		}
		if k.Name() == test {
			return true
		}
		if t, ok := k.(twinned); ok && slices.Contains(t.Twins(), test) {
			return true
		}
	}
	return false
}

// hasTest says whether the run has a result of test.
func (run *Run) hasTest(test string) bool {
	for _, r := range run.Results {
		if r.Test == test {
			return true
		}
	}
	return false
}

// registeredPresets adds the kinds' own presets to the scenarios.
func registeredPresets(into map[string]Scenario) map[string]Scenario {
	for _, k := range Kinds {
		if p, ok := k.(presetter); ok {
			s := p.Preset()
			into[s.Name] = s
		}
	}
	return into
}
