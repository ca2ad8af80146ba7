package lab

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/trestle/trestle/internal/lab/report/svg"
)

// TestPortScale: 64-byte throughput against the number of ports of one
// bridge (issue 28's lab): known unicast h1 -> h2 and broadcast from h1,
// on a bridge of N ports for each N of its Ports. Each count is a
// topology of its own, built, measured and removed in turn: N hosts, each
// a namespace whose veth's other end is a port of the bridge; h2 to h4
// have sinks, the others are idle ports with their peers up. A count the
// DUT cannot take (more ports than it allows a bridge) is recorded as
// such, with why.
const TestPortScale = "port-scale"

// PortScaleDefault are the port counts.
var PortScaleDefault = []int{2, 16, 64, 256, 1024}

// portScaleSinks is how many hosts (h2 on) count the frames: a broadcast
// is counted at these, and is due at every other port as well.
const portScaleSinks = 3

// PortScaleTest is the port-scale kind: Ports are the port counts
// (nil: PortScaleDefault).
type PortScaleTest struct {
	Ports []int
}

// PortScaleRecord is a port-scale result's record (Result.Record).
type PortScaleRecord struct {
	Ports int `json:"ports"`
	// Traffic is "unicast" (h1 -> h2, learned) or "broadcast" (from h1,
	// due at every other port).
	Traffic string `json:"traffic"`
	// Sinks is how many ports counted the frames; Rate the zero-loss
	// rate found, frames per second sent by h1 (0: none found).
	Sinks int     `json:"sinks,omitempty"`
	Rate  float64 `json:"rate"`
	// Refused says why the DUT could not take this count ("": it did).
	Refused string `json:"refused,omitempty"`
}

func (p PortScaleTest) counts() []int {
	if len(p.Ports) == 0 {
		return PortScaleDefault
	}
	return p.Ports
}

func (PortScaleTest) Name() string { return TestPortScale }

// Needs: it builds its own topologies, after the unit's own generator and
// sinks have stopped (the Stack phase), on a learning bridge.
func (PortScaleTest) Needs(Scenario) Needs { return Needs{Phase: Stack, Learning: true} }

func (p PortScaleTest) Estimate(s Scenario, _ Spec) time.Duration {
	var d time.Duration
	tm := s.Timing.NDROnly()
	for _, n := range p.counts() {
		// Two searches and the set-up of n namespaces.
		d += 2*(3*TrialTime(tm)+tm.Search.Confirm) + time.Duration(n)*20*time.Millisecond
	}
	return d
}

func (p PortScaleTest) Describe(Scenario) string {
	return fmt.Sprintf("Ports:    %s ports on one bridge, %d of them with sinks, the rest idle", joinInts(p.counts()), portScaleSinks)
}

func (PortScaleTest) Preset() Scenario { return portScalePreset }

func (p PortScaleTest) Prepare(s Scenario) ([]string, error) {
	for _, n := range p.counts() {
		if n < 2 {
			return nil, fmt.Errorf("port-scale: %d ports: a bridge needs at least 2", n)
		}
	}
	for _, d := range s.DUTs {
		if d.Direct() {
			return nil, fmt.Errorf("port-scale: %s has no bridge to give ports to", d.Text)
		}
	}
	return []string{fmt.Sprintf("port-scale: each port count a topology of its own (N hosts, each a namespace with a veth to a port of the bridge), built after the previous one is removed; "+
		"64-byte zero-loss throughput of known unicast h1 -> h2 and of broadcast from h1, counted at h2..h%d (every other port is due it too); a count above what a DUT takes in a bridge is listed, not run", portScaleSinks+1)}, nil
}

func (PortScaleTest) Section(run *Run) (terminal, md string) {
	return portScaleSection(portScaleRows(run))
}

// Flags: --ports, the port counts; a scenario without a port-scale test
// refuses it.
func (PortScaleTest) Flags() []Flag {
	return []Flag{{
		Name: "ports", Type: FlagInts, Lo: 2, Hi: 65535, For: "the port-scale scenario",
		Usage: "port-scale: the port counts of the bridge, comma-separated (default " + joinInts(PortScaleDefault) + ";\na count above what a DUT takes is listed, not run)",
		Set: Sets(func(p PortScaleTest, n []int) (PortScaleTest, error) {
			for i, c := range n {
				if slices.Contains(n[:i], c) {
					return p, fmt.Errorf("--ports %q: %d ports given twice", joinInts(n), c)
				}
			}
			p.Ports = n
			return p, nil
		}),
	}}
}

