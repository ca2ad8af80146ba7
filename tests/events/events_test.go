package events

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/tests/harness"
)

// Events end to end: real frames move a station between two ports, real
// links go down and up, and the daemon's log and `trestle events` say so.

// moveLine matches a mac_move line of the daemon's log.
var moveLine = regexp.MustCompile(`msg="mac moved" event=mac_move bridge=(\S+) mac=(\S+) vlan=(\d+) from=(\S+) to=(\S+) suppressed=(\d+)`)

type loggedMove struct {
	bridge, mac, from, to string
	suppressed            uint64
}

func loggedMoves(log string) []loggedMove {
	var out []loggedMove
	for _, m := range moveLine.FindAllStringSubmatch(log, -1) {
		n, _ := strconv.ParseUint(m[6], 10, 64)
		out = append(out, loggedMove{m[1], m[2], m[4], m[5], n})
	}
	return out
}

// The test: a MAC moved back and forth 1000 times in about a second
// is a bounded number of log lines, each naming the MAC and both ports,
// with suppressed counts that add up, with the lines, to the moves the
// datapath counted.
func TestEventsMACFlap(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"xdp", "tc"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			l := harness.NewLab(t, 2)
			// mac_move_limit 0: the flapping station is never frozen,
			// so each of its frames is a move (mobility is its own test).
			l.WriteConfig(l.Config("mac_move_limit = 0\n", func(int) string { return fmt.Sprintf("mode = %q\n", mode) }))
			l.Start()
			defer l.Stop()
			l.PingAll() // the hosts' own addresses learned: no move of theirs follows

			station := net.HardwareAddr{0x02, 0xee, 0, 0, 0, 0x01}
			frame := harness.Marked(net.HardwareAddr{0x02, 0xee, 0, 0, 0, 0x02}, station, "flap")
			senders := [2]interface{ Send([]byte) error }{l.Host(1).RawSender(t, "eth0"), l.Host(2).RawSender(t, "eth0")}
			moved := func() uint64 {
				return l.Stats(harness.PortName(1)).Counters.Get("moved") + l.Stats(harness.PortName(2)).Counters.Get("moved")
			}
			before := moved()
			const moves = 1000
			start := time.Now()
			for i := 0; i <= moves; i++ {
				if err := senders[i%2].Send(frame); err != nil {
					t.Fatal(err)
				}
				// Each frame learned before the next is sent from the
				// other port, so that each is a move: about a second in all.
				time.Sleep(900 * time.Microsecond)
			}
			flap := time.Since(start)
			time.Sleep(100 * time.Millisecond)
			n := moved() - before
			t.Logf("%s: %d frames sent alternately from port-h1 and port-h2 in %v: %d moves counted", mode, moves+1, flap.Round(time.Millisecond), n)
			if n < moves*9/10 {
				t.Fatalf("only %d moves of %d: the test did not flap the station", n, moves)
			}

			// The last line comes a moveEvery (5 s) after the first.
			var lines []loggedMove
			var total uint64
			deadline := time.Now().Add(10 * time.Second)
			for {
				lines = loggedMoves(l.Daemon.Out.String())
				total = 0
				for _, m := range lines {
					total += 1 + m.suppressed
				}
				if total >= n || time.Now().After(deadline) {
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
			t.Logf("%d log lines for %d moves: %+v", len(lines), n, lines)
			// None can be lost: the ring holds 6,553 records, more than the
			// moves, even if the daemon read none until the end.
			if total != n {
				t.Errorf("the lines stand for %d moves, the datapath counted %d", total, n)
			}
			// One at once, then one every 5 s while it flaps, and the last.
			if bound := 2 + int(flap/(5*time.Second)); len(lines) > bound || len(lines) < 2 {
				t.Errorf("%d lines for a flap of %v, want 2 to %d", len(lines), flap, bound)
			}
			for _, m := range lines {
				if m.bridge != "br0" || m.mac != station.String() || !(m.from == harness.PortName(1) && m.to == harness.PortName(2) || m.from == harness.PortName(2) && m.to == harness.PortName(1)) {
					t.Errorf("line %+v: want %s on br0 between %s and %s", m, station, harness.PortName(1), harness.PortName(2))
				}
			}
			if len(lines) > 0 && (lines[0].from != harness.PortName(1) || lines[0].suppressed != 0) {
				t.Errorf("first line %+v: want the first move, from %s, logged at once", lines[0], harness.PortName(1))
			}

			// trestle events --json has the same lines.
			var evs []ctl.Event
			l.CLIJSON(&evs, "events")
			var inEvents uint64
			for _, e := range evs {
				if e.Event == ctl.EventMACMove && e.MAC == station.String() && e.Suppressed != nil && e.VLAN != nil {
					inEvents += 1 + *e.Suppressed
				}
			}
			if inEvents != total {
				t.Errorf("trestle events --json: mac_move events for %d moves, the log for %d:\n%+v", inEvents, total, evs)
			}
			out, err := l.CLI("events", "-n", "1")
			if err != nil || !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\S+ mac_move bridge=br0 mac=02:ee:00:00:00:01 vlan=0 from=port-h\d to=port-h\d suppressed=\d+\n$`).MatchString(out) {
				t.Errorf("trestle events -n 1: %v\n%q", err, out)
			}
		})
	}
}

// --follow delivers an event as it happens; a port that goes down is one
// port_down however many link events and reconciles its going down makes,
// and one port_up when it is back.
func TestEventsFollowPortDown(t *testing.T) {
	t.Parallel()
	l := harness.NewLab(t, 2)
	l.WriteConfig(l.Config("", nil))
	l.Start()
	defer l.Stop()

	cmd := exec.Command(harness.Bin, "events", "--follow", "--json")
	cmd.Env = append(os.Environ(), "TRESTLE_SOCKET="+l.Sock)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	events := make(chan ctl.Event, 100)
	bad := make(chan string, 1)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var e ctl.Event
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				bad <- sc.Text()
				return
			}
			events <- e
		}
	}()
	// The recent events first: both ports up, from the start.
	waitEvent := func(what string, match func(ctl.Event) bool, within time.Duration) time.Duration {
		t.Helper()
		start := time.Now()
		timeout := time.After(within)
		for {
			select {
			case e, ok := <-events:
				if !ok {
					t.Fatalf("trestle events --follow ended waiting for %s: %s", what, stderr.String())
				}
				if match(e) {
					return time.Since(start)
				}
			case line := <-bad:
				t.Fatalf("trestle events --follow --json printed a line that is no JSON event: %q", line)
			case <-timeout:
				t.Fatalf("no %s within %v", what, within)
			}
		}
	}
	for i := 1; i <= 2; i++ {
		waitEvent("port_up of "+harness.PortName(i)+" among the recent", func(e ctl.Event) bool {
			return e.Event == ctl.EventPortUp && e.Port == harness.PortName(i)
		}, 5*time.Second)
	}

	isDown := func(e ctl.Event) bool {
		return e.Event == ctl.EventPortDown && e.Port == harness.PortName(2) && e.State == "link-down" && e.Bridge == "br0"
	}
	l.Host(2).MustExec(t, "ip", "link", "set", "dev", "eth0", "down")
	took := waitEvent("port_down of "+harness.PortName(2), isDown, 2*time.Second)
	t.Logf("port_down followed %v after ip link set down", took.Round(time.Millisecond))
	// More link events on the same down port: no new episode.
	l.Host(2).MustExec(t, "ip", "link", "set", "dev", "eth0", "mtu", "1400")
	l.Host(2).MustExec(t, "ip", "link", "set", "dev", "eth0", "mtu", "1500")
	time.Sleep(300 * time.Millisecond)
	l.Host(2).MustExec(t, "ip", "link", "set", "dev", "eth0", "up")
	waitEvent("port_up of "+harness.PortName(2), func(e ctl.Event) bool {
		return e.Event == ctl.EventPortUp && e.Port == harness.PortName(2) && e.State == "up"
	}, 2*time.Second)
	if err := l.Host(1).Ping(harness.HostIP(2), 2); err != nil {
		t.Errorf("ping after the port came back: %v", err)
	}

	// SIGINT ends the follower cleanly.
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for range events {
	}
	_, _ = io.Copy(io.Discard, stdout)
	if err := cmd.Wait(); err != nil {
		t.Errorf("trestle events --follow after SIGINT: %v: %s", err, stderr.String())
	}

	log := l.Daemon.Out.String()
	count := func(re string) int { return len(regexp.MustCompile(re).FindAllString(log, -1)) }
	if n := count(`event=port_down bridge=br0 port=` + harness.PortName(2) + ` `); n != 1 {
		t.Errorf("%d port_down lines for %s, want 1:\n%s", n, harness.PortName(2), log)
	}
	if n := count(`event=port_up bridge=br0 port=` + harness.PortName(2) + ` `); n != 2 {
		t.Errorf("%d port_up lines for %s, want 2 (start, back):\n%s", n, harness.PortName(2), log)
	}
	if n := count(`event=port_(up|down) bridge=br0 port=` + harness.PortName(1) + ` `); n != 1 {
		t.Errorf("%d port events for %s, want 1 (start):\n%s", n, harness.PortName(1), log)
	}
}

// With persist, moves made while no daemon ran wait in the pinned ring and
// the next daemon logs them.
func TestEventsAcrossRestart(t *testing.T) {
	t.Parallel()
	l := harness.NewPersistLab(t, 2, nil)
	l.StartNet(harness.Bin)
	l.PingAll()
	l.Signal(syscall.SIGTERM)

	station := net.HardwareAddr{0x02, 0xee, 0, 0, 0, 0x03}
	frame := harness.Marked(net.HardwareAddr{0x02, 0xee, 0, 0, 0, 0x04}, station, "down")
	const moves = 10
	for i := 0; i <= moves; i++ {
		if err := l.Host(1+i%2).RawSend("eth0", frame); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	l.StartNet(harness.Bin)
	deadline := time.Now().Add(10 * time.Second)
	var total uint64
	var lines []loggedMove
	for time.Now().Before(deadline) {
		lines, total = loggedMoves(l.Daemon.Out.String()), 0
		for _, m := range lines {
			total += 1 + m.suppressed
		}
		if total >= moves {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	n := l.Stats(harness.PortName(1)).Counters.Get("moved") + l.Stats(harness.PortName(2)).Counters.Get("moved")
	if n != moves || total != n || len(lines) != 2 || lines[0].mac != station.String() {
		t.Errorf("%d moves counted while the daemon was stopped; the next daemon logged %d lines for %d: %+v", n, len(lines), total, lines)
	}
	l.Signal(syscall.SIGTERM)
}
