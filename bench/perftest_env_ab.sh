#!/bin/bash
# Paired, interleaved A/B of two environment settings on `tictac perftest --test bw` (server and
# client on 127.0.0.1), with the CPU time the two processes used.
#
#   bench/perftest_env_ab.sh BUILD_DIR "A settings" "B settings"
#   e.g. bench/perftest_env_ab.sh build "TICTAC_UCX_RNDV_SCHEME=put_zcopy" "TICTAC_UCX_RNDV_SCHEME=get_zcopy"
#
# Each settings string is a space-separated list of NAME=VALUE put in the environment of both
# processes for that side's runs (empty string: the defaults). Environment: PAIRS (10), BACKEND
# (ucx), UCX_TLS (tcp), SIZE (4M), TICTAC_FLAGS (extra perftest flags for both sides).
# Prints every pair, then the medians and the mean paired ratio A/B with its 95% confidence
# interval (t distribution). Exit 1 when a run fails.
set -euo pipefail
build=${1:?usage: $0 BUILD_DIR "A settings" "B settings"}
a_env=${2-}
b_env=${3-}
pairs=${PAIRS:-10}
backend=${BACKEND:-ucx}
tls=${UCX_TLS:-tcp}
size=${SIZE:-4M}
tictac="$build/tictac"
[ -x "$tictac" ] || { echo "no $tictac: build first (make build)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# one_run "settings" -> "gbytes_per_s user_s sys_s"
one_run() {
  local settings=$1 addr="" i out server
  # shellcheck disable=SC2086
  env $settings UCX_TLS="$tls" timeout 120 /usr/bin/time -f "%U %S" -o "$tmp/server.time" \
    "$tictac" perftest --server --backend "$backend" --listen "$backend://127.0.0.1:0" >"$tmp/server.log" 2>&1 &
  server=$!
  for i in $(seq 200); do
    addr=$(grep -o "$backend://[0-9.]*:[0-9]*" "$tmp/server.log" || true)
    [ -n "$addr" ] && break
    sleep 0.05
  done
  [ -n "$addr" ] || { cat "$tmp/server.log" >&2; kill "$server" 2>/dev/null; return 1; }
  # shellcheck disable=SC2086
  out=$(env $settings UCX_TLS="$tls" timeout 120 /usr/bin/time -f "TIME %U %S" "$tictac" perftest --client \
        --connect "$addr" --backend "$backend" --test bw --size "$size" ${TICTAC_FLAGS:-} 2>&1) ||
    { echo "$out" >&2; kill "$server" 2>/dev/null; return 1; }
  wait "$server" || { cat "$tmp/server.log" >&2; return 1; }
  local bw client_t server_t
  bw=$(echo "$out" | awk '$1 == "gbytes_per_s" {print $2}')
  client_t=$(echo "$out" | awk '$1 == "TIME" {print $2, $3}')
  server_t=$(cat "$tmp/server.time")
  [ -n "$bw" ] || { echo "no bandwidth in: $out" >&2; return 1; }
  echo "$bw $client_t $server_t" | awk '{printf "%s %.2f %.2f\n", $1, $2 + $4, $3 + $5}'
}

echo "pair  A: GB/s user_s sys_s   B: GB/s user_s sys_s   (A = '${a_env}', B = '${b_env}')"
for i in $(seq "$pairs"); do
  a=$(one_run "$a_env")
  b=$(one_run "$b_env")
  echo "$i  $a  $b" | tee -a "$tmp/pairs"
done
python3 - "$tmp/pairs" <<'EOF'
import math, statistics as st, sys
rows = [list(map(float, line.split()[1:])) for line in open(sys.argv[1])]
ratio = [r[0] / r[3] for r in rows]
n = len(ratio)
t95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26}.get(n - 1, 2.0)
mean = st.mean(ratio)
half = t95 * st.stdev(ratio) / math.sqrt(n) if n > 1 else float("nan")
med = lambda k: st.median(r[k] for r in rows)
print(f"medians: A {med(0):.2f} GB/s (user {med(1):.2f} s, sys {med(2):.2f} s); "
      f"B {med(3):.2f} GB/s (user {med(4):.2f} s, sys {med(5):.2f} s)")
print(f"A/B bandwidth: mean paired ratio {mean:.3f}, 95% CI [{mean - half:.3f}, {mean + half:.3f}], "
      f"A faster in {sum(x > 1 for x in ratio)} of {n} pairs")
EOF