var portScalePreset = Scenario{
	Name: "port-scale", Title: "Port scale: throughput against the number of ports of a bridge",
	About: "one bridge with 2, 16, 64, 256 and 1024 ports (--ports; counts above what a DUT takes are listed, not run), 3 of them with sinks: 64-byte zero-loss throughput of known unicast h1 -> h2 and of broadcast from h1, " +
		"each against the 2-port figure; then pod churn: 100 CNI ADDs then 100 DELs through cnitool with host-local, the trestle plugin against the bridge plugin, each timed (median, p99); " +
		"trestle in xdp and default mode, the Linux bridge; goals: unicast at the largest count within 5% of 2 ports, broadcast no worse than the Linux bridge's, a trestle ADD's and DEL's median and p99 each at most 1.2x the bridge plugin's",
	DUTs:  MustSpecs("linux-bridge", "trestle:xdp", "trestle"),
	Hosts: 2, Chain: []int{1}, Sizes: []FrameSize{"64"}, Tests: []Kind{PortScaleTest{}, PodChurnTest{Pods: 100}}, Reps: 3, Timing: DefaultTiming,
}

// linuxBridgeMaxPorts is what the kernel's bridge takes: BR_MAX_PORTS
// (net/bridge/br_private.h) is 1024, but port number 0 is never given out
// (br_if.c, find_portno), so the 1024th port is refused (ENOSPC,
// "Exchange full", as seen on 6.18).
const linuxBridgeMaxPorts = 1<<10 - 1

// takesPorts says whether dut takes n ports in one bridge: "" if it does,
// else why not. trestle is asked itself: `trestle check` of the config
// its DUT would run with n ports (the lab does not read the switch's
// limits from its code); the Linux bridge's limit is the kernel's.
func takesPorts(ctx context.Context, dut Spec, env *Env, n int) (refused string, err error) {
	switch dut.Kind {
	case "linux-bridge":
		if n > linuxBridgeMaxPorts {
			return fmt.Sprintf("the Linux bridge takes at most %d ports (BR_MAX_PORTS 1024, of which port number 0 is never used)", linuxBridgeMaxPorts), nil
		}
	case "trestle":
		d, err := dut.NewDUT()
		if err != nil {
			return "", err
		}
		td, ok := d.(*trestleDUT)
		if !ok {
			return "", fmt.Errorf("port-scale: %s is not a trestle DUT", dut.Text)
		}
		bin := cmp.Or(td.bin, env.Trestle)
		b := Bridge{Name: "br1"}
		for i := 1; i <= n; i++ {
			b.Ports = append(b.Ports, fmt.Sprintf("p%d", i))
		}
		cfg := filepath.Join(env.WorkDir, fmt.Sprintf("port-scale-%d.toml", n))
		text := trestleConfig(&Topo{Bridges: []Bridge{b}}, env, td.mode, filepath.Join(env.WorkDir, "port-scale.sock"))
		if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
			return "", err
		}
		defer os.Remove(cfg)
		out, err := exec.CommandContext(ctx, bin, "check", cfg).CombinedOutput()
		if err == nil {
			return "", nil
		}
		if _, ok := err.(*exec.ExitError); !ok {
			return "", fmt.Errorf("port-scale: trestle check: %w", err)
		}
		// The check's first complaint, without the file, the line and the
		// key ("trestle: FILE:LINE: bridge[0].port[64]: too many ...").
		why := FirstLine(strings.TrimSpace(string(out)))
		if _, rest, ok := strings.Cut(why, cfg+":"); ok {
			if parts := strings.SplitN(rest, ": ", 3); len(parts) == 3 {
				why = parts[2]
			}
		}
		return "trestle check: " + why, nil
	}
	return "", nil
}

