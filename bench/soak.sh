#!/usr/bin/env bash
# Soak benchmark (issue 17; not part of `make test`): a server Context that lives for the whole run
# and a client that, round after round, creates a Context, connects, sends a burst of messages of
# random sizes (1 B .. 1 MiB) and priorities, and closes (bench/soak/soak_peer.cc). Both report
# resident memory (VmRSS) and open descriptors every REPORT seconds; the run passes when neither
# grows: after the warm-up (the first 10 % of the run) RSS may rise by at most
# max(4 MiB, 3 %) and the descriptor count not at all, on both sides.
#
#   bench/soak.sh [BUILD_DIR]          # SOAK_SECONDS (600), SOAK_REPORT (30), SOAK_MESSAGES (200)
#
# Writes the samples to $SOAK_OUT (default results/soak.csv: role,t,rounds,rss_kib,fds,heap_kib) and
# prints a table and the verdict. Exit 0 = flat, 1 = growth or a transfer error, 2 = bad input.
set -euo pipefail
build=${1:-build}
peer=$build/bench/soak_peer
[ -x "$peer" ] || { echo "soak.sh: $peer not found: build first (make build, or ninja -C $build)" >&2; exit 2; }
seconds=${SOAK_SECONDS:-600}
report=${SOAK_REPORT:-30}
messages=${SOAK_MESSAGES:-200}
out=${SOAK_OUT:-results/soak.csv}
case $seconds$report$messages in *[!0-9]*) echo "soak.sh: SOAK_SECONDS/SOAK_REPORT/SOAK_MESSAGES must be whole numbers" >&2; exit 2 ;; esac
mkdir -p "$(dirname "$out")"
work=$(mktemp -d)
server_pid=""
cleanup() { [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

echo "soak: ${seconds} s, a report every ${report} s, ${messages} messages per round (a new client Context each round)"
"$peer" server --listen tcp://127.0.0.1:0 --address-file "$work/addr" --duration "$seconds" \
  --report-every "$report" --messages "$messages" >"$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 100); do [ -s "$work/addr" ] && break; sleep 0.1; done
[ -s "$work/addr" ] || { echo "soak.sh: the server did not start:"; cat "$work/server.log"; exit 1; }
client_rc=0
"$peer" client --connect "$(cat "$work/addr")" --duration "$seconds" --report-every "$report" \
  --messages "$messages" >"$work/client.log" 2>&1 || client_rc=$?
server_rc=0
wait "$server_pid" || server_rc=$?
server_pid=""

python3 - "$work/server.log" "$work/client.log" "$out" "$seconds" "$client_rc" "$server_rc" <<'EOF'
import re, sys
server_log, client_log, out, seconds, client_rc, server_rc = sys.argv[1:]
seconds = float(seconds)
rows = []
for path in (server_log, client_log):
    for line in open(path):
        m = re.match(r"soak (\w+) t=(\d+) rounds=(\d+) rss_kib=(\d+) heap_kib=(\d+) fds=(\d+)", line)
        if m:
            rows.append((m[1], int(m[2]), int(m[3]), int(m[4]), int(m[6]), int(m[5])))
        elif not line.startswith("soak "):
            print("  " + line.rstrip())
with open(out, "w") as f:
    f.write("role,t,rounds,rss_kib,fds,heap_kib\n")
    for r in rows:
        f.write(",".join(map(str, r)) + "\n")
ok = client_rc == "0" and server_rc == "0"
print(f"{'role':8} {'t(s)':>6} {'rounds':>8} {'RSS MiB':>9} {'heap MiB':>9} {'fds':>5}")
for r in rows:
    print(f"{r[0]:8} {r[1]:6} {r[2]:8} {r[3] / 1024:9.1f} {r[5] / 1024:9.2f} {r[4]:5}")
for role in ("server", "client"):
    samples = [r for r in rows if r[0] == role]
    after = [r for r in samples if r[1] >= 0.1 * seconds]
    if len(after) < 2:
        print(f"FAIL {role}: fewer than 2 samples after the warm-up (run longer than {seconds:.0f} s?)")
        ok = False
        continue
    base, last = after[0], after[-1]
    growth = last[3] - base[3]
    allowed = max(4096, 0.03 * base[3])
    verdict = growth <= allowed and last[4] <= base[4]
    print(f"{role}: RSS {base[3] / 1024:.1f} -> {last[3] / 1024:.1f} MiB (+{growth / 1024:.1f}, allowed "
          f"{allowed / 1024:.1f}), fds {base[4]} -> {last[4]}, {last[2]} rounds: {'flat' if verdict else 'GROWS'}")
    ok = ok and verdict
if client_rc != "0" or server_rc != "0":
    print(f"FAIL: client exit {client_rc}, server exit {server_rc}")
print("soak: " + ("PASS (flat)" if ok else "FAIL"))
sys.exit(0 if ok else 1)
EOF
