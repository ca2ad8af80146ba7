package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
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
	out, code := runCLI(t, env, "capture", "p1", "-w", link)
	if code == 0 || !strings.Contains(out, "symbolic link") || strings.Contains(out, "no trestle daemon") {
		t.Errorf("capture -w to a symbolic link: %d %q", code, out)
	}
	out, code = runCLI(t, env, "capture", "p1", "-w", target)
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
	if _, code := runCLI(t, env, "capture", "p1", "-w", dangling); code == 0 {
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
	if out, code := runCLI(t, env, "capture", "p1", "-w", fresh); code == 0 || !strings.Contains(out, "no trestle daemon") {
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
