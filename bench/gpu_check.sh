#!/usr/bin/env bash
# The GPU check for issue 5, for a few minutes on a lent GPU machine (< 5 min on 16 cores):
#  1. builds and runs the cuda suite (tests/cuda/run_on_gpu.sh: the fake-table unit tests, then
#     tests/cuda/gpu_test.cc on the real GPU);
#  2. runs the device-buffer transport tests against the scripted table (cuda_transport_test);
#  3. runs bench/cuda_staged_bw: device->device over TCP on 127.0.0.1 with host staging, against
#     a host->host baseline, checking the bytes;
#  4. runs tests/torch/cuda_check.py: 2-rank torch send/recv and allreduce of CUDA tensors over
#     the "tictac" backend (needs .venv with torch and the extension built in this build dir);
#  5. prints a summary.
# Safe on a machine without a GPU: every GPU step reports "SKIP: CUDA not viable: <reason>".
#
# Usage: bench/gpu_check.sh [build-dir]   (default build-gpu)
#        CUDA_BW_BYTES / CUDA_BW_ITERS override the bandwidth test's 64M x 16.
# Exit:  0 pass, 1 a check failed, 2 build failure, 77 no usable GPU (nothing failed).
set -u -o pipefail
cd "$(dirname "$0")/.." || exit 2
BUILD=${1:-build-gpu}
START=$(date +%s)
say() { echo "[gpu_check] $*"; }

tests/cuda/run_on_gpu.sh "$BUILD"
SUITE=$?
[ "$SUITE" = 2 ] && { say "RESULT: FAIL (build)"; exit 2; }

if ! ninja -C "$BUILD" -j "$(nproc 2>/dev/null || echo 4)" bench/cuda_staged_bw tests/unit/cuda/cuda_transport_test \
    >"$BUILD/gpu_check_build.log" 2>&1; then
  say "FAIL: build (see $BUILD/gpu_check_build.log)"
  grep -E "error|FAILED" "$BUILD/gpu_check_build.log" | head -20
  exit 2
fi

timeout 120 "$BUILD/tests/unit/cuda/cuda_transport_test" --gtest_brief=1 >"$BUILD/cuda_transport.log" 2>&1
TRC=$?
say "device buffers through the transport (fake table): $(grep -E '^\[  (PASSED|FAILED) ' "$BUILD/cuda_transport.log" | head -3 | tr '\n' ' ')"

BW_LOG="$BUILD/cuda_staged_bw.log"
timeout 180 "$BUILD/bench/cuda_staged_bw" --bytes "${CUDA_BW_BYTES:-64M}" --iters "${CUDA_BW_ITERS:-16}" >"$BW_LOG" 2>&1
BW=$?
sed 's/^/[gpu_check]   /' "$BW_LOG" | grep -vE "^\[gpu_check\]   \[tictac" | tail -5

TORCH_LOG="$BUILD/torch_cuda_check.log"
if [ -x .venv/bin/python ]; then
  PYTHONPATH="$PWD/python" TICTAC_BUILD_DIR="$PWD/$BUILD" timeout 300 .venv/bin/python tests/torch/cuda_check.py >"$TORCH_LOG" 2>&1
  TORCH_RC=$?
else
  echo "SKIP: no .venv/bin/python (make deps) for the torch CUDA check" >"$TORCH_LOG"
  TORCH_RC=77
fi
say "torch CUDA tensors over tictac: $(grep -E '^(PASS|FAIL|SKIP)' "$TORCH_LOG" | head -3 | tr '\n' ' ')"

say "summary: cuda suite rc=$SUITE, transport tests rc=$TRC, staged bandwidth rc=$BW, torch rc=$TORCH_RC, $(( $(date +%s) - START )) s"
if [ "$SUITE" = 1 ] || [ "$TRC" != 0 ] || { [ "$BW" != 0 ] && [ "$BW" != 77 ]; } || \
   { [ "$TORCH_RC" != 0 ] && [ "$TORCH_RC" != 77 ]; }; then
  say "RESULT: FAIL"
  exit 1
fi
if [ "$SUITE" = 77 ] || [ "$BW" = 77 ] || [ "$TORCH_RC" = 77 ]; then
  say "RESULT: SKIP (no usable GPU: $(grep -m1 '^SKIP' "$BW_LOG"))"
  exit 77
fi
say "RESULT: PASS"
exit 0
