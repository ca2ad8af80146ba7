package daemon

import (
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// socketHeld counts as held a socket whose listener's backlog is full (a
// hung daemon that clients gave up on answers EAGAIN, not a refusal), and
// only a refused or missing socket as not held: `trestle down` must not
// take a live datapath apart under a hung daemon.
func TestSocketHeldBacklogFull(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "s")
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "listener")
	defer f.Close()
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: sock}); err != nil {
		t.Fatal(err)
	}
	// A backlog of 0 queues one connection; none is ever accepted.
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	var queued []net.Conn
	defer func() {
		for _, c := range queued {
			c.Close()
		}
	}()
	full := false
	for i := 0; i < 8 && !full; i++ {
		c, err := net.Dial("unix", sock)
		if err != nil {
			full = true
			t.Logf("backlog full after %d connections: %v", i, err)
			break
		}
		queued = append(queued, c)
	}
	if !full {
		t.Fatal("the backlog never filled")
	}
	if held, answers := socketHeld(sock); !held || answers {
		t.Errorf("a listener with a full backlog: held %v answers %v, want held and not answering", held, answers)
	}

	f.Close()
	if held, _ := socketHeld(sock); held {
		t.Errorf("a socket file with no listener is held")
	}
	if held, _ := socketHeld(filepath.Join(dir, "none")); held {
		t.Errorf("a missing socket is held")
	}
}
