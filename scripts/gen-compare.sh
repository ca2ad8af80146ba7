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
set -euo pipefail

BIN=$(realpath "${1:-bin/trestle}")
SECS=${2:-5}
ROUNDS=${3:-3}
NCPU=${4:-1}
P=trg$$
WORK=$(mktemp -d /tmp/trestle-gencmp.XXXXXX)
PIDS=()
NSS=()

[[ $(id -u) -eq 0 ]] || { echo "run as root" >&2; exit 1; }
command -v trafgen >/dev/null || { echo "trafgen missing: apt-get install netsniff-ng" >&2; exit 1; }

cleanup() {
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
for _ in $(seq 50); do ip -n "$P-sink" link show sink0 | grep -q xdp && break; sleep 0.1; done

cat >"$WORK/t64.cfg" <<EOF
{ eth(da=$DST, type=0x0800), ipv4(saddr=198.18.0.1, daddr=198.18.0.2, proto=17, ttl=64, df),
  udp(sport=9, dport=9), fill(0x00, 18) }
EOF

cpulist=0
((NCPU > 1)) && cpulist="0-$((NCPU - 1))"
stat() { ip netns exec "$1" cat "/sys/class/net/$2/statistics/$3"; }

# window runs a sender in the background for SECS+1 seconds and prints the
# frames per second that arrive at sink0 from its first second to its last:
# the same steady-state window for every tool, timed here, not by the tool.
window() {
	"$@" >"$WORK/out" 2>&1 &
	local pid=$! rx0 rx1 t0 t1 dr0 dr1
	PIDS+=("$pid")
	sleep 1
	rx0=$(stat "$P-sink" sink0 rx_packets); dr0=$(stat "$P-gen" gen0 tx_dropped); t0=$(date +%s.%N)
	sleep "$((SECS - 1))"
	rx1=$(stat "$P-sink" sink0 rx_packets); dr1=$(stat "$P-gen" gen0 tx_dropped); t1=$(date +%s.%N)
	wait "$pid" || true
	PIDS=("${PIDS[@]/$pid/}")
	awk -v n=$((rx1 - rx0)) -v a="$t0" -v b="$t1" -v d=$((dr1 - dr0)) 'BEGIN {printf "%.0f %d %.2f\n", n / (b - a), d, b - a}'
}

declare -A RES
for r in $(seq "$ROUNDS"); do
	for tool in trestle-gen trafgen; do
		note=""
		if [[ $tool == trestle-gen ]]; then
			read -r pps drops secs < <(window ip netns exec "$P-gen" "$BIN" gen --dev gen0 --dst-mac "$DST" \
				--size 60 --duration "$((SECS + 1))s" --cpus "$cpulist" --batch 256)
		else
			# trafgen's TX_RING mode sometimes gives up on a full veth queue
			# ("Flushing TX_RING failed"); then the round is run again in
			# its copy mode (--cpp).
			how="ring mode"
			for opt in "" --cpp; do
				read -r pps drops secs < <(window ip netns exec "$P-gen" timeout -s INT "$((SECS + 1))" \
					trafgen --dev gen0 --conf "$WORK/t64.cfg" --cpus "$NCPU" -q $opt)
				grep -q "TX_RING failed" "$WORK/out" || break
				how="TX_RING failed; --cpp"
			done
			note=", trafgen $how"
		fi
		printf "round %d  %-12s %12.0f pps arrived  (%d dropped by gen0 in %.2fs%s)\n" "$r" "$tool" "$pps" "$drops" "$secs" "$note"
		RES[$tool]+="$pps "
	done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
mg=$(echo "${RES[trestle-gen]}" | median)
mt=$(echo "${RES[trafgen]}" | median)
echo
echo "64-byte frames, ${NCPU} sending CPU(s), ${SECS}s x ${ROUNDS} interleaved rounds, kernel $(uname -r), $(nproc) CPUs"
printf "| tool | median pps arrived | ratio to trafgen | trials |\n|---|---|---|---|\n"
printf "| trestle gen | %.0f | %.2f | %s|\n" "$mg" "$(awk -v a="$mg" -v b="$mt" 'BEGIN {print a / b}')" "$(for x in ${RES[trestle-gen]}; do printf '%.0f ' "$x"; done)"
printf "| trafgen | %.0f | 1.00 | %s|\n" "$mt" "$(for x in ${RES[trafgen]}; do printf '%.0f ' "$x"; done)"
