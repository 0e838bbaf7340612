"""`bench/e2e/e2e --overhead`: what TicTac costs when there is nothing to hide.

Runs the same (model, mode) with policy fifo and each other --policies (default tic, tac) on a
fast unshaped-rate link (--rate, default 10gbit, no calibration) with a model and image size
where comm is far smaller than compute (default squeezenet1_1 at 224x224: a ~ 0.03-0.06).
Jobs are interleaved in --rounds rounds (fifo, tic, tac, fifo, then fifo, tac, tic, fifo, ...:
fifo at both ends, so a drift of the machine's load hits both sides alike); in each round two
ratios are taken between the jobs of that round: the mean of the two fifo jobs' median
iteration times / the policy's (the verdict: robust to the single slow iterations a loaded
machine gives every job), and throughput(policy) / mean throughput(fifo) (sum of iteration
times: includes those). The round's second fifo job against its first is an A/A control: its
spread is the noise floor of the machine, printed first. A policy whose order equals fifo's
for the model (TIC on a chain) is said to be so. Prints per policy the median of
each ratio over rounds, min and max, and whether the median-iteration ratio is within the
target (TicTac costs at most --overhead-target, default 2%, i.e. ratio >= 0.98). Writes overhead.csv (one row per
job) and overhead.json (the ratios) in --out.
"""

from __future__ import annotations

import csv
import json
import os
import statistics
import time
from typing import Any, Dict, List

from . import common as e2e
from .jobs import run_row

DEFAULT_MODEL = "squeezenet1_1"
DEFAULT_IMAGE = 224
JOB_COLUMNS = ["round", "slot", "model", "mode", "policy", "a", "a_measured", "throughput", "iter_ms_median",
               "iter_ms_p95", "stall_ms", "rate_mbit", "net_mode", "image_size", "batch", "iters", "job_s",
               "status"]


def apply_defaults(a, dflt) -> None:
    """Overhead mode's own defaults for options left at the general defaults."""
    if a.models == [m for m in dflt.models.split(",") if m]:
        a.models = [DEFAULT_MODEL]
    if a.image_size == dflt.image_size:
        a.image_size = DEFAULT_IMAGE
    if a.policies == [p for p in dflt.policies.split(",") if p]:
        a.policies = ["tic", "tac"]
    a.policies = [p for p in a.policies if p != "fifo"]
    if not a.policies:
        raise SystemExit("--overhead: --policies must name at least one policy other than fifo")
    if a.rate == dflt.rate:
        a.rate = "10gbit"
    if a.rounds is None:
        a.rounds = 5
    a.no_calibrate = True


def _first_order(jsonl) -> Any:
    """The expected order of the first record of a job (None when unreadable)."""
    try:
        with open(jsonl, encoding="utf-8") as f:
            return json.loads(f.readline()).get("expected_order")
    except (OSError, ValueError, TypeError):
        return None


def summarize(ratios: List[float], target: float) -> Dict[str, Any]:
    med = statistics.median(ratios)
    return {"ratios": ratios, "median": med, "min": min(ratios), "max": max(ratios),
            "cost_pct": (1.0 - med) * 100.0, "within_target": med >= 1.0 - target}


