// Package scripts holds the tests of the shell scripts beside it, in Go so
// that `make test` runs them with everything else.
package scripts

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// TestDepsGoWithoutGo: on a machine with no Go 1.21 or later on PATH, as a
// fresh Debian 12 is, `scripts/deps.sh go` prints a go of the version go.mod
// names, fetched into the module cache (with Debian's golang-go, which it
// installs if it is missing); asked again it fetches nothing; and the
// Makefile's $(GO) is that go.
//
// The module cache is a new one each run, so the fetch is tested each run:
// about 70 MB through the module proxy, 10 to 30 seconds here.
func TestDepsGoWithoutGo(t *testing.T) {
	if testing.Short() {
		t.Skip("fetches a Go toolchain (about 70 MB) through the module proxy")
	}
	if euid := os.Geteuid(); euid != 0 {
		t.Skipf("needs root: deps.sh installs Debian's golang-go when it is missing (euid is %d)", euid)
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		t.Skip("not a Debian machine: no apt-get to install golang-go with")
	}
	path, err := pathWithoutGo(os.Getenv("PATH"))
	if err != nil {
		t.Skip(err)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	want := goModVersion(t, filepath.Join(root, "go.mod"))

	dir := t.TempDir()
	cache := filepath.Join(dir, "mod")
	// Runs before TempDir's removal: the module cache is read-only.
	t.Cleanup(func() { makeWritable(cache) })
	env := freshEnv(path, filepath.Join(dir, "home"), cache)

	goStep := func() (string, string) {
		t.Helper()
		cmd := exec.Command(filepath.Join(root, "scripts/deps.sh"), "go")
		cmd.Env = env
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			if offline.MatchString(stderr.String()) {
				t.Skipf("no network for apt-get or the module proxy: %v\n%s", err, &stderr)
			}
			t.Fatalf("deps.sh go with PATH=%s: %v\n%s", path, err, &stderr)
		}
		return strings.TrimSpace(stdout.String()), stderr.String()
	}
	goBin, log := goStep()
	t.Logf("deps.sh go:\n%s", log)
	wantBin := filepath.Join(cache, "golang.org", "toolchain@v0.0.1-go"+want+".linux-"+runtime.GOARCH, "bin", "go")
	if goBin != wantBin {
		t.Fatalf("deps.sh go printed %q, want the fetched toolchain's %s", goBin, wantBin)
	}
	cmd := exec.Command(goBin, "version")
	cmd.Env, cmd.Dir = env, dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s version: %v\n%s", goBin, err, out)
	}
	if !strings.HasPrefix(string(out), "go version go"+want+" ") {
		t.Errorf("%s version says %q, want go%s", goBin, out, want)
	}

	again, log := goStep()
	if again != goBin {
		t.Errorf("a second deps.sh go printed %q, want %q", again, goBin)
	}
	if strings.Contains(log, "fetching") || strings.Contains(log, "installing") {
		t.Errorf("a second deps.sh go fetched or installed again:\n%s", log)
	}

	cmd = exec.Command("make", "-s", "-C", root, "--eval", "print-go: ; @echo $(GO)", "print-go")
	cmd.Env = env
	out, err = cmd.Output()
	if err != nil {
		t.Fatalf("make print-go: %v", err)
	}
	if got := strings.TrimSpace(string(out)); got != goBin {
		t.Errorf("the Makefile's $(GO) is %q, want %s", got, goBin)
	}
}

// offline matches what apt-get and go print when they cannot reach their
// servers: the test skips then, as it cannot tell anything.
var offline = regexp.MustCompile(`Temporary failure resolving|Could not resolve|Failed to fetch|dial tcp|no such host|i/o timeout|connection refused|network is unreachable|TLS handshake timeout`)

// pathWithoutGo returns path without the directories that hold a go, except
// for Debian's golang-go (a link into /usr/lib/go-1.N), which deps.sh itself
// installs: what is left is the PATH of a fresh Debian 12, before deps.sh ran
// (no go) or after (Go 1.19).
func pathWithoutGo(path string) (string, error) {
	var keep []string
	for _, d := range filepath.SplitList(path) {
		g := filepath.Join(d, "go")
		if info, err := os.Stat(g); err != nil || !info.Mode().IsRegular() || info.Mode()&0o111 == 0 {
			keep = append(keep, d)
			continue
		}
		real, err := filepath.EvalSymlinks(g)
		if err == nil && strings.HasPrefix(real, "/usr/lib/go-") {
			keep = append(keep, d)
			continue
		}
		if d == "/usr/bin" || d == "/bin" {
			return "", fmt.Errorf("%s is not Debian's golang-go (it is %s), and %s cannot leave PATH", g, real, d)
		}
	}
	return strings.Join(keep, string(filepath.ListSeparator)), nil
}

// freshEnv is this process's environment as a fresh machine would have it:
// no Go settings but the module proxy's, a new HOME and the given module
// cache.
func freshEnv(path, home, cache string) []string {
	proxy := map[string]bool{"GOPROXY": true, "GONOPROXY": true, "GOPRIVATE": true, "GOSUMDB": true, "GONOSUMDB": true, "GOINSECURE": true}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if (strings.HasPrefix(k, "GO") && !proxy[k]) || k == "PATH" || k == "HOME" || strings.HasPrefix(k, "XDG_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "PATH="+path, "HOME="+home, "GOMODCACHE="+cache)
}

// goModVersion reads the Go go.mod names as deps.sh does: the toolchain
// line, else the go line, 1.N meaning 1.N.0.
func goModVersion(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var goLine, toolchain string
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) == 2 && f[0] == "go":
			goLine = f[1]
		case len(f) == 2 && f[0] == "toolchain" && f[1] != "default":
			toolchain = strings.TrimPrefix(f[1], "go")
		}
	}
	v := goLine
	if toolchain != "" {
		v = toolchain
	}
	if langVersion.MatchString(v) {
		v += ".0"
	}
	if v == "" {
		t.Fatalf("%s names no Go", file)
	}
	return v
}

var langVersion = regexp.MustCompile(`^1\.[0-9]+$`)

// makeWritable undoes the module cache's read-only modes so that it can be
// removed.
func makeWritable(dir string) {
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o755)
		}
		return nil
	})
}
