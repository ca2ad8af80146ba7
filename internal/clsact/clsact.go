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
// A daemon's filter is its own by its Place: priority Prio, a handle and a
// name of that daemon's (PlaceOf its instance), kind bpf, on the ingress
// of the clsact qdisc, any protocol. Two daemons whose ports share an
// interface have two places: neither replaces, adopts or removes the
// other's filter. A filter at a daemon's place is taken over (replaced)
// by its next attach; a frame meets the old program or the new one, never
// none. A filter holds its program, unlike a link that closes with the
// process that made it: it stays until it is removed, or its interface
// goes.
//
// Every function acts in the calling thread's network namespace.
package clsact

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Prio is the priority of trestle's filters: the first, as a tcx program
// runs before any clsact filter. NamePrefix begins the name `tc filter
// show` gives each.
const (
	Prio       = 1
	NamePrefix = "trestle"
)

// Place is where one daemon's filters sit on an interface's ingress.
type Place struct {
	Handle uint32
	Name   string
}

// PlaceOf is the place of the daemon named instance (instance.Name): the
// name says whose it is, the handle (from the name) keeps two daemons'
// filters apart at one priority.
func PlaceOf(instance string) Place {
	name := NamePrefix
	if instance != "" {
		name += "-" + instance
	}
	h := uint32(2166136261) // FNV-1a
	for i := 0; i < len(name); i++ {
		h ^= uint32(name[i])
		h *= 16777619
	}
	return Place{Handle: h | 1, Name: name}
}

var (
	// ErrGone: the interface is not there (deleted, or in another
	// namespace).
	ErrGone = errors.New("no such interface")
	// ErrUnsupported: this kernel has no clsact qdisc or no bpf filter
	// (their modules absent): no filter can be attached anywhere.
	ErrUnsupported = errors.New("the kernel has no clsact qdisc or cls_bpf filter")
)

func qdisc(ifindex int) *netlink.Clsact {
	return &netlink.Clsact{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: ifindex, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT}}
}

func filter(ifindex int, pl Place, prog *ebpf.Program) *netlink.BpfFilter {
	f := &netlink.BpfFilter{
		FilterAttrs:  netlink.FilterAttrs{LinkIndex: ifindex, Parent: netlink.HANDLE_MIN_INGRESS, Handle: pl.Handle, Priority: Prio, Protocol: unix.ETH_P_ALL},
		Fd:           -1,
		Name:         pl.Name,
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

// kind maps the kernel's answer to a qdisc or filter of a kind it does
// not have (ENOENT: no such kind, its module not loaded; EOPNOTSUPP).
func kind(err error) error {
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EOPNOTSUPP) {
		return fmt.Errorf("%w: %w", ErrUnsupported, err)
	}
	return gone(err)
}

// Attach puts prog on ifindex's ingress, replacing the filter at pl if
// there is one, and makes the clsact qdisc when the interface has none
// (madeQdisc: Detach may take it away again). On an error nothing it made
// is left; ErrUnsupported says no interface can have one.
func Attach(ifindex int, pl Place, prog *ebpf.Program) (madeQdisc bool, err error) {
	switch err := netlink.QdiscAdd(qdisc(ifindex)); {
	case err == nil:
		madeQdisc = true
	case errors.Is(err, unix.EEXIST):
	default:
		return false, fmt.Errorf("add a clsact qdisc to ifindex %d: %w", ifindex, kind(err))
	}
	if err := netlink.FilterReplace(filter(ifindex, pl, prog)); err != nil {
		if madeQdisc {
			_ = netlink.QdiscDel(qdisc(ifindex))
		}
		return false, fmt.Errorf("add the tc filter to ifindex %d: %w", ifindex, kind(err))
	}
	return madeQdisc, nil
}

// Replace moves the filter at pl on ifindex to prog in place: each frame
// meets one program or the other.
func Replace(ifindex int, pl Place, prog *ebpf.Program) error {
	if _, ok, err := Program(ifindex, pl); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("ifindex %d has no tc filter %s to move", ifindex, pl.Name)
	}
	if err := netlink.FilterReplace(filter(ifindex, pl, prog)); err != nil {
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

// trestles are the ingress bpf filters at trestle's priority whose name
// is a daemon's.
func trestles(ifindex int) ([]*netlink.BpfFilter, error) {
	fs, err := filters(ifindex, netlink.HANDLE_MIN_INGRESS)
	if err != nil {
		return nil, err
	}
	var out []*netlink.BpfFilter
	for _, f := range fs {
		b, ok := f.(*netlink.BpfFilter)
		if !ok || b.Attrs().Priority != Prio || b.Attrs().Parent != netlink.HANDLE_MIN_INGRESS {
			continue
		}
		if b.Name == NamePrefix || strings.HasPrefix(b.Name, NamePrefix+"-") {
			out = append(out, b)
		}
	}
	return out, nil
}

// Program is the program the filter at pl on ifindex runs; ok is false
// when the interface has no such filter.
func Program(ifindex int, pl Place) (id ebpf.ProgramID, ok bool, err error) {
	fs, err := trestles(ifindex)
	if err != nil {
		return 0, false, err
	}
	for _, b := range fs {
		if b.Attrs().Handle == pl.Handle && b.Name == pl.Name {
			return ebpf.ProgramID(b.Id), true, nil
		}
	}
	return 0, false, nil
}

// Any lists the programs of every daemon's filter on ifindex (a test's
// check that none is left behind).
func Any(ifindex int) ([]ebpf.ProgramID, error) {
	fs, err := trestles(ifindex)
	if err != nil {
		return nil, err
	}
	ids := make([]ebpf.ProgramID, 0, len(fs))
	for _, b := range fs {
		ids = append(ids, ebpf.ProgramID(b.Id))
	}
	return ids, nil
}

// Detach removes the filter at pl from ifindex, and then the clsact qdisc
// too when dropQdisc says Attach made it and no filter is left on it. An
// interface that is gone, or that has no such filter, is no error.
func Detach(ifindex int, pl Place, dropQdisc bool) error {
	err := netlink.FilterDel(filter(ifindex, pl, nil))
	switch {
	case err == nil, errors.Is(err, unix.ENOENT):
	case errors.Is(err, unix.ENODEV):
		return nil
	case errors.Is(err, unix.EINVAL):
		// No clsact qdisc, or no filter at that priority: nothing of
		// ours is there.
		if _, ok, perr := Program(ifindex, pl); perr == nil && !ok {
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
