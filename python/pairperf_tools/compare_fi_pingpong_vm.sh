#!/bin/sh
# The in-VM half of `scripts/compare-peers --suite ofi --vm` (a benchmark, not a test), run inside
# scripts/softroce-vm: pairperf's fi_tag_lat against fi_pingpong over libfabric's verbs;ofi_rxm on
# rxe0, same provider, sizes and iterations, alternating rounds; prints and writes
# ($RXE_OUT/fi_pingpong.txt) the medians and ratios. Both figures are means over a ping-pong
# (fi_pingpong's usec/xfer, and its MB/sec = size / that); emulation makes the absolute numbers
# meaningless, the ratio shows what the harness costs.
# Usage: compare_fi_pingpong_vm.sh PAIRPERF_BINARY [ROUNDS]
B=$1; ROUNDS=${2:-3}
OUT=${RXE_OUT:-/out}; mkdir -p "$OUT"
. "$(dirname "$0")/vm_lib.sh"
export FI_UNIVERSE_SIZE=16  # rxm sizes the verbs CQ for this many peers; rxe takes 32767 entries
P='verbs;ofi_rxm'
LAT_SIZE=8; LAT_N=5000; BW_SIZE=1048576; BW_N=200
PORT=18515
fi_pingpong_us() {  # SIZE N: fi_pingpong's usec/xfer (mean one-way)
  $PIN_S timeout 300 fi_pingpong -p "$P" -e rdm -m tagged -S "$1" -I "$2" -B "$PORT" > /tmp/fp_server.txt 2>&1 &
  s=$!; wait_listen $s || { cat /tmp/fp_server.txt >&2; kill $s 2>/dev/null; return 1; }
  $PIN_C timeout 300 fi_pingpong -p "$P" -e rdm -m tagged -S "$1" -I "$2" -P "$PORT" "$RXE_IP" > /tmp/fp_client.txt 2>&1
  wait $s
  awk '$1 ~ /^[0-9]/ && NF >= 8 {v=$7} END {print v}' /tmp/fp_client.txt
}
pairperf_us() {  # SIZE N: pairperf fi_tag_lat's mean one-way latency in us
  $PIN_S "$B" server --listen "$RXE_IP" --port "$PORT" --quiet --once --timeout-idle 60s &
  s=$!; wait_listen $s || return 1
  $PIN_C "$B" run "$RXE_IP" -t ofi --ofi-provider "$P" --test fi_tag_lat --sizes "$1" -n "$2" -q --json /tmp/pp.json \
    --timeout-case 300s > /dev/null
  wait $s
  json_number /tmp/pp.json latency_s avg | awk '{printf "%.3f\n", $1 * 1e6}'
}
: > /tmp/lat_pp; : > /tmp/lat_fp; : > /tmp/bw_pp; : > /tmp/bw_fp
i=1
while [ $i -le "$ROUNDS" ]; do
  echo "round $i/$ROUNDS" >&2
  if [ $((i % 2)) = 1 ]; then
    pairperf_us $LAT_SIZE $LAT_N >> /tmp/lat_pp; fi_pingpong_us $LAT_SIZE $LAT_N >> /tmp/lat_fp
    pairperf_us $BW_SIZE $BW_N >> /tmp/bw_pp; fi_pingpong_us $BW_SIZE $BW_N >> /tmp/bw_fp
  else
    fi_pingpong_us $LAT_SIZE $LAT_N >> /tmp/lat_fp; pairperf_us $LAT_SIZE $LAT_N >> /tmp/lat_pp
    fi_pingpong_us $BW_SIZE $BW_N >> /tmp/bw_fp; pairperf_us $BW_SIZE $BW_N >> /tmp/bw_pp
  fi
  i=$((i + 1))
done
lp=$(median /tmp/lat_pp); lf=$(median /tmp/lat_fp); bp=$(median /tmp/bw_pp); bf=$(median /tmp/bw_fp)
{
  echo "pairperf vs fi_pingpong over $P on rxe0 (TCG emulation), medians of $ROUNDS alternating rounds"
  echo "tag latency 8 B mean one-way (us): pairperf $lp  fi_pingpong $lf  ratio $(ratio "$lp" "$lf")  (target <= 1.05)"
  echo "ping-pong bandwidth 1 MiB (mean one-way us): pairperf $bp  fi_pingpong $bf  bandwidth ratio $(ratio "$bf" "$bp")  (target >= 0.95)"
  echo "samples: pairperf lat $(tr '\n' ' ' < /tmp/lat_pp); fi_pingpong lat $(tr '\n' ' ' < /tmp/lat_fp)"
  echo "samples: pairperf 1 MiB $(tr '\n' ' ' < /tmp/bw_pp); fi_pingpong 1 MiB $(tr '\n' ' ' < /tmp/bw_fp)"
} | tee "$OUT/fi_pingpong.txt"
