package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trestle/trestle/internal/ctl"
)

// capture -w writes tenants' frames: it never follows a symbolic link,
// never writes over a file that is there, and makes its file 0600 whatever
// the umask; and it says so before it asks the daemon for anything.
func TestCaptureFileRefusesLinksAndFiles(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "none.sock") // no daemon: the file is checked first
	env := map[string]string{"TRESTLE_SOCKET": sock}

	target := filepath.Join(dir, "victim")
	if err := os.WriteFile(target, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "planted.pcap")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	out, code := runCLI(t, env, "capture", "br0", "p1", "-w", link)
	if code == 0 || !strings.Contains(out, "symbolic link") || strings.Contains(out, "no trestle daemon") {
		t.Errorf("capture -w to a symbolic link: %d %q", code, out)
	}
	out, code = runCLI(t, env, "capture", "br0", "p1", "-w", target)
	if code == 0 || !strings.Contains(out, "is there already") {
		t.Errorf("capture -w to an existing file: %d %q", code, out)
	}
	if b, _ := os.ReadFile(target); string(b) != "keep me" {
		t.Errorf("the file a link pointed at was written: %q", b)
	}
	// A dangling link is refused too (O_EXCL|O_NOFOLLOW), not followed to create its target.
	dangling := filepath.Join(dir, "dangling.pcap")
	if err := os.Symlink(filepath.Join(dir, "created-through-link"), dangling); err != nil {
		t.Fatal(err)
	}
	if _, code := runCLI(t, env, "capture", "br0", "p1", "-w", dangling); code == 0 {
		t.Errorf("capture -w to a dangling link succeeded")
	}
	if _, err := os.Lstat(filepath.Join(dir, "created-through-link")); err == nil {
		t.Errorf("capture -w created a file through a dangling link")
	}

	// A new file: 0600 under a permissive umask; with no daemon to capture
	// from, it is removed again rather than left empty.
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	f, err := createCaptureFile(filepath.Join(dir, "new.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := f.Stat()
	f.Close()
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("capture file mode %v, want 0600", fi.Mode().Perm())
	}
	fresh := filepath.Join(dir, "fresh.pcap")
	if out, code := runCLI(t, env, "capture", "br0", "p1", "-w", fresh); code == 0 || !strings.Contains(out, "no trestle daemon") {
		t.Errorf("capture with no daemon: %d %q", code, out)
	}
	if _, err := os.Lstat(fresh); err == nil {
		t.Errorf("a capture that never started left %s behind", fresh)
	}
}

// A device or a FIFO that is there is written to, not refused: the lab
// captures into /dev/null.
func TestCaptureFileStreams(t *testing.T) {
	f, err := createCaptureFile(os.DevNull)
	if err != nil {
		t.Fatalf("capture -w /dev/null: %v", err)
	}
	f.Close()
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := createCaptureFile(fifo); err == nil || !strings.Contains(err.Error(), "no reader") {
		t.Errorf("capture -w to a FIFO with no reader: %v", err)
	}
	r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w, err := createCaptureFile(fifo)
	if err != nil {
		t.Fatalf("capture -w to a FIFO with a reader: %v", err)
	}
	w.Close()
}

// `trestle down` against a daemon that holds its socket but does not answer
// (hung) refuses, says so and what it would remove, instead of taking a
// datapath apart under it as a failed `show` once let it.
func TestDownRefusesHungDaemon(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "hung.sock")
	ln, err := net.Listen("unix", sock) // listens, never accepts: hung
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	out, code := runCLI(t, nil, "down", "--socket", sock)
	if code == 0 || !strings.Contains(out, "did not answer") || !strings.Contains(out, "--force") || !strings.Contains(out, "/trestle/") {
		t.Errorf("down against a hung daemon: %d %q", code, out)
	}
}

// Names a tenant chose reach the terminal escaped: an escape sequence in a
// veth peer's name is printed as text, not obeyed.
func TestEscaper(t *testing.T) {
	for in, want := range map[string]string{
		"port p1\tup\n":         "port p1\tup\n",
		"peer \x1b]0;pwned\x07": `peer \x1b]0;pwned\x07`,
		"del\x7f":               `del\x7f`,
		"c1 \u009b31m":          `c1 \u009b31m`,
		"bad \xff utf8":         `bad \xff utf8`,
		"ünïcode names stay":    "ünïcode names stay",
		"\r carriage return":    `\x0d carriage return`,
	} {
		var b strings.Builder
		n, err := escaper{&b}.Write([]byte(in))
		if err != nil || n != len(in) || b.String() != want {
			t.Errorf("escaper(%q) = %q (%d, %v), want %q", in, b.String(), n, err, want)
		}
	}
	// Through `trestle show`, from a daemon whose port's peer has such a name.
	sock := filepath.Join(t.TempDir(), "t.sock")
	srv, err := ctl.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go srv.Serve(ctx, func(context.Context, ctl.Request) (any, error) {
		return ctl.Status{Bridges: []ctl.BridgeStatus{{Name: "br0", Ports: []ctl.PortStatus{{Name: "veth-a", State: "up", Peer: "gro on: peer \x1b[2Jx"}}}}}, nil
	})
	out, code := runCLI(t, map[string]string{"TRESTLE_SOCKET": sock}, "show")
	if code != 0 || strings.Contains(out, "\x1b") || !strings.Contains(out, `peer \x1b[2Jx`) {
		t.Errorf("show printed a peer's name raw: %d %q", code, out)
	}
}

// top's screen escapes names too: it is drawn apart from the escaper
// (raw mode ends its lines in "\r\n"), so its cells are escaped one by one.
func TestTopEscapesNames(t *testing.T) {
	var b strings.Builder
	rows := []topRow{{Bridge: "br0", Port: "tap\x1b[2J", Mode: "tc", Drops: map[string]float64{"runt": 1}}}
	renderTop(&b, rows, 0, time.Second, time.Now(), true, "\r\n")
	out := b.String()
	if strings.Contains(out, "\x1b") || !strings.Contains(out, `tap\x1b[2J`) {
		t.Errorf("top printed a port's name raw: %q", out)
	}
}

// A FIFO another user planted where a capture will write (a shared /tmp)
// is refused: its reader would get the tenants' frames that O_EXCL and
// O_NOFOLLOW keep from a planted file or link.
func TestCaptureFileRefusesAnotherUsersFIFO(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give the FIFO to another user")
	}
	fifo := filepath.Join(t.TempDir(), "cap.pcap")
	if err := syscall.Mkfifo(fifo, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(fifo, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	f, err := createCaptureFile(fifo)
	if err == nil {
		f.Close()
		t.Fatal("capture -w wrote into another user's FIFO")
	}
	if !strings.Contains(err.Error(), "another user") {
		t.Errorf("refusal: %v", err)
	}
}
