#!/usr/bin/env bash
# Installs what trestle needs to build, test and run its demo, only what is
# missing. Run as root (make demo / make test call it).
#
# Usage: scripts/deps.sh           every step: Debian packages, Go, BPF check,
#                                  test tools
#        scripts/deps.sh go        the Go step alone; prints the go to use
#        scripts/deps.sh tools     the test tools alone (into bin/tools)
#        scripts/deps.sh which-go  prints the go to use if one is there already,
#                                  installing nothing (the Makefile's $(GO))
#        scripts/deps.sh disable-services PKG...
#                                  disables the systemd units those packages
#                                  enabled (what every install step does for
#                                  the packages it installed)
#
# Go: a Go 1.21 or later on PATH is used as it is: it fetches the toolchain
# go.mod names by itself (GOTOOLCHAIN). Debian 12's golang-go is Go 1.19, too
# old for that, so without one the Go step installs golang-go and has it
# download that toolchain as the module golang.org/toolchain, the way a newer
# go would, through the user's module proxy settings, into the module cache
# ($(go env GOMODCACHE), /root/go/pkg/mod for root), where it stays for the
# next run. Messages go to stderr; stdout is only the path of the go.
set -euo pipefail

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

# apt_install installs the named packages, quietly: stdout stays clean for
# the Go step's answer.
apt_install() {
	export DEBIAN_FRONTEND=noninteractive
	# openvswitch-switch starts the machine's Open vSwitch when installed;
	# the lab runs its own daemons inside its namespaces and the machine's
	# must not start. A policy-rc.d that says no (exit 101) stops it, for
	# the install only; one that is there already is left alone.
	local policy=/usr/sbin/policy-rc.d mine=
	if [[ ! -e $policy ]]; then
		printf '#!/bin/sh\n# trestle deps.sh: no services started during this install\nexit 101\n' >"$policy"
		chmod 755 "$policy"
		mine=1
		trap "rm -f $policy" EXIT
	fi
	local ok=1
	apt-get update -qq >&2 && apt-get install -y -qq --no-install-recommends "$@" >/dev/null || ok=
	if [[ -n $mine ]]; then
		rm -f "$policy"
		trap - EXIT
	fi
	if [[ -z $ok ]]; then
		echo "deps: apt-get could not install $*" >&2
		return 1
	fi
}

