// Package clsact puts a tc program on an interface's ingress the classic
// way: a cls_bpf filter in direct-action mode on the interface's clsact
// qdisc, made when the interface has none. It is the attach that a port
// added at run time (a container's) does not wait for: a tcx link swaps
// the interface's program array and then waits for an RCU grace period
// (synchronize_rcu in tcx_entry_sync, holding the RTNL lock: 7-15 ms on
// a 2-CPU machine at HZ=250), and its release waits for another. Adding a
// filter to a clsact qdisc, or removing one, waits for none (0.1-0.3 ms
// here): the qdisc's filter list is swapped under RCU and the old one
// freed later (docs/performance.md "Pod churn").
//
// The filter is trestle's by its place: priority Prio, handle Handle, kind
// bpf, on the ingress of the clsact qdisc, any protocol. A filter there is
// taken over (replaced) by the next attach; a frame meets the old program
// or the new one, never none. A filter holds its program, unlike a link
// that closes with the process that made it: it stays until it is removed,
// or its interface goes.
//
// Every function acts in the calling thread's network namespace.
package clsact

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Prio and Handle place trestle's filter; the priority is the first, as
// a tcx program runs before any clsact filter. Name is what `tc filter
// show` calls it.
const (
	Prio   = 1
	Handle = 0x7472 // "tr"
	Name   = "trestle"
)

// ErrGone: the interface is not there (deleted, or in another namespace).
var ErrGone = errors.New("no such interface")

func qdisc(ifindex int) *netlink.Clsact {
	return &netlink.Clsact{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: ifindex, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT}}
}

func filter(ifindex int, prog *ebpf.Program) *netlink.BpfFilter {
	f := &netlink.BpfFilter{
		FilterAttrs:  netlink.FilterAttrs{LinkIndex: ifindex, Parent: netlink.HANDLE_MIN_INGRESS, Handle: Handle, Priority: Prio, Protocol: unix.ETH_P_ALL},
		Fd:           -1,
		Name:         Name,
		DirectAction: true,
	}
	if prog != nil {
		f.Fd = prog.FD()
	}
	return f
}

// gone maps the kernel's answer for an interface that is not there.
func gone(err error) error {
	if errors.Is(err, unix.ENODEV) {
		return fmt.Errorf("%w: %w", ErrGone, err)
	}
	return err
}

// Attach puts prog on ifindex's ingress, replacing trestle's filter there
// if it has one, and makes the clsact qdisc when the interface has none
// (madeQdisc: Detach may take it away again). On an error nothing it made
// is left.
func Attach(ifindex int, prog *ebpf.Program) (madeQdisc bool, err error) {
	switch err := netlink.QdiscAdd(qdisc(ifindex)); {
	case err == nil:
		madeQdisc = true
	case errors.Is(err, unix.EEXIST):
	default:
		return false, fmt.Errorf("add a clsact qdisc to ifindex %d: %w", ifindex, gone(err))
	}
	if err := netlink.FilterReplace(filter(ifindex, prog)); err != nil {
		if madeQdisc {
			_ = netlink.QdiscDel(qdisc(ifindex))
		}
		return false, fmt.Errorf("add the tc filter to ifindex %d: %w", ifindex, gone(err))
	}
	return madeQdisc, nil
}

// Replace moves trestle's filter on ifindex to prog in place: each frame
// meets one program or the other.
func Replace(ifindex int, prog *ebpf.Program) error {
	if _, ok, err := Program(ifindex); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("ifindex %d has no trestle tc filter to move", ifindex)
	}
	if err := netlink.FilterReplace(filter(ifindex, prog)); err != nil {
		return fmt.Errorf("replace the tc filter of ifindex %d: %w", ifindex, gone(err))
	}
	return nil
}

// filters lists the filters of one side (ingress or egress) of ifindex's
// clsact qdisc; none when it has no such qdisc.
func filters(ifindex int, parent uint32) ([]netlink.Filter, error) {
	l := &netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Index: ifindex}}
	var err error
	for range 5 {
		var fs []netlink.Filter
		fs, err = netlink.FilterList(l, parent)
		switch {
		case err == nil:
			return fs, nil
		case errors.Is(err, netlink.ErrDumpInterrupted):
			continue
		case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOENT):
			// No clsact qdisc: no filters.
			return nil, nil
		}
		break
	}
	return nil, fmt.Errorf("list the tc filters of ifindex %d: %w", ifindex, gone(err))
}

func ours(f netlink.Filter) (*netlink.BpfFilter, bool) {
	b, ok := f.(*netlink.BpfFilter)
	if !ok {
		return nil, false
	}
	a := b.Attrs()
	return b, a.Handle == Handle && a.Priority == Prio && a.Parent == netlink.HANDLE_MIN_INGRESS
}

// Program is the program trestle's filter on ifindex runs; ok is false
// when the interface has no such filter.
func Program(ifindex int) (id ebpf.ProgramID, ok bool, err error) {
	fs, err := filters(ifindex, netlink.HANDLE_MIN_INGRESS)
	if err != nil {
		return 0, false, err
	}
	for _, f := range fs {
		if b, mine := ours(f); mine {
			return ebpf.ProgramID(b.Id), true, nil
		}
	}
	return 0, false, nil
}

// Detach removes trestle's filter from ifindex, and then the clsact qdisc
// too when dropQdisc says Attach made it and no filter is left on it. An
// interface that is gone, or that has no such filter, is no error.
func Detach(ifindex int, dropQdisc bool) error {
	err := netlink.FilterDel(filter(ifindex, nil))
	switch {
	case err == nil, errors.Is(err, unix.ENOENT):
	case errors.Is(err, unix.ENODEV):
		return nil
	case errors.Is(err, unix.EINVAL):
		// No clsact qdisc, or no filter at that priority: nothing of
		// ours is there.
		if _, ok, perr := Program(ifindex); perr == nil && !ok {
			err = nil
			break
		}
		return fmt.Errorf("remove the tc filter of ifindex %d: %w", ifindex, err)
	default:
		return fmt.Errorf("remove the tc filter of ifindex %d: %w", ifindex, err)
	}
	if !dropQdisc {
		return nil
	}
	for _, side := range []uint32{netlink.HANDLE_MIN_INGRESS, netlink.HANDLE_MIN_EGRESS} {
		fs, err := filters(ifindex, side)
		if errors.Is(err, ErrGone) {
			return nil
		}
		if err != nil || len(fs) > 0 {
			return err // another's filters: the qdisc is theirs too now
		}
	}
	if err := netlink.QdiscDel(qdisc(ifindex)); err != nil && !errors.Is(err, unix.ENODEV) && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("remove the clsact qdisc of ifindex %d: %w", ifindex, err)
	}
	return nil
}
