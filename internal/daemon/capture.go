package daemon

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	tbpf "github.com/trestle/trestle/internal/bpf"
	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/datapath"
)

// `trestle capture`: a stream of the frames of one port. The daemon loads
// the capture build of the programs and moves every attachment to it while
// the capture runs, and back when it ends: when the client stops it or goes
// away, when the daemon stops. One capture at a time.

// capturer is a dataplane that can capture (internal/datapath).
type capturer interface {
	StartCapture(datapath.CaptureSpec) (*datapath.Capture, error)
}

// captureState is the running capture.
type captureState struct {
	c            *datapath.Capture
	bridge, port string
}

// captureStream serves one capture request.
func (d *Daemon) captureStream(ctx context.Context, req ctl.Request, s *ctl.Stream) (err error) {
	var c *datapath.Capture
	defer func() {
		if r := recover(); r != nil {
			d.log.Error("a capture failed inside the daemon", "panic", r)
			err = fmt.Errorf("capture: internal error: %v", r)
		}
		if c != nil {
			d.endCaptureSafely(c)
		}
	}()
	c, hdr, err := d.startCapture(req)
	if err != nil {
		return err
	}
	if err := s.Header(hdr); err != nil {
		return nil // the client is gone
	}
	var sent uint64
	for {
		select {
		case <-ctx.Done():
		case <-s.Done():
		default:
			f, err := c.Read(time.Now().Add(200 * time.Millisecond))
			if errors.Is(err, datapath.ErrCaptureTimeout) {
				if s.Flush() != nil {
					return nil
				}
				continue
			}
			if err != nil {
				// The capture was closed under us: the daemon stops.
				break
			}
			rec := ctl.CaptureRecord{TimeNs: f.Time.UnixNano(), Dir: f.Dir, Verdict: f.Verdict, Reason: uint8(f.Reason),
				Beyond: f.Beyond, Egress: f.Egress, Len: uint32(f.Len), Data: f.Data}
			if s.Record(rec) != nil {
				return nil
			}
			sent++
			if c.Pending() == 0 && s.Flush() != nil {
				return nil
			}
			continue
		}
		break
	}
	lost, lerr := c.Lost()
	d.endCapture(c)
	c = nil
	end := ctl.CaptureEnd{Captured: sent, Lost: lost}
	if lerr != nil {
		end.Error = lerr.Error()
	}
	_ = s.End(end)
	return nil
}

// startCapture finds the port, loads the capture build and moves every
// attachment to it.
func (d *Daemon) startCapture(req ctl.Request) (*datapath.Capture, ctl.CaptureHeader, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var hdr ctl.CaptureHeader
	if d.closed {
		return nil, hdr, errors.New("capture: the daemon is stopping")
	}
	if d.capture != nil {
		return nil, hdr, fmt.Errorf("capture: port %q of bridge %q is being captured already: one capture at a time", d.capture.port, d.capture.bridge)
	}
	in, out := true, true
	switch req.Direction {
	case "", "both":
	case "in":
		out = false
	case "out":
		in = false
	default:
		return nil, hdr, fmt.Errorf("capture: direction %q: use in, out or both", req.Direction)
	}
	bs, err := d.sortedBridges(req.Bridge)
	if err != nil {
		return nil, hdr, fmt.Errorf("capture: %w", err)
	}
	var found []*portState
	var names []string
	for _, b := range bs {
		if p := b.port(req.Port); p != nil {
			found = append(found, p)
			names = append(names, fmt.Sprintf("%q", b.cfg.Name))
		}
	}
	switch {
	case len(found) == 0 && req.Bridge != "":
		return nil, hdr, fmt.Errorf("capture: bridge %q has no port %q", req.Bridge, req.Port)
	case len(found) == 0:
		return nil, hdr, fmt.Errorf("capture: no bridge has a port %q", req.Port)
	case len(found) > 1:
		return nil, hdr, fmt.Errorf("capture: bridges %s each have a port %q: say which with --bridge", strings.Join(names, " and "), req.Port)
	}
	p := found[0]
	b := p.bridge
	if p.cfg.IsPatch() {
		return nil, hdr, fmt.Errorf("capture: port %q of bridge %q is a patch port, which has no frames of its own: capture a port of an interface", p.name(), b.cfg.Name)
	}
	if p.mode == "" {
		return nil, hdr, fmt.Errorf("capture: port %q of bridge %q is down (%s): nothing to capture", p.name(), b.cfg.Name, p.why)
	}
	if d.capturer == nil {
		return nil, hdr, errors.New("capture: this dataplane cannot capture")
	}
	spec := datapath.CaptureSpec{Ifindex: uint32(p.ifindex), Bridge: b.id, In: in, Out: out, Snaplen: req.Snaplen}
	for _, q := range b.ports {
		spec.Walks = spec.Walks || q.cfg.IsPatch()
	}
	c, err := d.capturer.StartCapture(spec)
	if err != nil {
		return nil, hdr, fmt.Errorf("capture port %q of bridge %q: %w", p.name(), b.cfg.Name, err)
	}
	d.capture = &captureState{c: c, bridge: b.cfg.Name, port: p.name()}
	if err := d.upgradeAll(d.attached); err != nil {
		d.endCaptureLocked(c)
		return nil, hdr, fmt.Errorf("capture port %q of bridge %q: move the ports to the capture's programs: %w", p.name(), b.cfg.Name, err)
	}
	d.log.Info("capture started", "bridge", b.cfg.Name, "port", p.name(), "in", in, "out", out)
	hdr = ctl.CaptureHeader{Bridge: b.cfg.Name, Port: p.name(), Mode: string(p.mode), Snaplen: spec.Snaplen,
		Ports: map[uint32]string{}, Reasons: tbpf.DropNames()}
	if hdr.Snaplen <= 0 || hdr.Snaplen > datapath.SnapMax {
		hdr.Snaplen = datapath.SnapMax
	}
	for _, ob := range d.bridges {
		for _, q := range ob.ports {
			if q.ifindex != 0 && !q.cfg.IsPatch() {
				hdr.Ports[uint32(q.ifindex)] = q.name()
			}
		}
	}
	return c, hdr, nil
}

// endCaptureSafely is endCapture on the way out of a stream that failed.
func (d *Daemon) endCaptureSafely(c *datapath.Capture) {
	defer func() {
		if r := recover(); r != nil {
			d.log.Error("ending a capture failed inside the daemon", "panic", r)
		}
	}()
	d.endCapture(c)
}

// endCapture moves every attachment back to the programs without capture
// and unloads the capture build; it does nothing when c has ended already.
func (d *Daemon) endCapture(c *datapath.Capture) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.endCaptureLocked(c)
}

func (d *Daemon) endCaptureLocked(c *datapath.Capture) {
	if d.capture == nil || (c != nil && d.capture.c != c) {
		return
	}
	cs := d.capture
	if err := cs.c.Stop(); err != nil {
		d.log.Error("capture ended, but the ports keep the capture's program", "err", err)
	} else if err := d.upgradeAll(d.attached); err != nil {
		// They capture nothing (the capture's config is cleared), but
		// they run its build until the next reload moves them.
		d.log.Error("capture ended, but a port keeps the capture's program", "err", err)
	}
	cs.c.Close()
	d.capture = nil
	d.log.Info("capture ended", "bridge", cs.bridge, "port", cs.port)
}
