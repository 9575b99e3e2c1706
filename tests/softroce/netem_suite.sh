#!/bin/sh
# Runs inside scripts/softroce-vm (--module veth --module sch_netem and the tc filter modules, with
# tc packed): netem faults on a live veth link between two network namespaces, cli (c0, 10.12.0.1)
# and srv (s0, 10.12.0.2), a pairperf server in srv and the client in cli, over every transport
# that crosses the link: tcp, UCX over tcp, libfabric's tcp;ofi_rxm and gloo. Per fault, the qdiscs
# are deleted and added anew (a `tc qdisc change` keeps the reorder, corrupt and rate it is not
# given), then one run: each transport's latency and bandwidth test at 4 KiB (every transport's
# eager path, one round trip a message), a 0.25 s budget, --validate.
# Into $RXE_OUT for tests/scenarios/test_netem_softroce.py: FAULT.json, the exit status and
# seconds of each run (runs.txt), and per fault FAULT.tc: the netem settings, the qdiscs' counters
# (tc -s) and both namespaces' /proc/net/snmp and netstat before and after the run (and ping's
# round trip beside the clean and the delayed link; the silent fault's filter counters).
# Usage: netem_suite.sh PAIRPERF_BINARY
B=$1
OUT=${RXE_OUT:-/out}
mkdir -p "$OUT"
PIN_S="taskset -c 0"; PIN_C="taskset -c 1"
[ "$(nproc)" -ge 2 ] || { PIN_S=; PIN_C=; }
C=c0; S=s0; SA=10.12.0.2
die() { echo "== $*"; exit 1; }
ip netns add cli || die "ip netns add failed"
ip netns add srv || die "ip netns add failed"
ip link add $C netns cli type veth peer name $S netns srv || die "no veth pair"
ip -n cli addr add 10.12.0.1/24 dev $C || die "address of $C"
ip -n srv addr add $SA/24 dev $S || die "address of $S"
for ns in cli srv; do ip -n $ns link set lo up; done
ip -n cli link set $C up || die "$C down"
ip -n srv link set $S up || die "$S down"
tc -n cli qdisc add dev $C root netem || die "no netem qdisc"

# The server writes its port to fd 3 once it listens: wait for that (at most 30 s), never a fixed
# sleep. One server for every transport: gloo and UCX take their device from its environment.
ready="$OUT/.server-ready"
: > "$ready"
ip netns exec srv env GLOO_SOCKET_IFNAME=$S UCX_NET_DEVICES=$S $PIN_S "$B" server --listen $SA --port 18515 --quiet \
  --timeout-idle 300s --ready-fd 3 3>"$ready" &
server=$!
tries=0
while [ ! -s "$ready" ] && [ "$tries" -lt 300 ] && kill -0 "$server" 2>/dev/null; do
  sleep 0.1
  tries=$((tries + 1))
done
[ -s "$ready" ] || { kill "$server" 2>/dev/null; die "the server did not start listening within 30 s"; }

uptime_s() { cut -d' ' -f1 /proc/uptime; }
counters() {  # TITLE: the qdiscs' counters and both namespaces' protocol counters
  echo "## $1"
  tc -n cli -s qdisc show dev $C
  tc -n srv -s qdisc show dev $S
  for ns in cli srv; do
    echo "### $ns /proc/net/snmp"; ip netns exec $ns cat /proc/net/snmp
    echo "### $ns /proc/net/netstat"; ip netns exec $ns cat /proc/net/netstat
  done
}
fault() {  # NAME CLIENT_NETEM SERVER_NETEM: netem anew on both ends (empty: no impairment)
  name=$1
  tc -n cli qdisc del dev $C root 2>/dev/null; tc -n srv qdisc del dev $S root 2>/dev/null
  # shellcheck disable=SC2086  # the netem arguments are words
  tc -n cli qdisc add dev $C root netem $2 || die "$name: tc refused: $2"
  # shellcheck disable=SC2086
  tc -n srv qdisc add dev $S root netem $3 || die "$name: tc refused: $3"
  { echo "client $C: netem $2"; echo "server $S: netem $3"; counters before; } > "$OUT/$name.tc"
}
run() {  # NAME ARGS...: one pairperf run from cli into $OUT/NAME.json; its exit status and seconds go to runs.txt
  name=$1; shift
  echo "== $name: $*"
  t0=$(uptime_s)
  # Connections get 10 s (gloo waits a fifth of it per try): at 5% loss each way, two lost
  # handshake packets (1 s, then 2 s more, Linux's SYN schedule) ran past the default 3 s once.
  ip netns exec cli env GLOO_SOCKET_IFNAME=$C UCX_NET_DEVICES=$C $PIN_C "$B" run $SA:18515 -q --json "$OUT/$name.json" \
    --timeout-case "${CASE_BOUND:-30s}" --timeout-handshake 30s --timeout-connect 10s --reconnect 0 --validate "$@"
  code=$?
  echo "$name $code $(awk -v a="$t0" -v b="$(uptime_s)" 'BEGIN {printf "%.1f", b - a}')" | tee -a "$OUT/runs.txt"
}
ping_ref() {  # FAULT: the round trip busybox's ping sees under it (a reference beside pairperf's)
  ip netns exec cli ping -c 10 -i 0.05 -W 5 $SA | tail -1 >> "$OUT/$1.tc"
}
TRANSPORTS="-t tcp,ucx,ofi,gloo --tls tcp --ofi-provider tcp;ofi_rxm"
TESTS=tcp_lat,tcp_bw,tag_lat,tag_bw,fi_tag_lat,fi_tag_bw,gloo_lat,gloo_bw
sweep() {  # FAULT [ARGS...]: every transport's latency and bandwidth under the fault set now
  f=$1; shift
  # shellcheck disable=SC2086
  run "$f" $TRANSPORTS --test $TESTS --sizes 4K --duration 0.25s --warmup 8 "$@"
  counters after >> "$OUT/$f.tc"
}

