package lab

// A loop closed outside the DUT (Needs.Loop, Topo.Loop): two ports of its
// bridge joined by a Linux bridge in a namespace of its own, as a cable
// between two ports, or a VM that bridges two of its vNICs, joins them;
// and a DUT's power to break such a loop by blocking a port (LoopGuard),
// which the loop kind measures. trestle breaks it with its loop_detect,
// the Linux bridge with the kernel's spanning tree (it has no loop
// detection of its own); a DUT with neither is not measured.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/trestle/trestle/internal/ctl"
)

// Loop is two ports of the DUT's first bridge whose far ends (of the same
// names) are in NS, on the Linux bridge FarBridge there. Its spanning tree
// is off, as a VM's bridge's is: it forwards BPDUs as a hub does
// (br_input.c), and a port it takes forwards at once. Only the first
// port's far end is on it until Close joins the second.
type Loop struct {
	Bridge    string   // the DUT's bridge that holds Ports
	Ports     []string // the DUT's ports: "l1", "l2"
	NS        *NS
	FarBridge string
}

// LoopRetry is trestle's loop_retry on the loop's bridge: longer than a
// measurement, so a port blocked stays blocked while the lab counts.
const LoopRetry = 5 * time.Minute

// The Linux bridge's spanning tree on the loop's bridge: the kernel's
// shortest hello time (a BPDU a second: BR_MIN_HELLO_TIME) and forward
// delay (BR_MIN_FORWARD_DELAY), in the clock_t units (1/100 s) that
// `ip link` passes on.
const (
	stpHello        = time.Second
	stpForwardDelay = 2 * time.Second
)

// AddLoop adds to t (a one-bridge topology in a DUT) the loop's two ports,
// l1 and l2, on its first bridge, their far ends in a namespace "far" with
// l1 on the far bridge "lbr" and l2 not yet (the loop open).
func (t *Topo) AddLoop() error {
	if t.DUT == nil || len(t.Bridges) == 0 {
		return errors.New("topology: a loop needs a bridge in a DUT")
	}
	far, err := t.Net.NS("far")
	if err != nil {
		return err
	}
	l := &Loop{Bridge: t.Bridges[0].Name, Ports: []string{"l1", "l2"}, NS: far, FarBridge: "lbr"}
	for _, p := range l.Ports {
		if err := t.Net.Veth(t.DUT, p, far, p, VethOpts{Queues: t.Shape.Queues}); err != nil {
			return err
		}
	}
	err = far.Do(func() error {
		la := netlink.NewLinkAttrs()
		la.Name = l.FarBridge
		br := &netlink.Bridge{LinkAttrs: la}
		if err := netlink.LinkAdd(br); err != nil {
			return fmt.Errorf("create the far bridge %s: %w", l.FarBridge, err)
		}
		if err := l.setMaster(l.Ports[0], true); err != nil {
			return err
		}
		return netlink.LinkSetUp(br)
	})
	if err != nil {
		return fmt.Errorf("topology: %w", err)
	}
	t.Bridges[0].Ports = append(t.Bridges[0].Ports, l.Ports...)
	t.Loop = l
	return nil
}

// setMaster puts the far end of port on the far bridge, or takes it off;
// inside the far namespace.
func (l *Loop) setMaster(port string, on bool) error {
	p, err := netlink.LinkByName(port)
	if err != nil {
		return fmt.Errorf("the loop's far end %s: %w", port, err)
	}
	if !on {
		return netlink.LinkSetNoMaster(p)
	}
	br, err := netlink.LinkByName(l.FarBridge)
	if err != nil {
		return fmt.Errorf("the far bridge %s: %w", l.FarBridge, err)
	}
	if err := netlink.LinkSetMaster(p, br); err != nil {
		return fmt.Errorf("%s onto the far bridge %s: %w", port, l.FarBridge, err)
	}
	return nil
}

// Close closes the loop: the second port's far end joins the far bridge.
func (l *Loop) Close() error {
	return l.NS.Do(func() error { return l.setMaster(l.Ports[1], true) })
}

// Open opens it again.
func (l *Loop) Open() error {
	return l.NS.Do(func() error { return l.setMaster(l.Ports[1], false) })
}

// Carried is the frames the DUT has sent into the loop: what the far ends
// received, summed (each frame crosses the far bridge once, and comes
// back into the DUT by the other port).
func (l *Loop) Carried() (uint64, error) {
	var n uint64
	for _, p := range l.Ports {
		c, err := l.NS.Counters(p)
		if err != nil {
			return 0, fmt.Errorf("the loop's far end %s: %w", p, err)
		}
		n += c.RxPackets
	}
	return n, nil
}

// LoopGuard is a DUT that breaks a loop closed outside it (Topo.Loop) by
// blocking one of its ports.
type LoopGuard interface {
	// LoopGuard says how the DUT finds the loop, for the record.
	LoopGuard() string
	// LoopBlocked is the port of the loop the DUT has blocked (Port ""
	// while none is).
	LoopBlocked(ctx context.Context, t *Topo) (Blocked, error)
}

