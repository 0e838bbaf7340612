#!/usr/bin/env bash
# The workers' push order and the servers' update order (docs/ps-training.md, "Push and update
# order") on emulated training jobs, in paired rounds: each round runs every variant once, in the
# same order, so a drift of the machine's load hits all of them; prints each job's median
# iteration and the diagnose counters (upd_half: share of the next values updated by the middle
# of the server's update span).
#   bench/e2e/order_ab.sh [OUT] [ROUNDS]  (default /tmp/e2e-order-ab, 2); ARGS="..." replaces the
#   e2e options. Variants: p3 = TICTAC_PS_PUSH_ORDER=next (the default before), default = neither
#   set (pushes as produced, updates in arrival order), next_updates = TICTAC_PS_UPDATE_ORDER=next.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:-/tmp/e2e-order-ab}
rounds=${2:-2}
args=${ARGS:---compute emulated --models inception_v3 --workers 4 --ps 1 --modes training --policies tac,gloo --iters 6 --warmup 1 --max-rate 4gbit --no-sim}
declare -A envs=([p3]="TICTAC_PS_PUSH_ORDER=next" [default]="" [next_updates]="TICTAC_PS_UPDATE_ORDER=next")
for r in $(seq 1 "$rounds"); do
  for v in p3 default next_updates; do
    echo "== $v round $r"
    # shellcheck disable=SC2086
    env -u TICTAC_PS_PUSH_ORDER -u TICTAC_PS_UPDATE_ORDER ${envs[$v]} "$here/e2e" $args --out "$out/${v}_$r" \
      | grep -E "ok in|FAILED"
    PYTHONPATH="$root:$root/python" "$root/.venv/bin/python" -m bench.e2e.diagnose "$out/${v}_$r" | tail -n +2
  done
done
