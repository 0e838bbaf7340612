#!/usr/bin/env bash
# The servers' eager vs bulk update (docs/ps-training.md) on training jobs, alternated
# eager, bulk, eager, bulk so that a drift of the machine's load hits both; prints each job's
# result line. Re-simulate a run with `python -m bench.e2e.resim OUT/update_<mode>_<round>`.
#   bench/e2e/update_ab.sh [OUT] (default /tmp/e2e-update-ab); ARGS="..." replaces the e2e options.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${1:-/tmp/e2e-update-ab}
args=${ARGS:---models resnet50,inception_v3 --modes training --policies random,tac --iters 4 --warmup 1 --no-sim}
for r in 0 1; do
  for u in eager bulk; do
    echo "== update=$u round $r"
    # shellcheck disable=SC2086
    TICTAC_PS_UPDATE=$u "$here/e2e" $args --out "$out/update_${u}_$r" | grep -E "calibrate|ok in|FAILED"
  done
done
