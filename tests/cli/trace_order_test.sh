#!/usr/bin/env bash
# The message timeline (TICTAC_TRACE) shows the order the transport enforced, at default settings:
# `tictac perftest --test priority --local` over tcp runs a priority Context and then a FIFO one
# (TICTAC_PRIORITY=0's behaviour) in the client process. In each client trace, count the bulk
# chunks (priority 1) handed to the backend after the high-priority message was submitted and
# before its first chunk was. With priorities, at most 2 (chunks already being posted when it
# arrived); in the FIFO Context, the counter-check, most of the bulk (at least 10 chunks), since
# the message waits behind all of it. Also: every file is strict JSON with a footer that counts
# its events, and the server's trace has the message landing whole.
set -u
tictac=$1
root=$2
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

TICTAC_TRACE="$tmp/t-%p-%c.json" timeout 120 "$tictac" perftest --backend tcp --local --test priority \
    --size 64K --bulk 64M --iters 1 --format json >"$tmp/out.json" 2>"$tmp/err" ||
  fail "perftest exited $?: $(cat "$tmp/err")"
ls "$tmp"/t-*.json >/dev/null 2>&1 || fail "no trace file was written"

"$root/bench/trace_report.py" --json "$tmp"/t-*.json >"$tmp/report.jsonl" 2>"$tmp/err" ||
  fail "trace_report exited $?: $(cat "$tmp/err")"
"$root/bench/trace_report.py" "$tmp"/t-*.json  # the table, for the log

python3 - "$tmp" <<'PY' || exit 1
import glob, json, sys
tmp = sys.argv[1]
seen = {"priority": 0, "fifo": 0, "server_hi_landed": 0}
for line in open(tmp + "/report.jsonl"):
    r = json.loads(line)
    assert r["dropped"] == 0, f"{r['file']}: not closed, or events dropped: {r}"
    ev = json.load(open(r["file"]))  # strict JSON: the footer closed the array
    assert r["events"] == sum(1 for e in ev if e["ph"] != "M"), f"{r['file']}: the footer's count is wrong"
    landed = [e for e in ev if e.get("cat") == "landed" and e["args"]["priority"] == 0 and e["args"]["total"] == 65536]
    if landed:  # the server: the high-priority message landed whole
        assert sum(e["args"]["bytes"] for e in landed) % 65536 == 0, f"{r['file']}: partial landing"
        seen["server_hi_landed"] += 1
    if "perftest-client" not in r["process"]:
        continue
    mode = "priority" if r["config"]["enforce_priority"] else "fifo"
    print(f"{mode}: {r['inversions']} inversions of {r['chunks']} chunks")
    if mode == "priority":
        assert r["inversions"] <= 2, f"the priority Context let {r['inversions']} less urgent chunks go first"
    else:
        assert r["inversions"] >= 10, f"counter-check: the FIFO Context shows only {r['inversions']} inversions"
    seen[mode] += 1
assert seen["priority"] == 1 and seen["fifo"] == 1, f"expected one priority and one FIFO client trace: {seen}"
assert seen["server_hi_landed"] >= 1, "no server trace shows the high-priority message landing"
PY
echo "PASS: trace_order"
