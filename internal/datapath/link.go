package datapath

import (
	"errors"
	"fmt"
	"os"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/trestle/trestle/internal/clsact"
	"github.com/trestle/trestle/internal/instance"
	"github.com/trestle/trestle/internal/mode"
)

// Hook is how a program is put on an interface.
type Hook uint8

const (
	// HookLink: a BPF link, tcx at tc and the XDP link at XDP. Closing it
	// detaches the program, unless it is pinned. A tcx link's attach and
	// its detach each wait for an RCU grace period (7-15 ms here).
	HookLink Hook = iota
	// HookFilter: at tc, a clsact qdisc's filter (internal/clsact), which
	// the kernel adds and removes without waiting for a grace period: the
	// hook of ports that come and go with containers. A filter is no
	// object to pin: it holds its program until it is removed. With a pin
	// directory it outlives the daemon as a pinned link does (Release
	// keeps it), and the next daemon finds it on its interface
	// (AdoptFilter); without, Release removes it. At XDP it is HookLink:
	// XDP has no other hook.
	HookFilter
)

// Attachment is the switch program on one interface, through a BPF link
// (closing the link detaches the program, unless the link is pinned, in
// which case it stays until unpinned) or a tc filter (HookFilter).
type Attachment struct {
	Ifindex int
	Mode    mode.Mode
	Hook    Hook
	link    link.Link
	filter  *filterHold // HookFilter: nil once let go of
	pin     string      // pinned at, or ""
}

// filterHold is the daemon's hold on a HookFilter attachment.
type filterHold struct {
	// place is where on the interface the daemon put it.
	place clsact.Place
	// ownQdisc: the attach made the interface's clsact qdisc, which the
	// detach then takes away (when nothing else was added to it).
	ownQdisc bool
	// persist: it outlives the daemon (Pinned), as the datapath does.
	persist bool
	// prog is the program the filter runs, as the daemon put it there
	// (attach, adoption, upgrade): an upgrade check, which a full apply
	// makes of every attachment, asks no netlink dump of each interface.
	prog ebpf.ProgramID
}

// held says whether the daemon still holds the attachment.
func (a *Attachment) held() bool { return a != nil && (a.link != nil || a.filter != nil) }

func (a *Attachment) String() string {
	if a.Hook == HookFilter {
		return fmt.Sprintf("%s filter on ifindex %d", a.Mode, a.Ifindex)
	}
	return fmt.Sprintf("%s on ifindex %d", a.Mode, a.Ifindex)
}

// Detach takes the program off the interface.
func (a *Attachment) Detach() error {
	if !a.held() {
		return nil
	}
	var errs []error
	if a.filter != nil {
		// A filter that could not be removed is still held: a second
		// Detach tries again (a link, once closed, is gone either way).
		if err := clsact.Detach(a.Ifindex, a.filter.place, a.filter.ownQdisc); err != nil {
			return fmt.Errorf("detach %s: %w", a, err)
		}
		a.filter = nil
	} else {
		if a.pin != "" {
			if err := a.link.Unpin(); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("unpin %s: %w", a.pin, err))
			}
		}
		if err := a.link.Close(); err != nil {
			errs = append(errs, err)
		}
		a.link = nil
	}
	if len(errs) > 0 {
		return fmt.Errorf("detach %s: %w", a, errors.Join(errs...))
	}
	return nil
}

// Release lets go of the daemon's handle: a pinned program keeps running,
// one that is not pinned is detached.
func (a *Attachment) Release() error {
	if !a.held() {
		return nil
	}
	if a.filter != nil {
		if !a.filter.persist {
			return a.Detach()
		}
		a.filter = nil
		return nil
	}
	err := a.link.Close()
	a.link = nil
	return err
}

// Pinned says whether the attachment outlives the daemon.
func (a *Attachment) Pinned() bool {
	return a != nil && (a.pin != "" || a.filter != nil && a.filter.persist)
}

// ProgramID is the program the attachment runs now: a link's, as the
// kernel says; a filter's, as the daemon put it there (a filter replaced
// by another hand is not looked for).
func (a *Attachment) ProgramID() (ebpf.ProgramID, error) {
	if !a.held() {
		return 0, fmt.Errorf("%s: let go of", a)
	}
	if a.filter != nil {
		return a.filter.prog, nil
	}
	info, err := a.link.Info()
	if err != nil {
		return 0, fmt.Errorf("%s: %w", a, err)
	}
	return info.Program, nil
}

