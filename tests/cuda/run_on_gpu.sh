#!/usr/bin/env bash
# Builds what the cuda suite needs and runs it on a machine with an NVIDIA GPU, then prints a
# compact summary. Meant for a few minutes on a lent GPU machine; safe on a GPU-less one (the
# tests report "SKIP: CUDA not viable: <reason>" and the script exits 77).
#
# Usage: tests/cuda/run_on_gpu.sh [build-dir]      (default: build-gpu, in the repository root)
# Exit:  0 all passed, 1 a test failed, 2 could not build, 77 no usable GPU.
set -u -o pipefail
cd "$(dirname "$0")/../.." || exit 2
BUILD=${1:-build-gpu}
JOBS=$(nproc 2>/dev/null || echo 4)
START=$(date +%s)
say() { echo "[run_on_gpu] $*"; }

# Meson and ninja: use what is there, else try apt-get, else pip (both may be offline).
if ! command -v meson >/dev/null || ! command -v ninja >/dev/null; then
  say "meson/ninja missing; trying apt-get, then pip"
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    timeout 120 apt-get install -y -q meson ninja-build >/dev/null 2>&1 ||
      { timeout 60 apt-get update -q >/dev/null 2>&1 && timeout 120 apt-get install -y -q meson ninja-build >/dev/null 2>&1; }
  fi
  if ! command -v meson >/dev/null || ! command -v ninja >/dev/null; then
    timeout 120 python3 -m pip install -q meson ninja >/dev/null 2>&1 ||
      timeout 120 python3 -m pip install -q --break-system-packages meson ninja >/dev/null 2>&1
    export PATH="$HOME/.local/bin:$PATH"
  fi
  command -v meson >/dev/null && command -v ninja >/dev/null || { say "FAIL: no meson/ninja available"; exit 2; }
fi

if command -v nvidia-smi >/dev/null; then
  say "GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)"
else
  say "GPU: nvidia-smi not found"
fi

if [ ! -f "$BUILD/build.ninja" ]; then
  # Only what the cuda suite needs; the optional framework/backend parts stay off.
  meson setup "$BUILD" -Dcuda=enabled -Ducx=disabled -Dverbs=disabled -Dtorch=disabled \
    -Dtensorflow=disabled -Dfuzz=disabled >"${TMPDIR:-/tmp}/tictac_gpu_setup.log" 2>&1 ||
    { say "FAIL: meson setup"; tail -20 "${TMPDIR:-/tmp}/tictac_gpu_setup.log"; exit 2; }
fi
if ! ninja -C "$BUILD" -j "$JOBS" tests/cuda/cuda_gpu_test tests/cuda/cuda_gpu_transport_test tests/unit/cuda/cuda_layer_test >"$BUILD/cuda_build.log" 2>&1; then
  say "FAIL: build (see $BUILD/cuda_build.log)"
  grep -E "error|FAILED" "$BUILD/cuda_build.log" | head -20
  exit 2
fi
say "built in $(( $(date +%s) - START )) s"

# The fake-table unit tests first (seconds), then the real-GPU suite.
UNIT=$("$BUILD/tests/unit/cuda/cuda_layer_test" --gtest_brief=1 2>&1 | tail -1)
say "unit (fake table): $UNIT"
LOG="$BUILD/cuda_gpu.log"
timeout 240 "$BUILD/tests/cuda/cuda_gpu_test" --gtest_brief=1 >"$LOG" 2>&1
RC=$?
# Device buffers through the transport on the GPU; a failure here fails the suite.
TLOG="$BUILD/cuda_gpu_transport.log"
timeout 120 "$BUILD/tests/cuda/cuda_gpu_transport_test" --gtest_brief=1 >"$TLOG" 2>&1
TRC=$?
grep -E '^\[  (FAILED|PASSED) \]|Failure' "$TLOG" | head -10 | sed 's/^/[run_on_gpu]   transport: /'
if [ "$RC" = 0 ] && [ "$TRC" != 0 ]; then RC=$TRC; LOG="$TLOG"; fi
say "device: $(grep -m1 -E '^(CUDA viable|SKIP)' "$LOG")"
grep -m1 '^GPUDirect' "$LOG" | sed 's/^/[run_on_gpu] /'
grep -E '^\[  (FAILED|SKIPPED) \]|Failure|error:' "$LOG" | head -30 | sed 's/^/[run_on_gpu]   /'
grep -E '^\[==========\]|^\[  PASSED  \]' "$LOG" | sed 's/^/[run_on_gpu] /'
case $RC in
  0) say "RESULT: PASS (cuda suite) in $(( $(date +%s) - START )) s"; exit 0 ;;
  77) say "RESULT: SKIP (no usable GPU)"; exit 77 ;;
  124) say "RESULT: FAIL (timed out; full log $LOG)"; exit 1 ;;
  *) say "RESULT: FAIL rc=$RC (full log $LOG)"; exit 1 ;;
esac
