package lab

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"
)

// TestSpan is the mirror scenario's second figure: at the throughput rate
// found from h1 to h2 (the search's passing confirmation), the frames the
// span host received, as a share of those h2 received (UnitOfH2). A mirror
// that loses nothing copies every frame once: 100.
const TestSpan = "span"

// UnitOfH2 is TestSpan's unit: per cent of the frames h2 received.
const UnitOfH2 = "% of h2's"

// Mirror is the port mirror of the @mirror variant, which the DUT makes
// (SetMirror records it): the frames of Ports, in Direction ("in": what
// the port receives from its host, "out": what the bridge sends out of
// it, "both"), copied to the span port To, whose host SpanHost (an index
// into Topo.Hosts) receives the copies and sends nothing. To is a port of
// the bridge, as trestle's [[bridge.mirror]] wants; a DUT whose span port
// need not be one (the Linux bridge's tc mirror) keeps it out of the
// bridge, so that it gets the copies and nothing else, as trestle's and
// Open vSwitch's span ports do.
type Mirror struct {
	Name      string
	Ports     []string
	Direction string
	To        string
	SpanHost  int
}

// SetMirror gives a one-bridge topology of 3 or more hosts the @mirror
// set-up: h1's port mirrored both ways to the last host's port.
func (t *Topo) SetMirror() error {
	if t.DUT == nil || len(t.Bridges) != 1 || len(t.Hosts) < 3 {
		return errors.New("mirror: needs one bridge with a port for each of 3 or more hosts: h1 and h2 for the traffic, the last for the span port (the mirror scenario)")
	}
	span := len(t.Hosts) - 1
	t.Mirror = &Mirror{Name: "m0", Ports: []string{t.Hosts[0].Port}, Direction: "both", To: t.Hosts[span].Port, SpanHost: span}
	return nil
}

// MirrorSettings describes t's mirror for a unit's record.
func (t *Topo) MirrorSettings() string {
	m := t.Mirror
	return fmt.Sprintf("%s: %s mirrored (direction %s: what h1 sends and what it is sent) to the span port %s, whose host h%d receives the copies and sends nothing",
		m.Name, strings.Join(m.Ports, ", "), m.Direction, m.To, m.SpanHost+1)
}

// mirrorSteps check, before anything is measured, that the span host gets
// a copy of what goes into h1's port and of what comes out of it: a DUT
// that ignored the mirror would be measured forwarding one frame for each,
// and show no cost at all.
func mirrorSteps(m *Mirror) []frameStep {
	return []frameStep{
		{what: fmt.Sprintf("h1's frame to h2 (into %s) reaches the span host", m.Ports[0]), from: 0, dst: 1, to: m.SpanHost},
		{what: fmt.Sprintf("h2's frame to h1 (out of %s) reaches the span host", m.Ports[0]), from: 1, dst: 0, to: m.SpanHost},
	}
}

// CheckMirror runs mirrorSteps and returns what it found, for the unit's
// record.
func (r *Rig) CheckMirror(ctx context.Context) (string, error) {
	if r.T.Mirror == nil {
		return "", errors.New("mirror check: the topology has no mirror")
	}
	return r.checkFrames(ctx, "mirror check", mirrorSteps(r.T.Mirror))
}