fault clean "" ""
ping_ref clean
sweep clean
# 5 ms each way, +-1 ms (uniform: no distribution table), so a round trip of 8 to 12 ms; the
# client's end carries at most 100 Mbit/s. tcp's receive buffer is pinned (no autotuning) so that
# its stream is window-limited: at most that buffer per round trip.
fault delay "delay 5ms 1ms rate 100mbit" "delay 5ms 1ms"
ping_ref delay
# pairperf's own checks must agree: one-way latency at least the 4 ms the link holds each packet
# (held), not within 3 ms (missed), and no bandwidth beyond the 100 Mbit/s the link carries (held).
sweep delay --rcvbuf 64K --expect 'lat>=4ms@4K' --expect 'lat<=3ms@4K' --expect 'bw<=12.5MB/s@4K'
fault loss "loss 5%" "loss 5%"
# At least 25 round trips a case: each loses a packet 1 time in 10, and a lost one waits for the
# loss probe (200 ms and more with one packet out), so all four latency cases miss one about once
# in 30,000 runs (the 0.25 s budget alone gave the slowest case 10 round trips under CPU hogs).
sweep loss --min-iterations 25
fault duplicate "duplicate 5%" "duplicate 5%"
sweep duplicate
# A quarter of the packets go at once, the rest 10 ms later: they overtake. (No correlation:
# "reorder 25% 50%" sent about 1.5% at once, tc -s counting 105 requeues in 6805 packets.)
fault reorder "delay 10ms reorder 25%" "delay 10ms reorder 25%"
# At least 15 round trips a case: 9 in 16 wait both ways (20 ms), so a case without one is 4 in 10^6.
sweep reorder --min-iterations 15
fault corrupt "corrupt 1%" "corrupt 1%"
sweep corrupt
# Corruption that no checksum sees: the client's end flips one payload byte (200 bytes into the IP
# packet) of every 7th packet, as a NIC or memory fault past the checksum would. veth offloads the
# TCP checksum (the packet stays CHECKSUM_PARTIAL, the receiver trusts it), so the flip arrives.
# The control channel (the server's port) is left alone; a packet too short for the offset goes as
# it is. 7, a prime: with every 20th, gloo_lat's 4 KiB requests were never the one hit, twice.
fault silent "" ""
tc -n cli qdisc add dev $C clsact || die "silent: no clsact"
tc -n cli filter add dev $C egress prio 1 protocol ip u32 match ip dport 18515 0xffff action pass || die "silent: u32"
tc -n cli filter add dev $C egress prio 2 protocol ip matchall action gact pass random determ pipe 7 \
  action pedit munge offset 200 u8 invert || die "silent: tc refused the pedit filter"
# At least 30 round trips: a latency case's requests are hit too, whatever its packets' pattern.
CASE_BOUND=10s sweep silent --min-iterations 30
tc -n cli -s filter show dev $C egress >> "$OUT/silent.tc"
kill "$server" 2>/dev/null
wait "$server" 2>/dev/null
exit 0
