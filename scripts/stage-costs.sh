#!/usr/bin/env bash
# The switch program's cost a frame with one stage taken out at a time: builds
# variants of bpf/trestle.c in a temporary directory and runs
# BenchmarkPipeline (internal/datapath) on each, through BPF_PROG_TEST_RUN.
# The difference between "as built" and a variant is what that stage costs.
#
# Usage (root): scripts/stage-costs.sh [count=3]
#   BENCH: the benchmarks to run (default Pipeline/xdp; 'Pipeline/(xdp|tc)/7-forward'
#          is a known unicast frame in both modes, the decision memo's fast path)
#   VARIANTS: which to build and time (default: every one below, in order)
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
# The decision memo's fast path (tr_fast_send in trestle.c, tr_fast_hit in
# lib/memo.h), one part taken out at a time: what each costs a forwarded
# frame. Only the timings of these builds mean anything: they forward what
# they should not.
fast_gens() { # the three generations' checks (configuration, table, moves)
	sed -i 's/^\treturn m->cgen == fs->cgen && m->gen == \*(volatile __u32 \*)&fdb_gen &&$/\treturn 1 \&\&/; s/^\t       m->mgen == \*(volatile __u32 \*)&move_gen && m->vlan == f->vlan &&$/\t       m->vlan == f->vlan \&\&/' "$1/lib/memo.h"
}
fast_tick() { # the memo's lifetime, a jiffies load and compare
	sed -i 's/^\t       tr_tick() < m->expires &&$/\t       1 \&\&/' "$1/lib/memo.h"
}
fast_parse() { # the parse (a runt with known addresses is still a runt)
	sed -i 's/^\tif (tr_parse(p->data, p->data_end, p->len, p->meta_vlan, &f, &reason) ||$/\tf.eth = eth; f.vlan = m->vlan; if (/' "$1/trestle.c"
}
fast_rx() { # the ingress port's rx counters (the lookup stays: its NULL check gates the path)
	sed -i '/^\tst->c\[TR_CNT_RX_PACKETS\]++;$/d; /^\tst->c\[TR_CNT_RX_BYTES\] += p->wire;$/d' "$1/trestle.c"
}
fast_tx() { # the egress port's tx counters, lookup and all
	sed -i '/^\ttr_count_tx(tr_stats(m->out_slot), p->wire + delta);$/d' "$1/trestle.c"
}
fast_key() { # everything after the memo's key (ingress, addresses): redirect at once
	sed -i '/^\t    !tr_mac_eq(m->src, eth->h_source))$/{n;s/$/\n\t*ret = tr_redirect_port(xdp, m->out_ifindex, m->out_slot);\n\treturn 1;/}' "$1/trestle.c"
}
no_fast() { # the decision memo's fast path not taken: the pipeline
	sed -i 's/^\t\tif (tr_fast_send(ctx, xdp, &p, &fs, &d, &ret))$/\t\tif (0 \&\& tr_fast_send(ctx, xdp, \&p, \&fs, \&d, \&ret))/' "$1/trestle.c"
}
ALL="base no-memo no-counters fast-no-gens fast-no-tick fast-no-parse fast-no-rx fast-no-tx fast-key-only no-fast"
VARIANTS=${VARIANTS:-$ALL}
for v in $VARIANTS; do
	case $v in
	base) ;;
	no-memo) variant no-memo no_memo ;;
	no-counters) variant no-counters no_stats ;;
	fast-no-gens) variant "$v" fast_gens ;;
	fast-no-tick) variant "$v" fast_tick ;;
	fast-no-parse) variant "$v" fast_parse ;;
	fast-no-rx) variant "$v" fast_rx ;;
	fast-no-tx) variant "$v" fast_tx ;;
	fast-key-only) variant "$v" fast_key ;;
	no-fast) variant "$v" no_fast ;;
	*) fail "VARIANTS: no variant $v (these are: $ALL)" ;;
	esac
done

# bench runs BENCH (the object TRESTLE_BENCH_OBJ names, or the built one)
# and prints its ns/frame lines.
BENCH=${BENCH:-Pipeline/xdp}
bench() {
	local out last
	out=$("$GO" test -run '^$' -bench "$BENCH" -count 1 ./internal/datapath 2>&1) || {
		last=${out##*$'\n'}
		fail "BenchmarkPipeline failed${TRESTLE_BENCH_OBJ:+ on $TRESTLE_BENCH_OBJ}: ${last:-no output from $GO}"
	}
	grep 'ns/frame' <<<"$out" || fail "BenchmarkPipeline printed no ns/frame figure${TRESTLE_BENCH_OBJ:+ on $TRESTLE_BENCH_OBJ}; it said: ${out##*$'\n'}"
}

lines=$(bench) || exit
printf '%-14s' variant
awk '{split($1, a, "/"); sub(/-[0-9]+$/, "", a[3]); printf " %16s", a[2] "/" a[3]}' <<<"$lines"
echo
# (Taking learning out is no experiment here: the rig's stations would not be
# learned, and "forward" would flood.)
for v in $VARIANTS; do
	clang -O2 -g -target bpf -I"$W/$v/include" -I"$W/$v" -I/usr/include/x86_64-linux-gnu -c "$W/$v/trestle.c" -o "$W/$v.o"
	for i in $(seq "$COUNT"); do
		lines=$(TRESTLE_BENCH_OBJ=$W/$v.o bench) || exit
		printf '%-14s' "$v"
		awk '{printf " %16s", $(NF-1)}' <<<"$lines"
		echo
	done
done