// tcMirror makes m with tc on the Linux bridge's ports: a clsact qdisc on
// each mirrored port and, at its ingress and egress as m's direction says,
// a filter that matches every frame with the action `mirred egress mirror
// dev SPAN`. The filter is matchall where the kernel has it, else u32
// matching every frame (`match u32 0 0`: this kind of kernel is built
// without CONFIG_NET_CLS_MATCHALL). It returns what it made, for the record.
func tcMirror(ctx context.Context, ns *NS, m *Mirror) (string, error) {
	if _, err := exec.LookPath("tc"); err != nil {
		return "", fmt.Errorf("%w: the Linux bridge's mirror is made with tc, which is not installed (Debian package iproute2)", ErrUnavailable)
	}
	var dirs []string
	if m.Direction == "in" || m.Direction == "both" {
		dirs = append(dirs, "ingress")
	}
	if m.Direction == "out" || m.Direction == "both" {
		dirs = append(dirs, "egress")
	}
	classifier := ""
	var made []string
	for _, p := range m.Ports {
		if _, err := ns.Run(ctx, "tc", "qdisc", "add", "dev", p, "clsact"); err != nil {
			return "", fmt.Errorf("mirror %s: %w", p, err)
		}
		for _, dir := range dirs {
			action := []string{"action", "mirred", "egress", "mirror", "dev", m.To}
			var err error
			for _, c := range [][]string{{"matchall"}, {"u32", "match", "u32", "0", "0"}} {
				if classifier != "" && classifier != c[0] {
					continue // the one that worked on the first filter
				}
				args := append(append([]string{"filter", "add", "dev", p, dir, "protocol", "all"}, c...), action...)
				if _, err = ns.Run(ctx, "tc", args...); err == nil {
					classifier = c[0]
					made = append(made, "tc "+strings.Join(args, " "))
					break
				}
			}
			if err != nil {
				return "", fmt.Errorf("mirror %s %s to %s: %w", p, dir, m.To, err)
			}
		}
	}
	note := ""
	if classifier == "u32" {
		note = " (u32 matching every frame: this kernel has no matchall classifier, CONFIG_NET_CLS_MATCHALL)"
	}
	return fmt.Sprintf("tc qdisc add dev %s clsact; %s%s; %s not in the bridge: it gets the copies and nothing else", strings.Join(m.Ports, ", "), strings.Join(made, "; "), note, m.To), nil
}

// spanResult is the TestSpan figure of the trial at the throughput rate.
func SpanResult(base Result, size FrameSize, at TrialResult) Result {
	r := base
	r.Test, r.Param, r.Unit = TestSpan, string(size), UnitOfH2
	r.Trials, r.CPU = []TrialResult{at}, at.CPU
	if len(at.Received) == 0 || len(at.Watched) == 0 || at.Received[0] == 0 {
		r.Error = "h2 received nothing at the throughput rate: no share to give"
		return r
	}
	h2, span := at.Received[0], at.Watched[0]
	r.Value = 100 * float64(span) / float64(h2)
	r.Note = fmt.Sprintf("at %s (the throughput): %d frames sent, h2 received %d, the span host %d", PPSText(at.Offered), at.Sent, h2, span)
	return r
}

// capturer is a DUT that captures a port's frames while it forwards:
// trestle, with `trestle capture` (the @capture variant).
type capturer interface {
	// StartCapture starts a capture of port on bridge and returns once it
	// runs; stop ends it and returns what it reported.
	StartCapture(ctx context.Context, bridge, port string) (stop func() (string, error), err error)
}

// captureCommand is the capture the @capture variant runs on trestle's
// DUT, with the daemon's socket: of both directions, into /dev/null (a
// file would fill the disk at a million frames a second and measure it).
func (d *trestleDUT) captureCommand(bridge, port string) []string {
	return []string{"capture", bridge, port, "-w", "/dev/null", "--socket", d.sock}
}

