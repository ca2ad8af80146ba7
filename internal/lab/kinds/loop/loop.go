// Package loop is the lab's loop kind: two ports of the DUT's bridge are
// joined outside it by a Linux bridge in a namespace of their own (as a
// cable between two ports, or a VM that bridges two of its vNICs, joins
// them), one broadcast is sent in, and the lab measures how soon the DUT
// blocks a port of the loop, how many frames the loop carried until then,
// and whether the rest of the bridge kept forwarding: a stream from h1 to
// h2 runs through it all. trestle breaks the loop with loop_detect, the
// Linux bridge with the kernel's spanning tree (lab.LoopGuard); a DUT
// with neither is not measured, and said so.
package loop

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/trestle/trestle/internal/frame"
	"github.com/trestle/trestle/internal/lab"
)

func init() { lab.Register(Kind{}, lab.TestUDP) }

// TestLoop is the loop kind's name, its results' Test.
const TestLoop = "loop"

const (
	// DefaultRate is the stream's rate when --loop-rate does not say: low
	// enough that a loop-free DUT loses nothing on a shared machine, so
	// what it loses is the loop's doing.
	DefaultRate = 10000
	// DefaultWait is how long the loop may stand before the lab opens it
	// itself, when --loop-wait does not say (trestle's goal is 3 s).
	DefaultWait = 10 * time.Second
	// streamLead and streamTail are the stream before the loop closes and,
	// once it is broken, clean after it.
	streamLead, streamTail = time.Second, time.Second
	// poll is how often the DUT is asked whether it blocked a port.
	poll = 10 * time.Millisecond
	// drainOut is how long after the block the loop's counters are read:
	// frames in flight have come out by then. afterWindow is the window
	// read after that, the loop broken.
	drainOut, afterWindow = time.Second, time.Second
	// broadcastFlow is the broadcast's flow id: above every flow a sink
	// tracks, so h3's sink counts its copies apart (bad_flow).
	broadcastFlow = 0xffff
)

// The hosts: h1 streams to h2, h4 sends the broadcast, h3 counts its copies.
const (
	sender  = 3
	watcher = 2
)

// Kind is the loop test: a stream of Rate frames a second from h1 to h2,
// the loop closed Lead into it and a broadcast sent in from h4; the loop
// may stand for Wait before the lab opens it.
type Kind struct {
	Rate float64
	Wait time.Duration
}

// Record is one loop closed on one DUT (Result.Record).
type Record struct {
	// Guard is how the DUT finds the loop; Unmeasured, why it was not
	// measured (a DUT with no loop protection: nothing would break it).
	Guard      string `json:"guard,omitempty"`
	Unmeasured string `json:"unmeasured,omitempty"`
	// WaitS is how long the loop could stand before the lab opened it.
	WaitS float64 `json:"wait_s"`
	// Detected: the DUT blocked a port of the loop within WaitS, DetectMs
	// after the loop closed (Blocked.At, the DUT's time of it where it
	// tells one).
	Detected bool        `json:"detected"`
	DetectMs float64     `json:"detect_ms,omitempty"`
	Blocked  lab.Blocked `json:"blocked"`
	// Carried is the frames the DUT sent into the loop from its closing
	// to drainOut after the block (the far bridge's ports' received
	// frames, both ways); AtBlock those of them sent by the read that
	// found the block; After those sent in the afterWindow following,
	// with the loop broken (probes, BPDUs, floods of the stream).
	Carried uint64 `json:"carried"`
	AtBlock uint64 `json:"carried_at_block"`
	After   uint64 `json:"carried_after"`
	// Copies is the copies of the broadcast h3 received, to drainOut
	// after the block.
	Copies uint64 `json:"copies"`
	// Stream is the stream from h1 to h2 through it all: lost, and
	// flooded to h3.
	Stream lab.RestartEvent `json:"stream"`
	Note   string           `json:"note,omitempty"`
}

func (Kind) Name() string { return TestLoop }

func (Kind) Needs(lab.Scenario) lab.Needs {
	return lab.Needs{Learning: true, AllHosts: true, OneWay: true, Loop: true}
}

// Estimate: the learning frames, the stream's lead, the loop (to its wait
// at most, a second or two here), the reads after the block, the tail and
// the drain; and some seconds for a spanning tree's ports to forward.
func (k Kind) Estimate(s lab.Scenario, _ lab.Spec) time.Duration {
	return s.Timing.Settle + streamLead + 2*time.Second + drainOut + afterWindow + streamTail + s.Timing.Drain + 2*time.Second
}

