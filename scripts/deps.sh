#!/usr/bin/env bash
# Installs what trestle needs to build, test and run its demo, only what is
# missing. Run as root (make demo / make test call it).
#
# Usage: scripts/deps.sh           every step: Debian packages, Go, BPF check,
#                                  test tools
#        scripts/deps.sh packages  the Debian packages step alone
#        scripts/deps.sh list      prints the Debian packages it installs
#        scripts/deps.sh go        the Go step alone; prints the go to use
#        scripts/deps.sh tools     the test tools alone (into bin/tools)
#        scripts/deps.sh build     every step but the test tools (make check:
#                                  its tests make no namespace and run none)
#        scripts/deps.sh which-go  prints the go to use if one is there already,
#                                  installing nothing (the Makefile's $(GO));
#                                  fails, saying what to run, if there is none
#        scripts/deps.sh disable-services PKG...
#                                  adds those packages to the record (below)
#                                  and disables their units, as if this
#                                  script had installed them
#
# Services: the packages the tests need bring systemd units (Prometheus, Open
# vSwitch, FRR) that a test machine must not run at boot: the tests start
# what they need inside their own namespaces. No service starts during an
# install (policy-rc.d), and every package an install brought in
# (dependencies included) is written, with its units, to the record,
# /var/lib/trestle-deps/installed; each later run disables again, for the
# next boot, those units that are enabled, whoever enabled them. A unit that
# runs is never stopped and none is started. Packages that were there before
# are left as they are, but for FRR's unit (always_disabled).
#
# Go: a Go 1.21 or later on PATH is used as it is: it fetches the toolchain
# go.mod names by itself (GOTOOLCHAIN). Debian 12's golang-go is Go 1.19, too
# old for that, so without one the Go step installs golang-go and has it
# download that toolchain as the module golang.org/toolchain, the way a newer
# go would, through the user's module proxy settings, into the module cache
# ($(go env GOMODCACHE), /root/go/pkg/mod for root), where it stays for the
# next run. Messages go to stderr; stdout is only the path of the go.
#
# Every failure ends the script with one line on stderr, "deps: ...", that
# says what failed and what to run; apt-get's and go's own messages come
# above it.
set -Eeuo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# ministat is the test oracle of `trestle stat`; nftables and openvswitch-switch
# are DUTs of `trestle lab`; netsniff-ng's trafgen is what scripts/gen-compare.sh
# measures the generator against; prometheus brings promtool, which checks
# the daemon's metrics in the tests (its service is not started, as Open
# vSwitch's is not); tmux is the terminal `trestle top` is tested in; man-db
# renders the man pages and bash-completion loads the completions in their
# tests; lintian checks the Debian package make deb builds; frr's zebra and
# bgpd are the EVPN control plane of the overlay tests (tests/overlay), which
# start them in their namespaces (its service is left disabled);
# containernetworking-plugins has the `bridge` CNI plugin (/usr/lib/cni) that
# the lab's pod-churn measures trestle's plugin against (lab port-scale).
pkgs=(clang llvm libbpf-dev linux-libc-dev bpftool iproute2 iperf3 ethtool iputils-ping tcpdump
	ministat nftables openvswitch-switch netsniff-ng util-linux procps prometheus tmux
	man-db bash-completion lintian frr containernetworking-plugins)

# The record: the packages this script installed (dependencies included),
# one a line as "PACKAGE VERSION UNIT...", the units being the systemd units
# the package ships. Every run as root disables again those units that are
# enabled (keep_disabled), whoever enabled them since, and reads a package's
# units anew when its version changed. A package no longer installed leaves
# the record. DEPS_ROOT (empty: /) is where the record and policy-rc.d go,
# for the tests' stand-ins only.
state=${DEPS_ROOT:-}/var/lib/trestle-deps
record=$state/installed
policy=${DEPS_ROOT:-}/usr/sbin/policy-rc.d

# fail (scripts/fail.sh) says what failed and what to run, in one line, and
# ends the script; so does any command that fails with no check of its own.
# shellcheck source=fail.sh
. "$root/scripts/fail.sh"

