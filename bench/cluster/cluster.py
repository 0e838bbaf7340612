#!/usr/bin/env python3
"""Emulated cluster launcher: run an N-process job, one process per emulated host.

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

Every process gets, besides the caller's environment and ``env_extra``:
  RANK, WORLD_SIZE, LOCAL_RANK (= RANK), LOCAL_WORLD_SIZE (= WORLD_SIZE, so LOCAL_RANK stays
  below it), MASTER_ADDR (rank 0's address), MASTER_PORT (29500 in netns mode, where each host
  has its own stack; a free port chosen per job in loopback mode), TICTAC_LISTEN_ADDR (its own
  address), TICTAC_CLUSTER_RATE (bytes/s of the shaping), TICTAC_CLUSTER_MODE (netns|loopback),
  TICTAC_CLUSTER_ADDRS (every rank's address, comma separated, by rank), OMP_NUM_THREADS and
  TICTAC_TORCH_THREADS (threads per process; default max(1, usable cores // hosts)), and in
  loopback mode TICTAC_RATE_LIMIT (bytes/s).

The literal string ``{rank}`` in any argument is replaced by the rank. Each process's stdout and
stderr go to ``<log_dir>/rank<i>.log`` (``<log_dir>/<name>/rank<i>.log`` for a named job) and
are echoed prefixed with ``[rank i]``.

Command line::

    cluster.py run --hosts N --rate 1gbit [--latency-ms L] [--threads-per-proc T]
                   [--log-dir DIR] [--timeout S] [--loopback] -- CMD ARGS...
    cluster.py cleanup [--kill-orphans]

``run`` exits 0 when every rank exits 0; with the status of the first rank that failed (the others
are terminated after a short grace period; the rank and the tail of its log are printed); 124
on --timeout (default 1800 s); 130/143 on SIGINT/SIGTERM; 2 on bad input (e.g. a bad rate).
``cleanup`` deletes leftover ``ttc-*`` namespaces whose creator pid is dead (and with
--kill-orphans, kills the processes still inside them first; otherwise it only names them).

API::

    from cluster import Cluster, parse_rate
    with Cluster(hosts=2, rate="1gbit", log_dir="logs") as c:    # namespaces made once
        print(c.mode, c.addrs, c.master_addr, c.rate_bps)
        codes = c.run([["python3", "worker.py", "{rank}"]] * 2, env_extra={"X": "1"})
        codes = c.run([["python3", "other.py"]] * 2, env_extra={}, name="job2")
        # codes: list[int], one per rank (negative = killed by that signal);
        # c.last_failure: None or {"rank", "returncode", "log", "tail"}
    # leaving the block kills what is left and deletes every namespace, veth and the bridge

``Cluster(hosts, rate, latency_ms=0, threads_per_proc=None, log_dir=None, loopback=False,
timeout=1800, echo=True, fail_grace=1.0, kill_grace=3.0, handle_signals=True, quiet=False)``;
``rate`` is a tc rate string (``<n>bit|kbit|mbit|gbit``) or an int in bytes/s.
``run(cmd_per_rank, env_extra=None, timeout=None, name=None) -> list[int]``: one argv per rank
(or a single argv, used for every rank); raises ``ClusterTimeout`` (``.codes``) after killing
everything when the job runs past ``timeout``. Teardown is guaranteed on a normal exit, an
exception, SIGINT/SIGTERM/SIGHUP (the handlers, installed while the cluster is open when it is
opened in the main thread, raise ``Interrupted``; ``.signum``), and at interpreter exit (atexit).
Only processes the launcher started (and their process groups) are ever signalled.
Other names: ``parse_rate(s) -> bytes/s``, ``cleanup(kill_orphans=False) -> list[str]``,
``netns_support() -> (bool, reason)``, ``RateError``, ``ClusterError``.

``--latency-ms L`` adds L ms of one-way delay with netem on each host's egress (so a round trip
between two hosts takes 2L); where the kernel has no netem the launcher says so and runs without
added latency (``Cluster.latency_applied`` is False). In loopback mode no latency is added.
Tunables: TICTAC_CLUSTER_BURST_US (tbf bucket depth in microseconds at the rate, default 4000,
at least 64 KiB), TICTAC_CLUSTER_TBF_LATENCY (tbf queue latency, default 50ms).
"""