func (Kind) Preset() lab.Scenario { return loopPreset }

var loopPreset = lab.Scenario{
	Name: "loop", Title: "Loop at the edge: two ports joined outside the bridge, one broadcast sent in",
	About: "a 4-port bridge with two ports more, l1 and l2, joined outside it by a Linux bridge in a namespace of its own (STP off, as a VM's bridge: a cable between two ports) once the stream runs; " +
		"a stream h1 -> h2 of 64-byte frames at 10,000 a second (--loop-rate), the loop closed 1 s into it and one broadcast sent in from h4: " +
		"the time from the loop closed to a port of it blocked (trestle: loop_detect, its port_blocked event; the Linux bridge: the kernel's spanning tree, hello_time 1 s, " +
		"the port's state blocking, read every 10 ms), the frames the loop carried until then (the far bridge's ports' counts) and the broadcast's copies h3 received, " +
		"and the stream's frames lost meanwhile; the lab opens a loop still standing after 10 s (--loop-wait). trestle in xdp and tc mode, the Linux bridge; 3 repetitions, about two minutes; " +
		"goal: trestle blocks the loop within 3 s and the stream loses nothing",
	DUTs:  lab.MustSpecs("trestle:xdp", "trestle:tc", "linux-bridge"),
	Hosts: 4, Chain: []int{1}, Sizes: []lab.FrameSize{"64"},
	Tests: []lab.Kind{Kind{Rate: DefaultRate, Wait: DefaultWait}}, Reps: 3, Timing: lab.DefaultTiming,
}

// GoalDetect is trestle's goal: a loop blocked within 3 s.
const GoalDetect = 3 * time.Second

// Prepare refuses a loop test it cannot run, and says how it measures.
func (k Kind) Prepare(s lab.Scenario) ([]string, error) {
	if k.Rate <= 0 {
		return nil, fmt.Errorf("loop: the stream's rate %v: frames a second, above 0", k.Rate)
	}
	if k.Wait <= 0 || k.Wait >= lab.LoopRetry {
		return nil, fmt.Errorf("loop: wait %v: above 0 and below %v (the blocks' retry)", k.Wait, lab.LoopRetry)
	}
	if s.Hosts < 4 {
		return nil, fmt.Errorf("loop: %d hosts: the stream, the broadcast and its watcher need 4", s.Hosts)
	}
	return []string{fmt.Sprintf("loop: ports l1 and l2 of the bridge, their far ends in a namespace of their own on a Linux bridge (STP off), l2 off it (the loop open). "+
		"A stream h1 -> h2 of %s frames at %s (learning frames from every host first); %v into it the loop closes (l2 joins the far bridge) and h4 sends one broadcast (a test frame, flow %d, which the sinks count apart). "+
		"Detect: from the loop closed to the port blocked, the DUT asked every %v (trestle: `show` finds the port blocked, its port_blocked event gives the time; "+
		"trestle runs with loop_detect = true, loop_retry = %q; the Linux bridge: the kernel's spanning tree on, hello_time 1 s, forward_delay 2 s, a port in state blocking, the read's time). "+
		"Carried: frames the DUT sent into the loop (the far ends' received frames) from its closing to %v after the block; copies: the broadcast's copies h3's sink counted meanwhile; "+
		"after: frames sent into the loop in the %v following. The stream runs on until clean for %v; lost = frames sent less the distinct frames h2 counted, flooded = its frames at h3. "+
		"A loop not broken within %v is opened by the lab. A DUT with no loop protection the lab can turn on is not measured",
		s.FirstSize().Label(), lab.PPSText(k.Rate), streamLead, broadcastFlow, poll, fmt.Sprintf("%ds", int(lab.LoopRetry/time.Second)), drainOut, afterWindow, streamTail, k.Wait)}, nil
}

