#!/usr/bin/env bash
# Cost of TICTAC_AUTH_MAC=1 over tcp (docs/security.md "Frame MACs"): paired, interleaved runs of
# `tictac perftest --local` with frame MACs off and on (same token both times), 8 B latency and
# 4 MiB bandwidth; each run holds /tmp/tictac-bench.lock. Prints every run and the medians.
# Usage: bash bench/auth_mac_cost.sh [BUILD_DIR] [--repeats N]   (5 pairs by default)
set -euo pipefail
build=build
repeats=5
while [ $# -gt 0 ]; do
  case $1 in
    --repeats) repeats=$2; shift 2 ;;
    *) build=$1; shift ;;
  esac
done
export TICTAC_AUTH_TOKEN=${TICTAC_AUTH_TOKEN:-bench-token-0123456789abcdef}
run() {  # mac test size extra... -> one number
  local mac=$1 test=$2 size=$3; shift 3
  TICTAC_AUTH_MAC=$mac flock /tmp/tictac-bench.lock "$build/tictac" perftest --backend tcp --local \
    --test "$test" --size "$size" --format json "$@" |
    python3 -c "import json,sys; d=json.load(sys.stdin); print(d['lat_us_median'] if '$test'=='lat' else d['gbytes_per_s_median'])"
}
declare -A res
for i in $(seq 1 "$repeats"); do
  for mac in 0 1; do
    res[lat$mac]+="$(run $mac lat 8 --iters 10000) "
    res[bw$mac]+="$(run $mac bw 4M) "
  done
done
python3 - "${res[lat0]}" "${res[lat1]}" "${res[bw0]}" "${res[bw1]}" <<'PY'
import statistics, sys
lat0, lat1, bw0, bw1 = ([float(x) for x in a.split()] for a in sys.argv[1:])
for name, off, on, unit in (("lat 8 B one-way", lat0, lat1, "us"), ("bw 4 MiB", bw0, bw1, "GB/s")):
    m0, m1 = statistics.median(off), statistics.median(on)
    print(f"{name}: MAC off {off} -> median {m0:.3f} {unit}; MAC on {on} -> median {m1:.3f} {unit}; on/off {m1/m0:.3f}")
PY
