#!/usr/bin/env bash
# Syscalls per 8-byte round trip of `tictac perftest --backend ucx --test lat` on the client
# (strace -f -c over 2000 exchanges): a load-independent view of the loop's hand-off costs
# (futex, eventfd write/read, epoll_wait). Needs strace.
#
#   bench/ucx_syscalls.sh [TICTAC_BINARY] [UCX_TLS]     (defaults: build/tictac, tcp)
set -euo pipefail
bin=${1:-build/tictac}
tls=${2:-tcp}
iters=2000
command -v strace >/dev/null || { echo "strace not found: apt-get install strace" >&2; exit 1; }
[ -x "$bin" ] || { echo "$bin not found: build first" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
UCX_TLS=$tls timeout 120 "$bin" perftest --server --backend ucx --listen ucx://127.0.0.1:0 >"$tmp/server.log" 2>&1 &
server=$!
addr=""
for _ in $(seq 100); do
  addr=$(grep -o 'ucx://[0-9.]*:[0-9]*' "$tmp/server.log" || true)
  [ -n "$addr" ] && break
  sleep 0.05
done
[ -n "$addr" ] || { cat "$tmp/server.log" >&2; kill "$server"; exit 1; }
UCX_TLS=$tls timeout 120 strace -f -c -o "$tmp/strace" "$bin" perftest --client --connect "$addr" --backend ucx \
  --test lat --size 8 --iters "$iters" --warmup 0 >/dev/null
wait "$server"
echo "syscalls per round trip (client, UCX_TLS=$tls, $iters round trips):"
awk -v n="$iters" 'NR > 2 && $NF ~ /^(futex|epoll_wait|write|read|sendmsg|recvmsg|recvfrom)$/ {
  printf "  %-10s %.1f\n", $NF, $4 / n }' "$tmp/strace"
