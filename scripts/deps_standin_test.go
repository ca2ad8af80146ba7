package scripts

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// The install step of deps.sh (`scripts/deps.sh packages`, and the Go step's
// fetch) against stand-ins for dpkg-query, dpkg, apt-get, systemctl, id and
// go on a PATH of their own: the failures a fresh machine meets and a
// developer's machine, which has every package, never does. No root, no
// network, nothing on the machine is touched: DEPS_ROOT puts the record and
// policy-rc.d in a temporary directory.

// The stand-ins keep their state in $STANDIN_DB:
//
//	installed/PKG   an installed package; the file holds its version
//	files/PKG       what dpkg -L PKG lists
//	repo/PKG        what apt-get can install: lines "version V", "depends P",
//	                "enable U" (a unit its postinst enables and starts, as
//	                deb-systemd-helper and invoke-rc.d do), "static U", "fail"
//	                (dpkg fails to configure it)
//	enabled/U       a unit enabled at boot; static/U, known/U: one that is
//	                static, or disabled
//	stuck/U         a unit that systemctl cannot disable
//	uid             what id -u says
//	fail-update     apt-get update fails
//	log             the calls that change something, and any forbidden one
const standinDpkgQuery = `#!/bin/sh
db=$STANDIN_DB
if [ "$#" -ne 2 ] || [ "$1" != -W ] || [ "$2" != '-f=${db:Status-Status} ${Package} ${Version}\n' ]; then
	echo "stand-in dpkg-query: unexpected arguments: $*" >&2
	exit 2
fi
for f in "$db"/installed/*; do
	[ -e "$f" ] && printf 'installed %s %s\n' "${f##*/}" "$(cat "$f")"
done
# Removed but not purged: dpkg-query lists those too.
for f in "$db"/config-files/*; do
	[ -e "$f" ] && printf 'config-files %s %s\n' "${f##*/}" "$(cat "$f")"
done
exit 0
`

const standinDpkg = `#!/bin/sh
db=$STANDIN_DB
case $1 in
--print-architecture) echo amd64 ;;
-L)
	if [ ! -e "$db/installed/$2" ]; then
		echo "dpkg-query: package '$2' is not installed" >&2
		exit 1
	fi
	echo /.
	cat "$db/files/$2" 2>/dev/null
	;;
*)
	echo "stand-in dpkg: unexpected arguments: $*" >&2
	exit 2
	;;
esac
`

const standinAptGet = `#!/bin/sh
db=$STANDIN_DB
echo "apt-get $*" >>"$db/log"
cmd= pkgs=
while [ $# -gt 0 ]; do
	case $1 in
	-o) shift ;;
	-*) ;;
	*) if [ -z "$cmd" ]; then cmd=$1; else pkgs="$pkgs $1"; fi ;;
	esac
	shift
done
case $cmd in
update)
	if [ -e "$db/fail-update" ]; then
		echo "E: Failed to fetch http://deb.stand-in/dists/bookworm/InRelease  Temporary failure resolving 'deb.stand-in'" >&2
		exit 100
	fi
	exit 0
	;;
install) ;;
*)
	echo "stand-in apt-get: unexpected command: $cmd" >&2
	exit 2
	;;
esac
# Every package and its dependencies are found before any is installed, as
# apt does.
todo=$pkgs
while :; do
	more=$todo
	for p in $todo; do
		if [ ! -e "$db/repo/$p" ]; then
			echo "E: Unable to locate package $p" >&2
			exit 100
		fi
		for d in $(sed -n 's/^depends //p' "$db/repo/$p"); do
			case " $more " in *" $d "*) ;; *) more="$more $d" ;; esac
		done
	done
	[ "$more" = "$todo" ] && break
	todo=$more
done
failed=
for p in $todo; do
	[ -e "$db/installed/$p" ] && continue
	if grep -qx fail "$db/repo/$p"; then
		failed="$failed $p"
		continue
	fi
	v=$(sed -n 's/^version //p' "$db/repo/$p")
	rm -f "$db/config-files/$p"
	echo "${v:-1.0}" >"$db/installed/$p"
	: >"$db/files/$p"
	for u in $(sed -n 's/^static //p' "$db/repo/$p"); do
		echo "/lib/systemd/system/$u" >>"$db/files/$p"
		touch "$db/static/$u"
	done
	for u in $(sed -n 's/^enable //p' "$db/repo/$p"); do
		echo "/lib/systemd/system/$u" >>"$db/files/$p"
		touch "$db/known/$u" "$db/enabled/$u"
		# invoke-rc.d asks policy-rc.d first; 101 means do not start.
		policy=$DEPS_ROOT/usr/sbin/policy-rc.d
		if [ -x "$policy" ] && { "$policy" "$u" start; [ $? -eq 101 ]; }; then
			:
		else
			echo "STARTED $u" >>"$db/log"
		fi
	done
done
if [ -n "$failed" ]; then
	for p in $failed; do
		echo "dpkg: error processing package $p (--configure):" >&2
	done
	echo "E: Sub-process /usr/bin/dpkg returned an error code (1)" >&2
	exit 100
fi
`

