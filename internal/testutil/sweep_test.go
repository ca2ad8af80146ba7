package testutil

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/trestle/trestle/internal/netnsutil"
)

// The namespaces of a test process that is gone are removed, with its
// record; a live one's are left.
func TestSweepGone(t *testing.T) {
	RequireNetns(t)
	old := runDir
	runDir = t.TempDir()
	t.Cleanup(func() { runDir = old })

	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	deadPrefix, livePrefix := Prefix()+"d", Prefix()+"l"
	for prefix, pid := range map[string]int{deadPrefix: dead.Process.Pid, livePrefix: os.Getppid()} {
		if err := os.WriteFile(filepath.Join(runDir, prefix), []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		n, err := netnsutil.Add(prefix + "-1-x")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if _, err := os.Stat(n.Path); err == nil {
				_ = n.Delete()
			}
		})
	}
	gone, err := sweepGone()
	if err != nil {
		t.Fatal(err)
	}
	if len(gone) != 1 || gone[0] != deadPrefix+"-1-x" {
		t.Errorf("swept %v, want only %s-1-x", gone, deadPrefix)
	}
	if _, err := os.Stat(filepath.Join(netnsutil.NetnsDir, deadPrefix+"-1-x")); !os.IsNotExist(err) {
		t.Errorf("the gone process's namespace is still there (%v)", err)
	}
	if _, err := os.Stat(filepath.Join(runDir, deadPrefix)); !os.IsNotExist(err) {
		t.Errorf("the gone process's record is still there (%v)", err)
	}
	if _, err := os.Stat(filepath.Join(netnsutil.NetnsDir, livePrefix+"-1-x")); err != nil {
		t.Errorf("a live process's namespace was removed: %v", err)
	}
}
