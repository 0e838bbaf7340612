#!/usr/bin/env bash
# The priority test over a link shaped to 1 Gbit/s: `tictac perftest --test priority` with the
# server in one network namespace and the client in another, joined by a veth pair with tc tbf on
# both ends (bench/netns/shaped_link.sh creates and removes them). The client queues 256 MiB of
# low-priority data, then submits one 64 KiB high-priority message; perftest measures its delivery
# latency with priority enforcement and with plain FIFO. Prints, per window setting: both
# latencies, their ratio (target >= 50x) and the priority latency in chunk transmission times
# (target <= 3), the chunk time taken both from the measured bulk rate and from the nominal rate.
#
#   bench/priority_shaped.sh [BUILD_DIR]        (default: build)
#
# Environment: RATE (1gbit), BULK (256M), SIZE (64K), CHUNK (1M), WINDOWS ("1 4": one run per
# value of TICTAC_WINDOW; 1 is the one-chunk window, 4 the transport's default), REPEATS (3
# priority/FIFO pairs per window, medians reported), PORT (18515, inside the namespace).
# Without network namespaces (not root, no iproute2/tc) it says so and falls back to tcp on
# 127.0.0.1 (`perftest --local`): the transport has no in-process rate limit, so that fallback
# measures an UNSHAPED link and its figures are not comparable with the targets.
# Exit codes: 0 ran (whatever the figures), 1 a run failed, 2 usage.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
[ $# -le 1 ] || { sed -n '2,20p' "$0" >&2; exit 2; }
tictac=$(cd "$build" 2>/dev/null && pwd)/tictac
rate=${RATE:-1gbit}
bulk=${BULK:-256M}
size=${SIZE:-64K}
chunk=${CHUNK:-1M}
windows=${WINDOWS:-1 4}
repeats=${REPEATS:-3}
port=${PORT:-18515}
[ -x "$tictac" ] || { echo "priority_shaped: $build/tictac not found (build first: ninja -C $build)" >&2; exit 2; }
command -v python3 >/dev/null 2>&1 || { echo "priority_shaped: python3 not found" >&2; exit 2; }

summarize() {  # summarize LABEL NOMINAL_BYTES_PER_S OUTPUT  (OUTPUT holds perftest's JSON line)
  python3 - "$1" "$2" "$3" <<'EOF'
import json, sys
label, nominal, output = sys.argv[1], float(sys.argv[2]), sys.argv[3]
lines = [l for l in output.splitlines() if l.startswith("{")]
if not lines:
    sys.exit("priority_shaped: perftest printed no JSON result")
d = json.loads(lines[-1])
on, off, ratio = d["hi_lat_ms_priority"], d["hi_lat_ms_fifo"], d["fifo_over_priority"]
chunks = d["hi_lat_chunks_priority"]
verdict = lambda ok: "met" if ok else "NOT met"
print(f"{label}: chunk {d['chunk_bytes']} B, window {d['window']}, bulk {d['bulk']} B in "
      f"{d['bulk_messages']} messages, {d['iters']} priority/FIFO pair(s), medians")
print(f"  hi_lat_ms_priority {on:.3f}   hi_lat_ms_fifo {off:.3f}   ratio {ratio:.1f}x "
      f"(target >= 50: {verdict(ratio >= 50)})")
print(f"  bulk rate {d['bulk_gbytes_per_s']:.4f} GB/s -> chunk time {d['chunk_ms']:.3f} ms; priority latency "
      f"= {chunks:.2f} chunk times (target <= 3: {verdict(chunks <= 3)})")
if nominal > 0:
    nominal_ms = d["chunk_bytes"] / nominal * 1e3
    print(f"  at the nominal rate a chunk takes {nominal_ms:.3f} ms -> {on / nominal_ms:.2f} chunk times")
print(f"  bulk messages landed before the high-priority one: {d['bulk_before_hi_priority']} (priority), "
      f"{d['bulk_before_hi_fifo']} (FIFO); clock: {d['hi_lat_clock']}")
print("  json " + lines[-1])
EOF
}

nominal_bytes_per_s() {
  python3 -c '
import re, sys
m = re.fullmatch(r"(\d+)(bit|kbit|mbit|gbit)", sys.argv[1])
print(int(m.group(1)) * {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9}[m.group(2)] / 8 if m else 0)
' "$1"
}

common=(--backend tcp --chunk "$chunk")
client_args=(--test priority --bulk "$bulk" --size "$size" --iters "$repeats" --format json)
nominal=$(nominal_bytes_per_s "$rate")
echo "priority_shaped: rate $rate, bulk $bulk, high-priority message $size, chunk $chunk, windows: $windows"

fallback=0
for w in $windows; do
  if [ "$fallback" = 0 ]; then
    rc=0
    out=$(bash "$here/netns/shaped_link.sh" run "$rate" -- \
      "$tictac" perftest "${common[@]}" --window "$w" --server --listen "10.231.0.1:$port" -- \
      "$tictac" perftest "${common[@]}" --window "$w" --client --connect "10.231.0.1:$port" "${client_args[@]}") || rc=$?
    if [ "$rc" = 77 ]; then
      echo "priority_shaped: network namespaces or tc are not available here (see above);" \
        "FALLING BACK to tcp on 127.0.0.1: an UNSHAPED link (the transport has no in-process rate limit)," \
        "so these figures are not comparable with the 1 Gbit/s targets" >&2
      fallback=1
    elif [ "$rc" != 0 ]; then
      echo "priority_shaped: the shaped run failed (exit $rc):" >&2
      echo "$out" >&2
      exit 1
    else
      summarize "shaped $rate, window $w" "$nominal" "$out"
      continue
    fi
  fi
  out=$("$tictac" perftest "${common[@]}" --window "$w" --local "${client_args[@]}") || exit 1
  summarize "UNSHAPED fallback (127.0.0.1), window $w" 0 "$out"
done
