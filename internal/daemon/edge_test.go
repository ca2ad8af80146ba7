package daemon

import (
	"encoding/binary"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	tbpf "github.com/trestle/trestle/internal/bpf"
	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/datapath"
)

// edgeWorld is a bridge br0 of p1, p2, p3 with bpdu_guard on p1 and
// loop_detect on the bridge, applied as the file.
func edgeWorld(t *testing.T) *world {
	w := newWorld(t)
	for _, n := range []string{"p1", "p2", "p3"} {
		w.sys.add(n, "veth")
	}
	body := strings.Replace(bridges("br0=p1,p2,p3"), "name = \"br0\"\n", "name = \"br0\"\nloop_detect = true\nloop_retry = \"5s\"\n", 1)
	body = strings.Replace(body, "interface = \"p1\"\n", "interface = \"p1\"\nbpdu_guard = true\n", 1)
	w.applyAsFile(body)
	return w
}

// floods are the ports of br0's flood list, by slot.
func (w *world) floods() []uint16 {
	var out []uint16
	for _, p := range w.dp.bridges[w.d.bridges["br0"].id].Ports {
		out = append(out, p.Slot)
	}
	return out
}

func (w *world) lastEvent(kind string) (ctl.Event, bool) {
	evs := w.d.recentEvents()
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Event == kind {
			return evs[i], true
		}
	}
	return ctl.Event{}, false
}

// A BPDU on a guarded port blocks it: written with TR_PORT_BLOCKED, out of
// the flood list, its entries flushed, state blocked, why bpdu_guard, an
// event; a reload keeps the block; port enable lifts it. A BPDU reported on
// a port without the guard (taken off since) blocks nothing.
func TestBPDUGuardBlocks(t *testing.T) {
	w := edgeWorld(t)
	b := w.d.bridges["br0"]
	p1, p2 := w.port("br0", "p1"), w.port("br0", "p2")
	w.dp.learn(b.id, p1.slot, p1.ifindex, "02:00:00:00:00:11", 0)
	src := net.HardwareAddr{2, 0, 0, 0, 0, 0x99}

	w.d.edgeEvent(datapath.Move{BPDU: true, Bridge: b.id, ToSlot: p2.slot, MAC: src})
	if w.port("br0", "p2").blocked != "" {
		t.Fatalf("p2 (no bpdu_guard) blocked by a BPDU")
	}
	w.d.edgeEvent(datapath.Move{BPDU: true, Bridge: b.id, ToSlot: p1.slot, MAC: src})
	p1 = w.port("br0", "p1")
	if p1.state() != stateBlocked || p1.blocked != blockBPDU {
		t.Fatalf("p1 state %s why %q, want blocked by bpdu_guard", p1.state(), p1.blocked)
	}
	if !p1.written.Policy.Has(tbpf.PortBlocked) || !p1.written.Policy.Has(tbpf.TrestleTrPortFlagsTR_PORT_BPDU_GUARD) {
		t.Errorf("p1 written with flags %#x, want blocked and bpdu_guard", p1.written.Policy.Flags)
	}
	if slices.Contains(w.floods(), p1.slot) {
		t.Errorf("blocked p1 still in the flood list %v", w.floods())
	}
	for _, e := range w.dp.fdb {
		if e.Slot == p1.slot {
			t.Errorf("entry %s of the blocked port not flushed", e.MAC)
		}
	}
	e, ok := w.lastEvent(ctl.EventPortBlocked)
	if !ok || e.Port != "p1" || e.Why != blockBPDU || e.State != stateBlocked || !strings.Contains(e.Reason, src.String()) {
		t.Errorf("event %+v (%t), want port_blocked of p1, why bpdu_guard, naming %s", e, ok, src)
	}
	st, err := w.d.statusOf("br0")
	if err != nil {
		t.Fatal(err)
	}
	ps := st.Bridges[0].Ports[0]
	if ps.State != stateBlocked || ps.Why != blockBPDU || !ps.BPDUGuard || !strings.Contains(ps.Reason, "port enable br0 p1") {
		t.Errorf("show: %+v, want blocked, why bpdu_guard, the command that lifts it", ps)
	}

	// A reload keeps the block.
	w.d.mu.Lock()
	err = w.d.apply(w.d.cfg)
	w.d.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if w.port("br0", "p1").blocked != blockBPDU {
		t.Fatalf("a reload lifted the block")
	}

	// port enable lifts it: up, in the floods, written without the flag.
	pe, err := w.d.portEnable(ctl.Request{Bridge: "br0", Port: "p1"})
	if err != nil || pe.State != stateUp {
		t.Fatalf("port enable: %+v, %v", pe, err)
	}
	p1 = w.port("br0", "p1")
	if p1.written.Policy.Has(tbpf.PortBlocked) || !slices.Contains(w.floods(), p1.slot) {
		t.Errorf("enabled p1: flags %#x, floods %v", p1.written.Policy.Flags, w.floods())
	}
	if e, _ := w.lastEvent(ctl.EventPortUp); e.Port != "p1" {
		t.Errorf("no port_up of p1 after enable: %+v", e)
	}
	if _, err := w.d.portEnable(ctl.Request{Bridge: "br0", Port: "nope"}); err == nil {
		t.Errorf("port enable of a port that is not there: no error")
	}
}