from __future__ import annotations

import argparse
import atexit
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

MASTER_PORT = 29500
SUBNET_BASE = "10.232"
NS_PREFIX = "ttc-"
MAX_HOSTS = 250
LOG_TAIL_LINES = 20

_NS_RE = re.compile(r"^ttc-(\d+)(?:\.(\d+))?-(h\d+|br|probe)$")
_RATE_RE = re.compile(r"^([0-9]+)(bit|kbit|mbit|gbit)$")
_RATE_MULT = {"bit": 1, "kbit": 1000, "mbit": 1000**2, "gbit": 1000**3}


class ClusterError(Exception):
    """The cluster could not be set up or used."""


class RateError(ClusterError, ValueError):
    """A rate string that is not <n>bit|kbit|mbit|gbit."""


class ClusterTimeout(ClusterError):
    """A job ran past its timeout; everything was killed. ``codes``: the exit statuses."""

    def __init__(self, msg: str, codes: list[int]):
        super().__init__(msg)
        self.codes = codes


class Interrupted(BaseException):
    """SIGINT/SIGTERM/SIGHUP arrived while a cluster was open (raised by its handler)."""

    def __init__(self, signum: int):
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signum = signum


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


# ---------------------------------------------------------------------------------------------
# the cluster

_ids_lock = threading.Lock()
_ids_in_use: set[str] = set()


class _Proc:
    def __init__(self, rank: int, popen: subprocess.Popen | None, log_path: str):
        self.rank = rank
        self.popen = popen
        self.log_path = log_path
        self.reader: threading.Thread | None = None
        self.spawn_error: int | None = None  # exit status when it could not even start

    def poll(self) -> int | None:
        return self.spawn_error if self.popen is None else self.popen.poll()


