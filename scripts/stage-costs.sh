#!/usr/bin/env bash
# The switch program's cost a frame with one stage taken out at a time: builds
# variants of bpf/trestle.c in a temporary directory and runs
# BenchmarkPipeline (internal/datapath) on each, through BPF_PROG_TEST_RUN.
# The difference between "as built" and a variant is what that stage costs.
#
# Usage (root): scripts/stage-costs.sh [count=3]
set -euo pipefail
cd "$(dirname "$0")/.."
COUNT=${1:-3}
W=$(mktemp -d /tmp/trestle-stages.XXXXXX)
trap 'rm -rf "$W"' EXIT

cp -r bpf "$W/base"
variant() { # name, then sed expressions applied to files under the copy
	local name=$1; shift
	cp -r bpf "$W/$name"
	"$@" "$W/$name"
}
no_memo() {
	sed -i 's/return m->ifindex == ifindex \&\&/return 0 \&\& m->ifindex == ifindex \&\&/' "$1/lib/fdb.h"
	sed -i 's/if (m \&\& m->gen == v->gen/if (0 \&\& m \&\& m->gen == v->gen/' "$1/lib/fdb.h"
}
no_stats() {
	sed -i 's/^\tst->c\[TR_CNT_RX_PACKETS\]++;$//; s/^\tst->c\[TR_CNT_RX_BYTES\] += p->wire;$//' "$1/switch.h"
	sed -i 's/^\t\tst->c\[TR_CNT_TX_PACKETS\]++;$//; s/^\t\tst->c\[TR_CNT_TX_BYTES\] += len;$//' "$1/lib/maps.h"
}
variant no-memo no_memo
variant no-counters no_stats

printf '%-12s' variant
go test -run '^$' -bench 'Pipeline/xdp' -count 1 ./internal/datapath 2>/dev/null | awk '/ns\/frame/ {split($1, a, "/"); printf " %14s", a[3]}'
echo
# (Taking learning out is no experiment here: the rig's stations would not be
# learned, and "forward" would flood.)
for v in base no-memo no-counters; do
	clang -O2 -g -target bpf -I"$W/$v/include" -I"$W/$v" -I/usr/include/x86_64-linux-gnu -c "$W/$v/trestle.c" -o "$W/$v.o"
	for i in $(seq "$COUNT"); do
		printf '%-12s' "$v"
		TRESTLE_BENCH_OBJ=$W/$v.o go test -run '^$' -bench 'Pipeline/xdp' -count 1 ./internal/datapath 2>/dev/null |
			awk '/ns\/frame/ {printf " %14s", $(NF-1)}'
		echo
	done
done
