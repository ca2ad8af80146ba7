package clsact_test

import (
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/trestle/trestle/internal/clsact"
	"github.com/trestle/trestle/internal/testutil"
)

// counter is a sched_cls program that counts the frames it sees in its
// own one-slot array and returns verdict.
type counter struct {
	prog  *ebpf.Program
	count *ebpf.Map
	id    ebpf.ProgramID
}

func newCounter(t *testing.T, verdict int32) counter {
	t.Helper()
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	p, id := testutil.LoadProgram(t, &ebpf.ProgramSpec{Type: ebpf.SchedCLS, License: "GPL", Instructions: asm.Instructions{
		asm.LoadMapPtr(asm.R1, m.FD()),
		asm.StoreImm(asm.RFP, -4, 0, asm.Word),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -4),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "out"),
		asm.Mov.Imm(asm.R1, 1),
		asm.StoreXAdd(asm.R0, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R0, verdict).WithSymbol("out"),
		asm.Return(),
	}})
	return counter{p, m, id}
}

func (c counter) seen() uint64 {
	var n uint64
	_ = c.count.Lookup(uint32(0), &n)
	return n
}

// sees sends frames into xb, which arrive at xa's ingress, until c has
// seen one more than before.
func sees(ns *testutil.NS, c counter) error {
	before := c.seen()
	frame := testutil.Frame(net.HardwareAddr{2, 0, 0, 0, 0, 2}, net.HardwareAddr{2, 0, 0, 0, 0, 1}, 0x88b5, make([]byte, 46))
	for range 50 {
		if err := ns.RawSend("xb", frame); err != nil {
			return err
		}
		if c.seen() > before {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("program %d saw no frame", c.id)
}

// hasClsact says whether ifindex has a clsact qdisc.
func hasClsact(ifindex int) (bool, error) {
	qs, err := netlink.QdiscList(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Index: ifindex}})
	if err != nil {
		return false, err
	}
	for _, q := range qs {
		if q.Type() == "clsact" {
			return true, nil
		}
	}
	return false, nil
}

// pl is the tests' daemon's place.
var pl = clsact.PlaceOf("ns1-test")

// runs says which program trestle's filter on ifindex runs, or an error
// when that is not want (0: none).
func runs(ifindex int, want ebpf.ProgramID) error {
	id, ok, err := clsact.Program(ifindex, pl)
	switch {
	case err != nil:
		return err
	case want == 0 && ok:
		return fmt.Errorf("ifindex %d has a filter running %d, want none", ifindex, id)
	case want != 0 && (!ok || id != want):
		return fmt.Errorf("ifindex %d: filter %v running %d, want %d", ifindex, ok, id, want)
	}
	return nil
}

func up(names ...string) ([]int, error) {
	var out []int
	for _, n := range names {
		l, err := netlink.LinkByName(n)
		if err == nil {
			err = netlink.LinkSetUp(l)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, l.Attrs().Index)
	}
	return out, nil
}

