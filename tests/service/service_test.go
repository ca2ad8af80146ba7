package service

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trestle/trestle/tests/harness"
)

// TestSystemdNotify: under a Type=notify service (NOTIFY_SOCKET set), the
// daemon says READY=1 once the datapath is up and its socket answers,
// RELOADING=1 and READY=1 around a reload, and STOPPING=1.
func TestSystemdNotify(t *testing.T) {
	l := harness.NewLab(t, 2)
	path := filepath.Join(l.Dir, "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", path)
	l.WriteConfig(l.Config("", nil))
	l.Start()
	read := func(want string) string {
		t.Helper()
		buf := make([]byte, 4096)
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("waiting for %s from the daemon: %v", want, err)
		}
		msg := string(buf[:n])
		if !strings.Contains(msg, want) {
			t.Fatalf("the daemon told systemd %q, want %s", msg, want)
		}
		return msg
	}
	msg := read("READY=1")
	if !strings.Contains(msg, "STATUS=forwarding: 1 bridges") {
		t.Errorf("ready message %q has no status", msg)
	}
	// Ready means the socket answers.
	if len(l.Show().Bridges) != 1 {
		t.Fatal("show after READY=1")
	}
	if out, err := l.CLI("reload"); err != nil {
		t.Fatalf("reload: %v: %s", err, out)
	}
	read("RELOADING=1")
	read("READY=1")
	l.Stop()
	read("STOPPING=1")
}

// TestMakeInstall: `make install DESTDIR=...` puts the binary, the unit
// (pointing at the binary) and the example config in place, the example
// is a valid config, and systemd-analyze (where there is one) accepts the
// unit.
func TestMakeInstall(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("installs the binary Main builds: not under -short (make check)")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dest := t.TempDir()
	cmd := exec.Command("make", "-C", root, "install", "DESTDIR="+dest, "PREFIX=/usr/local", "BIN="+harness.Bin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	for _, f := range []string{"usr/local/bin/trestle", "lib/systemd/system/trestle.service", "etc/trestle/trestle.toml", "usr/local/share/doc/trestle/trestle.toml.example"} {
		if _, err := os.Stat(filepath.Join(dest, f)); err != nil {
			t.Errorf("make install: %v", err)
		}
	}
	unit, err := os.ReadFile(filepath.Join(dest, "lib/systemd/system/trestle.service"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Type=notify", "ExecStart=/usr/local/bin/trestle run --config /etc/trestle/trestle.toml", "ExecReload=/usr/local/bin/trestle reload --config /etc/trestle/trestle.toml",
		// What the daemon may do and see (issue 29), and the watchdog it feeds.
		"CapabilityBoundingSet=CAP_NET_ADMIN CAP_BPF CAP_PERFMON CAP_SYS_ADMIN CAP_NET_RAW CAP_SYS_PTRACE CAP_DAC_OVERRIDE\n", "NoNewPrivileges=yes", "ProtectSystem=strict", "ReadWritePaths=-/sys/fs/bpf\n", "WatchdogSec="} {
		if !strings.Contains(string(unit), want) {
			t.Errorf("the unit has no %q:\n%s", want, unit)
		}
	}
	if out, err := exec.Command(harness.Bin, "check", filepath.Join(dest, "etc/trestle/trestle.toml")).CombinedOutput(); err != nil {
		t.Errorf("the example config: %v: %s", err, out)
	}
	// A second install keeps a config that is there.
	if err := os.WriteFile(filepath.Join(dest, "etc/trestle/trestle.toml"), []byte("# mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("make", "-C", root, "install", "DESTDIR="+dest, "BIN="+harness.Bin).CombinedOutput(); err != nil {
		t.Fatalf("make install again: %v\n%s", err, out)
	}
	if b, _ := os.ReadFile(filepath.Join(dest, "etc/trestle/trestle.toml")); string(b) != "# mine\n" {
		t.Error("a second make install replaced the config")
	}
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Log("no systemd-analyze: the unit is not verified")
		return
	}
	// systemd-analyze wants ExecStart's binary where the unit says: point a
	// copy at the installed one.
	bin := filepath.Join(dest, "usr/local/bin/trestle")
	copyUnit := filepath.Join(t.TempDir(), "trestle.service")
	if err := os.WriteFile(copyUnit, []byte(strings.ReplaceAll(string(unit), "/usr/local/bin/trestle", bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("systemd-analyze", "verify", copyUnit).CombinedOutput(); err != nil {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// unitBounding is the unit's CapabilityBoundingSet as setpriv's
// --bounding-set takes it.
func unitBounding(t *testing.T) string {
	t.Helper()
	var set []string
	for _, c := range unitCaps(t) {
		set = append(set, "+"+strings.ToLower(strings.TrimPrefix(c, "CAP_")))
	}
	return "-all," + strings.Join(set, ",")
}

// unitCaps is the unit's CapabilityBoundingSet, read from dist/trestle.service.
func unitCaps(t *testing.T) []string {
	t.Helper()
	unit, err := os.ReadFile("../../dist/trestle.service")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(unit), "\n") {
		if v, ok := strings.CutPrefix(l, "CapabilityBoundingSet="); ok {
			return strings.Fields(v)
		}
	}
	t.Fatal("dist/trestle.service has no CapabilityBoundingSet")
	return nil
}

// TestUnitCapabilities: the daemon does its work with only the
// capabilities the systemd unit leaves it (and no new privileges), as it
// runs under systemd: ports in xdp mode whose veth peers are in other
// namespaces (entered to turn GRO on), a persisted datapath pinned and
// adopted, frames forwarded. A capability dropped from the unit that the
// daemon needs fails here, not on an operator's host.
func TestUnitCapabilities(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("no setpriv")
	}
	bounding := unitBounding(t)
	l := harness.NewPersistLab(t, 2, func(int) string { return "mode = \"xdp\"\n" })
	start := func() {
		l.Daemon = l.SW.StartNetOnly(t, "setpriv", "--bounding-set", bounding, "--inh-caps", "-all", "--no-new-privs", "--",
			harness.Bin, "run", "--config", l.Cfg, "--socket", l.Sock)
		l.WaitSocket()
	}
	start()
	for _, p := range l.Show().Bridges[0].Ports {
		if p.State != "up" || p.Mode != "xdp" {
			t.Errorf("port %s under the unit's capabilities (%s): %s %s: %s", p.Name, bounding, p.State, p.Mode, p.Reason)
		}
	}
	l.PingAll()
	// Stopped and started again under the same limits: the pinned
	// datapath is adopted.
	l.Signal(syscall.SIGTERM)
	start()
	if out := l.Daemon.Out.String(); !strings.Contains(out, "adopted the pinned datapath") {
		t.Errorf("the second daemon did not adopt the pinned datapath:\n%s", out)
	}
	l.PingAll()
	l.Signal(syscall.SIGTERM)
}
