package daemon

import (
	"bytes"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	tbpf "github.com/trestle/trestle/internal/bpf"
	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/datapath"
)

func move(mac byte, from, to uint16) datapath.Move {
	return datapath.Move{Bridge: 1, MAC: net.HardwareAddr{2, 0, 0, 0, 0, mac}, FromSlot: from, ToSlot: to}
}

// The case: a station moved back and forth 1000 times in a second
// is two lines, the first move at once and the rest in one line moveEvery
// later, and the lines with their suppressed counts add up to the moves.
func TestMoveLimiterFlap(t *testing.T) {
	l := newMoveLimiter(moveEvery, moveMACs, moveRate, moveBurst)
	t0 := time.Unix(1000, 0)
	var lines []moveLine
	tick := t0
	for i := 0; i < 1000; i++ {
		now := t0.Add(time.Duration(i) * time.Millisecond)
		from, to := uint16(1), uint16(2)
		if i%2 == 1 {
			from, to = 2, 1
		}
		if ln, ok := l.add(move(1, from, to), now); ok {
			lines = append(lines, ln)
		}
		if now.Sub(tick) >= eventTick {
			tick = now
			lines = append(lines, l.due(now)...)
		}
	}
	for now := t0.Add(time.Second); now.Before(t0.Add(3 * moveEvery)); now = now.Add(eventTick) {
		lines = append(lines, l.due(now)...)
	}
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2: %+v", len(lines), lines)
	}
	if lines[0].suppressed != 0 || lines[0].move.FromSlot != 1 || lines[0].move.ToSlot != 2 {
		t.Errorf("first line %+v: want the first move, 1 -> 2, nothing suppressed", lines[0])
	}
	if lines[1].suppressed != 998 || lines[1].move.FromSlot != 2 || lines[1].move.ToSlot != 1 {
		t.Errorf("second line %+v: want the last move, 2 -> 1, with the 998 between suppressed", lines[1])
	}
	if l.pending() != 0 {
		t.Errorf("%d moves still pending", l.pending())
	}
}

// Whatever moves come, every one is in exactly one line (its own, or a
// line's suppressed count, or an overflow count) once the limiter has had
// time, and no second gets more lines than the budget. The limiter never
// remembers more addresses than its size; while it remembers every address
// that moves, none gets two lines within moveEvery.
func TestMoveLimiterAccounts(t *testing.T) {
	for _, size := range []int{128, 16} {
		t.Run(fmt.Sprintf("size-%d", size), func(t *testing.T) { testMoveLimiter(t, size) })
	}
}

func testMoveLimiter(t *testing.T, size int) {
	const every = 5 * time.Second
	rng := rand.New(rand.NewPCG(1, 2))
	l := newMoveLimiter(every, size, moveRate, moveBurst)
	t0 := time.Unix(1000, 0)
	now := t0
	var moves, accounted uint64
	lastLine := map[byte]time.Time{}
	linesAt := map[int64]int{}
	take := func(ln moveLine, at time.Time) {
		if ln.overflow > 0 {
			accounted += ln.overflow
			return
		}
		accounted += 1 + ln.suppressed
		mac := ln.move.MAC[5]
		if prev, ok := lastLine[mac]; ok && at.Sub(prev) < every && size >= 64 {
			t.Fatalf("address %d: lines at %v and %v", mac, prev.Sub(t0), at.Sub(t0))
		}
		lastLine[mac] = at
		linesAt[at.Unix()]++
	}
	tick := now
	for i := 0; i < 200000; i++ {
		now = now.Add(time.Duration(rng.IntN(200)) * time.Microsecond)
		mac := byte(rng.IntN(64))
		if rng.IntN(4) == 0 {
			mac = 0 // one station flaps all the time
		}
		moves++
		if ln, ok := l.add(move(mac, 1, 2), now); ok {
			take(ln, now)
		}
		if now.Sub(tick) >= eventTick {
			tick = now
			for _, ln := range l.due(now) {
				take(ln, now)
			}
		}
		if len(l.macs) > size || l.lru.Len() > size {
			t.Fatalf("the limiter remembers %d addresses, more than %d", len(l.macs), size)
		}
	}
	for end := now.Add(10 * every); now.Before(end); now = now.Add(eventTick) {
		for _, ln := range l.due(now) {
			take(ln, now)
		}
	}
	if accounted != moves {
		t.Errorf("%d moves, %d in lines (%d pending)", moves, accounted, l.pending())
	}
	var total int
	for sec, n := range linesAt {
		total += n
		if n > moveBurst+moveRate {
			t.Errorf("second %d: %d lines, more than the budget", sec-t0.Unix(), n)
		}
	}
	t.Logf("%d moves in %v: %d lines", moves, now.Sub(t0), total)
}

