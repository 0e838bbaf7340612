#!/usr/bin/env bash
# UCX backend vs ucx_perftest, in one command, same machine, same sizes, same UCX transports.
#
#   bench/ucx_vs_perftest.sh [BUILD_DIR]        (default build; needs ucx-utils and a UCX build)
#
# For each UCX_TLS in $TLS_LIST (default: "tcp" and "sm,self,tcp" = shared memory, with tcp for
# UCX's connection manager) and $REPS repetitions (default 3), runs on 127.0.0.1, server and
# client as separate processes:
#   ucx_perftest -t tag_lat -s 8 -n 20000  vs  tictac perftest --backend ucx --test lat --size 8 --iters 20000
#   ucx_perftest -t tag_bw  -s 4194304  vs  tictac perftest --backend ucx --test bw  --size 4M --recv-buffers 1
# (ucx_perftest receives every message into one buffer; --recv-buffers 1 does the same, where
# tictac's default rotates through one 4 MiB buffer per outstanding receive, 64 MiB, which ran
# 20-30% slower on the 2-core VM: docs/ucx.md, "Receive buffers: the same memory as the peer tool";
# RECV_BUFFERS=0 gives tictac its default)
# With UCX_TLS=tcp it also runs the tcp backend against the same ucx_perftest rounds
# (TCP_BACKEND=0 leaves it out):
#   tictac perftest --backend tcp --test lat --size 8  and  --test bw --size 4M
# and prints the medians and the ratios. Units as ucx_perftest prints them: one-way latency in
# microseconds (half the round trip, median), bandwidth in GB/s (10^9 bytes/s; ucx_perftest's
# MB/s are 2^20 bytes). Targets (issue 4): bandwidth >= 90% of tag_bw's, latency <= 1.5x tag_lat's.
# Extra tictac flags (e.g. "--chunk 4M --window 8") come from $TICTAC_FLAGS. Exit 1 on a failed run.
set -euo pipefail

build=${1:-build}
tictac="$build/tictac"
reps=${REPS:-3}
tls_list=${TLS_LIST:-"tcp sm,self,tcp"}
tictac_flags=${TICTAC_FLAGS:-}
tcp_backend=${TCP_BACKEND:-1}
lat_iters=20000
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

command -v ucx_perftest >/dev/null || { echo "ucx_perftest not found: apt-get install ucx-utils" >&2; exit 1; }
[ -x "$tictac" ] || { echo "$tictac not found: build first (meson setup $build && ninja -C $build)" >&2; exit 1; }

median() { sort -g | awk '{v[NR]=$1} END {if (NR == 0) print "nan"; else if (NR % 2) print v[(NR+1)/2]; else printf "%.4g\n", (v[NR/2]+v[NR/2+1])/2}'; }

# ucx_perftest TLS TEST SIZE ITERS -> latency (us, median) or bandwidth (GB/s)
run_ucx_perftest() {
  local tls=$1 test=$2 size=$3 iters=$4 port=$((20000 + RANDOM % 20000)) line="" i
  UCX_TLS=$tls timeout 120 ucx_perftest -t "$test" -s "$size" -n "$iters" -p "$port" -f >/dev/null 2>&1 &
  local server=$!
  for i in $(seq 50); do  # the server needs a moment to listen
    line=$(UCX_TLS=$tls timeout 120 ucx_perftest 127.0.0.1 -t "$test" -s "$size" -n "$iters" -p "$port" -f 2>/dev/null |
           awk 'NF == 8 && $1 ~ /^[0-9]+$/' | tail -1) && [ -n "$line" ] && break
    sleep 0.1
  done
  wait "$server" || true
  [ -n "$line" ] || { echo "ucx_perftest $test failed (UCX_TLS=$tls)" >&2; return 1; }
  if [ "$test" = tag_lat ]; then echo "$line" | awk '{print $2}'; else echo "$line" | awk '{printf "%.4f\n", $5 * 1048576 / 1e9}'; fi
}

