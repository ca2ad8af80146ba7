#!/usr/bin/env bash
# make demo: three hosts (network namespaces) on one trestle bridge. Shows ping
# and an iperf3 run through the switch, the learned table and the counters; the
# daemon killed with SIGKILL while the switch goes on forwarding, and a new one
# adopting it (persist); then removes everything it made, also when interrupted
# or when a step fails; then measures: `trestle lab quick` puts the straight
# veth path, the Linux bridge and trestle side by side (about a minute).
#
# Usage: scripts/demo.sh [path/to/trestle] [mode]    mode: auto (default), xdp, tc
#
# A step that fails ends the demo with one line, "demo: ...", saying which
# step and what failed (after the daemon's last log lines, when one ran).
set -Eeuo pipefail

BIN=$(realpath "${1:-bin/trestle}")
MODE=${2:-auto}
[[ $(id -u) -eq 0 ]] || { echo "demo: run as root (it creates network namespaces): sudo make demo" >&2; exit 1; }
[[ -x $BIN ]] || { echo "demo: $BIN is not there: run make build (make demo does)" >&2; exit 1; }
P=trd$$                      # unique prefix for every name this run creates
SW=$P-sw
HOSTS=(h1 h2 h3)
WORK=$(mktemp -d /tmp/trestle-demo.XXXXXX)
SOCK=$WORK/trestle.sock
DAEMON_PID=

# fail (scripts/fail.sh) ends the demo with one line naming the step, after
# the daemon's last log lines when one ran; so does any command that fails
# with no check of its own.
. "$(dirname "${BASH_SOURCE[0]}")/fail.sh"
fail_context() {
	if [[ -s ${WORK:-}/daemon.log ]]; then
		echo "the daemon's log, last lines:"
		tail -n 15 "$WORK/daemon.log" | sed 's/^/  /'
	fi
}

