package testutil

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// netnsDir is where `ip netns` keeps its bind mounts.
const netnsDir = "/run/netns"

// NS is a named network namespace created by NewNS.
type NS struct {
	Name string // as known to `ip netns`
	Path string // bind mount of the namespace, /run/netns/NAME
}

var nsSeq atomic.Uint32

// NewNS creates a network namespace named Prefix()+"-"+seq+"-"+name with `ip
// netns add`, so `ip netns exec` and `ip -n` work on it, brings its loopback
// up, and registers a cleanup that deletes it. The cleanup kills nothing:
// processes and sockets inside are released by their own cleanups, which were
// registered later and therefore run first.
func NewNS(t testing.TB, name string) *NS {
	t.Helper()
	full := fmt.Sprintf("%s-%d-%s", Prefix(), nsSeq.Add(1), name)
	n := &NS{Name: full, Path: filepath.Join(netnsDir, full)}
	if out, err := exec.Command("ip", "netns", "add", full).CombinedOutput(); err != nil {
		t.Fatalf("create netns %s: %v: %s", full, err, bytes.TrimSpace(out))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", full).CombinedOutput(); err != nil {
			t.Errorf("delete netns %s: %v: %s", full, err, bytes.TrimSpace(out))
		}
	})
	if err := n.linkUp("lo"); err != nil {
		t.Fatalf("netns %s: %v", full, err)
	}
	return n
}

// Do runs f with the calling OS thread in the namespace and returns f's
// error. It runs f on a fresh goroutine locked to its thread, so the
// caller's thread never changes namespace; if the thread cannot be returned
// to its original namespace it stays locked and the runtime discards it when
// the goroutine exits.
//
// Only what f does on its own goroutine happens in the namespace: goroutines
// started by f run elsewhere. Sockets created inside f stay in the namespace
// for their whole life and may be used from any goroutine afterwards.
func (n *NS) Do(f func() error) error {
	target, err := netns.GetFromPath(n.Path)
	if err != nil {
		return fmt.Errorf("open netns %s: %w", n.Name, err)
	}
	defer target.Close()

	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("get current netns: %w", err)
			return
		}
		defer orig.Close()
		if err := netns.Set(target); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("enter netns %s: %w", n.Name, err)
			return
		}
		ferr := f()
		if err := netns.Set(orig); err != nil {
			// Leave the thread locked: it dies with this goroutine
			// instead of running other goroutines in the wrong namespace.
			errc <- errors.Join(ferr, fmt.Errorf("leave netns %s: %w", n.Name, err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// handle returns a netlink handle whose sockets live in the namespace.
func (n *NS) handle() (*netlink.Handle, error) {
	var h *netlink.Handle
	err := n.Do(func() error {
		var err error
		h, err = netlink.NewHandle()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("netlink handle in netns %s: %w", n.Name, err)
	}
	return h, nil
}

// retryIntr retries f while the kernel reports that a netlink dump was
// interrupted by a concurrent change.
func retryIntr(f func() error) error {
	var err error
	for range 5 {
		if err = f(); !errors.Is(err, netlink.ErrDumpInterrupted) {
			return err
		}
	}
	return err
}

func linkByName(h *netlink.Handle, name string) (netlink.Link, error) {
	var l netlink.Link
	err := retryIntr(func() error {
		var err error
		l, err = h.LinkByName(name)
		return err
	})
	return l, err
}

func (n *NS) linkUp(name string) error {
	h, err := n.handle()
	if err != nil {
		return err
	}
	defer h.Close()
	l, err := linkByName(h, name)
	if err != nil {
		return fmt.Errorf("look up %s in netns %s: %w", name, n.Name, err)
	}
	if err := h.LinkSetUp(l); err != nil {
		return fmt.Errorf("set %s up in netns %s: %w", name, n.Name, err)
	}
	return nil
}

// command builds `ip netns exec NAME name args...`. ip execs the program
// itself, so the command's PID is the program's PID.
func (n *NS) command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", n.execArgs(name, args)...)
}

func (n *NS) commandContext(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", n.execArgs(name, args)...)
}

func (n *NS) execArgs(name string, args []string) []string {
	return append([]string{"netns", "exec", n.Name, name}, args...)
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
	return exec.Command("nsenter", append([]string{"--net=" + n.Path, "--", name}, args...)...)
}

func (n *NS) start(t testing.TB, cmd *exec.Cmd) *Proc {
	t.Helper()
	name := cmd.Args[0]
	p := &Proc{Cmd: cmd, Out: &SafeBuffer{}, done: make(chan struct{})}
	p.Cmd.Stdout = p.Out
	p.Cmd.Stderr = p.Out
	// A grandchild holding the output pipe must not block Wait forever.
	p.Cmd.WaitDelay = time.Second
	// XXX Pdeathsig fires when the *thread* that forked exits, not the
	// process. Go only ends a thread when a goroutine locked to it exits,
	// which NS.Do does only when it cannot restore the namespace.
	p.Cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.Cmd.Start(); err != nil {
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

// Sysctl sets a sysctl inside the namespace by writing /proc/sys from a
// thread in it (net.* sysctls resolve against the writing thread's
// namespace). key is dotted ("net.ipv4.ip_forward") or a path below
// /proc/sys ("net/ipv4/conf/eth0.100/forwarding"), which is needed when a
// component contains a dot.
func (n *NS) Sysctl(key, value string) error {
	rel := key
	if !strings.Contains(rel, "/") {
		rel = strings.ReplaceAll(rel, ".", "/")
	}
	path := filepath.Join("/proc/sys", filepath.Clean("/"+rel))
	err := n.Do(func() error { return os.WriteFile(path, []byte(value), 0) })
	if err != nil {
		return fmt.Errorf("netns %s: sysctl %s=%s: %w", n.Name, key, value, err)
	}
	return nil
}
