#!/usr/bin/env bash
# `tictac order`: every policy prints one priority per recv (file order, names escaped); --out
# writes the same document; bad input exits 2 with a diagnostic; an unwritable --out exits 1.
# Usage: order_test.sh path/to/tictac
set -euo pipefail
tictac=${1:?usage: order_test.sh path/to/tictac}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# expect_exit CODE ARGS...: runs tictac with ARGS, checks the exit code and, on failure, that
# stderr names the command and contains $want_msg when set.
want_msg=""
expect_exit() {
  local want=$1; shift
  local rc=0
  "$tictac" "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
  [[ $rc == "$want" ]] || fail "tictac $* exited $rc, want $want; stderr: $(cat "$tmp/err")"
  if [[ $want != 0 ]]; then
    grep -q "tictac order: " "$tmp/err" || fail "tictac $*: no diagnostic on stderr"
    if [[ -n $want_msg ]]; then
      grep -qF -- "$want_msg" "$tmp/err" || fail "tictac $*: stderr lacks '$want_msg': $(cat "$tmp/err")"
    fi
  fi
  want_msg=""
}

# check_order FILE POLICY EXPECTED_JSON_OR_EMPTY: the document's shape, and exact priorities
# when given.
check_order() {
  python3 - "$1" "$2" "$3" "$graph" <<'PY'
import json, sys
path, policy, expected, graph_path = sys.argv[1:5]
with open(path) as f:
    doc = json.load(f)
with open(graph_path) as f:
    graph = json.load(f)
recvs = [op["name"] for op in graph["ops"] if op["kind"] == "recv"]
assert set(doc) == {"policy", "priorities"}, doc.keys()
assert doc["policy"] == policy, doc["policy"]
pri = doc["priorities"]
assert list(pri) == recvs, (list(pri), recvs)  # one entry per recv, in file order
assert all(isinstance(v, int) and v >= 0 for v in pri.values()), pri
if expected:
    assert pri == json.loads(expected), (pri, expected)
PY
}

# A/B example (SCHEDULING.md 5.4) plus a recv whose name needs escaping.
graph=$tmp/ab.json
cat >"$graph" <<'JSON'
{"format": "tictac-graph/1", "ops": [
  {"name": "B", "kind": "recv", "time": 4},
  {"name": "A", "kind": "recv", "time": 2},
  {"name": "q\"uote\\ \u00e9", "kind": "recv", "time": 1},
  {"name": "b", "kind": "compute", "inputs": ["B"], "time": 1},
  {"name": "a", "kind": "compute", "inputs": ["A"], "time": 5},
  {"name": "j", "kind": "compute", "inputs": ["q\"uote\\ \u00e9", "a", "b"], "time": 1}
]}
JSON
for p in random fifo layer tic tac optimal; do
  expect_exit 0 order --graph "$graph" --policy "$p"
  check_order "$tmp/out" "$p" ""
done
expect_exit 0 order --graph "$graph" --policy fifo
check_order "$tmp/out" fifo '{"B": 0, "A": 1, "q\"uote\\ \u00e9": 2}'
expect_exit 0 order --graph "$graph" --policy tac
check_order "$tmp/out" tac '{"B": 1, "A": 0, "q\"uote\\ \u00e9": 2}'
expect_exit 0 order --graph "$graph" --policy optimal
check_order "$tmp/out" optimal '{"B": 1, "A": 0, "q\"uote\\ \u00e9": 2}'

# Same seed, same order; --out writes the same document and nothing to stdout.
expect_exit 0 order --graph "$graph" --policy random --seed 5
cp "$tmp/out" "$tmp/r1.json"
expect_exit 0 order --graph="$graph" --policy=random --seed=5 --out "$tmp/r2.json"
cmp -s "$tmp/r1.json" "$tmp/r2.json" || fail "--out differs from stdout for the same seed"
[[ ! -s "$tmp/out" ]] || fail "--out also wrote to stdout"
grep -q "wrote 3 priorities" "$tmp/err" || fail "no summary for --out"

# Bytes-only recvs use --bandwidth.
cat >"$tmp/bytes.json" <<'JSON'
{"format": "tictac-graph/1", "ops": [
  {"name": "w", "kind": "recv", "bytes": 1000},
  {"name": "c", "kind": "compute", "inputs": ["w"], "time": 0.001}
]}
JSON
expect_exit 0 order --graph "$tmp/bytes.json" --policy tac --bandwidth 1e6
graph=$tmp/bytes.json check_order "$tmp/out" tac '{"w": 0}'

# Bad input: exit 2 with the cause.
want_msg="--graph G.json is required"; expect_exit 2 order --policy tac
want_msg="unknown --policy 'nope'; one of random, fifo, layer, tic, tac, optimal"
expect_exit 2 order --graph "$graph" --policy nope
want_msg="--policy is required"; expect_exit 2 order --graph "$graph"
want_msg="cannot read graph file"; expect_exit 2 order --graph "$tmp/missing.json" --policy tac
echo '{"format": "tictac-graph/1", "ops": [' >"$tmp/broken.json"
want_msg="broken.json"; expect_exit 2 order --graph "$tmp/broken.json" --policy tac
echo '{"format": "tictac-graph/1", "ops": [{"name": "c", "kind": "compute", "inputs": ["x"], "time": 1}]}' >"$tmp/unknown_input.json"
want_msg="op 'c'"; expect_exit 2 order --graph "$tmp/unknown_input.json" --policy fifo
want_msg="--bandwidth must be a positive"; expect_exit 2 order --graph "$graph" --policy tac --bandwidth 0
want_msg="--bandwidth"; expect_exit 2 order --graph "$graph" --policy tac --bandwidth fast
want_msg="--seed must be >= 0"; expect_exit 2 order --graph "$graph" --policy random --seed -1
want_msg="unknown flag --polcy"; expect_exit 2 order --graph "$graph" --polcy tac
"$tictac" generate --kind chain --size 13 --out "$tmp/chain13.json" 2>/dev/null
want_msg="optimal is exact and limited to 12 recvs; this graph has 13; use tac"
expect_exit 2 order --graph "$tmp/chain13.json" --policy optimal
expect_exit 0 order --graph "$tmp/chain13.json" --policy tic
graph=$tmp/chain13.json check_order "$tmp/out" tic \
  '{"w1": 0, "w2": 0, "w3": 2, "w4": 3, "w5": 4, "w6": 5, "w7": 6, "w8": 7, "w9": 8, "w10": 9, "w11": 10, "w12": 11, "w13": 12}'

# An unwritable --out is a run failure (1), not bad input.
want_msg="--out"; expect_exit 1 order --graph "$graph" --policy tac --out "$tmp/no/such/dir/o.json"
echo "order_test: ok"
