#!/usr/bin/env bash
# Installs what a fresh Debian machine lacks to build and test TicTac. Idempotent: checks
# first and only calls apt-get for missing packages. Needs root (or sudo) only when something
# is missing.
set -euo pipefail

packages=(meson ninja-build g++ pkg-config libgtest-dev libgmock-dev libbenchmark-dev libssl-dev libibverbs-dev
          clang libclang-rt-14-dev python3 iproute2 iperf3 libucx-dev ucx-utils
          iptables  # the chaos suite's loss/delay/reordering where the kernel has no tc netem
          ccache)  # ccache: meson uses it when present; rebuilds (asan, tsan, CI reruns) get cheap
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "deps: installing ${missing[*]}"
  sudo_cmd=()
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || { echo "deps: need root or sudo to install ${missing[*]}" >&2; exit 1; }
    sudo_cmd=(sudo)
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
