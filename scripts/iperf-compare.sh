#!/usr/bin/env bash
# A stopgap side-by-side until `trestle lab` exists: iperf3 TCP between two host
# namespaces over (a) a straight veth pair, (b) the Linux bridge, (c) trestle in
# tc mode, (d) trestle in xdp mode, interleaved for REPS rounds in one run, with
# the hosts' default offloads. Prints each trial and the median per path, and the
# ratio to the straight path. Everything lives in namespaces with a unique prefix.
#
# Usage: scripts/iperf-compare.sh [bin/trestle] [seconds=5] [reps=3] [streams=1]
#
# A step that fails ends the script with one line, "iperf-compare: ...".
set -Eeuo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/fail.sh"

BIN=$(realpath "${1:-bin/trestle}")
SECS=${2:-5}
REPS=${3:-3}
STREAMS=${4:-1}
P=tri$$
WORK=$(mktemp -d /tmp/trestle-cmp.XXXXXX)
PIDS=()
NSS=()

[[ $(id -u) -eq 0 ]] || fail "run as root (it creates network namespaces): sudo $0"
[[ -x $BIN ]] || fail "$BIN is not there: run make build"

cleanup() {
	local - FAIL_QUIET=1
	set +e
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
	for n in "${NSS[@]}"; do ip netns del "$n" 2>/dev/null; done
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

newns() { ip netns add "$1"; NSS+=("$1"); ip netns exec "$1" ip link set lo up; }

# hosts $1-a and $1-b with 10.79.0.1/.2 on eth0; for a switched path, ports
# pa/pb in $1-sw.
setup() {
	local t=$1 kind=$2
	newns "$t-a"; newns "$t-b"
	if [[ $kind == direct ]]; then
		ip link add eth0 netns "$t-a" type veth peer name eth0 netns "$t-b"
	else
		newns "$t-sw"
		ip netns exec "$t-sw" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
		ip link add pa netns "$t-sw" type veth peer name eth0 netns "$t-a"
		ip link add pb netns "$t-sw" type veth peer name eth0 netns "$t-b"
		ip netns exec "$t-sw" ip link set pa up
		ip netns exec "$t-sw" ip link set pb up
	fi
	ip netns exec "$t-a" ip addr add 10.79.0.1/24 dev eth0
	ip netns exec "$t-b" ip addr add 10.79.0.2/24 dev eth0
	ip netns exec "$t-a" ip link set eth0 up
	ip netns exec "$t-b" ip link set eth0 up
	case $kind in
	linux-bridge)
		# Fair baseline: no netfilter on bridged frames (new namespaces start with it on).
		ip netns exec "$t-sw" sysctl -qw net.bridge.bridge-nf-call-iptables=0 2>/dev/null || true
		ip netns exec "$t-sw" sysctl -qw net.bridge.bridge-nf-call-ip6tables=0 2>/dev/null || true
		ip netns exec "$t-sw" ip link add br0 type bridge
		ip netns exec "$t-sw" ip link set pa master br0
		ip netns exec "$t-sw" ip link set pb master br0
		ip netns exec "$t-sw" ip link set br0 up
		;;
	trestle-tc | trestle-xdp)
		local mode=${kind#trestle-}
		cat >"$WORK/$t.toml" <<-TOML
			[daemon]
			socket = "$WORK/$t.sock"
			[[bridge]]
			name = "br0"
			[[bridge.port]]
			interface = "pa"
			mode = "$mode"
			[[bridge.port]]
			interface = "pb"
			mode = "$mode"
		TOML
		ip netns exec "$t-sw" "$BIN" run --config "$WORK/$t.toml" 2>"$WORK/$t.log" &
		local pid=$! i
		PIDS+=("$pid")
		for i in $(seq 51); do
			[[ ! -S $WORK/$t.sock ]] || break
			kill -0 "$pid" 2>/dev/null || fail "trestle run for $kind exited: $(tail -n 1 "$WORK/$t.log")"
			((i <= 50)) || fail "trestle run for $kind made no socket within 5 seconds: $(tail -n 1 "$WORK/$t.log")"
			sleep 0.1
		done
		;;
	esac
	ip netns exec "$t-a" ping -c 2 -i 0.2 -W 1 -w 3 10.79.0.2 >/dev/null ||
		fail "ping across $kind ($t-a to $t-b) was not answered: that path does not forward"
}

KINDS=(direct linux-bridge trestle-tc trestle-xdp)
for k in "${KINDS[@]}"; do setup "$P-${k//-/}" "$k"; done
echo "kernel $(uname -r), $(nproc) CPUs; iperf3 -t $SECS -P $STREAMS, $REPS interleaved rounds"
declare -A results
for r in $(seq "$REPS"); do
	for k in "${KINDS[@]}"; do
		t=$P-${k//-/}
		ip netns exec "$t-b" iperf3 -s -1 -p 5201 >/dev/null 2>&1 &
		sp=$!
		for i in $(seq 51); do
			listening=$(ip netns exec "$t-b" ss -Hltn 'sport = :5201') || fail "ss in $t-b failed"
			[[ -z $listening ]] || break
			((i <= 50)) || fail "iperf3's server in $t-b is not listening on port 5201 after 5 seconds"
			sleep 0.1
		done
		# iperf3 -J reports its own failure in the JSON ("error").
		json=$(ip netns exec "$t-a" iperf3 -c 10.79.0.2 -p 5201 -t "$SECS" -P "$STREAMS" -J) || true
		bps=$(python3 -c 'import json,sys
r = json.load(sys.stdin)
if "error" in r: sys.exit(r["error"])
print(r["end"]["sum_received"]["bits_per_second"])' <<<"$json" 2>&1) ||
			fail "iperf3 over $k failed in round $r: ${bps##*$'\n'}"
		wait "$sp" 2>/dev/null || true
		printf 'round %d %-13s %6.2f Gbit/s\n' "$r" "$k" "$(python3 -c "print($bps/1e9)")"
		results[$k]+="$bps "
	done
done
echo
python3 - "${KINDS[@]}" <<PY
import statistics, sys
res = {$(for k in "${KINDS[@]}"; do printf '"%s": [%s], ' "$k" "$(echo ${results[$k]} | tr ' ' ',')"; done)}
base = statistics.median(res["direct"])
print(f"{'path':14} {'median Gbit/s':>14} {'ratio to direct':>16}   trials")
for k in sys.argv[1:]:
    m = statistics.median(res[k])
    print(f"{k:14} {m/1e9:14.2f} {m/base:16.2f}   " + " ".join(f"{v/1e9:.2f}" for v in res[k]))
PY