// The filter runs its program on every frame the interface takes in, in
// direct-action mode (its verdict is the frame's); a second attach or a
// Replace moves it to another program; a detach takes it and the qdisc
// the attach made away, and is no error twice or on a gone interface.
func TestAttachReplaceDetach(t *testing.T) {
	testutil.RequireNetns(t)
	ns := testutil.NewNS(t, "cls")
	one, two := newCounter(t, 2 /* TC_ACT_SHOT */), newCounter(t, 2)
	err := ns.Do(func() error {
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "xa"}, PeerName: "xb"}); err != nil {
			return err
		}
		idx, err := up("xa", "xb")
		if err != nil {
			return err
		}
		xa := idx[0]
		if err := runs(xa, 0); err != nil {
			return err
		}
		if made, err := clsact.Attach(xa, pl, one.prog); err != nil || !made {
			return fmt.Errorf("Attach to an interface without a qdisc: made %v, %v", made, err)
		}
		if err := runs(xa, one.id); err != nil {
			return err
		}
		if err := sees(ns, one); err != nil {
			return err
		}

		// Taken over by the next attach, the qdisc kept.
		if made, err := clsact.Attach(xa, pl, two.prog); err != nil || made {
			return fmt.Errorf("Attach over trestle's filter: made %v, %v", made, err)
		}
		if err := runs(xa, two.id); err != nil {
			return err
		}
		if err := sees(ns, two); err != nil {
			return err
		}
		if err := clsact.Replace(xa, pl, one.prog); err != nil {
			return err
		}
		if err := runs(xa, one.id); err != nil {
			return err
		}

		if err := clsact.Detach(xa, pl, true); err != nil {
			return err
		}
		if err := runs(xa, 0); err != nil {
			return err
		}
		if has, err := hasClsact(xa); err != nil || has {
			return fmt.Errorf("the qdisc the attach made is left (%v, %v)", has, err)
		}
		if err := clsact.Detach(xa, pl, true); err != nil {
			return fmt.Errorf("a second Detach: %w", err)
		}
		if err := clsact.Replace(xa, pl, one.prog); err == nil {
			return errors.New("Replace with no filter to move worked")
		}

		// A gone interface: attach says so, detach is done.
		if err := netlink.LinkDel(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Index: xa}}); err != nil {
			return err
		}
		if _, err := clsact.Attach(xa, pl, one.prog); !errors.Is(err, clsact.ErrGone) {
			return fmt.Errorf("Attach to a gone interface: %v, want ErrGone", err)
		}
		if err := clsact.Detach(xa, pl, true); err != nil {
			return fmt.Errorf("Detach of a gone interface: %w", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A clsact qdisc that was there before stays after a detach, and so does
// one that another filter was added to; an attach that fails leaves no
// qdisc of its own behind.
func TestQdiscOfOthers(t *testing.T) {
	testutil.RequireNetns(t)
	ns := testutil.NewNS(t, "clq")
	c := newCounter(t, -1)
	xdp, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "GPL", Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 2), asm.Return()}})
	if err != nil {
		t.Fatal(err)
	}
	defer xdp.Close()
	err = ns.Do(func() error {
		for _, n := range []string{"d1", "d2", "d3"} {
			if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: n}, PeerName: n + "p"}); err != nil {
				return err
			}
		}
		idx, err := up("d1", "d2", "d3")
		if err != nil {
			return err
		}
		d1, d2, d3 := idx[0], idx[1], idx[2]

		// d1: the qdisc was there.
		if err := netlink.QdiscAdd(&netlink.Clsact{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: d1, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT}}); err != nil {
			return err
		}
		if made, err := clsact.Attach(d1, pl, c.prog); err != nil || made {
			return fmt.Errorf("Attach beside a qdisc: made %v, %v", made, err)
		}
		if err := clsact.Detach(d1, pl, false); err != nil {
			return err
		}
		if has, err := hasClsact(d1); err != nil || !has {
			return fmt.Errorf("a qdisc that was there before is gone (%v)", err)
		}

		// d2: the attach made the qdisc, someone added a filter to it.
		if _, err := clsact.Attach(d2, pl, c.prog); err != nil {
			return err
		}
		other := &netlink.BpfFilter{FilterAttrs: netlink.FilterAttrs{LinkIndex: d2, Parent: netlink.HANDLE_MIN_EGRESS, Handle: 1, Priority: 7, Protocol: unix.ETH_P_ALL}, Fd: c.prog.FD(), Name: "other", DirectAction: true}
		if err := netlink.FilterAdd(other); err != nil {
			return err
		}
		if err := clsact.Detach(d2, pl, true); err != nil {
			return err
		}
		if has, err := hasClsact(d2); err != nil || !has {
			return fmt.Errorf("a qdisc that holds another's filter was taken away (%v)", err)
		}

		// d2 again: another's bpf filter at trestle's priority (handle
		// 1) runs beside ours and outlives our detach; another daemon's
		// place on the same interface is its own.
		foreign := &netlink.BpfFilter{FilterAttrs: netlink.FilterAttrs{LinkIndex: d2, Parent: netlink.HANDLE_MIN_INGRESS, Handle: 1, Priority: clsact.Prio, Protocol: unix.ETH_P_ALL}, Fd: c.prog.FD(), Name: "other", DirectAction: true}
		if err := netlink.FilterAdd(foreign); err != nil {
			return err
		}
		second := clsact.PlaceOf("ns1-second")
		if second == pl {
			return errors.New("two daemons have one place")
		}
		if _, err := clsact.Attach(d2, pl, c.prog); err != nil {
			return err
		}
		if _, err := clsact.Attach(d2, second, c.prog); err != nil {
			return err
		}
		if err := clsact.Detach(d2, second, true); err != nil {
			return err
		}
		if err := runs(d2, c.id); err != nil {
			return fmt.Errorf("another daemon's detach: %w", err)
		}
		if ids, err := clsact.Any(d2); err != nil || len(ids) != 1 {
			return fmt.Errorf("trestle filters left on d2: %v, %v; want ours alone", ids, err)
		}
		if err := clsact.Detach(d2, pl, true); err != nil {
			return err
		}
		fs, err := netlink.FilterList(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Index: d2}}, netlink.HANDLE_MIN_INGRESS)
		if err != nil || len(fs) != 1 || fs[0].Attrs().Handle != 1 {
			return fmt.Errorf("another's filter at trestle's priority after our detach: %v, %v", fs, err)
		}

		// d1: another's filter at trestle's priority for IPv4 only: the
		// kernel keeps one protocol a priority, so our attach fails, for
		// that interface alone (not ErrUnsupported).
		ip4 := &netlink.BpfFilter{FilterAttrs: netlink.FilterAttrs{LinkIndex: d1, Parent: netlink.HANDLE_MIN_INGRESS, Handle: 1, Priority: clsact.Prio, Protocol: unix.ETH_P_IP}, Fd: c.prog.FD(), Name: "other", DirectAction: true}
		if err := netlink.FilterAdd(ip4); err != nil {
			return err
		}
		if _, err := clsact.Attach(d1, pl, c.prog); err == nil || errors.Is(err, clsact.ErrUnsupported) {
			return fmt.Errorf("attach beside another protocol's filter at our priority: %v, want a failure of this interface", err)
		}

		// d3: the attach fails (not a tc program); nothing is left.
		if _, err := clsact.Attach(d3, pl, xdp); err == nil {
			return errors.New("an XDP program was attached as a tc filter")
		}
		if has, err := hasClsact(d3); err != nil || has {
			return fmt.Errorf("a failed attach left its qdisc (%v)", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