func (k Kind) Run(ctx context.Context, u *lab.UnitRun) error {
	r := u.Base
	r.Test, r.Param, r.Unit = TestLoop, "detect", "ms"
	rec := &Record{WaitS: k.Wait.Seconds()}
	g, ok := u.Rig.DUT.(lab.LoopGuard)
	if !ok || u.Rig.T.Loop == nil {
		rec.Unmeasured = fmt.Sprintf("%s has no loop protection the lab can turn on (trestle's loop_detect, the Linux bridge's spanning tree): nothing would break the loop", u.Rig.DUT.Name())
		r.Note = rec.Unmeasured
		if err := r.SetRecord(rec); err != nil {
			return err
		}
		u.Add(r)
		return fmt.Errorf("%w: loop: %s", lab.ErrUnavailable, rec.Unmeasured)
	}
	if len(u.Rig.T.Hosts) <= sender {
		return errors.New("loop: needs 4 hosts")
	}
	rec.Guard = g.LoopGuard()
	mix, err := u.S.FirstSize().Mix()
	if err != nil {
		return err
	}
	u.Status(fmt.Sprintf("loop: a stream at %s, the loop closed %v into it", lab.PPSText(k.Rate), streamLead))
	ev, err := u.Rig.RestartWindow(ctx, mix, k.Rate, u.Flows, streamLead, streamTail, u.S.Timing, func(ctx context.Context) (lab.Restarted, error) {
		return k.closeLoop(ctx, u.Rig, g, rec, u.Status)
	})
	ev.Kind, ev.Index = TestLoop, 1
	rec.Stream = ev
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		r.Error = err.Error()
	} else if !rec.Detected {
		r.Error = fmt.Sprintf("no port of the loop blocked within %v: the lab opened it", k.Wait)
	}
	r.Value = rec.DetectMs
	if err := r.SetRecord(rec); err != nil {
		return err
	}
	u.Add(r)
	return nil
}

// closeLoop closes the loop, sends the broadcast in, waits for the DUT
// to block a port (or opens the loop itself after the wait) and counts
// what the loop carried; the loop is open again when it returns.
func (k Kind) closeLoop(ctx context.Context, rig *lab.Rig, g lab.LoopGuard, rec *Record, status func(string)) (res lab.Restarted, err error) {
	t0 := time.Now()
	l := rig.T.Loop
	from, watch := rig.T.Hosts[sender], rig.Sink(watcher)
	if watch == nil {
		return res, errors.New("loop: no sink on h3")
	}
	bcast, _, err := frame.Build(frame.Spec{Dst: frame.Broadcast(), Src: from.MAC, SrcIP: net.ParseIP(from.IP), DstIP: net.IPv4bcast,
		SrcPort: 9, DstPort: 9, Size: frame.MinSize(false, false), Flow: broadcastFlow})
	if err != nil {
		return res, err
	}
	// read is what the loop has carried so far, and the broadcast's copies at h3.
	read := func() (carried, copies uint64, err error) {
		if carried, err = l.Carried(); err != nil {
			return 0, 0, err
		}
		s, err := watch.Snapshot()
		return carried, s.BadFlow, err
	}
	c0, h0, err := read()
	if err != nil {
		return res, err
	}
	if err := l.Close(); err != nil {
		return res, err
	}
	closed := time.Now()
	defer func() {
		if oerr := l.Open(); oerr != nil && err == nil {
			err = oerr
		}
		res.Back = time.Since(t0)
	}()
	if err := lab.SendFrames(from, [][]byte{bcast}); err != nil {
		return res, err
	}
	status("loop: closed, a broadcast sent in; waiting for a port of it blocked")
	var b lab.Blocked
	for b.Port == "" && time.Since(closed) < k.Wait && ctx.Err() == nil {
		lab.SleepCtx(ctx, poll)
		if b, err = g.LoopBlocked(ctx, rig.T); err != nil {
			return res, err
		}
	}
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	atBlock, _, err := read()
	if err != nil {
		return res, err
	}
	rec.AtBlock = atBlock - c0
	if b.Port != "" {
		rec.Detected, rec.Blocked = true, b
		rec.DetectMs = lab.Millis(max(b.At.Sub(closed), 0))
	} else if err := l.Open(); err != nil { // the lab breaks it
		return res, err
	}
	lab.SleepCtx(ctx, drainOut)
	c1, h1, err := read()
	if err != nil {
		return res, err
	}
	rec.Carried, rec.Copies = c1-c0, h1-h0
	lab.SleepCtx(ctx, afterWindow)
	c2, _, err := read()
	if err != nil {
		return res, err
	}
	rec.After = c2 - c1
	return res, ctx.Err()
}

