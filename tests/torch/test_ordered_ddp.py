"""tictac.torch.ordered_ddp gives the same weights as DistributedDataParallel (over gloo) with
the same optimizer: SGD with momentum/nesterov/weight decay, Adam and AdamW, with no_sync()
gradient accumulation, a parameter no rank uses and one that only some ranks use, at 2 and 3
ranks. Counter-check: with every backward inside no_sync() (no all-reduce) the weights differ
from DDP's by far more than the tolerance, so the comparison can fail."""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from dist_harness import run_ranks  # noqa: E402

import tictac.torch  # noqa: E402

if not tictac.torch.available():  # pragma: no cover
    pytest.skip(f"the tictac extension is not built: {tictac.torch._C_ERROR}", allow_module_level=True)

STEPS = 4
TOL = 1e-5


def _net():
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3, padding=1)
            self.fc1 = nn.Linear(4 * 8 * 8, 32)
            self.extra = nn.Linear(32, 32)     # used on some ranks, some steps
            self.unused = nn.Linear(5, 5)      # never used
            self.fc2 = nn.Linear(32, 10)
            self.use_extra = False

        def forward(self, x):
            h = torch.relu(self.conv(x)).flatten(1)
            h = torch.relu(self.fc1(h))
            if self.use_extra:
                h = h + self.extra(h)
            return self.fc2(h)

    torch.manual_seed(0)
    return Net()


def _opt(name, params):
    import torch
    if name == "sgd":
        return torch.optim.SGD(params, lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3)
    if name == "adam":
        return torch.optim.Adam(params, lr=1e-2, weight_decay=1e-3)
    return torch.optim.AdamW(params, lr=1e-2)


def _train(rank, world, opt_name, accumulate, policy, shard_bytes=0):
    import contextlib

    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP

    gloo = dist.new_group(backend="gloo")
    finals, grads, stats = {}, {}, {}
    for kind in ("ddp", "ordered", "local"):
        model = _net()
        opt = _opt(opt_name, model.parameters())
        if kind == "ddp":
            wrapped = DDP(model, process_group=gloo, find_unused_parameters=True)
        else:
            wrapped = tictac.torch.ordered_ddp(model, opt, policy=policy, bucket_bytes=8 << 10,
                                               shard_bytes=shard_bytes)
        for step in range(STEPS):
            opt.zero_grad()
            model.use_extra = rank == 0 and step % 2 == 0
            for micro in range(accumulate):
                g = torch.Generator().manual_seed(100 * rank + 10 * step + micro)
                x = torch.randn(4, 3, 8, 8, generator=g)
                y = torch.randint(0, 10, (4,), generator=g)
                last = micro == accumulate - 1
                ctx = wrapped.no_sync() if (kind == "local" or not last) else contextlib.nullcontext()
                with ctx:
                    F.cross_entropy(wrapped(x), y).backward()
            opt.step()
        if kind != "ddp":
            wrapped.synchronize()
            stats[kind] = dict(wrapped.stats)
        finals[kind] = {n: p.detach().clone() for n, p in model.named_parameters()}
        grads[kind] = {n: None if p.grad is None else p.grad.clone() for n, p in model.named_parameters()}

    def diff(a, b):
        return max(float((finals[a][n] - finals[b][n]).abs().max()) for n in finals[a])

    def grad_diff():
        # The last averaged gradients (synchronize() leaves them, as DDP does), name by name.
        out = {}
        for n, g in grads["ddp"].items():
            mine = grads["ordered"][n]
            if (g is None) != (mine is None):
                out[n] = f"ddp {'None' if g is None else 'set'}, ordered {'None' if mine is None else 'set'}"
            elif g is not None:
                out[n] = float((g - mine).abs().max())
        return out

    return {"ordered_vs_ddp": diff("ordered", "ddp"), "local_vs_ddp": diff("local", "ddp"),
            "grad_diff": grad_diff(),
            "unused_changed": float((finals["ordered"]["unused.weight"] - _net().unused.weight).abs().max()),
            "stats": stats["ordered"]}


def _train_cases(rank, world, cases):
    return [_train(rank, world, *case) for case in cases]


