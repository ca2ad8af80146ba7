package datapath

import (
	"errors"
	"fmt"
	"os"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/trestle/trestle/internal/instance"
	"github.com/trestle/trestle/internal/mode"
)

// Attachment is the switch program on one interface, through a BPF link:
// closing the link detaches the program, unless the link is pinned, in which
// case it stays until unpinned.
type Attachment struct {
	Ifindex int
	Mode    mode.Mode
	link    link.Link
	pin     string // pinned at, or ""
}

func (a *Attachment) String() string {
	return fmt.Sprintf("%s on ifindex %d", a.Mode, a.Ifindex)
}

// Detach takes the program off the interface.
func (a *Attachment) Detach() error {
	if a == nil || a.link == nil {
		return nil
	}
	var errs []error
	if a.pin != "" {
		if err := a.link.Unpin(); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("unpin %s: %w", a.pin, err))
		}
	}
	if err := a.link.Close(); err != nil {
		errs = append(errs, err)
	}
	a.link = nil
	if len(errs) > 0 {
		return fmt.Errorf("detach %s: %w", a, errors.Join(errs...))
	}
	return nil
}

// Release lets go of the daemon's handle: a pinned program keeps running,
// one that is not pinned is detached.
func (a *Attachment) Release() error {
	if a == nil || a.link == nil {
		return nil
	}
	err := a.link.Close()
	a.link = nil
	return err
}

// Pinned says whether the attachment outlives the daemon.
func (a *Attachment) Pinned() bool { return a != nil && a.pin != "" }

// ProgramID is the program the link runs now.
func (a *Attachment) ProgramID() (ebpf.ProgramID, error) {
	info, err := a.link.Info()
	if err != nil {
		return 0, fmt.Errorf("%s: %w", a, err)
	}
	return info.Program, nil
}

// Attach attaches the program of mode m to ifindex: XDP in native (driver)
// mode, or tc at tcx ingress. With a pin directory the link is pinned.
func (d *Datapath) Attach(ifindex int, m mode.Mode) (*Attachment, error) {
	prog, err := d.Program(m)
	if err != nil {
		return nil, err
	}
	var l link.Link
	switch m {
	case mode.XDP:
		l, err = link.AttachXDP(link.XDPOptions{Program: prog, Interface: ifindex, Flags: link.XDPDriverMode})
	case mode.TC:
		l, err = link.AttachTCX(link.TCXOptions{Program: prog, Attach: ebpf.AttachTCXIngress, Interface: ifindex})
	}
	if err != nil {
		return nil, err
	}
	a := &Attachment{Ifindex: ifindex, Mode: m, link: l}
	if d.pin != nil {
		path := d.pin.linkPath(ifindex, m)
		// A pin left by an interface that was deleted with the daemon
		// away names a dead link: it goes.
		_ = os.Remove(path)
		if err := l.Pin(path); err != nil {
			l.Close()
			return nil, fmt.Errorf("pin the %s link of ifindex %d: %w", m, ifindex, err)
		}
		a.pin = path
	}
	return a, nil
}

// Upgrade moves an attachment to this datapath's program of its mode, in
// place (a link update: the program changes under the interface, no frame
// meets an interface without one). It does nothing when it runs it already.
func (d *Datapath) Upgrade(a *Attachment) (bool, error) {
	prog, err := d.Program(a.Mode)
	if err != nil {
		return false, err
	}
	info, err := prog.Info()
	if err != nil {
		return false, fmt.Errorf("upgrade %s: %w", a, err)
	}
	want, _ := info.ID()
	if cur, err := a.ProgramID(); err == nil && cur == want {
		return false, nil
	}
	if err := a.link.Update(prog); err != nil {
		return false, fmt.Errorf("upgrade %s: update link: %w", a, err)
	}
	d.voidMemos(a)
	return true, nil
}

// voidMemos voids every CPU's memos (bpf/lib/memo.h, lib/fdb.h) once an
// interface has left the program it ran. That program may have been
// another build's, with generations of its own (a .bss of another layout
// is copied, not shared, while the table is): what it moved or removed
// never reached this build's generations, nor a configuration written since
// reached its memos. After the last interface moves no such program is left,
// so the memos made from here on rest on what this build sees. A failure
// is logged: the link has moved all the same.
func (d *Datapath) voidMemos(a *Attachment) {
	if err := d.voidAllMemos(); err != nil {
		d.log("could not void the memos after an upgrade", "link", a.String(), "err", err)
	}
}

// AdoptedLinks are the attachments pinned by an earlier daemon that still
// hold an interface; pins of links whose interface is gone are removed.
func (d *Datapath) AdoptedLinks() ([]*Attachment, error) {
	if d.pin == nil {
		return nil, nil
	}
	return d.pin.links()
}

// linkFile names a pinned link (instance.LinkFile).
func linkFile(ifindex int, m mode.Mode) string { return instance.LinkFile(ifindex, string(m)) }

// loadLinks opens the pinned links of a pin directory that still hold an
// interface (instance.OpenLinks, which removes the pins of dead ones).
func loadLinks(dir string) ([]*Attachment, error) {
	links, err := instance.OpenLinks(dir)
	if err != nil {
		return nil, err
	}
	out := make([]*Attachment, 0, len(links))
	for _, l := range links {
		m, err := mode.Parse(l.Mode)
		if err != nil {
			l.Link.Close()
			continue
		}
		out = append(out, &Attachment{Ifindex: l.Ifindex, Mode: m, link: l.Link, pin: l.Path})
	}
	return out, nil
}

// Unpin makes a pinned attachment one that lives only while the daemon
// holds it (for a daemon without persist that adopted a persisted one).
func (a *Attachment) Unpin() error {
	if a == nil || a.pin == "" || a.link == nil {
		return nil
	}
	if err := a.link.Unpin(); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("unpin %s: %w", a, err)
	}
	a.pin = ""
	return nil
}