func (p PortScaleTest) Run(ctx context.Context, u *UnitRun) error {
	v, err := ParseSpec(u.Base.DUT)
	if err != nil {
		return err
	}
	if v.Direct() {
		return nil
	}
	for _, n := range p.counts() {
		if err := ctx.Err(); err != nil {
			return err
		}
		why, err := takesPorts(ctx, v, u.Rig.Env, n)
		if err != nil {
			return err
		}
		if why != "" {
			for _, traffic := range []string{"unicast", "broadcast"} {
				r := u.Base
				r.Test, r.Param, r.Unit, r.Error = TestPortScale, portScaleParam(n, traffic), "frames/s", why
				if err := r.SetRecord(PortScaleRecord{Ports: n, Traffic: traffic, Refused: why}); err != nil {
					return err
				}
				u.Add(r)
			}
			continue
		}
		if err := p.runCount(ctx, u, v, n); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			r := u.Base
			r.Test, r.Param, r.Unit, r.Error = TestPortScale, portScaleParam(n, "unicast"), "frames/s", err.Error()
			u.Add(r)
		}
	}
	return ctx.Err()
}

func portScaleParam(n int, traffic string) string { return fmt.Sprintf("%d ports %s", n, traffic) }

// runCount builds a bridge of n ports with v, measures it and removes it.
func (p PortScaleTest) runCount(ctx context.Context, u *UnitRun, v Spec, n int) (err error) {
	u.Status(fmt.Sprintf("port-scale: building a bridge of %d ports", n))
	nt := NewNet(fmt.Sprintf("ps%d", n))
	defer func() {
		if cerr := nt.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	t, err := Build(ctx, nt, Shape{Hosts: n, Chain: 1})
	if err != nil {
		return err
	}
	d, err := v.NewDUT()
	if err != nil {
		return err
	}
	env := *u.Rig.Env
	rig, err := NewRig(ctx, t, d, u.Rig.Place, &env)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := rig.Close(context.Background()); cerr != nil && err == nil {
			err = cerr
		}
	}()
	var sinks []int
	for i := 1; i < n && i <= portScaleSinks; i++ {
		sinks = append(sinks, i)
	}
	if err := rig.StartPackets(ctx, sinks); err != nil {
		return err
	}
	defer rig.StopPackets()
	tm := u.S.Timing.NDROnly()
	trial := 0
	progress := func(what string) func(SearchTrial) {
		trial = 0
		return func(st SearchTrial) {
			trial++
			u.Status(fmt.Sprintf("port-scale %d ports, %s, trial %d: %s offered, loss %.3f%%", n, what, trial, PPSText(st.Offered), 100*st.Loss))
		}
	}
	sr, trials, err := rig.Throughput(ctx, "64", tm, 1, progress("unicast"))
	if err != nil {
		return err
	}
	if err := p.add(u, n, "unicast", 1, sr, trials); err != nil {
		return err
	}
	mix, err := FrameSize("64").Mix()
	if err != nil {
		return err
	}
	bcast := net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	spec := TrialSpec{From: 0, To: sinks, Mix: mix, DstMAC: bcast, Learn: true, Settle: tm.Settle, Drain: tm.Drain}
	sr, trials, err = rig.SearchTrials(ctx, spec, tm, progress("broadcast"))
	if err != nil {
		return err
	}
	return p.add(u, n, "broadcast", len(sinks), sr, trials)
}

func (PortScaleTest) add(u *UnitRun, n int, traffic string, sinks int, sr SearchResult, trials []TrialResult) error {
	r := ResultOfSearch(u.Base, TestPortScale, portScaleParam(n, traffic), sr, trials)
	if err := r.SetRecord(PortScaleRecord{Ports: n, Traffic: traffic, Sinks: sinks, Rate: sr.Throughput}); err != nil {
		return err
	}
	u.Add(r)
	return nil
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ",")
}

// portScaleRow is one DUT at one port count: the medians over its
// repetitions.
type portScaleRow struct {
	DUT                string
	Ports              int
	Unicast, Broadcast float64 // frames/s
	Reps               int
	Refused            string
	Errors             []string
}

