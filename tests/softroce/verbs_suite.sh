#!/bin/sh
# Runs inside scripts/softroce-vm: pairperf's verbs tests over rxe0, server and client in the VM
# on separate vCPUs (pinned: two busy-pollers on one vCPU turn latency into scheduler ticks).
# Results go to $RXE_OUT for tests/scenarios/test_verbs_softroce.py to check.
# Usage: verbs_suite.sh PAIRPERF_BINARY
B=$1
OUT=${RXE_OUT:-/out}
mkdir -p "$OUT"
PIN_S="taskset -c 0"; PIN_C="taskset -c 1"
[ "$(nproc)" -ge 2 ] || { PIN_S=; PIN_C=; }
# The server writes its port to fd 3 once it listens; wait for that (at most 30 s), never a fixed
# sleep: a slow start (an ASan build, a loaded host) refused the first run's connection.
ready="$OUT/.server-ready"
: > "$ready"
$PIN_S "$B" server --listen "$RXE_IP" --port 18515 --quiet --timeout-idle 120s --ready-fd 3 3>"$ready" &
server=$!
tries=0
while [ ! -s "$ready" ] && [ "$tries" -lt 300 ] && kill -0 "$server" 2>/dev/null; do
  sleep 0.1
  tries=$((tries + 1))
done
[ -s "$ready" ] || { echo "== the server did not start listening within 30 s"; kill "$server"; exit 1; }
rc=0
run() {  # NAME ARGS...: one pairperf run into $OUT/NAME.json, expected to exit $EXPECT (0)
  name=$1; shift
  echo "== $name: $*"
  $PIN_C "$B" run "$RXE_IP" -t verbs -q --json "$OUT/$name.json" --timeout-case 60s "$@"
  code=$?
  [ "$code" -eq "${EXPECT:-0}" ] || { echo "== $name: exit $code, expected ${EXPECT:-0}"; rc=1; }
}
ALL=write_lat,write_bw,write_bibw,read_lat,read_bw,send_lat,send_bw
run all --test $ALL --sizes 1,64,4K,64K -n 200 --validate
run rdma_cm --test $ALL --sizes 8,64K -n 200 --validate --rdma-cm
run qps --test write_bw,read_bw,send_bw --sizes 4K -n 1000 --validate --qps 3 --signal-every 4
run mtu --test send_bw --sizes 64K -n 200 --mtu 512
run timed --test send_lat,write_lat,send_bw --sizes 8,4K --duration 0.3s --validate  # time budgets
run event --test send_lat,write_bw --sizes 64 -n 200 --progress event
run iface --test send_lat --sizes 8 -n 200 --iface rxenet0
EXPECT=4 run noiface --test send_lat --sizes 8 -n 50 --iface lo  # skipped: nothing judged
kill $server 2>/dev/null
wait $server 2>/dev/null
exit $rc