// Flags: the stream's rate and the loop's wait (for the loop scenario).
func (Kind) Flags() []lab.Flag {
	return []lab.Flag{
		{Name: "loop-rate", Type: lab.FlagInt, Lo: 1, Hi: 100_000_000, For: "the loop scenario",
			Usage: fmt.Sprintf("loop: the stream h1 -> h2's frames a second while the loop stands (default %d)", DefaultRate),
			Set:   lab.Sets(func(k Kind, n int) (Kind, error) { k.Rate = float64(n); return k, nil })},
		{Name: "loop-wait", Type: lab.FlagDuration, For: "the loop scenario",
			Usage: fmt.Sprintf("loop: how long the loop may stand before the lab opens it (default %v)", DefaultWait),
			Set: lab.Sets(func(k Kind, v time.Duration) (Kind, error) {
				if v <= 0 || v >= lab.LoopRetry {
					return k, fmt.Errorf("--loop-wait %v: above 0 and below %v", v, lab.LoopRetry)
				}
				k.Wait = v
				return k, nil
			})},
	}
}

// row is one DUT's loops, over its repetitions.
type row struct {
	*lab.DUTRecords[Record]
	Guard string
}

// rows are the run's loop results by DUT, in the run's DUT order.
func rows(run *lab.Run) []*row {
	var out []*row
	for _, d := range lab.RecordsByDUT(run, TestLoop, func(r Record) string { return r.Unmeasured }) {
		rw := &row{DUTRecords: d}
		for _, rec := range d.Recs {
			rw.Guard = rec.Guard
		}
		out = append(out, rw)
	}
	return out
}

// values are f of the row's loops that the DUT broke (all: every loop).
func (rw *row) values(all bool, f func(Record) float64) []float64 {
	var v []float64
	for _, rec := range rw.Recs {
		if all || rec.Detected {
			v = append(v, f(rec))
		}
	}
	return v
}

func msText(v float64) string { return fmt.Sprintf("%.0f ms", v) }

// guardName is a guard's short name for the table.
func guardName(g string) string {
	switch {
	case strings.HasPrefix(g, "loop_detect"):
		return "loop_detect"
	case strings.Contains(g, "spanning tree"):
		return "STP"
	}
	return g
}

var head = []string{"DUT", "guard", "broken", "detect", "frames carried", "copies at h3", "carried after", "stream lost", "of sent"}

// cells are a row's figures: medians over the repetitions, with the least
// and the most.
func (rw *row) cells() []string {
	if rw.Unmeasured != "" {
		return []string{rw.DUT, "none", "not measured", "-", "-", "-", "-", "-", "-"}
	}
	broke := 0
	for _, rec := range rw.Recs {
		if rec.Detected {
			broke++
		}
	}
	f := func(of func(Record) uint64) func(Record) float64 {
		return func(r Record) float64 { return float64(of(r)) }
	}
	return []string{rw.DUT, guardName(rw.Guard), fmt.Sprintf("%d of %d", broke, len(rw.Recs)),
		lab.SpreadText(rw.values(false, func(r Record) float64 { return r.DetectMs }), msText),
		lab.SpreadText(rw.values(true, f(func(r Record) uint64 { return r.Carried })), lab.CountText),
		lab.SpreadText(rw.values(true, f(func(r Record) uint64 { return r.Copies })), lab.CountText),
		lab.SpreadText(rw.values(true, f(func(r Record) uint64 { return r.After })), lab.CountText),
		lab.SpreadText(rw.values(true, func(r Record) float64 { return float64(max(r.Stream.Lost, 0)) }), lab.CountText),
		lab.SpreadText(rw.values(true, func(r Record) float64 { return float64(r.Stream.Sent) }), lab.CountText)}
}

// ministat is ministat's summary line of each figure of a row with 3 or
// more loops broken: N, Min, Max, Median, Avg, Stddev.
func (rw *row) ministat() []string {
	var out []string
	for _, fig := range []struct {
		name string
		of   func(Record) float64
	}{
		{"detect ms", func(r Record) float64 { return r.DetectMs }},
		{"frames carried", func(r Record) float64 { return float64(r.Carried) }},
		{"stream lost", func(r Record) float64 { return float64(max(r.Stream.Lost, 0)) }},
	} {
		if l, ok := lab.MinistatLine(rw.DUT, fig.name, rw.values(false, fig.of)); ok {
			out = append(out, l)
		}
	}
	return out
}

