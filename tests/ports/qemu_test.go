package ports

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/trestle/trestle/internal/testutil"
	"github.com/trestle/trestle/tests/harness"
)

// openTap makes a TAP in ns, held open by the test process as QEMU holds
// a VM's: closed (and so deleted) when the test ends.
func openTap(t *testing.T, ns *testutil.NS, name string) *os.File {
	t.Helper()
	var f *os.File
	err := ns.Do(func() error {
		fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err != nil {
			return err
		}
		ifr, err := unix.NewIfreq(name)
		if err != nil {
			unix.Close(fd)
			return err
		}
		ifr.SetUint16(unix.IFF_TAP | unix.IFF_NO_PI)
		if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
			unix.Close(fd)
			return fmt.Errorf("TUNSETIFF %s: %w", name, err)
		}
		f = os.NewFile(uintptr(fd), "/dev/net/tun:"+name)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// readTap waits up to timeout for a frame on the TAP that match accepts.
func readTap(f *os.File, match func([]byte) bool, timeout time.Duration) bool {
	buf := make([]byte, 2048)
	deadline := time.Now().Add(timeout)
	for {
		_ = f.SetReadDeadline(deadline)
		n, err := f.Read(buf)
		if err != nil {
			return false
		}
		if match(buf[:n]) {
			return true
		}
	}
}

// TestQEMUScripts: dist/qemu-ifup adds a TAP that a process holds open (as
// QEMU does) as a run-time port, with the bridge, VLAN and keys of its
// profile and the environment over it; frames pass between it and a veth
// host; dist/qemu-ifdown removes it, and again is no error; a key the
// config would refuse fails qemu-ifup with the config's message.
func TestQEMUScripts(t *testing.T) {
	t.Parallel()
	l := harness.NewLab(t, 1)
	cleanup(l)
	l.WriteConfig(fmt.Sprintf("[daemon]\nsocket = %q\n[[bridge]]\nname = \"br0\"\n[[bridge.port]]\ninterface = %q\nvlan = 10\n", l.Sock, harness.PortName(1)))
	l.Start()
	const tap = "tap-vm1"
	f := openTap(t, l.SW, tap)

	conf := filepath.Join(l.Dir, "qemu.conf")
	perTap := filepath.Join(l.Dir, "qemu.d")
	if err := os.WriteFile(conf, []byte("# the VMs' bridge\nbridge = nope\nvlan=10\nkeys=max_macs=8 protected=true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(perTap, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(perTap, tap+".conf"), []byte("owner=vm1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dist, err := filepath.Abs("../../dist")
	if err != nil {
		t.Fatal(err)
	}
	script := func(name string, env ...string) (string, error) {
		args := append([]string{"TRESTLE_QEMU_CONF=" + conf, "TRESTLE_QEMU_DIR=" + perTap, "TRESTLE=" + harness.Bin, "TRESTLE_SOCKET=" + l.Sock}, env...)
		return l.SW.Exec("env", append(args, filepath.Join(dist, name), tap)...)
	}

	// The profile's bridge does not exist: the environment's wins.
	if out, err := script("qemu-ifup"); err == nil || !strings.Contains(out, `no bridge "nope"`) {
		t.Errorf("qemu-ifup to the profile's missing bridge: %v %s", err, out)
	}
	if out, err := script("qemu-ifup", "TRESTLE_BRIDGE=br0", "TRESTLE_PORT_KEYS=max_macs=-1"); err == nil || !strings.Contains(out, "max_macs: -1 is out of range") {
		t.Errorf("qemu-ifup with a bad key: %v %s", err, out)
	}
	if _, ok := list(l)["br0/"+tap]; ok {
		t.Fatal("a refused qemu-ifup left a port")
	}
	if out, err := script("qemu-ifup", "TRESTLE_BRIDGE=br0"); err != nil {
		t.Fatalf("qemu-ifup: %v %s", err, out)
	}
	e := list(l)["br0/"+tap]
	if e.Origin != "run" || e.Owner != "vm1" || e.VLAN != 10 || e.MaxMACs != 8 || !e.Protected || e.State != "up" {
		t.Errorf("the TAP's port: %+v", e)
	}

	// Frames both ways: the VM speaks first, so the bridge learns it.
	vmMAC := net.HardwareAddr{0x02, 0x76, 0x6d, 0, 0, 1}
	capture := l.Host(1).Capture(t, "eth0")
	if _, err := f.Write(harness.Marked(harness.HostMAC(1), vmMAC, "from-vm")); err != nil {
		t.Fatal(err)
	}
	if n := capture.WaitFor(harness.HasMarker("from-vm"), 1, 3*time.Second); n != 1 {
		t.Errorf("h1 got %d frames from the VM, want 1", n)
	}
	if err := l.Host(1).RawSend("eth0", harness.Marked(vmMAC, harness.HostMAC(1), "to-vm")); err != nil {
		t.Fatal(err)
	}
	if !readTap(f, harness.HasMarker("to-vm"), 3*time.Second) {
		t.Error("the VM did not get h1's frame")
	}

	for i := 0; i < 2; i++ { // the second finds it gone: no error
		if out, err := script("qemu-ifdown", "TRESTLE_BRIDGE=br0"); err != nil {
			t.Fatalf("qemu-ifdown #%d: %v %s", i+1, err, out)
		}
	}
	if _, ok := list(l)["br0/"+tap]; ok {
		t.Error("qemu-ifdown left the port")
	}
	if _, err := f.Write(harness.Marked(harness.HostMAC(1), vmMAC, "after")); err != nil && !errors.Is(err, unix.EIO) {
		t.Fatal(err)
	}
	if n := capture.WaitFor(harness.HasMarker("after"), 1, 500*time.Millisecond); n != 0 {
		t.Errorf("h1 got a frame from a TAP that is no longer a port")
	}
}
