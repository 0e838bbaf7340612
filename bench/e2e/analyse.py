"""Reading one job's JSON lines (tictac.torch.train --log-json, or ddp_job.py): per-iteration
metrics, and the one-iteration trace cut.

``analyse(jsonls, batch)``: the measured iterations of one or more jobs of the same (model,
mode, policy) (one job per round; an iteration is keyed by (round, iter)). An iteration's time
is its slowest worker's; its straggler spread is slowest - fastest worker; E per worker is
(N + C - m) / (N + C - max(N, C)) from the union of its comm (N) and compute (C) intervals and
its makespan m.
"""

from __future__ import annotations

import json
import os
import statistics
from typing import Any, Dict, List, Optional, Tuple

from .common import nearest_rank, union_ms


def comm_intervals(rec: Dict[str, Any]) -> List[Tuple[str, float, float]]:
    """Pulls serialised on the worker's link (each from max(posted, previous arrival) to its
    arrival, in arrival order), then the gradient pushes as recorded."""
    out, prev = [], None
    for name, posted, arrived, *_ in sorted(rec.get("pulls", []), key=lambda p: p[2]):
        s = posted if prev is None else max(posted, prev)
        out.append((name, s, arrived))
        prev = arrived
    for name, s, e, *_ in rec.get("pushes", []):
        out.append((name + " (push)", s, e))
    return out


def worker_metrics(rec: Dict[str, Any]) -> Dict[str, Optional[float]]:
    comm = [(s, e) for _, s, e in comm_intervals(rec)]
    comp = [(c[1], c[2]) for c in rec.get("compute", [])]
    n, c = union_ms(comm), union_ms(comp)
    pts = comm + comp
    m = (max(e for _, e in pts) - min(s for s, _ in pts)) if pts else 0.0
    u, l_ = n + c, max(n, c)
    e = (u - m) / (u - l_) if u - l_ > 1e-9 and comm else None
    return {"N": n, "C": c, "m": m, "E": e}


def read_records(jsonl: str) -> List[Dict[str, Any]]:
    with open(jsonl, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def analyse(jsonls, batch: int) -> Dict[str, Any]:
    if isinstance(jsonls, str):
        jsonls = [jsonls]
    meas = []
    for rnd, path in enumerate(jsonls):
        for r in read_records(path):
            if not r.get("warmup"):
                r["_key"] = (rnd, r["iter"])
                meas.append(r)
    by_iter: Dict[Tuple[int, int], List[Dict[str, Any]]] = {}
    for r in meas:
        r["_m"] = worker_metrics(r)
        by_iter.setdefault(r["_key"], []).append(r)
    iters = sorted(by_iter)
    if not iters:
        raise ValueError(f"{', '.join(jsonls)}: no measured iterations")
    workers = sorted({r["worker"] for r in meas})
    slowest = [max(r["iter_ms"] for r in by_iter[i]) for i in iters]
    spread = [max(r["iter_ms"] for r in by_iter[i]) - min(r["iter_ms"] for r in by_iter[i]) for i in iters]
    mom = [max(r["iter_ms"] for r in by_iter[i]) / statistics.mean(r["iter_ms"] for r in by_iter[i])
           for i in iters]
    mk = [max(r["_m"]["m"] for r in by_iter[i]) for i in iters]
    es = [r["_m"]["E"] for r in meas if r["_m"]["E"] is not None]
    ejs = [r.get("metrics", {}).get("E") for r in meas if r.get("metrics", {}).get("E") is not None]
    n_ms = statistics.median(r["_m"]["N"] for r in meas)
    c_ms = statistics.median(r["_m"]["C"] for r in meas)
    med = statistics.median(slowest)
    # the measured iteration closest to the median: used for the timeline and the trace
    rep = min(iters, key=lambda i: (abs(max(r["iter_ms"] for r in by_iter[i]) - med), i))
    return {
        "iterations": len(iters), "workers": len(workers), "rounds": len(jsonls),
        "throughput": batch * len(workers) * len(iters) / (sum(slowest) / 1e3),
        "iter_ms": slowest, "iter_round": [i[0] for i in iters], "spread_ms": spread,
        "iter_ms_median": med, "iter_ms_p95": nearest_rank(slowest, 0.95),
        "iter_ms_mean": statistics.mean(slowest), "iter_ms_var": statistics.pvariance(slowest),
        "straggler_spread_ms": statistics.mean(spread), "straggler_spread_median_ms": statistics.median(spread),
        "straggler_max_over_mean": statistics.mean(mom),
        "efficiency": statistics.mean(es) if es else None,
        "efficiency_train_py": statistics.mean(ejs) if ejs else None,
        "measured_makespan_ms": statistics.median(mk),
        "comm_ms": n_ms, "compute_ms": c_ms, "a_measured": n_ms / c_ms if c_ms > 0 else None,
        "stall_ms": statistics.median(r.get("stall_ms", 0.0) for r in meas),
        "rep_iter": rep[1], "rep_round": rep[0],
        "rep": [{"worker": r["worker"], "rank": r["rank"], "iter_ms": r["iter_ms"],
                 "comm": comm_intervals(r), "compute": [tuple(c[:3]) for c in r.get("compute", [])]}
                for r in sorted(by_iter[rep], key=lambda r: r["worker"])],
    }


def one_iteration_trace(full: str, out: str, it: int) -> bool:
    """Cut the Chrome trace train.py wrote down to iteration `it` (all ranks)."""
    try:
        with open(full, encoding="utf-8") as f:
            ev = json.load(f)["traceEvents"]
    except (OSError, ValueError, KeyError):
        return False
    marks = [e for e in ev if e.get("ph") == "X" and e.get("tid") == 1 and e.get("name") == f"iter {it}"]
    if not marks:
        return False
    win = {e["pid"]: (e["ts"], e["ts"] + e["dur"]) for e in marks}   # each rank's own iteration

    def inside(e) -> bool:
        if e.get("ph") != "X":
            return True
        if e.get("tid") == 1:
            return e.get("name") == f"iter {it}"
        lo_hi = win.get(e.get("pid"))
        return lo_hi is not None and lo_hi[0] - 1.0 <= e["ts"] < lo_hi[1]

    keep = [e for e in ev if inside(e)]
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"traceEvents": keep, "displayTimeUnit": "ms",
                   "otherData": {"iteration": it, "source": os.path.basename(full)}}, f)
    return True

