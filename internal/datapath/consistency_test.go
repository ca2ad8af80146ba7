package datapath

import (
	"encoding/binary"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	tbpf "github.com/trestle/trestle/internal/bpf"
	"github.com/trestle/trestle/internal/mode"
	"github.com/trestle/trestle/internal/progrun"
)

// onCPU runs f in the rig's namespace pinned to one CPU.
func (r *rig) onCPU(cpu int, f func() error) error {
	return r.ns.Do(func() error {
		var was, one unix.CPUSet
		if err := unix.SchedGetaffinity(0, &was); err != nil {
			return err
		}
		one.Set(cpu)
		if err := unix.SchedSetaffinity(0, &one); err != nil {
			return err
		}
		defer unix.SchedSetaffinity(0, &was)
		return f()
	})
}

// Defect 10: a bridge rewritten while frames flood through it on another
// CPU. An array value is written in place, so without two copies a frame
// could read the new port count with the old port list (a hole: a frame
// counted as sent to slot 0). Frames must see one whole bridge or the other.
func TestBridgeRewriteIsWhole(t *testing.T) {
	if n, _ := ebpfPossibleCPUs(); n < 2 {
		t.Skip("needs two CPUs: one writes the bridge, the other floods")
	}
	forEachMode(t, func(t *testing.T, m tmode) {
		r := newRig(t, m, 1024, [4]uint32{})
		three := []PortInfo{{Ifindex: r.port[1], Bridge: 1, Slot: 1}, {Ifindex: r.port[2], Bridge: 1, Slot: 2}, {Ifindex: r.port[3], Bridge: 1, Slot: 3}}
		r.prog() // loaded before the writer starts, which the load would race
		var stop atomic.Bool
		writes := make(chan int, 1)
		done := make(chan error, 1)
		go func() {
			n := 0
			done <- r.onCPU(1, func() error {
				for !stop.Load() {
					ports := three
					if n%2 == 1 {
						ports = three[:2] // a shorter list: the old code left a hole
					}
					if err := r.dp.SetBridge(BridgeInfo{ID: 1, Name: "br0", MaxEntries: 1024, Ports: ports}); err != nil {
						return err
					}
					n++
				}
				return nil
			})
			writes <- n
		}()
		data := ipv4(bcast, macA)
		deadline := time.Now().Add(2 * time.Second)
		for time.Now().Before(deadline) {
			if err := r.onCPU(0, func() error {
				_, err := r.runRepeat(1, data, 50000)
				return err
			}); err != nil {
				t.Fatal(err)
			}
		}
		stop.Store(true)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		n := <-writes
		s := r.stats(1)
		if s.C[tbpf.Flooded] == 0 || n < 10 {
			t.Fatalf("the test did not run: %d floods, %d bridge writes", s.C[tbpf.Flooded], n)
		}
		if hole := r.stats(0).C[tbpf.TxPackets]; hole != 0 {
			t.Errorf("%d flooded frames met a half-written bridge (%d floods, %d bridge writes)", hole, s.C[tbpf.Flooded], n)
		}
		if d := s.Drops[tbpf.TrestleTrDropReasonTR_DROP_NO_BRIDGE]; d != 0 {
			t.Errorf("%d frames found no bridge while it was rewritten", d)
		}
		t.Logf("%d floods, %d bridge writes", s.C[tbpf.Flooded], n)
	})
}

func ebpfPossibleCPUs() (int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return 0, err
	}
	return set.Count(), nil
}

// Defect 9: between a port's removal and the flush of its entries, a frame
// to a station behind it must not go out of an interface that is no longer
// a port of the bridge (in tc mode it went by ifindex, to wherever that is).
func TestEgressThatLeftTheBridge(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := newRig(t, m, 1024, [4]uint32{})
		r.run(2, ipv4(bcast, macB)) // B behind port 2
		r.wantVerdict(r.run(1, ipv4(macB, macA)), m.redirect, "to B while port 2 is a port")
		// The control plane takes port 2 out; its entries are not flushed yet.
		if err := r.ns.Do(func() error {
			if err := r.dp.SetBridge(BridgeInfo{ID: 1, Name: "br0", MaxEntries: 1024, Ports: []PortInfo{
				{Ifindex: r.port[1], Bridge: 1, Slot: 1}, {Ifindex: r.port[3], Bridge: 1, Slot: 3}}}); err != nil {
				return err
			}
			return r.dp.DelPort(r.port[2], 2)
		}); err != nil {
			t.Fatal(err)
		}
		before := r.drops(1, tbpf.TrestleTrDropReasonTR_DROP_NO_EGRESS)
		tx := r.stats(2).C[tbpf.TxPackets]
		r.wantVerdict(r.run(1, ipv4(macB, macA)), m.drop, "to B after port 2 left")
		if got := r.drops(1, tbpf.TrestleTrDropReasonTR_DROP_NO_EGRESS); got != before+1 {
			t.Errorf("no_egress drops %d, want %d", got, before+1)
		}
		if r.stats(2).C[tbpf.TxPackets] != tx {
			t.Errorf("a frame was counted as sent out of a removed port")
		}
		// The same ifindex as a port of another bridge is no egress of this one.
		if err := r.ns.Do(func() error { return r.dp.SetPort(PortInfo{Ifindex: r.port[2], Bridge: 2, Slot: 2}) }); err != nil {
			t.Fatal(err)
		}
		r.wantVerdict(r.run(1, ipv4(macB, macA)), m.drop, "to B, whose port now belongs to another bridge")
	})
}

