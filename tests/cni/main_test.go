package cni

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/trestle/trestle/tests/harness"
)

// pluginDir holds the plugin, named trestle as CNI_PATH wants it
// (TRESTLE_TEST_CNI: make build's bin/cni/trestle; else built here);
// toolsDir holds cnitool and host-local (TRESTLE_TEST_TOOLS, else the
// module's bin/tools: scripts/deps.sh tools puts them there).
var pluginDir, toolsDir string

// TestMain is harness.Main's, with the plugin beside the daemon: both are
// make build's when make test names them, else built into a directory
// removed at the end.
func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	flag.Parse()
	toolsDir = os.Getenv("TRESTLE_TEST_TOOLS")
	if toolsDir == "" {
		toolsDir, _ = filepath.Abs("../../bin/tools") // the test runs in tests/cni
	}
	dir, err := os.MkdirTemp("", "trestle-cni")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	build := func(env, pkg, out string) (string, error) {
		if p := os.Getenv(env); p != "" {
			return filepath.Abs(p)
		}
		if testing.Short() {
			return "", nil // every test skips
		}
		if b, err := exec.Command("go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
			return "", fmt.Errorf("build %s: %v\n%s", pkg, err, b)
		}
		return out, nil
	}
	if harness.Bin, err = build("TRESTLE_TEST_BIN", "github.com/trestle/trestle/cmd/trestle", filepath.Join(dir, "trestle")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	plugin, err := build("TRESTLE_TEST_CNI", "github.com/trestle/trestle/cmd/trestle-cni", filepath.Join(dir, "cni", "trestle"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if plugin != "" && filepath.Base(plugin) != "trestle" {
		fmt.Fprintf(os.Stderr, "TRESTLE_TEST_CNI=%s: CNI_PATH finds the plugin of type trestle by the name trestle\n", plugin)
		return 1
	}
	pluginDir = filepath.Dir(plugin)
	return m.Run()
}
