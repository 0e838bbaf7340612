"""Send orders per policy: fifo, random, layer (recorded first-iteration order), tic, tac.

The first worker builds the plan (it records the execution order and, for tic/tac, traces and
profiles the model and asks ``tictac.torch.graph.compute_order``), then publishes it through
the store; every rank reads the same plan. ``random`` draws a fresh seeded permutation per
worker per iteration, reproducible on both ends.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import random
import time
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional, Sequence

import torch
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_leaves

log = logging.getLogger("tictac.torch.ps")

POLICIES = ("fifo", "random", "layer", "tic", "tac")

__all__ = ["POLICIES", "OrderPlan", "record_order", "build_plan", "cluster_rate_from_env"]


@dataclass
class OrderPlan:
    requested: str                      # the policy asked for
    policy: str                         # the policy in effect (after any fallback)
    base: Optional[List[str]]           # the order (None for random)
    names: List[str]                    # registration order
    seed: int = 0
    bandwidth_bps: Optional[float] = None   # bits/s used by tac
    bandwidth_source: str = ""
    notes: List[str] = field(default_factory=list)
    graph_ops: int = 0
    fifo_from: Optional[int] = None     # first iteration in declaration order (auto_order.py)

    def order_for(self, worker: int, iteration: int) -> List[str]:
        if self.fifo_from is not None and iteration >= self.fifo_from:
            return list(self.names)
        if self.policy == "random":
            order = list(self.names)
            random.Random(f"tictac-ps/{self.seed}/{worker}/{iteration}").shuffle(order)
            return order
        return list(self.base if self.base is not None else self.names)

    @property
    def static(self) -> bool:
        return self.policy != "random"

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @staticmethod
    def from_json(text) -> "OrderPlan":
        return OrderPlan(**json.loads(text))


class _TouchMode(TorchFunctionMode):
    """Calls ``on_param(id)`` for every parameter passed to a torch function."""

    def __init__(self, ids, on_param):
        super().__init__()
        self.ids = ids
        self.on_param = on_param

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        for a in tree_leaves((args, kwargs)):
            if isinstance(a, torch.Tensor) and id(a) in self.ids:
                self.on_param(id(a))
        return func(*args, **kwargs)


def record_order(model: nn.Module, example_inputs: Sequence[Any], names_by_id: Dict[int, str],
                 mode: str = "training") -> List[str]:
    """First-iteration execution order of the parameters (FSDP's ``_ExecOrderData`` idea):
    a leaf module's parameters when its forward pre-hook fires, any other parameter when a
    torch function first uses it (a non-leaf module's own parameter, a parent module using a
    child's weight directly).
    Unused parameters go last in registration order. Runs on a deep copy; the model is left
    as it was."""
    m = copy.deepcopy(model)
    # Map the copy's tensors to canonical names through the same traversal order.
    orig = list(dict.fromkeys(id(p) for _, p in model.named_parameters(remove_duplicate=False)))
    copy_ids = list(dict.fromkeys(id(p) for _, p in m.named_parameters(remove_duplicate=False)))
    name_of = {c: names_by_id[o] for o, c in zip(orig, copy_ids)}
    order: Dict[str, None] = {}

    def touch(pid):
        order.setdefault(name_of[pid], None)

    leaves = {mod for mod in m.modules() if next(mod.children(), None) is None}

    def pre(mod, _args):
        if mod in leaves:               # a non-leaf module's own parameters: at first use
            for p in mod.parameters(recurse=False):
                touch(id(p))

    handles = [mod.register_forward_pre_hook(pre) for mod in m.modules()]
    try:
        m.train(mode == "training")
        with torch.no_grad(), _TouchMode(set(name_of), touch):
            m(*example_inputs)
    finally:
        for h in handles:
            h.remove()
    out = list(order)
    out += [n for n in names_by_id.values() if n not in order]
    return list(dict.fromkeys(out))


def cluster_rate_from_env() -> Optional[float]:
    """TICTAC_CLUSTER_RATE in bytes/s, or None when unset."""
    v = os.environ.get("TICTAC_CLUSTER_RATE")
    if v is None or v.strip() == "":
        return None
    try:
        rate = float(v)
    except ValueError:
        raise ValueError(f"TICTAC_CLUSTER_RATE must be a number of bytes per second, got {v!r}") from None
    if not rate > 0:
        raise ValueError(f"TICTAC_CLUSTER_RATE must be > 0 bytes per second, got {v!r}")
    return rate


def build_plan(policy: str, model: nn.Module, example_inputs: Sequence[Any], names: List[str],
               names_by_id: Dict[int, str], *, mode: str, seed: int,
               bandwidth_bytes_s: Optional[float] = None, bandwidth_source: str = "") -> OrderPlan:
    """The plan for ``policy`` (run on the first worker)."""
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; one of {', '.join(POLICIES)}")
    plan = OrderPlan(requested=policy, policy=policy, base=None, names=list(names), seed=seed)
    if policy == "fifo":
        plan.base = list(names)
        return plan
    if policy == "random":
        return plan
    t = time.perf_counter()
    recorded = record_order(model, example_inputs, names_by_id, mode=mode)
    plan.notes.append(f"recorded the execution order in {1e3 * (time.perf_counter() - t):.0f} ms")
    if policy == "layer":
        plan.base = recorded
        return plan

    # tic / tac: trace the graph (and profile op times for tac), then the C++ scheduler.
    try:
        from tictac.torch.graph import TraceError, compute_order, trace_model
    except Exception as e:
        plan.policy, plan.base = "layer", recorded
        plan.notes.append(f"policy {policy!r} fell back to the recorded order: tictac.torch.graph is not "
                          f"importable ({type(e).__name__}: {e})")
        return plan
    graph = None
    try:
        t = time.perf_counter()
        graph = trace_model(copy.deepcopy(model), tuple(example_inputs), mode=mode, profile=(policy == "tac"))
        plan.graph_ops = len(graph.get("ops", []))
        plan.notes.append(f"traced {plan.graph_ops} ops in {1e3 * (time.perf_counter() - t):.0f} ms"
                          + (" (profiled on this worker)" if policy == "tac" else ""))
    except TraceError as e:
        plan.notes.append(f"policy {policy!r}: tracing failed, using the recorded order: {e}")
    bps = 8.0 * float(bandwidth_bytes_s) if bandwidth_bytes_s else 8e9
    if policy == "tac":
        plan.bandwidth_bps = bps
        plan.bandwidth_source = bandwidth_source if bandwidth_bytes_s else "default 1 GB/s"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        order = compute_order(policy, graph=graph, recorded_order=recorded, param_names=list(names),
                              bandwidth_bps=bps, seed=seed)
    for w in caught:
        plan.notes.append(str(w.message))
    if graph is None or any("fell back" in str(w.message) for w in caught):
        plan.policy = "layer"
    plan.base = list(order)
    return plan
