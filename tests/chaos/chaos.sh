#!/usr/bin/env bash
# The chaos suite (`meson test --suite chaos`): TicTac's tcp backend on a veth link between two
# network namespaces, with tc netem on both ends. Needs root and `ip netns`; exits 77 (skipped,
# saying why) without them. The transfer case needs the netem qdisc (skipped without it: this
# development machine's kernel has none); the partition case uses netem's 100% loss, or takes
# both ends of the link down where netem is missing.
#
#   chaos.sh CHAOS_PEER [transfer|partition|pause|ps-partition|all]
#
# transfer:  1% loss, 5 ms +- 2 ms delay and 25% reordering; 10^4 transfers of random sizes
#            (1..8 KiB), random priorities, 16 tags: byte-exact delivery and per-(source, tag)
#            order (chaos_peer checks every byte of every message in posting order).
# partition: a transfer in progress, then 100% loss both ways: every pending request on both sides
#            fails with connection_lost naming the peer within TICTAC_TIMEOUT (3 s here) + 1 s;
#            nothing hangs (each side is bounded by `timeout`).
# pause:     a transfer in progress, then the receiver is SIGSTOPped for 2 s and resumed, within
#            TICTAC_TIMEOUT (4 s here): the transfer completes, every byte intact, no error.
# ps-partition: PS training (tictac backend) with one worker in the other namespace; its link is
#            partitioned mid-run: every rank exits 1 with an error naming the cause, none hangs
#            (needs CHAOS_PYTHON: a python with torch and this build's extension).
set -euo pipefail
peer=$1
which=${2:-all}
skip() { echo "SKIP chaos: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (network namespaces and tc netem)"
command -v ip >/dev/null && command -v tc >/dev/null || skip "needs iproute2 (ip, tc)"

tag=tc$$
ns_a=$tag-a ns_b=$tag-b
net=10.$((100 + $$ % 100)).$(($$ / 100 % 250)).0
ip_a=${net%.0}.1 ip_b=${net%.0}.2
work=$(mktemp -d)
cleanup() {
  for ns in "$ns_a" "$ns_b"; do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT
ip netns add "$ns_a" 2>/dev/null || skip "cannot create network namespaces (ip netns add failed)"
ip netns add "$ns_b"
ip link add "$tag-va" netns "$ns_a" type veth peer name "$tag-vb" netns "$ns_b"
ip -n "$ns_a" addr add "$ip_a/24" dev "$tag-va"
ip -n "$ns_b" addr add "$ip_b/24" dev "$tag-vb"
for ns in "$ns_a" "$ns_b"; do ip -n "$ns" link set lo up; done
ip -n "$ns_a" link set "$tag-va" up
ip -n "$ns_b" link set "$tag-vb" up
have_netem=1
ip netns exec "$ns_a" tc qdisc add dev "$tag-va" root netem delay 1ms 2>/dev/null || have_netem=0

netem() {  # netem ARGS...: the same impairment on both ends
  ip netns exec "$ns_a" tc qdisc change dev "$tag-va" root netem "$@"
  ip netns exec "$ns_b" tc qdisc replace dev "$tag-vb" root netem "$@"
}
partition() {  # 100% loss both ways: netem, or (without netem) both ends of the link down
  if [ $have_netem = 1 ]; then
    netem loss 100%
  else
    ip -n "$ns_a" link set "$tag-va" down
    ip -n "$ns_b" link set "$tag-vb" down
  fi
}

status=0
run_transfer() {
  [ $have_netem = 1 ] || skip "the netem qdisc is not available in this kernel (loss/delay/reorder need sch_netem)"
  echo "== transfer: 1% loss, 5ms +- 2ms delay, 25% reorder; 10000 transfers"
  netem delay 5ms 2ms loss 1% reorder 25% 50%
  local port=$((20000 + RANDOM % 20000)) t0=$SECONDS
  timeout 150 ip netns exec "$ns_a" "$peer" recv --listen "tcp://$ip_a:$port" --count 10000 --seed 7 --max-bytes 8192 \
    >"$work/recv.log" 2>&1 & local rpid=$!
  sleep 0.3
  timeout 150 ip netns exec "$ns_b" "$peer" send --connect "tcp://$ip_a:$port" --count 10000 --seed 7 --max-bytes 8192 \
    >"$work/send.log" 2>&1 & local spid=$!
  local rs=0 ss=0
  wait $spid || ss=$?
  wait $rpid || rs=$?
  sed 's/^/  send: /' "$work/send.log" | tail -5
  sed 's/^/  recv: /' "$work/recv.log" | tail -5
  echo "  sender exit $ss, receiver exit $rs, $((SECONDS - t0)) s"
  [ $ss = 0 ] && [ $rs = 0 ] || status=1
}

run_partition() {
  echo "== partition: 100% loss both ways mid-transfer ($([ $have_netem = 1 ] && echo netem || echo 'links down: no netem here')), TICTAC_TIMEOUT=3s"
  [ $have_netem = 0 ] || netem delay 1ms
  local port=$((20000 + RANDOM % 20000)) t0=$SECONDS
  export TICTAC_TIMEOUT=3s
  timeout 60 ip netns exec "$ns_a" "$peer" recv --listen "tcp://$ip_a:$port" --count 5000 --max-bytes 65536 \
    --expect-lost >"$work/precv.log" 2>&1 & local rpid=$!
  sleep 0.3
  timeout 60 ip netns exec "$ns_b" "$peer" send --connect "tcp://$ip_a:$port" --count 5000 --max-bytes 65536 \
    --partition-after 500 --partition-file "$work/partition" >"$work/psend.log" 2>&1 & local spid=$!
  for _ in $(seq 600); do [ -e "$work/partition" ] && break; sleep 0.05; done
  [ -e "$work/partition" ] && partition
  local rs=0 ss=0
  wait $spid || ss=$?
  wait $rpid || rs=$?
  unset TICTAC_TIMEOUT
  sed 's/^/  send: /' "$work/psend.log" | tail -5
  sed 's/^/  recv: /' "$work/precv.log" | tail -5
  echo "  sender exit $ss, receiver exit $rs, $((SECONDS - t0)) s"
  [ $ss = 0 ] && [ $rs = 0 ] || status=1
}

run_pause() {
  echo "== pause: the receiver SIGSTOPped for 2 s mid-transfer and resumed (TICTAC_TIMEOUT=4s): every message arrives"
  [ $have_netem = 0 ] || netem delay 1ms
  local port=$((20000 + RANDOM % 20000)) t0=$SECONDS
  export TICTAC_TIMEOUT=4s
  timeout 60 ip netns exec "$ns_a" "$peer" recv --listen "tcp://$ip_a:$port" --count 5000 --seed 3 --max-bytes 65536 \
    >"$work/stop-recv.log" 2>&1 & local rpid=$!
  sleep 0.3
  timeout 60 ip netns exec "$ns_b" "$peer" send --connect "tcp://$ip_a:$port" --count 5000 --seed 3 --max-bytes 65536 \
    --pause-after 500 --pause-file "$work/pause" >"$work/stop-send.log" 2>&1 & local spid=$!
  for _ in $(seq 600); do [ -e "$work/pause" ] && break; sleep 0.05; done
  local stopped=""
  if [ -e "$work/pause" ]; then
    # The receiver is the only process in namespace A (`timeout` runs outside it).
    stopped=$(ip netns pids "$ns_a")
    # The sender posts its remaining sends once it sees pause.stopped: they are in flight while
    # the receiver is stopped.
    [ -n "$stopped" ] && kill -STOP $stopped && touch "$work/pause.stopped" && sleep 2 && kill -CONT $stopped
    echo "  stopped and resumed pid(s) $stopped"
  fi
  local rs=0 ss=0
  wait $spid || ss=$?
  wait $rpid || rs=$?
  unset TICTAC_TIMEOUT
  sed 's/^/  send: /' "$work/stop-send.log" | tail -5
  sed 's/^/  recv: /' "$work/stop-recv.log" | tail -5
  echo "  sender exit $ss, receiver exit $rs, $((SECONDS - t0)) s"
  [ -n "$stopped" ] && [ $ss = 0 ] && [ $rs = 0 ] || status=1
}

run_ps_partition() {
  # Parameter-server training (python -m tictac.torch.train, tictac backend): the PS (rank 0) and
  # worker 1 in namespace A, worker 2 in namespace B. Once iterations run, the link goes down.
  # Every rank must exit with status 1 (not hang, not succeed) within the bound, and print an
  # error that names what was lost.
  local py=${CHAOS_PYTHON:?CHAOS_PYTHON must name the python with torch (meson sets it)}
  echo "== ps-partition: PS training over tictac, worker 2's link partitioned mid-run ($([ $have_netem = 1 ] && echo netem || echo 'links down: no netem here')), TICTAC_TIMEOUT=3s, --timeout 10"
  [ $have_netem = 0 ] || netem delay 1ms
  local port=$((20000 + RANDOM % 20000)) t0=$SECONDS
  local args=(-m tictac.torch.train --model torchvision:resnet18 --image-size 32 --batch 2 --iters 100000
              --warmup 0 --num-ps 1 --mode training --policy tic --timeout 10 --threads 1
              --init-method "tcp://$ip_a:$port" --world-size 3)
  local pids=() r
  for r in 0 1 2; do
    local ns=$ns_a
    [ $r = 2 ] && ns=$ns_b
    TICTAC_TIMEOUT=3s timeout 200 ip netns exec "$ns" "$py" "${args[@]}" --rank $r >"$work/ps$r.log" 2>&1 &
    pids+=($!)
  done
  # Wait until 3 iterations ran (worker 1 prints progress; the PS waits for both workers' gradients
  # every iteration, so worker 2 (the one to be cut off) ran them too).
  local iters=0
  for _ in $(seq 1200); do
    iters=$(grep -c "^iter .* rank 1" "$work/ps1.log" || true)
    [ "$iters" -ge 3 ] && break
    sleep 0.1
  done
  echo "  $iters iterations ran before the partition"
  local t_part=$SECONDS
  partition
  local rc=() ok=1
  for r in 0 1 2; do
    local x=0
    wait "${pids[$r]}" || x=$?
    rc+=($x)
  done
  local took=$((SECONDS - t_part))
  for r in 0 1 2; do
    echo "  rank $r exit ${rc[$r]}; last lines:"
    tail -3 "$work/ps$r.log" | sed 's/^/    /'
  done
  echo "  all ranks ended $took s after the partition (bound 60 s: 3 s liveness + 10 s wait + teardown)"
  [ "$iters" -ge 3 ] || { echo "  FAIL: the job never ran 3 iterations before the partition"; ok=0; }
  for r in 0 1 2; do
    # 124 = killed by `timeout`: a hang.
    [ "${rc[$r]}" = 1 ] || { echo "  FAIL: rank $r exit ${rc[$r]} (want 1: a clear failure, not a hang or success)"; ok=0; }
  done
  [ $took -le 60 ] || { echo "  FAIL: took $took s"; ok=0; }
  # The partitioned worker and the PS must say what was lost (a rank, a peer, or a lost connection).
  for r in 0 2; do
    grep -qiE "connection_lost|connection lost|timed out|rank [0-9]" "$work/ps$r.log" ||
      { echo "  FAIL: rank $r's error does not name the cause"; ok=0; }
  done
  [ $ok = 1 ] || status=1
  echo "  $((SECONDS - t0)) s in all"
}

case $which in
  transfer) run_transfer ;;
  partition) run_partition ;;
  pause) run_pause ;;
  ps-partition) run_ps_partition ;;
  all) run_partition; run_pause; run_transfer ;;
  *) echo "usage: $0 CHAOS_PEER [transfer|partition|pause|ps-partition|all]" >&2; exit 2 ;;
esac
exit $status
