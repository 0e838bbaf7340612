#!/usr/bin/env bash
# One ordered_ddp job (vgg16, emulated, 4 workers, 1 round) with every host's link sampled every
# 10 ms (bench/cluster/link_sampler.py in the cluster's bridge namespace), then the fc1 phases'
# link use (bench/e2e/ddp_linkuse.py): how full each uplink was while the classifier's weight was
# reduce-scattered and all-gathered, and where links stalled (docs/ddp.md).
#   bench/e2e/ddp_link_probe.sh OUT [extra bench/e2e/e2e options]; needs root (namespaces).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:?usage: ddp_link_probe.sh OUT [e2e options]}
shift
mkdir -p "$out"
before=$(ip netns list | awk '{print $1}' | grep -- '-br$' | sort || true)
"$here/e2e" --compute emulated --models vgg16 --workers 4 --ps 1 --modes ddp --policies ordered-tac \
  --iters 6 --warmup 3 --rounds 1 --no-sim --out "$out" "$@" > "$out/e2e.log" 2>&1 &
e2e=$!
ns=""
for _ in $(seq 1 1200); do
  ns=$(comm -13 <(echo "$before") <(ip netns list | awk '{print $1}' | grep -- '-br$' | sort) | head -1)
  [ -n "$ns" ] && break
  kill -0 "$e2e" 2>/dev/null || break
  sleep 0.5
done
[ -n "$ns" ] || { echo "ddp_link_probe: no cluster namespace appeared (see $out/e2e.log)" >&2; wait "$e2e"; exit 1; }
ip netns exec "$ns" python3 "$root/bench/cluster/link_sampler.py" "$out/links.txt" 10 1200 &
sampler=$!
status=0
wait "$e2e" || status=$?
kill "$sampler" 2>/dev/null || true
wait "$sampler" 2>/dev/null || true
grep -E "calibrate|ok in|FAILED" "$out/e2e.log" || true
[ "$status" = 0 ] || { echo "ddp_link_probe: the e2e job failed ($status): $out/e2e.log" >&2; exit "$status"; }
job=$(ls -d "$out"/jobs/*ordered* | head -1)
rate=$(grep -o 'at [0-9]*mbit' "$out/e2e.log" | head -1 | tr -dc 0-9)
cd "$root" && python3 -m bench.e2e.ddp_linkuse "$out/links.txt" "$job" --rate-mbit "$rate"
