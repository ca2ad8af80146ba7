// Package ports tests the ports added at run time (issue 28): `trestle
// port add|del|list` against the real daemon, with traffic through them.
package ports

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/testutil"
	"github.com/trestle/trestle/tests/harness"
)

// config is br0 with the given hosts' ports in the file, in mode, and a
// bridge "pods" with no port in the file.
func config(l *harness.Lab, mode string, hosts ...int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[daemon]\nsocket = %q\n\n[[bridge]]\nname = \"br0\"\n", l.Sock)
	for _, i := range hosts {
		fmt.Fprintf(&b, "[[bridge.port]]\ninterface = %q\nmode = %q\n", harness.PortName(i), mode)
	}
	b.WriteString("\n[[bridge]]\nname = \"pods\"\n")
	return b.String()
}

// list is `trestle port list --json` by "bridge/port".
func list(l *harness.Lab) map[string]ctl.PortEntry {
	l.T.Helper()
	var es []ctl.PortEntry
	l.CLIJSON(&es, "port", "list")
	out := map[string]ctl.PortEntry{}
	for _, e := range es {
		out[e.Bridge+"/"+e.Name] = e
	}
	return out
}

func mustCLI(l *harness.Lab, args ...string) string {
	l.T.Helper()
	out, err := l.CLI(args...)
	if err != nil {
		l.T.Fatalf("trestle %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// wantPorts checks that port list has exactly these "bridge/port" ports,
// each with its origin ("file" or "run:OWNER"), up.
func wantPorts(l *harness.Lab, want map[string]string) {
	l.T.Helper()
	got := list(l)
	for k, origin := range want {
		e, ok := got[k]
		o := e.Origin
		if e.Origin == "run" {
			o += ":" + e.Owner
		}
		if !ok || o != origin || e.State != "up" {
			l.T.Errorf("port %s: %+v, want %s and up", k, e, origin)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			l.T.Errorf("port %s listed, not wanted: %+v", k, got[k])
		}
	}
}

func ping(l *harness.Lab, pairs ...[2]int) {
	l.T.Helper()
	for _, p := range pairs {
		if err := l.Host(p[0]).Ping(harness.HostIP(p[1]), 2); err != nil {
			l.T.Fatalf("ping h%d -> h%d: %v", p[0], p[1], err)
		}
	}
}

// cleanup stops the daemon and forgets what it recorded (run-time ports
// outlive a daemon without persist too).
func cleanup(l *harness.Lab) {
	l.T.Cleanup(func() {
		if l.Daemon != nil {
			_ = l.Daemon.Stop()
		}
		if out, err := l.SW.ExecNetOnly(harness.Bin, "down", "--socket", l.Sock); err != nil {
			l.T.Errorf("cleanup: trestle down: %v %s", err, out)
		}
	})
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestRunTimePorts: in each mode, ports added at run time forward, and are
// kept across reload, SIGHUP, kill -9 and SIGTERM (a daemon without
// persist), until the file names their interface (which wins), port del
// removes them (by owner), or their interface is deleted. A bridge with no
// port in the file takes them too.
func TestRunTimePorts(t *testing.T) {
	harness.ForModes(t, func(t *testing.T, mode string) {
		l := harness.NewLab(t, 3)
		cleanup(l)
		l.WriteConfig(config(l, mode, 1))
		if out, err := l.CLI("check", l.Cfg); err != nil || !strings.Contains(out, "ok (2 bridges, 1 ports)") {
			t.Fatalf("check of a bridge without ports: %v %s", err, out)
		}
		l.Start()
		if st := l.Show(); len(st.Bridges) != 2 || st.Bridges[1].Name != "pods" || len(st.Bridges[1].Ports) != 0 {
			t.Fatalf("show: %+v", st.Bridges)
		}
		for _, i := range []int{2, 3} {
			out := mustCLI(l, "port", "add", "br0", harness.PortName(i), "mode="+mode, fmt.Sprintf("owner=o%d", i))
			if want := fmt.Sprintf("added port %s to br0: up at %s\n", harness.PortName(i), mode); out != want {
				t.Errorf("port add: %q, want %q", out, want)
			}
		}
		all := map[string]string{"br0/port-h1": "file", "br0/port-h2": "run:o2", "br0/port-h3": "run:o3"}
		wantPorts(l, all)
		l.PingAll()

		mustCLI(l, "reload")
		wantPorts(l, all)
		if err := l.Daemon.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the SIGHUP's reload", func() bool { return strings.Contains(l.Daemon.Out.String(), "reloaded") })
		wantPorts(l, all)
		ping(l, [2]int{1, 2}, [2]int{3, 1})

		l.Signal(syscall.SIGKILL)
		l.Start()
		wantPorts(l, all)
		ping(l, [2]int{2, 1}, [2]int{3, 2})

		l.Signal(syscall.SIGTERM)
		l.AssertNoPrograms()
		l.Start()
		wantPorts(l, all)
		ping(l, [2]int{1, 3}, [2]int{2, 3})

		// The file names port-h3: the file's port wins, and stays the
		// file's once the file drops it again.
		l.WriteConfig(config(l, mode, 1, 3))
		mustCLI(l, "reload")
		all["br0/port-h3"] = "file"
		wantPorts(l, all)

		out := mustCLI(l, "port", "del", "br0", "--owner", "o2")
		if !strings.Contains(out, `removed 1 ports of owner "o2" from br0: port-h2`) {
			t.Errorf("port del --owner: %q", out)
		}
		delete(all, "br0/port-h2")
		wantPorts(l, all)
		for k := range l.Programs() {
			if strings.HasPrefix(k, harness.PortName(2)+"/") {
				t.Errorf("a program is left on a deleted port: %s", k)
			}
		}

		// A port of the bridge without file ports, gone with its
		// interface; one by name.
		mustCLI(l, "port", "add", "pods", harness.PortName(2), "mode="+mode)
		all["pods/port-h2"] = "run:"
		wantPorts(l, all)
		l.SW.MustExec(t, "ip", "link", "del", harness.PortName(2))
		waitFor(t, "the port of a deleted interface to go", func() bool { _, ok := list(l)["pods/port-h2"]; return !ok })
		delete(all, "pods/port-h2")
		wantPorts(l, all)
		testutil.Veth(t, l.SW, "rt-new", l.Host(2), "eth1", "")
		mustCLI(l, "port", "add", "pods", "rt-new", "mode="+mode)
		mustCLI(l, "port", "del", "pods", "rt-new")
		wantPorts(l, all)
	})
}

// TestRunTimePortPersist: with persist, a stream h1 -> h2 through a port
// added at run time loses no frame while the daemon is killed and
// restarted, stopped and restarted, reloaded and sent SIGHUP; h3 sees none
// of it.
func TestRunTimePortPersist(t *testing.T) {
	harness.ForModes(t, func(t *testing.T, mode string) {
		l := harness.NewPersistLab(t, 3, nil)
		l.WriteConfig(strings.Replace(config(l, mode, 1, 3), "[daemon]\n", "[daemon]\npersist = true\n", 1))
		l.StartNet(harness.Bin)
		mustCLI(l, "port", "add", "br0", harness.PortName(2), "mode="+mode, "owner=cni/c2/eth0")
		l.PingAll()
		all := map[string]string{"br0/port-h1": "file", "br0/port-h2": "run:cni/c2/eth0", "br0/port-h3": "file"}

		s := l.StartStream(7*time.Second, 1200*time.Millisecond)
		step := s.Step
		step("kill -9 and restart", func() {
			l.Signal(syscall.SIGKILL)
			l.StartNet(harness.Bin)
		})
		step("SIGTERM and restart", func() {
			l.Signal(syscall.SIGTERM)
			l.StartNet(harness.Bin)
		})
		step("reload", func() { mustCLI(l, "reload") })
		step("SIGHUP", func() {
			if err := l.Daemon.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
		})
		s.Lossless()
		wantPorts(l, all)
	})
}

// TestRunTimePortErrors: every refused add says why, and the running state
// is as it was: the ports, their programs, and the traffic through them.
func TestRunTimePortErrors(t *testing.T) {
	t.Parallel()
	l := harness.NewLab(t, 3)
	cleanup(l)
	l.WriteConfig(config(l, "tc", 1, 2))
	l.Start()
	mustCLI(l, "port", "add", "br0", harness.PortName(3), "owner=x")
	testutil.Veth(t, l.SW, "rt-extra", l.Host(3), "eth1", "")

	// The file's message for a bad max_macs.
	bad := filepath.Join(l.Dir, "bad.toml")
	if err := os.WriteFile(bad, []byte("[[bridge]]\nname = \"br0\"\n[[bridge.port]]\ninterface = \"rt-extra\"\nmax_macs = -1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fileOut, _ := l.CLI("check", bad)
	if !strings.Contains(fileOut, "max_macs: -1 is out of range") {
		t.Fatalf("check of a bad max_macs: %s", fileOut)
	}

	all := map[string]string{"br0/port-h1": "file", "br0/port-h2": "file", "br0/port-h3": "run:x"}
	progs := l.Programs()
	intact := func(what string) {
		t.Helper()
		wantPorts(l, all)
		if got := l.Programs(); fmt.Sprint(got) != fmt.Sprint(progs) {
			t.Errorf("%s: programs %v, were %v", what, got, progs)
		}
		ping(l, [2]int{1, 3})
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"nope", "rt-extra"}, `no bridge "nope"`},
		{[]string{"br0", "ghost0"}, `no interface named "ghost0" in the daemon's network namespace`},
		{[]string{"br0", harness.PortName(1)}, `interface "port-h1" is already a port of bridge "br0" (from the config file ` + l.Cfg + `)`},
		{[]string{"pods", harness.PortName(3)}, `interface "port-h3" is already a port of bridge "br0" (added at run time by "x")`},
		{[]string{"br0", "rt-extra", "max_macs=-1"}, "max_macs: -1 is out of range 0..16777216"},
		{[]string{"br0", "rt-extra", "stp=on"}, "stp: unknown field"},
		{[]string{"br0", "rt-extra", "vlan=10"}, `bridge "br0" is not VLAN-aware`},
		{[]string{"br0", "rt-extra", "mode=fast"}, "mode"},
	} {
		out, err := l.CLI(append([]string{"port", "add"}, c.args...)...)
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("port add %v: %v %q, want %q", c.args, err, out, c.want)
		}
		intact(strings.Join(c.args, " "))
	}
	if out, err := l.CLI("port", "del", "br0", harness.PortName(1)); err == nil || !strings.Contains(out, "is the config file's") {
		t.Errorf("port del of a file's port: %v %q", err, out)
	}
	intact("del of a file's port")

	// Ports of one owner go together (a full bridge's message is
	// tests/scale's: it takes 1024 ports).
	const n = 3
	for i := 0; i < n; i++ {
		testutil.Veth(t, l.SW, fmt.Sprintf("fa%d", i), l.SW, fmt.Sprintf("fb%d", i), "")
	}
	for i := 0; i < n; i++ {
		mustCLI(l, "port", "add", "pods", fmt.Sprintf("fa%d", i), "mode=tc", "owner=filler")
	}
	out := mustCLI(l, "port", "del", "pods", "--owner", "filler")
	if !strings.Contains(out, fmt.Sprintf("removed %d ports", n)) {
		t.Errorf("port del --owner filler: %q", out)
	}
	intact("an owner's ports removed")
}
