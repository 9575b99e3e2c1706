# Helpers of the in-VM halves of scripts/compare-peers (sourced by compare_perftest_vm.sh and
# compare_fi_pingpong_vm.sh inside scripts/softroce-vm; dash, no python in the VM).
PIN_S="taskset -c 0"; PIN_C="taskset -c 1"
wait_listen() {  # PID: until a socket listens on $PORT (/proc/net/tcp{,6}, state 0A), at most 30 s
  hex=$(printf ':%04X' "$PORT"); tries=0
  while [ "$tries" -lt 300 ] && kill -0 "$1" 2>/dev/null; do
    cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | awk -v p="$hex" '$2 ~ p"$" && $4 == "0A" {f=1} END {exit !f}' && return 0
    sleep 0.1; tries=$((tries + 1))
  done
  echo "== nothing listened on port $PORT within 30 s (server pid $1)" >&2; return 1
}
json_number() {  # FILE KEY FIELD: the FIELD of the first "KEY":{...} object in pairperf's JSON
  tr -d '\n ' < "$1" | sed -n "s/.*\"$2\":{[^}]*\"$3\":\([0-9.e+-]*\).*/\1/p"
}
median() { sort -g "$1" | awk '{v[NR]=$1} END {if (NR == 0) print "nan"; else if (NR % 2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.3f", a/b}'; }
