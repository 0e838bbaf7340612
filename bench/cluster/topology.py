"""Emulated cluster topology: the namespaces, bridge and shaped links of a Cluster (a mixin of
launcher.Cluster), or the loopback fallback; rate parsing, the support probe and cleanup.

Each host is its own network namespace (``ttc-<id>-h<i>``); every host namespace is joined by a
veth pair to a Linux bridge that lives in a namespace of its own (``ttc-<id>-br``), so nothing
is created in the caller's namespace. ``<id>`` is the launcher's pid (``<pid>.<k>`` for a second
cluster open at the same time in one process). Each host's egress (``eth0``) and the bridge-side
veth towards it (``vh<i>``) are shaped with ``tc tbf`` to the rate, so both directions of every
host's link are shaped, as with a switch whose ports all run at that rate. Addresses come from a
private /24, ``10.232.X.0/24`` (host i is ``10.232.X.(i+1)``), that exists only inside those
namespaces; X is chosen so that it differs from the other live clusters' subnets (not strictly
needed: the clusters are separate network stacks, but it keeps logs unambiguous).

Without root or network-namespace support (probed once per process: ``ip netns add``, a bridge,
a veth pair and a tbf qdisc), or when asked (``loopback=True`` / ``--loopback``), every process
runs on loopback instead (MASTER_ADDR = TICTAC_LISTEN_ADDR = 127.0.0.1, TICTAC_RATE_LIMIT =
the rate in bytes/s so that the transport can rate-limit in-process); the launcher says so and
why.

``--latency-ms L`` adds L ms of one-way delay with netem on each host's egress (so a round trip
between two hosts takes 2L); where the kernel has no netem the launcher says so and runs without
added latency (``Cluster.latency_applied`` is False). In loopback mode no latency is added.
Tunables: TICTAC_CLUSTER_BURST_US (tbf bucket depth in microseconds at the rate, default 4000,
at least 64 KiB), TICTAC_CLUSTER_TBF_LATENCY (tbf queue latency, default 50ms).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading

MASTER_PORT = 29500
SUBNET_BASE = "10.232"
NS_PREFIX = "ttc-"
MAX_HOSTS = 250

_NS_RE = re.compile(r"^ttc-(\d+)(?:\.(\d+))?-(h\d+|br|probe)$")
_RATE_RE = re.compile(r"^([0-9]+)(bit|kbit|mbit|gbit)$")
_RATE_MULT = {"bit": 1, "kbit": 1000, "mbit": 1000**2, "gbit": 1000**3}


class ClusterError(Exception):
    """The cluster could not be set up or used."""


class RateError(ClusterError, ValueError):
    """A rate string that is not <n>bit|kbit|mbit|gbit."""



def _say(msg: str) -> None:
    sys.stderr.write(f"cluster: {msg}\n")
    sys.stderr.flush()


def parse_rate(rate: str) -> int:
    """Bytes per second of a tc rate such as ``1gbit``, ``100mbit``, ``500kbit``, ``64000bit``."""
    if not isinstance(rate, str):
        raise RateError(f"rate {rate!r} is not a string such as 1gbit")
    m = _RATE_RE.match(rate.strip().lower())
    if not m:
        raise RateError(
            f"rate {rate!r} is not a tc rate: <n>bit, <n>kbit, <n>mbit or <n>gbit (e.g. 1gbit, 100mbit)"
        )
    bps = int(m.group(1)) * _RATE_MULT[m.group(2)] // 8
    if bps <= 0:
        raise RateError(f"rate {rate!r} is below 1 byte/s")
    return bps


# ---------------------------------------------------------------------------------------------
# iproute2 helpers


def _tool(name: str) -> str | None:
    return shutil.which(name) or next(
        (p for p in (f"/usr/sbin/{name}", f"/sbin/{name}", f"/usr/bin/{name}") if os.access(p, os.X_OK)),
        None,
    )


def _cmd(argv: list[str], check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise ClusterError(f"'{' '.join(argv)}' failed: {(r.stderr or r.stdout).strip()}")
    return r


def netns_list() -> list[str]:
    """Names of the network namespaces `ip netns list` shows ('' when ip is missing)."""
    ip = _tool("ip")
    if not ip:
        return []
    r = _cmd([ip, "netns", "list"], check=False)
    return [line.split()[0] for line in r.stdout.splitlines() if line.strip()]


def _ns_pids(ns: str) -> list[int]:
    ip = _tool("ip")
    r = _cmd([ip, "netns", "pids", ns], check=False)
    return [int(x) for x in r.stdout.split() if x.isdigit()]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


_support_lock = threading.Lock()
_support: dict[bool, tuple[bool, str]] = {}


def netns_support(need_netem: bool = False) -> tuple[bool, str]:
    """(True, "") when namespaces, a bridge, veth and tbf (and netem if asked) work here, else
    (False, why). Probed once per process (with a throwaway namespace ttc-<pid>-probe)."""
    with _support_lock:
        if need_netem in _support:
            return _support[need_netem]
        _support[need_netem] = res = _probe(need_netem)
        return res


def _probe(need_netem: bool) -> tuple[bool, str]:
    if os.geteuid() != 0:
        return False, f"not root (euid {os.geteuid()}); network namespaces need root"
    ip, tc = _tool("ip"), _tool("tc")
    if not ip or not tc:
        return False, "'ip'/'tc' not found (install iproute2)"
    ns = f"{NS_PREFIX}{os.getpid()}-probe"
    r = _cmd([ip, "netns", "add", ns], check=False)
    if r.returncode != 0:
        return False, f"ip netns add failed: {r.stderr.strip()}"
    try:
        steps = [
            [ip, "-n", ns, "link", "add", "br0", "type", "bridge"],
            [ip, "-n", ns, "link", "add", "vpa", "type", "veth", "peer", "name", "vpb"],
            [tc, "-n", ns, "qdisc", "add", "dev", "vpa", "root", "handle", "1:", "tbf",
             "rate", "1gbit", "burst", "65536", "latency", "50ms"],
        ]
        if need_netem:
            steps.append([tc, "-n", ns, "qdisc", "add", "dev", "vpa", "parent", "1:1", "handle",
                          "10:", "netem", "delay", "1ms"])
        for argv in steps:
            r = _cmd(argv, check=False)
            if r.returncode != 0:
                what = "netem" if "netem" in argv else argv[3] if argv[0] == ip else "tc tbf"
                return False, f"{what} unavailable: '{' '.join(argv[1:])}': {r.stderr.strip()}"
        return True, ""
    finally:
        _cmd([ip, "netns", "del", ns], check=False)



_ids_lock = threading.Lock()
_ids_in_use: set[str] = set()


class Topology:
    """The hosts and links of a Cluster (mixed into launcher.Cluster, whose __init__ sets the
    attributes used here): _open_netns / _open_loopback build them, _teardown_netns removes them."""

    def _pick_id(self) -> str:
        pid = os.getpid()
        in_use = set(netns_list())
        with _ids_lock:
            for k in range(0, 1000):
                cid = str(pid) if k == 0 else f"{pid}.{k}"
                if cid in _ids_in_use:
                    continue
                if any(n.startswith(f"{NS_PREFIX}{cid}-") for n in in_use):
                    continue
                _ids_in_use.add(cid)
                return cid
        raise ClusterError("no free cluster id")

    def _pick_subnet(self) -> int:
        ip = _tool("ip")
        used = set()
        for n in netns_list():
            m = _NS_RE.match(n)
            if not m or m.group(3) != "h0":
                continue
            r = _cmd([ip, "-n", n, "-4", "-o", "addr", "show"], check=False)
            for x in re.findall(re.escape(SUBNET_BASE) + r"\.(\d+)\.", r.stdout):
                used.add(int(x))
        start = os.getpid() % 256
        for k in range(256):
            x = (start + k) % 256
            if x not in used:
                return x
        return start  # every /24 taken by some live cluster: harmless, they are separate stacks

    def _open_loopback(self) -> None:
        self.mode = "loopback"
        self.addrs = ["127.0.0.1"] * self.hosts
        self.master_addr = "127.0.0.1"
        self.master_port = _free_port()

    def _open_netns(self) -> None:
        ip, tc = _tool("ip"), _tool("tc")
        self.mode = "netns"
        self.id = self._pick_id()
        x = self._pick_subnet()
        self.subnet = f"{SUBNET_BASE}.{x}.0/24"
        self.addrs = [f"{SUBNET_BASE}.{x}.{i + 1}" for i in range(self.hosts)]
        self.master_addr = self.addrs[0]
        self.master_port = MASTER_PORT
        burst_us = int(os.environ.get("TICTAC_CLUSTER_BURST_US", "4000"))
        burst = max(65536, self.rate_bps * burst_us // 1_000_000)
        qlat = os.environ.get("TICTAC_CLUSTER_TBF_LATENCY", "50ms")
        tbf = ["tbf", "rate", self.rate_str, "burst", str(burst), "latency", qlat]
        if self.latency_ms > 0:
            ok, why = netns_support(need_netem=True)
            self.latency_applied = ok
            if not ok:
                _say(f"WARNING: --latency-ms {self.latency_ms} NOT applied: {why}")

        br = self.bridge_ns = f"{NS_PREFIX}{self.id}-br"
        self._add_ns(br)
        _cmd([ip, "-n", br, "link", "set", "lo", "up"])
        _cmd([ip, "-n", br, "link", "add", "br0", "type", "bridge"])
        _cmd([ip, "-n", br, "link", "set", "br0", "up"])
        for i in range(self.hosts):
            h = f"{NS_PREFIX}{self.id}-h{i}"
            self._add_ns(h)
            _cmd([ip, "-n", h, "link", "set", "lo", "up"])
            _cmd([ip, "-n", br, "link", "add", f"vh{i}", "type", "veth", "peer", "name", "eth0", "netns", h])
            _cmd([ip, "-n", br, "link", "set", f"vh{i}", "master", "br0"])
            _cmd([ip, "-n", br, "link", "set", f"vh{i}", "up"])
            _cmd([ip, "-n", h, "addr", "add", f"{self.addrs[i]}/24", "dev", "eth0"])
            _cmd([ip, "-n", h, "link", "set", "eth0", "up"])
            _cmd([tc, "-n", h, "qdisc", "add", "dev", "eth0", "root", "handle", "1:", *tbf])
            if self.latency_applied:
                _cmd([tc, "-n", h, "qdisc", "add", "dev", "eth0", "parent", "1:1", "handle", "10:",
                      "netem", "delay", f"{self.latency_ms}ms", "limit", "100000"])
            _cmd([tc, "-n", br, "qdisc", "add", "dev", f"vh{i}", "root", "handle", "1:", *tbf])
        self._burst = burst

    def _add_ns(self, ns: str) -> None:
        _cmd([_tool("ip"), "netns", "add", ns])
        self.namespaces.append(ns)

    def _teardown_netns(self) -> None:
        if not self.namespaces:
            return
        ip = _tool("ip")
        ours = {p.popen.pid for p in self._procs if p.popen is not None}
        for ns in reversed(self.namespaces):
            # Only processes of our own process groups are killed; anything else is named.
            for pid in _ns_pids(ns):
                try:
                    pg = os.getpgid(pid)
                except ProcessLookupError:
                    continue
                if pg in ours:
                    _kill(pid, signal.SIGKILL)
                else:
                    _say(f"warning: process {pid} (not started by this launcher) is still in {ns}")
            r = _cmd([ip, "netns", "del", ns], check=False)
            if r.returncode != 0:
                _say(f"warning: could not delete namespace {ns}: {r.stderr.strip()}")
        left = [n for n in netns_list() if n in self.namespaces]
        if left:
            _say(f"warning: namespaces still present after teardown: {' '.join(left)}")
        self.namespaces = []

    def _report(self) -> None:
        if self.quiet:
            return
        if self.mode == "netns":
            lat = (f"{self.latency_ms} ms one-way (netem)" if self.latency_applied
                   else "none" if not self.latency_ms else "NOT applied (no netem)")
            _say(f"mode netns: {self.hosts} host(s), namespaces {NS_PREFIX}{self.id}-h0..h{self.hosts - 1}, "
                 f"bridge in {self.bridge_ns}, subnet {self.subnet}, rate {self.rate_str} "
                 f"({self.rate_bps} B/s) each way per host (tbf burst {self._burst} B), added latency {lat}")
        else:
            _say(f"mode loopback (NOT network namespaces): {self.reason}; all {self.hosts} rank(s) on "
                 f"127.0.0.1, no kernel shaping: each process's TCP egress is limited in process by "
                 f"TICTAC_RATE_LIMIT={self.rate_bps} B/s (the tictac transport only; other traffic is unshaped)" + ("; --latency-ms is not emulated" if self.latency_ms else ""))
        over = " (oversubscribed)" if self.hosts * self.threads_per_proc > self.cores_available else ""
        _say(f"cores: {self.threads_per_proc} per process (OMP_NUM_THREADS=TICTAC_TORCH_THREADS="
             f"{self.threads_per_proc}), {self.hosts} process(es) on {self.cores_available} usable core(s){over}; "
             f"logs in {self.log_dir}")

    # -- running jobs ---------------------------------------------------------------------------


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass



def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]



def cleanup(kill_orphans: bool = False, verbose: bool = True) -> list[str]:
    """Delete leftover ttc-* namespaces whose creator pid is dead. Returns the names deleted."""
    ip = _tool("ip")
    removed = []
    if not ip:
        return removed
    for ns in netns_list():
        m = _NS_RE.match(ns)
        if not m:
            continue
        pid = int(m.group(1))
        if _pid_alive(pid):
            if verbose:
                _say(f"keeping {ns}: its creator pid {pid} is alive")
            continue
        inside = _ns_pids(ns)
        if inside:
            if kill_orphans:
                for p in inside:
                    _kill(p, signal.SIGKILL)
                if verbose:
                    _say(f"{ns}: killed orphaned processes {inside}")
            elif verbose:
                _say(f"{ns}: processes still inside (not killed; use --kill-orphans): {inside}")
        r = _cmd([ip, "netns", "del", ns], check=False)
        if r.returncode == 0:
            removed.append(ns)
            if verbose:
                _say(f"deleted {ns} (creator pid {pid} is gone)")
        elif verbose:
            _say(f"could not delete {ns}: {r.stderr.strip()}")
    if verbose and not removed:
        _say("nothing to clean up")
    return removed

