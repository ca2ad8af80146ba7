package metrics

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/testutil"
	"github.com/trestle/trestle/tests/harness"
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
	t.Parallel()
	testutil.RequireCmd(t, "tmux")
	l := harness.NewLab(t, 3)
	l.WriteConfig(l.Config("", nil))
	l.Start()
	l.PingAll()
	// Traffic through every port: h1 pings h2 and h3, 20 a second each.
	for _, to := range []int{2, 3} {
		p := l.Host(1).Start(t, "ping", "-q", "-i", "0.05", harness.HostIP(to))
		t.Cleanup(func() { p.Stop() })
	}

	server := fmt.Sprintf("trestle-test-%d", os.Getpid())
	t.Cleanup(func() { tmux(t, server, "kill-server") })
	cmdline := fmt.Sprintf("TRESTLE_SOCKET=%s %s top --interval 500ms", l.Sock, harness.Bin)
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
			all = all && row(harness.PortName(i)).MatchString(screen)
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
	if i1, i2 := strings.Index(screen, harness.PortName(1)), strings.Index(screen, harness.PortName(2)); i1 > i2 {
		t.Errorf("sorted by rx, %s is below %s:\n%s", harness.PortName(1), harness.PortName(2), screen)
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
			Port    string             `json:"port"`
			RxPPS   float64            `json:"rx_packets_per_second"`
			TxPPS   float64            `json:"tx_packets_per_second"`
			RxBytes float64            `json:"rx_bytes_per_second"`
			Drops   map[string]float64 `json:"drops_per_second"`
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
		if p.RxPPS < 10 || p.TxPPS < 10 || p.RxBytes < 10*42 || p.Drops == nil {
			t.Errorf("%s: %+v, want rates of about 20 pps or more each way", p.Port, p)
		}
	}
	l.Stop()
}
