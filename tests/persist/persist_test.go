package persist

// End-to-end tests of persistence: a stream through the bridge while the
// daemon is killed, stopped, and replaced by another build, and what
// `trestle down` leaves. Daemons with persist run with only the network
// namespace joined (nsenter --net): `ip netns exec` mounts a /sys of its
// own, which hides the BPF filesystem they pin to.

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/testutil"
	"github.com/trestle/trestle/tests/harness"
)

// TestPersistRestart: with persist, a stream h1 -> h2 loses no frame while
// the daemon is killed with SIGKILL and restarted, stopped with SIGTERM and
// restarted, and replaced by another build and back; h3 sees none of it (a
// forgotten table would flood); the table keeps its entries and their ages,
// the counters go on; and `trestle down` leaves no program, no pin, and the
// peers as they were.
func TestPersistRestart(t *testing.T) {
	t.Parallel()
	variant := variantBin(t)
	for _, mode := range []string{"xdp", "tc"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			l := harness.NewPersistLab(t, 3, func(int) string { return fmt.Sprintf("mode = %q\n", mode) })
			l.StartNet(harness.Bin)
			l.PingAll()
			// A station that speaks once, behind h3: its entry's age
			// must run on through the restarts.
			quietMAC := net.HardwareAddr{0x02, 0x99, 0, 0, 0, 3}
			if err := l.Host(3).RawSend("eth0", harness.Marked(harness.HostMAC(1), quietMAC, "quiet")); err != nil {
				t.Fatal(err)
			}
			pinged := time.Now()
			rx0 := l.Stats(harness.PortName(1)).Counters.Get("rx_packets")
			st := l.Show()
			if !st.Persist || !strings.HasPrefix(st.PinDir, "/sys/fs/bpf/trestle/") {
				t.Fatalf("show: persist %v pinned at %q", st.Persist, st.PinDir)
			}
			pinDir := st.PinDir

			g := restarts(l, 9*time.Second, variant, func(out string) {
				if !strings.Contains(out, "moved to this daemon's program in place") || !strings.Contains(out, "adopted the pinned datapath") {
					t.Errorf("the other build did not adopt the datapath and move its links:\n%s", out)
				}
			})

			// The table from before, with its ages.
			for i := 1; i <= 3; i++ {
				if e, ok := l.FDBEntry(harness.HostMAC(i)); !ok || e.Port != harness.PortName(i) {
					t.Errorf("h%d's entry after the restarts: %+v (found %v)", i, e, ok)
				}
			}
			e3, ok := l.FDBEntry(quietMAC)
			if !ok || e3.Port != harness.PortName(3) {
				t.Fatalf("the quiet station's entry after the restarts: %+v (found %v)", e3, ok)
			}
			if quiet := time.Since(pinged).Seconds(); e3.AgeSeconds < quiet-1.5 {
				t.Errorf("the quiet station's entry is %.1fs old, but it spoke %.1fs ago: its age was reset", e3.AgeSeconds, quiet)
			}
			if rx := l.Stats(harness.PortName(1)).Counters.Get("rx_packets"); rx < rx0+g.Sent {
				t.Errorf("port-h1 counted %d frames, want at least %d + %d: counters restarted", rx, rx0, g.Sent)
			}

			// Down: nothing left.
			l.Signal(syscall.SIGTERM)
			down(l, l.SW.ExecNetOnly, "detached")
			if _, err := os.Stat(pinDir); !os.IsNotExist(err) {
				t.Errorf("%s left after down: %v", pinDir, err)
			}
			if mode == "xdp" {
				if out := l.Host(1).MustExec(t, "ethtool", "-k", "eth0"); !strings.Contains(out, "tx-checksum-ip-generic: on") {
					t.Errorf("h1 eth0 TX checksum offload not restored by down:\n%s", out)
				}
			}
		})
	}
}