# tictac perftest TLS TEST SIZE [BACKEND] -> latency (us, median) or bandwidth (GB/s)
run_tictac() {
  local tls=$1 test=$2 size=$3 backend=${4:-ucx} addr="" i out iters=()
  # The same number of exchanges as ucx_perftest's tag_lat run (the spin policy and the
  # scheduler's placement settle over the first thousand or so).
  [ "$test" = lat ] && iters=(--iters "$lat_iters")
  [ "$test" = bw ] && iters=(--recv-buffers "${RECV_BUFFERS:-1}")
  # shellcheck disable=SC2086
  UCX_TLS=$tls timeout 120 "$tictac" perftest --server --backend "$backend" --listen "$backend://127.0.0.1:0" >"$tmp/server.log" 2>&1 &
  local server=$!
  for i in $(seq 100); do
    addr=$(grep -o "$backend://[0-9.]*:[0-9]*" "$tmp/server.log" || true)
    [ -n "$addr" ] && break
    sleep 0.05
  done
  [ -n "$addr" ] || { cat "$tmp/server.log" >&2; kill "$server" 2>/dev/null; return 1; }
  # shellcheck disable=SC2086
  out=$(UCX_TLS=$tls timeout 120 "$tictac" perftest --client --connect "$addr" --backend "$backend" --test "$test" \
        --size "$size" "${iters[@]}" $tictac_flags 2>&1) || { echo "$out" >&2; kill "$server" 2>/dev/null; return 1; }
  wait "$server" || true
  if [ "$test" = lat ]; then echo "$out" | awk '$1 == "lat_us_median" {print $2}'; else echo "$out" | awk '$1 == "gbytes_per_s" {print $2}'; fi
}

printf '%-14s %-22s %12s %12s %8s  %s\n' "UCX_TLS" "measure" "ucx_perftest" "tictac" "ratio" "target"
for tls in $tls_list; do
  : >"$tmp/pl" ; : >"$tmp/tl" ; : >"$tmp/pb" ; : >"$tmp/tb" ; : >"$tmp/cl" ; : >"$tmp/cb"
  with_tcp=0
  [ "$tls" = tcp ] && [ "$tcp_backend" = 1 ] && with_tcp=1
  for r in $(seq "$reps"); do
    run_ucx_perftest "$tls" tag_lat 8 "$lat_iters" >>"$tmp/pl"
    run_tictac "$tls" lat 8 >>"$tmp/tl"
    run_ucx_perftest "$tls" tag_bw 4194304 500 >>"$tmp/pb"
    run_tictac "$tls" bw 4M >>"$tmp/tb"
    if [ "$with_tcp" = 1 ]; then
      run_tictac "$tls" lat 8 tcp >>"$tmp/cl"
      run_tictac "$tls" bw 4M tcp >>"$tmp/cb"
    fi
  done
  pl=$(median <"$tmp/pl"); tl=$(median <"$tmp/tl"); pb=$(median <"$tmp/pb"); tb=$(median <"$tmp/tb")
  printf '%-14s %-22s %12s %12s %8s  %s\n' "$tls" "8 B latency (us)" "$pl" "$tl" \
    "$(awk -v a="$tl" -v b="$pl" 'BEGIN {printf "%.2fx", a / b}')" "<= 1.5x"
  printf '%-14s %-22s %12s %12s %8s  %s\n' "$tls" "4 MiB bandwidth (GB/s)" "$pb" "$tb" \
    "$(awk -v a="$tb" -v b="$pb" 'BEGIN {printf "%.0f%%", 100 * a / b}')" ">= 90%"
  if [ "$with_tcp" = 1 ]; then
    cl=$(median <"$tmp/cl"); cb=$(median <"$tmp/cb")
    printf '%-14s %-22s %12s %12s %8s  %s\n' "tcp backend" "8 B latency (us)" "$pl" "$cl" \
      "$(awk -v a="$cl" -v b="$pl" 'BEGIN {printf "%.2fx", a / b}')" "<= 1.5x"
    printf '%-14s %-22s %12s %12s %8s  %s\n' "tcp backend" "4 MiB bandwidth (GB/s)" "$pb" "$cb" \
      "$(awk -v a="$cb" -v b="$pb" 'BEGIN {printf "%.0f%%", 100 * a / b}')" "(iperf3: tcp_vs_iperf3.sh)"
  fi
done
echo "($reps runs each, medians; latency = one-way = round trip / 2; tictac flags: ${tictac_flags:-defaults})"
