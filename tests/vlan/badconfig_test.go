package vlan

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trestle/trestle/internal/testutil"
	"github.com/trestle/trestle/tests/harness"
)

// TestVLANBadConfigRun: the daemon refuses a file with bad VLAN keys with
// file:line: field before it touches anything (and check does:
// cmd/trestle TestVLANBadConfig).
func TestVLANBadConfigRun(t *testing.T) {
	t.Parallel()
	testutil.RequireNetns(t)
	dir := t.TempDir()
	base := "[[bridge]]\nname = \"br0\"\n[[bridge.port]]\ninterface = \"veth-a\"\nvlan = 10\n[[bridge.port]]\ninterface = \"veth-b\"\n"
	sw := testutil.NewNS(t, "sw")
	file := filepath.Join(dir, "run.toml")
	sock := filepath.Join(dir, "trestle.sock")
	body := fmt.Sprintf("[daemon]\nsocket = %q\n", sock) + base + "trunk = [10, 20]\nnative = 30\n"
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := sw.Exec(harness.Bin, "run", "--config", file)
	if err == nil {
		t.Fatalf("trestle run accepted a bad VLAN config:\n%s", out)
	}
	if want := file + ":11: bridge[0].port[1].native: 30 is not one of the port's trunk VLANs (10,20)"; !strings.Contains(out, want) {
		t.Errorf("trestle run with a bad VLAN config: output does not contain %q:\n%s", want, out)
	}
	if _, err := os.Stat(sock); err == nil {
		t.Errorf("a rejected config still opened the control socket")
	}
}