// Blocked is a port of the loop that the DUT blocked.
type Blocked struct {
	Port string `json:"port"`
	Why  string `json:"why,omitempty"`
	// At is when, as the DUT tells it (trestle's port_blocked event), or
	// the read that found it blocked (FromEvent false).
	At        time.Time `json:"at"`
	FromEvent bool      `json:"from_event"`
}

// LoopGuard: loop_detect, on the bridge of the loop's ports.
func (d *trestleDUT) LoopGuard() string {
	return fmt.Sprintf("loop_detect = true, loop_retry = %q: a probe out of each port every second, and at once when an address moves; "+
		"the port that hears one of the bridge's own back is blocked (trestle show: state blocked, why loop; the port_blocked event's time is the time read)", loopRetryText())
}

func loopRetryText() string { return fmt.Sprintf("%ds", int(LoopRetry/time.Second)) }

// LoopBlocked: `trestle show` finds the port blocked, and the daemon's
// port_blocked event says when.
func (d *trestleDUT) LoopBlocked(_ context.Context, t *Topo) (Blocked, error) {
	var b Blocked
	var st ctl.Status
	if err := ctl.Call(d.sock, ctl.Request{Cmd: ctl.CmdShow, Bridge: t.Loop.Bridge}, &st); err != nil {
		return b, fmt.Errorf("trestle show %s: %w", t.Loop.Bridge, err)
	}
	now := time.Now()
	for _, br := range st.Bridges {
		for _, p := range br.Ports {
			if p.State == "blocked" && (slices.Contains(t.Loop.Ports, p.Interface) || slices.Contains(t.Loop.Ports, p.Name)) {
				b = Blocked{Port: p.Interface, Why: p.Why, At: now}
			}
		}
	}
	if b.Port == "" {
		return b, nil
	}
	var evs []ctl.Event
	if err := ctl.Call(d.sock, ctl.Request{Cmd: ctl.CmdEvents}, &evs); err != nil {
		return b, nil // the read's time stands
	}
	for i := len(evs) - 1; i >= 0; i-- {
		if e := evs[i]; e.Event == ctl.EventPortBlocked && e.Bridge == t.Loop.Bridge && e.Port == b.Port {
			b.At, b.FromEvent = e.Time, true
			break
		}
	}
	return b, nil
}

// LoopGuard: the kernel's spanning tree, set on by Setup.
func (b *linuxBridge) LoopGuard() string {
	return fmt.Sprintf("the kernel's spanning tree (stp_state 1, hello_time %v, forward_delay %v, the kernel's least): the bridge's own BPDU comes back by the loop's other port, "+
		"which it puts in state blocking (the Linux bridge has no loop detection of its own); read from `bridge -j link show`, so the time is the read's", stpHello, stpForwardDelay)
}

// LoopBlocked: a port of the loop in the spanning tree's state blocking.
func (b *linuxBridge) LoopBlocked(ctx context.Context, t *Topo) (Blocked, error) {
	var bl Blocked
	states, err := bridgePortStates(ctx, t.DUT)
	if err != nil {
		return bl, err
	}
	now := time.Now()
	for _, p := range t.Loop.Ports {
		if s := states[p]; s == "blocking" || s == "disabled" {
			bl = Blocked{Port: p, Why: "stp " + s, At: now}
		}
	}
	return bl, nil
}

// bridgePortStates are the states of the bridge ports of ns, by port.
func bridgePortStates(ctx context.Context, ns *NS) (map[string]string, error) {
	out, err := ns.Run(ctx, "bridge", "-j", "link", "show")
	if err != nil {
		return nil, fmt.Errorf("bridge link show in %s: %w", ns.Name, err)
	}
	var ports []struct {
		Name  string `json:"ifname"`
		State string `json:"state"`
	}
	if err := json.Unmarshal([]byte(out), &ports); err != nil {
		return nil, fmt.Errorf("bridge -j link show in %s: %w: %s", ns.Name, err, FirstLine(out))
	}
	m := map[string]string{}
	for _, p := range ports {
		m[p.Name] = p.State
	}
	return m, nil
}

// stpOn turns the kernel's spanning tree on in the bridge br of t's DUT
// and waits until every port of it forwards (listening, then learning,
// each forward_delay).
func stpOn(ctx context.Context, t *Topo, br Bridge) error {
	cs := func(d time.Duration) string { return fmt.Sprint(int(d / (10 * time.Millisecond))) }
	if _, err := t.DUT.Run(ctx, "ip", "link", "set", br.Name, "type", "bridge",
		"forward_delay", cs(stpForwardDelay), "hello_time", cs(stpHello), "stp_state", "1"); err != nil {
		return fmt.Errorf("spanning tree on %s: %w", br.Name, err)
	}
	limit := 3*stpForwardDelay + 5*time.Second
	for deadline := time.Now().Add(limit); ; {
		states, err := bridgePortStates(ctx, t.DUT)
		if err != nil {
			return err
		}
		var waiting []string
		for _, p := range br.Ports {
			if states[p] != "forwarding" {
				waiting = append(waiting, p+" "+states[p])
			}
		}
		if len(waiting) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("spanning tree on %s: ports not forwarding after %v: %v", br.Name, limit, waiting)
		}
		SleepCtx(ctx, 100*time.Millisecond)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}
