package daemon

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The watchdog is fed only when the daemon's lock can be taken: a daemon
// stuck under its lock goes unfed and systemd restarts it.
func TestWatchdogFeedsOnlyWhenLockFree(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", sock)
	t.Setenv("WATCHDOG_USEC", "2000000")
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
	w := newWorld(t)
	wd := w.d.watchdog()
	if wd == nil {
		t.Fatal("no watchdog ticker with WATCHDOG_USEC set")
	}
	wd.Stop()
	read := func(within time.Duration) string {
		buf := make([]byte, 256)
		_ = conn.SetReadDeadline(time.Now().Add(within))
		n, err := conn.Read(buf)
		if err != nil {
			return ""
		}
		return string(buf[:n])
	}
	w.d.feedWatchdog()
	if got := read(5 * time.Second); !strings.Contains(got, "WATCHDOG=1") {
		t.Fatalf("fed with the lock free: systemd heard %q", got)
	}
	w.d.mu.Lock()
	done := make(chan struct{})
	go func() { w.d.feedWatchdog(); close(done) }()
	if got := read(300 * time.Millisecond); got != "" {
		t.Errorf("fed while the lock was held: systemd heard %q", got)
	}
	w.d.mu.Unlock()
	<-done
	if got := read(5 * time.Second); !strings.Contains(got, "WATCHDOG=1") {
		t.Errorf("fed once the lock was free: systemd heard %q", got)
	}

	t.Setenv("WATCHDOG_USEC", "")
	if w.d.watchdog() != nil {
		t.Error("a watchdog ticker outside systemd's watchdog")
	}
}
