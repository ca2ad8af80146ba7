package service

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/frrconf"
	"github.com/trestle/trestle/internal/lab"
	"github.com/trestle/trestle/internal/testutil"
)

// TestUnitVtysh: vtysh, which the daemon runs to ask bgpd about its EVPN
// sessions (docs/overlay.md, "FRR restarts"), reaches bgpd's vty socket
// with only the capabilities the systemd unit leaves the daemon (and no
// new privileges). FRR's vty sockets are frr:frrvty, mode 0770: root
// without CAP_DAC_OVERRIDE is refused them, and the daemon would hold no
// peer's entries while its session is away.
func TestUnitVtysh(t *testing.T) {
	t.Parallel()
	testutil.RequireNetns(t)
	testutil.RequireCmd(t, "setpriv", "vtysh", "chown", lab.FRRBGPd)
	bounding := unitBounding(t)

	// FRR's directory: not under the test's, which only root may enter,
	// as bgpd runs as frr.
	dir, err := os.MkdirTemp("", "trestle-vty-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	conf := filepath.Join(dir, "bgpd.conf")
	if err := os.WriteFile(conf, []byte("router bgp 65000\n bgp router-id 10.255.0.9\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("chown", "-R", "frr:frr", dir).CombinedOutput(); err != nil {
		t.Skipf("chown %s to frr (no frr user?): %v: %s", dir, err, out)
	}
	ns := testutil.NewNS(t, testutil.Prefix()+"vty")
	ns.Start(t, lab.FRRBGPd, append([]string{"-f", conf, "-i", filepath.Join(dir, "bgpd.pid")}, frrconf.Args(dir)...)...)
	sock := filepath.Join(dir, "bgpd.vty")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bgpd made no %s in 10s", sock)
		}
	}

	// As the daemon runs it (overlay.Vtysh).
	cmd := exec.Command("setpriv", "--bounding-set", bounding, "--inh-caps", "-all", "--no-new-privs", "--",
		"vtysh", "--vty_socket", dir, "-d", "bgpd", "-c", "show bgp l2vpn evpn summary json")
	cmd.Env = append(os.Environ(), "VTYSH_HISTFILE=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.HasPrefix(strings.TrimSpace(string(out)), "{") {
		t.Errorf("vtysh under the unit's capabilities (%s): %v: %s", bounding, err, out)
	}
}
