#!/usr/bin/env python
"""Allreduce bus bandwidth of the "tictac" c10d backend against gloo, same run, same processes.

    flock /tmp/tictac-bench.lock .venv/bin/python bench/allreduce_vs_gloo.py \
        [--ranks 4] [--mib 64] [--rounds 7] [--dtype float32]
    # a sweep in one command: every size at every world size
    ... bench/allreduce_vs_gloo.py --ranks 2,4 --mib 1,16,64 --rounds 5

`--ranks` processes on loopback each join a tictac group (the default group) and a gloo group.
For each size, every round runs one allreduce on each backend, in alternating order (paired,
interleaved rounds), after a barrier; a round's time is the slowest rank's (a MAX over ranks).
One warm-up round per backend and size is dropped. Bus bandwidth = 2 (n-1)/n x bytes / time (the traffic each rank
sends in a bandwidth-optimal allreduce). Prints per-round numbers, the medians and the ratio
tictac / gloo, and checks that both backends produced the same sum.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import random
import statistics
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "python"))


def _rank(rank, world, init_file, sizes_mib, rounds, dtype_name, queue):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    import tictac.torch  # noqa: F401

    dist.init_process_group("tictac", init_method=f"file://{init_file}", rank=rank,
                            world_size=world)
    gloo = dist.new_group(backend="gloo")
    dtype = getattr(torch, dtype_name)
    results = []
    for mib in sizes_mib:
        results.append(_one_size(rank, gloo, mib, rounds, dtype))
    if rank == 0:
        queue.put(results)
    dist.barrier(group=gloo)
    dist.destroy_process_group()


def _one_size(rank, gloo, mib, rounds, dtype):
    import torch
    import torch.distributed as dist

    n = (mib << 20) // torch.empty((), dtype=dtype).element_size()
    base = torch.rand(n, generator=torch.Generator().manual_seed(rank)).to(dtype)
    bufs = {"tictac": base.clone(), "gloo": base.clone()}
    groups = {"tictac": None, "gloo": gloo}
    times = {"tictac": [], "gloo": []}
    for r in range(rounds + 1):
        order = ["tictac", "gloo"] if r % 2 == 0 else ["gloo", "tictac"]
        for name in order:
            buf = bufs[name]
            buf.copy_(base)
            dist.barrier(group=gloo)
            t0 = time.perf_counter()
            dist.all_reduce(buf, group=groups[name])
            dt = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
            dist.all_reduce(dt, op=dist.ReduceOp.MAX, group=gloo)
            if r > 0:
                times[name].append(dt.item())
    same = torch.allclose(bufs["tictac"], bufs["gloo"], rtol=1e-4, atol=1e-4)
    return times, bool(same)


def _run(world, sizes_mib, rounds, dtype):
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        init = os.path.join(tmp, "init")
        procs = [ctx.Process(target=_rank, args=(r, world, init, sizes_mib, rounds, dtype, queue))
                 for r in range(world)]
        for p in procs:
            p.start()
        results = queue.get(timeout=1800)
        for p in procs:
            p.join(timeout=60)
        if any(p.exitcode != 0 for p in procs):
            print("a rank failed:", [p.exitcode for p in procs], file=sys.stderr)
            return None
    return results


def _median_ci(values, resamples=2000, seed=1):
    """95% percentile-bootstrap interval of the median of `values` (paired round ratios)."""
    rng = random.Random(seed)
    est = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(resamples))
    return est[int(0.025 * (resamples - 1))], est[int(0.975 * (resamples - 1))]


def _report(n, mib, dtype, rounds, times, same):
    nbytes = mib << 20
    busbw = {k: [2 * (n - 1) / n * nbytes / t / 1e9 for t in v] for k, v in times.items()}
    print(f"allreduce {mib} MiB {dtype}, {n} ranks on loopback, {rounds} paired rounds")
    for k in ("tictac", "gloo"):
        print(f"  {k:7s} time ms: " + " ".join(f"{t * 1e3:.1f}" for t in times[k]))
        print(f"  {k:7s} busbw GB/s: " + " ".join(f"{b:.2f}" for b in busbw[k]))
    med = {k: statistics.median(v) for k, v in busbw.items()}
    ratios = [a / b for a, b in zip(busbw["tictac"], busbw["gloo"])]
    lo, hi = _median_ci(ratios)
    print(f"median busbw: tictac {med['tictac']:.2f} GB/s, gloo {med['gloo']:.2f} GB/s, "
          f"ratio {med['tictac'] / med['gloo']:.2f}x (median of paired ratios "
          f"{statistics.median(ratios):.2f}x, 95% bootstrap interval [{lo:.2f}, {hi:.2f}])")
    print(f"results equal: {same}")
    return (n, mib, med["tictac"], med["gloo"], med["tictac"] / med["gloo"], statistics.median(ratios))


def _ints(text):
    return [int(x) for x in text.split(",") if x.strip()]


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=_ints, default=[4], help="world sizes, comma-separated (4)")
    ap.add_argument("--mib", type=_ints, default=[64], help="sizes in MiB, comma-separated (64)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--dtype", default="float32")
    args = ap.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    rows, ok = [], True
    for world in args.ranks:
        results = _run(world, args.mib, args.rounds, args.dtype)
        if results is None:
            return 1
        for mib, (times, same) in zip(args.mib, results):
            rows.append(_report(world, mib, args.dtype, args.rounds, times, same))
            ok = ok and same
    if len(rows) > 1:
        print("\nranks | MiB | tictac busbw GB/s | gloo busbw GB/s | ratio of medians | median of paired ratios")
        for n, mib, t, g, r, pr in rows:
            print(f"{n} | {mib} | {t:.2f} | {g:.2f} | {r:.2f}x | {pr:.2f}x")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
