#!/usr/bin/env bash
# A rate-limited link between two network namespaces, for benchmarks that need a real bottleneck
# (e.g. the priority test over 1 Gbit/s). Needs root (or CAP_NET_ADMIN) and iproute2.
#
#   shaped_link.sh up RATE      create the link; print shell assignments to eval:
#                               TICTAC_LINK_ID NS_SERVER NS_CLIENT SERVER_ADDR CLIENT_ADDR LINK_RATE
#   shaped_link.sh down ID      remove the link that `up` created (ID = its TICTAC_LINK_ID)
#   shaped_link.sh run RATE -- SERVER_CMD... -- CLIENT_CMD...
#                               create a link, run the server command in NS_SERVER (background)
#                               and the client command in NS_CLIENT, remove everything after;
#                               exits with the client's status. Both commands see the variables
#                               above in their environment (use sh -c '... $SERVER_ADDR ...').
#
# RATE is a tc rate: <n>bit, <n>kbit, <n>mbit or <n>gbit (e.g. 1gbit). Both directions are
# shaped with a token bucket (tc tbf) on each veth end. Namespaces are named tictac-<pid>-s and
# tictac-<pid>-c, so parallel runs never clash; the addresses (10.231.0.1/30 and .2/30) exist
# only inside those namespaces. Nothing is created in the caller's namespace.
# Tunables: TICTAC_NETNS_LATENCY (tbf queue latency, default 50ms), TICTAC_NETNS_BURST_US
# (bucket depth in microseconds at RATE, default 4000, at least 64 KiB), TICTAC_NETNS_SERVER_DELAY
# (seconds between starting the server and the client in `run`, default 0.5).
# Exit codes: 0 ok, 1 a command failed, 2 usage error, 77 namespaces/tc not available here.
set -euo pipefail

readonly SERVER_ADDR=10.231.0.1
readonly CLIENT_ADDR=10.231.0.2
readonly PREFIX=30

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
  exit 2
}
say() { echo "shaped_link: $*" >&2; }

# Bytes per second of a tc rate, or empty when it does not parse.
rate_bytes_per_s() {
  local r=$1 n unit
  [[ $r =~ ^([0-9]+)(bit|kbit|mbit|gbit)$ ]] || return 0
  n=${BASH_REMATCH[1]} unit=${BASH_REMATCH[2]}
  case $unit in
    bit) echo $((n / 8)) ;;
    kbit) echo $((n * 1000 / 8)) ;;
    mbit) echo $((n * 1000000 / 8)) ;;
    gbit) echo $((n * 1000000000 / 8)) ;;
  esac
}

require_tools() {
  local t
  for t in ip tc; do
    if ! command -v "$t" >/dev/null 2>&1; then
      say "'$t' not found (install iproute2); network namespaces unavailable"
      exit 77
    fi
  done
}

names_for() {
  NS_SERVER=tictac-$1-s
  NS_CLIENT=tictac-$1-c
}

# Removes the namespaces of link $1 (their veth pair goes with them). Safe to repeat.
teardown() {
  local id=$1 ns
  names_for "$id"
  for ns in "$NS_SERVER" "$NS_CLIENT"; do
    if ip netns list 2>/dev/null | grep -qw "^$ns"; then
      ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
      ip netns del "$ns" 2>/dev/null || say "warning: could not delete namespace $ns"
    fi
  done
}

