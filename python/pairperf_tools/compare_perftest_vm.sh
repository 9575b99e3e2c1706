#!/bin/sh
# The in-VM half of `scripts/compare-peers --suite verbs` (a benchmark, not a test), run inside
# scripts/softroce-vm: pairperf against perftest on the same rxe0, same sizes and
# iterations, alternating rounds; prints and writes ($RXE_OUT/perftest.txt) the medians and ratios.
# Emulation makes the absolute numbers meaningless; the ratio shows what the harness costs.
# Usage: compare_perftest_vm.sh PAIRPERF_BINARY [ROUNDS]
B=$1; ROUNDS=${2:-3}
OUT=${RXE_OUT:-/out}; mkdir -p "$OUT"
. "$(dirname "$0")/vm_lib.sh"
G=$RXE_GID_IDX
LAT_N=20000; BW_N=2000; BW_SIZE=65536
PORT=18515  # perftest's default port; pairperf's server takes it too, one after the other
perftest_pair() {  # TOOL ARGS...: server and client, prints the client's result line
  tool=$1; shift
  $PIN_S timeout 120 $tool -d rxe0 -x "$G" -F -p "$PORT" "$@" > /tmp/pt_server.txt 2>&1 &
  s=$!; wait_listen $s || { cat /tmp/pt_server.txt >&2; kill $s 2>/dev/null; return 1; }
  $PIN_C timeout 120 $tool -d rxe0 -x "$G" -F -p "$PORT" "$@" "$RXE_IP" > /tmp/pt_client.txt 2>&1
  wait $s
  awk '$1 ~ /^[0-9]+$/ && NF >= 4 {line=$0} END {print line}' /tmp/pt_client.txt
}
pairperf_value() {  # TEST SIZE N FIELD: p50 one-way latency in us, or bandwidth in MiB/s
  $PIN_S "$B" server --listen "$RXE_IP" --port "$PORT" --quiet --once --timeout-idle 60s &
  s=$!; wait_listen $s || return 1
  $PIN_C "$B" run "$RXE_IP" -t verbs --test "$1" --sizes "$2" -n "$3" -q --json /tmp/pp.json --timeout-case 120s > /dev/null
  wait $s
  python3_free_extract /tmp/pp.json "$4"
}
python3_free_extract() {  # no python in the VM: pull the number out of pairperf's JSON
  if [ "$2" = lat ]; then
    json_number "$1" latency_s p50 | awk '{printf "%.3f\n", $1 * 1e6}'
  else
    tr -d '\n ' < "$1" | sed -n 's/.*"bandwidth_Bps":{"receiver":[^,]*,"sender":\([0-9.e+-]*\)}.*/\1/p' | awk '{printf "%.3f\n", $1 / 1048576}'
  fi
}
: > /tmp/lat_pp; : > /tmp/lat_pt; : > /tmp/bw_pp; : > /tmp/bw_pt
i=1
while [ $i -le "$ROUNDS" ]; do
  echo "round $i/$ROUNDS" >&2
  if [ $((i % 2)) = 1 ]; then
    pairperf_value send_lat 8 $LAT_N lat >> /tmp/lat_pp
    perftest_pair ib_send_lat -s 8 -n $LAT_N | awk '{print $5}' >> /tmp/lat_pt   # t_typical (median)
    pairperf_value write_bw $BW_SIZE $BW_N bw >> /tmp/bw_pp
    perftest_pair ib_write_bw -s $BW_SIZE -n $BW_N | awk '{print $4}' >> /tmp/bw_pt  # BW average [MB/sec], MB = 2^20
  else
    perftest_pair ib_send_lat -s 8 -n $LAT_N | awk '{print $5}' >> /tmp/lat_pt
    pairperf_value send_lat 8 $LAT_N lat >> /tmp/lat_pp
    perftest_pair ib_write_bw -s $BW_SIZE -n $BW_N | awk '{print $4}' >> /tmp/bw_pt
    pairperf_value write_bw $BW_SIZE $BW_N bw >> /tmp/bw_pp
  fi
  i=$((i + 1))
done
lp=$(median /tmp/lat_pp); lt=$(median /tmp/lat_pt); bp=$(median /tmp/bw_pp); bt=$(median /tmp/bw_pt)
{
  echo "pairperf vs perftest on rxe0 (TCG emulation), medians of $ROUNDS alternating rounds"
  echo "send latency 8 B p50 one-way (us): pairperf $lp  ib_send_lat t_typical $lt  ratio $(awk -v a="$lp" -v b="$lt" 'BEGIN{printf "%.3f", a/b}')  (target <= 1.05)"
  echo "write bandwidth 64 KiB (MiB/s):    pairperf $bp  ib_write_bw BW average $bt  ratio $(awk -v a="$bp" -v b="$bt" 'BEGIN{printf "%.3f", a/b}')  (target >= 0.97)"
  echo "samples: pairperf lat $(tr '\n' ' ' < /tmp/lat_pp); perftest lat $(tr '\n' ' ' < /tmp/lat_pt)"
  echo "samples: pairperf bw $(tr '\n' ' ' < /tmp/bw_pp); perftest bw $(tr '\n' ' ' < /tmp/bw_pt)"
} | tee "$OUT/perftest.txt"