# One spawned group per world size runs its cases (each spawn costs a torch import per rank).
# A fourth element is shard_bytes: parameters of at least that many bytes are updated in slices
# (sharded.py): fc1, fc2 and extra's weights; at 3 ranks none divides evenly (padded slices),
# and extra's weight is used on some ranks and steps only.
CASES = {
    2: [("sgd", 1, "tic"), ("adam", 2, "tic"), ("sgd", 2, "fifo"), ("adam", 2, "tic", 1024)],
    3: [("adamw", 2, "layer"), ("sgd", 2, "layer", 1024)],
}


@pytest.mark.parametrize("world", sorted(CASES))
def test_same_weights_as_ddp(world):
    per_rank = run_ranks(_train_cases, world=world, args=(CASES[world],), timeout=300)
    for rank, results in enumerate(per_rank):
        for case, r in zip(CASES[world], results):
            where = f"rank {rank} of {world}, optimizer/accumulation/policy {case}"
            assert r["ordered_vs_ddp"] <= TOL, f"{where}: ordered_ddp differs from DDP by {r['ordered_vs_ddp']:.3g}"
            # Counter-check: without the all-reduce the weights are far from DDP's.
            assert r["local_vs_ddp"] > 100 * TOL, f"{where}: local training is as close as {r['local_vs_ddp']:.3g}"
            # A parameter no rank uses is never updated (grad None), as with DDP.
            assert r["unused_changed"] == 0.0, f"{where}: the unused parameter moved by {r['unused_changed']:.3g}"
            # Updates were applied in the next forward (overlap), not all at step().
            assert r["stats"]["applied_in_forward"] > 0, f"{where}: {r['stats']}"
            bad = {n: d for n, d in r["grad_diff"].items() if isinstance(d, str) or d > TOL}
            assert not bad, f"{where}: synchronize() left gradients unlike DDP's: {bad}"
            # The sharded cases shard fc1, fc2 and extra's weights; the others shard nothing.
            want = 3 if len(case) > 3 else 0
            assert r["stats"]["sharded_params"] == want, f"{where}: {r['stats']}"


def _update_without_forward(rank, world):
    """One training step, then no forward: the updater applies the bucket updates on its own as
    the all-reduces complete. Returns whether the weights moved within 30 s, and the stats."""
    import time

    import torch
    import torch.nn.functional as F

    model = _net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    wrapped = tictac.torch.ordered_ddp(model, opt, policy="tic", bucket_bytes=8 << 10)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    g = torch.Generator().manual_seed(rank)
    F.cross_entropy(wrapped(torch.randn(4, 3, 8, 8, generator=g)), torch.randint(0, 10, (4,), generator=g)).backward()
    opt.step()
    deadline = time.monotonic() + 30
    moved = False
    while not moved and time.monotonic() < deadline:
        moved = all(not torch.equal(p.detach(), before[n]) for n, p in model.named_parameters()
                    if n != "unused.weight" and n != "unused.bias" and not n.startswith("extra."))
        time.sleep(0.01)
    stats = dict(wrapped.stats)
    wrapped.synchronize()
    wrapped.remove()
    return {"moved": moved, "stats": stats}


def test_updates_are_applied_when_the_allreduce_completes():
    for rank, r in enumerate(run_ranks(_update_without_forward, world=2, timeout=120)):
        assert r["moved"], f"rank {rank}: no forward ran and the weights did not move: {r}"
        # No forward ran, so nothing was applied in a pre-hook: the updater applied them.
        assert r["stats"]["applied_in_forward"] == 0, f"rank {rank}: {r}"


def _oversubscribed(rank, world):
    import torch
    from torch import nn
    model = nn.Linear(4, 4)
    wrapped = tictac.torch.ordered_ddp(model, torch.optim.SGD(model.parameters(), lr=0.1), policy="fifo")
    msg = wrapped.oversubscribed
    wrapped.remove()
    return msg


def test_more_local_ranks_than_cores_is_warned_about():
    cores = len(os.sched_getaffinity(0))
    for rank, msg in enumerate(run_ranks(_oversubscribed, world=2, timeout=120,
                                         env={"LOCAL_WORLD_SIZE": str(cores + 1)})):
        assert msg and f"{cores + 1} ranks share {cores} CPU core(s)" in msg, f"rank {rank}: {msg!r}"
    # Counter-check: as many ranks as cores (or fewer) is not warned about.
    for rank, msg in enumerate(run_ranks(_oversubscribed, world=2, timeout=120,
                                         env={"LOCAL_WORLD_SIZE": str(cores)})):
        assert msg is None, f"rank {rank}: {msg!r}"
