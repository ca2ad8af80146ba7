package daemon

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/datapath"
)

// mobilityWorld is br0 of p1, p2, p3 with the limit and window given,
// applied as the file.
func mobilityWorld(t *testing.T, keys string) *world {
	w := newWorld(t)
	for _, n := range []string{"p1", "p2", "p3"} {
		w.sys.add(n, "veth")
	}
	body := strings.Replace(bridges("br0=p1,p2,p3"), "name = \"br0\"\n", "name = \"br0\"\n"+keys, 1)
	w.d.cfg = cfgOf(t, body)
	w.mustApply(body)
	return w
}

// moves reports n moves of mac between from and to, back and forth, the
// first from from, at now.
func (w *world) moves(mac net.HardwareAddr, from, to string, n int, now time.Time) {
	b := w.d.bridges["br0"]
	a, z := b.port(from).slot, b.port(to).slot
	for i := 0; i < n; i++ {
		w.d.countMove(datapath.Move{Bridge: b.id, MAC: mac, FromSlot: a, ToSlot: z}, now)
		a, z = z, a
	}
}

// An address that moves past the limit within the window is frozen on the
// port it was on before its first move (not where the last move left it):
// a static entry there, shown frozen, an event; a reload keeps it; the
// window's end releases it (and says so); fdb del releases it at once;
// moves spread over more than the window freeze nothing.
func TestMACFrozen(t *testing.T) {
	w := mobilityWorld(t, "mac_move_limit = 3\nmac_move_window = \"10s\"\n")
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 9}
	b := w.d.bridges["br0"]
	now := time.Now()
	key := fdbKeyOf(b.id, 0, mac)

	w.moves(mac, "p1", "p2", 3, now)
	if _, ok := w.dp.fdb[key]; ok {
		t.Fatalf("frozen after 3 moves, the limit: %+v", w.dp.fdb[key])
	}
	w.moves(mac, "p2", "p1", 1, now) // the 4th: p1 -> p2 -> p1 -> p2, now p2 -> p1
	e, ok := w.dp.fdb[key]
	if !ok || !e.Static || e.Slot != b.port("p1").slot {
		t.Fatalf("after 4 moves: entry %+v (found %t), want static on p1, where it was first", e, ok)
	}
	ev, ok := w.lastEvent(ctl.EventMACFrozen)
	if !ok || ev.Port != "p1" || ev.MAC != mac.String() || ev.Count != 4 || ev.Limit != 3 {
		t.Errorf("mac_frozen event %+v (found %t), want p1, %s, 4 moves, limit 3", ev, ok, mac)
	}
	es, err := w.d.fdbShowOf(ctl.Request{Bridge: "br0"})
	if err != nil {
		t.Fatal(err)
	}
	var shown bool
	for _, x := range es {
		if x.MAC == mac.String() {
			shown = x.Frozen && x.Static && x.Port == "p1"
		}
	}
	if !shown {
		t.Errorf("fdb show %+v: want %s frozen on p1", es, mac)
	}
	// fdb add elsewhere is refused: it is bound while frozen.
	if err := w.d.fdbAdd(ctl.Request{Bridge: "br0", Port: "p3", MAC: mac.String()}); err == nil || !strings.Contains(err.Error(), "frozen") {
		t.Errorf("fdb add of the frozen address on p3: %v, want refused as frozen", err)
	}

	// A reload keeps it.
	w.mustApply(strings.Replace(bridges("br0=p1,p2,p3"), "name = \"br0\"\n", "name = \"br0\"\nmac_move_limit = 3\nmac_move_window = \"10s\"\n", 1))
	if e, ok := w.dp.fdb[key]; !ok || !e.Static {
		t.Fatalf("after a reload: %+v (found %t), want still frozen", e, ok)
	}

	// The window's end releases it.
	w.d.thawTick(now.Add(5 * time.Second))
	if _, ok := w.dp.fdb[key]; !ok {
		t.Fatal("released before the window's end")
	}
	w.d.thawTick(now.Add(11 * time.Second))
	if e, ok := w.dp.fdb[key]; ok {
		t.Fatalf("after the window: %+v, want released (learned again by its next frame)", e)
	}
	if ev, ok := w.lastEvent(ctl.EventMACFrozenEnd); !ok || ev.MAC != mac.String() {
		t.Errorf("mac_frozen_end %+v (found %t)", ev, ok)
	}

	// Frozen again, and fdb del releases it at once.
	later := now.Add(20 * time.Second)
	w.moves(mac, "p3", "p1", 4, later)
	if e, ok := w.dp.fdb[key]; !ok || e.Slot != b.port("p3").slot {
		t.Fatalf("frozen again: %+v (found %t), want on p3", e, ok)
	}
	if err := w.d.fdbDel(ctl.Request{Bridge: "br0", MAC: mac.String()}); err != nil {
		t.Fatal(err)
	}
	if _, ok := w.dp.fdb[key]; ok || len(w.d.bridges["br0"].frozen) != 0 {
		t.Errorf("after fdb del: still frozen")
	}

	// Moves spread out: a window each, never past the limit.
	other := net.HardwareAddr{2, 0, 0, 0, 0, 10}
	for i := 0; i < 8; i++ {
		w.moves(other, "p1", "p2", 2, later.Add(time.Duration(i)*11*time.Second))
	}
	if _, ok := w.dp.fdb[fdbKeyOf(b.id, 0, other)]; ok {
		t.Error("frozen by moves spread over many windows")
	}
}

