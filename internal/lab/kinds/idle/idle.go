// Package idle is the lab's idle kind: what a DUT costs while it forwards
// nothing (see TestIdle).
package idle

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/trestle/trestle/internal/lab"
)

func init() { lab.Register(Kind{}, lab.TestLearn) }

// TestIdle: what a DUT costs while it forwards nothing, set up and
// waiting: its daemon's CPU time and resident memory over idleWindow, and
// every CPU's busy share meanwhile. A bridge whose datapath polls (Open
// vSwitch's userspace datapath: its PMD thread spins on its ports) takes a
// core whether frames come or not; one driven by the kernel's events (the
// Linux bridge, trestle's eBPF programs) takes nothing until a frame comes,
// and its daemon only what its timers do. The benchmarks' other figures
// are all under load; this is the cost of being there.
const TestIdle = lab.TestIdle

// idleSettle lets the set-up's own work (a daemon's start, the first
// learning frames) end before the window; idleWindow is long enough for
// the CPU times' 10 ms ticks to resolve half a percent of a CPU.
const (
	idleSettle = time.Second
	idleWindow = 3 * time.Second
)

// IdleRecord is an idle result's record (Result.Record).
type IdleRecord struct {
	Seconds float64 `json:"seconds"`
	// Daemon is the process measured ("" with none: the kernel's bridge,
	// the straight path); DaemonCPU its CPU time over the window, as a
	// share of one CPU (1 is a whole CPU); DaemonRSSKiB its VmRSS after.
	Daemon       string  `json:"daemon,omitempty"`
	DaemonCPU    float64 `json:"daemon_cpu"`
	DaemonRSSKiB uint64  `json:"daemon_rss_kib,omitempty"`
	// CPUBusy is every CPU's busy share over the window, whoever used it
	// (on a shared machine, others' work too).
	CPUBusy []float64 `json:"cpu_busy"`
}

type Kind struct{}

func (Kind) Name() string                                  { return TestIdle }
func (Kind) Needs(lab.Scenario) lab.Needs                  { return lab.Needs{Direct: true} }
func (Kind) Estimate(lab.Scenario, lab.Spec) time.Duration { return idleSettle + idleWindow }
func (Kind) Describe(lab.Scenario) string {
	return fmt.Sprintf("Idle:     %v with no traffic, after %v to settle", idleWindow, idleSettle)
}
func (Kind) Preset() lab.Scenario                       { return idlePreset }
func (Kind) Prepare(lab.Scenario) ([]string, error)     { return []string{idleNote}, nil }
func (Kind) Section(run *lab.Run) (terminal, md string) { return idleSection(idleRows(run)) }

var idlePreset = lab.Scenario{
	Name: "idle", Title: "Idle: what a bridge costs while it forwards nothing",
	About: "a 2-port bridge set up and left without traffic for 3 s: its daemon's CPU time (a share of one CPU) and resident memory, and every CPU's busy share, " +
		"for the straight path, the Linux bridge, trestle in xdp and in its default mode and Open vSwitch (whose userspace datapath polls its ports); 3 repetitions, about a minute",
	DUTs:  lab.MustSpecs("direct", "linux-bridge", "trestle:xdp", "trestle", "ovs"),
	Hosts: 2, Chain: []int{1}, Tests: []lab.Kind{Kind{}}, Reps: 3, Timing: lab.DefaultTiming,
}

var idleNote = fmt.Sprintf("idle: each DUT set up, then no frame sent for %v (after %v to settle): its daemon's CPU time from /proc/PID/stat (user and system, all its threads), "+
	"as a share of one CPU, its VmRSS after, and every CPU's busy share from /proc/stat, which counts anyone's work on a shared machine", idleWindow, idleSettle)

func (Kind) Run(ctx context.Context, u *lab.UnitRun) error {
	u.Status(fmt.Sprintf("idle: settling %v, then %v without traffic", idleSettle, idleWindow))
	lab.SleepCtx(ctx, idleSettle)
	rec, err := measureIdle(ctx, u.Rig.DUT, idleWindow)
	r := u.Base
	r.Test, r.Param, r.Unit = TestIdle, "no traffic", "% of a CPU"
	if err != nil {
		r.Error = err.Error()
		u.Add(r)
		return ctx.Err()
	}
	r.Value, r.CPU = 100*rec.DaemonCPU, rec.CPUBusy
	if err := r.SetRecord(rec); err != nil {
		return err
	}
	u.Add(r)
	return ctx.Err()
}