const standinSystemctl = `#!/bin/sh
db=$STANDIN_DB
case $1 in
is-enabled)
	if [ $# -ne 2 ]; then
		echo "stand-in systemctl: one unit at a time: $*" >&2
		exit 2
	fi
	if [ -e "$db/enabled/$2" ]; then
		echo enabled
	elif [ -e "$db/static/$2" ]; then
		echo static
	elif [ -e "$db/known/$2" ]; then
		echo disabled
		exit 1
	else
		echo "Failed to get unit file state for $2: No such file or directory" >&2
		exit 1
	fi
	;;
disable)
	echo "systemctl $*" >>"$db/log"
	if [ $# -ne 3 ] || [ "$2" != --no-reload ]; then
		echo "FORBIDDEN systemctl $*" >>"$db/log"
		exit 2
	fi
	if [ -e "$db/stuck/$3" ]; then
		echo "Failed to disable unit: Access denied" >&2
		exit 1
	fi
	rm -f "$db/enabled/$3"
	;;
*)
	# deps.sh neither starts nor stops a unit, nor enables one.
	echo "FORBIDDEN systemctl $*" >>"$db/log"
	exit 1
	;;
esac
`

const standinID = `#!/bin/sh
[ "$1" = -u ] || { echo "stand-in id: unexpected arguments: $*" >&2; exit 2; }
cat "$STANDIN_DB/uid"
`

// standinGo is Debian 12's Go 1.19, with a module proxy it cannot reach.
const standinGo = `#!/bin/sh
case "$1 $2" in
"env GOVERSION") echo go1.19.8 ;;
"env GOMODCACHE") echo "$GOMODCACHE" ;;
"env GOPROXY") echo "$GOPROXY" ;;
"mod download")
	echo "go: $3: module lookup disabled by GOPROXY=$GOPROXY" >&2
	exit 1
	;;
*)
	echo "stand-in go: unexpected arguments: $*" >&2
	exit 2
	;;
esac
`

// depsTools are the programs deps.sh and the stand-ins run, linked into the
// test's PATH: nothing else of the machine's is found there (no real
// apt-get, systemctl or go).
var depsTools = []string{"bash", "sh", "env", "awk", "sed", "grep", "sort", "comm", "cut", "cat",
	"mkdir", "mktemp", "rm", "mv", "cp", "chmod", "touch", "flock", "dirname", "find", "cmp", "uname"}

type standins struct {
	t      *testing.T
	script string // scripts/deps.sh
	db     string
	root   string // DEPS_ROOT
	path   string
	home   string
}

