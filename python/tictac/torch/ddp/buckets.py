"""Gradient buckets for ordered data-parallel training (tictac.torch.ddp).

A bucket is a run of parameters that are consecutive in the policy's order (the order the next
forward pass needs them), of one dtype and device, up to ``bucket_bytes``. Its flat buffer holds
the parameters' gradients followed by one "used" flag per parameter (1 when this rank produced a
gradient for it in this backward pass), so that one all-reduce sums both: a parameter no rank
used keeps ``grad = None``, as in DistributedDataParallel with ``find_unused_parameters``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional

import torch


@dataclass
class Bucket:
    index: int                     # position in the policy order (0 = needed first)
    params: List[torch.nn.Parameter]
    names: List[str]
    numel: int
    flat: Optional[torch.Tensor] = None
    work: object = None            # the last all-reduce (a c10d Work); None before the first
    ready: set = field(default_factory=set)   # ids of parameters whose gradient is in
    launched: bool = False         # launched in the current backward pass
    pending: bool = False          # step() was called: its update waits to be applied
    shard: object = None           # a ShardedParam (sharded.py): updated in slices, no flat

    def offsets(self) -> List[int]:
        out, at = [], 0
        for p in self.params:
            out.append(at)
            at += p.numel()
        return out


def make_buckets(order: List[str], params_by_name: Dict[str, torch.nn.Parameter],
                 bucket_bytes: int, solo_bytes: int = 0) -> List[Bucket]:
    """Cuts `order` (parameter names, most urgent first) into buckets of at most `bucket_bytes`
    (a parameter larger than that, or of at least `solo_bytes` when that is > 0, is a bucket of
    its own); a dtype or device change starts a new bucket. Parameters that do not require grad
    are left out."""
    buckets: List[Bucket] = []
    cur: List[str] = []
    cur_bytes = 0

    def close():
        nonlocal cur, cur_bytes
        if cur:
            ps = [params_by_name[n] for n in cur]
            buckets.append(Bucket(index=len(buckets), params=ps, names=list(cur),
                                  numel=sum(p.numel() for p in ps)))
        cur, cur_bytes = [], 0

    for name in order:
        p = params_by_name[name]
        if not p.requires_grad:
            continue
        size = p.numel() * p.element_size()
        if 0 < solo_bytes <= size:
            close()
            cur, cur_bytes = [name], size
            close()
            continue
        if cur:
            head = params_by_name[cur[0]]
            if head.dtype != p.dtype or head.device != p.device or cur_bytes + size > bucket_bytes:
                close()
        cur.append(name)
        cur_bytes += size
    close()
    return buckets


def fill(bucket: Bucket, world: int) -> torch.Tensor:
    """The bucket's flat buffer: gradients divided by the world size (zeros where there is none),
    then the used flags. As DistributedDataParallel does, the division happens while copying (one
    pass over the gradients), so the all-reduce's sum is the average and nothing is left to do
    after it."""
    n = len(bucket.params)
    head = bucket.params[0]
    if bucket.flat is None:
        bucket.flat = torch.empty(bucket.numel + n, dtype=head.dtype, device=head.device)
    flat = bucket.flat
    for i, (p, at) in enumerate(zip(bucket.params, bucket.offsets())):
        view = flat[at:at + p.numel()]
        if p.grad is None:
            view.zero_()
            flat[bucket.numel + i] = 0
        else:
            if world > 1:
                torch.mul(p.grad.reshape(-1), 1.0 / world, out=view)
            else:
                view.copy_(p.grad.reshape(-1))
            flat[bucket.numel + i] = 1
    return flat


def reduced_grads(bucket: Bucket) -> List[Optional[torch.Tensor]]:
    """After the all-reduce (waits for it): each parameter's averaged gradient (fill() divided
    before the sum), or None when no rank used it. The tensors are views of the bucket's
    buffer."""
    bucket.work.wait()
    flat = bucket.flat
    out: List[Optional[torch.Tensor]] = []
    for i, (p, at) in enumerate(zip(bucket.params, bucket.offsets())):
        used = float(flat[bucket.numel + i]) != 0
        out.append(flat[at:at + p.numel()].view_as(p) if used else None)
    return out