// measureIdle reads the DUT's daemon and the CPUs before and after d.
func measureIdle(ctx context.Context, dut lab.DUT, d time.Duration) (IdleRecord, error) {
	var rec IdleRecord
	pid, what, err := lab.DaemonPID(dut)
	if err != nil && !errors.Is(err, lab.ErrNoDaemon) {
		return rec, fmt.Errorf("idle: %w", err)
	}
	rec.Daemon = what
	cpu0, err := lab.ReadCPU()
	if err != nil {
		return rec, err
	}
	var t0 uint64
	if pid > 0 {
		if t0, err = procTicks(pid); err != nil {
			return rec, err
		}
	}
	start := time.Now()
	lab.SleepCtx(ctx, d)
	if err := ctx.Err(); err != nil {
		return rec, err
	}
	cpu1, err := lab.ReadCPU()
	if err != nil {
		return rec, err
	}
	rec.Seconds = time.Since(start).Seconds()
	rec.CPUBusy = lab.CPUBusy(cpu0, cpu1)
	if pid > 0 {
		t1, err := procTicks(pid)
		if err != nil {
			return rec, err
		}
		rec.DaemonCPU = float64(t1-t0) / lab.ClockTicks / rec.Seconds
		if rec.DaemonRSSKiB, err = lab.ReadRSS(pid); err != nil {
			return rec, err
		}
	}
	return rec, nil
}

// procTicks is a process's CPU time in clock ticks: user and system, of
// every thread, with its waited-for children's.
func procTicks(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	p, _, ok := lab.ParseProcStat(string(b))
	if !ok {
		return 0, fmt.Errorf("/proc/%d/stat: not a stat line", pid)
	}
	return p.Ticks, nil
}

// idleRow is one DUT's idle figures, the medians over its repetitions.
type idleRow struct {
	DUT            string
	Daemon         string
	CPU, RSS, Busy float64 // % of a CPU, KiB, % of every CPU's time
	Reps           int
	Errors         []string
}

// idleRows are the run's idle results by DUT, in the run's DUT order.
func idleRows(run *lab.Run) []idleRow {
	var out []idleRow
	for _, d := range run.DUTs {
		row := idleRow{DUT: d}
		var cpu, rss, busy []float64
		for _, r := range run.Results {
			if r.Test != TestIdle || r.DUT != d {
				continue
			}
			if r.Error != "" {
				row.Errors = append(row.Errors, r.Error)
				continue
			}
			var rec IdleRecord
			if err := r.RecordOf(&rec); err != nil {
				row.Errors = append(row.Errors, err.Error())
				continue
			}
			row.Reps++
			row.Daemon = strings.SplitN(rec.Daemon, " ", 2)[0]
			cpu, rss = append(cpu, 100*rec.DaemonCPU), append(rss, float64(rec.DaemonRSSKiB))
			var sum float64
			for _, b := range rec.CPUBusy {
				sum += b
			}
			if len(rec.CPUBusy) > 0 {
				busy = append(busy, 100*sum/float64(len(rec.CPUBusy)))
			}
		}
		if row.Reps == 0 && len(row.Errors) == 0 {
			continue
		}
		if row.Reps > 0 {
			row.CPU, row.RSS, row.Busy = lab.Median(cpu), lab.Median(rss), lab.Median(busy)
		}
		out = append(out, row)
	}
	return out
}

// idleSection is the idle table, for the terminal and for report.md.
func idleSection(rows []idleRow) (terminal, md string) {
	if len(rows) == 0 {
		return "", ""
	}
	cells := func(r idleRow) []string {
		daemon, cpu, rss := "none (the kernel's)", "-", "-"
		if r.Daemon != "" {
			daemon, cpu, rss = r.Daemon, fmt.Sprintf("%.1f%%", r.CPU), fmt.Sprintf("%.1f MiB", r.RSS/1024)
		}
		all := fmt.Sprint(r.Reps)
		if len(r.Errors) > 0 {
			all += fmt.Sprintf(" (%d failed: %s)", len(r.Errors), strings.SplitN(r.Errors[0], "\n", 2)[0])
		}
		return []string{r.DUT, daemon, cpu, rss, fmt.Sprintf("%.1f%%", r.Busy), all}
	}
	head := []string{"DUT", "daemon", "daemon CPU (of one)", "daemon memory", "CPUs busy (all, mean)", "repetitions"}
	var t strings.Builder
	t.WriteString("\nidle, no traffic for " + idleWindow.String() + " (medians over the repetitions; CPUs busy counts anyone's work):\n")
	tw := tabwriter.NewWriter(&t, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.ToUpper(strings.Join(head, "\t")))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(cells(r), "\t"))
	}
	tw.Flush()
	var m strings.Builder
	m.WriteString("\n## Idle\n\nEach DUT set up and left without traffic for " + idleWindow.String() + ": its daemon's CPU time as a share of one CPU, its resident memory, and the mean busy share of every CPU (anyone's work, on a shared machine). Medians over the repetitions.\n\n")
	m.WriteString("| " + strings.Join(head, " | ") + " |\n|" + strings.Repeat("---|", len(head)) + "\n")
	for _, r := range rows {
		m.WriteString("| " + strings.Join(cells(r), " | ") + " |\n")
	}
	m.WriteString("\n")
	return t.String(), m.String()
}