// newStandins makes a machine on which every package of `deps.sh list` is
// installed but those named missing, with no unit enabled.
func newStandins(t *testing.T, missing ...string) *standins {
	t.Helper()
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s := &standins{t: t, script: filepath.Join(repo, "scripts", "deps.sh"), db: filepath.Join(dir, "db"),
		root: filepath.Join(dir, "root"), home: filepath.Join(dir, "home")}
	for _, d := range []string{"installed", "config-files", "files", "repo", "enabled", "static", "known", "stuck"} {
		s.mkdir(filepath.Join(s.db, d))
	}
	s.mkdir(filepath.Join(s.root, "usr", "sbin"))
	s.mkdir(s.home)
	s.write(filepath.Join(s.db, "uid"), "0\n")
	s.write(filepath.Join(s.db, "log"), "")

	standin := filepath.Join(dir, "standin")
	tools := filepath.Join(dir, "tools")
	s.mkdir(standin)
	s.mkdir(tools)
	for name, text := range map[string]string{"dpkg-query": standinDpkgQuery, "dpkg": standinDpkg,
		"apt-get": standinAptGet, "systemctl": standinSystemctl, "id": standinID} {
		if err := os.WriteFile(filepath.Join(standin, name), []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range depsTools {
		p, err := exec.LookPath(name)
		if err != nil {
			t.Skipf("%s is not on PATH: %v", name, err)
		}
		if err := os.Symlink(p, filepath.Join(tools, name)); err != nil {
			t.Fatal(err)
		}
	}
	s.path = standin + string(filepath.ListSeparator) + tools

	out, err := exec.Command(s.script, "list").Output()
	if err != nil {
		t.Fatalf("deps.sh list: %v", err)
	}
	skip := map[string]bool{}
	for _, p := range missing {
		skip[p] = true
	}
	for _, p := range strings.Fields(string(out)) {
		if !skip[p] {
			s.install(p, "1.0")
		}
	}
	return s
}

func (s *standins) mkdir(d string) {
	s.t.Helper()
	if err := os.MkdirAll(d, 0o755); err != nil {
		s.t.Fatal(err)
	}
}

func (s *standins) write(file, text string) {
	s.t.Helper()
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		s.t.Fatal(err)
	}
}

func (s *standins) exists(file string) bool {
	_, err := os.Stat(file)
	return err == nil
}

// install puts package p on the machine as if it were there before deps.sh,
// shipping the given units.
func (s *standins) install(p, version string, units ...string) {
	s.write(filepath.Join(s.db, "installed", p), version+"\n")
	var files []string
	for _, u := range units {
		files = append(files, "/lib/systemd/system/"+u)
		s.write(filepath.Join(s.db, "known", u), "")
	}
	s.write(filepath.Join(s.db, "files", p), strings.Join(append(files, "/usr/share/doc/"+p), "\n")+"\n")
}

// offer puts package p in apt's repository: lines as in repo/ above.
func (s *standins) offer(p string, lines ...string) {
	s.write(filepath.Join(s.db, "repo", p), strings.Join(lines, "\n")+"\n")
}

func (s *standins) enable(u string) { s.write(filepath.Join(s.db, "enabled", u), "") }

func (s *standins) enabled(u string) bool { return s.exists(filepath.Join(s.db, "enabled", u)) }

func (s *standins) installed(p string) bool { return s.exists(filepath.Join(s.db, "installed", p)) }

// run runs deps.sh with the arguments and returns its stdout and stderr,
// and whether it exited 0.
func (s *standins) run(args ...string) (stdout, stderr string, ok bool) {
	s.t.Helper()
	s.write(filepath.Join(s.db, "log"), "")
	cmd := exec.Command(s.script, args...)
	cmd.Env = []string{"PATH=" + s.path, "HOME=" + s.home, "LANG=C", "TMPDIR=" + s.t.TempDir(),
		"DEPS_ROOT=" + s.root, "STANDIN_DB=" + s.db, "GOPROXY=off", "GOMODCACHE=" + filepath.Join(s.home, "mod")}
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if _, exit := err.(*exec.ExitError); err != nil && !exit {
		s.t.Fatalf("deps.sh %s: %v", strings.Join(args, " "), err)
	}
	s.t.Logf("deps.sh %s (exit %v):\n%s", strings.Join(args, " "), err, &e)
	s.checkInvariants()
	return o.String(), e.String(), err == nil
}

// fails runs deps.sh, which must fail with nothing on stdout (where the
// Makefile reads the go step's answer), and returns its last line and all
// of its stderr.
func (s *standins) fails(args ...string) (last, stderr string) {
	s.t.Helper()
	stdout, stderr, ok := s.run(args...)
	if ok || stdout != "" {
		s.t.Fatalf("deps.sh %s passed (stdout %q)", strings.Join(args, " "), stdout)
	}
	return lastLine(stderr), stderr
}

// passes runs deps.sh, which must pass with nothing on stdout, and returns
// its stderr.
func (s *standins) passes(args ...string) string {
	s.t.Helper()
	stdout, stderr, ok := s.run(args...)
	if !ok {
		s.t.Fatalf("deps.sh %s failed:\n%s", strings.Join(args, " "), stderr)
	}
	if stdout != "" {
		s.t.Errorf("deps.sh %s printed on stdout: %q", strings.Join(args, " "), stdout)
	}
	return stderr
}

// standin adds a stand-in program to the PATH deps.sh runs with.
func (s *standins) standin(name, text string) {
	s.t.Helper()
	dir := strings.Split(s.path, string(filepath.ListSeparator))[0]
	if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o755); err != nil {
		s.t.Fatal(err)
	}
}

