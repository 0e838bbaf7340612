"""Running the jobs: one job per (model, mode, policy, round) on the emulated cluster, policies
interleaved in paired rounds (the order rotates by one each round), then one row per (model,
mode, policy) from all its rounds' measured iterations.

Policies: random, fifo, layer, tic, tac are tictac PS jobs (``python -m tictac.torch.train
--backend tictac --policy P``); ``gloo`` is the same PS training over torch's stock gloo
backend (policy fifo: the issue order, which gloo does not enforce); ``ddp`` is
DistributedDataParallel over gloo on the same workers (ddp_job.py; ``ddp-gloo`` is the same,
``ddp-tictac`` DDP over the tictac backend, ``ordered-<policy>`` tictac.torch.ordered_ddp). ``--compute emulated``
runs the model ``bench.e2e.emulate:build`` with TICTAC_EMU_PROFILE / TICTAC_EMU_SCALE.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

from .analyse import analyse, one_iteration_trace
from .common import DDP_POLICIES, PS_POLICIES, fmt_dur, log, rate_str

ROW_KEYS = ("throughput", "iter_ms_median", "iter_ms_p95", "iter_ms_mean", "iter_ms_var", "straggler_spread_ms",
            "straggler_spread_median_ms", "straggler_max_over_mean", "efficiency", "efficiency_train_py",
            "measured_makespan_ms", "comm_ms", "compute_ms", "a_measured", "stall_ms", "iterations", "rounds")


def job_command(s: Dict[str, Any], pol: str, a: argparse.Namespace, files: Dict[str, str]) -> List[str]:
    model = "bench.e2e.emulate:build" if s.get("compute") == "emulated" else s["spec"]
    common = ["--model", model, "--mode", s["mode"], "--iters", str(a.iters + a.warmup), "--warmup", str(a.warmup),
              "--batch", str(s["batch"]), "--image-size", str(s["image"]), "--num-classes", str(a.num_classes),
              "--threads", str(a.threads), "--seed", str(a.seed), "--log-json", files["jsonl"]]
    if pol in DDP_POLICIES:
        return [sys.executable, "-m", "bench.e2e.ddp_job", *common, "--variant", "ddp-gloo" if pol == "ddp" else pol]
    backend, policy = ("gloo", "fifo") if pol == "gloo" else ("tictac", pol)
    return [sys.executable, "-m", "tictac.torch.train", *common, "--policy", policy, "--num-ps", str(a.ps),
            "--backend", backend, "--trace", files["trace"], "--summary-json", files["summary"], "--quiet"]


def job_env(cluster, s: Dict[str, Any], pol: str, pythonpath: str) -> Dict[str, str]:
    env = {"PYTHONPATH": pythonpath}
    if s.get("compute") == "emulated":
        env["TICTAC_EMU_PROFILE"] = s["emu_profile"]
        env["TICTAC_EMU_SCALE"] = repr(s.get("emu_scale") or 1.0)
    if pol in ("gloo", "ddp", "ddp-gloo"):       # gloo picks its interface from the hostname otherwise
        env["GLOO_SOCKET_IFNAME"] = "eth0" if cluster.mode == "netns" else "lo"
    return env


def run_job(cluster, s: Dict[str, Any], pol: str, a: argparse.Namespace, out: str, pythonpath: str,
            tag: str) -> Dict[str, Any]:
    """Run one job on the open cluster: {"status": ok|failed|timeout, "job_s", "jsonl", "trace",
    "summary", "tag"}. Raises what Cluster.run raises other than a timeout."""
    from bench.cluster import ClusterTimeout
    jd = os.path.join(out, "jobs", tag)
    os.makedirs(jd, exist_ok=True)
    files = {k: os.path.join(jd, f) for k, f in (("jsonl", "iterations.jsonl"), ("trace", "trace_full.json"),
                                                  ("summary", "summary.json"))}
    for f in files.values():
        if os.path.exists(f):
            os.remove(f)
    job = {"status": "ok", "tag": tag, **files}
    t0 = time.monotonic()
    try:
        codes = cluster.run([job_command(s, pol, a, files)] * cluster.hosts, env_extra=job_env(cluster, s, pol, pythonpath),
                            name=tag)
    except ClusterTimeout as e:
        codes = e.codes
        job["status"] = "timeout"
    job["job_s"] = time.monotonic() - t0
    if job["status"] == "ok" and (any(codes) or not os.path.exists(files["jsonl"])):
        job["status"] = "failed"
        f = cluster.last_failure or {}
        log(f"    FAILED (exit statuses {codes}); log {f.get('log', cluster.log_dir)}:")
        for line in (f.get("tail") or [])[-6:]:
            log(f"      {line}")
    return job


def base_row(s: Dict[str, Any], pol: str, a: argparse.Namespace, net_mode: str) -> Dict[str, Any]:
    return {"model": s["model"], "mode": s["mode"], "policy": pol, "compute": s.get("compute", "real"), "a": s["a"],
            "rate_mbit": int(round(s["rate_bps"] * 8 / 1e6)), "net_mode": net_mode, "image_size": s["image"],
            "batch": s["batch"], "workers": a.workers, "ps": a.ps, "iters": a.iters, "param_mb": s["param_bytes"] / 1e6,
            "calib_compute_ms": s["calib_ms"], "emu_scale": s.get("emu_scale"),
            "emu_clock": (os.environ.get("TICTAC_EMU_CLOCK") or "device") if s.get("compute") == "emulated" else "",
            "status": "ok"}


def make_row(s, pol, a, out, net_mode, jobs: List[Dict[str, Any]]) -> Tuple[Dict[str, Any], Optional[Dict[str, Any]]]:
    """The row of (setup, policy) from its jobs (one per round) and analyse()'s details."""
    row = base_row(s, pol, a, net_mode)
    row["job_s"] = sum(j["job_s"] for j in jobs)
    ok = [j for j in jobs if j["status"] == "ok"]
    if not ok:
        row["status"] = jobs[0]["status"] if jobs else "failed"
        return row, None
    if len(ok) < len(jobs):
        row["rounds_failed"] = len(jobs) - len(ok)
    try:
        d = analyse([j["jsonl"] for j in ok], s["batch"])
    except (OSError, ValueError, KeyError) as e:
        row["status"] = "failed"
        log(f"    FAILED to read {s['model']} {s['mode']} {pol}: {e}")
        return row, None
    for key in ROW_KEYS:
        row[key] = d.get(key)
    try:
        with open(ok[0]["summary"], encoding="utf-8") as f:
            row["policy_used"] = json.load(f)["plan"]["policy"]
    except (OSError, ValueError, KeyError):
        row["policy_used"] = pol if pol in DDP_POLICIES else ""
    rep = ok[min(d["rep_round"], len(ok) - 1)]
    row["jsonl"], row["trace_full"] = rep["jsonl"], rep["trace"]
    cut = os.path.join(out, "traces", f"{rep['tag']}.iter{d['rep_iter']}.json")
    if os.path.exists(rep["trace"]) and one_iteration_trace(rep["trace"], cut, d["rep_iter"]):
        row["trace"] = cut
    return row, d


