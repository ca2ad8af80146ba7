// Package portscale is the lab's port-scale kind: throughput against the
// number of ports of one bridge.
package portscale

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/trestle/trestle/internal/lab"
	"github.com/trestle/trestle/internal/lab/report/svg"
)

func init() { lab.Register(Kind{}, lab.TestIdle) }

// TestPortScale: 64-byte throughput against the number of ports of one
// bridge (issue 28's lab): known unicast h1 -> h2 and broadcast from h1,
// on a bridge of N ports for each N of its Ports. Each count is a
// topology of its own, built, measured and removed in turn: N hosts, each
// a namespace whose veth's other end is a port of the bridge; h2 to h4
// have sinks, the others are idle ports with their peers up. A count the
// DUT cannot take (more ports than it allows a bridge) is recorded as
// such, with why.
const TestPortScale = lab.TestPortScale

// PortScaleDefault are the port counts.
var PortScaleDefault = []int{2, 16, 64, 256, 1024}

// portScaleSinks is how many hosts (h2 on) count the frames: a broadcast
// is counted at these, and is due at every other port as well.
const portScaleSinks = 3

// Kind is the port-scale kind: Ports are the port counts
// (nil: PortScaleDefault).
type Kind struct {
	Ports []int
}

// Record is a port-scale result's record (Result.Record).
type Record struct {
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

func (p Kind) counts() []int {
	if len(p.Ports) == 0 {
		return PortScaleDefault
	}
	return p.Ports
}

func (Kind) Name() string { return TestPortScale }

// Needs: it builds its own topologies, after the unit's own generator and
// sinks have stopped (the Stack phase), on a learning bridge.
func (Kind) Needs(lab.Scenario) lab.Needs { return lab.Needs{Phase: lab.Stack, Learning: true} }

func (p Kind) Estimate(s lab.Scenario, _ lab.Spec) time.Duration {
	var d time.Duration
	tm := s.Timing.NDROnly()
	for _, n := range p.counts() {
		// Two searches and the set-up of n namespaces.
		d += 2*(3*lab.TrialTime(tm)+tm.Search.Confirm) + time.Duration(n)*20*time.Millisecond
	}
	return d
}

func (p Kind) Describe(lab.Scenario) string {
	return fmt.Sprintf("Ports:    %s ports on one bridge, %d of them with sinks, the rest idle", joinInts(p.counts()), portScaleSinks)
}

func (p Kind) Prepare(s lab.Scenario) ([]string, error) {
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

func (Kind) Section(run *lab.Run) (terminal, md string) {
	return portScaleSection(portScaleRows(run))
}

// Flags: --ports, the port counts; a scenario without a port-scale test
// refuses it.
func (Kind) Flags() []lab.Flag {
	return []lab.Flag{{
		Name: "ports", Type: lab.FlagInts, Lo: 2, Hi: 65535, For: "the port-scale scenario",
		Usage: "port-scale: the port counts of the bridge, comma-separated (default " + joinInts(PortScaleDefault) + ";\na count above what a DUT takes is listed, not run)",
		Set: lab.Sets(func(p Kind, n []int) (Kind, error) {
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

// takesPorts says whether dut takes n ports in one bridge: "" if it does,
// else why not (a DUT that says nothing of it takes them).
func takesPorts(ctx context.Context, dut lab.Spec, env *lab.Env, n int) (string, error) {
	d, err := dut.NewDUT()
	if err != nil {
		return "", err
	}
	if pt, ok := d.(lab.PortTaker); ok {
		return pt.TakesPorts(ctx, env, n)
	}
	return "", nil
}

func (p Kind) Run(ctx context.Context, u *lab.UnitRun) error {
	v, err := lab.ParseSpec(u.Base.DUT)
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
				if err := r.SetRecord(Record{Ports: n, Traffic: traffic, Refused: why}); err != nil {
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
func (p Kind) runCount(ctx context.Context, u *lab.UnitRun, v lab.Spec, n int) (err error) {
	u.Status(fmt.Sprintf("port-scale: building a bridge of %d ports", n))
	nt := lab.NewNet(fmt.Sprintf("ps%d", n))
	defer func() {
		if cerr := nt.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	t, err := lab.Build(ctx, nt, lab.Shape{Hosts: n, Chain: 1})
	if err != nil {
		return err
	}
	d, err := v.NewDUT()
	if err != nil {
		return err
	}
	env := *u.Rig.Env
	rig, err := lab.NewRig(ctx, t, d, u.Rig.Place, &env)
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
	progress := func(what string) func(lab.SearchTrial) {
		trial = 0
		return func(st lab.SearchTrial) {
			trial++
			u.Status(fmt.Sprintf("port-scale %d ports, %s, trial %d: %s offered, loss %.3f%%", n, what, trial, lab.PPSText(st.Offered), 100*st.Loss))
		}
	}
	sr, trials, err := rig.Throughput(ctx, "64", tm, 1, progress("unicast"))
	if err != nil {
		return err
	}
	if err := p.add(u, n, "unicast", 1, sr, trials); err != nil {
		return err
	}
	mix, err := lab.FrameSize("64").Mix()
	if err != nil {
		return err
	}
	bcast := net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	spec := lab.TrialSpec{From: 0, To: sinks, Mix: mix, DstMAC: bcast, Learn: true, Settle: tm.Settle, Drain: tm.Drain}
	sr, trials, err = rig.SearchTrials(ctx, spec, tm, progress("broadcast"))
	if err != nil {
		return err
	}
	return p.add(u, n, "broadcast", len(sinks), sr, trials)
}

func (Kind) add(u *lab.UnitRun, n int, traffic string, sinks int, sr lab.SearchResult, trials []lab.TrialResult) error {
	r := lab.ResultOfSearch(u.Base, TestPortScale, portScaleParam(n, traffic), sr, trials)
	if err := r.SetRecord(Record{Ports: n, Traffic: traffic, Sinks: sinks, Rate: sr.Throughput}); err != nil {
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
func portScaleRows(run *lab.Run) []portScaleRow {
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
		var rec Record
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
				row.Unicast = lab.Median(uni[k])
			}
			if len(bc[k]) > 0 {
				row.Broadcast = lab.Median(bc[k])
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
			reps += fmt.Sprintf(" (%d failed: %s)", len(r.Errors), lab.FirstLine(r.Errors[0]))
		}
		vsLinux := "-"
		if r.DUT != "linux-bridge" {
			vsLinux = ratio(r.Broadcast, linux[r.Ports])
		}
		rate := func(v float64) string {
			if r.Reps == 0 {
				return "-"
			}
			return lab.PPSText(v)
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
			goals = append(goals, fmt.Sprintf("%s: unicast at %d ports %.2fx of %d ports (goal: within 5%%): %s", d, last.Ports, last.Unicast/f.Unicast, f.Ports, lab.PassWord(last.Unicast >= 0.95*f.Unicast)))
		}
		if bcSeen {
			goals = append(goals, fmt.Sprintf("%s: broadcast no worse than the Linux bridge's at every count both ran: %s", d, lab.PassWord(bcOK)))
		}
	}
	var cellRows [][]string
	for _, r := range rows {
		cellRows = append(cellRows, cells(r))
	}
	return lab.TableSection("port-scale, 64-byte zero-loss throughput against the ports of the bridge (medians over the repetitions; x first: against the DUT's smallest count run):",
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
func (Kind) SectionIn(dir string, run *lab.Run) (string, error) {
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
	lab.EmbedCharts(&b, charts)
	return b.String(), nil
}

func portScaleCharts(dir string, rows []portScaleRow) ([]lab.Chart, error) {
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
	var out []lab.Chart
	for _, c := range []struct {
		file string
		c    svg.LineChart
	}{{"port-scale-unicast.svg", uni}, {"port-scale-broadcast.svg", bc}, {"port-scale-copies.svg", copies}} {
		if err := lab.SaveChart(dir, c.file, c.c.Title, c.c, &out); err != nil {
			return out, err
		}
	}
	return out, nil
}