// mac_move_limit = 0 freezes nothing; turning it off releases what was
// frozen.
func TestMACMoveLimitOff(t *testing.T) {
	w := mobilityWorld(t, "mac_move_limit = 0\n")
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 9}
	w.moves(mac, "p1", "p2", 50, time.Now())
	if len(w.dp.fdb) != 0 {
		t.Fatalf("limit 0: %v, want nothing frozen", w.dp.fdb)
	}
	w = mobilityWorld(t, "mac_move_limit = 2\n")
	w.moves(mac, "p1", "p2", 3, time.Now())
	if len(w.dp.fdb) != 1 {
		t.Fatalf("limit 2, 3 moves: %v, want frozen", w.dp.fdb)
	}
	w.mustApply(strings.Replace(bridges("br0=p1,p2,p3"), "name = \"br0\"\n", "name = \"br0\"\nmac_move_limit = 0\n", 1))
	if len(w.dp.fdb) != 0 {
		t.Errorf("limit turned off: %v, want released", w.dp.fdb)
	}
}

// Across an overlay, moves onto the fabric (zebra's word that a local
// address is remote now, put by the control plane) count as the
// datapath's moves do. A station of p1 that a remote host keeps taking is
// frozen on p1; a remote station that a tenant on p2 keeps taking is
// frozen on the overlay port, where it was, and not advertised.
func TestMACFrozenOverlay(t *testing.T) {
	w := newOvWorld(t)
	w.sys.add("p1", "veth")
	w.sys.add("p2", "veth")
	cfg := strings.Replace(ovConfig, "aging = \"10s\"\n", "aging = \"10s\"\nmac_move_limit = 3\nmac_move_window = \"60s\"\n", 1)
	w.d.cfg = cfgOf(t, cfg)
	w.mustApply(cfg)
	w.sync()
	br, p1, p2, ov := w.d.bridges["br0"], w.port("br0", "p1"), w.port("br0", "p2"), w.port("br0", "tvx1000")
	// back is the datapath taking mac back to port p from the fabric.
	back := func(mac string, p *portState) {
		w.dp.learn(br.id, p.slot, p.ifindex, mac, 0)
		w.d.countMove(datapath.Move{Bridge: br.id, MAC: mustMAC(mac), FromSlot: ov.slot, ToSlot: p.slot}, time.Now())
	}
	for _, c := range []struct {
		mac   string
		local *portState // where it is before the moves; nil: remote
		home  *portState
	}{{"02:00:00:00:00:71", p1, p1}, {"02:00:00:00:00:72", nil, ov}} {
		if c.local != nil {
			w.dp.learn(br.id, c.local.slot, c.local.ifindex, c.mac, 0)
		} else {
			w.zebraWrite(c.mac, false)
		}
		taker := c.local
		if taker == nil {
			taker = p2
		}
		// Four moves: onto the fabric and back twice, or back and onto
		// the fabric twice.
		for i := 0; i < 2; i++ {
			if c.local != nil {
				w.zebraWrite(c.mac, false)
				back(c.mac, taker)
			} else {
				back(c.mac, taker)
				w.zebraWrite(c.mac, false)
			}
		}
		e, ok := w.entry(c.mac)
		if !ok || !e.Static || e.Slot != c.home.slot {
			t.Fatalf("%s after 4 moves: %+v (found %t), want static on %s, where it was", c.mac, e, ok, c.home.name())
		}
		if ev, ok := w.lastEvent(ctl.EventMACFrozen); !ok || ev.MAC != c.mac || ev.Port != c.home.name() || ev.Count != 4 {
			t.Errorf("mac_frozen event %+v (found %t), want %s on %s after 4 moves", ev, ok, c.mac, c.home.name())
		}
		// zebra's word again moves it no more.
		w.zebraWrite(c.mac, false)
		if e, _ := w.entry(c.mac); !e.Static || e.Slot != c.home.slot {
			t.Errorf("%s frozen on %s, after zebra's word that it is remote: %+v", c.mac, c.home.name(), e)
		}
		w.sync()
		if _, adv := w.k.adv[c.mac]; adv != (c.home != ov) {
			t.Errorf("%s frozen on %s: advertised %t, want %t", c.mac, c.home.name(), adv, c.home != ov)
		}
	}
}