// StartCapture starts `trestle capture` in the DUT namespace with the
// daemon's build. A build without the command makes the unit unavailable,
// not failed: it has nothing to measure.
func (d *trestleDUT) StartCapture(ctx context.Context, bridge, port string) (func() (string, error), error) {
	bin := d.cur
	if out, err := exec.CommandContext(ctx, bin, "capture", "--help").CombinedOutput(); err != nil {
		why := strings.ReplaceAll(strings.TrimSpace(string(out)), "\n", "; ")
		return nil, fmt.Errorf("%w: %s has no capture command: trestle capture --help: %v: %s", ErrUnavailable, d.label(bin), err, why)
	}
	args := d.captureCommand(bridge, port)
	var p *Proc
	var err error
	if d.persist {
		p, err = d.ns.StartNetOnly(bin, args...)
	} else {
		p, err = d.ns.Start(bin, args...)
	}
	if err != nil {
		return nil, err
	}
	select {
	case <-p.Done():
		return nil, fmt.Errorf("trestle %s: exited at once: %v\n%s", strings.Join(args, " "), p.Err(), p.Output())
	case <-time.After(300 * time.Millisecond):
	case <-ctx.Done():
		p.Stop()
		return nil, ctx.Err()
	}
	stop := func() (string, error) {
		// SIGINT, as Ctrl-C would: the capture reports what it kept and
		// what it could not, and exits 0.
		err := p.StopWith(syscall.SIGINT, 10*time.Second)
		out := strings.TrimSpace(p.Output())
		if err != nil {
			return out, fmt.Errorf("trestle %s (pid %d), stopped with SIGINT: %w\n%s", strings.Join(args, " "), p.Cmd.Process.Pid, err, out)
		}
		return out, nil
	}
	return stop, nil
}

// withCapture runs tests with the DUT capturing h1's port, and records in
// set what the capture was, which programs the DUT's ports ran before,
// during and after it (a capture that is off must leave no program change
// behind), and what the capture reported when it was stopped.
func (r *Rig) withCapture(ctx context.Context, set map[string]string, status func(string), tests func() error) error {
	c, ok := r.DUT.(capturer)
	if !ok {
		return fmt.Errorf("%w: %s has no capture", ErrUnavailable, r.DUT.Name())
	}
	if r.T.DUT == nil || len(r.T.Bridges) == 0 {
		return errors.New("capture: no bridge to capture on")
	}
	h1 := r.T.Hosts[0].Port
	bridge := r.T.Bridges[0].Name
	for _, b := range r.T.Bridges {
		if slices.Contains(b.Ports, h1) {
			bridge = b.Name
		}
	}
	before, err := r.programNames()
	if err != nil {
		return err
	}
	status("starting trestle capture " + h1)
	stop, err := c.StartCapture(ctx, bridge, h1)
	if err != nil {
		return err
	}
	if d, ok := r.DUT.(*trestleDUT); ok {
		set["capture"] = "trestle " + strings.Join(d.captureCommand(bridge, h1), " ") + ", in the DUT namespace, running through the packet tests; stopped after them with SIGINT, by its PID"
	}
	// The capture may swap the port's program: wait for it to show,
	// so that the first trial is not measured before it took effect.
	var during []string
	for deadline := time.Now().Add(3 * time.Second); ; {
		if during, err = r.programNames(); err != nil || !slices.Equal(during, before) || time.Now().After(deadline) {
			break
		}
		SleepCtx(ctx, 50*time.Millisecond)
	}
	testErr := tests()
	out, stopErr := stop()
	if out != "" {
		set["capture report"] = lastLines(out, 8) + "\n"
	}
	after, err := r.programNames()
	if err == nil {
		set["capture programs"] = captureProgramsText(before, during, after)
	}
	return errors.Join(testErr, stopErr, err)
}

// captureProgramsText says what the DUT's ports ran before, during and
// after a capture.
func captureProgramsText(before, during, after []string) string {
	s := "while capturing: the same programs as before (" + strings.Join(before, "; ") + ")"
	if !slices.Equal(during, before) {
		s = "while capturing: " + strings.Join(during, "; ") + " (before: " + strings.Join(before, "; ") + ")"
	}
	if slices.Equal(after, before) {
		return s + "; after it stopped: the same as before, no program change left behind"
	}
	return s + "; after it stopped: " + strings.Join(after, "; ") + ", NOT the same as before"
}

// programNames lists the eBPF programs on the DUT's ports, with their IDs.
func (r *Rig) programNames() ([]string, error) {
	progs, names, err := r.dutPrograms()
	for _, p := range progs {
		p.Close()
	}
	return names, err
}
