"""Simulator inputs measured in the benchmark's own jobs (bench/e2e: simulate.py uses them).

The simulator (docs/simulator.md) takes a graph with per-op compute times, link bandwidths,
chunking, a backward factor and a PS update cost. Profiled alone (export_graph: one process, an
idle CPU, the nominal link), these describe a machine the cluster jobs do not run on: three
ranks share two cores, so compute is slower, and the transport does not fill the nominal link.
This module measures each of those inputs from a job's JSON lines and Chrome trace, pools them
over the jobs of one (model, mode) (every policy: one setting, so one set of inputs), and turns
them into simulator arguments and a graph whose compute times are the profile's scaled to the
measured forward time. Nothing here changes a scheduling algorithm; only its inputs.

Measured per worker and iteration (medians over all of them):
- forward_busy_ms: forward span - stall (time waiting for parameters): the worker's own
  forward work, hooks and functional ops included.
- backward_ms: the backward interval (training).
- rate_Bps: the PS uplink's effective rate: bytes pulled by all workers in the iteration over
  [the server's first send issued, the last pull arrived] (the sends are all issued at once, so
  the uplink is never idle in that window).
- cluster_makespan_ms (not an input: the measurement to compare the simulator with): from the
  servers' first send of the iteration to its end on every rank (the workers' last compute or
  push; the servers' last update), the window the simulator's iteration covers. A worker's
  own iter_ms also holds its wait for the slowest worker and the servers (it starts when its
  previous iteration ended there).
- update_ms: the server's time spent updating (training; the trace's "update" events: their
  busy_ms, the sum over the per-parameter updates of update="eager", else their duration).
"""

from __future__ import annotations

import json
import os
import statistics
from typing import Any, Dict, List, Optional

# the transport's settings (docs/transport.md); the simulator chunks like the transport does.
# Default "auto" (transport/chunk_tuner.h): chunk = rate x 100 us as a power of two in 64K..8M,
# window 2 on TCP (chunks complete once the kernel took them); auto_chunk() mirrors that rule.
CHUNK_SETTING = os.environ.get("TICTAC_CHUNK_BYTES", "auto") or "auto"
WINDOW_SETTING = os.environ.get("TICTAC_WINDOW", "auto") or "auto"
_SIZE_UNITS = {"": 1, "K": 1 << 10, "KIB": 1 << 10, "M": 1 << 20, "MIB": 1 << 20, "G": 1 << 30, "GIB": 1 << 30}


def _size(text: str) -> int:
    num = text.rstrip("KMGiBkmgib")
    return int(num) * _SIZE_UNITS[text[len(num):].upper()]


def auto_chunk(rate_Bps: float, target_s: float = 100e-6) -> int:
    import math
    ideal = max(rate_Bps * target_s, 1.0)
    return min(max(1 << round(math.log2(ideal)), 64 << 10), 8 << 20)


def chunk_bytes(rate_Bps: float) -> int:
    return auto_chunk(rate_Bps) if CHUNK_SETTING == "auto" else _size(CHUNK_SETTING)


WINDOW = 2 if WINDOW_SETTING == "auto" else int(WINDOW_SETTING)


def _med(xs: List[float]) -> Optional[float]:
    return statistics.median(xs) if xs else None


