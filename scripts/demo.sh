#!/usr/bin/env bash
# The main job until the end-to-end benchmark lands: compare every scheduling policy on a
# bundled model graph (an Inception-like network) at a comm/compute ratio near 1 and print the
# table. Usage: scripts/demo.sh [build-folder]
set -euo pipefail
build=${1:-build}
graph=bench/graphs/inception_v3_like.json
echo "== TicTac policy comparison on $graph (see docs/simulator.md) =="
"$build/tictac" compare --graph "$graph" --workers 4 --ps 2 --iterations 20 --target-ratio 1.0 --seed 1