def run(a, cluster_cls, setups: List[Dict[str, Any]], out: str, pythonpath: str, net_note: str) -> int:
    """Run the interleaved rounds for every setup; print and write the ratios. 0 when every
    job ran (whether or not the target is met: that is reported, not an error)."""
    hosts = a.workers + a.ps
    rate = e2e.rate_bytes(a.rate)
    jobs_per_round = len(setups) * (2 + len(a.policies))
    total = jobs_per_round * a.rounds
    e2e.log(f"== overhead check: fifo vs {', '.join(a.policies)}, {a.rounds} interleaved rounds, "
            f"{a.warmup} warm-up + {a.iters} measured iterations per job, rate {a.rate} ({net_note})")
    for s in setups:
        if s["a"] > 0.1:
            e2e.log(f"warning: {s['model']} {s['mode']} runs at a = {s['a']:.2f}, not far below 1: this is "
                    f"not the 'nothing to hide' setting (use a larger --image-size or a smaller model)")
    rows: List[Dict[str, Any]] = []
    t_start = time.monotonic()
    k = 0
    failed = 0
    cluster = cluster_cls(hosts=hosts, rate=e2e.rate_str(rate), threads_per_proc=a.threads,
                          log_dir=os.path.join(out, "logs"), loopback=a.loopback, timeout=a.job_timeout,
                          echo=False, quiet=True)
    cluster.open()
    try:
        for rnd in range(a.rounds):
            mid = list(a.policies)
            if rnd % 2:
                mid.reverse()
            seq = [("fifo", "a")] + [(p, "") for p in mid] + [("fifo", "b")]   # fifo at both ends
            for s in setups:
                for pol, slot in seq:
                    k += 1
                    el = time.monotonic() - t_start
                    eta = f", ETA {e2e.fmt_dur(el / (k - 1) * (total - k + 1))}" if k > 1 else ""
                    e2e.log(f"[{k}/{total}] round {rnd + 1}: {s['model']} {s['mode']} {pol} (a={s['a']:.3f}) ... "
                            f"(elapsed {e2e.fmt_dur(el)}{eta})")
                    row, _ = run_row(cluster, s, pol, a, out, pythonpath,
                                     tag=f"{s['model']}_{s['mode']}_{pol}{slot}_r{rnd}")
                    row["round"] = rnd
                    row["slot"] = slot
                    row["order"] = _first_order(row.get("jsonl"))
                    failed += row["status"] != "ok"
                    rows.append(row)
    finally:
        cluster.close()

    result: Dict[str, Any] = {"target": a.overhead_target, "rounds": a.rounds, "network": net_note,
                              "configs": []}
    lines = []
    for s in setups:
        mine = [r for r in rows if r["model"] == s["model"] and r["mode"] == s["mode"] and r["status"] == "ok"]
        for pol in ["fifo"] + list(a.policies):
            ratios, iter_ratios, same = [], [], []
            for rnd in range(a.rounds):
                fa = next((r for r in mine if r["round"] == rnd and r["slot"] == "a"), None)
                fb = next((r for r in mine if r["round"] == rnd and r["slot"] == "b"), None)
                if pol == "fifo":        # the A/A control: the round's second fifo job against its first
                    f, p = ([fa], fb) if fa and fb else (None, None)
                else:                    # against both fifo jobs of the round
                    f = [x for x in (fa, fb) if x]
                    p = next((r for r in mine if r["round"] == rnd and r["policy"] == pol), None)
                if f and p:
                    ratios.append(p["throughput"] / statistics.mean(x["throughput"] for x in f))
                    iter_ratios.append(statistics.mean(x["iter_ms_median"] for x in f) / p["iter_ms_median"])
                    same.append(p.get("order") is not None and p.get("order") == f[0].get("order"))
            if not ratios:
                lines.append(f"{s['model']:>14} {s['mode']:<9} {pol:<4}: no complete round")
                continue
            sm = summarize(ratios, a.overhead_target)
            sm_it = summarize(iter_ratios, a.overhead_target)
            a_meas = [r["a_measured"] for r in mine if r.get("a_measured") is not None]
            cfg = {"model": s["model"], "mode": s["mode"], "policy": pol, "a": s["a"],
                   "a_measured_median": statistics.median(a_meas) if a_meas else None,
                   "throughput_ratio": sm, "iter_median_ratio": sm_it, "same_order_as_fifo": all(same)}
            if pol == "fifo":
                result["aa_control"] = result.get("aa_control", []) + [cfg]
                lines.append(f"{s['model']:>14} {s['mode']:<9} A/A control (fifo vs fifo, the noise floor): "
                             f"median-iteration ratio {sm_it['median']:.4f} (min {sm_it['min']:.4f}, max "
                             f"{sm_it['max']:.4f}); throughput ratio {sm['median']:.4f}")
                continue
            result["configs"].append(cfg)
            verdict = "within" if sm_it["within_target"] else "NOT within"
            a_m = cfg["a_measured_median"] if cfg["a_measured_median"] is not None else float("nan")
            if cfg["same_order_as_fifo"]:
                lines.append(f"{s['model']:>14} {s['mode']:<9} note: {pol}'s order is fifo's for this model: any "
                             f"difference below is the runtime's, or noise")
            lines.append(f"{s['model']:>14} {s['mode']:<9} {pol}/fifo: median-iteration ratio {sm_it['median']:.4f} "
                         f"(min {sm_it['min']:.4f}, max {sm_it['max']:.4f}) -> costs {sm_it['cost_pct']:+.2f}%, "
                         f"{verdict} {a.overhead_target * 100:g}%; throughput ratio {sm['median']:.4f} (min "
                         f"{sm['min']:.4f}, max {sm['max']:.4f}); {len(ratios)} rounds, a = {s['a']:.3f} "
                         f"(measured {a_m:.3f})")
    csv_path = os.path.join(out, "overhead.csv")
    with open(csv_path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(JOB_COLUMNS)
        for r in rows:
            w.writerow([e2e.fnum(r.get(c)) for c in JOB_COLUMNS])
    with open(os.path.join(out, "overhead.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    e2e.log("")
    e2e.log(f"== overhead (ratio > 1: faster than fifo; cost = 1 - median over rounds; target: cost <= "
            f"{a.overhead_target * 100:g}%)")
    for line in lines:
        e2e.log(line)
    e2e.log(f"CSV:    {csv_path}")
    e2e.log(f"total {e2e.fmt_dur(time.monotonic() - t_start)}")
    return 1 if failed or not result["configs"] else 0
