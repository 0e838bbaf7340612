"""The reduce-scatter of vgg16's classifier weight alone, and mixed with conv-sized all-reduces,
on the tictac backend in an emulated cluster: how full it keeps the links without a training job.

Run one process per host, e.g. (root; docs/ddp.md):
    bench/cluster/cluster run --hosts 4 --rate 2261mbit -- .venv/bin/python bench/e2e/rs_mix_probe.py 4 60 mix

Arguments: ROUNDS JITTER_MS MODE. MODE rs: a 411 MB reduce-scatter (priority 100); ar: nine
all-reduces of 2.2-9.4 MB (vgg16's conv buckets), one every 120 +- JITTER_MS ms per rank (a
different draw on each rank), at priorities 0-8 (more urgent); mix: both at once, the
reduce-scatter first. Each round starts after a barrier; rank by rank it prints the round's time
and the MB/s this rank sent ((n-1)/n of the reduce-scatter and 2(n-1)/n of the all-reduces)."""

from __future__ import annotations

import os
import random
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
os.environ.setdefault("TICTAC_BUILD_DIR", os.path.join(ROOT, "build"))

CONV_MB = [9.4, 9.4, 9.4, 9.4, 9.4, 4.7, 2.4, 2.4, 2.2]
FC1_BYTES = 411_041_792


def main(argv) -> int:
    import torch
    import torch.distributed as dist

    import tictac.torch as tt

    if len(argv) != 3 or argv[2] not in ("rs", "ar", "mix"):
        print(__doc__)
        return 2
    rounds, jitter_ms, mode = int(argv[0]), float(argv[1]), argv[2]
    torch.set_num_threads(1)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("tictac", init_method="env://", rank=rank, world_size=world)
    n = FC1_BYTES // 4
    n -= n % world
    send, out = torch.ones(n), torch.empty(n // world)
    bufs = [torch.ones(int(mb * 1e6 / 4)) for mb in CONV_MB]
    rng = random.Random(rank * 7 + 1)
    for r in range(rounds):
        dist.barrier()
        t = time.perf_counter()
        works = []
        if mode in ("mix", "rs"):
            with tt.priority(100):
                works.append(dist.reduce_scatter_tensor(out, send, async_op=True))
        if mode in ("mix", "ar"):
            for k, b in enumerate(bufs):
                time.sleep(max(0.0, 0.12 + rng.uniform(-jitter_ms, jitter_ms) / 1e3))
                with tt.priority(k):
                    works.append(dist.all_reduce(b, async_op=True))
        for w in works:
            w.wait()
        el = time.perf_counter() - t
        mb = ((world - 1) / world * FC1_BYTES / 1e6 if mode != "ar" else 0.0) + \
             (2 * (world - 1) / world * sum(CONV_MB) if mode != "rs" else 0.0)
        print(f"rank{rank} {mode} jitter {jitter_ms:g} ms round {r}: {el * 1e3:.0f} ms, {mb / el:.0f} MB/s sent",
              flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