am_root() {
	local uid
	uid=$(id -u) || fail "id -u failed: cannot tell whether this runs as root"
	[[ $uid == 0 ]]
}

# installed_list prints "PACKAGE VERSION" for every installed package.
installed_list() {
	local out
	out=$(dpkg-query -W -f='${db:Status-Status} ${Package} ${Version}\n') ||
		fail "dpkg-query could not list the installed packages (its message is above): run dpkg --audit"
	awk '$1 == "installed" { print $2, $3 }' <<<"$out" | sort -u
}

# lock_state holds the record's lock until the script ends, so that two
# runs (two worktrees' make check) neither install at once nor lose each
# other's lines.
lock_state() {
	[[ -z ${locked:-} ]] || return 0
	mkdir -p "$state" || fail "could not create $state for the record of what deps.sh installed"
	exec 9>>"$state/lock" || fail "could not open $state/lock"
	if ! flock -w 900 9; then
		fail "another scripts/deps.sh has held $state/lock for 15 minutes: wait for it, or end it, then run this again"
	fi
	locked=1
}

declare -A rec_ver=() rec_units=()

load_record() {
	local p v u
	[[ -e $record ]] || return 0
	while read -r p v u; do
		if [[ -n $p && $p != \#* ]]; then
			rec_ver[$p]=$v rec_units[$p]=$u
		fi
	done <"$record"
}

save_record() {
	local p
	{
		echo "# What trestle's scripts/deps.sh installed: PACKAGE VERSION UNIT..."
		echo "# Each run disables again those units that are enabled (for the next boot)."
		for p in "${!rec_ver[@]}"; do
			if [[ -n ${rec_units[$p]} ]]; then
				echo "$p ${rec_ver[$p]} ${rec_units[$p]}"
			else
				echo "$p ${rec_ver[$p]}"
			fi
		done | sort
	} >"$record.new" && mv "$record.new" "$record" ||
		fail "could not write $record, the record of what deps.sh installed: check that $state is writable, then run this again"
}

# units_of prints the systemd units (services, sockets, timers, paths) that
# package $1 ships, on one line.
units_of() {
	local files f units=()
	if ! files=$(dpkg -L "$1" 2>&1); then
		echo "deps: could not list the files of $1 (dpkg -L $1: ${files##*$'\n'}): its units, if any, are left as they are" >&2
		return 0
	fi
	while IFS= read -r f; do
		if [[ $f =~ ^/(usr/)?lib/systemd/system/([^/]+\.(service|socket|timer|path))$ ]]; then
			units+=("${BASH_REMATCH[2]}")
		fi
	done <<<"$files"
	echo "${units[*]}"
}

# disable_units disables, for the next boot, those of the units $2... of
# package $1 that are enabled. It never stops a unit that runs now nor
# starts one; without systemctl there is nothing to do.
declare -A handled=()
disable_units() {
	local p=$1 u out
	shift
	command -v systemctl >/dev/null 2>&1 || return 0
	for u; do
		# Once a run: the install's and keep_disabled's lists overlap.
		[[ -z ${handled[$u]:-} ]] || continue
		handled[$u]=1
		[[ $(systemctl is-enabled "$u" 2>/dev/null) == enabled ]] || continue
		if ! am_root; then
			echo "deps: $u (of $p) is enabled at boot, and the tests start what they need themselves: run as root, or: sudo systemctl disable $u" >&2
			continue
		fi
		echo "deps: disabling $u (of $p) for the next boot: the tests start what they need themselves (one that runs now is left running)" >&2
		if ! out=$(systemctl disable --no-reload "$u" 2>&1) || [[ $(systemctl is-enabled "$u" 2>/dev/null) == enabled ]]; then
			echo "deps: could not disable $u (${out##*$'\n'}): it will start at boot; run: systemctl disable $u" >&2
		fi
	done
}

# remember adds the named packages to the record, with their versions and
# units, and disables those units.
remember() {
	local p v have
	(($#)) || return 0
	lock_state
	have=$(installed_list) || exit
	declare -A ver=()
	while read -r p v; do
		[[ -z $p ]] || ver[$p]=$v
	done <<<"$have"
	load_record
	for p; do
		if [[ -z ${ver[$p]:-} ]]; then
			echo "deps: $p is not installed: nothing to disable" >&2
			continue
		fi
		rec_ver[$p]=${ver[$p]}
		rec_units[$p]=$(units_of "$p")
	done
	save_record
	for p; do
		# shellcheck disable=SC2086 # one unit a word
		[[ -z ${rec_units[$p]:-} ]] || disable_units "$p" ${rec_units[$p]}
	done
}

# apt_install installs the named packages, quietly: stdout stays clean for
# the Go step's answer. What it installed (dependencies included) goes into
# the record, and the units of those packages are disabled: the tests and
# the lab start what they need themselves, inside their own namespaces
# (ovsdb-server, promtool), and a test machine must not come up running
# Prometheus or Open vSwitch because trestle's tests once needed them.
apt_install() {
	export DEBIAN_FRONTEND=noninteractive
	local before after p new=() mine='' failed=
	lock_state
	before=$(installed_list) || exit
	# openvswitch-switch starts the machine's Open vSwitch when installed;
	# the lab runs its own daemons inside its namespaces and the machine's
	# must not start. A policy-rc.d that says no (exit 101) stops it, for
	# the install only; one that is there already is left alone.
	if [[ ! -e $policy ]]; then
		printf '#!/bin/sh\n# trestle deps.sh: no services started during this install\nexit 101\n' >"$policy" &&
			chmod 755 "$policy" || fail "could not write $policy (which keeps the packages' services from starting during the install)"
		mine=1
		trap 'rm -f "$policy"' EXIT
	fi
	# Another apt (a second worktree's deps.sh, unattended-upgrades) may
	# hold dpkg's lock for a while: wait for it rather than fail.
	if ! apt-get -o DPkg::Lock::Timeout=600 update -qq >&2; then
		failed=update
	elif ! apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "$@" >/dev/null; then
		failed=install
	fi
	if [[ -n $mine ]]; then
		rm -f "$policy"
		trap - EXIT
	fi
	# What did get installed is remembered even when apt-get failed part way.
	after=$(installed_list) || exit
	declare -A had=()
	while read -r p _; do
		[[ -z $p ]] || had[$p]=1
	done <<<"$before"
	while read -r p _; do
		[[ -z $p || -n ${had[$p]:-} ]] || new+=("$p")
	done <<<"$after"
	remember "${new[@]}"
	case $failed in
	update) fail "apt-get update failed (its messages are above): fix the machine's apt sources or network, then run: apt-get update && apt-get install $*" ;;
	install) fail "apt-get could not install $* (its messages are above): run apt-get install $* to see why" ;;
	esac
}

# pkgs_missing prints those of the packages named that are not installed, on
# one line.
pkgs_missing() {
	local have p
	have=$(installed_list) || exit
	declare -A inst=()
	while read -r p _; do
		[[ -z $p ]] || inst[$p]=1
	done <<<"$have"
	local missing=()
	for p; do
		[[ -n ${inst[$p]:-} ]] || missing+=("$p")
	done
	echo "${missing[*]}"
}

step_packages() {
	local missing
	missing=$(pkgs_missing "${pkgs[@]}") || exit
	if [[ -n $missing ]]; then
		am_root || fail "missing packages: $missing; run as root, or: sudo apt-get install $missing"
		lock_state
		# A run that held the lock before this one may have installed them.
		# shellcheck disable=SC2086 # one package a word
		missing=$(pkgs_missing $missing) || exit
	fi
	if [[ -n $missing ]]; then
		echo "deps: installing $missing" >&2
		# shellcheck disable=SC2086
		apt_install $missing
	fi
	keep_disabled
}

# always_disabled are the units (package:unit) that stay disabled whenever
# their package is installed, whoever installed it (an install before this
# script, by hand, or as another package's dependency), not only when this
# script did (the record): FRR's, which Debian's frr enables. The overlay
# tests and the lab start zebra and bgpd themselves in their namespaces; a
# frr.service enabled at boot would run the machine's own.
always_disabled=(frr:frr.service)

# keep_disabled disables, for the next boot, the units of the packages in
# the record (read anew from a package whose version changed) and those of
# always_disabled, when they are enabled: whoever enabled them since (an
# upgrade's postinst, a hand), they stay disabled. It never stops a unit
# that runs now (deps.sh ends only what it started) nor starts one.
keep_disabled() {
	local have p v u e changed=
	# Before the list of packages: one that another run installs meanwhile
	# must not look removed.
	if [[ -e $record ]] && am_root; then
		lock_state
	fi
	have=$(installed_list) || exit
	declare -A ver=()
	while read -r p v; do
		[[ -z $p ]] || ver[$p]=$v
	done <<<"$have"
	load_record
	for p in "${!rec_ver[@]}"; do
		if [[ -z ${ver[$p]:-} ]]; then
			unset "rec_ver[$p]" "rec_units[$p]"
			changed=1
		elif [[ ${ver[$p]} != "${rec_ver[$p]}" ]]; then
			rec_ver[$p]=${ver[$p]}
			rec_units[$p]=$(units_of "$p")
			changed=1
		fi
	done
	if [[ -n $changed ]] && am_root; then
		save_record
	fi
	for p in "${!rec_units[@]}"; do
		# shellcheck disable=SC2086 # one unit a word
		[[ -z ${rec_units[$p]} ]] || disable_units "$p" ${rec_units[$p]}
	done
	for e in "${always_disabled[@]}"; do
		p=${e%%:*} u=${e#*:}
		[[ -z ${ver[$p]:-} || -n ${rec_ver[$p]:-} ]] || disable_units "$p" "$u"
	done
}

# go_minor prints the minor version of the go named by $1 (21 for go1.21.3),
# or nothing if it does not run. From / and with GOTOOLCHAIN=local so that
# asking fetches nothing.
go_minor() {
	local v
	v=$(cd / && GOTOOLCHAIN=local "$1" env GOVERSION 2>/dev/null) || return 0
	[[ $v =~ ^go1\.([0-9]+) ]] && echo "${BASH_REMATCH[1]}"
	[[ $v == devel* ]] && echo 999
	return 0
}

# want_go prints the Go go.mod asks for, X.Y.Z: the toolchain line if there
# is one, else the go line (go mod tidy drops a toolchain line that is not
# above it). A go line 1.N means 1.N.0, as cmd/go reads it.
want_go() {
	local v
	v=$(awk '$1 == "toolchain" && $2 != "default" { sub(/^go/, "", $2); t = $2 }
		$1 == "go" { g = $2 }
		END { print (t != "" ? t : g) }' "$root/go.mod") || fail "could not read $root/go.mod (awk's message is above)"
	if [[ $v =~ ^1\.[0-9]+$ ]]; then
		v=$v.0
	fi
	[[ $v =~ ^1\.[0-9]+ ]] || fail "no go or toolchain line in $root/go.mod: restore it from git"
	echo "$v"
}

# goarch prints this machine's GOARCH, the name the toolchain modules use.
goarch() {
	local a
	a=$(dpkg --print-architecture 2>/dev/null || uname -m)
	case $a in
	amd64 | x86_64) echo amd64 ;;
	arm64 | aarch64) echo arm64 ;;
	i386 | i686) echo 386 ;;
	armhf | armel | arm*) echo arm ;;
	ppc64el | ppc64le) echo ppc64le ;;
	mips64el) echo mips64le ;;
	riscv64 | s390x | loong64) echo "$a" ;;
	*) fail "no Go toolchain for this architecture ($a): install Go 1.21 or later by hand" ;;
	esac
}

