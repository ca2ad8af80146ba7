// Package labtest is the test kit of the lab's kinds (internal/lab/kinds):
// what a kind's test needs to run its kind for real, beside the core's
// own tests, which keep theirs in the core's package.
package labtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/lab"
)

// RequireRoot skips a test that makes network namespaces: under -short
// (make check) and without root.
func RequireRoot(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("makes network namespaces: not under -short (make check)")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces, veth pairs, eBPF programs")
	}
}

// built is trestle as TrestleBinary built it, once for a package's tests;
// Main removes it.
var built struct {
	once     sync.Once
	dir, bin string
	err      error
}

// Main runs a kind's tests (its TestMain) and removes the trestle that
// TrestleBinary built for them.
func Main(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// TrestleBinary is the trestle the lab's DUTs run: TRESTLE_TEST_BIN when
// set (make test sets it to bin/trestle, as for the end-to-end tests),
// else this module's, built on first use.
func TrestleBinary(t *testing.T) string {
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
		if out, err := exec.Command("go", "build", "-o", built.bin, "github.com/trestle/trestle/cmd/trestle").CombinedOutput(); err != nil {
			built.err = fmt.Errorf("build trestle: %v\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}

// Execute runs sc with trestle bin on a shared placement, failing t on a
// result with an error, and returns the run's record.
func Execute(t *testing.T, sc lab.Scenario, bin string) *lab.Run {
	t.Helper()
	run, err := lab.Execute(context.Background(), lab.Config{Scenario: sc, Placement: "shared", Trestle: bin, WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range run.Results {
		if r.Error != "" {
			t.Errorf("%s x%d %s: %s", r.DUT, r.Chain, r.Test, r.Error)
		}
	}
	return run
}

// TinyTiming is the lab's timing cut to what a test can wait for: trials
// of 300 ms, confirmations of 500 ms. A kind's test asks whether each DUT
// forwards, not whether it loses nothing: up to 5% lost passes (Open
// vSwitch's userspace datapath drops a few frames at most rates here, and
// a zero-loss search can then find no rate).
func TinyTiming() lab.Timing {
	tm := lab.DefaultTiming
	tm.Search.Trial, tm.Search.Confirm = 300*time.Millisecond, 500*time.Millisecond
	tm.Settle, tm.Drain = 50*time.Millisecond, 100*time.Millisecond
	tm.Search.LossGoal = 0.05
	return tm
}

// Namespaces are the network namespaces of this process's lab runs (their
// names start with "tl" and its PID): a test compares them before a run
// and after, to see that it left none.
func Namespaces(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir("/run/netns")
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	prefix := "tl" + strconv.Itoa(os.Getpid())
	var out []string
	for _, e := range ents {
		// tl12 is not tl123's: what follows the PID is no digit.
		if rest, ok := strings.CutPrefix(e.Name(), prefix); ok && (rest == "" || rest[0] < '0' || rest[0] > '9') {
			out = append(out, e.Name())
		}
	}
	return out
}
