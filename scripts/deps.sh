#!/usr/bin/env bash
# Installs the Debian packages trestle needs to build, test and run its demo,
# only those that are missing. Run as root (make demo / make test call it).
set -euo pipefail

pkgs=(clang llvm libbpf-dev linux-libc-dev bpftool iproute2 iperf3 ethtool iputils-ping tcpdump ministat)
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