// Events are logged as key=value lines, kept (the last maxRecentEvents),
// and a follower gets every event after the ones it was given, once.
func TestEventLog(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	l := newEventLog(slog.New(slog.NewTextHandler(&lockedWriter{&mu, &buf}, nil)))
	vlan, sup := uint16(10), uint64(7)
	l.emit(ctl.Event{Event: ctl.EventMACMove, Bridge: "br0", MAC: "02:00:00:00:00:01", VLAN: &vlan, From: "p1", To: "p2", Suppressed: &sup})
	mu.Lock()
	line := buf.String()
	mu.Unlock()
	for _, want := range []string{`msg="mac moved"`, "event=mac_move bridge=br0 mac=02:00:00:00:00:01 vlan=10 from=p1 to=p2 suppressed=7"} {
		if !strings.Contains(line, want) {
			t.Errorf("log line %q lacks %q", line, want)
		}
	}
	recent, sub := l.follow()
	if len(recent) != 1 || recent[0].Suppressed == nil || *recent[0].Suppressed != 7 {
		t.Fatalf("recent: %+v", recent)
	}
	for i := 0; i < maxRecentEvents+5; i++ {
		l.emit(ctl.Event{Event: ctl.EventPortDown, Bridge: "br0", Port: fmt.Sprint(i)})
	}
	got := l.snapshot()
	if len(got) != maxRecentEvents || got[0].Port != "5" || got[len(got)-1].Port != fmt.Sprint(maxRecentEvents+4) {
		t.Errorf("kept %d events, from %q to %q; want the last %d", len(got), got[0].Port, got[len(got)-1].Port, maxRecentEvents)
	}
	for i := 0; i < maxRecentEvents+5; i++ {
		select {
		case e := <-sub.ch:
			if e.Port != fmt.Sprint(i) {
				t.Fatalf("follower got %q, want %d", e.Port, i)
			}
		default:
			t.Fatalf("follower got %d events, want %d", i, maxRecentEvents+5)
		}
	}
	l.unfollow(sub)
	logged, suppressed := l.counts()
	if logged[ctl.EventMACMove] != 1 || logged[ctl.EventPortDown] != maxRecentEvents+5 || suppressed[ctl.EventMACMove] != 7 {
		t.Errorf("counts: logged %v, suppressed %v", logged, suppressed)
	}
	// A follower that falls too far behind is told so, and the log goes on.
	_, slow := l.follow()
	for i := 0; i < followBuffer+1; i++ {
		l.emit(ctl.Event{Event: ctl.EventPortUp, Bridge: "br0", Port: "p"})
	}
	select {
	case <-slow.behind:
	default:
		t.Errorf("a follower %d events behind was not told", followBuffer+1)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

// eventsOf are the events kept, as "kind port state" lines.
func (w *world) eventsOf(kinds ...string) []string {
	var out []string
	for _, e := range w.d.events.snapshot() {
		for _, k := range kinds {
			if e.Event == k {
				out = append(out, fmt.Sprintf("%s %s %s", e.Event, e.Port, e.State))
			}
		}
	}
	return out
}

// A port that goes down is one event however many reconciles follow, and
// one more when it is back; a port whose interface is missing is down
// from the start, once.
func TestPortEventsOncePerEpisode(t *testing.T) {
	w := newWorld(t)
	for _, n := range []string{"p1", "p2"} {
		w.sys.add(n, "veth")
	}
	w.mustApply(bridges("br0=p1,p2,p3"))
	want := []string{"port_up p1 up", "port_up p2 up", "port_down p3 down"}
	if got := w.eventsOf(ctl.EventPortUp, ctl.EventPortDown); strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Fatalf("at start: %q, want %q", got, want)
	}
	w.sys.set("p2", func(l *Link) { l.Running = false })
	for i := 0; i < 5; i++ {
		w.d.reconcile()
	}
	w.sys.set("p2", func(l *Link) { l.Running = true })
	for i := 0; i < 5; i++ {
		w.d.reconcile()
	}
	w.sys.del("p1")
	for i := 0; i < 3; i++ {
		w.d.reconcile()
	}
	w.sys.add("p3", "veth")
	w.d.reconcile()
	want = append(want, "port_down p2 link-down", "port_up p2 up", "port_down p1 down", "port_up p3 up")
	if got := w.eventsOf(ctl.EventPortUp, ctl.EventPortDown); strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("events: %q\nwant %q", got, want)
	}
	// A reload that changes nothing of the ports says nothing.
	w.mustApply(bridges("br0=p1,p2,p3"))
	if got := w.eventsOf(ctl.EventPortUp, ctl.EventPortDown); len(got) != len(want) {
		t.Errorf("a reload that changed no port: %q", got[len(want):])
	}
}