// Defects 2 and 3: address counts are the datapath's learning less the
// control plane's deletions, each with one writer. A deletion frees its
// room at once (a port at max_macs learns the next address without waiting
// for a sweep), and what the datapath learns while the control plane
// deletes is never lost from the count.
func TestCountsAreDeltas(t *testing.T) {
	forEachMode(t, func(t *testing.T, m tmode) {
		r := newRig(t, m, 1024, [4]uint32{0, 1, 0, 0})
		r.wantVerdict(r.run(1, ipv4(bcast, macA)), m.redirect, "first address")
		r.wantVerdict(r.run(1, ipv4(bcast, macB)), m.drop, "second address over max_macs")
		if err := r.ns.Do(func() error { _, err := r.dp.DelFDB(1, 0, macA); return err }); err != nil {
			t.Fatal(err)
		}
		r.wantVerdict(r.run(1, ipv4(bcast, macB)), m.redirect, "a new address right after the old one was deleted")

		// A static entry written over a learned one gives its room back.
		r.run(2, ipv4(bcast, macC))
		if n, _ := r.dp.PortMACs(2); n != 1 {
			t.Fatalf("port 2 counts %d addresses, want 1", n)
		}
		if err := r.ns.Do(func() error {
			return r.dp.AddFDB(FDBEntry{Bridge: 1, MAC: macC, Ifindex: r.port[3], Slot: 3, Static: true})
		}); err != nil {
			t.Fatal(err)
		}
		if n, _ := r.dp.PortMACs(2); n != 0 {
			t.Errorf("port 2 counts %d addresses after its only one became static elsewhere, want 0", n)
		}

		// Learning and deleting at once: the count ends equal to the table.
		const n = 200
		done := make(chan error, 1)
		go func() {
			done <- r.onCPU(1, func() error {
				for i := 0; i < n; i += 2 {
					if _, err := r.dp.DelFDB(1, 0, net.HardwareAddr{0x02, 0xcc, 0, 0, 0, byte(i)}); err != nil && !isNotExist(err) {
						return err
					}
				}
				return nil
			})
		}()
		for i := 0; i < n; i++ {
			r.run(3, ipv4(bcast, net.HardwareAddr{0x02, 0xcc, 0, 0, 0, byte(i)}))
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		es, err := r.dp.FDB()
		if err != nil {
			t.Fatal(err)
		}
		onPort, inBridge := 0, 0
		for _, e := range es {
			if !e.Static {
				inBridge++
				if e.Slot == 3 {
					onPort++
				}
			}
		}
		if got, _ := r.dp.PortMACs(3); got != onPort {
			t.Errorf("port 3 counts %d addresses, the table holds %d", got, onPort)
		}
		if got, _ := r.dp.BridgeMACs(1); got != inBridge {
			t.Errorf("the bridge counts %d addresses, the table holds %d", got, inBridge)
		}
	})
}

func isNotExist(err error) bool { return errors.Is(err, ebpf.ErrKeyNotExist) }

// runRepeat runs one frame n times into the pipeline (see run).
func (r *rig) runRepeat(slot int, data []byte, n uint32) (time.Duration, error) {
	prog, err := r.dp.Program(mode.Mode(r.m.name))
	if err != nil {
		return 0, err
	}
	ctx := make([]byte, 24)
	binary.LittleEndian.PutUint32(ctx[4:], uint32(len(data)))
	binary.LittleEndian.PutUint32(ctx[12:], r.port[slot])
	if r.m.name == "tc" {
		ctx = make([]byte, 44)
		binary.LittleEndian.PutUint32(ctx[40:], r.port[slot])
	}
	for {
		// A signal to the thread (the Go runtime's preemption) interrupts
		// a long run; it is not restarted for us.
		d, err := progrun.Run(prog.FD(), progrun.Options{Data: data, Context: ctx, Repeat: n})
		if !errors.Is(err, unix.EINTR) {
			return d, err
		}
	}
}