class Cluster:
    """An emulated cluster of ``hosts`` hosts linked at ``rate``; see the module docstring."""

    def __init__(
        self,
        hosts: int,
        rate: str | int,
        latency_ms: float = 0,
        threads_per_proc: int | None = None,
        log_dir: str | None = None,
        loopback: bool = False,
        timeout: float = 1800,
        echo: bool = True,
        fail_grace: float = 1.0,
        kill_grace: float = 3.0,
        handle_signals: bool = True,
        quiet: bool = False,
    ):
        if not isinstance(hosts, int) or not 1 <= hosts <= MAX_HOSTS:
            raise ClusterError(f"hosts must be an integer in 1..{MAX_HOSTS}, not {hosts!r}")
        if isinstance(rate, int) and not isinstance(rate, bool):
            if rate <= 0:
                raise RateError(f"rate {rate} bytes/s must be positive")
            self.rate_bps, self.rate_str = rate, f"{rate * 8}bit"
        else:
            self.rate_bps, self.rate_str = parse_rate(rate), rate.strip().lower()
        if latency_ms < 0:
            raise ClusterError(f"latency_ms must be >= 0, not {latency_ms}")
        ncores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        if threads_per_proc is None:
            threads_per_proc = max(1, ncores // hosts)
        if threads_per_proc < 1:
            raise ClusterError(f"threads_per_proc must be >= 1, not {threads_per_proc}")
        self.hosts = hosts
        self.latency_ms = latency_ms
        self.latency_applied = False
        self.threads_per_proc = threads_per_proc
        self.cores_available = ncores
        self.log_dir = log_dir
        self.want_loopback = loopback
        self.timeout = timeout
        self.echo = echo
        self.fail_grace = fail_grace
        self.kill_grace = kill_grace
        self.handle_signals = handle_signals
        self.quiet = quiet

        self.mode: str | None = None  # "netns" or "loopback" once open
        self.reason = ""  # why loopback was used
        self.id: str | None = None
        self.subnet: str | None = None
        self.addrs: list[str] = []
        self.master_addr: str | None = None
        self.master_port: int | None = None
        self.namespaces: list[str] = []  # created, in creation order
        self.bridge_ns: str | None = None
        self.last_failure: dict | None = None
        self.log_paths: list[str] = []

        self._open = False
        self._closed = False
        self._procs: list[_Proc] = []
        self._stopping = False
        self._pending_signal: int | None = None
        self._old_handlers: dict[int, object] = {}
        self._out_lock = threading.Lock()

    # -- lifecycle ------------------------------------------------------------------------------

    def __enter__(self) -> "Cluster":
        self.open()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def open(self) -> "Cluster":
        if self._open or self._closed:
            raise ClusterError("a Cluster can be opened once")
        self._open = True
        atexit.register(self.close)
        self._install_signals()
        try:
            if self.log_dir is None:
                self.log_dir = tempfile.mkdtemp(prefix="ttc-cluster-logs-")
            os.makedirs(self.log_dir, exist_ok=True)
            if self.want_loopback:
                self.reason = "--loopback was asked for"
            else:
                ok, why = netns_support()
                if not ok:
                    self.reason = why
            if self.reason:
                self._open_loopback()
            else:
                self._open_netns()
            self._report()
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Kill what is left and delete everything created. Idempotent; never raises."""
        if self._closed:
            return
        self._closed = True
        self._stopping = True
        try:
            self._stop_all(self._procs)
        except BaseException as e:  # keep going: the namespaces must go
            _say(f"warning: stopping processes: {e}")
        try:
            self._teardown_netns()
        except BaseException as e:
            _say(f"warning: teardown: {e}")
        with _ids_lock:
            _ids_in_use.discard(self.id)
        try:
            atexit.unregister(self.close)
        except Exception:
            pass
        self._restore_signals()

    # -- signals --------------------------------------------------------------------------------

    def _install_signals(self) -> None:
        if not self.handle_signals or threading.current_thread() is not threading.main_thread():
            return
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            try:
                self._old_handlers[s] = signal.signal(s, self._on_signal)
            except (ValueError, OSError):
                pass

    def _restore_signals(self) -> None:
        for s, h in self._old_handlers.items():
            try:
                signal.signal(s, h)
            except (ValueError, OSError, TypeError):
                pass
        self._old_handlers.clear()

    def _on_signal(self, signum, frame) -> None:
        if self._stopping:  # already tearing down: finish that first
            self._pending_signal = self._pending_signal or signum
            return
        raise Interrupted(signum)

    # -- setup ----------------------------------------------------------------------------------

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

    def env_for(self, rank: int, env_extra: dict | None = None, master_port: int | None = None) -> dict:
        env = dict(os.environ)
        env.update(
            RANK=str(rank),
            WORLD_SIZE=str(self.hosts),
            LOCAL_RANK=str(rank),
            LOCAL_WORLD_SIZE=str(self.hosts),
            MASTER_ADDR=self.master_addr,
            MASTER_PORT=str(master_port or self.master_port),
            TICTAC_LISTEN_ADDR=self.addrs[rank],
            TICTAC_CLUSTER_RATE=str(self.rate_bps),
            TICTAC_CLUSTER_MODE=self.mode,
            TICTAC_CLUSTER_ADDRS=",".join(self.addrs),
            OMP_NUM_THREADS=str(self.threads_per_proc),
            TICTAC_TORCH_THREADS=str(self.threads_per_proc),
        )
        if self.mode == "loopback":
            env["TICTAC_RATE_LIMIT"] = str(self.rate_bps)
        else:
            env.pop("TICTAC_RATE_LIMIT", None)  # the kernel shapes; do not limit twice
        for k, v in (env_extra or {}).items():
            env[str(k)] = str(v)
        return env

    def run(self, cmd_per_rank, env_extra: dict | None = None, timeout: float | None = None,
            name: str | None = None) -> list[int]:
        """Run one job: argv per rank (or one argv for all). Returns the exit statuses by rank."""
        if not self._open or self._closed:
            raise ClusterError("the cluster is not open")
        if cmd_per_rank and isinstance(cmd_per_rank[0], str):
            cmd_per_rank = [list(cmd_per_rank)] * self.hosts
        if len(cmd_per_rank) != self.hosts or any(not c for c in cmd_per_rank):
            raise ClusterError(f"need {self.hosts} non-empty commands, one per rank; got {len(cmd_per_rank)}")
        timeout = self.timeout if timeout is None else timeout
        log_dir = os.path.join(self.log_dir, name) if name else self.log_dir
        os.makedirs(log_dir, exist_ok=True)
        port = _free_port() if self.mode == "loopback" else self.master_port
        self.last_failure = None
        procs: list[_Proc] = []
        self._procs = procs
        timed_out = False
        try:
            # A signal while spawning is held until every started child is on record.
            self._stopping = True
            for rank, cmd in enumerate(cmd_per_rank):
                argv = [str(a).replace("{rank}", str(rank)) for a in cmd]
                if self.mode == "netns":
                    argv = [_tool("ip"), "netns", "exec", f"{NS_PREFIX}{self.id}-h{rank}", *argv]
                procs.append(self._spawn(rank, argv, self.env_for(rank, env_extra, port), log_dir))
            self.log_paths = [p.log_path for p in procs]
            self._stopping = False
            if self._pending_signal:
                raise Interrupted(self._pending_signal)
            timed_out = self._wait(procs, timeout)
        finally:
            self._stopping = True
            try:
                self._stop_all(procs)
            finally:
                self._stopping = False
                sig, self._pending_signal = self._pending_signal, None
                if sig:
                    raise Interrupted(sig)
        codes = [p.poll() for p in procs]
        if self.last_failure:
            f = self.last_failure
            f["tail"] = _tail(f["log"], LOG_TAIL_LINES)
            _say(f"rank {f['rank']} failed with exit status {_status_str(f['returncode'])}; "
                 f"last lines of {f['log']}:\n" + "".join(f"    {line}\n" for line in f["tail"]))
        if timed_out:
            _say(f"TIMEOUT: the job ran past {timeout:g} s; every process was killed "
                 f"(exit statuses {codes})")
            raise ClusterTimeout(f"job timed out after {timeout:g} s", codes)
        return codes

    def _spawn(self, rank: int, argv: list[str], env: dict, log_dir: str) -> _Proc:
        log_path = os.path.join(log_dir, f"rank{rank}.log")
        logf = open(log_path, "wb")
        try:
            popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, env=env, start_new_session=True)
        except OSError as e:
            msg = f"cluster: could not start {argv[0]!r}: {e}\n".encode()
            logf.write(msg)
            logf.close()
            self._echo(rank, msg)
            p = _Proc(rank, None, log_path)
            p.spawn_error = 127
            return p
        p = _Proc(rank, popen, log_path)
        p.reader = threading.Thread(target=self._pump, args=(rank, popen.stdout, logf),
                                    name=f"cluster-rank{rank}", daemon=True)
        p.reader.start()
        return p

    def _pump(self, rank: int, pipe, logf) -> None:
        try:
            for line in iter(pipe.readline, b""):
                logf.write(line)
                logf.flush()
                self._echo(rank, line)
        except (OSError, ValueError):
            pass
        finally:
            try:
                logf.close()
                pipe.close()
            except OSError:
                pass

    def _echo(self, rank: int, line: bytes) -> None:
        if not self.echo:
            return
        text = line.decode("utf-8", "replace")
        if not text.endswith("\n"):
            text += "\n"
        with self._out_lock:
            try:
                sys.stdout.write(f"[rank {rank}] {text}")
                sys.stdout.flush()
            except (OSError, ValueError):
                pass

    def _wait(self, procs: list[_Proc], timeout: float) -> bool:
        """Wait for every rank; on the first failure give the others fail_grace, then stop them.
        Returns True when the timeout hit."""
        deadline = time.monotonic() + timeout
        failed_at = None
        while True:
            alive = False
            for p in procs:
                rc = p.poll()
                if rc is None:
                    alive = True
                elif rc != 0 and self.last_failure is None:
                    self.last_failure = {"rank": p.rank, "returncode": rc, "log": p.log_path}
                    failed_at = time.monotonic()
                    _say(f"rank {p.rank} exited with status {_status_str(rc)}; stopping the other "
                         f"ranks in {self.fail_grace:g} s")
            if not alive:
                return False
            now = time.monotonic()
            if failed_at is not None and now - failed_at >= self.fail_grace:
                return False
            if now >= deadline:
                return True
            time.sleep(0.05)

    def _stop_all(self, procs: list[_Proc]) -> None:
        """SIGTERM the process group of every rank still running, SIGKILL after kill_grace."""
        live = [p for p in procs if p.popen is not None and p.popen.poll() is None]
        for p in live:
            _killpg(p.popen.pid, signal.SIGTERM)
        end = time.monotonic() + self.kill_grace
        while any(p.popen.poll() is None for p in live) and time.monotonic() < end:
            time.sleep(0.05)
        for p in procs:
            if p.popen is None:
                continue
            # The group outlives its leader when a rank left children behind: kill those too.
            # (The kernel does not reuse a pid while a process group of that id exists.)
            _killpg(p.popen.pid, signal.SIGKILL)
            try:
                p.popen.wait(timeout=5)
            except subprocess.TimeoutExpired:
                _say(f"warning: rank {p.rank} (pid {p.popen.pid}) did not die")
        for p in procs:
            if p.reader is not None:
                p.reader.join(timeout=2)


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path: str, n: int) -> list[str]:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return []
    return lines[-n:]


def _status_str(rc: int) -> str:
    if rc < 0:
        try:
            return f"{rc} (killed by {signal.Signals(-rc).name})"
        except ValueError:
            return str(rc)
    return str(rc)


def _exit_status(rc: int) -> int:
    return 128 - rc if rc < 0 else rc


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


# ---------------------------------------------------------------------------------------------
# command line


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="cluster.py", description="Emulated cluster launcher (see README.md).")
    sub = ap.add_subparsers(dest="action", required=True)
    r = sub.add_parser("run", help="run CMD as N ranks on an emulated cluster",
                       usage="cluster.py run --hosts N --rate RATE [options] -- CMD ARGS...")
    r.add_argument("--hosts", type=int, required=True)
    r.add_argument("--rate", required=True, help="tc rate: <n>bit|kbit|mbit|gbit, e.g. 1gbit")
    r.add_argument("--latency-ms", type=float, default=0.0)
    r.add_argument("--threads-per-proc", type=int, default=None)
    r.add_argument("--log-dir", default=None)
    r.add_argument("--timeout", type=float, default=1800.0)
    r.add_argument("--loopback", action="store_true")
    c = sub.add_parser("cleanup", help="delete leftover ttc-* namespaces of dead launchers")
    c.add_argument("--kill-orphans", action="store_true",
                   help="also kill processes still running inside those namespaces")
    return ap


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    cmd: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, cmd = argv[:i], argv[i + 1:]
    args = _parser().parse_args(argv)  # exits 2 on bad flags
    if args.action == "cleanup":
        cleanup(kill_orphans=args.kill_orphans)
        return 0
    if not cmd:
        _say("run needs a command after '--' (cluster.py run --hosts N --rate R -- CMD ARGS...)")
        return 2
    try:
        parse_rate(args.rate)
    except RateError as e:
        _say(f"bad --rate: {e}")
        return 2
    if args.timeout <= 0:
        _say(f"bad --timeout {args.timeout:g}: must be > 0")
        return 2
    try:
        cl = Cluster(args.hosts, args.rate, latency_ms=args.latency_ms,
                     threads_per_proc=args.threads_per_proc, log_dir=args.log_dir,
                     loopback=args.loopback, timeout=args.timeout)
    except ClusterError as e:
        _say(f"bad input: {e}")
        return 2
    try:
        with cl:
            codes = cl.run([cmd] * args.hosts)
            if cl.last_failure:
                return _exit_status(cl.last_failure["returncode"])
            bad = [(r, c) for r, c in enumerate(codes) if c != 0]
            if bad:  # cannot happen without last_failure, but never report success wrongly
                return _exit_status(bad[0][1])
            _say(f"all {args.hosts} rank(s) exited 0")
            return 0
    except ClusterTimeout:
        return 124
    except Interrupted as e:
        _say(f"{e}: stopped every rank and removed the cluster")
        return 128 + e.signum
    except KeyboardInterrupt:
        _say("interrupted: stopped every rank and removed the cluster")
        return 130
    except ClusterError as e:
        _say(f"error: {e}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