// portScaleRows are the run's port-scale results by DUT (the run's order)
// and port count (ascending).
func portScaleRows(run *Run) []portScaleRow {
	type key struct {
		dut   string
		ports int
	}
	uni, bc := map[key][]float64{}, map[key][]float64{}
	rows := map[key]*portScaleRow{}
	for _, r := range run.Results {
		if r.Test != TestPortScale {
			continue
		}
		var rec PortScaleRecord
		if err := r.RecordOf(&rec); err != nil {
			if r.Error == "" {
				continue
			}
			// A count that failed before it had a record: its ports are
			// the first word of its Param.
			if _, serr := fmt.Sscanf(r.Param, "%d", &rec.Ports); serr != nil {
				continue
			}
		}
		k := key{r.DUT, rec.Ports}
		row := rows[k]
		if row == nil {
			row = &portScaleRow{DUT: r.DUT, Ports: rec.Ports}
			rows[k] = row
		}
		switch {
		case rec.Refused != "":
			row.Refused = rec.Refused
		case r.Error != "":
			row.Errors = append(row.Errors, r.Error)
		case rec.Traffic == "unicast":
			uni[k] = append(uni[k], rec.Rate)
		case rec.Traffic == "broadcast":
			bc[k] = append(bc[k], rec.Rate)
		}
	}
	var out []portScaleRow
	for _, d := range run.DUTs {
		var ks []key
		for k := range rows {
			if k.dut == d {
				ks = append(ks, k)
			}
		}
		slices.SortFunc(ks, func(a, b key) int { return a.ports - b.ports })
		for _, k := range ks {
			row := rows[k]
			if len(uni[k]) > 0 {
				row.Unicast = Median(uni[k])
			}
			if len(bc[k]) > 0 {
				row.Broadcast = Median(bc[k])
			}
			row.Reps = max(len(uni[k]), len(bc[k]))
			out = append(out, *row)
		}
	}
	return out
}

// portScaleSection is the port-scale table, for the terminal and for
// report.md: each count's rates, their ratio to the DUT's smallest count
// (the 2-port figure, where it ran), and broadcast against the Linux
// bridge's at the same count; then the goals.
func portScaleSection(rows []portScaleRow) (terminal, md string) {
	if len(rows) == 0 {
		return "", ""
	}
	first := map[string]portScaleRow{}
	linux := map[int]float64{}
	for _, r := range rows {
		if _, ok := first[r.DUT]; !ok && r.Refused == "" && r.Reps > 0 {
			first[r.DUT] = r
		}
		if r.DUT == "linux-bridge" && r.Reps > 0 {
			linux[r.Ports] = r.Broadcast
		}
	}
	ratio := func(v, of float64) string {
		if v <= 0 || of <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.2fx", v/of)
	}
	head := []string{"DUT", "ports", "unicast", "x first", "broadcast", "x first", "broadcast x linux-bridge", "repetitions"}
	cells := func(r portScaleRow) []string {
		if r.Refused != "" {
			return []string{r.DUT, fmt.Sprint(r.Ports), "-", "-", "-", "-", "-", "0 (not run: " + r.Refused + ")"}
		}
		f := first[r.DUT]
		reps := fmt.Sprint(r.Reps)
		if len(r.Errors) > 0 {
			reps += fmt.Sprintf(" (%d failed: %s)", len(r.Errors), FirstLine(r.Errors[0]))
		}
		vsLinux := "-"
		if r.DUT != "linux-bridge" {
			vsLinux = ratio(r.Broadcast, linux[r.Ports])
		}
		rate := func(v float64) string {
			if r.Reps == 0 {
				return "-"
			}
			return PPSText(v)
		}
		return []string{r.DUT, fmt.Sprint(r.Ports), rate(r.Unicast), ratio(r.Unicast, f.Unicast), rate(r.Broadcast), ratio(r.Broadcast, f.Broadcast), vsLinux, reps}
	}
	var goals []string
	for _, d := range orderedDUTs(rows) {
		f, ok := first[d]
		if !ok {
			continue
		}
		var last portScaleRow
		var bcOK, bcSeen = true, false
		for _, r := range rows {
			if r.DUT != d || r.Refused != "" || r.Reps == 0 {
				continue
			}
			last = r
			if l, ok := linux[r.Ports]; ok && d != "linux-bridge" && l > 0 {
				bcSeen = true
				bcOK = bcOK && r.Broadcast >= l
			}
		}
		if last.Ports > f.Ports && f.Unicast > 0 {
			goals = append(goals, fmt.Sprintf("%s: unicast at %d ports %.2fx of %d ports (goal: within 5%%): %s", d, last.Ports, last.Unicast/f.Unicast, f.Ports, PassWord(last.Unicast >= 0.95*f.Unicast)))
		}
		if bcSeen {
			goals = append(goals, fmt.Sprintf("%s: broadcast no worse than the Linux bridge's at every count both ran: %s", d, PassWord(bcOK)))
		}
	}
	var cellRows [][]string
	for _, r := range rows {
		cellRows = append(cellRows, cells(r))
	}
	return TableSection("port-scale, 64-byte zero-loss throughput against the ports of the bridge (medians over the repetitions; x first: against the DUT's smallest count run):",
		"Port scale", "One bridge with N ports (each a veth to a namespace of its own; h2 to h4 count the frames, the other ports are idle with their peers up): 64-byte zero-loss throughput of known unicast h1 -> h2 and of broadcast from h1 (due at every other port), frames per second sent; each against the DUT's smallest count run and broadcast against the Linux bridge's at the same count. Medians over the repetitions.",
		head, cellRows, goals)
}