// warnings: the loops trestle did not break within the goal, and those
// whose stream lost frames; a peer's figures are findings.
func warnings(rws []*row) []string {
	var out []string
	for _, rw := range rws {
		out = append(out, rw.Problems()...)
		if rw.Unmeasured != "" || !lab.CapsOf(rw.DUT).Subject {
			continue
		}
		var late, lost []string
		for i, rec := range rw.Recs {
			if !rec.Detected || rec.DetectMs > lab.Millis(GoalDetect) {
				late = append(late, fmt.Sprintf("#%d %s", i+1, detectText(rec)))
			}
			if rec.Stream.Lost > 0 {
				lost = append(lost, fmt.Sprintf("#%d %d", i+1, rec.Stream.Lost))
			}
		}
		if len(late) > 0 {
			out = append(out, fmt.Sprintf("warning: %s: the loop not blocked within %v in %d of %d (%s)", rw.DUT, GoalDetect, len(late), len(rw.Recs), strings.Join(late, ", ")))
		}
		if len(lost) > 0 {
			out = append(out, fmt.Sprintf("warning: %s: the stream lost frames in %d of %d loops (%s): the goal is none", rw.DUT, len(lost), len(rw.Recs), strings.Join(lost, ", ")))
		}
	}
	return out
}

func detectText(rec Record) string {
	if !rec.Detected {
		return fmt.Sprintf("not within %gs", rec.WaitS)
	}
	return msText(rec.DetectMs)
}

// Section is the loop kind's report section: one row a DUT, ministat's
// summaries, every loop in order, and how each DUT finds a loop.
func (Kind) Section(run *lab.Run) (terminal, markdown string) {
	rws := rows(run)
	if len(rws) == 0 {
		return "", ""
	}
	var cells [][]string
	var mini []string
	for _, rw := range rws {
		cells = append(cells, rw.cells())
		mini = append(mini, rw.ministat()...)
	}
	ws := warnings(rws)
	var t strings.Builder
	t.WriteString("\nloop, two ports joined outside the bridge and one broadcast sent in (medians over the repetitions, least..most; detect: loop closed to port blocked; carried: frames the DUT sent into the loop until then, and in the second after):\n")
	lab.TerminalRows(&t, head, cells, append(mini, ws...))
	var m strings.Builder
	m.WriteString("\n## Loop\n\nTwo ports of the bridge joined outside it by a Linux bridge (STP off) while a stream runs from h1 to h2, and one broadcast sent in from h4. " +
		"Detect is from the loop closed to a port of it blocked; frames carried are those the DUT sent into the loop until a second after the block " +
		"(the far bridge's counts), copies those of the broadcast h3 received, carried after those sent into the loop in the second following (probes, BPDUs, floods); " +
		"the stream's frames lost are its whole run's (1 s before the loop to 1 s clean after it). Medians over the repetitions, with the least and the most.\n\n")
	var mb bytes.Buffer
	lab.MarkdownRows(&mb, head, cells, ws)
	m.WriteString(mb.String())
	if len(mini) > 0 {
		m.WriteString("\nministat's summaries:\n\n")
		for _, l := range mini {
			m.WriteString("- " + l + "\n")
		}
	}
	m.WriteString("\nEvery loop, in order (detect, frames carried, copies at h3, carried after, stream lost of sent):\n\n")
	for _, rw := range rws {
		if rw.Unmeasured != "" {
			continue
		}
		var parts []string
		for _, rec := range rw.Recs {
			what := detectText(rec)
			if rec.Detected {
				what += fmt.Sprintf(" (%s, %s)", rec.Blocked.Port, rec.Blocked.Why)
			}
			parts = append(parts, fmt.Sprintf("%s, %d, %d, %d, %d of %d", what, rec.Carried, rec.Copies, rec.After, max(rec.Stream.Lost, 0), rec.Stream.Sent))
		}
		fmt.Fprintf(&m, "- %s: %s\n", rw.DUT, strings.Join(parts, "; "))
	}
	m.WriteString("\nHow each DUT finds a loop:\n\n")
	for _, rw := range rws {
		if rw.Guard != "" {
			fmt.Fprintf(&m, "- %s: %s\n", rw.DUT, rw.Guard)
		}
	}
	m.WriteString("\n")
	return t.String(), m.String()
}
