"""``bench/e2e/e2e --framework tf``: TensorFlow parameter-server inference (a VGG-like Keras-size
convnet, 17.7 MB of parameters, 1 PS and --workers workers) with stock ``grpc`` (TF's natural,
random transfer order) against the ``grpc+tictac`` drop-in without priorities (fifo), with TIC
and with TAC (op times profiled by the calibration run: tictac.tf.op_times).

The run (bench/tf/tf_ps_bench.py, TF's python: .venv-tf or $TICTAC_TF_PYTHON):
1. calibrate: the workers' forward passes with the variables local, all at once: C (median
   iteration) and the parameter bytes; writes the TAC op-times file;
2. the link: every transfer crosses the loopback of a network namespace of its own
   (``unshare -rn``), shaped by tc tbf to rate = workers x bytes x 8 / (C x a), a =
   --target-ratio (the PS sends every worker all parameters each step); --loopback: unshaped;
3. one process holds every arm's servers; the arms' steps are interleaved (rotating order).
Rows (CSV columns as for torch, docs/benchmarks.md): throughput, iteration median and p95,
straggler spread (slowest - fastest worker per step), E (FULL_TRACE steps: bench/tf/tf_ps_bench.py
says how), ``speedup_vs_random`` = against stock grpc (TF's random order) with a 95% bootstrap
interval over blocks of 5 paired steps, ``order_inversions`` (fraction of parameter pairs that
arrived against the forward order; random ~ 0.5).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from typing import Any, Dict, List

from . import report, stats
from .common import ROOT, log, rate_bytes

TF_POLICIES = ("grpc", "fifo", "tic", "tac")
BLOCK = 5  # paired steps per bootstrap stratum


def apply_defaults(a, dflt, error) -> None:
    if a.policies == dflt.policies:
        a.policies = ",".join(TF_POLICIES)
    a.policies = [p for p in a.policies.split(",") if p]
    bad = [p for p in a.policies if p not in TF_POLICIES]
    if bad:
        error(f"--framework tf: --policies must be among {', '.join(TF_POLICIES)}, not {', '.join(bad)}")
    if "grpc" not in a.policies:
        error("--framework tf: --policies must include grpc (the baseline every speedup is against)")
    if a.modes not in (dflt.modes, "inference"):
        error("--framework tf runs inference only (--modes inference)")
    if a.batch == dflt.batch:
        a.batch = 16
    if a.iters < BLOCK or a.warmup < 0 or a.workers < 1 or a.batch < 1:
        error(f"--framework tf needs --iters >= {BLOCK}, --warmup >= 0, --workers/--batch >= 1")
    a.models, a.modes = ["vgglike-tf"], ["inference"]


def _python() -> str:
    py = os.environ.get("TICTAC_TF_PYTHON") or os.path.join(ROOT, ".venv-tf", "bin", "python")
    if not os.path.exists(py):
        raise SystemExit(f"bench/e2e --framework tf: no TensorFlow python at {py}: run `make deps-tf` "
                         "(or set TICTAC_TF_PYTHON)")
    return py


def _json_line(cmd: List[str], env: Dict[str, str], timeout: float) -> Dict[str, Any]:
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        raise SystemExit(f"bench/e2e --framework tf: {' '.join(cmd[:4])} ... failed (exit {p.returncode}):\n"
                         f"{p.stderr[-3000:]}")
    return json.loads(lines[-1])


def run(a) -> int:
    out = os.path.abspath(a.out)
    os.makedirs(out, exist_ok=True)
    py, script = _python(), os.path.join(ROOT, "bench", "tf", "tf_ps_bench.py")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), TICTAC_BUILD_DIR=os.path.abspath(a.build),
               TF_CPP_MIN_LOG_LEVEL="3")
    op_times = os.path.join(out, "op_times.json")
    common = ["--workers", str(a.workers), "--batch", str(a.batch), "--op-times", op_times]
    cal = _json_line([py, script, "--mode", "calibrate", "--steps", "10", *common], env, a.job_timeout)
    bits = a.workers * cal["param_bytes"] * 8
    rate = int(bits / (cal["compute_s"] * a.target_ratio))
    rate = max(int(rate_bytes(a.min_rate) * 8), min(rate, int(rate_bytes(a.max_rate) * 8)))
    log(f"tf: C = {cal['compute_s'] * 1e3:.1f} ms ({a.workers} workers at once), {cal['param_bytes'] / 1e6:.1f} MB "
        f"of parameters -> link {rate / 1e6:.0f} Mbit/s for a = {a.target_ratio}")
    cmd = [py, script, "--mode", "run", "--steps", str(a.iters), "--warmup", str(a.warmup), "--traced", "3",
           "--arms", ",".join(a.policies), *common]
    if a.loopback:
        net = "loopback (unshaped)"
    else:
        net = "netns-lo"
        shell = (f"ip link set lo up && tc qdisc add dev lo root tbf rate {rate}bit burst 512kb latency 100ms && "
                 + " ".join(f"'{c}'" for c in cmd))
        cmd = ["unshare", "-rn", "bash", "-c", shell]
    res = _json_line(cmd, env, a.job_timeout)
    with open(os.path.join(out, "results.json"), "w", encoding="utf-8") as f:
        json.dump({"calibration": cal, "rate_bit_s": rate, "network": net, "run": res}, f, indent=1)
    rows = rows_of(a, cal, rate, net, res)
    csv_path = os.path.join(out, a.csv_name)
    report.write_csv(csv_path, rows)
    text = report.table(rows)
    print(text)
    print("order_inversions: " + ", ".join(f"{r['policy']} {r['order_inversions']:.2f}" for r in rows
                                            if r.get("order_inversions") is not None))
    report.write_table(out, text)
    log(f"tf: wrote {csv_path}; TicTac moved {res['stats']['tensors']} tensors, gRPC RecvTensor "
        f"{res['stats']['grpc_recv_tensor']}")
    return 0


def _mean(xs):
    xs = [x for x in xs if x is not None]
    return statistics.fmean(xs) if xs else None


def rows_of(a, cal, rate, net, res) -> List[Dict[str, Any]]:
    arms = res["arms"]
    base = arms["grpc"]
    rows = []
    for name in a.policies:
        r = arms[name]
        ms = [t * 1e3 for t in r["iter_s"]]
        rnd = [s // BLOCK for s in r["step"]]
        traced = r.get("traced", [])
        row = {"model": "vgglike-tf", "mode": "inference", "policy": name, "a": a.target_ratio,
               "compute": "real", "status": "ok", "iterations": len(ms), "rounds": max(rnd) + 1,
               "throughput": a.workers * a.batch / (statistics.median(ms) / 1e3),
               "iter_ms_median": statistics.median(ms), "iter_ms_mean": statistics.fmean(ms),
               "iter_ms_p95": sorted(ms)[int(0.95 * (len(ms) - 1))],
               "iter_ms_var": statistics.pvariance(ms),
               "straggler_spread_ms": statistics.fmean(r["spread_s"]) * 1e3,
               "straggler_spread_median_ms": statistics.median(r["spread_s"]) * 1e3,
               "straggler_max_over_mean": statistics.fmean(r["max_over_mean"]),
               "efficiency": _mean(t["E"] for t in traced), "comm_ms": _mean(t["N_ms"] for t in traced),
               "compute_ms": _mean(t["C_ms"] for t in traced),
               "measured_makespan_ms": _mean(t["m_ms"] for t in traced),
               "order_inversions": _mean(t["inversions"] for t in traced),
               "rate_mbit": round(rate / 1e6), "net_mode": net, "batch": a.batch, "workers": a.workers, "ps": 1,
               "iters": a.iters, "param_mb": cal["param_bytes"] / 1e6, "calib_compute_ms": cal["compute_s"] * 1e3,
               "policy_used": "grpc" if name == "grpc" else f"grpc+tictac {name}"}
        s, lo, hi = stats.ratio_ci([t * 1e3 for t in base["iter_s"]], [x // BLOCK for x in base["step"]], ms, rnd)
        row["speedup_vs_random"], row["speedup_ci_low"], row["speedup_ci_high"] = s, lo, hi
        s, lo, hi = stats.ratio_ci(base["spread_s"], [x // BLOCK for x in base["step"]], r["spread_s"], rnd,
                                   stat=statistics.fmean)
        row["spread_reduction_vs_random"], row["spread_reduction_ci_low"], row["spread_reduction_ci_high"] = s, lo, hi
        rows.append(row)
    return rows


if __name__ == "__main__":
    sys.exit("run through bench/e2e/e2e --framework tf")
