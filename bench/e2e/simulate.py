"""The simulator next to each measurement: the model's graph (bundled in bench/graphs, or
exported), ``tictac simulate`` at the nominal inputs, and again with inputs measured in the
jobs themselves (siminputs.py)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

from . import siminputs
from .common import ROOT, log, short_name


def graph_for(spec: str, batch: int, image: int, num_classes: int, out_dir: str, threads: int,
              pythonpath: str) -> Optional[str]:
    name = short_name(spec)
    bundled = os.path.join(ROOT, "bench", "graphs", f"torch_{name}.json")
    if spec.startswith("torchvision:") and num_classes == 1000 and os.path.exists(bundled):
        try:
            meta = json.load(open(bundled, encoding="utf-8")).get("meta", {})
            if meta.get("batch") == batch and meta.get("image_size") == image:
                return bundled
        except (OSError, ValueError):
            pass
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"{name}_b{batch}_i{image}.json")
    if os.path.exists(path):
        return path
    cmd = [sys.executable, "-m", "tictac.torch.export_graph", "--model", spec, "--batch", str(batch),
           "--image-size", str(image), "--mode", "inference", "--threads", str(threads), "--out", path]
    r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=pythonpath),
                       cwd=ROOT)
    if r.returncode != 0:
        log(f"  warning: graph export failed ({' '.join(cmd)}): {r.stderr.strip()[-300:]}")
        return None
    return path


def simulate(tictac: str, graph: str, policy: str, mode: str, workers: int, ps: int, rate_bps: float,
             iters: int, extra: Sequence[str] = ()) -> Optional[Dict[str, Any]]:
    """`tictac simulate` at the nominal rate_bps (bytes/s), or with `extra` arguments (which
    then give the bandwidth themselves: siminputs.sim_inputs)."""
    bw = [] if "--bandwidth" in extra else ["--bandwidth", str(int(rate_bps * 8))]
    cmd = [tictac, "simulate", "--graph", graph, "--policy", policy, "--workers", str(workers),
           "--ps", str(ps), *bw, *extra, "--mode", mode, "--iterations",
           str(max(1, iters)), "--seed", "1", "--format", "json"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        log(f"  warning: simulator failed: {' '.join(cmd)}: {r.stderr.strip()[-300:]}")
        return None
    d = json.loads(r.stdout)
    return {"sim_makespan_ms": d["iteration_time_s"]["median"] * 1e3,
            "sim_iter_ms_p95": d["iteration_time_s"]["p95"] * 1e3,
            "sim_efficiency": d.get("mean_E"), "sim_spread_ms": d["straggler"]["spread_s"] * 1e3,
            "sim_command": " ".join(cmd)}


def calibrate_rows(rows: List[Dict[str, Any]], a: argparse.Namespace, tictac: str, graph_dir: str) -> None:
    """Per (model, mode): measure the simulator inputs in its ok jobs (a.sim_inputs "job": each
    job's own; "pooled": medians over the policies), then simulate each policy with them; the
    row's sim_* columns become that calibrated prediction (the nominal one stays in
    sim_nominal_*), and sim_calibration holds the inputs."""

    groups: Dict[Tuple[str, str], List[Dict[str, Any]]] = {}
    for r in rows:
        if r["status"] == "ok" and r.get("sim_graph") and r.get("jsonl"):
            groups.setdefault((r["model"], r["mode"]), []).append(r)
    for (model, mode), sel in groups.items():
        ms = []
        for r in sel:
            try:
                ms.append(siminputs.measure(r["jsonl"], r["trace_full"]))
            except (OSError, ValueError, KeyError) as e:
                log(f"  warning: no simulator inputs from {r['jsonl']}: {e}")
        r0 = sel[0]
        per_job = getattr(a, "sim_inputs", "job") == "job"
        p = siminputs.pool(ms)
        si = siminputs.sim_inputs(p, r0["sim_graph"], mode, int(r0["param_mb"] * 1e6), graph_dir,
                                  f"{model}_{mode}", r0["rate_mbit"] * 1e6 / 8)
        if si is None:
            log(f"  note: {model} {mode}: no measured forward time; the simulator keeps nominal inputs")
            continue
        for r, m in zip(sel, ms):
            r["cluster_makespan_ms"] = m.get("cluster_makespan_ms")
            sj = si
            if per_job:
                sj = siminputs.sim_inputs(siminputs.pool([m]), r0["sim_graph"], mode, int(r0["param_mb"] * 1e6),
                                          graph_dir, f"{model}_{mode}_{r['policy']}", r0["rate_mbit"] * 1e6 / 8) or si
            sim = simulate(tictac, sj["graph"], r["policy"], mode, a.workers, a.ps, 0, a.iters, sj["args"])
            if sim:
                r.update(sim)
                r["sim_inputs"] = "job" if per_job else "pooled"
                r["sim_calibration"] = sj["inputs"]
        inp = si["inputs"]
        extra = (f", backward x{inp['backward_factor']:.2f}, update {inp['update_ms'] or 0:.0f} ms"
                 if mode == "training" else "")
        log(f"simulator inputs {model} {mode} (measured, {p['jobs']} jobs): compute x{inp['compute_scale']:.2f} "
            f"(forward {inp['forward_busy_ms']:.0f} ms vs profiled {inp['profiled_forward_ms']:.0f} ms), "
            f"PS uplink {inp['rate_Bps'] * 8 / 1e6:.0f} Mbit/s ({inp['rate_source']}, nominal "
            f"{r0['rate_mbit']} Mbit/s){extra}")