// TestNoPersist: without persist, a killed daemon leaves no program behind;
// the peers it changed are recorded, and the next daemon, or `trestle down`,
// gives them back.
func TestNoPersist(t *testing.T) {
	t.Parallel()
	l := harness.NewLab(t, 2)
	l.WriteConfig(l.Config("", func(int) string { return "mode = \"xdp\"\n" }))
	l.Start()
	l.PingAll()
	l.Signal(syscall.SIGKILL)
	l.AssertNoPrograms()
	if out := l.Host(1).MustExec(t, "ethtool", "-k", "eth0"); !strings.Contains(out, "tx-checksum-ip-generic: off") {
		t.Fatalf("h1's peer should still have TX checksum off after a crash:\n%s", out)
	}
	out, err := l.SW.Exec(harness.Bin, "down", "--socket", l.Sock)
	if err != nil || !strings.Contains(out, "restored veth peer") {
		t.Errorf("trestle down after a crash: %v\n%s", err, out)
	}
	if out := l.Host(1).MustExec(t, "ethtool", "-k", "eth0"); !strings.Contains(out, "tx-checksum-ip-generic: on") {
		t.Errorf("h1 eth0 TX checksum offload not restored by down:\n%s", out)
	}
	// A daemon killed again and started again gives them back itself.
	l.Start()
	l.Signal(syscall.SIGKILL)
	l.Start()
	if !strings.Contains(l.Daemon.Out.String(), "restored a veth peer changed by an earlier daemon") {
		t.Errorf("the next daemon did not restore the peers of a killed one:\n%s", l.Daemon.Out.String())
	}
	l.PingAll()
	l.Stop()
}

// runPortLab is a lab whose h1 port is added at run time (the file names
// the others), once the daemon is started with start; persist, or not.
func runPortLab(t *testing.T, persist bool, start func(*harness.Lab)) *harness.Lab {
	t.Helper()
	var l *harness.Lab
	if persist {
		l = harness.NewPersistLab(t, 3, nil)
	} else {
		l = harness.NewLab(t, 3)
	}
	cfg := strings.Replace(l.Config("", nil), fmt.Sprintf("\n[[bridge.port]]\ninterface = %q\n", harness.PortName(1)), "", 1)
	if persist {
		cfg = strings.Replace(cfg, "[daemon]\n", "[daemon]\npersist = true\n", 1)
	}
	l.WriteConfig(cfg)
	start(l)
	if out, err := l.CLI("port", "add", "br0", harness.PortName(1)); err != nil {
		t.Fatalf("port add: %v\n%s", err, out)
	}
	filterOn(t, l, true)
	return l
}

// filterOn checks that h1's port runs a program in trestle's tc filter,
// not a tcx link, or (on false) has none at all.
func filterOn(t *testing.T, l *harness.Lab, on bool) {
	t.Helper()
	progs := l.Programs()
	_, filter := progs[harness.PortName(1)+"/tc-filter"]
	others := 0
	for k := range progs {
		if strings.HasPrefix(k, harness.PortName(1)+"/") && !strings.HasSuffix(k, "/tc-filter") {
			others++
		}
	}
	if filter != on || others > 0 {
		t.Errorf("port-h1 (added at run time): a tc filter %v (want %v), %d other programs: %v", filter, on, others, progs)
	}
}

// TestPersistRunPort: a port added at run time at tc is a tc filter, which
// needs no pin. With persist, a stream in at it loses no frame while the
// daemon is killed and restarted, stopped and restarted, and replaced by
// another build and back: each daemon takes the filter over and moves it
// to its own program in place. `trestle down` takes it off.
func TestPersistRunPort(t *testing.T) {
	t.Parallel()
	variant := variantBin(t)
	l := runPortLab(t, true, func(l *harness.Lab) { l.StartNet(harness.Bin) })
	l.PingAll()
	restarts(l, 9*time.Second, variant, func(out string) {
		if !strings.Contains(out, "filters=1") || !strings.Contains(out, "moved to this daemon's program in place") {
			t.Errorf("the other build did not take over the filter and move it:\n%s", out)
		}
	})
	filterOn(t, l, true)
	if p := l.Show().Bridges[0].Ports; len(p) != 3 {
		t.Errorf("ports after the restarts: %+v", p)
	}
	l.Signal(syscall.SIGTERM)
	down(l, l.SW.ExecNetOnly, "detached tc filter")
}

