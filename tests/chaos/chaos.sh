#!/usr/bin/env bash
# The chaos suite (`meson test --suite chaos`): TicTac's tcp and ucx backends on a veth link
# between two network namespaces, with loss, delay and reordering on both ends. Needs root and
# `ip netns`; exits 77 (skipped, saying why) without them.
#
# Impairments: tc's netem qdisc where the kernel has it. Where it does not (this development
# machine's kernel has no sch_netem), the same impairments come from netfilter: iptables'
# `statistic` match drops 1% of each end's outgoing packets, and the rest go through an NFQUEUE
# to tests/chaos/netem_queue, which holds each packet 5 ms +- 2 ms (uniform) and so reorders the
# ones whose delays cross. A partition is 100% loss: netem, or iptables DROP on both ends, or
# (with neither) both ends of the link down.
#
#   chaos.sh CHAOS_PEER [transfer|transfer-ucx|partition|pause|ps-partition|all]
#   (CHAOS_NETEM_QUEUE names the netem_queue binary; meson sets it)
#
# transfer:  1% loss, 5 ms +- 2 ms delay and reordering; 10^4 transfers of random sizes
#            (1..8 KiB), random priorities, 16 tags: byte-exact delivery and per-(source, tag)
#            order (chaos_peer checks every byte of every message in posting order).
# transfer-ucx: the same over the ucx backend (UCX_TLS=tcp on the veth device, so no shared-memory
#            path bypasses the impaired link).
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
[ "$(id -u)" = 0 ] || skip "needs root (network namespaces, tc or iptables)"
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
# Without netem: netfilter (iptables, legacy tables: the nft flavour needs nft's queue support).
iptables_cmd=""
for c in iptables-legacy iptables; do
  if command -v $c >/dev/null && ip netns exec "$ns_a" $c -L OUTPUT >/dev/null 2>&1; then iptables_cmd=$c; break; fi
done
netem_queue=${CHAOS_NETEM_QUEUE:-}

