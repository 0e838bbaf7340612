"""The data-parallel rows' rank program (``--variant``): DistributedDataParallel over gloo (the
``ddp`` / ``ddp-gloo`` baseline) or over tictac, or tictac.torch.ordered_ddp, on the workers of an
emulated cluster (bench/cluster runs it on every host; host 0, the PS host of the PS jobs,
exits at once, so the same W workers run it). Synthetic data as tictac.torch.train, a local
SGD step per iteration (momentum 0.9, lr 0.01) in training, forward only in inference.

    python -m bench.e2e.ddp_job --model torchvision:vgg16 --mode training --iters 12 --warmup 2 \\
        --batch 8 --image-size 32 --num-classes 1000 --log-json it.jsonl

Rendezvous: tcp:// at the first worker's address (TICTAC_CLUSTER_ADDRS[1]) and MASTER_PORT;
RANK/WORLD_SIZE from the launcher, shifted by one. The first worker writes one JSON line per
worker per iteration (rank, worker, iter, warmup, iter_ms, compute intervals; no pulls or
pushes: the all-reduce runs inside backward and is not timed separately).
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import sys
import time


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.e2e.ddp_job")
    p.add_argument("--model", required=True)
    p.add_argument("--mode", choices=("training", "inference"), default="training")
    p.add_argument("--iters", type=int, default=12)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--num-classes", type=int, default=1000)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument("--log-json", required=True)
    p.add_argument("--variant", default="ddp-gloo",
                   choices=("ddp-gloo", "ddp-tictac", "ordered-layer", "ordered-tic", "ordered-tac"),
                   help="DDP over gloo or tictac, or tictac.torch.ordered_ddp with a policy")
    a = p.parse_args(argv)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if rank == 0:
        return 0
    addrs = os.environ.get("TICTAC_CLUSTER_ADDRS", "127.0.0.1,127.0.0.1").split(",")
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP

    from tictac.torch.train import ModelSpec, SyntheticData
    torch.set_num_threads(a.threads)
    port = int(os.environ.get("MASTER_PORT", "29500")) + 1
    backend = "gloo" if a.variant == "ddp-gloo" else "tictac"
    init_method = f"tcp://{addrs[1]}:{port}"
    if backend == "tictac":
        import tictac.torch  # noqa: F401  registers the backend
        from tictac.torch.ps.launch import _listen_towards_rendezvous
        _listen_towards_rendezvous(init_method)
    dist.init_process_group(backend, init_method=init_method, rank=rank - 1,
                            world_size=world - 1, timeout=datetime.timedelta(seconds=a.timeout))
    me = rank - 1
    torch.manual_seed(a.seed)
    model = ModelSpec(a.model, a.image_size, a.num_classes)()
    training = a.mode == "training"
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9) if training else None
    ordered = a.variant.startswith("ordered-") and training
    if ordered:
        import tictac.torch
        ddp = tictac.torch.ordered_ddp(model, opt, policy=a.variant[len("ordered-"):])
        ddp.trace = [] if os.environ.get("NOTRACE") is None else None  # bucket events, written per iteration as "bucket_events" (diagnostics)
    else:
        ddp = DDP(model, broadcast_buffers=False)
    data = SyntheticData(a.batch, a.image_size, a.num_classes, a.seed)
    recs = []
    for it in range(a.iters):
        x, y = data(me, it)
        t0 = time.perf_counter()
        ms = lambda t: (t - t0) * 1e3  # noqa: E731
        if training:
            opt.zero_grad(set_to_none=True)
            out = ddp(x)
            f1 = time.perf_counter()
            F.cross_entropy(out, y).backward()
            b1 = time.perf_counter()
            opt.step()
            comp = [["forward", 0.0, ms(f1)], ["backward+allreduce", ms(f1), ms(b1)]]
        else:
            with torch.no_grad():
                ddp(x)
            comp = [["forward", 0.0, ms(time.perf_counter())]]
        t1 = time.perf_counter()
        recs.append({"rank": rank, "worker": me, "iter": it, "warmup": it < a.warmup, "iter_ms": ms(t1),
                     "mode": a.mode, "policy": a.variant, "compute": comp, "pulls": [], "pushes": [],
                     # the iteration's start on the host's monotonic clock (s): aligns the ranks' events
                     "t0_mono_s": round(t0, 6)})
        if ordered:
            # ms this iteration's forward waited for each bucket's all-reduce (diagnostics).
            recs[-1]["bucket_wait_ms"] = {str(k): round(v, 1) for k, v in ddp.wait_ms.items() if v > 0}
            recs[-1]["bucket_mb"] = {str(b.index): round(sum(p.numel() * p.element_size() for p in b.params) / 1e6, 1)
                                     for b in ddp._buckets or ()} if it == 0 else {}
            ddp.wait_ms.clear()
            # Events since the last record, in ms from this iteration's start (the last
            # iteration's updates land in the next one, or at synchronize()).
            if ddp.trace is not None:
                events, ddp.trace[:] = list(ddp.trace), []
                recs[-1]["bucket_events"] = [[i, e, round(ms(t), 2)] for i, e, t in events]
        if not ordered:
            # Iterations aligned across workers, as the PS jobs' are by the pulls. Not for
            # ordered_ddp: a barrier queues behind the iteration's all-reduces and would remove
            # exactly the overlap it exists for (its all-reduces keep the workers in step).
            dist.barrier()
    if ordered:
        ddp.synchronize()
    everyone = [None] * (world - 1)
    dist.all_gather_object(everyone, recs)
    if me == 0:
        with open(a.log_json, "w", encoding="utf-8") as f:
            for it in range(a.iters):
                for rs in everyone:
                    f.write(json.dumps(rs[it]) + "\n")
    # Leave together, then leave without interpreter finalization. Twice in CI a rank aborted in
    # gloo's teardown after its work was done ("terminate called without an active exception",
    # exit -6): the DDP reducer keeps the process group alive past destroy_process_group(), so
    # ProcessGroupGloo was destructed during interpreter finalization with its worker threads
    # still joinable (known upstream: pytorch/pytorch#179291). Dropping the DDP wrapper first
    # releases the group while Python is fully alive; os._exit then skips static destructors.
    dist.barrier()
    del ddp, opt, model
    gc.collect()
    dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
