"""One optimizer per gradient bucket, cloned from the user's optimizer, so that each bucket's
parameters can be updated as soon as their all-reduce is in (tictac.torch.ddp).

This is exact for optimizers whose update of a parameter depends only on that parameter, its
gradient and its own state (SGD with momentum/nesterov/weight decay, Adam, AdamW, RMSprop,
Adagrad, ...): each clone holds the same hyper-parameters as the user's group the parameter is in,
and they are copied again from the user's optimizer before every update, so learning-rate
schedulers attached to the user's optimizer keep working. Optimizers that couple parameters
(LBFGS, a global gradient-norm clip inside the step) are refused.
"""

from __future__ import annotations

import inspect
from typing import Dict, List, Optional

import torch

_COUPLED = ("LBFGS",)


class BucketOptimizer:
    """The clone for one bucket. ``step(grads)`` updates the bucket's parameters with the given
    gradients (None = no gradient: the parameter is skipped, as an optimizer skips grad None)."""

    def __init__(self, user: torch.optim.Optimizer, params: List[torch.Tensor],
                 owners: Optional[List[torch.nn.Parameter]] = None):
        """`owners[i]` is the user's parameter that `params[i]` belongs to (a slice of it, in
        sharded updates), whose group gives the hyper-parameters; default: `params` themselves."""
        if type(user).__name__ in _COUPLED:
            raise ValueError(f"tictac.torch.ddp: {type(user).__name__} couples all parameters in one step; "
                             f"ordered updates need a per-parameter optimizer (SGD, Adam, AdamW, ...)")
        self.user = user
        group_of: Dict[int, int] = {}
        for gi, g in enumerate(user.param_groups):
            for p in g["params"]:
                group_of[id(p)] = gi
        by_group: Dict[int, List[torch.nn.Parameter]] = {}
        self.skipped: List[torch.nn.Parameter] = []
        for p, owner in zip(params, owners if owners is not None else params):
            gi = group_of.get(id(owner))
            if gi is None:
                self.skipped.append(p)  # not optimized by the user's optimizer: reduce only
            else:
                by_group.setdefault(gi, []).append(p)
        self.group_index = list(by_group)
        self.params = params
        self.opt = None
        if by_group:
            groups = [dict(self._hyper(gi), params=ps) for gi, ps in by_group.items()]
            # The constructor's own keyword arguments only (AdamW's defaults hold a key its
            # constructor does not take); every group carries all of the user's values anyway.
            accepted = inspect.signature(type(user).__init__).parameters
            kwargs = {k: v for k, v in user.defaults.items() if k in accepted}
            self.opt = type(user)(groups, **kwargs)

    def _hyper(self, gi: int) -> dict:
        return {k: v for k, v in self.user.param_groups[gi].items() if k != "params"}

    def step(self, grads: List) -> None:
        if self.opt is None:
            return
        for clone, gi in zip(self.opt.param_groups, self.group_index):
            clone.update(self._hyper(gi))
        saved = [p.grad for p in self.params]
        try:
            for p, g in zip(self.params, grads):
                p.grad = g
            self.opt.step()
        finally:
            for p, g in zip(self.params, saved):
                p.grad = g
