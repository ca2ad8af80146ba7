// Package pkg tests the Debian package as an operator meets it: built by
// scripts/deb.sh (make deb), checked by lintian, installed, upgraded over
// itself and purged in a throwaway root (dpkg --root, never the machine's
// own /), its daemon started with its own config, its unit verified.
package pkg

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/trestle/trestle/internal/testutil"
	"github.com/trestle/trestle/tests/harness"
)

// buildDeb builds the package of harness.Bin as version into dir.
func buildDeb(t *testing.T, dir, version string, env ...string) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(root, "scripts/deb.sh"), dir)
	cmd.Env = append(append(os.Environ(), "BIN="+harness.Bin, "DEB_VERSION="+version), env...)
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("scripts/deb.sh: %v\n%s%s", err, out, stderr)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}

// throwaway is a root for dpkg --root: an empty dpkg database, nothing else.
type throwaway struct {
	t    *testing.T
	root string
}

func newRoot(t *testing.T) *throwaway {
	r := &throwaway{t: t, root: t.TempDir()}
	for _, d := range []string{"var/lib/dpkg/info", "var/lib/dpkg/updates", "var/lib/dpkg/triggers"} {
		if err := os.MkdirAll(filepath.Join(r.root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"var/lib/dpkg/status", "var/lib/dpkg/available"} {
		if err := os.WriteFile(filepath.Join(r.root, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// dpkg runs dpkg on the throwaway root: the maintainer scripts run outside
// a chroot with DPKG_ROOT set (the root has no shell of its own), and the
// dependencies, which the root does not have, are not asked for.
func (r *throwaway) dpkg(args ...string) string {
	r.t.Helper()
	all := append([]string{"--root=" + r.root, "--force-script-chrootless", "--force-depends", "--log=/dev/null"}, args...)
	out, err := exec.Command("dpkg", all...).CombinedOutput()
	if err != nil {
		r.t.Fatalf("dpkg %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (r *throwaway) path(p string) string { return filepath.Join(r.root, p) }

func (r *throwaway) version() string {
	r.t.Helper()
	out, err := exec.Command("dpkg-query", "--admindir="+r.path("var/lib/dpkg"), "-W", "-f=${Version} ${Status}", "trestle").CombinedOutput()
	if err != nil {
		return ""
	}
	return string(out)
}

// enabled says whether the unit is enabled for the next boot in the root.
func (r *throwaway) enabled() bool {
	_, err := os.Lstat(r.path("etc/systemd/system/multi-user.target.wants/trestle.service"))
	return err == nil
}

func TestPackage(t *testing.T) {
	t.Parallel()
	testutil.RequireNetns(t)
	testutil.RequireCmd(t, "dpkg", "dpkg-deb", "dpkg-shlibdeps", "lintian", "man")
	debs := t.TempDir()
	v1 := buildDeb(t, debs, "0.0.1~test1")
	// The version upgraded to is the same build uncompressed: compressing
	// it (xz) is 20 of a build's 25 s of CPU, and lintian and the
	// install check the package as it ships, v1.
	v2 := buildDeb(t, debs, "0.0.1~test2", "DEB_COMPRESS=none")

	// lintian: no error and no warning (overrides only with a reason, in
	// dist/debian/lintian-overrides).
	out, err := exec.Command("lintian", "--fail-on", "error,warning", v1).CombinedOutput()
	var said []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l != "" && !strings.Contains(l, "running with root privileges") {
			said = append(said, l)
		}
	}
	if err != nil || len(said) > 0 {
		t.Errorf("lintian %s: %v\n%s", filepath.Base(v1), err, strings.Join(said, "\n"))
	}

	// A fresh install: everything in place, enabled, not started (nothing
	// here could start it), the config attaching nothing.
	r := newRoot(t)
	r.dpkg("-i", v1)
	if v := r.version(); !strings.HasPrefix(v, "0.0.1~test1 install ok installed") {
		t.Fatalf("after install: %q", v)
	}
	for _, f := range []string{
		"usr/sbin/trestle", "usr/lib/systemd/system/trestle.service", "etc/trestle/trestle.toml",
		"usr/share/man/man8/trestle.8.gz", "usr/share/man/man8/trestle-port-add.8.gz", "usr/share/man/man5/trestle.toml.5.gz",
		"usr/share/bash-completion/completions/trestle", "usr/share/zsh/vendor-completions/_trestle",
		"usr/share/fish/vendor_completions.d/trestle.fish", "usr/share/doc/trestle/copyright",
		"usr/libexec/trestle/qemu-ifup", "usr/libexec/trestle/qemu-ifdown", "usr/libexec/trestle/qemu-common",
	} {
		if _, err := os.Stat(r.path(f)); err != nil {
			t.Errorf("installed package: %v", err)
		}
	}
	// Every document a man page names is where the page says.
	docRef := regexp.MustCompile(`/usr/share/doc/trestle/((?:[A-Za-z0-9_.-]|\\-)+\.md)`)
	pages, _ := filepath.Glob(r.path("usr/share/man/man[58]/*.gz"))
	named := 0
	for _, p := range pages {
		text, err := exec.Command("zcat", p).Output()
		if err != nil {
			t.Fatalf("zcat %s: %v", p, err)
		}
		for _, m := range docRef.FindAllStringSubmatch(string(text), -1) {
			named++
			doc := "usr/share/doc/trestle/" + strings.ReplaceAll(m[1], `\-`, "-")
			if _, err := os.Stat(r.path(doc)); err != nil {
				t.Errorf("%s names /%s, which the package lacks: %v", filepath.Base(p), doc, err)
			}
		}
	}
	if named == 0 {
		t.Error("no man page names a document of /usr/share/doc/trestle")
	}
	if _, err := os.Stat(r.path("usr/lib/cni/trestle")); err == nil {
		if dest, err := os.Readlink(r.path("opt/cni/bin/trestle")); err != nil || dest != "/usr/lib/cni/trestle" {
			t.Errorf("/opt/cni/bin/trestle: %q %v, want a link to /usr/lib/cni/trestle", dest, err)
		}
	}
	if !r.enabled() {
		t.Error("the service is not enabled after a fresh install")
	}
	page := exec.Command("man", "-l", r.path("usr/share/man/man5/trestle.toml.5.gz"))
	page.Env = append(os.Environ(), "MANPAGER=cat", "MANWIDTH=80")
	if out, err := page.CombinedOutput(); err != nil || !strings.Contains(string(out), "max_macs") {
		t.Errorf("man -l trestle.toml.5.gz from the package: %v\n%s", err, out)
	}
	unit, err := os.ReadFile(r.path("usr/lib/systemd/system/trestle.service"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ExecStart=/usr/sbin/trestle run --config /etc/trestle/trestle.toml", "Before=libvirtd.service containerd.service crio.service kubelet.service"} {
		if !strings.Contains(string(unit), want) {
			t.Errorf("the packaged unit has no %q", want)
		}
	}

	// Upgraded over itself: the operator's edit of the config stays, the
	// service stays enabled.
	conf := r.path("etc/trestle/trestle.toml")
	f, err := os.OpenFile(conf, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("# the operator's line\n")
	f.Close()
	r.dpkg("-i", v2)
	if v := r.version(); !strings.HasPrefix(v, "0.0.1~test2 install ok installed") {
		t.Fatalf("after the upgrade: %q", v)
	}
	if b, _ := os.ReadFile(conf); !strings.Contains(string(b), "# the operator's line") {
		t.Error("the upgrade replaced the operator's config")
	}
	if !r.enabled() {
		t.Error("the service is not enabled after the upgrade")
	}

	// The daemon from the package, with the packaged config, in a
	// namespace of the test's: it starts, has its bridge and no port.
	testutil.RequireBPFFS(t)
	l := harness.NewPersistLab(t, 1, nil)
	b, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	l.WriteConfig(string(b))
	l.StartNet(r.path("usr/sbin/trestle"))
	st := l.Show()
	if len(st.Bridges) != 1 || st.Bridges[0].Name != "br0" || len(st.Bridges[0].Ports) != 0 || !st.Persist {
		t.Errorf("the packaged daemon with the packaged config: %+v", st)
	}
	l.Signal(syscall.SIGTERM)

	// systemd-analyze accepts the unit (ExecStart pointed at the root's
	// binary, which is where the unit names it once installed).
	if _, err := exec.LookPath("systemd-analyze"); err == nil {
		copyUnit := filepath.Join(t.TempDir(), "trestle.service")
		if err := os.WriteFile(copyUnit, []byte(strings.ReplaceAll(string(unit), "/usr/sbin/trestle", r.path("usr/sbin/trestle"))), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("systemd-analyze", "verify", copyUnit).CombinedOutput(); err != nil {
			t.Errorf("systemd-analyze verify: %v\n%s", err, out)
		}
	}

	// Purged: no file of the package's, no enablement, no config left.
	r.dpkg("--purge", "trestle")
	if v := r.version(); v != "" && !strings.Contains(v, "not-installed") {
		t.Errorf("after purge: %q", v)
	}
	var left []string
	filepath.WalkDir(r.root, func(p string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(r.root, p)
		if err != nil || rel == "var/lib/dpkg" {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			left = append(left, rel)
		}
		return nil
	})
	if len(left) > 0 {
		t.Errorf("left after purge: %v", left)
	}
}
