package harness

import (
	"context"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/ctl"
	"github.com/trestle/trestle/internal/lab"
	"github.com/trestle/trestle/internal/testutil"
)

// VariantBin is trestle built with another switch program (the lab's
// variant: the memos of bpf/lib/fdb.h taken out, a different program over
// the same maps). It stands for "a newer build" in upgrade tests.
var VariantBin = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "trestle-variant")
	if err != nil {
		return "", err
	}
	variantDir = dir // Main removes it
	b, err := lab.BuildVariant(context.Background(), dir, "test")
	return b.Path, err
})

var variantDir string

func removeVariant() {
	if variantDir != "" {
		os.RemoveAll(variantDir)
	}
}

// NewPersistLab is a Lab whose daemon runs with persist.
func NewPersistLab(t *testing.T, n int, portExtra func(int) string) *Lab {
	l := NewLab(t, n)
	testutil.RequireBPFFS(t)
	testutil.RequireCmd(t, "nsenter")
	l.WriteConfig(strings.Replace(l.Config("", portExtra), "[daemon]\n", "[daemon]\npersist = true\n", 1))
	// Whatever happens to the test, nothing pinned is left behind.
	t.Cleanup(func() {
		if l.Daemon != nil {
			_ = l.Daemon.Stop()
		}
		if out, err := l.SW.ExecNetOnly(Bin, "down", "--socket", l.Sock); err != nil {
			t.Errorf("cleanup: trestle down: %v %s", err, out)
		}
	})
	return l
}

// StartNet starts bin as the daemon with only the network namespace joined
// and waits for its socket.
func (l *Lab) StartNet(bin string) {
	l.T.Helper()
	l.Daemon = l.SW.StartNetOnly(l.T, bin, "run", "--config", l.Cfg, "--socket", l.Sock)
	l.WaitSocket()
}

func (l *Lab) WaitSocket() {
	l.T.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if err := ctl.Call(l.Sock, ctl.Request{Cmd: ctl.CmdShow}, nil); err == nil {
			return
		}
		select {
		case <-l.Daemon.Done():
			l.T.Fatalf("daemon exited: %v\n%s", l.Daemon.Err(), l.Daemon.Out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	l.T.Fatalf("daemon did not open %s\n%s", l.Sock, l.Daemon.Out.String())
}

// Signal stops the daemon with sig and waits for it.
func (l *Lab) Signal(sig syscall.Signal) string {
	l.T.Helper()
	if err := l.Daemon.Cmd.Process.Signal(sig); err != nil {
		l.T.Fatal(err)
	}
	select {
	case <-l.Daemon.Done():
	case <-time.After(10 * time.Second):
		l.T.Fatalf("daemon did not stop on %v", sig)
	}
	return l.Daemon.Out.String()
}
