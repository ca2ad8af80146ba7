package lab

// The test helpers of the core's package: its own tests (which a kind's
// package takes with it when it moves, with labtest) and, through
// export_test.go, its external tests, which import the kinds.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
)

func requireRoot(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("makes network namespaces: not under -short (make check)")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces, veth pairs, eBPF programs")
	}
}

// ours lists the namespaces under /run/netns that start with prefix.
func ours(t *testing.T, prefix string) []string {
	t.Helper()
	out, err := NamespacesOf(prefix)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// runPrefix begins the names of the namespaces of this process's lab runs
// (NewNet's Prefix): the tests count their own, not those of another lab
// run on the same machine.
var runPrefix = "tl" + strconv.Itoa(os.Getpid())

// built is trestle as trestleBinary built it, once for the package's
// tests; TestMain removes it.
var built struct {
	once     sync.Once
	dir, bin string
	err      error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// trestleBinary is the trestle the lab's DUTs run: TRESTLE_TEST_BIN when
// set (make test sets it to bin/trestle, as for the end-to-end tests),
// else this module's, built on first use. A test that changes the binary
// copies it first.
func trestleBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("TRESTLE_TEST_BIN"); bin != "" {
		abs, err := filepath.Abs(bin)
		if err != nil {
			t.Fatalf("TRESTLE_TEST_BIN: %v", err)
		}
		return abs
	}
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "trestle-lab-bin"); built.err != nil {
			return
		}
		built.bin = filepath.Join(built.dir, "trestle")
		if out, err := exec.Command("go", "build", "-o", built.bin, "../../cmd/trestle").CombinedOutput(); err != nil {
			built.err = fmt.Errorf("build trestle: %v\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}

// mustSpec is a DUT spec of a test, which parses.
func mustSpec(text string) Spec { return MustSpecs(text)[0] }