// variantBin is another build of trestle, to upgrade to and back.
func variantBin(t *testing.T) string {
	t.Helper()
	testutil.RequireNetns(t)
	testutil.RequireCmd(t, "clang")
	variant, err := harness.VariantBin()
	if err != nil {
		t.Fatalf("build a variant of trestle: %v", err)
	}
	return variant
}

// restarts kills and restarts the daemon, stops and restarts it, and
// unless variant is "" replaces it by variant and back (back: what the
// variant logged), under a stream h1 -> h2 of dur, and checks the stream
// (StreamLossless).
func restarts(l *harness.Lab, dur time.Duration, variant string, back func(out string)) harness.GenSummary {
	l.T.Helper()
	s := l.StartStream(dur, 1500*time.Millisecond)
	s.Step("kill -9 and restart", func() {
		l.Signal(syscall.SIGKILL)
		l.StartNet(harness.Bin)
	})
	s.Step("SIGTERM and restart", func() {
		l.Signal(syscall.SIGTERM)
		l.StartNet(harness.Bin)
	})
	if variant == "" {
		return s.Lossless()
	}
	s.Step("replace by another build", func() {
		l.Signal(syscall.SIGTERM)
		l.StartNet(variant)
	})
	s.Step("and back", func() {
		back(l.Signal(syscall.SIGTERM))
		l.StartNet(harness.Bin)
	})
	return s.Lossless()
}

// down runs trestle down for l's stopped daemon through run (the switch
// namespace's Exec, or ExecNetOnly for a persisted datapath) and checks
// that it said want and left no program.
func down(l *harness.Lab, run func(string, ...string) (string, error), want string) {
	l.T.Helper()
	out, err := run(harness.Bin, "down", "--socket", l.Sock)
	if err != nil || !strings.Contains(out, want) {
		l.T.Fatalf("trestle down: %v\n%s", err, out)
	}
	l.AssertNoPrograms()
}

// TestNoPersistRunPort: without persist, a daemon that stops takes its
// run-time port's tc filter off; one killed leaves it (a filter is not
// closed with the process, as a link is), and the next daemon takes it
// over and forwards through it, or `trestle down` takes it off.
func TestNoPersistRunPort(t *testing.T) {
	t.Parallel()
	l := runPortLab(t, false, func(l *harness.Lab) { l.Start() })
	l.PingAll()
	l.Stop()

	l.Start() // takes the port back from the record
	filterOn(t, l, true)
	l.Signal(syscall.SIGKILL)
	filterOn(t, l, true)
	l.Start()
	if !strings.Contains(l.Daemon.Out.String(), "took over the tc filters an earlier daemon left") {
		t.Errorf("the next daemon did not say it took over the filter:\n%s", l.Daemon.Out.String())
	}
	filterOn(t, l, true)
	l.PingAll()
	l.Signal(syscall.SIGKILL)
	down(l, l.SW.Exec, "detached tc filter")
}

