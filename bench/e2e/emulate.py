"""Emulated-accelerator compute: a model whose forward and backward replay profiled times.

``build()`` (the model callable the ranks get as ``--model bench.e2e.emulate:build``) reads the
op profile named by ``TICTAC_EMU_PROFILE`` (written by ``bench/e2e/profile.py``, stored in
``bench/graphs/emulated/``) and returns a module tree with the real model's parameters (same
qualified names, shapes, dtypes and registration order, zero-initialised) whose leaf modules
are ``EmuOp``s, called in the real model's leaf-call order. Each ``EmuOp`` call is one
``torch.autograd.Function``:

- forward: sleeps for the op's profiled time (``time.sleep``: no CPU, the GIL released, the
  way a host thread waits on a GPU stream) and returns a tiny ``(batch, 1)`` tensor (the last op
  ``(batch, num_classes)``, so the real loss runs on it);
- backward: sleeps for the op's profiled backward time and returns, for each parameter, an
  alias of a gradient buffer allocated once per parameter (no per-iteration allocation, and
  autograd steals the alias instead of copying it: see ``tests/e2e/test_emulate.py``).

The PS worker's hooks see ordinary leaf modules: the forward pre-hook of an op waits for that
op's parameters before it starts (an op starts only when its parameters have landed, as a GPU
stream waits on the copy), gradients are pushed by the post-accumulate-grad hooks as they are
produced, and the real tensors cross the real transport at their real sizes. ``EmuOp`` sets
``__module__`` under ``torch.nn`` so that ``torch.fx`` (the tic/tac planner's tracer) keeps it
as one leaf call, as it keeps an ``nn.Conv2d``; TAC's planner then times the replayed ops.

``TICTAC_EMU_SCALE`` (default 1.0) multiplies every time (a faster or slower "device").

``TICTAC_EMU_CLOCK`` (default ``device``) chooses how the times are slept:

- ``device``: the ops run back to back on a device timeline (``DeviceClock``), as kernels on a
  GPU stream do while the host runs ahead. What a sleep overshoots (the wake-up, a wait for a
  CPU on a loaded machine, re-taking the GIL) and the host's own work between two ops are
  owed to the device and taken off the next ops' sleeps, so the replay's compute does not
  stretch when the host's cores are busy. The device counts as idle, and owes nothing, after
  a forward pre-hook that blocked (the op waited for its parameters: it starts when they are
  there, as a stream waiting on the copy does) and after a host gap between two ops of more
  than 1 ms (a wait elsewhere, e.g. in a gradient hook, or the step between iterations).
- ``sleep``: each op sleeps its time from the moment the host reaches it (the replay before
  2026-12-06): every late wake-up and host delay adds to the compute.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Dict, List, Optional, Sequence

import torch
from torch import nn

PROFILE_FORMAT = "tictac-emu-profile/1"


CLOCKS = ("device", "sleep")


class DeviceClock:
    """The emulated device's timeline. ``run(seconds, waited)`` takes an op's time on the
    device: it sleeps that time less what the device is owed (``debt``: past overshoot and host
    time between ops), so that on average the ops take their profiled times back to back.
    ``waited`` (the op's pre-hook blocked) and a host gap over ``idle_gap`` clear the debt: the
    device was idle and the op starts now. ``mode="sleep"`` sleeps every time in full."""

    def __init__(self, mode: str = "device", idle_gap: float = 0.001,
                 clock=time.perf_counter, sleep=time.sleep):
        if mode not in CLOCKS:
            raise ValueError(f"TICTAC_EMU_CLOCK must be one of {', '.join(CLOCKS)}, got {mode!r}")
        self.mode, self.idle_gap = mode, idle_gap
        self._clock, self._sleep = clock, sleep
        self.debt = 0.0
        self.last_end: Optional[float] = None
        self.absorbed = 0.0             # seconds of sleep the debt has saved, for tests and reports

    def run(self, seconds: float, waited: bool = False) -> None:
        start = self._clock()
        seconds = max(seconds, 0.0)
        if self.mode == "sleep":
            if seconds > 0:
                self._sleep(seconds)
            return
        if waited or self.last_end is None or start - self.last_end > self.idle_gap:
            self.debt = 0.0
        else:
            self.debt += start - self.last_end          # host work between two ops
        pay = min(self.debt, seconds)
        self.debt -= pay
        self.absorbed += pay
        want = seconds - pay
        if want > 0:
            self._sleep(want)
        end = self._clock()
        self.debt += max(0.0, (end - start) - want)     # what the sleep overshot
        self.last_end = end


# A parameter wait longer than this in an op's forward pre-hooks means the device was idle.
WAIT_SECONDS = 0.0003


class _Replay(torch.autograd.Function):
    """forward(x, op, k, *params): sleep op.fwd[k], return op's cheap output; backward: sleep
    op.bwd[k], gradient aliases of op's buffers."""

    @staticmethod
    def forward(ctx, x, op, k, *params):
        ctx.op, ctx.k = op, k
        ctx.x_shape, ctx.x_dtype = x.shape, x.dtype
        times = op.fwd_train if any(ctx.needs_input_grad) else op.fwd_inf    # grad mode is off in here
        op.clock.run(times[k] * op.scale, waited=op.took_waited())
        n = x.shape[0] if x.dim() > 0 else 1
        return x.new_zeros((n, op.out_features[k]))

    @staticmethod
    def backward(ctx, gout):
        op = ctx.op
        op.clock.run(op.bwd[ctx.k] * op.scale)
        gx = gout.new_zeros(ctx.x_shape, dtype=ctx.x_dtype) if ctx.needs_input_grad[0] else None
        grads = [b.detach() if need else None for b, need in zip(op.grad_bufs(), ctx.needs_input_grad[3:])]
        return (gx, None, None, *grads)


class EmuOp(nn.Module):
    """One leaf module of the real model: its parameters (by their real attribute names) and,
    per call of it in a forward, the profiled times (ms) and output width."""

    def __init__(self, params: Sequence[Any], calls: List[Dict[str, Any]], scale: float,
                 clock: DeviceClock):
        super().__init__()
        self.pnames: List[str] = []
        for pname, shape, dtype, requires_grad in params:
            self.register_parameter(pname, nn.Parameter(torch.zeros(shape, dtype=getattr(torch, dtype)),
                                                        requires_grad=requires_grad))
            self.pnames.append(pname)
        self.fwd_train = [c["fwd_ms"] / 1e3 for c in calls]
        self.fwd_inf = [c.get("fwd_inf_ms", c["fwd_ms"]) / 1e3 for c in calls]
        self.bwd = [c.get("bwd_ms", 0.0) / 1e3 for c in calls]
        self.out_features = [int(c.get("out_features", 1)) for c in calls]
        self.scale = scale
        self.clock = clock
        self._bufs: List[torch.Tensor] = []
        self._hooks_from: Optional[float] = None
        # registered before any other pre-hook (the PS worker's or ordered_ddp's gates come
        # later), so the time from here to forward() is what those hooks took
        self.register_forward_pre_hook(self._stamp)

    def _stamp(self, mod, args) -> None:
        self._hooks_from = time.perf_counter()

    def took_waited(self) -> bool:
        """Whether this call's pre-hooks (the gate waiting for parameters) blocked."""
        t, self._hooks_from = self._hooks_from, None
        return t is not None and time.perf_counter() - t > WAIT_SECONDS

    def grad_bufs(self) -> List[torch.Tensor]:
        if not self._bufs:
            self._bufs = [torch.zeros_like(getattr(self, n)) for n in self.pnames]
        return self._bufs

    def forward(self, x, k: int = 0):
        return _Replay.apply(x, self, k, *[getattr(self, n) for n in self.pnames])


EmuOp.__module__ = "torch.nn.modules.tictac_emulated"     # torch.fx: a leaf call, like nn.Conv2d


class EmuModel(nn.Module):
    """The module tree of the profile; forward calls the ops in the recorded order."""

    def __init__(self, profile: Dict[str, Any], scale: float = 1.0, clock: str = "device"):
        super().__init__()
        self.clock = DeviceClock(clock)
        calls_of: Dict[str, List[Dict[str, Any]]] = {}
        for c in profile["calls"]:
            calls_of.setdefault(c["module"], []).append(c)
        params_of: Dict[str, List[Any]] = {}
        for name, shape, dtype, rg in profile["params"]:
            mod, _, pname = name.rpartition(".")
            params_of.setdefault(mod, []).append((pname, shape, dtype, rg))
        for mod, ps in params_of.items():
            if mod not in calls_of:
                raise ValueError(f"emulation profile: module {mod!r} has parameters but no recorded call "
                                 f"(a parameter used outside a leaf module is not supported by the replay)")
        # modules in the order their parameters were registered (fifo = declaration order),
        # then the parameterless ones
        order = list(dict.fromkeys([m for m in params_of] + [c["module"] for c in profile["calls"]]))
        for path in order:
            self._place(path, EmuOp(params_of.get(path, []), calls_of[path], scale, self.clock))
        self.sequence = []
        seen: Dict[str, int] = {}
        for c in profile["calls"]:
            k = seen.get(c["module"], 0)
            seen[c["module"]] = k + 1
            self.sequence.append((c["module"], k))
        self._ops = {path: self.get_submodule(path) for path in order}

    def _place(self, path: str, op: nn.Module) -> None:
        parent: nn.Module = self
        parts = path.split(".")
        for p in parts[:-1]:
            if not hasattr(parent, p) or not isinstance(getattr(parent, p), nn.Module):
                parent.add_module(p, nn.Module())
            parent = getattr(parent, p)
        parent.add_module(parts[-1], op)

    def forward(self, x):
        for path, k in self.sequence:
            x = self._ops[path](x, k)
        return x


def load_profile(path: str) -> Dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        prof = json.load(f)
    if prof.get("format") != PROFILE_FORMAT:
        raise ValueError(f"{path}: not an emulation profile (format {prof.get('format')!r}, want {PROFILE_FORMAT}); "
                         f"make one with bench/e2e/e2e --compute emulated")
    return prof


def build() -> nn.Module:
    """The emulated model of the profile at $TICTAC_EMU_PROFILE (scaled by $TICTAC_EMU_SCALE,
    timed by $TICTAC_EMU_CLOCK)."""
    path = os.environ.get("TICTAC_EMU_PROFILE")
    if not path:
        raise ValueError("bench.e2e.emulate:build needs TICTAC_EMU_PROFILE=<profile json> "
                         "(bench/e2e/e2e --compute emulated sets it)")
    scale = float(os.environ.get("TICTAC_EMU_SCALE", "1.0"))
    if not scale > 0:
        raise ValueError(f"TICTAC_EMU_SCALE must be > 0, got {scale}")
    return EmuModel(load_profile(path), scale, os.environ.get("TICTAC_EMU_CLOCK", "") or "device")
