#!/usr/bin/env bash
# Installs the Debian packages trestle needs to build, test and run its demo,
# only those that are missing. Run as root (make demo / make test call it).
set -euo pipefail

# ministat is the test oracle of `trestle stat`; nftables and openvswitch-switch
# are DUTs of `trestle lab`; netsniff-ng's trafgen is what scripts/gen-compare.sh
# measures the generator against.
pkgs=(clang llvm libbpf-dev linux-libc-dev bpftool iproute2 iperf3 ethtool iputils-ping tcpdump
	ministat nftables openvswitch-switch netsniff-ng util-linux procps)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
	if [[ $(id -u) -ne 0 ]]; then
		echo "deps: missing packages: ${missing[*]}; run as root or: sudo apt-get install ${missing[*]}" >&2
		exit 1
	fi
	echo "deps: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	# openvswitch-switch starts the machine's Open vSwitch when installed;
	# the lab runs its own daemons inside its namespaces and the machine's
	# must not start. A policy-rc.d that says no (exit 101) stops it, for
	# the install only.
	policy=/usr/sbin/policy-rc.d
	if [[ ! -e $policy ]]; then
		printf '#!/bin/sh\n# trestle deps.sh: no services started during this install\nexit 101\n' >"$policy"
		chmod 755 "$policy"
		trap 'rm -f "$policy"' EXIT
	fi
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v go >/dev/null 2>&1; then
	echo "deps: Go is not installed. trestle needs Go 1.21 or later on PATH (it fetches the" >&2
	echo "      exact toolchain go.mod asks for from the Go module proxy)." >&2
	exit 1
fi

# bpffs and the tc/XDP programs need a kernel with BPF; say so early rather than in a test.
if [[ ! -d /sys/fs/bpf ]]; then
	echo "deps: /sys/fs/bpf is missing: this kernel has no BPF filesystem" >&2
	exit 1
fi
