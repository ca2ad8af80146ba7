package testutil

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"

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

// Proc is a long-running command started by NS.Start: the one kind the
// tests and the lab share (netnsutil.Proc). Its stdout and stderr both go
// to Out; a test's cleanup stops it.
type Proc = netnsutil.Proc

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
	// It dies with the test binary, from whichever thread it was started
	// (netnsutil.Start: the lab's spawner thread).
	p, err := netnsutil.StartProc(name, cmd)
	if err != nil {
		t.Fatalf("netns %s: start %s: %v", n.Name, name, err)
	}
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("netns %s: %s (pid %d) exited with %v, output:\n%s",
				n.Name, name, p.Cmd.Process.Pid, p.Err(), p.Output())
		}
	})
	return p
}
