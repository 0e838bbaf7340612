"""A worker rank of parameter-server training or inference.

Per iteration it posts a receive straight into ``param.data`` for every parameter, tells each
server it is ready, and runs the forward; hooks installed on the model (the model itself is not
modified) make each module wait for its own parameters, and a guard (a TorchFunctionMode) finds
parameters used elsewhere. In training a post-accumulate-grad hook pushes each gradient to its
server as soon as it is final. See docs/ps-training.md.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from typing import Any, Dict, List, Tuple

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from .comm import Context, Transfer, Watcher, wait_work
from .config import PSConfig
from .planning import OrderPlan, _TouchMode
from .priorities import Priorities
from .protocol import Tags, as_tuple, ms, now
from .sharding import ParamInfo
from .stats import IterationStats, to_unix

log = logging.getLogger("tictac.torch.ps")

__all__ = ["Worker", "reached_params"]


class Worker:
    """One worker rank: pulls, gated forward, backward with gradient pushes (see module doc)."""

    def __init__(self, ctx: Context, cfg: PSConfig, model: nn.Module, infos: List[ParamInfo],
                 plan: OrderPlan, prio: Priorities, tags: Tags):
        self.ctx, self.cfg, self.model, self.infos, self.plan, self.prio = ctx, cfg, model, infos, plan, prio
        self.tags = tags
        self.widx = ctx.rank - cfg.num_ps
        self.by_id = {id(i.param): i for i in infos}
        self.by_name = {i.name: i for i in infos}
        self.training = cfg.mode == "training"
        self.loss_fn = cfg.loss_fn or F.cross_entropy
        self.names = {m: (n or type(model).__name__) for n, m in model.named_modules()}
        self.own: Dict[nn.Module, List[ParamInfo]] = {}
        for m in model.modules():
            own = [self.by_id[id(p)] for p in m.parameters(recurse=False)]
            if own:
                self.own[m] = list({i.index: i for i in own}.values())
        self.leaf = {m for m in model.modules() if next(m.children(), None) is None}
        self.gate_at: Dict[int, List[ParamInfo]] = {}
        self.learn_gates = cfg.guard != "off"
        self.learning = False
        self.ev = 0
        self.pull_watch = Watcher(ctx, "pulls")
        self.push_watch = Watcher(ctx, "pushes")
        self.pending: Dict[int, Transfer] = {}
        self.pushes: Dict[int, Transfer] = {}
        self.stack: List[Tuple[nn.Module, float]] = []
        self.compute: List[List[Any]] = []
        self.stall = 0.0
        self.t0 = 0.0
        self.pos: Dict[str, int] = {}
        self.active = False
        self.handles: list = []
        self.trainable_of = {s: [i for i in infos if i.owner == s and i.param.requires_grad]
                             for s in range(cfg.num_ps)}
        self.warned_missing = False
        self.declared = [i.name for i in infos]
        # Pipelined training: the receive of a parameter's next value is posted just before its
        # gradient is pushed, so the server can send the value as soon as it has updated it.
        self.pipelined = self.training and cfg.update == "eager" and cfg.pipeline
        self.pipe_next = False                        # this iteration posts the next one's receives
        self.next_pulls: Dict[int, Transfer] = {}
        self.push_pos: Dict[str, int] = {}
        self.push_seq = 0

    # hooks ------------------------------------------------------------------------------------
    def install(self) -> None:
        for m in self.model.modules():
            self.handles.append(m.register_forward_pre_hook(self._pre))
            self.handles.append(m.register_forward_hook(self._post))
        if self.training:
            for info in self.infos:
                if info.param.requires_grad:
                    self.handles.append(info.param.register_post_accumulate_grad_hook(
                        lambda p, info=info: self._push(info)))

    def remove(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []
        self.pull_watch.close()
        self.push_watch.close()

    def _ensure(self, info: ParamInfo) -> None:
        t = self.pending.pop(info.index, None)
        if t is None:
            return
        start = now()
        t.wait(self.ctx)
        if t.payload is not None:       # received into a contiguous buffer
            info.param.data.copy_(t.payload)
        self.stall += now() - start

    # Gating. A leaf module's parameters are waited for in its pre-hook. Any other parameter
    # (a non-leaf module's own, or one a parent uses directly) is waited for where the first
    # iteration saw it first used: the guard (a TorchFunctionMode) catches the use, waits, and
    # remembers the hook event (the n-th pre/post-hook call of the forward) that preceded it;
    # later iterations wait at that event. Without the guard, non-leaf modules wait for their
    # own parameters in their pre-hook.
    def _event(self) -> None:
        self.ev += 1
        for info in self.gate_at.get(self.ev, ()):
            self._ensure(info)

    def _pre(self, mod, args):
        if not self.active:
            return
        self._event()
        if mod in self.leaf or not self.learn_gates:
            for info in self.own.get(mod, ()):
                self._ensure(info)
        self.stack.append((mod, now()))

    def _post(self, mod, args, out):
        if not self.active or not self.stack:
            return
        m, start = self.stack.pop()
        if m is mod and mod in self.leaf:
            self.compute.append([self.names[mod], ms(start, self.t0), ms(now(), self.t0)])
        self._event()

    def _guard_touch(self, pid: int) -> None:
        info = self.by_id[pid]
        if info.index in self.pending:
            if self.learning:
                self.gate_at.setdefault(self.ev, []).append(info)
            self._ensure(info)

    def _push(self, info: ParamInfo) -> None:
        if not self.active:
            return
        g = info.param.grad
        if g is None:
            return
        self._send_grad(info, g)

    def _post_pull(self, info: ParamInfo) -> Transfer:
        """A receive of the parameter's value straight into param.data (a contiguous buffer,
        copied in when waited for, if param.data is not contiguous)."""
        data = info.param.data
        buf = None if data.is_contiguous() else torch.empty_like(data, memory_format=torch.contiguous_format)
        work = dist.irecv(data if buf is None else buf, src=info.owner, tag=info.pull_tag)
        t = Transfer(work, info.owner, f"pull of {info.name!r}", key=info.index, payload=buf)
        self.pull_watch.watch(t)
        return t

    def _send_grad(self, info: ParamInfo, g: torch.Tensor) -> None:
        # Pipelined: the gradient is final, so the backward no longer reads this parameter
        # (autograd accumulates it after every node that uses it); its next value may land.
        if self.pipe_next and info.index not in self.next_pulls:
            self.next_pulls[info.index] = self._post_pull(info)
        buf = g.detach()
        if not buf.is_contiguous():
            buf = buf.contiguous()
        # push_order "next" (P3): at the position the parameter has in the NEXT iteration's
        # order, so those needed first then are pushed first. "produced": in the order the
        # backward produces them (a rising priority value), so the server can update them back
        # to back as they come (see PSConfig.push_order).
        if self.cfg.push_order == "next":
            p = self.push_pos.get(info.name, 0)
        else:
            p, self.push_seq = self.push_seq, self.push_seq + 1
        with self.prio.send(p):
            work = dist.isend(buf, info.owner, tag=info.push_tag)
        t = Transfer(work, info.owner, f"push of the gradient of {info.name!r}", key=info.index, payload=buf)
        self.pushes[info.index] = t
        self.push_watch.watch(t)

    def _send_masks(self, real) -> list:
        """Send each server the mask of its trainable parameters with a real gradient."""
        masks = []
        for s in range(self.cfg.num_ps):
            mask = torch.tensor([1 if i.index in real else 0 for i in self.trainable_of[s]], dtype=torch.uint8)
            if len(mask):
                masks.append((s, dist.isend(mask, s, tag=self.tags.mask), mask))
        return masks

    def _check_prediction(self, predicted, real, it: int) -> None:
        """Eager update: the announced mask must match the gradients the backward produced."""
        extra = real - predicted
        if extra:       # a gradient the server was told not to expect: it would be dropped
            names = sorted(self.infos[i].name for i in extra)
            raise RuntimeError(f"{self.ctx.who(self.ctx.rank)}: iteration {it}: parameters got a gradient "
                               f"though the loss does not reach them in the autograd graph: {names[:5]}; "
                               f"set TICTAC_PS_UPDATE=bulk (PSConfig.update='bulk')")
        missing = predicted - real
        if missing and not self.warned_missing:
            self.warned_missing = True
            names = sorted(self.infos[i].name for i in missing)
            log.warning("%s: iteration %d: the loss reaches %d parameter(s) that got no gradient (%s); with "
                        "update='eager' their servers apply a zero gradient (torch.optim would skip them: this "
                        "differs with momentum, weight decay or Adam); set TICTAC_PS_UPDATE=bulk for exact "
                        "semantics", self.ctx.who(self.ctx.rank), it, len(names), ", ".join(names[:5]))
            print(f"tictac.torch.ps: warning: parameters reached by the loss got no gradient ({', '.join(names[:5])}); "
                  f"eager update applies a zero gradient; TICTAC_PS_UPDATE=bulk is exact", file=sys.stderr, flush=True)

    # one iteration ----------------------------------------------------------------------------
    def iteration(self, it: int, inputs, target) -> IterationStats:
        cfg = self.cfg
        order = self.plan.order_for(self.widx, it)
        self.pos = {n: k for k, n in enumerate(order)}
        nxt = self.plan.order_for(self.widx, it + 1) if it + 1 < cfg.iters else order
        self.push_pos = {n: k for k, n in enumerate(nxt)}
        self.pipe_next = self.pipelined and it + 1 < cfg.iters
        self.model.zero_grad(set_to_none=True)
        self.compute, self.stack, self.stall, self.pushes = [], [], 0.0, {}
        self.push_seq = 0
        st = IterationStats(rank=self.ctx.rank, worker=self.widx, iter=it, warmup=it < cfg.warmup,
                            mode=cfg.mode, policy=self.plan.policy, t0_unix=0.0, expected_order=order)
        self.t0 = t0 = now()
        st.t0_unix = to_unix(t0)
        # Receives the previous iteration posted during its backward (pipelined), then the rest.
        # With send priorities the receives go in declaration order: the order must come from the
        # servers' priorities, not from the order the receives were posted in. Without them
        # (gloo) the posting order is the only lever, so they go in the policy's order.
        pulls: Dict[int, Transfer] = self.next_pulls
        self.next_pulls = {}
        for name in (self.declared if self.prio.active else order):
            info = self.by_name[name]
            if info.index not in pulls:
                pulls[info.index] = self._post_pull(info)
        # Then tell each server that this worker is ready for iteration `it`: every receive is
        # posted before its send, so the transport can hand the sends to the wire in priority
        # order from the first byte on.
        ready = []
        flag = torch.tensor([it], dtype=torch.int64)      # kept alive until the sends finish
        for s in range(cfg.num_ps):
            ready.append((s, dist.isend(flag, s, tag=self.tags.ready)))
        self.pending = dict(pulls)
        self.active = True
        guard = (cfg.guard == "always" or (cfg.guard == "first" and it == 0))
        self.learning = guard and it == 0
        self.ev = 0
        try:
            gctx = _TouchMode(set(self.by_id), self._guard_touch) if guard else contextlib.nullcontext()
            grad_ctx = contextlib.nullcontext() if self.training else torch.no_grad()
            f0 = now()
            with grad_ctx, gctx:
                out = self.model(*as_tuple(inputs))
            f1 = now()
            st.forward = [ms(f0, t0), ms(f1, t0)]
            for info in [self.by_name[n] for n in order]:    # parameters no module used
                self._ensure(info)
            if self.training:
                loss = self.loss_fn(out, target)
                # Each server learns in a mask which gradients are real; when no worker had
                # one it leaves the parameter alone, as torch.optim does for grad None. Eager
                # update: the mask goes before the backward (the parameters the loss reaches),
                # so the server can update each parameter as its gradients land.
                eager = cfg.update == "eager"
                masks, predicted = [], set()
                if eager:
                    predicted = reached_params(loss, self.by_id)
                    masks = self._send_masks(predicted)
                b0 = now()
                loss.backward()
                b1 = now()
                st.backward = [ms(b0, t0), ms(b1, t0)]
                self.compute.append(["backward", st.backward[0], st.backward[1]])
                # A parameter without a gradient this iteration: push zeros.
                real = set(self.pushes)
                if eager:
                    self._check_prediction(predicted, real, it)
                for info in self.infos:
                    if info.param.requires_grad and info.index not in self.pushes:
                        self._send_grad(info, torch.zeros_like(info.param))
                if not eager:
                    masks = self._send_masks(real)
                for t in self.pushes.values():
                    t.wait(self.ctx)
                for s, w, _ in masks:
                    wait_work(self.ctx, w, "send of the gradient mask", s)
            for s, w in ready:
                wait_work(self.ctx, w, "send of the ready message", s)
        finally:
            self.active = False
        t1 = now()
        st.iter_ms = ms(t1, t0)
        st.stall_ms = self.stall * 1e3
        st.arrival_source = self.pull_watch.source
        st.compute = self.compute
        # Pipelined: a pull posted (or landed) during the previous iteration shows as 0 ms.
        st.pulls = [[self.infos[i].name, max(0.0, ms(t.posted, t0)), max(0.0, ms(t.done_at, t0)),
                     self.infos[i].nbytes, self.infos[i].owner] for i, t in pulls.items()]
        st.arrival_order = [self.infos[i].name for i, t in sorted(pulls.items(), key=lambda kv: kv[1].done_at)]
        st.pushes = [[self.infos[i].name, ms(t.posted, t0), ms(t.done_at, t0), self.infos[i].nbytes,
                      self.infos[i].owner] for i, t in sorted(self.pushes.items(), key=lambda kv: kv[1].posted)]
        st.compute_metrics()
        return st


def reached_params(loss: torch.Tensor, by_id: Dict[int, ParamInfo]) -> set:
    """Indices of the parameters the backward of `loss` accumulates into: the AccumulateGrad
    nodes reachable from loss.grad_fn."""
    out, seen, stack = set(), set(), [loss.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        var = getattr(fn, "variable", None)
        if var is not None and id(var) in by_id:
            out.add(by_id[id(var)].index)
        stack.extend(nxt for nxt, _ in fn.next_functions)
    return out