// checkInvariants holds after every run: no unit started or stopped, no
// policy-rc.d left behind, no failure without its one line.
func (s *standins) checkInvariants() {
	s.t.Helper()
	for _, l := range s.log() {
		if strings.HasPrefix(l, "FORBIDDEN") || strings.HasPrefix(l, "STARTED") {
			s.t.Errorf("%s (a service must not start during the install, and deps.sh must never start or stop one)", l)
		}
	}
	if s.exists(filepath.Join(s.root, "usr", "sbin", "policy-rc.d")) {
		s.t.Error("deps.sh left its policy-rc.d behind: no service would start on this machine again")
	}
}

func (s *standins) log() []string {
	b, err := os.ReadFile(filepath.Join(s.db, "log"))
	if err != nil {
		s.t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func (s *standins) logHas(prefix string) bool {
	for _, l := range s.log() {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}

// record returns the record's packages, with their units.
func (s *standins) record() map[string][]string {
	b, err := os.ReadFile(filepath.Join(s.root, "var", "lib", "trestle-deps", "installed"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		s.t.Fatal(err)
	}
	r := map[string][]string{}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 || strings.HasPrefix(l, "#") {
			continue
		}
		r[f[0]] = f[2:]
	}
	return r
}

// lastLine is the line a failure ends with.
func lastLine(s string) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return l[len(l)-1]
}

// A package that ships no unit (netsniff-ng, and the library it pulls in)
// installs, and the step goes on: the first deps.sh ended silently there
// (grep's status 1 under pipefail).
func TestDepsPackagesNoUnit(t *testing.T) {
	s := newStandins(t, "netsniff-ng")
	s.offer("netsniff-ng", "version 0.6.8-3", "depends libcli1.10")
	s.offer("libcli1.10", "version 1.10.7-2")
	s.install("frr", "8.4.4-1.1", "frr.service")
	s.enable("frr.service")

	stderr := s.passes("packages")
	if !strings.Contains(stderr, "deps: installing netsniff-ng\n") {
		t.Errorf("deps.sh did not say it installs netsniff-ng:\n%s", stderr)
	}
	if !s.installed("netsniff-ng") || !s.installed("libcli1.10") {
		t.Error("netsniff-ng or its library is not installed")
	}
	rec := s.record()
	for _, p := range []string{"netsniff-ng", "libcli1.10"} {
		if units, in := rec[p]; !in || len(units) != 0 {
			t.Errorf("the record has %s as %v (in: %v), want it with no unit", p, units, in)
		}
	}
	if len(rec) != 2 {
		t.Errorf("the record holds %v, want only what this run installed", rec)
	}
	// frr was there before, and its unit stays disabled all the same.
	if s.enabled("frr.service") {
		t.Error("frr.service is still enabled")
	}
}

// A package with units: those it enabled are disabled for the next boot
// (static ones are no business of deps.sh's), none started during the
// install; a unit enabled again afterwards, by hand or by an upgrade, is
// disabled again on the next run, without installing anything; a new unit
// an upgrade brings is found; a unit of a package deps.sh did not install
// stays as it is; a removed package leaves the record.
func TestDepsPackagesUnits(t *testing.T) {
	s := newStandins(t, "prometheus", "openvswitch-switch", "nftables")
	s.offer("prometheus", "version 2.42.0+ds-5", "enable prometheus.service")
	s.offer("openvswitch-switch", "version 3.1.0-2", "depends openvswitch-common",
		"enable openvswitch-switch.service", "static ovs-vswitchd.service", "static ovsdb-server.service")
	s.offer("openvswitch-common", "version 3.1.0-2")
	// nftables is the user's, with its unit enabled: not deps.sh's to touch.
	s.install("nftables", "1.0.6-2", "nftables.service")
	s.enable("nftables.service")

	stderr := s.passes("packages")
	for _, u := range []string{"prometheus.service", "openvswitch-switch.service"} {
		if s.enabled(u) {
			t.Errorf("%s is enabled after deps.sh installed its package", u)
		}
		if !s.logHas("systemctl disable --no-reload " + u) {
			t.Errorf("deps.sh did not disable %s with systemctl disable --no-reload", u)
		}
		if !strings.Contains(stderr, "deps: disabling "+u) {
			t.Errorf("deps.sh did not say it disables %s:\n%s", u, stderr)
		}
	}
	if !s.enabled("nftables.service") {
		t.Error("deps.sh disabled nftables.service, which belongs to a package it did not install")
	}
	rec := s.record()
	want := map[string][]string{
		"prometheus":         {"prometheus.service"},
		"openvswitch-switch": {"openvswitch-switch.service", "ovs-vswitchd.service", "ovsdb-server.service"},
		"openvswitch-common": {},
	}
	if !sameRecord(rec, want) {
		t.Errorf("the record is %v, want %v", rec, want)
	}

	// Enabled again since: disabled again, nothing installed.
	s.enable("prometheus.service")
	s.passes("packages")
	if s.enabled("prometheus.service") {
		t.Error("prometheus.service, enabled again, stays enabled after the next run")
	}
	if s.logHas("apt-get") {
		t.Errorf("the second run ran apt-get with nothing missing: %q", s.log())
	}

	// An upgrade that ships and enables a new unit.
	s.write(filepath.Join(s.db, "installed", "openvswitch-switch"), "3.1.0-3\n")
	s.write(filepath.Join(s.db, "files", "openvswitch-switch"),
		"/lib/systemd/system/openvswitch-switch.service\n/lib/systemd/system/ovs-ipsec.service\n")
	s.write(filepath.Join(s.db, "known", "ovs-ipsec.service"), "")
	s.enable("ovs-ipsec.service")
	s.passes("packages")
	if s.enabled("ovs-ipsec.service") {
		t.Error("the unit an upgrade of openvswitch-switch brought stays enabled")
	}
	if got := s.record()["openvswitch-switch"]; strings.Join(got, " ") != "openvswitch-switch.service ovs-ipsec.service" {
		t.Errorf("after the upgrade the record has openvswitch-switch's units as %v", got)
	}

	// A dependency removed: out of the record (should it come back by
	// another's hand, it is theirs).
	if err := os.Remove(filepath.Join(s.db, "installed", "openvswitch-common")); err != nil {
		t.Fatal(err)
	}
	// Removed with its conffiles kept, as apt-get remove leaves it (dpkg-query
	// still lists it): missing, installed again, its unit disabled again.
	if err := os.Rename(filepath.Join(s.db, "installed", "prometheus"), filepath.Join(s.db, "config-files", "prometheus")); err != nil {
		t.Fatal(err)
	}
	stderr = s.passes("packages")
	if !strings.Contains(stderr, "deps: installing prometheus\n") || !s.installed("prometheus") {
		t.Errorf("deps.sh did not install prometheus again, removed but for its conffiles:\n%s", stderr)
	}
	if s.enabled("prometheus.service") {
		t.Error("prometheus.service is enabled after deps.sh installed prometheus again")
	}
	rec = s.record()
	if _, in := rec["openvswitch-common"]; in {
		t.Errorf("openvswitch-common, removed, is still in the record: %v", rec)
	}
	if _, in := rec["prometheus"]; !in {
		t.Errorf("prometheus, installed again, is not in the record: %v", rec)
	}
}

// sameRecord compares records, units in any order.
func sameRecord(got, want map[string][]string) bool {
	if len(got) != len(want) {
		return false
	}
	for p, w := range want {
		g, in := got[p]
		if !in {
			return false
		}
		g, w = append([]string(nil), g...), append([]string(nil), w...)
		sort.Strings(g)
		sort.Strings(w)
		if strings.Join(g, " ") != strings.Join(w, " ") {
			return false
		}
	}
	return true
}

// Not as root: deps.sh re-disables nothing but says what to run, and exits
// 0 (the tests can still run); missing packages fail it, naming them.
func TestDepsPackagesNotRoot(t *testing.T) {
	s := newStandins(t, "prometheus")
	s.offer("prometheus", "enable prometheus.service")
	s.passes("packages")
	s.enable("prometheus.service")
	s.write(filepath.Join(s.db, "uid"), "1000\n")
	stderr := s.passes("packages")
	if want := "sudo systemctl disable prometheus.service"; !strings.Contains(stderr, want) {
		t.Errorf("not root, deps.sh did not say %q about the enabled unit:\n%s", want, stderr)
	}
	if s.logHas("systemctl disable") {
		t.Error("not root, deps.sh ran systemctl disable")
	}

	if err := os.Remove(filepath.Join(s.db, "installed", "ministat")); err != nil {
		t.Fatal(err)
	}
	if last, _ := s.fails("packages"); last != "deps: missing packages: ministat; run as root, or: sudo apt-get install ministat" {
		t.Errorf("deps.sh's last line is %q, want the packages and what to run", last)
	}
	if s.logHas("apt-get") {
		t.Error("not root, deps.sh ran apt-get")
	}
}

// apt-get failing: the line names the packages and what to run, the exit
// status is not 0; what did get installed before the failure is in the
// record, its units disabled.
func TestDepsPackagesAptFails(t *testing.T) {
	t.Run("unknown package", func(t *testing.T) {
		s := newStandins(t, "ministat", "netsniff-ng")
		s.offer("ministat")
		last, stderr := s.fails("packages")
		want := "deps: apt-get could not install ministat netsniff-ng (its messages are above): run apt-get install ministat netsniff-ng to see why"
		if last != want {
			t.Errorf("deps.sh's last line is %q, want %q", last, want)
		}
		if !strings.Contains(stderr, "E: Unable to locate package netsniff-ng") {
			t.Errorf("apt-get's own message is not shown:\n%s", stderr)
		}
	})
	t.Run("update", func(t *testing.T) {
		s := newStandins(t, "ministat")
		s.offer("ministat")
		s.write(filepath.Join(s.db, "fail-update"), "")
		if l, _ := s.fails("packages"); !strings.HasPrefix(l, "deps: apt-get update failed") || !strings.Contains(l, "apt-get install ministat") {
			t.Errorf("deps.sh's last line is %q, want one that says apt-get update failed and what to run", l)
		}
	})
	t.Run("part installed", func(t *testing.T) {
		s := newStandins(t, "prometheus", "lintian")
		s.offer("prometheus", "enable prometheus.service")
		s.offer("lintian", "fail")
		if l, _ := s.fails("packages"); !strings.HasPrefix(l, "deps: apt-get could not install prometheus lintian") {
			t.Errorf("deps.sh's last line is %q, want one naming the packages", l)
		}
		if s.enabled("prometheus.service") {
			t.Error("prometheus, installed before dpkg failed on lintian, has its unit enabled")
		}
		if _, in := s.record()["prometheus"]; !in {
			t.Errorf("prometheus, installed before the failure, is not in the record: %v", s.record())
		}
	})
	t.Run("unit stuck", func(t *testing.T) {
		s := newStandins(t, "prometheus")
		s.offer("prometheus", "enable prometheus.service")
		s.write(filepath.Join(s.db, "stuck", "prometheus.service"), "")
		stderr := s.passes("packages")
		if want := "deps: could not disable prometheus.service (Failed to disable unit: Access denied): it will start at boot; run: systemctl disable prometheus.service"; !strings.Contains(stderr, want) {
			t.Errorf("deps.sh did not say %q:\n%s", want, stderr)
		}
	})
}

// A Go that cannot be fetched: the line names the Go and the module, and
// the Go step fails (nothing on stdout, where the Makefile reads its go).
func TestDepsGoCannotBeFetched(t *testing.T) {
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	want := goModVersion(t, filepath.Join(repo, "go.mod"))
	// The stand-in dpkg says amd64.
	mod := "golang.org/toolchain@v0.0.1-go" + want + ".linux-amd64"

	t.Run("proxy", func(t *testing.T) {
		s := newStandins(t)
		s.standin("go", standinGo)
		last, stderr := s.fails("go")
		if !strings.HasPrefix(last, "deps: could not fetch Go "+want+" ("+mod+") through the module proxy (GOPROXY=off)") {
			t.Errorf("deps.sh's last line is %q, want one naming Go %s and %s", last, want, mod)
		}
		if !strings.Contains(stderr, "module lookup disabled") {
			t.Errorf("go's own message is not shown:\n%s", stderr)
		}
	})
	t.Run("no golang-go", func(t *testing.T) {
		// No go at all, and apt cannot install Debian's.
		last, stderr := newStandins(t).fails("go")
		if prefix := "deps: apt-get could not install golang-go"; !strings.HasPrefix(last, prefix) {
			t.Errorf("deps.sh's last line is %q, want it to start %q", last, prefix)
		}
		if !strings.Contains(stderr, "to fetch Go "+want) {
			t.Errorf("deps.sh did not say which Go it is after:\n%s", stderr)
		}
	})
	t.Run("which-go", func(t *testing.T) {
		// The Makefile's $(GO): no go fetched yet is a failure, with what to run.
		last, _ := newStandins(t).fails("which-go")
		if suffix := "run make deps (as root) or scripts/deps.sh go"; !strings.HasSuffix(last, suffix) {
			t.Errorf("deps.sh which-go's last line is %q, want it to end %q", last, suffix)
		}
	})
}

// disable-services takes over packages deps.sh did not install (a machine an
// earlier deps.sh left with units enabled): their units are disabled, now
// and on every later run.
func TestDepsDisableServices(t *testing.T) {
	s := newStandins(t)
	s.install("prometheus", "2.42.0+ds-5", "prometheus.service")
	s.enable("prometheus.service")
	if !strings.Contains(s.passes("disable-services", "prometheus"), "deps: disabling prometheus.service") {
		t.Error("disable-services did not say it disables prometheus.service")
	}
	if s.enabled("prometheus.service") {
		t.Fatal("prometheus.service is enabled after disable-services prometheus")
	}
	s.enable("prometheus.service")
	s.passes("packages")
	if s.enabled("prometheus.service") {
		t.Error("prometheus.service, enabled again, stays enabled after the next run")
	}
	s.write(filepath.Join(s.db, "uid"), "1000\n")
	if last, _ := s.fails("disable-services", "prometheus"); !strings.Contains(last, "run as root, or: sudo scripts/deps.sh disable-services prometheus") {
		t.Errorf("not root, disable-services said %q", last)
	}
}

// Without systemctl (a container) there is no unit to disable, and no
// failure: the packages install and go into the record.
func TestDepsNoSystemctl(t *testing.T) {
	s := newStandins(t, "prometheus")
	s.offer("prometheus", "enable prometheus.service")
	if err := os.Remove(filepath.Join(strings.Split(s.path, string(filepath.ListSeparator))[0], "systemctl")); err != nil {
		t.Fatal(err)
	}
	s.passes("packages")
	if _, in := s.record()["prometheus"]; !in {
		t.Errorf("prometheus is not in the record: %v", s.record())
	}
}
