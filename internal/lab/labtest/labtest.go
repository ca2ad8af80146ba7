// Package labtest is the test kit of the lab's kinds (internal/lab/kinds):
// what a kind's test needs to run its kind for real, beside the core's
// own tests, which keep theirs in the core's package.
package labtest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

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

// RunPrefix begins the names of the namespaces of this process's lab runs
// (NewNet's Prefix): a test counts its own, not another run's.
var RunPrefix = "tl" + strconv.Itoa(os.Getpid())

// Ours lists the namespaces of this process's lab runs: a test's count
// before a run and after, which must be the same.
func Ours(t *testing.T) []string {
	t.Helper()
	out, err := lab.NamespacesOf(RunPrefix)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Section is the one report section of run's kinds, terminal text and
// Markdown, from the run written as JSON and read again: the record
// survives the run's file.
func Section(t *testing.T, run *lab.Run) (terminal, markdown string) {
	t.Helper()
	b, err := json.Marshal(run)
	if err != nil {
		t.Fatal(err)
	}
	var back lab.Run
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	term, md := lab.Sections(&back)
	if len(term) != 1 || len(md) != 1 {
		t.Fatalf("sections: %q %q", term, md)
	}
	return term[0], md[0]
}
