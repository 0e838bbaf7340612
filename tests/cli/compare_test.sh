#!/usr/bin/env bash
# `tictac compare`: one row per policy with the expected columns; speedup over random is 1 for
# random; optimal runs on small graphs and shows n/a plus a note on large ones (exit 0);
# --format json; bad flags exit 2. If bench/graphs/inception_v3_like.json exists, the demo
# setting runs on it. Usage: compare_test.sh path/to/tictac source-root
set -euo pipefail
tictac=${1:?usage: compare_test.sh path/to/tictac source-root}
root=${2:?usage: compare_test.sh path/to/tictac source-root}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# make_chain N FILE: a chain of N layers, 1 MB parameters, 1 ms compute each.
make_chain() {
  python3 - "$1" "$2" <<'PY'
import json, sys
n, path = int(sys.argv[1]), sys.argv[2]
ops = []
for i in range(n):
    ops.append({"name": f"w{i}", "kind": "recv", "bytes": 1000000})
    ops.append({"name": f"l{i}", "kind": "compute", "time": 0.001,
                "inputs": [f"w{i}"] + ([f"l{i-1}"] if i else [])})
json.dump({"format": "tictac-graph/1", "ops": ops}, open(path, "w"))
PY
}
make_chain 6 "$tmp/small.json"
make_chain 20 "$tmp/large.json"

policies=$(python3 -c 'print(" ".join(["random","fifo","layer","tic","tac","optimal"]))')

"$tictac" compare --graph "$tmp/small.json" --workers 2 --ps 2 --iterations 5 --target-ratio 1 --seed 3 \
  --format json >"$tmp/small.json.out"
python3 - "$tmp/small.json.out" "$policies" <<'PY' || fail "small compare: $(cat "$tmp/small.json.out")"
import json, sys
d = json.load(open(sys.argv[1]))
want = sys.argv[2].split()
rows = d["rows"]
assert [r["policy"] for r in rows] == want, [r["policy"] for r in rows]
by = {r["policy"]: r for r in rows}
assert all(r["ok"] for r in rows), rows
assert by["random"]["speedup_vs_random"] == 1
assert by["optimal"]["distance_to_optimal"] == 1
for r in rows:
    assert r["median_s"] > 0 and r["p95_s"] >= r["median_s"]
    assert r["spread_s"] >= 0 and r["max_over_mean"] >= 1
# On a chain, layer order is optimal for one worker and tac finds it.
assert abs(by["tac"]["median_s"] - by["layer"]["median_s"]) < 1e-12, (by["tac"], by["layer"])
assert by["tac"]["speedup_vs_random"] > 1
assert abs(d["serial_ratio"] - 1) < 1e-9
PY

# Large graph: optimal refuses; the table shows n/a and a note, exit 0.
"$tictac" compare --graph "$tmp/large.json" --workers 4 --ps 2 --iterations 3 --target-ratio 1 >"$tmp/large.txt" \
  || fail "compare on a 20-recv graph failed"
for col in policy "median ms" "p95 ms" " E " speedup "spread ms" "max/mean" "vs optimal"; do
  grep -q -- "$col" "$tmp/large.txt" || fail "table lacks '$col': $(cat "$tmp/large.txt")"
done
grep -Eq '^optimal +n/a' "$tmp/large.txt" || fail "optimal row is not n/a: $(cat "$tmp/large.txt")"
grep -q '^note: optimal' "$tmp/large.txt" || fail "no note for optimal"
grep -Eq '^tac +[0-9]' "$tmp/large.txt" || fail "tac row missing"
"$tictac" compare --graph "$tmp/large.json" --iterations 2 --format json >"$tmp/large.out"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); r={x["policy"]:x for x in d["rows"]}; assert not r["optimal"]["ok"] and r["optimal"]["note"]; assert r["tac"]["distance_to_optimal"] is None' "$tmp/large.out" \
  || fail "json for large graph: $(cat "$tmp/large.out")"

# Bad input: exit 2 with a message.
expect_bad() {
  local pattern=${*: -1}
  local rc=0
  "$tictac" compare "${@:1:$#-1}" >"$tmp/out" 2>"$tmp/err" || rc=$?
  [[ $rc == 2 ]] || fail "compare ${*:1:$#-1} exited $rc, want 2; stderr: $(cat "$tmp/err")"
  grep -q -- "$pattern" "$tmp/err" || fail "compare: stderr lacks '$pattern': $(cat "$tmp/err")"
}
expect_bad --workers 2 "--graph G.json is required"
expect_bad --graph "$tmp/small.json" --policy tac "unknown flag --policy"
expect_bad --graph "$tmp/small.json" --trace "$tmp/t.json" "--trace is for"
expect_bad --graph "$tmp/small.json" --iterations 0 "iterations must be in"
expect_bad --graph "$tmp/nope.json" "cannot read graph file"

# The demo's graph and setting, when the bundled graph is there.
demo_graph="$root/bench/graphs/inception_v3_like.json"
if [[ -f $demo_graph ]]; then
  "$tictac" compare --graph "$demo_graph" --workers 4 --ps 2 --iterations 3 --target-ratio 1.0 --seed 1 \
    >"$tmp/demo.txt" || fail "compare on $demo_graph failed"
  grep -Eq '^tac +[0-9]' "$tmp/demo.txt" || fail "demo table lacks tac: $(cat "$tmp/demo.txt")"
fi
echo "compare_test: ok"