# modcache prints the module cache the go named by $1 uses, or, with no go,
# where one would put it.
modcache() {
	if [[ -n ${1:-} ]]; then
		(cd / && env -u GOROOT "$1" env GOMODCACHE) ||
			fail "$1 env GOMODCACHE failed (its message is above): fix or remove that go, then run this again"
		return 0
	fi
	local gopath=${GOPATH:-$HOME/go}
	echo "${GOMODCACHE:-${gopath%%:*}/pkg/mod}"
}

# path_go prints the go on PATH if it is 1.21 or later.
path_go() {
	local g m
	g=$(command -v go) || return 1
	m=$(go_minor "$g")
	[[ -n $m ]] && ((m >= 21)) && echo "$g"
}

# cached_go prints the toolchain's go if it is in the module cache ($1, the
# module directory) and ready to run.
cached_go() {
	[[ -x $1/bin/go ]] && cmp -s "$1/src/_go.mod" "$1/src/go.mod" || return 1
	echo "$1/bin/go"
}

# ready_toolchain does to the unpacked module in $1 what cmd/go does on the
# first use of a toolchain it downloaded (cmd/go/internal/toolchain): a
# module zip keeps no modes and no nested go.mod, so the commands get their
# execute bits (pkg/tool and lib first, bin/go last, so that a go racing
# with this one that finds bin/go executable finds its tools so too) and
# each _go.mod is copied to go.mod (src/go.mod last: cmd/go's sign that all
# are there). The module cache is read-only, so each directory is made
# writable for the copy only.
ready_toolchain() {
	local dir=$1 f
	find "$dir/pkg/tool" "$dir/bin/gofmt" -type f -exec chmod a+x {} + || return 1
	if [[ -d $dir/lib ]]; then
		find "$dir/lib" -type f -name 'go_?*_?*_exec' -exec chmod a+x {} + || return 1
	fi
	find "$dir/bin" -type f -exec chmod a+x {} + || return 1
	while IFS= read -r -d '' f; do
		[[ $f == "$dir/src/_go.mod" ]] || copy_go_mod "$(dirname "$f")" || return 1
	done < <(find "$dir" -name _go.mod -print0)
	copy_go_mod "$dir/src"
}

