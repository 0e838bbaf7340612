"""Emulated cluster launcher: run an N-process job, one process per emulated host (the hosts
and links: topology.py).

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

    bench/cluster/cluster run --hosts N --rate 1gbit [--latency-ms L] [--threads-per-proc T]
                   [--log-dir DIR] [--timeout S] [--loopback] -- CMD ARGS...
    bench/cluster/cluster cleanup [--kill-orphans]

``run`` exits 0 when every rank exits 0; with the status of the first rank that failed (the others
are terminated after a short grace period; the rank and the tail of its log are printed); 124
on --timeout (default 1800 s); 130/143 on SIGINT/SIGTERM; 2 on bad input (e.g. a bad rate).
``cleanup`` deletes leftover ``ttc-*`` namespaces whose creator pid is dead (and with
--kill-orphans, kills the processes still inside them first; otherwise it only names them).

API::

    from bench.cluster import Cluster, parse_rate
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

"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

from .topology import (MAX_HOSTS, NS_PREFIX, ClusterError, RateError, Topology, _free_port, _ids_in_use, _ids_lock,
                       _say, _tool, netns_support, parse_rate)

LOG_TAIL_LINES = 20


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



class _Proc:
    def __init__(self, rank: int, popen: subprocess.Popen | None, log_path: str):
        self.rank = rank
        self.popen = popen
        self.log_path = log_path
        self.reader: threading.Thread | None = None
        self.spawn_error: int | None = None  # exit status when it could not even start

    def poll(self) -> int | None:
        return self.spawn_error if self.popen is None else self.popen.poll()



class Cluster(Topology):
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



def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


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