def measure(jsonl: str, trace: str) -> Dict[str, Any]:
    """The simulator inputs of one job (see the module comment). Missing pieces are None."""
    recs = [json.loads(line) for line in open(jsonl, encoding="utf-8") if line.strip()]
    meas = [r for r in recs if not r.get("warmup")]
    fwd = [(r["forward"][1] - r["forward"][0]) - r.get("stall_ms", 0.0) for r in meas if r.get("forward")]
    bwd = [r["backward"][1] - r["backward"][0] for r in meas if r.get("backward")]
    out: Dict[str, Any] = {"forward_busy_ms": _med(fwd), "backward_ms": _med(bwd), "rate_Bps": None,
                           "update_ms": None, "cluster_makespan_ms": None}
    try:
        with open(trace, encoding="utf-8") as f:
            ev = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    except (OSError, ValueError, KeyError):
        return out
    servers = {e["pid"] for e in ev if e.get("tid") == 5}       # ranks with "send" events
    measured_iters = {r["iter"] for r in meas}
    # each rank's iteration windows, by iteration number (trace time: us from a common base)
    win: Dict[int, Dict[int, tuple]] = {}
    for e in ev:
        if e.get("tid") == 1 and e["name"].startswith("iter "):
            win.setdefault(int(e["name"].split()[1]), {})[e["pid"]] = (e["ts"], e["ts"] + e["dur"])
    rates, updates, spans = [], [], []
    for it in sorted(measured_iters):
        ranks = win.get(it, {})
        srv = [ranks[p] for p in servers if p in ranks]
        if not srv:
            continue
        lo = min(s for s, _ in srv)
        hi = max(e for _, e in srv)
        first_send = min((e["ts"] for e in ev if e["pid"] in servers and e.get("tid") == 5 and lo <= e["ts"] < hi),
                         default=None)
        arr, nbytes = [], 0
        for r in meas:
            if r["iter"] != it:
                continue
            w = ranks.get(r["rank"])
            if w is None:
                continue
            for _, _, arrived, b, *_ in r.get("pulls", []):
                arr.append(w[0] + arrived * 1e3)
                nbytes += b
        if first_send is not None and arr and max(arr) > first_send:
            rates.append(nbytes / ((max(arr) - first_send) / 1e6))
            # the iteration as the simulator sees it: from the first send to the end of the
            # iteration everywhere (the workers' ends; the servers' last update in training)
            spans.append((max(e for _, e in ranks.values()) - first_send) / 1e3)
        for e in ev:
            if e["pid"] in servers and e.get("tid") == 7 and lo <= e["ts"] < hi:
                busy = (e.get("args") or {}).get("busy_ms")      # eager updates: the summed time
                updates.append(busy if busy else e["dur"] / 1e3)
    out["rate_Bps"] = _med(rates)
    out["cluster_makespan_ms"] = _med(spans)
    out["update_ms"] = _med(updates)
    return out


def pool(ms: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Medians of each input over the jobs of one (model, mode)."""
    keys = ("forward_busy_ms", "backward_ms", "rate_Bps", "update_ms")
    return {k: _med([m[k] for m in ms if m.get(k) is not None]) for k in keys} | {"jobs": len(ms)}


def scaled_graph(graph: str, out_path: str, scale: float, note: str) -> str:
    """Write `graph` with every compute op's time multiplied by `scale` (recvs unchanged)."""
    with open(graph, encoding="utf-8") as f:
        g = json.load(f)
    for op in g["ops"]:
        if op["kind"] == "compute":
            op["time"] = op["time"] * scale
    g.setdefault("meta", {})["calibration"] = note
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(g, f)
    return out_path


def graph_compute_s(graph: str) -> float:
    with open(graph, encoding="utf-8") as f:
        return sum(op["time"] for op in json.load(f)["ops"] if op["kind"] == "compute")


def sim_inputs(p: Dict[str, Any], graph: str, mode: str, param_bytes: int, out_dir: str,
               tag: str, nominal_rate_Bps: float) -> Optional[Dict[str, Any]]:
    """Simulator arguments for the pooled inputs p: {"graph", "args", "inputs"}; None when the
    forward time was not measured."""
    if not p.get("forward_busy_ms"):
        return None
    prof = graph_compute_s(graph)
    if prof <= 0:
        return None
    scale = p["forward_busy_ms"] / 1e3 / prof
    rate = p["rate_Bps"] or nominal_rate_Bps
    chunk = chunk_bytes(rate)
    inputs = {"compute_scale": scale, "profiled_forward_ms": prof * 1e3, "rate_Bps": rate,
              "rate_source": "measured" if p["rate_Bps"] else "nominal", "chunk": chunk, "window": WINDOW,
              "jobs": p["jobs"]} | {k: p[k] for k in ("forward_busy_ms", "backward_ms", "update_ms")}
    args = ["--bandwidth", str(rate * 8), "--chunk", str(chunk), "--window", str(WINDOW)]
    if mode == "training":
        bf = (p["backward_ms"] / p["forward_busy_ms"]) if p.get("backward_ms") else 2.0
        upb = (p["update_ms"] / 1e3 / param_bytes) if p.get("update_ms") else 0.0
        inputs |= {"backward_factor": bf, "update_time_per_byte": upb}
        args += ["--backward-factor", f"{bf:.6g}", "--update-time-per-byte", f"{upb:.6g}"]
    os.makedirs(out_dir, exist_ok=True)
    path = scaled_graph(graph, os.path.join(out_dir, f"{tag}_calibrated.json"), scale,
                        f"compute times x {scale:.4g} = measured forward {p['forward_busy_ms']:.1f} ms / "
                        f"profiled {prof * 1e3:.1f} ms (bench/e2e/calibrate.py)")
    return {"graph": path, "args": args, "inputs": inputs}
