#!/usr/bin/env bash
# tictac perftest: quick --local runs of every test on loopback and tcp (the JSON fields exist and
# are sane; the ordering facts of the priority test that hold on any machine), a server whose
# client disappears and a client whose server is killed (exit 1 with the transport's error, no
# hang), backends that are not viable (exit 1 naming them) and bad flags (exit 2). No timed
# assertions: figures are only checked for being positive and consistent.
set -u
tictac=$1
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d)
SERVER_PID=""
CLIENT_PID=""
cleanup() {
  for pid in $CLIENT_PID $SERVER_PID; do kill -KILL "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT

# json FILE EXPR: evaluates a Python expression over the JSON object d in FILE.
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }
check() {  # check FILE EXPR WHAT: fails unless EXPR is True
  [ "$(json "$1" "$2" 2>&1)" = "True" ] || fail "$3: $2 is not true in $(cat "$1")"
}
perf() {  # perf OUT ARGS...: a bounded perftest run that must succeed and print one JSON line
  local out=$1
  shift
  timeout 60 "$tictac" perftest "$@" --format json >"$out" 2>"$tmp/err" || fail "perftest $* exited $?: $(cat "$tmp/err")"
  [ "$(wc -l <"$out")" = 1 ] || fail "perftest $* printed more than one line: $(cat "$out")"
}

for be in loopback tcp; do
  perf "$tmp/lat" --backend $be --test lat --local --iters 50 --warmup 5
  check "$tmp/lat" "d['backend']=='$be' and d['test']=='lat' and d['size']==8 and d['iters']==50" "$be lat header"
  check "$tmp/lat" "0 < d['lat_us_min'] <= d['lat_us_median'] <= d['lat_us_p99'] and d['rtt_us_median']==2*d['lat_us_median']" \
    "$be lat figures"

  perf "$tmp/bw" --backend $be --test bw --local --size 64K --iters 40 --warmup 2
  check "$tmp/bw" "d['test']=='bw' and d['size']==65536 and d['timed_messages']==40" "$be bw header"
  check "$tmp/bw" "d['gbytes_per_s'] > 0 and d['gbytes_per_s_median'] > 0 and d['seconds'] > 0" "$be bw figures"
  # Messages above the eager pool take the rendezvous path; no warmup means the first is untimed.
  perf "$tmp/bw" --backend $be --test bw --local --size 1M --iters 8 --warmup 0 --outstanding 3
  check "$tmp/bw" "d['timed_messages']==7 and d['outstanding']==3 and d['recv_buffers']==3 and d['gbytes_per_s'] > 0" \
    "$be bw rendezvous"
  # Every message into one buffer (as ucx_perftest): the server shares it among its receives.
  perf "$tmp/bw" --backend $be --test bw --local --size 1M --iters 8 --warmup 0 --outstanding 3 --recv-buffers 1
  check "$tmp/bw" "d['timed_messages']==7 and d['recv_buffers']==1 and d['gbytes_per_s'] > 0" "$be bw one buffer"

  perf "$tmp/prio" --backend $be --test priority --local --bulk 8M --chunk 64K --window 1
  check "$tmp/prio" "d['test']=='priority' and d['size']==65536 and d['bulk']==8388608 and d['bulk_messages']==16" \
    "$be priority header"
  check "$tmp/prio" "d['hi_lat_ms_priority'] > 0 and d['hi_lat_ms_fifo'] > 0 and d['chunk_ms'] > 0 and d['hi_lat_clock']=='monotonic'" \
    "$be priority figures"
  check "$tmp/prio" "abs(d['fifo_over_priority'] - d['hi_lat_ms_fifo'] / d['hi_lat_ms_priority']) < 1e-3 * d['fifo_over_priority']" \
    "$be priority ratio"
  # FIFO: the message is queued behind every bulk message, so it lands after all of them.
  check "$tmp/prio" "d['bulk_before_hi_fifo']==d['bulk_messages']" "$be FIFO order"
done
# With priority and a one-chunk window the message overtakes the bulk. On loopback nothing else
# buffers data, so this holds on any machine; on tcp the socket buffers hold all 8 MiB at once.
perf "$tmp/prio" --backend loopback --test priority --local --bulk 8M --chunk 64K --window 1
check "$tmp/prio" "d['bulk_before_hi_priority'] < d['bulk_messages']" "loopback priority order"
# --hi-after: the message is submitted only once the bulk up to 4 MiB has landed (64 KiB + 8 of
# 15 even messages of 8 MiB - 64 KiB: 9 messages), and still overtakes the rest.
perf "$tmp/prio" --backend loopback --test priority --local --bulk 8M --hi-after 4M --chunk 64K --window 1
check "$tmp/prio" "d['hi_after']==4194304 and 9 <= d['bulk_before_hi_priority'] < d['bulk_messages']" \
  "loopback priority --hi-after"

