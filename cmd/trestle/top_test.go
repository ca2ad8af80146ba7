package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/ctl"
)

// The rates of two readings: per second over the time between them, bits
// from bytes, drops by reason; a counter that went down (a daemon restarted
// without persist) counts from zero; a port new in the second reading has
// no rates yet.
func TestTopRates(t *testing.T) {
	t0 := time.Unix(100, 0)
	port := func(name string, rx, rxBytes, moved, runt uint64) ctl.PortStats {
		return ctl.PortStats{Bridge: "br0", Port: name, Mode: "xdp",
			Counters: ctl.Counts{{Name: "rx_packets", Value: rx}, {Name: "rx_bytes", Value: rxBytes}, {Name: "tx_packets"}, {Name: "moved", Value: moved}},
			Drops:    map[string]uint64{"runt": runt, "hairpin": 0}}
	}
	prev := topSample{at: t0, ports: []ctl.PortStats{port("a", 100, 6400, 5, 1), port("b", 50, 0, 0, 0)}}
	cur := topSample{at: t0.Add(2 * time.Second), ports: []ctl.PortStats{port("a", 300, 19200, 9, 5), port("b", 10, 0, 0, 0), port("c", 7, 0, 0, 0)}}
	rows := topRates(prev, cur)
	if len(rows) != 2 {
		t.Fatalf("rows %+v, want a and b", rows)
	}
	a, b := rows[0], rows[1]
	if a.RxPPS != 100 || a.RxBPS != 8*6400 || a.MovedPS != 2 || a.DropPS != 2 || a.Drops["runt"] != 2 || len(a.Drops) != 1 || a.rate("tx_packets") != 0 || !a.hasRate("tx_packets") {
		t.Errorf("a: %+v", a)
	}
	if b.RxPPS != 5 {
		t.Errorf("b, whose counter went from 50 to 10: %v pps, want 5 (10 from zero in 2s)", b.RxPPS)
	}
	// In JSON, the rates are the counters' names with _per_second, in
	// the daemon's order, and the drops by reason that rose.
	j, err := json.Marshal(a)
	if want := `{"bridge":"br0","port":"a","mode":"xdp","rx_packets_per_second":100,"rx_bytes_per_second":6400,"tx_packets_per_second":0,"moved_per_second":2,"drops_per_second":{"runt":2}}`; err != nil || string(j) != want {
		t.Errorf("a in JSON: %s %v\nwant %s", j, err, want)
	}
	sortRows(rows, 0)
	if rows[0].Port != "a" {
		t.Errorf("sorted by rx: %s first", rows[0].Port)
	}
	k, _ := topKey("port")
	sortRows(rows, k)
	if rows[0].Port != "a" || rows[1].Port != "b" {
		t.Errorf("sorted by port: %s, %s", rows[0].Port, rows[1].Port)
	}
	if _, err := topKey("bogus"); err == nil || !strings.Contains(err.Error(), "rx, tx, rx-bits") {
		t.Errorf("--sort bogus: %v", err)
	}
	for v, want := range map[float64]string{0: "0", 3.25: "3.2", 999: "999", 12345: "12.3k", 2.5e6: "2.50M", 1.25e10: "12.50G"} {
		if got := si(v, ""); got != want {
			t.Errorf("si(%v) = %q, want %q", v, got, want)
		}
	}
}