# installed says whether Debian package $1 is installed.
installed() {
	dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

step_packages() {
	local p missing=()
	for p in "${pkgs[@]}"; do
		installed "$p" || missing+=("$p")
	done
	if ((${#missing[@]})); then
		if [[ $(id -u) -ne 0 ]]; then
			echo "deps: missing packages: ${missing[*]}; run as root or: sudo apt-get install ${missing[*]}" >&2
			exit 1
		fi
		echo "deps: installing ${missing[*]}" >&2
		local before
		before=$(dpkg-query -W -f='${Package}\n' | sort)
		apt_install "${missing[@]}" || exit 1
		disable_services $(comm -13 <(echo "$before") <(dpkg-query -W -f='${Package}\n' | sort))
	fi
	keep_disabled
}

# disable_services disables, for the next boot, every systemd unit that the
# named packages (the ones this run installed, dependencies included)
# enabled: the tests and the lab start what they need themselves, inside
# their own namespaces (ovsdb-server, promtool), and a test machine must not
# come up running Prometheus or Open vSwitch because trestle's tests once
# needed them. Units that were there before are left as they are (but for
# always_disabled's: keep_disabled).
disable_services() {
	local p u
	for p in "$@"; do
		dpkg -L "$p" 2>/dev/null | grep -E '^/(usr/)?lib/systemd/system/[^/]+\.(service|socket|timer|path)$' |
			while read -r u; do
				u=${u##*/}
				if [[ $(systemctl is-enabled "$u" 2>/dev/null) == enabled ]]; then
					echo "deps: disabling $u (installed by $p for the tests; not needed at boot)" >&2
					systemctl disable --no-reload "$u" >/dev/null 2>&1 || true
				fi
			done
	done
}

# always_disabled are the units (package:unit) that stay disabled whenever
# their package is installed, whoever installed it (an install before this
# script, by hand, or as another package's dependency), not only when this
# run did (disable_services): FRR's, which Debian's frr enables. The overlay
# tests and the lab start zebra and bgpd themselves in their namespaces
# (issue 30); a frr.service enabled at boot would run the machine's own.
always_disabled=(frr:frr.service)

# keep_disabled disables, for the next boot, the units of always_disabled
# whose packages are installed. It never stops a unit that runs now (deps.sh
# ends only what it started) nor starts one. Without systemctl there is
# nothing to do.
keep_disabled() {
	local e p u
	command -v systemctl >/dev/null 2>&1 || return 0
	for e in "${always_disabled[@]}"; do
		p=${e%%:*} u=${e#*:}
		installed "$p" || continue
		[[ $(systemctl is-enabled "$u" 2>/dev/null) == enabled ]] || continue
		if [[ $(id -u) -ne 0 ]]; then
			echo "deps: $u is enabled, and the tests start $p's daemons themselves: run as root or: sudo systemctl disable $u" >&2
			continue
		fi
		echo "deps: disabling $u for the next boot (the tests start $p's daemons themselves; one that runs now is left running)" >&2
		systemctl disable --no-reload "$u" >/dev/null 2>&1 || true
		if [[ $(systemctl is-enabled "$u" 2>/dev/null) == enabled ]]; then
			echo "deps: could not disable $u: it will start at boot" >&2
		fi
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
		END { print (t != "" ? t : g) }' "$root/go.mod")
	[[ $v =~ ^1\.[0-9]+$ ]] && v=$v.0
	if [[ ! $v =~ ^1\.[0-9]+ ]]; then
		echo "deps: no go or toolchain line in $root/go.mod" >&2
		exit 1
	fi
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
	*)
		echo "deps: no Go toolchain for this architecture ($a)" >&2
		exit 1
		;;
	esac
}

# modcache prints the module cache the go named by $1 uses, or, with no go,
# where one would put it.
modcache() {
	if [[ -n ${1:-} ]]; then
		(cd / && env -u GOROOT "$1" env GOMODCACHE)
		return
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
	want=$(want_go)
	arch=$(goarch)
	mod=golang.org/toolchain@v0.0.1-go$want.linux-$arch
	# An older go on PATH (Debian's) can fetch the toolchain; without any,
	# a toolchain fetched before is used as it is.
	boot=$(command -v go) || boot=
	cache=$(modcache "$boot")
	dir=$cache/$mod
	if g=$(cached_go "$dir"); then
		echo "$g"
		return
	fi
	if [[ -z $boot ]]; then
		if [[ $(id -u) -ne 0 ]]; then
			echo "deps: trestle needs Go $want and there is no Go on PATH. Install Go 1.21 or later, or" >&2
			echo "      run this as root to install Debian's golang-go and fetch Go $want with it." >&2
			exit 1
		fi
		echo "deps: installing Debian's golang-go to fetch Go $want (no Go 1.21 or later on PATH) ..." >&2
		apt_install golang-go || exit 1
		boot=$(command -v go) || boot=/usr/lib/go/bin/go
		if [[ ! -x $boot ]]; then
			echo "deps: golang-go is installed but there is no go on PATH or at $boot" >&2
			exit 1
		fi
		cache=$(modcache "$boot")
		dir=$cache/$mod
	fi
	echo "deps: fetching Go $want ($mod) with $boot ($(cd / && env -u GOROOT "$boot" env GOVERSION)) into $cache ..." >&2
	# From an empty directory: an old go refuses trestle's go.mod. GOWORK=off
	# for the same reason with a go.work around.
	local tmp
	tmp=$(mktemp -d)
	if ! (cd "$tmp" && env -u GOROOT GOWORK=off "$boot" mod download "$mod" >&2); then
		rmdir "$tmp"
		echo "deps: could not download $mod through the module proxy (GOPROXY=$(cd / && "$boot" env GOPROXY))" >&2
		exit 1
	fi
	rmdir "$tmp"
	if [[ ! -e $dir/bin/go ]]; then
		echo "deps: downloaded $mod but $dir/bin/go is not there" >&2
		exit 1
	fi
	if ! ready_toolchain "$dir"; then
		echo "deps: could not set up $dir as cmd/go does (execute bits, go.mod files)" >&2
		exit 1
	fi
	local v
	if ! v=$(cd / && env -u GOROOT GOTOOLCHAIN=local "$dir/bin/go" env GOVERSION) || [[ $v != "go$want" ]]; then
		echo "deps: $dir/bin/go does not run as go$want (it says: ${v:-nothing})" >&2
		exit 1
	fi
	echo "deps: using $dir/bin/go" >&2
	echo "$dir/bin/go"
}

# which_go prints the go step's answer when it needs nothing installed or
# fetched, else "go" with a word on what to run.
which_go() {
	local g want arch boot cache
	if g=$(path_go); then
		echo "$g"
		return
	fi
	if ! want=$(want_go) || ! arch=$(goarch); then
		echo go
		return
	fi
	boot=$(command -v go) || boot=
	cache=$(modcache "$boot")
	if cached_go "$cache/golang.org/toolchain@v0.0.1-go$want.linux-$arch"; then
		return
	fi
	echo "deps: no Go 1.21 or later: run scripts/deps.sh (make demo and make test do) to fetch one" >&2
	echo go
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
		g=${g:-$(step_go)}
		echo "deps: installing $pkg into $dir" >&2
		mkdir -p "$dir"
		# From an empty directory, so that trestle's go.mod has no say.
		local tmp
		tmp=$(mktemp -d)
		if ! (cd "$tmp" && GOBIN=$dir GOWORK=off "$g" install "$pkg" >&2); then
			rmdir "$tmp"
			echo "deps: could not install $pkg" >&2
			exit 1
		fi
		rmdir "$tmp"
		echo "$pkg" >"$dir/$name.version"
	done
}

step_bpf() {
	# bpffs and the tc/XDP programs need a kernel with BPF; say so early rather than in a test.
	if [[ ! -d /sys/fs/bpf ]]; then
		echo "deps: /sys/fs/bpf is missing: this kernel has no BPF filesystem" >&2
		exit 1
	fi
}

case ${1:-all} in
all)
	step_packages
	step_go >/dev/null
	step_bpf
	step_tools
	;;
go) step_go ;;
tools) step_tools ;;
which-go) which_go ;;
disable-services)
	shift
	disable_services "$@"
	;;
*)
	echo "usage: scripts/deps.sh [go | which-go | tools]" >&2
	exit 2
	;;
esac
