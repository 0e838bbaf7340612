"""End-to-end benchmark: real parameter-server jobs (tictac.torch.train) on an emulated cluster
(bench/cluster), one job per (model, mode, policy, round), next to the simulator.

    bench/e2e/e2e --models vgg16 --modes inference,training --policies random,tic,tac \\
        --iters 10 --warmup 2 --image-size 32 --out results/e2e
    bench/e2e/e2e --compute emulated --models vgg16,inception_v3 --workers 4 --ps 1 \\
        --policies random,fifo,tic,tac,gloo --out results/emulated
    bench/e2e/e2e --framework tf --workers 2 --iters 30 --out results/tf   # TF: grpc vs grpc+tictac

For each (model, mode) the link rate is calibrated (calibrate.py) so that the comm/compute ratio
a = N / C is about --target-ratio. ``--compute real`` runs the real model on the CPU;
``--compute emulated`` replays its profiled op times (emulate.py: no CPU for compute, the real
tensors over the real transport). Policies are interleaved in --rounds paired rounds; each
speedup comes with a 95% bootstrap interval (stats.py). See docs/benchmarks.md, "End-to-end
benchmark", for every column.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from . import calibrate, jobs, plot, report, simulate, stats
from .common import ALL_POLICIES, DDP_POLICIES, DEFAULT_MODELS, ROOT, fmt_dur, log, rate_bytes


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="bench/e2e/e2e", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS),
                    help="comma list of torchvision names (or module.path:callable)")
    ap.add_argument("--modes", default="inference,training")
    ap.add_argument("--policies", default="random,fifo,layer,tic,tac",
                    help=f"comma list of {', '.join(ALL_POLICIES)} (gloo: the PS over torch's gloo backend; "
                         f"ddp: DistributedDataParallel over gloo on the same workers)")
    ap.add_argument("--compute", choices=("real", "emulated"), default="real",
                    help="real: the model computes on the CPU; emulated: each worker replays the op times "
                         "profiled once with the real model (bench/graphs/emulated/), sleeping (emulate.py)")
    ap.add_argument("--iters", type=int, default=10, help="measured iterations per job")
    ap.add_argument("--warmup", type=int, default=2, help="warm-up iterations per job (not measured)")
    ap.add_argument("--rounds", type=int, default=None,
                    help="paired rounds: every policy runs once per round, the order rotating (default 1; "
                         "--overhead: 5)")
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
                    help="--compute real: when even --max-rate leaves a above the target, calibration raises the "
                         "per-worker batch up to this (compute grows with it); --max-batch 0: never. "
                         "--compute emulated slows the emulated device instead")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    ap.add_argument("--loopback", action="store_true", help="no namespaces (links unshaped)")
    ap.add_argument("--job-timeout", type=float, default=900.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="folder with the tictac CLI")
    ap.add_argument("--no-sim", action="store_true")
    ap.add_argument("--sim-inputs", choices=("job", "pooled", "nominal"), default="job",
                    help="the simulator's compute times, link rate, backward factor and update cost: measured "
                         "in each job (default), pooled over the policies of a (model, mode), or the nominal "
                         "ones (the uncontended profile, the nominal rate); see siminputs.py")
    ap.add_argument("--out", default=os.path.join(ROOT, "results", "e2e"))
    ap.add_argument("--csv-name", default="results.csv")
    ap.add_argument("--overhead", action="store_true",
                    help="the 'nothing to hide' check: fifo vs --policies (default tic,tac) in interleaved "
                         "rounds on a fast link with a << 1 (default squeezenet1_1 at 224, 10gbit); see overhead.py")
    ap.add_argument("--overhead-target", type=float, default=0.02,
                    help="--overhead: the largest acceptable cost vs fifo (fraction)")
    ap.add_argument("--framework", choices=("torch", "tf"), default="torch",
                    help="tf: TensorFlow PS inference, stock grpc vs the grpc+tictac drop-in (tf_bench.py); "
                         "policies grpc,fifo,tic,tac; --iters steps, --rounds ignored")
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
    if a.framework == "tf":
        from . import tf_bench
        tf_bench.apply_defaults(a, ap.parse_args([]), ap.error)
        return a
    a.models = [m for m in a.models.split(",") if m]
    a.modes = [m for m in a.modes.split(",") if m]
    a.policies = [p for p in a.policies.split(",") if p]
    if a.overhead:
        from . import overhead
        overhead.apply_defaults(a, ap.parse_args([]))
        if a.rounds < 1 or not 0 < a.overhead_target < 1:
            ap.error("--overhead needs --rounds >= 1 and 0 < --overhead-target < 1")
    if a.rounds is None:
        a.rounds = 1
    a.data_parallel = "ddp" in a.modes    # calibrated for a ring all-reduce (calibrate.link_load)
    if a.data_parallel:   # data-parallel training: the ddp-family policies only
        bad = [p for p in a.policies if p not in DDP_POLICIES]
        if bad:
            ap.error(f"--modes ddp runs data-parallel rows: --policies must be among {', '.join(DDP_POLICIES)}, "
                     f"not {', '.join(bad)}")
        a.modes = list(dict.fromkeys("training" if m == "ddp" else m for m in a.modes))
    for m in a.modes:
        if m not in ("inference", "training"):
            ap.error(f"--modes: {m!r} is not inference, training or ddp")
    for p in a.policies:
        if p not in ALL_POLICIES:
            ap.error(f"--policies: {p!r} is not one of {', '.join(ALL_POLICIES)}")
    if len(set(a.policies)) != len(a.policies):
        ap.error("--policies: a policy is named twice")
    if a.iters < 1 or a.warmup < 0 or a.workers < 1 or a.ps < 1 or a.batch < 1 or a.rounds < 1:
        ap.error("need --iters >= 1, --warmup >= 0, --workers/--ps/--batch/--rounds >= 1")
    try:
        for r in (a.rate, a.max_rate, a.min_rate):
            rate_bytes(r)
    except ValueError as e:
        ap.error(str(e))
    if a.target_ratio <= 0:
        ap.error("--target-ratio must be > 0")
    return a


def main(argv=None) -> int:
    a = parse_args(argv)
    if a.framework == "tf":
        from . import tf_bench
        return tf_bench.run(a)
    from bench.cluster import Cluster, netns_support
    out = os.path.abspath(a.out)
    for sub in ("jobs", "traces", "graphs", "logs"):
        os.makedirs(os.path.join(out, sub), exist_ok=True)
    # the ranks import tictac (python/) and bench.e2e (tinynet, emulate, ddp_job) from this tree
    pythonpath = os.pathsep.join(p for p in [os.path.join(ROOT, "python"), ROOT,
                                             os.environ.get("PYTHONPATH", "")] if p)
    os.environ["PYTHONPATH"] = pythonpath
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
    t_start = time.monotonic()
    log(f"== TicTac end-to-end benchmark (compute: {a.compute}): {K} server(s) + {W} worker(s), batch "
        f"{a.batch}/worker, {a.warmup} warm-up + {a.iters} measured iterations per job, {a.rounds} round(s); "
        f"{net_note}")
    setups = calibrate.calibrate_setups(a)
    if a.overhead:
        from . import overhead
        return overhead.run(a, Cluster, [s for s in setups if "error" not in s], out, pythonpath, net_note)

    rows, details, net_mode, planned = jobs.run_all(setups, a, out, pythonpath, t_start)
    if not a.no_sim:
        for r in rows:
            s = next(x for x in setups if x.get("model") == r["model"] and x.get("mode") == r["mode"])
            if r["policy"] not in ("random", "fifo", "layer", "tic", "tac"):
                continue
            g = simulate.graph_for(s["spec"], s["batch"], s["image"], a.num_classes, os.path.join(out, "graphs"),
                                   a.threads, pythonpath)
            sim = simulate.simulate(tictac, g, r["policy"], s["mode"], W, K, s["rate_bps"], a.iters) if g else None
            if sim:      # the nominal prediction; replaced below by the calibrated one
                r.update(sim)
                r.update({k.replace("sim_", "sim_nominal_", 1): v for k, v in sim.items()})
                r["sim_graph"] = g
                r["sim_inputs"] = "nominal"
        if a.sim_inputs != "nominal":
            simulate.calibrate_rows(rows, a, tictac, os.path.join(out, "graphs"))

    stats.add_speedups(rows, details)
    for r in rows:
        base = next((b for b in rows if b["model"] == r["model"] and b["mode"] == r["mode"]
                     and b["policy"] == "random"), None)
        if base and base.get("sim_makespan_ms") and r.get("sim_makespan_ms"):
            r["sim_speedup_vs_random"] = base["sim_makespan_ms"] / r["sim_makespan_ms"]
    csv_path = os.path.join(out, a.csv_name)
    report.write_csv(csv_path, rows)
    report.write_json(os.path.join(out, "results.json"), dict(vars(a)), net_note, rows, details)
    text = report.table(rows)
    report.write_table(out, text)
    try:
        plots = plot.make_plots(rows, details, out)
    except Exception as e:  # plots are a convenience: never lose the CSV for them
        log(f"warning: plots failed: {type(e).__name__}: {e}")
        plots = []
    log("")
    log(f"== results (compute: {a.compute}; {net_note}; batch {a.batch}/worker unless raised by the calibration "
        f"(column batch), {W} workers, {K} server(s), {a.iters} measured iterations x {a.rounds} round(s) per "
        f"policy; a = N/C, N = {'2(W-1)/W' if a.data_parallel else 'max(1, W/K)'} x param bytes / rate; "
        f"speedups: median iteration ratio, 95% bootstrap "
        f"CI; spread/: random's straggler spread / this one's)")
    log(text)
    log("")
    log(f"CSV:    {csv_path}")
    for p in plots:
        log(f"plot:   {p}")
    for r in rows:
        if r.get("trace"):
            log(f"trace:  {r['trace']}")
    log(f"total {fmt_dur(time.monotonic() - t_start)}")
    bad = [r for r in rows if r["status"] != "ok"]
    return 1 if bad or not rows or sum(r.get("rounds") or 0 for r in rows) < planned else 0


if __name__ == "__main__":
    sys.exit(main())
