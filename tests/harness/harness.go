// Package harness is what trestle's end-to-end tests (tests/<feature>/)
// share: the real binary runs as the daemon in a switch namespace, hosts in
// namespaces of their own send real traffic through it, and the CLI reads
// the daemon's state the way a user would. Every namespace belongs to the
// test and is removed when it ends, also on failure (internal/testutil).
//
// Each feature is a package of its own, so that `go test -p N` runs them
// side by side; a package's TestMain is Main, which finds the binary once.
// Tests that measure nothing call t.Parallel(): each makes its own
// namespaces (unique names), its own socket and config under t.TempDir(),
// and its own pin directory (the daemon names it after the namespace and
// the socket).
package harness

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Bin is the trestle binary the tests run, set by Main.
var Bin string

// Main is the TestMain of every end-to-end package. Under -short (make
// check) it builds nothing: every test skips at testutil.RequireNetns. Otherwise the binary is TRESTLE_TEST_BIN when set
// (make test sets it to bin/trestle, built once for every package; or
// another build, to see a test fail against the build before a fix), else
// trestle built from this module into a temporary directory.
func Main(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	defer removeVariant()
	if bin := os.Getenv("TRESTLE_TEST_BIN"); bin != "" {
		abs, err := filepath.Abs(bin)
		if err != nil {
			fmt.Fprintf(os.Stderr, "TRESTLE_TEST_BIN: %v\n", err)
			return 1
		}
		Bin = abs
		return m.Run()
	}
	flag.Parse()
	if testing.Short() {
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "trestle-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	Bin = filepath.Join(dir, "trestle")
	// By import path: the test runs in its package's directory, anywhere
	// in the module.
	if out, err := exec.Command("go", "build", "-o", Bin, "github.com/trestle/trestle/cmd/trestle").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build trestle: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}
