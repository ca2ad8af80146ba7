package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/testutil"
)

// tmux runs tmux on a server of the test's own (-L), so that no session of
// anyone else's is touched; the server goes when the test ends.
func tmux(t *testing.T, server string, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command("tmux", append([]string{"-L", server}, args...)...).CombinedOutput()
	return string(out), err
}

// TestTop: `trestle top` in a terminal (tmux) shows every port with
// nonzero rates while traffic flows, changes its order on s and quits on q;
// `--once --json` parses and has the rates of the ports the traffic crossed.
func TestTop(t *testing.T) {
	testutil.RequireCmd(t, "tmux")
	l := NewLab(t, 3)
	l.WriteConfig(l.Config("", nil))
	l.Start()
	l.PingAll()
	// Traffic through every port: h1 pings h2 and h3, 20 a second each.
	for _, to := range []int{2, 3} {
		p := l.Host(1).Start(t, "ping", "-q", "-i", "0.05", HostIP(to))
		t.Cleanup(func() { p.Stop() })
	}

	server := fmt.Sprintf("trestle-test-%d", os.Getpid())
	t.Cleanup(func() { tmux(t, server, "kill-server") })
	cmdline := fmt.Sprintf("TRESTLE_SOCKET=%s %s top --interval 500ms", l.Sock, Bin)
	if out, err := tmux(t, server, "new-session", "-d", "-s", "top", "-x", "160", "-y", "40", cmdline); err != nil {
		t.Fatalf("tmux new-session: %v\n%s", err, out)
	}
	var screen string
	row := func(port string) *regexp.Regexp {
		// BRIDGE PORT MODE RX-PPS RX-BIT/S TX-PPS TX-BIT/S ...: both
		// packet rates above zero.
		return regexp.MustCompile(`br0\s+` + port + `\s+\S+\s+([1-9][0-9.]*k?)\s+\S+\s+([1-9][0-9.]*k?)\s`)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		screen, _ = tmux(t, server, "capture-pane", "-p", "-t", "top")
		all := true
		for i := 1; i <= 3; i++ {
			all = all && row(PortName(i)).MatchString(screen)
		}
		if all && strings.Contains(screen, "sorted by rx") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("top never showed every port with traffic in and out:\n%s", screen)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// port-h1 receives both streams: it leads when sorted by rx.
	if i1, i2 := strings.Index(screen, PortName(1)), strings.Index(screen, PortName(2)); i1 > i2 {
		t.Errorf("sorted by rx, %s is below %s:\n%s", PortName(1), PortName(2), screen)
	}
	if out, err := tmux(t, server, "send-keys", "-t", "top", "s"); err != nil {
		t.Fatalf("send-keys s: %v %s", err, out)
	}
	deadline = time.Now().Add(5 * time.Second)
	for !strings.Contains(screen, "sorted by tx") {
		if time.Now().After(deadline) {
			t.Fatalf("s did not change the order:\n%s", screen)
		}
		time.Sleep(100 * time.Millisecond)
		screen, _ = tmux(t, server, "capture-pane", "-p", "-t", "top")
	}
	if out, err := tmux(t, server, "send-keys", "-t", "top", "q"); err != nil {
		t.Fatalf("send-keys q: %v %s", err, out)
	}
	deadline = time.Now().Add(5 * time.Second)
	for {
		if _, err := tmux(t, server, "has-session", "-t", "top"); err != nil {
			break // top quit, and its session with it
		}
		if time.Now().After(deadline) {
			screen, _ = tmux(t, server, "capture-pane", "-p", "-t", "top")
			t.Fatalf("q did not quit top:\n%s", screen)
		}
		time.Sleep(100 * time.Millisecond)
	}

	out, err := l.CLI("top", "--once", "--json", "--interval", "1s")
	if err != nil {
		t.Fatalf("top --once --json: %v\n%s", err, out)
	}
	var got struct {
		Interval float64 `json:"interval_seconds"`
		Ports    []struct {
			Port      string             `json:"port"`
			RxPPS     float64            `json:"rx_pps"`
			TxPPS     float64            `json:"tx_pps"`
			RxBPS     float64            `json:"rx_bps"`
			PerSecond map[string]float64 `json:"per_second"`
		} `json:"ports"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("top --once --json: %v\n%s", err, out)
	}
	if got.Interval < 0.9 || len(got.Ports) != 3 {
		t.Fatalf("top --once --json: interval %v, %d ports:\n%s", got.Interval, len(got.Ports), out)
	}
	for _, p := range got.Ports {
		// 20 requests a second to each of h2 and h3, and their replies.
		if p.RxPPS < 10 || p.TxPPS < 10 || p.RxBPS < 10*8*42 || p.PerSecond["rx_packets"] != p.RxPPS {
			t.Errorf("%s: %+v, want rates of about 20 pps or more each way", p.Port, p)
		}
	}
	l.Stop()
}

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
	if a.RxPPS != 100 || a.RxBPS != 8*6400 || a.MovedPS != 2 || a.DropPS != 2 || a.Drops["runt"] != 2 || len(a.Drops) != 1 || a.PerSecond["tx_packets"] != 0 {
		t.Errorf("a: %+v", a)
	}
	if b.RxPPS != 5 {
		t.Errorf("b, whose counter went from 50 to 10: %v pps, want 5 (10 from zero in 2s)", b.RxPPS)
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
