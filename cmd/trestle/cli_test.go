package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// CLI tests that need no daemon and no privileges: they run the command in-process.

func runCLI(t *testing.T, env map[string]string, args ...string) (string, int) {
	t.Helper()
	var out bytes.Buffer
	code := run(args, &out, &out, func(k string) string { return env[k] })
	return out.String(), code
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.toml")
	os.WriteFile(good, []byte("[[bridge]]\nname = \"br0\"\n[[bridge.port]]\ninterface = \"veth-a\"\n"), 0o644)
	if out, code := runCLI(t, nil, "check", good); code != 0 || !strings.Contains(out, "ok (1 bridges, 1 ports)") {
		t.Errorf("check good file: %d %q", code, out)
	}
	bad := filepath.Join(dir, "bad.toml")
	os.WriteFile(bad, []byte("[[bridge]]\nname = \"br0\"\n[[bridge.port]]\ninterface = \"veth-a\"\nmax_macs = -1\n"), 0o644)
	out, code := runCLI(t, nil, "check", bad)
	if code == 0 || !strings.Contains(out, bad+":5: bridge[0].port[0].max_macs") {
		t.Errorf("check bad file: %d %q", code, out)
	}
}

func TestNoDaemon(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	out, code := runCLI(t, map[string]string{"TRESTLE_SOCKET": sock}, "show")
	if code == 0 || !strings.Contains(out, sock) || !strings.Contains(out, "no trestle daemon") {
		t.Errorf("show with no daemon: %d %q", code, out)
	}
	// --socket wins over the environment.
	other := filepath.Join(t.TempDir(), "other.sock")
	out, _ = runCLI(t, map[string]string{"TRESTLE_SOCKET": sock}, "stats", "--socket", other)
	if !strings.Contains(out, other) {
		t.Errorf("--socket not used: %q", out)
	}
}

func TestRunNeedsConfig(t *testing.T) {
	out, code := runCLI(t, nil, "run")
	if code == 0 || !strings.Contains(out, "--config FILE is required") {
		t.Errorf("run without --config: %d %q", code, out)
	}
}