// TestDownStale: a persisted datapath whose namespace is deleted (with its
// daemon killed) is found and removed by `trestle down --stale`; the live
// ones are not touched.
func TestDownStale(t *testing.T) {
	testutil.RequireNetns(t)
	testutil.RequireBPFFS(t)
	testutil.RequireCmd(t, "nsenter", "ip")
	live := harness.NewPersistLab(t, 2, nil)
	live.StartNet(harness.Bin)
	livePins := live.Show().PinDir

	name := testutil.Prefix() + "-stale"
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v %s", err, out)
	}
	deleted := false
	t.Cleanup(func() {
		if !deleted {
			exec.Command("ip", "netns", "del", name).Run()
		}
	})
	nsPath := "/run/netns/" + name
	dir := t.TempDir()
	sock, cfgPath := filepath.Join(dir, "s.sock"), filepath.Join(dir, "s.toml")
	cfg := fmt.Sprintf("[daemon]\nsocket = %q\npersist = true\n\n[[bridge]]\nname = \"br0\"\n\n[[bridge.port]]\ninterface = \"sa\"\n\n[[bridge.port]]\ninterface = \"sb\"\n", sock)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"link", "add", "sa", "type", "veth", "peer", "name", "sb"}, {"link", "set", "sa", "up"}, {"link", "set", "sb", "up"}} {
		if out, err := exec.Command("ip", append([]string{"-n", name}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v %s", args, err, out)
		}
	}
	d := exec.Command("nsenter", "--net="+nsPath, "--", harness.Bin, "run", "--config", cfgPath)
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	var pins string
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var st ctl.Status
		if err := ctl.Call(sock, ctl.Request{Cmd: ctl.CmdShow}, &st); err == nil {
			pins = st.PinDir
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = d.Process.Kill()
	_ = d.Wait()
	if pins == "" {
		t.Fatal("the daemon in the namespace to be deleted did not come up")
	}
	if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns del: %v %s", err, out)
	}
	deleted = true
	// A namespace goes when its last reference does; its interfaces with it.
	var out []byte
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		out, err = exec.Command(harness.Bin, "down", "--stale").CombinedOutput()
		if err != nil || strings.Contains(string(out), filepath.Base(pins)) {
			break
		}
	}
	if err != nil || !strings.Contains(string(out), filepath.Base(pins)) {
		t.Fatalf("down --stale did not remove %s: %v\n%s", pins, err, out)
	}
	if _, err := os.Stat(pins); !os.IsNotExist(err) {
		t.Errorf("%s left after down --stale: %v", pins, err)
	}
	if _, err := os.Stat(livePins); err != nil {
		t.Errorf("down --stale removed the live daemon's datapath %s: %v", livePins, err)
	}
	live.PingAll()
}

// TestPersistPatch: with persist, a stream h1 -> h2 that crosses a patch
// (br0 [h1, patch br1] - br1 [patch br0, h2, h3]) loses no frame while the
// daemon is killed and restarted, and stopped and restarted: the patch
// ports are adopted with their slots, so both bridges' tables still say
// where h2 lives and h3 sees none of the stream.
func TestPersistPatch(t *testing.T) {
	t.Parallel()
	l := harness.NewPersistLab(t, 3, nil)
	var b strings.Builder
	fmt.Fprintf(&b, "[daemon]\npersist = true\nsocket = %q\n", l.Sock)
	fmt.Fprintf(&b, "[[bridge]]\nname = \"br0\"\n[[bridge.port]]\ninterface = %q\nmode = \"xdp\"\n[[bridge.port]]\npatch = \"br1\"\n", harness.PortName(1))
	fmt.Fprintf(&b, "[[bridge]]\nname = \"br1\"\n[[bridge.port]]\npatch = \"br0\"\n")
	for i := 2; i <= 3; i++ {
		fmt.Fprintf(&b, "[[bridge.port]]\ninterface = %q\nmode = \"xdp\"\n", harness.PortName(i))
	}
	l.WriteConfig(b.String())
	l.StartNet(harness.Bin)
	l.PingAll()
	where := func() map[string]string { // "bridge mac" -> port
		out := map[string]string{}
		for _, e := range l.FDB() {
			out[e.Bridge+" "+e.MAC] = e.Port
		}
		return out
	}
	before := where()
	if before["br0 "+harness.HostMAC(2).String()] != "patch-br1" || before["br1 "+harness.HostMAC(1).String()] != "patch-br0" {
		t.Fatalf("tables before the restarts: %v", before)
	}

	g := restarts(l, 5*time.Second, "", nil)
	after := where()
	for k, port := range before {
		if after[k] != port {
			t.Errorf("entry %s: on %q after the restarts, %q before", k, after[k], port)
		}
	}
	if tx := l.Stats("patch-br1").Counters.Get("tx_packets"); tx < g.Sent {
		t.Errorf("patch-br1 sent %d frames, want at least the stream's %d: its counters restarted", tx, g.Sent)
	}
}