# copy_go_mod copies _go.mod to go.mod in the read-only directory $1, with
# the modes cmd/go gives it.
copy_go_mod() {
	chmod u+w "$1" || return 1
	local ok=1
	cp "$1/_go.mod" "$1/go.mod" && chmod a-w "$1/go.mod" || ok=
	chmod u-w "$1"
	[[ -n $ok ]]
}

# step_go prints the path of a go that builds trestle, installing Debian's
# golang-go and fetching the toolchain go.mod names if there is none.
step_go() {
	local g
	if g=$(path_go); then
		echo "$g"
		return
	fi
	local want arch mod boot="" cache dir
	want=$(want_go) || exit
	arch=$(goarch) || exit
	mod=golang.org/toolchain@v0.0.1-go$want.linux-$arch
	# An older go on PATH (Debian's) can fetch the toolchain; without any,
	# a toolchain fetched before is used as it is.
	boot=$(command -v go) || boot=
	cache=$(modcache "$boot") || exit
	dir=$cache/$mod
	if g=$(cached_go "$dir"); then
		echo "$g"
		return
	fi
	if [[ -z $boot ]]; then
		am_root || fail "trestle needs Go $want and there is no Go on PATH: install Go 1.21 or later, or run as root: sudo scripts/deps.sh go (it installs Debian's golang-go and fetches Go $want with it)"
		echo "deps: installing Debian's golang-go to fetch Go $want (no Go 1.21 or later on PATH) ..." >&2
		apt_install golang-go
		boot=$(command -v go) || boot=/usr/lib/go/bin/go
		[[ -x $boot ]] || fail "golang-go is installed but there is no go on PATH or at $boot: run dpkg -L golang-go to see where it went"
		cache=$(modcache "$boot") || exit
		dir=$cache/$mod
	fi
	echo "deps: fetching Go $want ($mod) with $boot ($(cd / && env -u GOROOT "$boot" env GOVERSION)) into $cache ..." >&2
	# From an empty directory: an old go refuses trestle's go.mod. GOWORK=off
	# for the same reason with a go.work around.
	local tmp
	tmp=$(mktemp -d) || fail "mktemp -d failed: is /tmp writable?"
	if ! (cd "$tmp" && env -u GOROOT GOWORK=off "$boot" mod download "$mod" >&2); then
		rm -rf "$tmp"
		fail "could not fetch Go $want ($mod) through the module proxy (GOPROXY=$(cd / && "$boot" env GOPROXY 2>/dev/null)): check the network and GOPROXY, or put a Go 1.21 or later on PATH, then run scripts/deps.sh again"
	fi
	rm -rf "$tmp"
	[[ -e $dir/bin/go ]] || fail "fetched $mod but $dir/bin/go is not there: remove $dir (chmod -R u+w first) and run scripts/deps.sh again"
	ready_toolchain "$dir" ||
		fail "could not set up $dir as cmd/go does (execute bits, go.mod files): remove $dir (chmod -R u+w first) and run scripts/deps.sh again"
	local v
	if ! v=$(cd / && env -u GOROOT GOTOOLCHAIN=local "$dir/bin/go" env GOVERSION) || [[ $v != "go$want" ]]; then
		fail "$dir/bin/go does not run as go$want (it says: ${v:-nothing}): remove $dir (chmod -R u+w first) and run scripts/deps.sh again"
	fi
	echo "deps: using $dir/bin/go" >&2
	echo "$dir/bin/go"
}

