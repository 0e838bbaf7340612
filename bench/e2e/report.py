"""Outputs of a run: the CSV (fixed leading columns, then the rest), results.json, the printed
table. Columns: docs/benchmarks.md, "End-to-end benchmark"."""

from __future__ import annotations

import csv
import json
import math
import os
from typing import Any, Dict, List

from .common import fnum

CSV_COLUMNS = ["model", "mode", "policy", "a", "throughput", "iter_ms_median", "iter_ms_p95",
               "straggler_spread_ms", "efficiency", "speedup_vs_random", "sim_makespan_ms",
               "measured_makespan_ms", "compute", "speedup_ci_low", "speedup_ci_high"]
EXTRA_COLUMNS = ["speedup_vs_gloo", "speedup_vs_gloo_ci_low", "speedup_vs_gloo_ci_high", "speedup_vs_ddp",
                 "speedup_vs_ddp_ci_low", "speedup_vs_ddp_ci_high", "spread_reduction_vs_random",
                 "spread_reduction_ci_low", "spread_reduction_ci_high", "straggler_spread_median_ms", "iterations",
                 "rounds", "emu_scale", "emu_clock",
                 "a_measured", "rate_mbit", "net_mode", "image_size", "batch", "workers", "ps",
                 "iters", "param_mb", "calib_compute_ms", "straggler_max_over_mean", "iter_ms_mean",
                 "iter_ms_var", "comm_ms", "compute_ms", "stall_ms", "efficiency_train_py",
                 "sim_iter_ms_p95", "sim_efficiency", "sim_spread_ms", "sim_speedup_vs_random",
                 "policy_used", "job_s", "status", "sim_inputs", "sim_nominal_makespan_ms", "cluster_makespan_ms", "order_inversions"]


def write_csv(path: str, rows: List[Dict[str, Any]]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(CSV_COLUMNS + EXTRA_COLUMNS)
        for r in rows:
            w.writerow([fnum(r.get(c)) for c in CSV_COLUMNS + EXTRA_COLUMNS])


def write_json(path: str, args: Dict[str, Any], net_note: str, rows, details) -> None:
    per_iter = {f"{m}/{mode}/{p}": {"iter_ms": d["iter_ms"], "round": d["iter_round"], "spread_ms": d["spread_ms"]}
                for (m, mode, p), d in details.items()}
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"args": args, "network": net_note, "rows": rows, "iterations": per_iter}, f, indent=1, default=str)


def table(rows: List[Dict[str, Any]]) -> str:
    cols = [("model", "model"), ("mode", "mode"), ("policy", "policy"), ("compute", "compute"), ("a", "a"),
            ("rate", "rate_mbit"), ("batch", "batch"), ("n", "iterations"), ("samples/s", "throughput"),
            ("iter med ms", "iter_ms_median"), ("p95 ms", "iter_ms_p95"), ("spread ms", "straggler_spread_ms"),
            ("max/mean", "straggler_max_over_mean"), ("E", "efficiency"), ("vs random", "speedup_vs_random"),
            ("95% CI", "_ci"), ("vs gloo", "speedup_vs_gloo"), ("vs ddp", "speedup_vs_ddp"),
            ("spread/", "spread_reduction_vs_random"), ("sim ms", "sim_makespan_ms"),
            ("meas ms", "measured_makespan_ms")]
    two = ("a", "efficiency", "speedup_vs_random", "straggler_max_over_mean", "speedup_vs_gloo", "speedup_vs_ddp",
           "spread_reduction_vs_random")

    def cell(r, k):
        if k == "_ci":
            lo, hi = r.get("speedup_ci_low"), r.get("speedup_ci_high")
            return f"[{lo:.2f}, {hi:.2f}]" if lo is not None and hi is not None else "-"
        v = r.get(k)
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return "FAILED" if k == "throughput" and r.get("status") != "ok" else "-"
        if k == "rate_mbit":
            return f"{v}M"
        if isinstance(v, float):
            return f"{v:.2f}" if k in two else f"{v:.1f}"
        return str(v)

    t = [[h for h, _ in cols]] + [[cell(r, k) for _, k in cols] for r in rows]
    widths = [max(len(x[i]) for x in t) for i in range(len(cols))]
    lines = ["  ".join(c.rjust(w) if i >= 4 else c.ljust(w) for i, (c, w) in enumerate(zip(x, widths))) for x in t]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def write_table(out: str, text: str) -> str:
    path = os.path.join(out, "table.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text + "\n")
    return path
