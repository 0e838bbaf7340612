#!/usr/bin/env bash
# TCP bandwidth of the transport against iperf3 on this machine's loopback interface, in one
# command: each repetition runs an iperf3 single stream (server `-s -1` on 127.0.0.1, client
# `-J`) and then `tictac perftest --backend tcp --test bw --size 4M --local --format json`;
# prints every pair, both medians and their ratio (target: tictac >= 0.9 x iperf3).
#
#   bench/tcp_vs_iperf3.sh [BUILD_DIR]        (default: build)
#
# Environment: REPEATS (3), IPERF_SECONDS (3), IPERF_ARGS (extra iperf3 client flags, e.g.
# "-l 1M" to write 1 MiB like the transport's chunks; default none = iperf3's 128 KiB writes),
# SIZE (4M), ITERS (1000 perftest messages), PORT (iperf3's port, default: a free one from
# 127.0.0.1). Needs iperf3, python3 and ss (iproute2).
# Exit codes: 0 ran (whatever the ratio), 1 a run failed, 2 usage, 77 a tool is missing.
# Every process it starts is stopped by PID on exit.
set -euo pipefail

build=${1:-build}
[ $# -le 1 ] || { sed -n '2,16p' "$0" >&2; exit 2; }
tictac=$build/tictac
repeats=${REPEATS:-3}
seconds=${IPERF_SECONDS:-3}
size=${SIZE:-4M}
iters=${ITERS:-1000}
[[ $repeats =~ ^[1-9][0-9]*$ ]] || { echo "tcp_vs_iperf3: REPEATS must be a positive integer" >&2; exit 2; }
[ -x "$tictac" ] || { echo "tcp_vs_iperf3: $tictac not found (build first: ninja -C $build)" >&2; exit 2; }
for t in iperf3 python3 ss; do
  command -v "$t" >/dev/null 2>&1 || { echo "tcp_vs_iperf3: $t not found" >&2; exit 77; }
done

IPERF_PID=""
cleanup() {
  if [ -n "$IPERF_PID" ]; then
    kill "$IPERF_PID" 2>/dev/null || true
    wait "$IPERF_PID" 2>/dev/null || true
  fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

json_field() {  # json_field EXPR: reads JSON on stdin, prints EXPR over the parsed object d
  python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"
}

# Stops the iperf3 server (it normally exits by itself after its one client: -1).
stop_iperf() {
  [ -n "$IPERF_PID" ] || return 0
  for _ in $(seq 40); do kill -0 "$IPERF_PID" 2>/dev/null || break; sleep 0.05; done
  kill "$IPERF_PID" 2>/dev/null || true
  wait "$IPERF_PID" 2>/dev/null || true
  IPERF_PID=""
}

# Runs in this shell (not in $(...)) so that the EXIT trap knows the server's PID; sets RESULT.
iperf_once() {
  local port=${PORT:-$(free_port)} out="" rc=0
  iperf3 -s -1 -B 127.0.0.1 -p "$port" >/dev/null 2>&1 &
  IPERF_PID=$!
  # One client only (a -1 server serves exactly one), started once the server listens.
  for _ in $(seq 100); do
    ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && break
    kill -0 "$IPERF_PID" 2>/dev/null || { echo "tcp_vs_iperf3: iperf3 server exited (port $port busy?)" >&2; return 1; }
    sleep 0.05
  done
  # shellcheck disable=SC2086 # IPERF_ARGS is a list of flags
  out=$(timeout $((seconds + 30)) iperf3 -c 127.0.0.1 -p "$port" -t "$seconds" -J ${IPERF_ARGS:-} 2>&1) || rc=$?
  stop_iperf
  if [ "$rc" != 0 ]; then
    echo "tcp_vs_iperf3: iperf3 client failed (exit $rc): $out" >&2
    return 1
  fi
  RESULT=$(json_field "d['end']['sum_received']['bits_per_second'] / 8e9" <<<"$out")
}

tictac_once() {
  local out
  out=$("$tictac" perftest --backend tcp --test bw --size "$size" --iters "$iters" --local --format json) || return 1
  json_field "d['gbytes_per_s']" <<<"$out"
}

echo "tcp_vs_iperf3: $repeats repetitions on 127.0.0.1; iperf3 -t $seconds ${IPERF_ARGS:+$IPERF_ARGS }single stream; tictac perftest bw --size $size --iters $iters"
iperf_all=()
tictac_all=()
for r in $(seq "$repeats"); do
  iperf_once
  i=$RESULT
  t=$(tictac_once)
  iperf_all+=("$i")
  tictac_all+=("$t")
  printf '  run %d: iperf3 %.3f GB/s   tictac %.3f GB/s\n' "$r" "$i" "$t"
done

python3 - "${#iperf_all[@]}" "${iperf_all[@]}" "${tictac_all[@]}" <<'EOF'
import statistics, sys
n = int(sys.argv[1])
iperf = [float(x) for x in sys.argv[2:2 + n]]
tictac = [float(x) for x in sys.argv[2 + n:]]
mi, mt = statistics.median(iperf), statistics.median(tictac)
ratio = mt / mi if mi > 0 else 0.0
print(f"iperf3_gbytes_per_s_median {mi:.3f}")
print(f"tictac_gbytes_per_s_median {mt:.3f}")
print(f"ratio {ratio:.3f} (target >= 0.9: {'met' if ratio >= 0.9 else 'NOT met'})")
EOF
