#!/usr/bin/env bash
# `tictac generate`: every kind writes a loadable tictac-graph/1 document; bad flags exit 2;
# an unwritable --out exits 1. Usage: generate_test.sh path/to/tictac
set -euo pipefail
tictac=${1:?usage: generate_test.sh path/to/tictac}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# check_json FILE OPS RECVS: parses as JSON with the format tag and the expected counts (-1: any).
check_json() {
  python3 - "$1" "$2" "$3" <<'PY'
import json, sys
path, ops, recvs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(path) as f:
    doc = json.load(f)
assert doc["format"] == "tictac-graph/1", doc.get("format")
got_ops = len(doc["ops"])
got_recvs = sum(1 for op in doc["ops"] if op["kind"] == "recv")
assert ops < 0 or got_ops == ops, (path, got_ops)
assert recvs < 0 or got_recvs == recvs, (path, got_recvs)
assert got_recvs > 0, path
names = {op["name"] for op in doc["ops"]}
assert len(names) == got_ops, "duplicate names"
for op in doc["ops"]:
    for i in op.get("inputs", []):
        assert i in names, (op["name"], i)
PY
}

# expect_exit CODE ARGS...: runs tictac with ARGS and checks the exit code and a message.
expect_exit() {
  local want=$1; shift
  local rc=0
  "$tictac" "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
  [[ $rc == "$want" ]] || fail "tictac $* exited $rc, want $want; stderr: $(cat "$tmp/err")"
  if [[ $want != 0 ]]; then
    grep -q "tictac generate: " "$tmp/err" || fail "tictac $*: no diagnostic on stderr"
  fi
}

expect_exit 0 generate --kind seq-32
check_json "$tmp/out" 64 32
expect_exit 0 generate --kind par-32 --out "$tmp/par.json"
check_json "$tmp/par.json" 65 32
grep -q "wrote 65 ops (32 recvs)" "$tmp/err" || fail "no summary for --out"
[[ ! -s "$tmp/out" ]] || fail "--out also wrote to stdout"
expect_exit 0 generate --kind chain --size 5
check_json "$tmp/out" 10 5
expect_exit 0 generate --kind inception --size 3 --seed 4
check_json "$tmp/out" -1 -1
expect_exit 0 generate --kind random --size 200 --recvs 50 --seed 3 --out "$tmp/r1.json"
check_json "$tmp/r1.json" 200 50
expect_exit 0 generate --kind random --size=200 --recvs=50 --seed=3 --out "$tmp/r2.json"
cmp -s "$tmp/r1.json" "$tmp/r2.json" || fail "random graph differs for the same seed"
expect_exit 0 generate --kind random --size 200 --recvs 50 --seed 4 --out "$tmp/r3.json"
! cmp -s "$tmp/r1.json" "$tmp/r3.json" || fail "random graph identical for another seed"
expect_exit 0 generate --kind layered --size 5000 --recvs 100
check_json "$tmp/out" 5000 100

# The generated files load through the project's own loader (tictac order reads them).
for f in par.json r1.json; do
  "$tictac" order --graph "$tmp/$f" --policy tic >/dev/null 2>"$tmp/err" ||
    fail "tictac order could not load generated $f: $(cat "$tmp/err")"
done
# ... and a damaged one is rejected with its position (exit 2).
sed 's/"kind": "recv"/"kind": "recieve"/' "$tmp/par.json" >"$tmp/bad.json"
rc=0
"$tictac" order --graph "$tmp/bad.json" --policy tic >/dev/null 2>"$tmp/err" || rc=$?
[[ $rc == 2 ]] || fail "order on a damaged graph exited $rc, want 2"
grep -q "op 'w1' (line 4, column 5): field 'kind'" "$tmp/err" || fail "no position in: $(cat "$tmp/err")"

# Bad input: exit 2 with a message.
expect_exit 2 generate
expect_exit 2 generate --kind bogus
expect_exit 2 generate --kind chain --size 0
expect_exit 2 generate --kind chain --size abc
expect_exit 2 generate --kind chain --size 99999999999
expect_exit 2 generate --kind seq-32 --size 4
expect_exit 2 generate --kind chain --seed 3
expect_exit 2 generate --kind inception --recvs 3
expect_exit 2 generate --kind random --size 10 --recvs 10
expect_exit 2 generate --kind layered --size 100 --recvs 80
expect_exit 2 generate --kind seq-32 --typo 1
expect_exit 2 generate --kind seq-32 --out
expect_exit 2 generate --kind seq-32 stray
# A run that fails (unwritable output) exits 1.
expect_exit 1 generate --kind seq-32 --out "$tmp/no/such/dir/g.json"
echo "generate_test: ok"
