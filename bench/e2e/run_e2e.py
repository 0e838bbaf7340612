#!/usr/bin/env python3
"""End-to-end benchmark: real parameter-server jobs (tictac.torch.train, backend tictac) on an
emulated cluster (bench/cluster), one job per (model, mode, policy), next to the simulator.

    bench/e2e/e2e --models vgg16 --modes inference,training --policies random,tic,tac \\
        --iters 5 --warmup 2 --image-size 32 --out results/e2e

For each (model, mode) the link rate is calibrated (unless --no-calibrate) so that the
comm/compute ratio a = N / C is about --target-ratio, with N = max(1, W/K) x parameter bytes /
rate (the busiest link of the pull phase: a PS uplink, or a worker downlink) and C = the
compute time of one iteration on this machine (forward, or forward + backward in training),
timed in this process with one thread (median of 3 after a warm-up). The rate is clamped to
[--min-rate, --max-rate] and the a it then runs at is reported (column `a`), together with the
a measured from the job's own intervals (`a_measured`). See docs/benchmarks.md, "End-to-end
benchmark", for every column.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import statistics
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench", "cluster"))
sys.path.insert(0, os.path.join(ROOT, "python"))

ALL_POLICIES = ("random", "fifo", "layer", "tic", "tac")
DEFAULT_MODELS = ("alexnet", "vgg16", "resnet50", "inception_v3")
MIN_IMAGE = {"inception_v3": 75, "alexnet": 63, "googlenet": 32}
CSV_COLUMNS = ["model", "mode", "policy", "a", "throughput", "iter_ms_median", "iter_ms_p95",
               "straggler_spread_ms", "efficiency", "speedup_vs_random", "sim_makespan_ms",
               "measured_makespan_ms"]
EXTRA_COLUMNS = ["a_measured", "rate_mbit", "net_mode", "image_size", "batch", "workers", "ps",
                 "iters", "param_mb", "calib_compute_ms", "straggler_max_over_mean", "iter_ms_mean",
                 "iter_ms_var", "comm_ms", "compute_ms", "stall_ms", "efficiency_train_py",
                 "sim_iter_ms_p95", "sim_efficiency", "sim_spread_ms", "sim_speedup_vs_random",
                 "policy_used", "job_s", "status", "sim_inputs", "sim_nominal_makespan_ms", "cluster_makespan_ms"]

# ------------------------------------------------------------------------------------------
# helpers


def log(msg: str) -> None:
    print(msg, flush=True)


def fmt_dur(s: float) -> str:
    s = int(round(s))
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def nearest_rank(vals: Sequence[float], q: float) -> float:
    v = sorted(vals)
    if not v:
        return math.nan
    k = max(1, math.ceil(q * len(v)))
    return v[k - 1]


def union_ms(intervals) -> float:
    """Length of the union of [start, end] intervals (the one definition, in ps.stats)."""
    from tictac.torch.ps.stats import union_ms as _union_ms

    return _union_ms(intervals)


def model_spec(name: str) -> str:
    return name if ":" in name else f"torchvision:{name}"


def short_name(name: str) -> str:
    return name.split(":")[-1]


def rate_str(bytes_s: float) -> str:
    """A tc rate string in whole mbit (>= 1)."""
    return f"{max(1, int(round(bytes_s * 8 / 1e6)))}mbit"


def rate_bytes(s: str) -> int:
    from cluster import parse_rate
    return parse_rate(s)


def fnum(x) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return ""
    if isinstance(x, float):
        return f"{x:.6g}" if abs(x) < 1e6 else f"{x:.0f}"
    return str(x)


# ------------------------------------------------------------------------------------------
# calibration: parameter bytes and compute time of one iteration, in this process


def profile_model(spec: str, mode: str, batch: int, image: int, num_classes: int,
                  threads: int) -> Tuple[int, float]:
    import torch
    from tictac.torch.train import ModelSpec
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = ModelSpec(spec, image, num_classes)()
    seen, nbytes = set(), 0
    for p in model.parameters():
        if id(p) not in seen:
            seen.add(id(p))
            nbytes += p.numel() * p.element_size()
    x = torch.randn(batch, 3, image, image)
    y = torch.randint(0, num_classes, (batch,))

    def once() -> float:
        t = time.perf_counter()
        if mode == "inference":
            with torch.no_grad():
                model(x)
        else:
            model.zero_grad(set_to_none=True)
            torch.nn.functional.cross_entropy(model(x), y).backward()
        return time.perf_counter() - t

    once()
    c = statistics.median(once() for _ in range(3))
    return nbytes, c * 1e3


# ------------------------------------------------------------------------------------------
# reading one job's JSON lines


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
    e = (u - m) / (u - l_) if u - l_ > 1e-9 else None
    return {"N": n, "C": c, "m": m, "E": e}


def analyse(jsonl: str, batch: int) -> Dict[str, Any]:
    recs = [json.loads(line) for line in open(jsonl, encoding="utf-8") if line.strip()]
    meas = [r for r in recs if not r.get("warmup")]
    by_iter: Dict[int, List[Dict[str, Any]]] = {}
    for r in meas:
        r["_m"] = worker_metrics(r)
        by_iter.setdefault(r["iter"], []).append(r)
    iters = sorted(by_iter)
    if not iters:
        raise ValueError(f"{jsonl}: no measured iterations")
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
        "iterations": len(iters), "workers": len(workers),
        "throughput": batch * len(workers) * len(iters) / (sum(slowest) / 1e3),
        "iter_ms": slowest, "iter_ms_median": med, "iter_ms_p95": nearest_rank(slowest, 0.95),
        "iter_ms_mean": statistics.mean(slowest), "iter_ms_var": statistics.pvariance(slowest),
        "straggler_spread_ms": statistics.mean(spread), "straggler_max_over_mean": statistics.mean(mom),
        "efficiency": statistics.mean(es) if es else None,
        "efficiency_train_py": statistics.mean(ejs) if ejs else None,
        "measured_makespan_ms": statistics.median(mk),
        "comm_ms": n_ms, "compute_ms": c_ms, "a_measured": n_ms / c_ms if c_ms > 0 else None,
        "stall_ms": statistics.median(r.get("stall_ms", 0.0) for r in meas),
        "rep_iter": rep,
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


# ------------------------------------------------------------------------------------------
# simulator


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
    then give the bandwidth themselves: calibrate.sim_inputs)."""
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
    import calibrate
    groups: Dict[Tuple[str, str], List[Dict[str, Any]]] = {}
    for r in rows:
        if r["status"] == "ok" and r.get("sim_graph") and r.get("jsonl"):
            groups.setdefault((r["model"], r["mode"]), []).append(r)
    for (model, mode), sel in groups.items():
        ms = []
        for r in sel:
            try:
                ms.append(calibrate.measure(r["jsonl"], r["trace_full"]))
            except (OSError, ValueError, KeyError) as e:
                log(f"  warning: no simulator inputs from {r['jsonl']}: {e}")
        r0 = sel[0]
        per_job = getattr(a, "sim_inputs", "job") == "job"
        p = calibrate.pool(ms)
        si = calibrate.sim_inputs(p, r0["sim_graph"], mode, int(r0["param_mb"] * 1e6), graph_dir,
                                  f"{model}_{mode}", r0["rate_mbit"] * 1e6 / 8)
        if si is None:
            log(f"  note: {model} {mode}: no measured forward time; the simulator keeps nominal inputs")
            continue
        for r, m in zip(sel, ms):
            r["cluster_makespan_ms"] = m.get("cluster_makespan_ms")
            sj = si
            if per_job:
                sj = calibrate.sim_inputs(calibrate.pool([m]), r0["sim_graph"], mode, int(r0["param_mb"] * 1e6),
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


# ------------------------------------------------------------------------------------------
# plots


def make_plots(rows: List[Dict[str, Any]], details: Dict[Tuple[str, str, str], Dict[str, Any]],
               out: str) -> List[str]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    paths = []
    ok = [r for r in rows if r["status"] == "ok"]
    if not ok:
        return paths
    modes = sorted({r["mode"] for r in ok})
    models = list(dict.fromkeys(r["model"] for r in ok))
    policies = list(dict.fromkeys(r["policy"] for r in ok))
    colors = {p: c for p, c in zip(ALL_POLICIES, ["#999999", "#1f77b4", "#2ca02c", "#ff7f0e", "#d62728"])}

    # 1. throughput per policy per model
    fig, axes = plt.subplots(1, len(modes), figsize=(max(5, 2.2 * len(models) * len(modes)), 4), squeeze=False)
    for ax, mode in zip(axes[0], modes):
        w = 0.8 / max(1, len(policies))
        for j, p in enumerate(policies):
            xs, ys = [], []
            for i, m in enumerate(models):
                r = next((r for r in ok if r["model"] == m and r["mode"] == mode and r["policy"] == p), None)
                if r:
                    xs.append(i + (j - (len(policies) - 1) / 2) * w)
                    ys.append(r["throughput"])
            ax.bar(xs, ys, w, label=p, color=colors.get(p))
        ax.set_xticks(range(len(models)))
        ax.set_xticklabels([f"{m}\na={next((r['a'] for r in ok if r['model'] == m and r['mode'] == mode), math.nan):.2g}"
                            for m in models])
        ax.set_ylabel("samples/s (all workers)")
        ax.set_title(f"throughput, {mode}")
        ax.legend(fontsize=8)
    fig.tight_layout()
    p = os.path.join(out, "throughput.png")
    fig.savefig(p, dpi=100)
    plt.close(fig)
    paths.append(p)

    for m in models:
        for mode in modes:
            sel = [r for r in ok if r["model"] == m and r["mode"] == mode]
            if not sel:
                continue
            # 2. iteration-time distribution per policy
            fig, ax = plt.subplots(figsize=(1.3 * len(sel) + 2, 4))
            data = [details[(m, mode, r["policy"])]["iter_ms"] for r in sel]
            ax.boxplot(data, whis=(0, 100))
            for i, d in enumerate(data):
                ax.plot([i + 1] * len(d), d, ".", color=colors.get(sel[i]["policy"]), alpha=0.7)
            ax.set_xticks(range(1, len(sel) + 1))
            ax.set_xticklabels([r["policy"] for r in sel])
            ax.set_ylabel("iteration time, slowest worker (ms)")
            ax.set_title(f"{m} {mode}: iteration times (a={sel[0]['a']:.2g})")
            fig.tight_layout()
            p = os.path.join(out, f"iter_time_{m}_{mode}.png")
            fig.savefig(p, dpi=100)
            plt.close(fig)
            paths.append(p)
            # 3. one iteration's comm/compute timeline per policy
            fig, axes = plt.subplots(len(sel), 1, figsize=(10, 1.0 + 1.2 * len(sel) * max(1, len(details[(m, mode, sel[0]["policy"])]["rep"])) / 2),
                                     squeeze=False, sharex=True)
            for ax, r in zip(axes[:, 0], sel):
                d = details[(m, mode, r["policy"])]
                ticks, labels = [], []
                for k, w in enumerate(d["rep"]):
                    y = 2 * k
                    pulls = [(s, e - s) for n, s, e in w["comm"] if not n.endswith("(push)")]
                    pushes = [(s, e - s) for n, s, e in w["comm"] if n.endswith("(push)")]
                    comp = [(s, e - s) for n, s, e in w["compute"]]
                    ax.broken_barh(pulls, (y + 1.05, 0.8), color="#1f77b4", edgecolor="white", linewidth=0.3)
                    if pushes:
                        ax.broken_barh(pushes, (y + 1.05, 0.8), color="#9467bd", edgecolor="white", linewidth=0.3)
                    ax.broken_barh(comp, (y + 0.15, 0.8), color="#ff7f0e", edgecolor="white", linewidth=0.3)
                    ticks += [y + 0.55, y + 1.45]
                    labels += [f"w{w['worker']} compute", f"w{w['worker']} comm"]
                ax.set_yticks(ticks)
                ax.set_yticklabels(labels, fontsize=7)
                ax.set_title(f"{r['policy']}: iteration {d['rep_iter']} ({r['iter_ms_median']:.0f} ms median)", fontsize=9)
            axes[-1, 0].set_xlabel("ms from the iteration's start (blue: pulls, purple: pushes, orange: compute)")
            fig.suptitle(f"{m} {mode}: one iteration per policy", fontsize=10)
            fig.tight_layout()
            p = os.path.join(out, f"timeline_{m}_{mode}.png")
            fig.savefig(p, dpi=100)
            plt.close(fig)
            paths.append(p)
    return paths


# ------------------------------------------------------------------------------------------
# one job


def run_job(cluster, s: Dict[str, Any], pol: str, a: argparse.Namespace, out: str, pythonpath: str,
            tag: Optional[str] = None) -> Tuple[Dict[str, Any], Optional[Dict[str, Any]]]:
    """Run one job (setup s, policy pol) on the open cluster; returns its CSV row (status ok,
    failed or timeout) and, when ok, analyse()'s details. Raises what Cluster.run raises
    other than a timeout (Interrupted, ClusterError)."""
    from cluster import ClusterTimeout
    W, K = a.workers, a.ps
    hosts = W + K
    net_mode = cluster.mode
    tag = tag or f"{s['model']}_{s['mode']}_{pol}"
    details = None
    jd = os.path.join(out, "jobs", tag)
    os.makedirs(jd, exist_ok=True)
    jsonl, trace, summ = (os.path.join(jd, f) for f in ("iterations.jsonl", "trace_full.json", "summary.json"))
    for f in (jsonl, trace, summ):
        if os.path.exists(f):
            os.remove(f)
    cmd = [sys.executable, "-m", "tictac.torch.train", "--model", s["spec"], "--policy", pol,
           "--mode", s["mode"], "--iters", str(a.iters + a.warmup), "--warmup", str(a.warmup),
           "--num-ps", str(K), "--batch", str(s["batch"]), "--image-size", str(s["image"]),
           "--num-classes", str(a.num_classes), "--backend", "tictac", "--threads", str(a.threads),
           "--seed", str(a.seed), "--log-json", jsonl, "--trace", trace, "--summary-json", summ,
           "--quiet"]
    row = {"model": s["model"], "mode": s["mode"], "policy": pol, "a": s["a"],
           "rate_mbit": int(round(s["rate_bps"] * 8 / 1e6)), "net_mode": net_mode,
           "image_size": s["image"], "batch": s["batch"], "workers": W, "ps": K, "iters": a.iters,
           "param_mb": s["param_bytes"] / 1e6, "calib_compute_ms": s["calib_ms"], "status": "ok"}
    t0 = time.monotonic()
    try:
        codes = cluster.run([cmd] * hosts, env_extra={"PYTHONPATH": pythonpath}, name=tag)
    except ClusterTimeout as e:
        codes = e.codes
        row["status"] = "timeout"
    row["job_s"] = time.monotonic() - t0
    if row["status"] == "ok" and (any(codes) or not os.path.exists(jsonl)):
        row["status"] = "failed"
        f = cluster.last_failure or {}
        log(f"    FAILED (exit statuses {codes}); log {f.get('log', cluster.log_dir)}:")
        for line in (f.get("tail") or [])[-6:]:
            log(f"      {line}")
    if row["status"] == "ok":
        try:
            d = analyse(jsonl, s["batch"])
        except (OSError, ValueError, KeyError) as e:
            row["status"] = "failed"
            log(f"    FAILED to read {jsonl}: {e}")
        else:
            details = d
            for key in ("throughput", "iter_ms_median", "iter_ms_p95", "iter_ms_mean", "iter_ms_var",
                        "straggler_spread_ms", "straggler_max_over_mean", "efficiency",
                        "efficiency_train_py", "measured_makespan_ms", "comm_ms", "compute_ms",
                        "a_measured", "stall_ms"):
                row[key] = d[key]
            try:
                row["policy_used"] = json.load(open(summ))["plan"]["policy"]
            except (OSError, ValueError, KeyError):
                row["policy_used"] = ""
            row["jsonl"], row["trace_full"] = jsonl, trace
            cut = os.path.join(out, "traces", f"{tag}.iter{d['rep_iter']}.json")
            if one_iteration_trace(trace, cut, d["rep_iter"]):
                row["trace"] = cut
            e_txt = f"{row['efficiency']:.2f}" if row.get("efficiency") is not None else "n/a"
            log(f"    ok in {row['job_s']:.0f} s: {row['throughput']:.1f} samples/s, iter median "
                f"{row['iter_ms_median']:.0f} ms, p95 {row['iter_ms_p95']:.0f} ms, spread "
                f"{row['straggler_spread_ms']:.0f} ms, E {e_txt}")
    return row, details


# ------------------------------------------------------------------------------------------
# main


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="bench/e2e/e2e", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS),
                    help="comma list of torchvision names (or module.path:callable)")
    ap.add_argument("--modes", default="inference,training")
    ap.add_argument("--policies", default=",".join(ALL_POLICIES))
    ap.add_argument("--iters", type=int, default=5, help="measured iterations per job")
    ap.add_argument("--warmup", type=int, default=2, help="warm-up iterations per job (not measured)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--ps", type=int, default=1)
    ap.add_argument("--rate", default="1gbit", help="link rate with --no-calibrate (tc syntax)")
    ap.add_argument("--batch", type=int, default=8, help="per worker")
    ap.add_argument("--image-size", type=int, default=64,
                    help="raised to a model's minimum where needed (inception_v3: 75, alexnet: 63)")
    ap.add_argument("--num-classes", type=int, default=1000)
    ap.add_argument("--target-ratio", type=float, default=1.0, help="calibrate the rate so that a = N/C is about this")
    ap.add_argument("--no-calibrate", action="store_true", help="run every job at --rate")
    ap.add_argument("--max-rate", default="10gbit", help="calibration never goes above this")
    ap.add_argument("--min-rate", default="10mbit", help="calibration never goes below this")
    ap.add_argument("--max-batch", type=int, default=64,
                    help="when even --max-rate leaves a above the target, calibration raises the per-worker "
                         "batch up to this (compute grows with it); --max-batch 0: never")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    ap.add_argument("--loopback", action="store_true", help="no namespaces (links unshaped)")
    ap.add_argument("--job-timeout", type=float, default=900.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="folder with the tictac CLI")
    ap.add_argument("--no-sim", action="store_true")
    ap.add_argument("--sim-inputs", choices=("job", "pooled", "nominal"), default="job",
                    help="the simulator's compute times, link rate, backward factor and update cost: measured "
                         "in each job (default), pooled over the policies of a (model, mode), or the nominal "
                         "ones (the uncontended profile, the nominal rate); see calibrate.py")
    ap.add_argument("--out", default=os.path.join(ROOT, "results", "e2e"))
    ap.add_argument("--csv-name", default="results.csv")
    ap.add_argument("--overhead", action="store_true",
                    help="the 'nothing to hide' check: fifo vs --policies (default tic,tac) in interleaved "
                         "rounds on a fast link with a << 1 (default squeezenet1_1 at 224, 10gbit); see overhead.py")
    ap.add_argument("--rounds", type=int, default=5, help="--overhead: interleaved rounds")
    ap.add_argument("--overhead-target", type=float, default=0.02,
                    help="--overhead: the largest acceptable cost vs fifo (fraction)")
    ap.add_argument("--quick", action="store_true",
                    help="alexnet, inference and training, random/tic/tac, 3 + 1 iterations")
    a = ap.parse_args(argv)
    if a.quick:
        dflt = ap.parse_args([])
        if a.models == dflt.models:
            a.models = "alexnet"
        if a.policies == dflt.policies:
            a.policies = "random,tic,tac"
        if a.iters == dflt.iters:
            a.iters = 3
        if a.warmup == dflt.warmup:
            a.warmup = 1
    a.models = [m for m in a.models.split(",") if m]
    a.modes = [m for m in a.modes.split(",") if m]
    a.policies = [p for p in a.policies.split(",") if p]
    if a.overhead:
        import overhead
        overhead.apply_defaults(a, ap.parse_args([]))
        if a.rounds < 1 or not 0 < a.overhead_target < 1:
            ap.error("--overhead needs --rounds >= 1 and 0 < --overhead-target < 1")
    for m in a.modes:
        if m not in ("inference", "training"):
            ap.error(f"--modes: {m!r} is not inference or training")
    for p in a.policies:
        if p not in ALL_POLICIES:
            ap.error(f"--policies: {p!r} is not one of {', '.join(ALL_POLICIES)}")
    if a.iters < 1 or a.warmup < 0 or a.workers < 1 or a.ps < 1 or a.batch < 1:
        ap.error("need --iters >= 1, --warmup >= 0, --workers/--ps/--batch >= 1")
    try:
        for r in (a.rate, a.max_rate, a.min_rate):
            rate_bytes(r)
    except ValueError as e:
        ap.error(str(e))
    if a.target_ratio <= 0:
        ap.error("--target-ratio must be > 0")
    return a