out=$(timeout 60 "$tictac" perftest --backend loopback --test lat --local --iters 10 --warmup 0) || fail "table format exited $?"
grep -Eq '^  lat_us_median +[0-9.e+-]+$' <<<"$out" || fail "table format lacks lat_us_median: $out"

# Server and client as separate commands; the server prints its address.
"$tictac" perftest --backend tcp --server --timeout 5s >"$tmp/server" 2>&1 &
SERVER_PID=$!
addr=""
for _ in $(seq 200); do
  addr=$(sed -n 's/^tictac perftest server: listening on //p' "$tmp/server")
  [ -n "$addr" ] && break
  sleep 0.025
done
grep -Eq '^tcp://127\.0\.0\.1:[0-9]+$' <<<"$addr" || fail "server address line: $(cat "$tmp/server")"
# The client streams until the server is killed: exit 1 with the transport's error, never a hang.
timeout 30 "$tictac" perftest --backend tcp --client --connect "$addr" --test bw --size 1M --iters 100000000 \
  --timeout 5s >"$tmp/client" 2>&1 &
CLIENT_PID=$!
sleep 0.5
kill -KILL $SERVER_PID
wait $SERVER_PID 2>/dev/null
SERVER_PID=""
wait $CLIENT_PID
rc=$?
CLIENT_PID=""
[ $rc -eq 1 ] || fail "client of a killed server must exit 1, got $rc: $(cat "$tmp/client")"
grep -q 'connection_lost' "$tmp/client" || fail "client did not report connection_lost: $(cat "$tmp/client")"

# A server whose client never comes gives up after --timeout.
timeout 20 "$tictac" perftest --backend tcp --server --timeout 300ms >"$tmp/server" 2>&1
[ $? -eq 1 ] || fail "server without a client must exit 1: $(cat "$tmp/server")"
grep -q 'timeout' "$tmp/server" || fail "server without a client: no timeout message: $(cat "$tmp/server")"
# A client whose server does not exist gives up after --timeout.
timeout 20 "$tictac" perftest --backend tcp --client --connect 127.0.0.1:1 --timeout 300ms >"$tmp/client" 2>&1
[ $? -eq 1 ] || fail "client without a server must exit 1: $(cat "$tmp/client")"

# Backends that are not viable here (verbs without RDMA devices, ucx when not built) exit 1 and
# say why; when they are viable they must work like the others.
for be in verbs ucx; do
  timeout 60 "$tictac" perftest --backend $be --test lat --local --iters 20 --warmup 0 --format json >"$tmp/be" 2>"$tmp/err"
  rc=$?
  if [ $rc -eq 0 ]; then
    check "$tmp/be" "d['backend']=='$be' and d['lat_us_median'] > 0" "$be lat"
  else
    [ $rc -eq 1 ] || fail "$be: exit $rc: $(cat "$tmp/err")"
    grep -q "$be not viable: " "$tmp/err" || fail "$be: no 'not viable' reason: $(cat "$tmp/err")"
  fi
done

bad() {  # bad ARGS...: must exit 2 with a message
  "$tictac" perftest "$@" >/dev/null 2>"$tmp/err"
  local rc=$?
  [ $rc -eq 2 ] || fail "perftest $* exited $rc, want 2"
  [ -s "$tmp/err" ] || fail "perftest $* printed no message"
}
bad --test lat
bad --local --server
bad --local --test nope
bad --local --backend infiniband
bad --local --format xml
bad --local --test bw --size 0
bad --local --test lat --iters 0
bad --local --test lat --size 2G
bad --local --test lat --bulk 1M
bad --local --test lat --outstanding 4
bad --local --test lat --recv-buffers 1
bad --local --test priority --recv-buffers 1
bad --local --test bw --recv-buffers 2000
bad --local --test priority --warmup 3
bad --local --test priority --bulk 1M --hi-after 1M
bad --local --test bw --hi-after 1M
bad --local --test bw --iters 1 --warmup 0
bad --local --test bw --size 1G --outstanding 64
bad --local --chunk 0
bad --local --window 0
bad --local --timeout soon
bad --local --size
bad --local --bogus
bad --client
bad --client --connect udp://127.0.0.1:5
bad --local --listen 127.0.0.1:0
bad --server --test bw
bad --backend loopback --server
"$tictac" perftest 2>&1 | grep -q 'exactly one of --server' || fail "no mode: unclear message"
echo "perftest_test: all checks passed"
