package ctl

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestAcceptSurvivesEMFILE runs the process out of file descriptors with
// connections to the socket, as a local client could, and checks that the
// accept loop says so (AcceptError with EMFILE) and serves again once
// descriptors are free: the loop once ended for good, silently, on its
// first error.
func TestAcceptSurvivesEMFILE(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.sock")
	srv, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var mu sync.Mutex
	var acceptErrs []error
	srv.AcceptError = func(err error, _ time.Duration) {
		mu.Lock()
		acceptErrs = append(acceptErrs, err)
		mu.Unlock()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go srv.Serve(ctx, func(context.Context, Request) (any, error) { return "pong", nil })

	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	low := lim
	low.Cur = uint64(len(fds) + 16)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	restore := func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim) }
	defer restore()

	// Connect until the process has no descriptor left: each connection
	// takes one here and, once accepted, one in the server. The clients
	// send nothing, so the server holds its end until requestTimeout.
	var conns []net.Conn
	for i := 0; i < 64; i++ {
		c, err := net.DialTimeout("unix", path, time.Second)
		if err != nil {
			break
		}
		conns = append(conns, c)
	}
	// The loop keeps failing while nothing is freed: wait for its word.
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(acceptErrs)
		mu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, c := range conns {
		c.Close()
	}
	restore()
	mu.Lock()
	errs := append([]error(nil), acceptErrs...)
	mu.Unlock()
	if len(errs) == 0 {
		t.Fatalf("%d connections at a limit of %d descriptors and no accept failed: the test did not exhaust them", len(conns), low.Cur)
	}
	if !errors.Is(errs[0], syscall.EMFILE) {
		t.Errorf("accept failed with %v, want EMFILE", errs[0])
	}
	// Served again: the loop is alive (within its longest pause, a second).
	var got string
	for {
		err = CallWithin(path, Request{Cmd: "ping"}, &got, 5*time.Second)
		if err == nil || time.Now().After(deadline.Add(10*time.Second)) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil || got != "pong" {
		t.Fatalf("after the descriptors were freed: %q, %v", got, err)
	}
}
