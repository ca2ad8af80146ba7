package testutil

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// RequireBPFFS makes sure the BPF filesystem is mounted at /sys/fs/bpf, as
// systemd does at boot (a fresh CI machine may have none), and returns a
// directory of this test's own under it for pins, removed when the test ends.
// Daemons that pin must then run in the test's mount namespace: started with
// NS.StartNetOnly, not with `ip netns exec`, whose /sys is its own.
func RequireBPFFS(t testing.TB) string {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs("/sys/fs/bpf", &st); err != nil {
		t.Skipf("no /sys/fs/bpf: %v", err)
	}
	if uint32(st.Type) != unix.BPF_FS_MAGIC {
		if err := unix.Mount("bpf", "/sys/fs/bpf", "bpf", 0, "mode=0700"); err != nil {
			t.Fatalf("mount the BPF filesystem at /sys/fs/bpf: %v", err)
		}
		t.Logf("mounted the BPF filesystem at /sys/fs/bpf (it was not)")
	}
	// The whole name: subtests of two tests (TestA/xdp, TestB/xdp) may run
	// side by side.
	dir := filepath.Join("/sys/fs/bpf", Prefix()+"-"+strings.ReplaceAll(t.Name(), "/", "-"))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// LoadProgram loads a program of the test's own, closed when the test
// ends, and gives its id.
func LoadProgram(t testing.TB, spec *ebpf.ProgramSpec) (*ebpf.Program, ebpf.ProgramID) {
	t.Helper()
	p, err := ebpf.NewProgram(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	info, err := p.Info()
	if err != nil {
		t.Fatal(err)
	}
	id, _ := info.ID()
	return p, id
}
