#!/bin/sh
# Runs inside scripts/softroce-vm: pairperf's libfabric (OFI) transport over the verbs provider
# (verbs;ofi_rxm on rxe0), server and client pinned to separate vCPUs. Results go to $RXE_OUT for
# tests/scenarios/test_ofi_softroce.py to check.
# Usage: ofi_suite.sh PAIRPERF_BINARY
B=$1
OUT=${RXE_OUT:-/out}
mkdir -p "$OUT"
PIN_S="taskset -c 0"; PIN_C="taskset -c 1"
[ "$(nproc)" -ge 2 ] || { PIN_S=; PIN_C=; }
rc=0
# An ASan build keeps freed memory in a quarantine (256 MiB by default) before reusing it. rxm's
# endpoints allocate about 100 MiB of buffer pools each, so the client's worker process, which runs
# case after case, and the server's session both filled theirs: together past the VM's 1 GiB, and
# the kernel killed the server. A smaller quarantine still catches a use after free of the last
# cases' memory; other builds ignore the variable (a normal build's worker stays at ~125 MiB
# whatever the number of cases).
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=32"
start_server() {  # PORT [ENV...]: a server whose port is read back from --ready-fd (at most 30 s)
  port=$1; shift
  ready="$OUT/.server-ready-$port"
  : > "$ready"
  env "$@" $PIN_S "$B" server --listen "$RXE_IP" --port "$port" --quiet --timeout-idle 120s --ready-fd 3 3>"$ready" &
  server=$!
  tries=0
  while [ ! -s "$ready" ] && [ "$tries" -lt 300 ] && kill -0 "$server" 2>/dev/null; do
    sleep 0.1
    tries=$((tries + 1))
  done
  [ -s "$ready" ] || { echo "== the server did not start listening within 30 s"; kill "$server"; exit 1; }
}
run() {  # NAME PORT ARGS...: one pairperf run into $OUT/NAME.json, expected to exit $EXPECT (0)
  name=$1; port=$2; shift 2
  echo "== $name: $*"
  # Under emulation (and more so an ASan build) a session's hello, which spawns libfabric's
  # discovery (0.1-0.5 s natively), took over the default 5 s: the VM's bounds are wider.
  $PIN_C "$B" run "$RXE_IP:$port" -t ofi -q --json "$OUT/$name.json" --timeout-case 60s --timeout-handshake 30s "$@"
  code=$?
  [ "$code" -eq "${EXPECT:-0}" ] || { echo "== $name: exit $code, expected ${EXPECT:-0}"; rc=1; }
}
ALL=fi_tag_lat,fi_tag_bw,fi_tag_bibw,fi_write_lat,fi_write_bw,fi_read_lat,fi_read_bw
# rxm sizes the verbs completion queue for FI_UNIVERSE_SIZE peers; rxe takes at most 32767 entries.
start_server 18515 FI_UNIVERSE_SIZE=16
FI_UNIVERSE_SIZE=16 run all 18515 --test $ALL --ofi-provider 'verbs;ofi_rxm' --sizes 8,4K,64K -n 100 --validate
FI_UNIVERSE_SIZE=16 run iface 18515 --test fi_tag_lat --ofi-provider 'verbs;ofi_rxm' --sizes 8 -n 100 --iface rxenet0
kill $server 2>/dev/null; wait $server 2>/dev/null
# Without it: an error that says what to set.
start_server 18516
EXPECT=1 run universe 18516 --test fi_tag_lat --ofi-provider 'verbs;ofi_rxm' --sizes 8 -n 10
kill $server 2>/dev/null; wait $server 2>/dev/null
exit $rc
