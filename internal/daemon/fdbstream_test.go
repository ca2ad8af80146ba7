package daemon

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/config"
	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/datapath"
)

// fdbShow is the table as `trestle fdb show` gives it (of bridge only, or
// of every bridge: ""): the daemon's walk, gathered and sorted as the
// client does (ctl.FDB).
func (d *Daemon) fdbShow(only string) ([]ctl.FDBEntry, error) {
	return d.fdbShowOf(ctl.Request{Cmd: ctl.CmdFDBShow, Bridge: only})
}

// fdbShowOf is fdbShow of a request with its filters (port, VLAN).
func (d *Daemon) fdbShowOf(req ctl.Request) ([]ctl.FDBEntry, error) {
	names, filter, err := d.tableNames(req)
	if err != nil {
		return nil, err
	}
	out := []ctl.FDBEntry{}
	if _, err := d.walkFDBShow(names, filter, func(es []ctl.FDBEntry) error {
		out = append(out, es...)
		return nil
	}); err != nil {
		return nil, err
	}
	ctl.SortFDB(out)
	return out, nil
}

// bigTable is a daemon over a fake table of n learned entries walked in
// the datapath's chunks: bridges br0 (id 1, ports p1 and p2) and br1 (id
// 2, port q1), two thirds of the entries in br0. Entry i's MAC is
// 02:00:00 and i; every other one is idle beyond the bridges' aging.
func bigTable(t *testing.T, n int) (*Daemon, *fakeTable) {
	t.Helper()
	tbl := newFakeTable(&fakeOps{})
	tbl.chunk = datapath.FDBChunk
	d := newDaemon(quietLog(), nil, nil, 1<<20, time.Second)
	d.table = tbl
	for id, name := range map[uint16]string{1: "br0", 2: "br1"} {
		b := &bridgeState{id: id, cfg: config.Bridge{Name: name, Aging: time.Minute}}
		if id == 1 {
			b.ports = []*portState{{bridge: b, slot: 1, cfg: config.Port{Interface: "p1"}}, {bridge: b, slot: 2, cfg: config.Port{Interface: "p2"}}}
		} else {
			b.ports = []*portState{{bridge: b, slot: 3, cfg: config.Port{Interface: "q1"}}}
		}
		d.bridges[name] = b
		d.alloc.takeID(id)
	}
	for i := range n {
		mac := net.HardwareAddr{2, 0, 0, byte(i >> 16), byte(i >> 8), byte(i)}
		e := datapath.FDBEntry{Bridge: 1, MAC: mac, Slot: uint16(1 + i%2), Age: time.Second}
		if i%3 == 2 {
			e.Bridge, e.Slot = 2, 3
		}
		if i%2 == 1 {
			e.Age = 2 * time.Minute
		}
		tbl.fdb[fdbKeyOf(e.Bridge, 0, mac)] = e
	}
	return d, tbl
}

func macIndex(t *testing.T, s string) int {
	mac, err := net.ParseMAC(s)
	if err != nil || len(mac) != 6 {
		t.Fatalf("entry with MAC %q", s)
	}
	return int(mac[3])<<16 | int(mac[4])<<8 | int(mac[5])
}