def run_all(setups, a: argparse.Namespace, out: str, pythonpath: str, t_start: float):
    """Every job of every setup, rounds interleaved; returns (rows, details, net_mode, planned)."""
    from bench.cluster import Cluster, ClusterError, Interrupted
    good = [s for s in setups if "error" not in s]
    planned = len(good) * len(a.policies) * a.rounds
    rows: List[Dict[str, Any]] = []
    details: Dict[Tuple[str, str, str], Dict[str, Any]] = {}
    done_s: List[float] = []
    cluster, cur_rate, net_mode, k = None, None, "?", 0
    jobs: Dict[Tuple[str, str, str], List[Dict[str, Any]]] = {}
    setup_of = {(s["model"], s["mode"]): s for s in good}
    try:
        for s in good:
            if cluster is None or s["rate_bps"] != cur_rate:
                if cluster is not None:
                    cluster.close()
                cluster = Cluster(hosts=a.workers + a.ps, rate=rate_str(s["rate_bps"]), threads_per_proc=a.threads,
                                  log_dir=os.path.join(out, "logs"), loopback=a.loopback, timeout=a.job_timeout,
                                  echo=False, quiet=True)
                cluster.open()
                cur_rate, net_mode = s["rate_bps"], cluster.mode
            for rnd in range(a.rounds):
                order = a.policies[rnd % len(a.policies):] + a.policies[:rnd % len(a.policies)]
                for pol in order:
                    k += 1
                    eta = f", ETA {fmt_dur(statistics.mean(done_s) * (planned - k + 1))}" if done_s else ""
                    log(f"[{k}/{planned}] {s['model']} {s['mode']} {pol} ({s['compute']}) round {rnd + 1}/{a.rounds} "
                        f"at {rate_str(s['rate_bps'])} (a={s['a']:.2f}) ... "
                        f"(elapsed {fmt_dur(time.monotonic() - t_start)}{eta})")
                    tag = f"{s['model']}_{s['mode']}_{pol}" + (f"_r{rnd + 1}" if a.rounds > 1 else "")
                    job = run_job(cluster, s, pol, a, out, pythonpath, tag)
                    jobs.setdefault((s["model"], s["mode"], pol), []).append(job)
                    done_s.append(job["job_s"])
                    if job["status"] == "ok":
                        try:
                            d = analyse(job["jsonl"], s["batch"])
                            e_txt = f"{d['efficiency']:.2f}" if d.get("efficiency") is not None else "n/a"
                            log(f"    ok in {job['job_s']:.0f} s: iter median {d['iter_ms_median']:.0f} ms, "
                                f"spread {d['straggler_spread_ms']:.0f} ms, E {e_txt}")
                        except (OSError, ValueError, KeyError) as e:
                            log(f"    unreadable output: {e}")
    except (Interrupted, KeyboardInterrupt) as e:
        log(f"interrupted ({e}); writing what was measured")
    except ClusterError as e:
        log(f"error: cluster: {e}")
    finally:
        if cluster is not None:
            cluster.close()
    for (model, mode, pol), js in jobs.items():      # in setup order, then policy order
        row, d = make_row(setup_of[(model, mode)], pol, a, out, net_mode, js)
        rows.append(row)
        if d is not None:
            details[(model, mode, pol)] = d
    order = {(s["model"], s["mode"], p): i for i, (s, p) in enumerate((s, p) for s in good for p in a.policies)}
    rows.sort(key=lambda r: order[(r["model"], r["mode"], r["policy"])])
    return rows, details, net_mode, planned


def run_row(cluster, s, pol, a, out, pythonpath, tag):
    """One job and its own row (overhead.py's unit): (row, details or None)."""
    job = run_job(cluster, s, pol, a, out, pythonpath, tag)
    row, d = make_row(s, pol, a, out, cluster.mode, [job])
    row["jsonl"] = job["jsonl"]
    return row, d
