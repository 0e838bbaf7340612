#!/usr/bin/env bash
# TF parameter-server inference, stock grpc vs grpc+tictac (TIC) vs grpc+tictac without priorities
# (TICTAC_PRIORITY=0), on a VGG-like convnet at a ~= A (transfer time / compute time), the link
# shaped for every arm alike: the run happens in a network namespace of its own (unshare -rn)
# whose loopback gets a tc tbf qdisc at the rate that makes a ~= A.
#   bench/tf/grpc_vs_tictac.sh [A=1] [STEPS=20] [BATCH=16]
# Needs .venv-tf and a build with integration/tf/rendezvous (TICTAC_BUILD_DIR, default ./build);
# wraps itself in flock /tmp/tictac-bench.lock. Prints the calibration and one JSON line per run.
set -euo pipefail
A=${1:-1}; STEPS=${2:-20}; BATCH=${3:-16}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PY=${TICTAC_TF_PYTHON:-$ROOT/.venv-tf/bin/python}
export PYTHONPATH=$ROOT/python${PYTHONPATH:+:$PYTHONPATH} TICTAC_BUILD_DIR=${TICTAC_BUILD_DIR:-$ROOT/build}
export TF_CPP_MIN_LOG_LEVEL=3
INNER=$ROOT/bench/tf/tf_inference.py
exec 9>/tmp/tictac-bench.lock
flock 9
cal=$("$PY" "$INNER" --mode calibrate --batch "$BATCH" --steps 10 | tail -1)
echo "calibration: $cal"
rate=$("$PY" -c "import json,sys; c=json.loads(sys.argv[1]); a=float(sys.argv[2]); \
print(int(c['param_bytes'] * 8 / (c['compute_s'] * a)))" "$cal" "$A")
echo "a=$A -> link rate ${rate} bit/s (tbf on the namespace's loopback)"
unshare -rn bash -c "ip link set lo up && tc qdisc add dev lo root tbf rate ${rate}bit burst 512kb latency 100ms && \
  '$PY' '$INNER' --mode compare --batch '$BATCH' --steps '$STEPS'" | tail -1