# Its options are its own (local -): the lab step after it still stops on a
# failure.
cleanup() {
	local - FAIL_QUIET=1
	set +e
	if [[ -n $DAEMON_PID ]] && kill -0 "$DAEMON_PID" 2>/dev/null; then
		kill -TERM "$DAEMON_PID"
		wait "$DAEMON_PID" 2>/dev/null
	fi
	# The persisted datapath goes before its namespace does.
	[[ -e /run/netns/$SW ]] && nsenter --net="/run/netns/$SW" "$BIN" down --socket "$SOCK" >/dev/null 2>&1
	for h in "${HOSTS[@]}"; do ip netns del "$P-$h" 2>/dev/null; done
	ip netns del "$SW" 2>/dev/null
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# persist pins to the BPF filesystem, which systemd mounts at boot; a bare
# machine may have none.
if [[ $(stat -f -c %T /sys/fs/bpf 2>/dev/null) != bpf_fs ]]; then
	mount -t bpf -o mode=0700 bpf /sys/fs/bpf || fail "could not mount the BPF filesystem on /sys/fs/bpf (persist pins there)"
fi

step() {
	FAIL_STEP=$*
	printf '\n\033[1m== %s\033[0m\n' "$*"
}
in_sw() { ip netns exec "$SW" "$@"; }

step "topology: namespaces $SW (the switch) and ${HOSTS[*]/#/$P-}, each host on one veth to the switch"
ip netns add "$SW"
ip netns exec "$SW" ip link set lo up
i=1
for h in "${HOSTS[@]}"; do
	ns=$P-$h
	ip netns add "$ns"
	ip netns exec "$ns" ip link set lo up
	# port-hN in the switch namespace, eth0 in the host.
	ip link add "port-$h" netns "$SW" type veth peer name eth0 netns "$ns"
	ip netns exec "$ns" ip link set eth0 address "02:00:00:00:00:0$i"
	ip netns exec "$ns" ip addr add "10.77.0.$i/24" dev eth0
	ip netns exec "$ns" ip link set eth0 up
	in_sw ip link set "port-$h" up
	i=$((i + 1))
done

cat >"$WORK/trestle.toml" <<TOML
[daemon]
socket = "$SOCK"
persist = true        # the datapath outlives the daemon

[[bridge]]
name = "br0"
aging = "300s"

[[bridge.port]]
interface = "port-h1"
mode = "$MODE"

[[bridge.port]]
interface = "port-h2"
mode = "$MODE"

[[bridge.port]]
interface = "port-h3"
mode = "$MODE"
TOML
echo "config:"; sed 's/^/  /' "$WORK/trestle.toml"

# With persist the daemon joins the switch's network namespace only
# (nsenter --net): `ip netns exec` would mount a /sys of its own, hiding the
# BPF filesystem it pins to. Not through a shell function: $! must be the
# daemon itself.
start_daemon() {
	nsenter --net="/run/netns/$SW" "$BIN" run --config "$WORK/trestle.toml" 2>>"$WORK/daemon.log" &
	DAEMON_PID=$!
	for _ in $(seq 50); do
		"$BIN" show >/dev/null 2>&1 && return
		kill -0 "$DAEMON_PID" 2>/dev/null || fail "the daemon exited before it answered on $SOCK"
		sleep 0.1
	done
	fail "the daemon runs but did not answer on $SOCK within 5 seconds"
}

# ping3 pings from host $1 to address $2 three times and shows ping's
# summary: each must be answered (with -w, ping fails otherwise).
ping3() {
	local out
	if ! out=$(ip netns exec "$P-$1" ping -c 3 -i 0.2 -W 1 -w 3 "$2" 2>&1); then
		printf '%s\n' "$out" | sed 's/^/  /' >&2
		fail "ping from $1 to $2 through the switch: not every ping was answered (ping's words are above)"
	fi
	tail -n 2 <<<"$out"
}
export TRESTLE_SOCKET=$SOCK

step "start the daemon in $SW: trestle run --config trestle.toml"
start_daemon
"$BIN" show

step "ping: h1 -> h2, h1 -> h3, h2 -> h3"
ping3 h1 10.77.0.2
ping3 h1 10.77.0.3
ping3 h2 10.77.0.3

step "iperf3 TCP h1 -> h2 through trestle, 3 seconds, hosts' default offloads"
ip netns exec "$P-h2" iperf3 -s -1 -p 5201 >"$WORK/iperf3-server.log" 2>&1 &
IPERF_PID=$!
for i in $(seq 51); do
	listening=$(ip netns exec "$P-h2" ss -Hltn 'sport = :5201') || fail "ss in $P-h2 failed"
	[[ -z $listening ]] || break
	kill -0 "$IPERF_PID" 2>/dev/null || fail "iperf3's server in h2 exited: $(tail -n 1 "$WORK/iperf3-server.log")"
	((i <= 50)) || fail "iperf3's server in h2 is not listening on port 5201 after 5 seconds"
	sleep 0.1
done
if ! out=$(ip netns exec "$P-h1" iperf3 -c 10.77.0.2 -p 5201 -t 3 -f g 2>&1); then
	fail "iperf3 from h1 to h2 failed: ${out##*$'\n'}"
fi
# The two summary lines, or all of it if iperf3 words them otherwise.
grep -E 'sender|receiver' <<<"$out" || printf '%s\n' "$out"
wait "$IPERF_PID" 2>/dev/null || true

step "learned table: trestle fdb show"
"$BIN" fdb show

step "counters: trestle stats"
"$BIN" stats

step "kill -9 the daemon: with persist the switch goes on forwarding, its table intact"
{ kill -KILL "$DAEMON_PID" && wait "$DAEMON_PID"; } 2>/dev/null || true   # no "Killed" from the shell
DAEMON_PID=
ping3 h1 10.77.0.3

step "a new daemon adopts it: same entries, ages running on, counters going on"
start_daemon
adopted=$(grep -o 'msg="adopted the pinned datapath".*' "$WORK/daemon.log") ||
	fail "the new daemon's log does not say it adopted the pinned datapath (msg=\"adopted the pinned datapath\")"
echo "  ${adopted##*$'\n'}"
moved=$(grep -c 'moved to this daemon' "$WORK/daemon.log") || true
echo "  $moved ports moved to the new daemon's program in place (a link update, no detach)"
"$BIN" fdb show
"$BIN" stats

step "stop the daemon (SIGTERM), then trestle down: it detaches every program"
kill -TERM "$DAEMON_PID"
wait "$DAEMON_PID" || true
DAEMON_PID=
out=$(nsenter --net="/run/netns/$SW" "$BIN" down --socket "$SOCK" 2>&1) || fail "trestle down failed: ${out##*$'\n'}"
sed 's/^/  /' <<<"$out"
links=$(in_sw ip -o link show) || fail "ip link show in $SW failed"
progs=$(in_sw bpftool net show) || fail "bpftool net show in $SW failed"
left=$(grep -cE ' xdp|prog/xdp' <<<"$links") || true
tcx=$(grep -c tcx <<<"$progs") || true
echo "programs left on ports: xdp $left, tcx $tcx"
((left + tcx == 0)) || fail "trestle down left programs on the ports (xdp $left, tcx $tcx)"
step "removing the demo's namespaces"
cleanup
trap - EXIT

if [[ ${DEMO_LAB:-1} == 1 ]]; then
	step "measure: trestle lab quick (64-byte frames through a 2-port bridge, RFC 2544 search, 3 repetitions)"
	"$BIN" lab quick
fi
