#!/usr/bin/env bash
# `tictac simulate`: exact makespans on the design's A/B example (SCHEDULING.md §5) through the
# JSON output, the table's columns, --target-ratio calibration, --trace output, determinism for
# a seed, and exit code 2 with a message for bad flags and bad graphs.
# Usage: simulate_test.sh path/to/tictac
set -euo pipefail
tictac=${1:?usage: simulate_test.sh path/to/tictac}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# A (2 s) unlocks 5 s of compute, B (4 s) unlocks 1 s. At 8 bit/s bytes = seconds.
cat >"$tmp/ab.json" <<'JSON'
{"format": "tictac-graph/1", "ops": [
  {"name": "B", "kind": "recv", "bytes": 4},
  {"name": "A", "kind": "recv", "bytes": 2},
  {"name": "opA", "kind": "compute", "inputs": ["A"], "time": 5},
  {"name": "opB", "kind": "compute", "inputs": ["B"], "time": 1}
]}
JSON

# field FILE EXPR: evaluates a Python expression on the parsed JSON document `d`.
field() {
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}

# fifo sends B first (file order): 11 s. tac sends A first: 8 s.
"$tictac" simulate --graph "$tmp/ab.json" --policy fifo --bandwidth 8 --iterations 2 --format json >"$tmp/fifo.json"
[[ $(field "$tmp/fifo.json" 'd["iteration_time_s"]["median"]') == 11 ]] || fail "fifo makespan: $(cat "$tmp/fifo.json")"
"$tictac" simulate --graph "$tmp/ab.json" --policy tac --bandwidth 8 --format json >"$tmp/tac.json"
[[ $(field "$tmp/tac.json" 'd["iteration_time_s"]["median"]') == 8 ]] || fail "tac makespan: $(cat "$tmp/tac.json")"
[[ $(field "$tmp/tac.json" 'd["workers"][0]["m_s"]') == 8 ]] || fail "tac m"
[[ $(field "$tmp/tac.json" 'round(d["workers"][0]["E"], 6)') == 0.666667 ]] || fail "tac E: (12-8)/(12-6)"
[[ $(field "$tmp/tac.json" 'float(d["workers"][0]["S"])') == 1.0 ]] || fail "tac S"

# The table names every metric.
"$tictac" simulate --graph "$tmp/ab.json" --policy tac --bandwidth 8 >"$tmp/table.txt"
for col in "N ms" "C ms" "U ms" "L ms" "m ms" " E " " S " "iter ms" "straggler" "max/mean"; do
  grep -q -- "$col" "$tmp/table.txt" || fail "table lacks '$col': $(cat "$tmp/table.txt")"
done

# --target-ratio: reports the target and the chosen bandwidth; serial ratio is the target.
"$tictac" simulate --graph "$tmp/ab.json" --policy tac --target-ratio 0.5 --workers 2 --ps 2 \
  --format json >"$tmp/cal.json"
[[ $(field "$tmp/cal.json" 'round(d["calibration"]["serial_ratio"], 9)') == 0.5 ]] || fail "calibration: $(cat "$tmp/cal.json")"
[[ $(field "$tmp/cal.json" 'd["calibration"]["target_ratio"]') == 0.5 ]] || fail "target not reported"
[[ $(field "$tmp/cal.json" 'len(d["workers"])') == 2 ]] || fail "two workers expected"
"$tictac" simulate --graph "$tmp/ab.json" --policy tac --target-ratio 1 >"$tmp/cal.txt"
grep -q "calibrated from" "$tmp/cal.txt" || fail "table does not report the calibration"

# Training with jitter, chunks, window, latency and a trace; reproducible for a seed.
args=(--graph "$tmp/ab.json" --policy random --bandwidth 8 --mode training --workers 3 --ps 2 --jitter 0.3
      --seed 9 --iterations 4 --chunk 1 --window 2 --latency 10ms --update-time-per-byte 0.01 --format json)
"$tictac" simulate "${args[@]}" --trace "$tmp/trace.json" >"$tmp/r1.json"
"$tictac" simulate "${args[@]}" >"$tmp/r2.json"
cmp -s "$tmp/r1.json" "$tmp/r2.json" || fail "same seed gave different results"
python3 - "$tmp/trace.json" <<'PY' || fail "bad trace"
import json, sys
d = json.load(open(sys.argv[1]))
xs = [e for e in d["traceEvents"] if e["ph"] == "X"]
assert xs, "no complete events"
assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in xs)
names = {e["args"]["name"] for e in d["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"}
assert {"worker 0", "worker 2", "ps 0", "ps 1"} <= names, names
assert any(e["name"].endswith("(update)") for e in xs)
assert any(e["name"].endswith("(backward)") for e in xs)
PY

# expect_bad ARGS...: exit code 2 and a diagnostic naming the problem (grep pattern last).
expect_bad() {
  local pattern=${*: -1}
  local rc=0
  "$tictac" simulate "${@:1:$#-1}" >"$tmp/out" 2>"$tmp/err" || rc=$?
  [[ $rc == 2 ]] || fail "simulate ${*:1:$#-1} exited $rc, want 2; stderr: $(cat "$tmp/err")"
  grep -q -- "$pattern" "$tmp/err" || fail "simulate ${*:1:$#-1}: stderr lacks '$pattern': $(cat "$tmp/err")"
}
g=(--graph "$tmp/ab.json")
expect_bad --policy tac "--graph G.json is required"
expect_bad "${g[@]}" "--policy is required"
expect_bad "${g[@]}" --policy nope "unknown --policy 'nope'"
expect_bad "${g[@]}" --policy tac --bogus 1 "unknown flag --bogus"
expect_bad "${g[@]}" --policy tac --workers 0 "workers must be in"
expect_bad "${g[@]}" --policy tac --jitter 1.5 "jitter must be in"
expect_bad "${g[@]}" --policy tac --bandwidth fast "expected a bandwidth"
expect_bad "${g[@]}" --policy tac --ps 2 --ps-up 1G,2G,3G "lists 3 bandwidths"
expect_bad "${g[@]}" --policy tac --mode train "mode must be inference or training"
expect_bad "${g[@]}" --policy tac --format xml "format must be table or json"
expect_bad "${g[@]}" --policy tac --latency soon "expected seconds"
expect_bad "${g[@]}" --policy tac --target-ratio 0 "target-ratio must be > 0"
expect_bad "${g[@]}" --policy tac --trace "$tmp/no/such/dir/t.json" "cannot open trace file"
expect_bad --graph "$tmp/missing.json" --policy tac "cannot read graph file"
echo '{"format": "tictac-graph/1", "ops": [{"name": "x", "kind": "recv"}]}' >"$tmp/bad.json"
expect_bad --graph "$tmp/bad.json" --policy tac "needs 'bytes' or 'time'"
cat >"$tmp/nocompute.json" <<'JSON'
{"format": "tictac-graph/1", "ops": [{"name": "x", "kind": "recv", "bytes": 8},
  {"name": "y", "kind": "compute", "inputs": ["x"], "time": 0}]}
JSON
expect_bad --graph "$tmp/nocompute.json" --policy fifo --target-ratio 1 "compute ops take no time"
echo "simulate_test: ok"
