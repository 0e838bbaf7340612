"""Per-iteration instrumentation: IterationStats, JSON lines, Chrome/Perfetto traces.

Times inside an IterationStats are milliseconds from the iteration's start (``t0_unix`` is
that start in seconds since the epoch, so ranks on one clock line up).
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from tictac.intervals import union_length

__all__ = ["IterationStats", "ServerIterationStats", "union_ms", "write_json_lines",
           "write_chrome_trace", "summarize", "to_unix"]

# perf_counter -> unix time, fixed once per process.
_OFFSET = time.time() - time.perf_counter()


def to_unix(t_perf: float) -> float:
    return t_perf + _OFFSET


def union_ms(intervals: Sequence[Sequence[float]]) -> float:
    """Total length of the union of [start, end] intervals."""
    return union_length(intervals)


@dataclass
class IterationStats:
    """One worker's iteration.

    compute: [name, start_ms, end_ms] per leaf-module forward (start after its parameters
      arrived), plus one ``"backward"`` interval in training.
    pulls: [param, posted_ms, arrived_ms, bytes, server] per parameter.
    pushes: [param, start_ms, done_ms, bytes, server] per gradient (training).
    arrival_order: parameter names by arrival time; expected_order: the policy's send order.
    stall_ms: time the forward spent blocked waiting for parameters.
    arrival_source: "future" (Work future callbacks: exact arrival times) or "watcher-thread"
      (a thread waiting the transfers in posted order: exact for in-order arrivals).
    """
    rank: int
    worker: int
    iter: int
    warmup: bool
    mode: str
    policy: str
    t0_unix: float
    iter_ms: float = 0.0
    forward: Optional[List[float]] = None
    backward: Optional[List[float]] = None
    compute: List[List[Any]] = field(default_factory=list)
    pulls: List[List[Any]] = field(default_factory=list)
    pushes: List[List[Any]] = field(default_factory=list)
    arrival_order: List[str] = field(default_factory=list)
    expected_order: List[str] = field(default_factory=list)
    stall_ms: float = 0.0
    arrival_source: str = ""
    metrics: Dict[str, Optional[float]] = field(default_factory=dict)

    def comm_intervals(self) -> List[Tuple[str, float, float]]:
        """Pull transfers as serial intervals on the worker's link: each from max(posted,
        previous arrival) to its arrival, in arrival order (SCHEDULING.md §2: transfers to one
        worker are effectively serial)."""
        out, prev = [], None
        for name, posted, arrived, *_ in sorted(self.pulls, key=lambda p: p[2]):
            start = posted if prev is None else max(posted, prev)
            out.append((name, start, arrived))
            prev = arrived
        return out

    def compute_metrics(self) -> Dict[str, Optional[float]]:
        """N, C, makespan m, E (scheduling efficiency) and S (SCHEDULING.md §6) from the
        recorded intervals (pushes count as communication too)."""
        comm = [(s, e) for _, s, e in self.comm_intervals()] + [(p[1], p[2]) for p in self.pushes]
        comp = [(c[1], c[2]) for c in self.compute]
        n, c = union_ms(comm), union_ms(comp)
        starts = [s for s, _ in comm + comp]
        ends = [e for _, e in comm + comp]
        m = (max(ends) - min(starts)) if starts else 0.0
        u, l = n + c, max(n, c)
        e = (u - m) / (u - l) if u - l > 1e-9 else None
        s = (min(n, c) / l) if l > 0 else None
        self.metrics = {"comm_ms": n, "compute_ms": c, "makespan_ms": m, "E": e, "S": s}
        return self.metrics

    def to_json(self) -> Dict[str, Any]:
        return asdict(self)


@dataclass
class ServerIterationStats:
    """One server's iteration: sends issued/completed per worker, gradients received, update."""
    rank: int
    iter: int
    t0_unix: float
    iter_ms: float = 0.0
    sends: List[List[Any]] = field(default_factory=list)     # [param, worker_rank, issued_ms, done_ms]
    grads: List[List[Any]] = field(default_factory=list)     # [param, worker_rank, posted_ms, arrived_ms]
    update: Optional[List[float]] = None                     # [start_ms, end_ms] of the updates
    update_busy_ms: float = 0.0                              # time spent updating (eager: the sum)

    def to_json(self) -> Dict[str, Any]:
        return asdict(self)


