"""Sharded update of one large parameter (tictac.torch.ddp): its gradient is reduce-scattered,
each rank updates its 1/world slice with the optimizer, and the updated slices are all-gathered
straight into the parameter.

The bytes on the wire are those of an all-reduce (a ring all-reduce is a reduce-scatter then an
all-gather), but each rank averages and updates only its slice, and what arrives last is the
parameter itself: nothing is left to divide or update after the last byte lands. For vgg16's
411 MB classifier weight the full update took 320 ms after its all-reduce completed, on the
next forward's critical path (docs/ddp.md). The result is the same as updating the whole
parameter on every rank for optimizers whose update is elementwise (split_optimizer.py).

Order: the reduce-scatter is posted in backward like an all-reduce; the all-gather is posted at
step() on the training thread (so every rank posts it in the same collective order) under a
gate (tictac.torch.after) that the updater opens once the slice is updated.
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.distributed as dist

from tictac.torch.ddp.split_optimizer import BucketOptimizer


class ShardedParam:
    """One parameter updated in slices. Rank r owns elements [r*s, (r+1)*s) of the flattened
    parameter (s = ceil(numel / world); the last slices may be short or empty). When numel is a
    multiple of world the all-gather writes into the parameter itself; otherwise into a padded
    buffer copied into the parameter by ``finish()``."""

    def __init__(self, p: torch.nn.Parameter, rank: int, world: int, user: torch.optim.Optimizer):
        self.p, self.rank, self.world = p, rank, world
        n = p.numel()
        self.s = s = -(-n // world)
        self.begin, self.end = min(rank * s, n), min((rank + 1) * s, n)
        flat = p.detach().view(-1)
        self.in_place = n % world == 0
        self.gathered = flat if self.in_place else torch.empty(world * s, dtype=p.dtype, device=p.device)
        self.view = flat[self.begin:self.end]      # this rank's slice of the parameter
        self.opt = BucketOptimizer(user, [self.view], owners=[p]) if self.end > self.begin else None
        # Whether any rank produced a gradient (DDP's unused parameters) travels with it.
        # When the slices divide the parameter evenly, the gradient itself is the reduce-scatter's
        # input (no copy: for vgg16's 411 MB weight the copy took the backward thread ~0.1 s
        # before the reduce-scatter could start) and a one-element all-reduce sums the "used"
        # flags. Otherwise the input is a copy, per rank its slice (zero-padded) then the flag.
        self.direct = self.in_place
        if self.direct:
            self.send = None
            self.recv = torch.empty(s, dtype=p.dtype, device=p.device)
            self.used = torch.zeros(1, dtype=torch.float32, device=p.device)
            self.used_work = None
            self.input = None     # what the reduce-scatter reads (kept until the next fill)
            self._zeros = None    # the input of a rank that produced no gradient
        else:
            self.send = torch.empty(world, s + 1, dtype=p.dtype, device=p.device)
            self.recv = torch.empty(s + 1, dtype=p.dtype, device=p.device)
        self.work = None          # the reduce-scatter
        self.gather_work = None   # the all-gather of the updated slices
        self.gate = None
        self.divided = False

    def fill(self) -> torch.Tensor:
        g = self.p.grad
        n, s = self.p.numel(), self.s
        if self.direct:
            if g is None:
                if self._zeros is None:
                    self._zeros = torch.zeros(n, dtype=self.p.dtype, device=self.p.device)
                self.input = self._zeros
            else:
                self.input = g.reshape(-1) if g.dtype == self.p.dtype else g.reshape(-1).to(self.p.dtype)
            self.used.fill_(0.0 if g is None else 1.0)
            return self.input
        if g is None:
            self.send.zero_()
            return self.send
        flat = g.reshape(-1)
        for r in range(self.world):
            lo, hi = min(r * s, n), min((r + 1) * s, n)
            self.send[r, :hi - lo].copy_(flat[lo:hi])
            self.send[r, hi - lo:s].zero_()
        self.send[:, s] = 1
        return self.send

    def launch(self, group) -> None:
        """Posts the reduce-scatter (in backward, on the training thread), and with a direct
        input the all-reduce of the "used" flags after it."""
        if self.direct:
            # AVG: the backend divides in the ring's last fold, so no pass over the slice is
            # left between the reduce-scatter and the update.
            self.work = dist.reduce_scatter_tensor(self.recv, self.input, op=dist.ReduceOp.AVG,
                                                   group=group, async_op=True)
            self.used_work = dist.all_reduce(self.used, group=group, async_op=True)
        else:
            self.work = dist.reduce_scatter_tensor(self.recv, self.send.view(-1), group=group, async_op=True)
        self.divided = False

    def release_grad(self) -> None:
        """Waits until the reduce-scatter no longer reads the gradient (before it is zeroed in
        place: set_to_none=False)."""
        if self.direct and self.work is not None:
            self.work.wait()

    def post_gather(self, group) -> None:
        """Posts the all-gather of the updated slices (at step(), on the training thread); it
        moves data once ``update()`` opens its gate."""
        import tictac.torch
        self.gate = tictac.torch.gate()
        mine = self.gathered[self.rank * self.s:(self.rank + 1) * self.s]
        with tictac.torch.after(self.gate):
            self.gather_work = dist.all_gather_into_tensor(self.gathered, mine, group=group, async_op=True)

    def _averaged(self) -> Optional[torch.Tensor]:
        """Waits for the reduce-scatter; this rank's averaged gradient slice, None if unused."""
        self.work.wait()
        if self.direct:
            self.used_work.wait()
            if float(self.used) == 0:
                return None
        elif float(self.recv[self.s]) == 0:
            return None
        mine = self.recv[:self.end - self.begin]
        if not self.direct and not self.divided:  # a direct input was averaged by the reduce-scatter
            mine.div_(self.world)
            self.divided = True
        return mine

    def update(self) -> None:
        """On the updater thread: averages this rank's slice, updates it, opens the gate (or
        fails it with the error, so the all-gather reports it instead of hanging)."""
        try:
            grad = self._averaged()
            if grad is not None and self.opt is not None:
                self.opt.step([grad])
            if not self.in_place and self.end > self.begin:
                self.gathered[self.rank * self.s:self.rank * self.s + self.end - self.begin].copy_(self.view)
        except BaseException as e:
            self.gate.fail(f"the sharded update of a parameter failed: {e}")
            raise
        self.gate.open()

    def finish(self) -> None:
        """Waits for the all-gather; the parameter then holds every rank's updated slice."""
        if self.gather_work is None:
            return
        work, self.gather_work = self.gather_work, None
        work.wait()
        if not self.in_place:
            self.p.detach().view(-1).copy_(self.gathered[:self.p.numel()])

    def averaged_grad(self, group) -> Optional[torch.Tensor]:
        """The whole averaged gradient (a collective: every rank calls it), None if no rank
        produced one; None before the first reduce-scatter."""
        if self.work is None:
            return None
        mine = self._averaged()
        if mine is None:
            return None
        out = torch.empty(self.world * self.s, dtype=self.p.dtype, device=self.p.device)
        src = torch.zeros(self.s, dtype=self.p.dtype, device=self.p.device)
        src[:mine.numel()].copy_(mine)
        dist.all_gather_into_tensor(out, src, group=group)
        return out[:self.p.numel()].view_as(self.p).clone()
