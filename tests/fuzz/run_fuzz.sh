#!/usr/bin/env bash
# Builds one libFuzzer target with clang++ (-fsanitize=fuzzer,address,undefined) and runs it for
# a bounded time. Used by `meson test --suite fuzz` (the main build uses g++, which has no
# libFuzzer, so the target is compiled here rather than by Meson).
#
#   run_fuzz.sh NAME SOURCE_ROOT WORK_DIR SECONDS -- FUZZ_SOURCE [LIBRARY_SOURCES...] [-lLIB...]
#
# Sources are relative to SOURCE_ROOT. The binary is rebuilt only when a source or header under
# SOURCE_ROOT is newer than it. Crashes are written to WORK_DIR/artifacts/ and fail the test.
# Exit 77 (skipped) with a message when clang++ or its libFuzzer runtime is missing.
set -euo pipefail

if [ $# -lt 6 ] || [ "$5" != "--" ]; then
  echo "usage: $0 NAME SOURCE_ROOT WORK_DIR SECONDS -- FUZZ_SOURCE [SOURCES...] [-lLIB...]" >&2
  exit 2
fi
name=$1 root=$2 work=$3 seconds=$4
shift 5

clangxx=${CLANGXX:-clang++}
if ! command -v "$clangxx" >/dev/null 2>&1; then
  echo "SKIP fuzz-$name: $clangxx not found (install clang to run the fuzz targets)"
  exit 77
fi
mkdir -p "$work/corpus" "$work/artifacts"
probe_dir=$(mktemp -d)
trap 'rm -rf "$probe_dir"' EXIT
printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' \
  >"$probe_dir/probe.cc"
if ! "$clangxx" -fsanitize=fuzzer "$probe_dir/probe.cc" -o "$probe_dir/probe" >"$probe_dir/log" 2>&1; then
  echo "SKIP fuzz-$name: $clangxx cannot link -fsanitize=fuzzer (libFuzzer runtime missing):"
  sed 's/^/  /' "$probe_dir/log" | head -5
  exit 77
fi

sources=() libs=()
for a in "$@"; do
  case $a in
    -l*) libs+=("$a") ;;
    *) sources+=("$root/$a") ;;
  esac
done
bin="$work/$name-fuzzer"
newer=$(find "$root/common" "$root/transport" "$root/tests/fuzz" -newer "$bin" \
          \( -name '*.cc' -o -name '*.h' \) -print -quit 2>/dev/null || echo rebuild)
if [ ! -x "$bin" ] || [ -n "$newer" ]; then
  echo "fuzz-$name: building with $($clangxx --version | head -1)"
  "$clangxx" -std=c++20 -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined \
    -fno-sanitize-recover=undefined -I"$root" "${sources[@]}" "${libs[@]}" -o "$bin.tmp"
  mv "$bin.tmp" "$bin"
fi

echo "fuzz-$name: running for ${seconds}s (corpus $work/corpus)"
# -rss_limit_mb bounds memory; crashes land in artifacts/ and make libFuzzer exit non-zero.
exec "$bin" -max_total_time="$seconds" -rss_limit_mb=1024 -print_final_stats=1 \
  -artifact_prefix="$work/artifacts/" "$work/corpus"