// A bridge's table-full drops and a port's limit drops are one event when
// they start and one when they have stopped for episodeQuiet, with the
// count of the whole episode; what the counters held before the daemon
// first looked is no episode.
func TestEpisodes(t *testing.T) {
	w := newWorld(t)
	for _, n := range []string{"p1", "p2"} {
		w.sys.add(n, "veth")
	}
	w.mustApply(bridges("br0=p1,p2") + "max_macs = 4\nmac_limit_action = \"forward\"\n")
	p1, p2 := w.port("br0", "p1"), w.port("br0", "p2")
	if p2.cfg.MaxMACs != 4 {
		t.Fatalf("p2 max_macs %d", p2.cfg.MaxMACs)
	}
	var s1, s2 tbpf.PortStats
	s1.Drops[tbpf.TrestleTrDropReasonTR_DROP_TABLE_FULL] = 50 // before the daemon looked
	set := func() { w.dp.stats = map[uint16]tbpf.PortStats{p1.slot: s1, p2.slot: s2} }
	set()
	eps := newEpisodes()
	t0 := time.Unix(1000, 0)
	look := func(sec int) { w.d.lookAtEpisodes(eps, t0.Add(time.Duration(sec)*time.Second)) }
	look(0)
	for sec := 1; sec <= 20; sec++ {
		// Drops for 5 seconds on both ports, unlearned frames on p2 for 3.
		if sec <= 5 {
			s1.Drops[tbpf.TrestleTrDropReasonTR_DROP_TABLE_FULL] += 10
			s2.Drops[tbpf.TrestleTrDropReasonTR_DROP_TABLE_FULL] += 1
		}
		if sec <= 3 {
			s2.C[tbpf.Unlearned] += 100
		}
		set()
		look(sec)
	}
	var got []string
	for _, e := range w.d.events.snapshot() {
		if e.Event != ctl.EventPortUp {
			got = append(got, fmt.Sprintf("%s %s/%s count=%d seconds=%g action=%s limit=%d", e.Event, e.Bridge, e.Port, e.Count, e.Seconds, e.Action, e.Limit))
		}
	}
	want := []string{
		"mac_limit br0/p2 count=100 seconds=0 action=forward limit=4",
		"table_full br0/ count=11 seconds=0 action= limit=65536",
		"mac_limit_end br0/p2 count=300 seconds=2 action=forward limit=4",
		"table_full_end br0/ count=55 seconds=4 action= limit=65536",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A move names its bridge and ports as the config does; a port or bridge
// gone since by its number.
func TestMoveNames(t *testing.T) {
	w := newWorld(t)
	for _, n := range []string{"p1", "p2"} {
		w.sys.add(n, "veth")
	}
	w.mustApply(bridges("br0=p1,p2,@br1", "br1=@br0"))
	p1, p2, patch := w.port("br0", "p1"), w.port("br0", "p2"), w.port("br0", "patch-br1")
	id := w.d.bridges["br0"].id
	for _, c := range []struct {
		m              datapath.Move
		bridge, fr, to string
	}{
		{datapath.Move{Bridge: id, FromSlot: p1.slot, ToSlot: p2.slot}, "br0", "p1", "p2"},
		{datapath.Move{Bridge: id, FromSlot: patch.slot, ToSlot: p1.slot}, "br0", "patch-br1", "p1"},
		{datapath.Move{Bridge: id, FromSlot: 200, FromIfindex: 77, ToSlot: 201, ToIfindex: datapath.PatchIfindex(201)}, "br0", "ifindex 77", "patch slot 201"},
		{datapath.Move{Bridge: 60, FromSlot: p1.slot, FromIfindex: 5, ToSlot: p2.slot, ToIfindex: 6}, "bridge 60", "ifindex 5", "ifindex 6"},
	} {
		b, fr, to := w.d.moveNames(c.m)
		if b != c.bridge || fr != c.fr || to != c.to {
			t.Errorf("%+v: %q %q %q, want %q %q %q", c.m, b, fr, to, c.bridge, c.fr, c.to)
		}
	}
}
