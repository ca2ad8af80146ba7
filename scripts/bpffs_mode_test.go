package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every place trestle mounts the BPF filesystem, or tells a user how to,
// mounts it mode 0700. The kernel's default for a bpffs root is 1777: a
// local user could then make /sys/fs/bpf/trestle first, and a daemon with
// persist would refuse to start (its pin directory another user's).
func TestBPFFSMountedPrivate(t *testing.T) {
	out, err := exec.Command("git", "-C", "..", "ls-files", "-z").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	shell := regexp.MustCompile(`mount\s+-t\s+bpf\b[^\n` + "`" + `]*`)
	goMount := regexp.MustCompile(`unix\.Mount\("bpf",[^\n]*`)
	seen := 0
	for _, path := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		switch filepath.Ext(path) {
		case ".go", ".sh", ".md", "":
		default:
			continue
		}
		if filepath.Base(path) == "bpffs_mode_test.go" {
			continue
		}
		b, err := os.ReadFile(filepath.Join("..", path))
		if err != nil {
			t.Fatal(err)
		}
		// Markdown wraps lines: a mount's options may be on the next.
		text := strings.Join(strings.Fields(string(b)), " ")
		for _, re := range []*regexp.Regexp{shell, goMount} {
			for _, m := range re.FindAllString(text, -1) {
				seen++
				if !strings.Contains(m, "mode=0700") {
					t.Errorf("%s: %q mounts the BPF filesystem without mode=0700", path, m)
				}
			}
		}
	}
	if seen < 4 {
		t.Fatalf("found %d mounts of the BPF filesystem, want the postinst's, demo.sh's, the daemon's and the docs'", seen)
	}
}