# Creates link $1 shaped to rate $2; on any failure removes what it made.
setup() {
  local id=$1 rate=$2 bps burst latency burst_us err
  bps=$(rate_bytes_per_s "$rate")
  if [ -z "$bps" ] || [ "$bps" -le 0 ]; then
    say "rate '$rate' is not a tc rate such as 1gbit, 100mbit or 500kbit"
    exit 2
  fi
  burst_us=${TICTAC_NETNS_BURST_US:-4000}
  burst=$((bps * burst_us / 1000000))
  ((burst >= 65536)) || burst=65536
  latency=${TICTAC_NETNS_LATENCY:-50ms}
  names_for "$id"
  if ! err=$(ip netns add "$NS_SERVER" 2>&1); then
    say "network namespaces unavailable here (ip netns add: $err); need root or CAP_NET_ADMIN"
    exit 77
  fi
  ip netns add "$NS_CLIENT"
  ip link add "tts$id" netns "$NS_SERVER" type veth peer name "ttc$id" netns "$NS_CLIENT"
  ip -n "$NS_SERVER" addr add "$SERVER_ADDR/$PREFIX" dev "tts$id"
  ip -n "$NS_CLIENT" addr add "$CLIENT_ADDR/$PREFIX" dev "ttc$id"
  for pair in "$NS_SERVER tts$id" "$NS_CLIENT ttc$id"; do
    set -- $pair
    ip -n "$1" link set lo up
    ip -n "$1" link set "$2" up
    if ! err=$(tc -n "$1" qdisc add dev "$2" root tbf rate "$rate" burst "$burst" latency "$latency" 2>&1); then
      say "tc tbf unavailable here ($err)"
      exit 77
    fi
  done
  say "link $id up: $NS_SERVER ($SERVER_ADDR) <-> $NS_CLIENT ($CLIENT_ADDR), tbf rate $rate burst ${burst}B latency $latency each way"
}

print_vars() {
  local id=$1 rate=$2
  names_for "$id"
  printf 'TICTAC_LINK_ID=%s\nNS_SERVER=%s\nNS_CLIENT=%s\nSERVER_ADDR=%s\nCLIENT_ADDR=%s\nLINK_RATE=%s\n' \
    "$id" "$NS_SERVER" "$NS_CLIENT" "$SERVER_ADDR" "$CLIENT_ADDR" "$rate"
}

# State read by the EXIT trap (globals: the trap runs after functions have returned).
LINK_ID=""
UP_OK=0
SERVER_PID=""
CLIENT_PID=""

stop_pid() {
  local pid=$1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

on_exit() {
  stop_pid "$CLIENT_PID"
  stop_pid "$SERVER_PID"
  if [ -n "$LINK_ID" ] && [ "$UP_OK" = 0 ]; then teardown "$LINK_ID"; fi
}

cmd_up() {
  [ $# -eq 1 ] || usage
  require_tools
  LINK_ID=$$
  # Remove a half-built link on failure or interruption; keep it once setup succeeded.
  trap on_exit EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  setup "$LINK_ID" "$1"
  UP_OK=1
  print_vars "$LINK_ID" "$1"
}

cmd_down() {
  [ $# -eq 1 ] && [[ $1 =~ ^[0-9]+$ ]] || usage
  require_tools
  teardown "$1"
  names_for "$1"
  if ip netns list | grep -qE "^($NS_SERVER|$NS_CLIENT)( |$)"; then
    say "namespaces of link $1 are still present"
    exit 1
  fi
}

cmd_run() {
  [ $# -ge 1 ] || usage
  local rate=$1 rc=0
  shift
  [ "${1:-}" = "--" ] || usage
  shift
  local server=() client=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do server+=("$1"); shift; done
  [ "${1:-}" = "--" ] || usage
  shift
  client=("$@")
  [ ${#server[@]} -gt 0 ] && [ ${#client[@]} -gt 0 ] || usage
  require_tools

  LINK_ID=$$
  trap on_exit EXIT  # stops both commands and removes the link, whatever happens
  trap 'exit 130' INT
  trap 'exit 143' TERM
  setup "$LINK_ID" "$rate"
  names_for "$LINK_ID"
  export TICTAC_LINK_ID=$LINK_ID NS_SERVER NS_CLIENT SERVER_ADDR CLIENT_ADDR LINK_RATE=$rate
  ip netns exec "$NS_SERVER" "${server[@]}" &
  SERVER_PID=$!
  sleep "${TICTAC_NETNS_SERVER_DELAY:-0.5}"
  # In the background so that INT/TERM traps run at once instead of after the client.
  ip netns exec "$NS_CLIENT" "${client[@]}" &
  CLIENT_PID=$!
  wait "$CLIENT_PID" || rc=$?
  CLIENT_PID=""
  exit "$rc"
}

[ $# -ge 1 ] || usage
action=$1
shift
case $action in
  up) cmd_up "$@" ;;
  down) cmd_down "$@" ;;
  run) cmd_run "$@" ;;
  -h | --help | help) usage ;;
  *) usage ;;
esac
