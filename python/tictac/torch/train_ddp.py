"""Data-parallel training of a torchvision model on synthetic data: ``tictac.torch.ordered_ddp``
(TicTac's order) or plain DistributedDataParallel (the baseline), from one command.

    torchrun --nproc-per-node 2 -m tictac.torch.train_ddp --model torchvision:resnet18 --policy tac
    torchrun --nproc-per-node 2 -m tictac.torch.train_ddp --model torchvision:resnet18 --policy ddp

``--policy tic|tac|layer|fifo`` wraps the model with ``ordered_ddp`` over the tictac backend
(docs/ddp.md); ``--policy ddp`` wraps it with DistributedDataParallel over ``--backend`` (gloo by
default: what a PyTorch user has without TicTac; ``--backend tictac`` for DDP over TicTac's
transport without ordering). Rendezvous: env:// (torchrun), or ``--init-method file:///path
--rank R --world-size N``. Every rank trains on its own seeded synthetic batches; rank 0 prints
the summary: the median over iterations of the slowest rank's iteration time, and throughput.
Exit status: 0 success, 1 the run failed (a peer died, a wait timed out), 2 bad arguments.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from typing import List, Optional

import torch
import torch.nn.functional as F

from tictac.torch.ddp.ordered import POLICIES as ORDERED_POLICIES
from tictac.torch.train import ModelSpec, SyntheticData, describe_backend, run_distributed

POLICIES = ORDERED_POLICIES + ("ddp",)


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m tictac.torch.train_ddp", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="torchvision:resnet18")
    p.add_argument("--policy", default="tac", choices=POLICIES,
                   help="tic, tac, layer, fifo: ordered_ddp (tictac backend); ddp: DistributedDataParallel")
    p.add_argument("--backend", default=None,
                   help="process group backend (default: tictac for ordered_ddp, gloo for --policy ddp)")
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2, help="first iterations left out of the summary")
    p.add_argument("--batch", type=int, default=8, help="per rank")
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--num-classes", type=int, default=1000)
    p.add_argument("--optimizer", default="sgd", choices=("sgd", "adam"))
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=120.0, help="seconds any one collective may take")
    p.add_argument("--threads", type=int, default=None, help="torch threads per rank")
    p.add_argument("--init-method", help="e.g. file:///tmp/rdv or tcp://host:port (default env://)")
    p.add_argument("--rank", type=int)
    p.add_argument("--world-size", type=int)
    p.add_argument("--quiet", action="store_true", help="no per-iteration progress")
    a = p.parse_args(argv)
    if a.iters < 1 or not 0 <= a.warmup < a.iters:
        p.error(f"need --iters >= 1 and 0 <= --warmup < --iters (got {a.iters}, {a.warmup})")
    if a.batch < 1 or a.image_size < 1 or a.num_classes < 1:
        p.error("--batch, --image-size and --num-classes must be >= 1")
    if a.backend is None:
        a.backend = "gloo" if a.policy == "ddp" else "tictac"
    try:
        ModelSpec(a.model, a.image_size, a.num_classes)
    except ValueError as e:
        p.error(str(e))
    return a


def describe(a: argparse.Namespace, ordered: bool, priorities: bool) -> str:
    what = f"policy {a.policy} (ordered_ddp)" if ordered else "policy ddp (DistributedDataParallel)"
    return f"model {a.model}, {what}, {describe_backend(a.backend, priorities)}"


def summarize(iter_ms_by_rank: List[List[float]], warmup: int, batch: int) -> str:
    """The slowest rank's time per measured iteration, its median, and samples/s over all ranks."""
    world = len(iter_ms_by_rank)
    slowest = [max(ms[i] for ms in iter_ms_by_rank) for i in range(warmup, len(iter_ms_by_rank[0]))]
    med = statistics.median(slowest)
    per = ", ".join(f"rank {r}: {statistics.median(ms[warmup:]):.1f}" for r, ms in enumerate(iter_ms_by_rank))
    return (f"median iter ms (slowest rank): {med:.1f} over {len(slowest)} iterations after {warmup} warm-up; "
            f"per rank: {per}; throughput {world * batch * 1e3 / med:.1f} samples/s")


def train(a: argparse.Namespace) -> None:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    rank, world = dist.get_rank(), dist.get_world_size()
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    model = ModelSpec(a.model, a.image_size, a.num_classes)()
    if a.optimizer == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    ordered = a.policy != "ddp"
    priorities = False
    if ordered:
        import tictac.torch
        net = tictac.torch.ordered_ddp(model, opt, policy=a.policy)
        priorities = tictac.torch.is_tictac(None)     # bucket priorities need the tictac backend
    else:
        net = DDP(model)            # DDP as a user has it (buffers broadcast each forward)
    data = SyntheticData(a.batch, a.image_size, a.num_classes, a.seed)
    iter_ms: List[float] = []
    for it in range(a.iters):
        x, y = data(rank, it)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(net(x), y).backward()
        opt.step()
        iter_ms.append((time.perf_counter() - t0) * 1e3)
        if rank == 0 and not a.quiet:
            print(f"iteration {it + 1}/{a.iters}: {iter_ms[-1]:.1f} ms (rank 0)", flush=True)
    if ordered:
        net.synchronize()           # the last step's updates
    everyone: List[Optional[List[float]]] = [None] * world
    dist.all_gather_object(everyone, iter_ms)
    if rank == 0:
        print(describe(a, ordered, priorities) + f", {world} rank(s), batch {a.batch}, image {a.image_size}")
        print(summarize(everyone, a.warmup, a.batch), flush=True)
    dist.barrier()
    # Drop the DDP wrapper while Python is fully alive: its reducer keeps the group alive past
    # destroy_process_group() otherwise (bench/e2e/ddp_job.py has the story).
    del net, opt, model
    gc.collect()


def main(argv: Optional[List[str]] = None) -> int:
    a = parse_args(argv)
    return run_distributed("tictac.torch.train_ddp", a, lambda _rank: train(a))


if __name__ == "__main__":
    sys.exit(main())