netem() {  # netem ARGS...: the same impairment on both ends
  ip netns exec "$ns_a" tc qdisc change dev "$tag-va" root netem "$@"
  ip netns exec "$ns_b" tc qdisc replace dev "$tag-vb" root netem "$@"
}
ipt() {  # ipt NS ARGS...: iptables in namespace NS
  local ns=$1; shift
  ip netns exec "$ns" $iptables_cmd "$@"
}
queue_pids=()
# impair LOSS_PCT DELAY_US JITTER_US: loss, delay and reordering on both ends' outgoing packets.
# Returns 1, with the reason in $impair_why, when this machine can do it neither with netem nor
# with netfilter. (Not called in a subshell: it starts netem_queue processes and records them.)
impair_why=""
impair() {
  local loss=$1 delay=$2 jitter=$3
  if [ $have_netem = 1 ]; then
    netem delay "${delay}us" "${jitter}us" loss "$loss%" reorder 25% 50%
    echo "  impairment: tc netem"
    return 0
  fi
  [ -n "$iptables_cmd" ] || { impair_why="no netem qdisc in this kernel and no usable iptables (apt-get install iptables)"; return 1; }
  [ -n "$netem_queue" ] && [ -x "$netem_queue" ] || { impair_why="no netem qdisc in this kernel and CHAOS_NETEM_QUEUE does not name netem_queue"; return 1; }
  local ns dev seed=1
  for ns in "$ns_a" "$ns_b"; do
    dev=$tag-va; [ "$ns" = "$ns_b" ] && dev=$tag-vb
    rm -f "$work/queue-$seed.ready"
    ip netns exec "$ns" "$netem_queue" --queue 0 --delay-us "$delay" --jitter-us "$jitter" --seed $seed \
      --ready-file "$work/queue-$seed.ready" >"$work/queue-$seed.log" 2>&1 &
    queue_pids+=($!)
    for _ in $(seq 100); do [ -e "$work/queue-$seed.ready" ] && break; sleep 0.05; done
    [ -e "$work/queue-$seed.ready" ] || { impair_why="netem_queue did not bind an NFQUEUE: $(cat "$work/queue-$seed.log")"; return 1; }
    ipt "$ns" -A OUTPUT -o "$dev" -m statistic --mode random --probability "0.0$loss" -j DROP
    ipt "$ns" -A OUTPUT -o "$dev" -j NFQUEUE --queue-num 0
    seed=$((seed + 1))
  done
  echo "  impairment: iptables statistic (loss) + NFQUEUE to netem_queue (delay, reordering): no netem here"
}
unimpair() {  # ends the netfilter impairment and prints what netem_queue did
  [ ${#queue_pids[@]} -gt 0 ] || return 0
  local ns
  for ns in "$ns_a" "$ns_b"; do
    ipt "$ns" -L OUTPUT -v -x | awk -v ns="${ns##*-}" '$3 == "DROP" {print "  " ns ": iptables dropped " $1 " packets (1%)"}'
    ipt "$ns" -F OUTPUT
  done
  local p
  for p in "${queue_pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  queue_pids=()
  cat "$work"/queue-*.log | sed 's/^/  /'
}
partition_how() {
  if [ $have_netem = 1 ]; then echo netem; elif [ -n "$iptables_cmd" ]; then echo "iptables DROP"; else echo "links down: no netem or iptables here"; fi
}
partition() {  # 100% loss both ways
  if [ $have_netem = 1 ]; then
    netem loss 100%
  elif [ -n "$iptables_cmd" ]; then
    ipt "$ns_a" -I OUTPUT -o "$tag-va" -j DROP
    ipt "$ns_b" -I OUTPUT -o "$tag-vb" -j DROP
  else
    ip -n "$ns_a" link set "$tag-va" down
    ip -n "$ns_b" link set "$tag-vb" down
  fi
}

status=0
run_transfer() {  # run_transfer tcp|ucx
  local scheme=$1
  echo "== transfer over $scheme: 1% loss, 5ms +- 2ms delay, reordering; 10000 transfers"
  impair 1 5000 2000 || skip "$impair_why"
  local port=$((20000 + RANDOM % 20000)) t0=$SECONDS
  local env=()
  # UCX: tcp over the veth only, so no shared-memory transport bypasses the impaired link. UCX
  # lists a device only once the kernel reports it running, which for the second veth end comes
  # about 1 s after `link set up` (measured here): wait for both.
  if [ "$scheme" = ucx ]; then
    local ns dev seen
    for ns in "$ns_a" "$ns_b"; do
      dev=$tag-va; [ "$ns" = "$ns_b" ] && dev=$tag-vb
      seen=0
      for _ in $(seq 100); do
        ip netns exec "$ns" env UCX_TLS=tcp ucx_info -d >"$work/ucx_info.txt" 2>&1 || true
        grep -q "Device: $dev\$" "$work/ucx_info.txt" && { seen=1; break; }
        sleep 0.1
      done
      [ $seen = 1 ] || { echo "  FAIL: UCX does not list $dev in $ns after 10 s (ucx_info -d)"; status=1; unimpair; return; }
    done
  fi
  [ "$scheme" = ucx ] && env=(env UCX_TLS=tcp UCX_NET_DEVICES="$tag-va")
  timeout 150 ip netns exec "$ns_a" "${env[@]}" "$peer" recv --listen "$scheme://$ip_a:$port" --count 10000 --seed 7 --max-bytes 8192 \
    >"$work/recv.log" 2>&1 & local rpid=$!
  sleep 0.3
  [ "$scheme" = ucx ] && env=(env UCX_TLS=tcp UCX_NET_DEVICES="$tag-vb")
  timeout 150 ip netns exec "$ns_b" "${env[@]}" "$peer" send --connect "$scheme://$ip_a:$port" --count 10000 --seed 7 --max-bytes 8192 \
    >"$work/send.log" 2>&1 & local spid=$!
  local rs=0 ss=0
  wait $spid || ss=$?
  wait $rpid || rs=$?
  unimpair
  sed 's/^/  send: /' "$work/send.log" | tail -5
  sed 's/^/  recv: /' "$work/recv.log" | tail -5
  echo "  sender exit $ss, receiver exit $rs, $((SECONDS - t0)) s"
  [ $ss = 0 ] && [ $rs = 0 ] || status=1
}

run_partition() {
  echo "== partition: 100% loss both ways mid-transfer ($(partition_how)), TICTAC_TIMEOUT=3s"
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
  echo "== ps-partition: PS training over tictac, worker 2's link partitioned mid-run ($(partition_how)), TICTAC_TIMEOUT=3s, --timeout 10"
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
  transfer) run_transfer tcp ;;
  transfer-ucx) run_transfer ucx ;;
  partition) run_partition ;;
  pause) run_pause ;;
  ps-partition) run_ps_partition ;;
  all) run_partition; run_pause; run_transfer tcp; run_transfer ucx ;;
  *) echo "usage: $0 CHAOS_PEER [transfer|transfer-ucx|partition|pause|ps-partition|all]" >&2; exit 2 ;;
esac
exit $status