// TestFDBShowStreamsBounded fills a table with 60,000 entries and checks
// that fdb show (the daemon's stream, through the control socket, and the
// client's gathering) returns every one, once, sorted, and that what the
// daemon holds while it walks and sends is a chunk of the table: its live
// heap, measured after each chunk is sent, grows by less than an eighth of
// what the table takes once gathered (a daemon that gathered it first, as
// it once did, holds all of it).
func TestFDBShowStreamsBounded(t *testing.T) {
	const n = 60000
	d, tbl := bigTable(t, n)

	// The server's side, with a sink that keeps a bit an entry.
	names, filter, err := d.tableNames(ctl.Request{})
	if err != nil {
		t.Fatal(err)
	}
	seen := make([]bool, n)
	count := 0
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base, peak := ms.HeapAlloc, ms.HeapAlloc
	tbl.afterChunk = func() {
		runtime.GC()
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapAlloc)
	}
	sent, err := d.walkFDBShow(names, filter, func(es []ctl.FDBEntry) error {
		if len(es) > datapath.FDBChunk {
			return fmt.Errorf("a chunk of %d entries, more than %d", len(es), datapath.FDBChunk)
		}
		for _, e := range es {
			i := macIndex(t, e.MAC)
			if seen[i] {
				return fmt.Errorf("entry %s sent twice", e.MAC)
			}
			seen[i] = true
			count++
		}
		return nil
	})
	tbl.afterChunk = nil
	if err != nil {
		t.Fatal(err)
	}
	if sent != n || count != n {
		t.Fatalf("the walk sent %d entries (counted %d), want %d", count, sent, n)
	}
	held := int64(peak) - int64(base)

	// Through the socket: the client gathers one sorted table.
	sock := filepath.Join(t.TempDir(), "t.sock")
	srv, err := ctl.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	srv.HandleStream(ctl.CmdFDBShow, d.fdbStream)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go srv.Serve(ctx, d.handle)
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.HeapAlloc
	es, err := ctl.FDB(sock, "")
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	whole := int64(ms.HeapAlloc) - int64(before)
	if len(es) != n {
		t.Fatalf("fdb show gave %d entries, want %d", len(es), n)
	}
	for i := 1; i < len(es); i++ {
		a, b := es[i-1], es[i]
		if a.Bridge > b.Bridge || a.Bridge == b.Bridge && a.MAC >= b.MAC {
			t.Fatalf("entries %d and %d out of order: %+v, %+v", i-1, i, a, b)
		}
	}
	for _, e := range es {
		i := macIndex(t, e.MAC)
		want := map[bool]string{true: "br1", false: "br0"}[i%3 == 2]
		port := map[int]string{0: "p1", 1: "p2"}[i%2]
		if want == "br1" {
			port = "q1"
		}
		if e.Bridge != want || e.Port != port {
			t.Fatalf("entry %d: bridge %q port %q, want %q %q", i, e.Bridge, e.Port, want, port)
		}
	}
	t.Logf("%d entries: the daemon held at most %d bytes while it walked and sent them; gathered, they take %d", n, held, whole)
	if held*8 > whole {
		t.Errorf("the daemon held %d bytes while it sent the table, more than an eighth of the table gathered (%d): not a chunk", held, whole)
	}
	runtime.KeepAlive(es)

	// One bridge, and one that is not.
	br1, err := ctl.FDB(sock, "br1")
	if err != nil || len(br1) != n/3 {
		t.Errorf("fdb show br1: %d entries, %v; want %d", len(br1), err, n/3)
	}
	if _, err := ctl.FDB(sock, "nope"); err == nil || err.Error() != `no bridge "nope"` {
		t.Errorf("fdb show nope: %v, want no bridge", err)
	}
	counts, err := d.tableCounts()
	if err != nil || counts[1] != n-n/3 || counts[2] != n/3 {
		t.Errorf("counts %v (%v), want %d in bridge 1 and %d in 2", counts, err, n-n/3, n/3)
	}
}

// TestSweepLargeTableInChunks ages a table of 60,000 entries: every idle
// learned entry goes, and is counted as aged, every fresh one stays, and
// the deletions are made a chunk at a time, never with the table whole.
func TestSweepLargeTableInChunks(t *testing.T) {
	const n = 60000
	d, tbl := bigTable(t, n)
	if err := d.sweep(); err != nil {
		t.Fatal(err)
	}
	if len(tbl.fdb) != n/2 {
		t.Errorf("after a sweep the table holds %d entries, want %d", len(tbl.fdb), n/2)
	}
	for _, e := range tbl.fdb {
		if e.Age > time.Minute {
			t.Fatalf("idle entry %s left", e.MAC)
		}
	}
	// Odd i is idle; i%3 == 2 is br1's.
	var want0, want1 uint64
	for i := 1; i < n; i += 2 {
		if i%3 == 2 {
			want1++
		} else {
			want0++
		}
	}
	if d.aged["br0"] != want0 || d.aged["br1"] != want1 {
		t.Errorf("aged br0 %d, br1 %d; want %d, %d", d.aged["br0"], d.aged["br1"], want0, want1)
	}
	if tbl.maxAgeOut == 0 || tbl.maxAgeOut > datapath.FDBChunk {
		t.Errorf("the most entries one deletion was given: %d, want 1..%d (a chunk)", tbl.maxAgeOut, datapath.FDBChunk)
	}
}
