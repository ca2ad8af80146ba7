package testutil

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/trestle/trestle/internal/netnsutil"
)

// runDir holds a file per test process that made namespaces: named by its
// Prefix, holding its PID. A test process removes what one that is gone
// left (killed, or past `go test -timeout`), as the lab's Sweep does for
// its runs, whose prefixes hold their PIDs.
var runDir = "/run/trestle-test"

// registered records this process's prefix, once, after sweeping. The
// record stays after a clean exit (each test's cleanup deleted its
// namespaces), and the next sweep removes it with nothing else.
var registered = sync.OnceValues(func() ([]string, error) {
	gone, err := sweepGone()
	if mkErr := os.MkdirAll(runDir, 0o755); mkErr != nil {
		return gone, errors.Join(err, mkErr)
	}
	werr := os.WriteFile(filepath.Join(runDir, Prefix()), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644)
	return gone, errors.Join(err, werr)
})

// sweepGone removes the namespaces (and their pinned datapaths) of test
// processes recorded in runDir that no longer run, and their records. A
// record that cannot be read is left alone. It returns what it removed.
func sweepGone() ([]string, error) {
	ents, err := os.ReadDir(runDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var gone []string
	var errs []error
	for _, e := range ents {
		if e.Name() == Prefix() || !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(runDir, e.Name()))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 || !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			continue // a live process's (or one not ours to judge)
		}
		names, _ := filepath.Glob(filepath.Join(netnsutil.NetnsDir, e.Name()+"-*"))
		failed := false
		for _, path := range names {
			removed, err := netnsutil.RemoveGone(filepath.Base(path))
			gone = append(gone, removed...)
			if err != nil {
				errs = append(errs, err)
				failed = true
			}
		}
		if !failed {
			if err := os.Remove(filepath.Join(runDir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		return gone, fmt.Errorf("remove what gone test processes left: %w", errors.Join(errs...))
	}
	return gone, nil
}