def write_json_lines(path: str, stats: Sequence[IterationStats]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for s in sorted(stats, key=lambda s: (s.iter, s.rank)):
            f.write(json.dumps(s.to_json()) + "\n")


_TIDS = {"iteration": 1, "compute": 2, "pull": 3, "push": 4, "send": 5, "grad": 6, "update": 7}


def write_chrome_trace(path: str, worker_stats: Sequence[IterationStats],
                       server_stats: Sequence[ServerIterationStats] = (), num_ps: int = 0) -> None:
    """A Chrome trace-event JSON file (open in ui.perfetto.dev or chrome://tracing): one
    process per rank; threads for iterations, compute, pulls (serialised arrival intervals)
    and pushes on workers, sends/gradients/updates on servers."""
    events: List[Dict[str, Any]] = []
    ranks = sorted({s.rank for s in worker_stats} | {s.rank for s in server_stats})
    base = min([s.t0_unix for s in worker_stats] + [s.t0_unix for s in server_stats] or [0.0])

    def us(t0: float, ms: float) -> float:
        return (t0 - base) * 1e6 + ms * 1e3

    def x(rank, tid, name, t0, s_ms, e_ms, args=None):
        ev = {"name": name, "ph": "X", "pid": rank, "tid": _TIDS[tid], "ts": us(t0, s_ms),
              "dur": max(0.0, (e_ms - s_ms) * 1e3)}
        if args:
            ev["args"] = args
        events.append(ev)

    for r in ranks:
        label = f"rank {r} (server {r})" if r < num_ps else f"rank {r} (worker {r - num_ps})"
        events.append({"name": "process_name", "ph": "M", "pid": r, "args": {"name": label}})
        events.append({"name": "process_sort_index", "ph": "M", "pid": r, "args": {"sort_index": r}})
        for tname, tid in _TIDS.items():
            events.append({"name": "thread_name", "ph": "M", "pid": r, "tid": tid, "args": {"name": tname}})
    for s in worker_stats:
        x(s.rank, "iteration", f"iter {s.iter}", s.t0_unix, 0.0, s.iter_ms, {"policy": s.policy})
        if s.forward:
            x(s.rank, "compute", "forward", s.t0_unix, s.forward[0], s.forward[1])
        for name, a, b in s.compute:
            x(s.rank, "compute", name, s.t0_unix, a, b)
        for name, a, b in s.comm_intervals():
            x(s.rank, "pull", name, s.t0_unix, a, b)
        for name, a, b, nbytes, server in s.pushes:
            x(s.rank, "push", name, s.t0_unix, a, b, {"bytes": nbytes, "server": server})
    for s in server_stats:
        x(s.rank, "iteration", f"iter {s.iter}", s.t0_unix, 0.0, s.iter_ms)
        for name, w, a, b in s.sends:
            x(s.rank, "send", f"{name} -> {w}", s.t0_unix, a, b)
        for name, w, a, b in s.grads:
            x(s.rank, "grad", f"{name} <- {w}", s.t0_unix, a, b)
        if s.update:
            x(s.rank, "update", "optimizer.step", s.t0_unix, s.update[0], s.update[1],
              {"busy_ms": s.update_busy_ms})
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, f)


def summarize(worker_stats: Sequence[IterationStats], batch: Optional[int] = None) -> Dict[str, Any]:
    """Median iteration ms per worker rank (warmup excluded), throughput, straggler spread."""
    measured = [s for s in worker_stats if not s.warmup]
    by_rank: Dict[int, List[float]] = {}
    by_iter: Dict[int, List[float]] = {}
    for s in measured:
        by_rank.setdefault(s.rank, []).append(s.iter_ms)
        by_iter.setdefault(s.iter, []).append(s.iter_ms)
    out: Dict[str, Any] = {
        "iterations": len(by_iter),
        "median_iter_ms": {r: statistics.median(v) for r, v in sorted(by_rank.items())},
    }
    if by_iter:
        slowest = [max(v) for v in by_iter.values()]
        out["median_iter_ms_all"] = statistics.median(slowest)
        out["straggler_spread_ms"] = statistics.mean(max(v) - min(v) for v in by_iter.values())
        if batch:
            samples = batch * len(by_rank) * len(by_iter)
            out["throughput_samples_s"] = samples / (sum(slowest) / 1e3) if sum(slowest) > 0 else None
        es = [s.metrics.get("E") for s in measured if s.metrics.get("E") is not None]
        out["median_E"] = statistics.median(es) if es else None
    return out