# which_go prints the go step's answer when it needs nothing installed or
# fetched; else it says what to run and fails (the Makefile stops there).
which_go() {
	local g want arch boot cache
	if g=$(path_go); then
		echo "$g"
		return
	fi
	want=$(want_go) || exit
	arch=$(goarch) || exit
	boot=$(command -v go) || boot=
	cache=$(modcache "$boot") || exit
	if cached_go "$cache/golang.org/toolchain@v0.0.1-go$want.linux-$arch"; then
		return
	fi
	fail "no Go 1.21 or later on PATH, and Go $want is not fetched yet: run make deps (as root) or scripts/deps.sh go"
}

# The programs the CNI tests (tests/cni) run beside trestle, at the versions
# they were written against: cnitool drives the plugin as runtimes do, and
# host-local is the IPAM plugin it delegates to. Built with the go step's go
# into bin/tools (the Makefile's TOOLS), each only when it is not there yet.
tools=(
	cnitool=github.com/containernetworking/cni/cnitool@v1.3.1
	host-local=github.com/containernetworking/plugins/plugins/ipam/host-local@v1.10.0
)

step_tools() {
	local g dir=$root/bin/tools t name pkg
	for t in "${tools[@]}"; do
		name=${t%%=*} pkg=${t#*=}
		# A version file beside each tool, so that changing a pin here
		# rebuilds it.
		if [[ -x $dir/$name && $(cat "$dir/$name.version" 2>/dev/null) == "$pkg" ]]; then
			continue
		fi
		if [[ -z ${g:-} ]]; then
			g=$(step_go) || exit
		fi
		echo "deps: installing $pkg into $dir" >&2
		mkdir -p "$dir" || fail "could not create $dir"
		# From an empty directory, so that trestle's go.mod has no say.
		local tmp
		tmp=$(mktemp -d) || fail "mktemp -d failed: is /tmp writable?"
		if ! (cd "$tmp" && GOBIN=$dir GOWORK=off "$g" install "$pkg" >&2); then
			rm -rf "$tmp"
			fail "could not build $pkg with $g (its messages are above): check the network and GOPROXY, then run scripts/deps.sh tools"
		fi
		rm -rf "$tmp"
		echo "$pkg" >"$dir/$name.version" || fail "could not write $dir/$name.version"
	done
}

step_bpf() {
	# bpffs and the tc/XDP programs need a kernel with BPF; say so early rather than in a test.
	[[ -d /sys/fs/bpf ]] || fail "/sys/fs/bpf is missing: this kernel has no BPF filesystem; boot one built with CONFIG_BPF_SYSCALL"
}

case ${1:-all} in
all)
	step_packages
	step_go >/dev/null
	step_bpf
	step_tools
	;;
build)
	step_packages
	step_go >/dev/null
	step_bpf
	;;
packages) step_packages ;;
list) printf '%s\n' "${pkgs[@]}" ;;
go) step_go ;;
tools) step_tools ;;
which-go) which_go ;;
disable-services)
	shift
	(($#)) || fail "usage: scripts/deps.sh disable-services PACKAGE..."
	am_root || fail "disable-services writes the record in $state: run as root, or: sudo scripts/deps.sh disable-services $*"
	remember "$@"
	;;
*)
	echo "usage: scripts/deps.sh [build | packages | list | go | which-go | tools | disable-services PACKAGE...]" >&2
	exit 2
	;;
esac
