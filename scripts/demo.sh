#!/usr/bin/env bash
# The main job (`make demo`): end-to-end runs of real parameter-server jobs on an emulated
# cluster, random vs TAC (bench/e2e/e2e runs TIC, fifo and the baselines too), next to the
# simulator's prediction. Two tables:
#  1. compute real: VGG-16 at 32x32 images, batch 8 per worker, 1 server + 2 workers (one
#     network namespace per rank, tbf-shaped links), link rate calibrated from 1 Gbit/s towards
#     a = N/C = 1 (capped at 10 Gbit/s; where that is not enough, inference, the batch is raised
#     towards a = 1, at most 32 per worker), inference and training, 1 warm-up + 5 measured
#     iterations per job (the 6-minute budget; bench/e2e/e2e defaults to 2 + 10 for numbers);
#     the simulator's prediction uses inputs measured in each job.
#  2. compute emulated (bench/e2e/emulate.py: each worker replays inception_v3's profiled op
#     times, sleeping, while the real tensors cross the real transport): 1 server + 4 workers,
#     random vs TAC, at most 4 Gbit/s, 1 warm-up + 5 measured iterations, no simulator.
# Prints both tables and the paths of the plots; writes results/demo.csv (both, column
# `compute`), results/demo/real/ and results/demo/emulated/.
# Usage: scripts/demo.sh [build-folder]     Environment: DEMO_ARGS="..." adds/overrides flags.
# Without root / network namespaces the launcher falls back to loopback: the output then says
# that the links are UNSHAPED. Without the torch extension it runs the simulator-only comparison.
set -euo pipefail
build=${1:-build}
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=$(cd "$build" && pwd)
export TICTAC_BUILD_DIR=$build
py=.venv/bin/python
[ -x "$py" ] || py=python3

if ! PYTHONPATH=python "$py" -c "import tictac.torch" 2>/tmp/tictac-demo-import.$$; then
  echo "== the tictac torch extension is not importable ($(tail -n 1 /tmp/tictac-demo-import.$$)):"
  echo "   no end-to-end run; simulator-only comparison instead (docs/simulator.md) =="
  rm -f /tmp/tictac-demo-import.$$
  "$build/tictac" compare --graph bench/graphs/inception_v3_like.json --workers 4 --ps 2 \
    --iterations 20 --target-ratio 1.0 --seed 1
  exit 0
fi
rm -f /tmp/tictac-demo-import.$$

mkdir -p results
rm -f results/demo.csv
status=0
export PYTHONPATH="$PWD:$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
# shellcheck disable=SC2086
"$py" -m bench.e2e --compute real --models vgg16 --image-size 32 --batch 8 --workers 2 --ps 1 \
  --modes inference,training --policies random,tac --iters 5 --warmup 1 \
  --rate 1gbit --target-ratio 1.0 --min-rate 1gbit --max-rate 10gbit --max-batch 32 --build "$build" \
  --out results/demo/real ${DEMO_ARGS:-} || status=$?
# shellcheck disable=SC2086
"$py" -m bench.e2e --compute emulated --models inception_v3 --image-size 75 --batch 8 --workers 4 --ps 1 \
  --modes inference,training --policies random,tac --iters 5 --warmup 1 \
  --target-ratio 1.0 --max-rate 4gbit --no-sim --build "$build" \
  --out results/demo/emulated ${DEMO_ARGS:-} || status=$?
for part in real emulated; do
  f=results/demo/$part/results.csv
  [ -f "$f" ] || continue
  if [ -f results/demo.csv ]; then tail -n +2 "$f" >> results/demo.csv; else cp "$f" results/demo.csv; fi
done
[ -f results/demo.csv ] && echo "CSV (both tables, column compute): results/demo.csv"
exit $status