func orderedDUTs(rows []portScaleRow) []string {
	var out []string
	for _, r := range rows {
		if !slices.Contains(out, r.DUT) {
			out = append(out, r.DUT)
		}
	}
	return out
}

// SectionIn is the port-scale section of report.md with its charts
// (ChartReporter): unicast and broadcast frames a second against the
// ports of the bridge, and the copies a broadcast makes a second (its
// rate times the ports it reaches), which says what each copy costs.
func (PortScaleTest) SectionIn(dir string, run *Run) (string, error) {
	rows := portScaleRows(run)
	_, md := portScaleSection(rows)
	if md == "" {
		return "", nil
	}
	charts, err := portScaleCharts(dir, rows)
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	b.WriteString(md)
	EmbedCharts(&b, charts)
	return b.String(), nil
}

func portScaleCharts(dir string, rows []portScaleRow) ([]Chart, error) {
	var ticks []float64
	for _, r := range rows {
		if !slices.Contains(ticks, float64(r.Ports)) {
			ticks = append(ticks, float64(r.Ports))
		}
	}
	slices.Sort(ticks)
	const x = "ports of the bridge"
	uni := svg.LineChart{Title: "Port scale: known unicast against the ports of the bridge", XLabel: x, YLabel: "frames/s",
		XTicks: ticks, LogX: true, XUnit: svg.Plain}
	bc := svg.LineChart{Title: "Port scale: broadcast against the ports of the bridge", XLabel: x, YLabel: "frames/s",
		XTicks: ticks, LogX: true, LogY: true, XUnit: svg.Plain}
	copies := svg.LineChart{Title: "Port scale: a broadcast's copies a second (rate x ports reached)", XLabel: x, YLabel: "copies/s",
		XTicks: ticks, LogX: true, XUnit: svg.Plain}
	for _, d := range orderedDUTs(rows) {
		su, sb, sc := svg.Series{Name: d}, svg.Series{Name: d}, svg.Series{Name: d}
		for _, r := range rows {
			if r.DUT != d || r.Refused != "" || r.Reps == 0 {
				continue
			}
			if r.Unicast > 0 {
				su.Points = append(su.Points, svg.Point{X: float64(r.Ports), Y: r.Unicast})
			}
			if r.Broadcast > 0 {
				sb.Points = append(sb.Points, svg.Point{X: float64(r.Ports), Y: r.Broadcast})
				sc.Points = append(sc.Points, svg.Point{X: float64(r.Ports), Y: r.Broadcast * float64(r.Ports-1)})
			}
		}
		uni.Series = append(uni.Series, su)
		bc.Series = append(bc.Series, sb)
		copies.Series = append(copies.Series, sc)
	}
	var out []Chart
	for _, c := range []struct {
		file string
		c    svg.LineChart
	}{{"port-scale-unicast.svg", uni}, {"port-scale-broadcast.svg", bc}, {"port-scale-copies.svg", copies}} {
		if err := SaveChart(dir, c.file, c.c.Title, c.c, &out); err != nil {
			return out, err
		}
	}
	return out, nil
}