// A probe of this daemon, sent out of p2, heard on p3: p3 is blocked (why
// loop); the probe p3 sent before, heard on p2, blocks nothing more (the
// loop is broken); another daemon's probe blocks nothing; the block ends
// after loop_retry. Probes go out of every forwarding port.
func TestLoopDetectBlocks(t *testing.T) {
	w := edgeWorld(t)
	b := w.d.bridges["br0"]
	p2, p3 := w.port("br0", "p2"), w.port("br0", "p3")
	var sent []int
	w.d.sendProbe = func(ifindex int, frame []byte) error {
		if binary.BigEndian.Uint16(frame[12:]) != tbpf.ProbeEtherType || binary.BigEndian.Uint32(frame[18:]) != w.d.probeID {
			t.Errorf("probe %x: not a probe of this daemon", frame)
		}
		sent = append(sent, ifindex)
		return nil
	}
	w.d.edgeEvent(datapath.Move{Loop: true, Bridge: b.id, ToSlot: p3.slot, FromSlot: p3.slot, Probe: w.d.probeID + 1, ProbeBridge: b.id})
	if w.port("br0", "p3").blocked != "" {
		t.Fatalf("another daemon's probe blocked p3")
	}
	w.d.edgeEvent(datapath.Move{Loop: true, Bridge: b.id, ToSlot: p3.slot, FromSlot: p2.slot, Probe: w.d.probeID, ProbeBridge: b.id})
	w.d.edgeEvent(datapath.Move{Loop: true, Bridge: b.id, ToSlot: p2.slot, FromSlot: p3.slot, Probe: w.d.probeID, ProbeBridge: b.id})
	if got := w.port("br0", "p3"); got.blocked != blockLoop || got.state() != stateBlocked {
		t.Fatalf("p3: %s %q, want blocked by loop", got.state(), got.blocked)
	}
	if got := w.port("br0", "p2"); got.blocked != "" {
		t.Fatalf("p2 blocked too: the loop was broken by p3's block")
	}
	if e, ok := w.lastEvent(ctl.EventPortBlocked); !ok || e.Port != "p3" || e.Why != blockLoop || !strings.Contains(e.Reason, "p2") {
		t.Errorf("event %+v, want port_blocked of p3, why loop, naming p2", e)
	}

	w.d.loopTick(time.Now())
	want := []int{w.port("br0", "p1").ifindex, p2.ifindex} // not the blocked p3
	if !slices.Equal(sent, want) {
		t.Errorf("probes out of %v, want %v", sent, want)
	}
	// A move sends the probes again, at most every probeSoon.
	sent = nil
	w.d.probeOnMove(datapath.Move{Bridge: b.id})
	if len(sent) != 0 {
		t.Errorf("a move right after the probes sent %d more", len(sent))
	}
	w.d.probed[b.id] = time.Now().Add(-probeSoon)
	w.d.probeOnMove(datapath.Move{Bridge: b.id})
	if !slices.Equal(sent, want) {
		t.Errorf("a move sent probes out of %v, want %v", sent, want)
	}
	w.d.loopTick(time.Now().Add(6 * time.Second))
	if got := w.port("br0", "p3"); got.blocked != "" || got.state() != stateUp {
		t.Errorf("p3 after loop_retry: %s %q, want up", got.state(), got.blocked)
	}
}

// The probe's bytes are struct tr_probe's, as the datapath reads them.
func TestProbeFrame(t *testing.T) {
	f := probeFrame(0x01020304, 7, 9)
	if len(f) != 60 || f[0] != 0xff || f[6]&1 != 0 || binary.BigEndian.Uint16(f[12:]) != tbpf.ProbeEtherType ||
		binary.BigEndian.Uint32(f[14:]) != tbpf.ProbeMagic || binary.BigEndian.Uint32(f[18:]) != 0x01020304 ||
		binary.BigEndian.Uint16(f[22:]) != 7 || binary.BigEndian.Uint16(f[24:]) != 9 {
		t.Errorf("probe %x", f)
	}
	var p tbpf.TrestleTrProbe
	if n := binary.Size(p); n != 12 {
		t.Errorf("struct tr_probe is %d bytes, the frame carries 12", n)
	}
}
