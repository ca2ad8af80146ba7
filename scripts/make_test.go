package scripts

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The Makefile's recipes fail, saying what, when a tool under them does,
// rather than go on with an empty answer: a GO that deps.sh could not name,
// a gofmt that is missing or fails, a go list that fails. Each runs make on
// the repository with a stand-in go (GO=...), so nothing is built or
// written.

// makeGo stands in for the go of the Makefile's recipes: it logs its
// arguments, go list fails when MAKEGO_LIST_FAILS is set, and GOROOT is
// MAKEGO_ROOT (where a stand-in gofmt may be).
const makeGo = `#!/bin/sh
echo "go $*" >>"$MAKEGO_LOG"
case $1 in
vet | test) exit 0 ;;
env) echo "$MAKEGO_ROOT" ;;
list)
	if [ -n "$MAKEGO_LIST_FAILS" ]; then
		echo "go: stand-in: go list failed" >&2
		exit 1
	fi
	echo example.com/m/internal/a
	echo example.com/m/tests/b
	;;
*) exit 2 ;;
esac
`

type makeRig struct {
	t                *testing.T
	repo             string
	goBin, root, log string
}

func newMakeRig(t *testing.T) *makeRig {
	t.Helper()
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make on PATH")
	}
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	r := &makeRig{t: t, repo: repo, goBin: filepath.Join(dir, "go"), root: filepath.Join(dir, "goroot"),
		log: filepath.Join(dir, "log")}
	if err := os.WriteFile(r.goBin, []byte(makeGo), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(r.root, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	return r
}

// gofmt puts a stand-in gofmt, the shell script given, beside the stand-in go.
func (r *makeRig) gofmt(script string) {
	r.t.Helper()
	if err := os.WriteFile(filepath.Join(r.root, "bin", "gofmt"), []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
		r.t.Fatal(err)
	}
}

// make runs make on the repository with the stand-in go and the extra
// environment, and returns its stderr and whether it exited 0.
func (r *makeRig) make(env []string, args ...string) (string, bool) {
	r.t.Helper()
	if err := os.WriteFile(r.log, nil, 0o644); err != nil {
		r.t.Fatal(err)
	}
	cmd := exec.Command("make", append([]string{"--no-print-directory", "-C", r.repo, "GO=" + r.goBin}, args...)...)
	cmd.Env = append(makeEnv(), append([]string{"MAKEGO_LOG=" + r.log, "MAKEGO_ROOT=" + r.root}, env...)...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	err := cmd.Run()
	if _, exit := err.(*exec.ExitError); err != nil && !exit {
		r.t.Fatalf("make %s: %v", strings.Join(args, " "), err)
	}
	r.t.Logf("make %s (exit %v):\n%s", strings.Join(args, " "), err, &stderr)
	return stderr.String(), err == nil
}

func (r *makeRig) calls() string {
	b, err := os.ReadFile(r.log)
	if err != nil {
		r.t.Fatal(err)
	}
	return string(b)
}

// makeEnv is this process's environment without what a make around it (make
// check) passes down, nor a GO of the user's.
func makeEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "GO":
			continue
		}
		env = append(env, kv)
	}
	return env
}

// With no go that deps.sh can name, make stops with deps.sh's line and its
// own, instead of running " build ..." as a command.
func TestMakeNoGo(t *testing.T) {
	s := newStandins(t)
	s.standin("go", standinGo)
	makeBin, err := exec.LookPath("make")
	if err != nil {
		t.Skip("no make on PATH")
	}
	s.standin("make", "#!/bin/sh\nexec "+makeBin+" \"$@\"\n")
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	// -n and -W: the build's recipe is expanded, as make build on a fresh
	// clone does, and nothing runs.
	cmd := exec.Command("make", "--no-print-directory", "-n", "-C", repo, "-W", "go.mod", "bin/trestle")
	cmd.Env = []string{"PATH=" + s.path, "HOME=" + s.home, "LANG=C", "STANDIN_DB=" + s.db,
		"GOPROXY=off", "GOMODCACHE=" + filepath.Join(s.home, "mod")}
	out, err := cmd.CombinedOutput()
	t.Logf("make -n bin/trestle with no go (%v):\n%s", err, out)
	if err == nil {
		t.Fatal("make passed with no go to build with")
	}
	for _, want := range []string{
		"deps: no Go 1.21 or later on PATH, and Go ",
		"*** no go to build with: run make deps (as root), or put a Go 1.21 or later on PATH.  Stop.",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("make did not say %q", want)
		}
	}
	if strings.Contains(string(out), "-trimpath") {
		t.Error("make went on to the build's command")
	}
}

// make vet fails when gofmt is missing, when it fails, and when a file needs
// formatting, each with its line; it passes when gofmt finds nothing.
func TestMakeVetGofmt(t *testing.T) {
	r := newMakeRig(t)
	cases := []struct {
		name, gofmt, want string
	}{
		{"missing", "", "vet: no gofmt beside " + r.goBin + " (in " + r.root + "/bin): run make deps, or install that Go again"},
		{"fails", `echo "cmd/x.go:1:1: expected 'package', found 'EOF'" >&2; exit 2`, "vet: " + r.root + "/bin/gofmt -l failed (its messages are above)"},
		{"unformatted", "echo cmd/trestle/main.go", "vet: gofmt needed: run " + r.root + "/bin/gofmt -w on the files above"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			os.Remove(filepath.Join(r.root, "bin", "gofmt"))
			if c.gofmt != "" {
				r.gofmt(c.gofmt)
			}
			out, ok := r.make(nil, "vet")
			if ok {
				t.Fatalf("make vet passed with a gofmt that is %s", c.name)
			}
			if !strings.Contains(out, c.want) {
				t.Errorf("make vet did not say %q", c.want)
			}
		})
	}
	r.gofmt("exit 0")
	if out, ok := r.make(nil, "vet"); !ok {
		t.Errorf("make vet failed with a gofmt that finds nothing:\n%s", out)
	}
}

// make check and make test stop when go list fails, instead of testing no
// package (or the current directory).
func TestMakeGoListFails(t *testing.T) {
	r := newMakeRig(t)
	// Their prerequisites (deps, the bindings and vet: ready, the build) are not what
	// is tested: -o takes them as done.
	skip := []string{"-o", "deps", "-o", "ready", "-o", "build"}
	for _, target := range []string{"check", "test"} {
		t.Run(target, func(t *testing.T) {
			_, ok := r.make([]string{"MAKEGO_LIST_FAILS=1"}, append(skip, target)...)
			if ok {
				t.Fatalf("make %s passed though go list failed", target)
			}
			if calls := r.calls(); strings.Contains(calls, "go test") {
				t.Errorf("make %s ran go test though go list failed:\n%s", target, calls)
			}
		})
	}
	// And when go list works, check tests what it lists but tests/.
	if out, ok := r.make(nil, append(skip, "check")...); !ok {
		t.Fatalf("make check failed:\n%s", out)
	}
	if want := "go test -count=1 -short -p 2 example.com/m/internal/a\n"; !strings.Contains(r.calls(), want) {
		t.Errorf("make check's go test calls are\n%s\nwant %q", r.calls(), want)
	}
}