// Attach attaches the program of mode m to ifindex: XDP in native (driver)
// mode, or tc at tcx ingress (HookLink) or in a clsact filter (HookFilter).
// With a pin directory the attachment is pinned.
func (d *Datapath) Attach(ifindex int, m mode.Mode, h Hook) (*Attachment, error) {
	prog, err := d.Program(m)
	if err != nil {
		return nil, err
	}
	if h == HookFilter && m == mode.TC {
		return d.attachFilter(ifindex, prog)
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

// attachFilter attaches prog to ifindex's tc ingress in a clsact filter
// (HookFilter); with a pin directory it outlives the daemon.
func (d *Datapath) attachFilter(ifindex int, prog *ebpf.Program) (*Attachment, error) {
	id, err := d.programID(prog)
	if err != nil {
		return nil, err
	}
	own, err := clsact.Attach(ifindex, d.place, prog)
	if err != nil {
		return nil, err
	}
	return &Attachment{Ifindex: ifindex, Mode: mode.TC, Hook: HookFilter, filter: &filterHold{place: d.place, ownQdisc: own, persist: d.pin != nil, prog: id}}, nil
}

// programID is an entry point's id, asked of the kernel once: the
// upgrade check of each attachment in an apply asks for it, and the
// kernel's answer for a program of this size took 0.7 ms of CPU, on
// every CNI ADD's and DEL's way. The map's keys keep their programs from
// being collected, so a key is never another program's pointer.
func (d *Datapath) programID(prog *ebpf.Program) (ebpf.ProgramID, error) {
	if id, ok := d.progIDs.Load(prog); ok {
		return id.(ebpf.ProgramID), nil
	}
	info, err := prog.Info()
	if err != nil {
		return 0, fmt.Errorf("program %s: %w", prog, err)
	}
	id, _ := info.ID()
	d.progIDs.Store(prog, id)
	return id, nil
}

// AdoptFilter takes over the tc filter an earlier daemon left on ifindex
// (HookFilter: a filter is not pinned, so where one may be is the caller's
// to know: the ports it attached), or nil when there is none. Its detach
// takes the clsact qdisc away when nothing else is on it: whether the
// attach made it is not known.
func (d *Datapath) AdoptFilter(ifindex int) (*Attachment, error) {
	id, ok, err := clsact.Program(ifindex, d.place)
	if errors.Is(err, clsact.ErrGone) || err == nil && !ok {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &Attachment{Ifindex: ifindex, Mode: mode.TC, Hook: HookFilter, filter: &filterHold{place: d.place, ownQdisc: true, persist: d.pin != nil, prog: id}}, nil
}

// Upgrade moves an attachment to this datapath's program of its mode, in
// place (a link update: the program changes under the interface, no frame
// meets an interface without one). It does nothing when it runs it already.
func (d *Datapath) Upgrade(a *Attachment) (bool, error) {
	prog, err := d.Program(a.Mode)
	if err != nil {
		return false, err
	}
	want, err := d.programID(prog)
	if err != nil {
		return false, fmt.Errorf("upgrade %s: %w", a, err)
	}
	if cur, err := a.ProgramID(); err == nil && cur == want {
		return false, nil
	}
	if a.filter != nil {
		if err := clsact.Replace(a.Ifindex, a.filter.place, prog); err != nil {
			return false, fmt.Errorf("upgrade %s: %w", a, err)
		}
		a.filter.prog = want
	} else if err := a.link.Update(prog); err != nil {
		return false, fmt.Errorf("upgrade %s: update link: %w", a, err)
	}
	d.voidMemos(a)
	return true, nil
}

// Restore puts back a tc filter (HookFilter) that another took off its
// interface (`tc qdisc del dev IF clsact`, a common step of other tools'
// clean-up), with the program it ran; true when it did. The daemon asks
// it of every filter on a full apply (start, reload, a link event): a
// scoped one, a container's port added or removed, asks it of none.
func (d *Datapath) Restore(a *Attachment) (bool, error) {
	if a.filter == nil {
		return false, nil
	}
	id, ok, err := clsact.Program(a.Ifindex, a.filter.place)
	if err != nil || ok && id == a.filter.prog {
		return false, err
	}
	prog, err := d.Program(a.Mode)
	if err != nil {
		return false, err
	}
	own, err := clsact.Attach(a.Ifindex, a.filter.place, prog)
	if err != nil {
		return false, fmt.Errorf("restore %s: %w", a, err)
	}
	a.filter.ownQdisc = a.filter.ownQdisc || own
	a.filter.prog, err = d.programID(prog)
	return true, err
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
	if !a.held() {
		return nil
	}
	if a.filter != nil {
		a.filter.persist = false
		return nil
	}
	if a.pin == "" {
		return nil
	}
	if err := a.link.Unpin(); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("unpin %s: %w", a, err)
	}
	a.pin = ""
	return nil
}
