#!/usr/bin/env bash
# The switch program's cost a frame with one stage taken out at a time: builds
# variants of bpf/trestle.c in a temporary directory and runs
# BenchmarkPipeline (internal/datapath) on each, through BPF_PROG_TEST_RUN.
# The difference between "as built" and a variant is what that stage costs.
#
# Usage (root): scripts/stage-costs.sh [count=3]
#
# A step that fails ends the script with one line, "stage-costs: ...".
set -Eeuo pipefail
cd "$(dirname "$0")/.."
. scripts/fail.sh
COUNT=${1:-3}
GO=${GO:-$(scripts/deps.sh which-go)} || fail "no go to run the benchmark with (deps.sh said why above)"
W=$(mktemp -d /tmp/trestle-stages.XXXXXX)
trap 'rm -rf "$W"' EXIT

cp -r bpf "$W/base"
# variant copies bpf/ to $W/NAME and runs the function named after it on the
# copy; one that changes nothing (the lines its sed looks for are gone) is a
# failure, not a measurement of the program as built.
variant() {
	local name=$1; shift
	cp -r bpf "$W/$name"
	"$@" "$W/$name"
	! diff -rq bpf "$W/$name" >/dev/null || fail "the $name variant is the program as built: $1 no longer finds the lines it edits in bpf/"
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

# bench runs BenchmarkPipeline/xdp (the object TRESTLE_BENCH_OBJ names, or
# the built one) and prints its ns/frame lines.
bench() {
	local out last
	out=$("$GO" test -run '^$' -bench 'Pipeline/xdp' -count 1 ./internal/datapath 2>&1) || {
		last=${out##*$'\n'}
		fail "BenchmarkPipeline failed${TRESTLE_BENCH_OBJ:+ on $TRESTLE_BENCH_OBJ}: ${last:-no output from $GO}"
	}
	grep 'ns/frame' <<<"$out" || fail "BenchmarkPipeline printed no ns/frame figure${TRESTLE_BENCH_OBJ:+ on $TRESTLE_BENCH_OBJ}; it said: ${out##*$'\n'}"
}

lines=$(bench) || exit
printf '%-12s' variant
awk '{split($1, a, "/"); printf " %14s", a[3]}' <<<"$lines"
echo
# (Taking learning out is no experiment here: the rig's stations would not be
# learned, and "forward" would flood.)
for v in base no-memo no-counters; do
	clang -O2 -g -target bpf -I"$W/$v/include" -I"$W/$v" -I/usr/include/x86_64-linux-gnu -c "$W/$v/trestle.c" -o "$W/$v.o"
	for i in $(seq "$COUNT"); do
		lines=$(TRESTLE_BENCH_OBJ=$W/$v.o bench) || exit
		printf '%-12s' "$v"
		awk '{printf " %14s", $(NF-1)}' <<<"$lines"
		echo
	done
done
