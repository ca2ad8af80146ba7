#!/usr/bin/env bash
# The generator's ceiling, side by side with trafgen (Debian netsniff-ng): both
# send 64-byte frames (60 without FCS, IPv4/UDP) as fast as they can into one
# straight veth pair whose far end runs `trestle sink` (an XDP program, which a
# veth needs to take XDP frames at all), in interleaved rounds in one run.
# Counted at the far end: frames per second that arrived (rx_packets over a
# steady-state window of SECS-1 seconds, the same for both tools), and what the
# sending veth dropped (tx_dropped) in that window.
#
# Usage: scripts/gen-compare.sh [bin/trestle] [seconds=5] [rounds=3] [cpus=1]
#   cpus: sending CPUs for both tools (trestle gen --cpus 0..N-1, trafgen --cpus N)
#
# A step that fails ends the script with one line, "gen-compare: ...".
set -Eeuo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/fail.sh"

BIN=$(realpath "${1:-bin/trestle}")
SECS=${2:-5}
ROUNDS=${3:-3}
NCPU=${4:-1}
P=trg$$
WORK=$(mktemp -d /tmp/trestle-gencmp.XXXXXX)
PIDS=()
NSS=()

[[ $(id -u) -eq 0 ]] || fail "run as root (it creates network namespaces): sudo $0"
[[ -x $BIN ]] || fail "$BIN is not there: run make build"
command -v trafgen >/dev/null || fail "trafgen is missing: run apt-get install netsniff-ng (scripts/deps.sh installs it)"

cleanup() {
	local - FAIL_QUIET=1
	set +e
	for p in "${PIDS[@]}"; do kill -INT "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
	for n in "${NSS[@]}"; do ip netns del "$n" 2>/dev/null; done
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for n in "$P-gen" "$P-sink"; do
	ip netns add "$n"; NSS+=("$n")
	ip netns exec "$n" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
done
# One receive queue per sending CPU: a veth puts an XDP frame on the queue of
# the CPU that sends it, and each queue is drained by its own NAPI.
ip link add gen0 netns "$P-gen" numtxqueues "$NCPU" numrxqueues "$NCPU" type veth peer name sink0 netns "$P-sink" numtxqueues "$NCPU" numrxqueues "$NCPU"
ip -n "$P-gen" link set gen0 up
ip -n "$P-sink" link set sink0 up
DST=$(ip netns exec "$P-sink" cat /sys/class/net/sink0/address)

# The sink samples latency 1 frame in 64 so that it costs the senders little.
ip netns exec "$P-sink" "$BIN" sink --dev sink0 --latency-every 64 >"$WORK/sink.out" 2>&1 &
PIDS+=($!)
sink_pid=$!
for i in $(seq 51); do
	link=$(ip -n "$P-sink" link show sink0) || fail "ip link show sink0 in $P-sink failed"
	[[ $link != *xdp* ]] || break
	kill -0 "$sink_pid" 2>/dev/null || fail "trestle sink exited: $(tail -n 1 "$WORK/sink.out")"
	((i <= 50)) || fail "trestle sink did not attach its XDP program to sink0 within 5 seconds"
	sleep 0.1
done

cat >"$WORK/t64.cfg" <<EOF
{ eth(da=$DST, type=0x0800), ipv4(saddr=198.18.0.1, daddr=198.18.0.2, proto=17, ttl=64, df),
  udp(sport=9, dport=9), fill(0x00, 18) }
EOF

cpulist=0
((NCPU > 1)) && cpulist="0-$((NCPU - 1))"
stat() { ip netns exec "$1" cat "/sys/class/net/$2/statistics/$3"; }

# window runs a sender in the background for SECS+1 seconds and sets pps,
# drops and secs: the frames per second that arrive at sink0 from its first
# second to its last (the same steady-state window for every tool, timed
# here, not by the tool), what gen0 dropped then, and the window's length;
# and sent, the sender's exit status (its output is in $WORK/out).
window() {
	local pid rx0 rx1 t0 t1 dr0 dr1
	"$@" >"$WORK/out" 2>&1 &
	pid=$!
	PIDS+=("$pid")
	sleep 1
	rx0=$(stat "$P-sink" sink0 rx_packets) && dr0=$(stat "$P-gen" gen0 tx_dropped) && t0=$(date +%s.%N) ||
		fail "could not read the veth pair's counters"
	sleep "$((SECS - 1))"
	rx1=$(stat "$P-sink" sink0 rx_packets) && dr1=$(stat "$P-gen" gen0 tx_dropped) && t1=$(date +%s.%N) ||
		fail "could not read the veth pair's counters"
	sent=0
	wait "$pid" || sent=$?
	PIDS=("${PIDS[@]/$pid/}")
	read -r pps drops secs <<<"$(awk -v n=$((rx1 - rx0)) -v a="$t0" -v b="$t1" -v d=$((dr1 - dr0)) \
		'BEGIN {printf "%.0f %d %.2f\n", n / (b - a), d, b - a}')"
}

# A sender that failed ends the script, with its last words: a failed run
# is no measurement. `timeout -s INT`'s 124 (the time was up) is how a
# trafgen run ends.
check_sent() {
	((sent == 0 || sent == 124)) || fail "$1 exited $sent in round $r: $(tail -n 1 "$WORK/out")"
}

declare -A RES
for r in $(seq "$ROUNDS"); do
	for tool in trestle-gen trafgen; do
		note=""
		if [[ $tool == trestle-gen ]]; then
			window ip netns exec "$P-gen" "$BIN" gen --dev gen0 --dst-mac "$DST" \
				--size 60 --duration "$((SECS + 1))s" --cpus "$cpulist" --batch 256
			check_sent "trestle gen"
		else
			# trafgen's TX_RING mode sometimes gives up on a full veth queue
			# ("Flushing TX_RING failed"); then the round is run again in
			# its copy mode (--cpp).
			how="ring mode"
			for opt in "" --cpp; do
				window ip netns exec "$P-gen" timeout -s INT "$((SECS + 1))" \
					trafgen --dev gen0 --conf "$WORK/t64.cfg" --cpus "$NCPU" -q $opt
				grep -q "TX_RING failed" "$WORK/out" || break
				how="TX_RING failed; --cpp"
			done
			check_sent "trafgen ($how)"
			note=", trafgen $how"
		fi
		printf "round %d  %-12s %12.0f pps arrived  (%d dropped by gen0 in %.2fs%s)\n" "$r" "$tool" "$pps" "$drops" "$secs" "$note"
		RES[$tool]+="$pps "
	done
done

median() { tr ' ' '\n' | sort -g | awk 'NF {a[++n]=$1} END {print (n%2 ? a[(n+1)/2] : (a[n/2]+a[n/2+1])/2)}'; }
mg=$(echo "${RES[trestle-gen]}" | median)
mt=$(echo "${RES[trafgen]}" | median)
echo
echo "64-byte frames, ${NCPU} sending CPU(s), ${SECS}s x ${ROUNDS} interleaved rounds, kernel $(uname -r), $(nproc) CPUs"
printf "| tool | median pps arrived | ratio to trafgen | trials |\n|---|---|---|---|\n"
printf "| trestle gen | %.0f | %.2f | %s|\n" "$mg" "$(awk -v a="$mg" -v b="$mt" 'BEGIN {print a / b}')" "$(for x in ${RES[trestle-gen]}; do printf '%.0f ' "$x"; done)"
printf "| trafgen | %.0f | 1.00 | %s|\n" "$mt" "$(for x in ${RES[trafgen]}; do printf '%.0f ' "$x"; done)"
