package testutil

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/netnsutil"
)

// NS is a named network namespace created by NewNS: the shared harness's
// (netnsutil.NS: Do, Sysctl, Link, LinkUp, NoIPv6, ...), whose test
// helpers (AddrAdd, MAC, Exec, Start, ...) fail the test on error.
type NS struct {
	netnsutil.NS
}

var nsSeq atomic.Uint32

// NewNS creates a network namespace named Prefix()+"-"+seq+"-"+name with `ip
// netns add`, so `ip netns exec` and `ip -n` work on it, brings its loopback
// up, and registers a cleanup that deletes it. The cleanup kills nothing:
// processes and sockets inside are released by their own cleanups, which were
// registered later and therefore run first.
func NewNS(t testing.TB, name string) *NS {
	t.Helper()
	if gone, err := registered(); err != nil {
		t.Logf("namespaces of gone test processes: %v", err)
	} else if len(gone) > 0 {
		t.Logf("removed what gone test processes left: %s", strings.Join(gone, " "))
	}
	full := fmt.Sprintf("%s-%d-%s", Prefix(), nsSeq.Add(1), name)
	n, err := netnsutil.Add(full)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Delete(); err != nil {
			t.Error(err)
		}
	})
	return &NS{NS: *n}
}

// command builds `ip netns exec NAME name args...`. ip execs the program
// itself, so the command's PID is the program's PID.
func (n *NS) command(name string, args ...string) *exec.Cmd {
	return n.Command(context.Background(), name, args...)
}

func (n *NS) commandContext(ctx context.Context, name string, args ...string) *exec.Cmd {
	return n.Command(ctx, name, args...)
}

// Exec runs a command inside the namespace and returns its combined output.
// The error includes the output.
func (n *NS) Exec(name string, args ...string) (string, error) {
	out, err := n.command(name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("netns %s: %s %s: %w: %s",
			n.Name, name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

// MustExec is Exec that fails the test on error.
func (n *NS) MustExec(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := n.Exec(name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// SafeBuffer is a bytes.Buffer safe for one writer and concurrent readers.
type SafeBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SafeBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SafeBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Proc is a long-running command started by NS.Start. Its stdout and stderr
// both go to Out. Start already waits for it: do not call Cmd.Wait; use Done,
// Err or Stop.
type Proc struct {
	Cmd *exec.Cmd
	Out *SafeBuffer

	done chan struct{}
	err  error // set before done is closed
	stop sync.Once
}

// stopGrace is how long Stop waits after SIGTERM before sending SIGKILL.
const stopGrace = 5 * time.Second

// Start starts a long-running command inside the namespace and registers a
// cleanup that stops it (SIGTERM, then SIGKILL after 5s) and waits for it.
// The command also gets SIGKILL if the test binary dies without cleaning up.
func (n *NS) Start(t testing.TB, name string, args ...string) *Proc {
	t.Helper()
	return n.start(t, n.command(name, args...))
}

// StartNetOnly is Start, but the command joins only the network namespace
// (nsenter --net), keeping the test's mount namespace: `ip netns exec`
// mounts a /sys of its own, which hides the host's BPF filesystem that a
// daemon with persist pins to.
func (n *NS) StartNetOnly(t testing.TB, name string, args ...string) *Proc {
	t.Helper()
	return n.start(t, n.netOnly(name, args...))
}

// ExecNetOnly is Exec with only the network namespace joined (see
// StartNetOnly).
func (n *NS) ExecNetOnly(name string, args ...string) (string, error) {
	out, err := n.netOnly(name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("netns %s: %s %s: %w: %s",
			n.Name, name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

func (n *NS) netOnly(name string, args ...string) *exec.Cmd {
	return n.NetOnly(context.Background(), name, args...)
}

func (n *NS) start(t testing.TB, cmd *exec.Cmd) *Proc {
	t.Helper()
	name := cmd.Args[0]
	p := &Proc{Cmd: cmd, Out: &SafeBuffer{}, done: make(chan struct{})}
	p.Cmd.Stdout = p.Out
	p.Cmd.Stderr = p.Out
	// A grandchild holding the output pipe must not block Wait forever.
	p.Cmd.WaitDelay = time.Second
	// It dies with the test binary, from whichever thread it was started
	// (netnsutil.Start: the lab's spawner thread).
	if err := netnsutil.Start(p.Cmd); err != nil {
		t.Fatalf("netns %s: start %s: %v", n.Name, name, err)
	}
	go func() {
		p.err = p.Cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("netns %s: %s (pid %d) exited with %v, output:\n%s",
				n.Name, name, p.Cmd.Process.Pid, p.err, p.Out.String())
		}
	})
	return p
}

// Done is closed when the process has exited and its output is collected.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err returns the result of Cmd.Wait; it is only meaningful after Done.
func (p *Proc) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// Stop sends SIGTERM to the process, SIGKILL if it is still running after
// 5s, waits for it, and returns the result of Cmd.Wait. It is idempotent and
// harmless after the process has exited by itself.
func (p *Proc) Stop() error {
	p.stop.Do(func() {
		select {
		case <-p.done:
			return
		default:
		}
		// Signalling goes through a pidfd, so an exited and reused PID is
		// never hit.
		_ = p.Cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(stopGrace):
			_ = p.Cmd.Process.Kill()
			<-p.done
		}
	})
	<-p.done
	return p.err
}