def print_table(rows: List[Dict[str, Any]]) -> str:
    cols = [("model", "model"), ("mode", "mode"), ("policy", "policy"), ("a", "a"), ("rate", "rate_mbit"),
            ("batch", "batch"), ("samples/s", "throughput"), ("iter med ms", "iter_ms_median"),
            ("p95 ms", "iter_ms_p95"), ("spread ms", "straggler_spread_ms"), ("max/mean", "straggler_max_over_mean"),
            ("E", "efficiency"), ("speedup", "speedup_vs_random"), ("sim ms", "sim_makespan_ms"),
            ("meas ms", "measured_makespan_ms"), ("cluster ms", "cluster_makespan_ms")]

    def cell(r, k):
        v = r.get(k)
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return "-" if r.get("status") == "ok" else "FAILED" if k == "throughput" else "-"
        if k == "rate_mbit":
            return f"{v}M"
        if isinstance(v, float):
            if k in ("a", "efficiency", "speedup_vs_random", "straggler_max_over_mean"):
                return f"{v:.2f}"
            return f"{v:.1f}"
        return str(v)

    table = [[h for h, _ in cols]] + [[cell(r, k) for _, k in cols] for r in rows]
    widths = [max(len(t[i]) for t in table) for i in range(len(cols))]
    lines = ["  ".join(c.rjust(w) if i >= 3 else c.ljust(w) for i, (c, w) in enumerate(zip(t, widths)))
             for t in table]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main(argv=None) -> int:
    a = parse_args(argv)
    from cluster import Cluster, ClusterError, ClusterTimeout, Interrupted, netns_support
    out = os.path.abspath(a.out)
    for sub in ("jobs", "traces", "graphs", "logs"):
        os.makedirs(os.path.join(out, sub), exist_ok=True)
    pythonpath = os.pathsep.join(p for p in [os.path.join(ROOT, "python"), HERE, os.environ.get("PYTHONPATH", "")] if p)
    os.environ["PYTHONPATH"] = pythonpath
    for p in (os.path.join(ROOT, "python"), HERE):
        if p not in sys.path:
            sys.path.insert(0, p)
    tictac = os.path.join(a.build, "tictac")
    if not a.no_sim and not os.access(tictac, os.X_OK):
        log(f"note: {tictac} not found; no simulator predictions")
        a.no_sim = True
    if a.loopback:
        net_note = "links UNSHAPED (--loopback: every rank on 127.0.0.1)"
    else:
        ok, why = netns_support()
        net_note = "network namespaces, tbf-shaped links" if ok else \
            f"no network namespaces ({why}): loopback fallback, links UNSHAPED (the rate is nominal only)"
    W, K = a.workers, a.ps
    hosts = W + K
    t_start = time.monotonic()
    log(f"== TicTac end-to-end benchmark: {K} server(s) + {W} worker(s), batch {a.batch}/worker, "
        f"{a.warmup} warm-up + {a.iters} measured iterations per job; {net_note}")

    # ---- calibration per (model, mode) --------------------------------------------------
    setups = []   # dicts: model, spec, image, mode, rate_bps, a, param_bytes, calib_ms
    for m in a.models:
        spec = model_spec(m)
        name = short_name(m)
        image = max(a.image_size, MIN_IMAGE.get(name, 1))
        if image != a.image_size:
            log(f"note: {name} needs images >= {MIN_IMAGE[name]}: running it at {image}")
        for mode in a.modes:
            try:
                nbytes, c_ms = profile_model(spec, mode, a.batch, image, a.num_classes, a.threads)
            except Exception as e:  # a model that cannot be built: say so, skip
                log(f"error: cannot build/profile {spec} ({mode}, image {image}): {type(e).__name__}: {e}")
                setups.append({"model": name, "spec": spec, "image": image, "mode": mode, "error": str(e)})
                continue
            load = max(1.0, W / K) * nbytes        # bytes over the busiest link per iteration
            if a.no_calibrate:
                rate = rate_bytes(a.rate)
            else:
                want = load / (a.target_ratio * c_ms / 1e3)
                rate = min(max(want, rate_bytes(a.min_rate)), rate_bytes(a.max_rate))
                rate = rate_bytes(rate_str(rate))    # what tc will run at (whole mbit)
            ratio = load / rate / (c_ms / 1e3)
            batch = a.batch
            if (not a.no_calibrate and ratio > 1.05 * a.target_ratio and a.max_batch > a.batch
                    and rate >= rate_bytes(a.max_rate)):
                # the link cannot be slowed further at the top of the range: add compute instead
                # (a larger batch), as the paper's harness did; re-timed at the new batch
                batch = min(a.max_batch, math.ceil(a.batch * ratio / a.target_ratio))
                try:
                    _, c2 = profile_model(spec, mode, batch, image, a.num_classes, a.threads)
                except Exception as e:  # e.g. out of memory: keep the batch that worked
                    log(f"note: {name} {mode}: batch {batch} could not be profiled ({type(e).__name__}: {e}); "
                        f"keeping batch {a.batch}")
                    batch, c2 = a.batch, c_ms
                if c2 < 1.1 * c_ms:      # compute did not grow with the batch (memory-bound layers)
                    log(f"note: {name} {mode}: batch {batch} takes {c2:.0f} ms, batch {a.batch} {c_ms:.0f} ms: "
                        f"a larger batch adds no compute here; keeping batch {a.batch}")
                    batch, c2 = a.batch, c_ms
                c_ms = c2
                ratio = load / rate / (c_ms / 1e3)
            setups.append({"model": name, "spec": spec, "image": image, "mode": mode, "rate_bps": rate,
                           "a": ratio, "param_bytes": nbytes, "calib_ms": c_ms, "batch": batch})
            clamp = ""
            if not a.no_calibrate and abs(ratio - a.target_ratio) > 0.05 * a.target_ratio:
                clamp = (f" (target {a.target_ratio:g} not reachable within [{a.min_rate}, {a.max_rate}], "
                         f"batch <= {max(a.batch, a.max_batch)})")
            bnote = f", batch raised to {batch}/worker" if batch != a.batch else ""
            log(f"calibrate {name:>12} {mode:<9}: params {nbytes / 1e6:.1f} MB, compute {c_ms:.0f} ms/iter "
                f"(1 thread, here) -> rate {rate_str(rate)}{bnote}, a = {ratio:.2f}{clamp}")

    if a.overhead:
        import overhead
        return overhead.run(a, Cluster, [s for s in setups if "error" not in s], out, pythonpath, net_note)

    jobs = [(s, p) for s in setups if "error" not in s for p in a.policies]
    rows: List[Dict[str, Any]] = []
    details: Dict[Tuple[str, str, str], Dict[str, Any]] = {}
    done_s: List[float] = []
    cluster = None
    cur_rate = None
    net_mode = "?"
    try:
        for k, (s, pol) in enumerate(jobs, 1):
            if cluster is None or s["rate_bps"] != cur_rate:
                if cluster is not None:
                    cluster.close()
                cluster = Cluster(hosts=hosts, rate=rate_str(s["rate_bps"]), threads_per_proc=a.threads,
                                  log_dir=os.path.join(out, "logs"), loopback=a.loopback,
                                  timeout=a.job_timeout, echo=False, quiet=True)
                cluster.open()
                cur_rate = s["rate_bps"]
                net_mode = cluster.mode
            eta = ""
            if done_s:
                eta = f", ETA {fmt_dur(statistics.mean(done_s) * (len(jobs) - k + 1))}"
            log(f"[{k}/{len(jobs)}] {s['model']} {s['mode']} {pol} at {rate_str(s['rate_bps'])} "
                f"(a={s['a']:.2f}) ... (elapsed {fmt_dur(time.monotonic() - t_start)}{eta})")
            row, d = run_job(cluster, s, pol, a, out, pythonpath)
            t0 = time.monotonic() - row["job_s"]
            if d is not None:
                details[(s["model"], s["mode"], pol)] = d
            if not a.no_sim:
                g = graph_for(s["spec"], s["batch"], s["image"], a.num_classes, os.path.join(out, "graphs"),
                              a.threads, pythonpath)
                sim = simulate(tictac, g, pol, s["mode"], W, K, s["rate_bps"], a.iters) if g else None
                if sim:      # the nominal prediction; replaced below by the calibrated one
                    row.update(sim)
                    row.update({k.replace("sim_", "sim_nominal_", 1): v for k, v in sim.items()})
                    row["sim_graph"] = g
                    row["sim_inputs"] = "nominal"
            rows.append(row)
            done_s.append(time.monotonic() - t0)     # job + reading + simulation: for the ETA
    except (Interrupted, KeyboardInterrupt) as e:
        log(f"interrupted ({e}); writing what was measured")
    except ClusterError as e:
        log(f"error: cluster: {e}")
    finally:
        if cluster is not None:
            cluster.close()

    # ---- the simulator again, with inputs measured in these jobs (calibrate.py) -------------
    if not a.no_sim and a.sim_inputs != "nominal":
        calibrate_rows(rows, a, tictac, os.path.join(out, "graphs"))

    # ---- speedups, outputs -----------------------------------------------------------------
    for r in rows:
        base = next((b for b in rows if b["model"] == r["model"] and b["mode"] == r["mode"]
                     and b["policy"] == "random" and b["status"] == "ok"), None)
        if base and r["status"] == "ok":
            r["speedup_vs_random"] = base["iter_ms_median"] / r["iter_ms_median"]
        if base and base.get("sim_makespan_ms") and r.get("sim_makespan_ms"):
            r["sim_speedup_vs_random"] = base["sim_makespan_ms"] / r["sim_makespan_ms"]
    csv_path = os.path.join(out, a.csv_name)
    with open(csv_path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(CSV_COLUMNS + EXTRA_COLUMNS)
        for r in rows:
            w.writerow([fnum(r.get(c)) for c in CSV_COLUMNS + EXTRA_COLUMNS])
    with open(os.path.join(out, "results.json"), "w", encoding="utf-8") as f:
        json.dump({"args": {k: v for k, v in vars(a).items()}, "network": net_note, "rows": rows}, f, indent=1,
                  default=str)
    table = print_table(rows)
    with open(os.path.join(out, "table.txt"), "w", encoding="utf-8") as f:
        f.write(table + "\n")
    try:
        plots = make_plots(rows, details, out)
    except Exception as e:  # plots are a convenience: never lose the CSV for them
        log(f"warning: plots failed: {type(e).__name__}: {e}")
        plots = []
    log("")
    log(f"== results ({net_note}; batch {a.batch}/worker unless raised by the calibration (column batch), "
        f"{W} workers, {K} server(s), "
        f"{a.iters} measured iterations; a = N/C, N = max(1, W/K) x param bytes / rate, "
        f"C = compute per iteration timed here)")
    log(table)
    log("")
    log(f"CSV:    {csv_path}")
    for p in plots:
        log(f"plot:   {p}")
    for r in rows:
        if r.get("trace"):
            log(f"trace:  {r['trace']}")
    log(f"total {fmt_dur(time.monotonic() - t_start)}")
    bad = [r for r in rows if r["status"] != "ok"]
    return 1 if bad or len(rows) < len(jobs) or not rows else 0


if __name__ == "__main__":
    sys.exit(main())
