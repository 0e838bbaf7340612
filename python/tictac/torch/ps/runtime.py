"""Parameter-server training and inference with no model changes.

Every iteration each server sends every worker each parameter it owns, all sends issued at
once in the policy's order with priority = position in the order (the transport enforces the
order when the group runs on tictac). Workers pre-post a receive straight into ``param.data``
for every parameter; a forward pre-hook on every module waits only for that module's own
parameters; a post-accumulate-grad hook pushes each gradient to its server as soon as it is
final. Servers average (or sum) the workers' gradients and step a real ``torch.optim``
optimizer on their own copies of the parameters.
"""

from __future__ import annotations

import contextlib
import datetime
import io
import itertools
import json
import logging
import queue
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Tuple

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from .comm import Context, PeerError, Transfer, Watcher, wait_work
from .config import PSConfig
from .planning import OrderPlan, _TouchMode, build_plan, cluster_rate_from_env
from .priorities import Priorities
from .sharding import ParamInfo, param_infos
from .stats import (IterationStats, ServerIterationStats, summarize, to_unix, write_chrome_trace,
                    write_json_lines)

log = logging.getLogger("tictac.torch.ps")
now = time.perf_counter

__all__ = ["run", "RunResult"]

_run_counter = itertools.count()


@dataclass
class RunResult:
    """What ``run`` returns on one rank.

    params: on rank 0 with gather_params, every parameter (canonical name -> tensor, the
      servers' final values); on any other server its own parameters; on workers {}.
    stats: worker IterationStats (rank 0: every worker's; a worker: its own).
    server_stats: ServerIterationStats (rank 0: every server's; a server: its own).
    summary: ``stats.summarize`` of ``stats`` (meaningful on rank 0 and on workers).
    """
    rank: int
    role: str
    plan: OrderPlan
    params: Dict[str, torch.Tensor] = field(default_factory=dict)
    stats: List[IterationStats] = field(default_factory=list)
    server_stats: List[ServerIterationStats] = field(default_factory=list)
    summary: Dict[str, Any] = field(default_factory=dict)
    owners: Dict[str, int] = field(default_factory=dict)
    priorities_active: bool = False
    priorities_reason: str = ""


def _ms(t: float, t0: float) -> float:
    return (t - t0) * 1e3


def _as_tuple(x) -> tuple:
    return x if isinstance(x, tuple) else (x,)


# ----------------------------------------------------------------------------------------------
# Worker


class _Worker:
    def __init__(self, ctx: Context, cfg: PSConfig, model: nn.Module, infos: List[ParamInfo],
                 plan: OrderPlan, prio: Priorities, ctrl_tag: int):
        self.ctx, self.cfg, self.model, self.infos, self.plan, self.prio = ctx, cfg, model, infos, plan, prio
        self.ctrl_tag = ctrl_tag
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
            self.compute.append([self.names[mod], _ms(start, self.t0), _ms(now(), self.t0)])
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

    def _send_grad(self, info: ParamInfo, g: torch.Tensor) -> None:
        buf = g.detach()
        if not buf.is_contiguous():
            buf = buf.contiguous()
        with self.prio.send(self.pos.get(info.name, 0)):
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
                masks.append((s, dist.isend(mask, s, tag=self.ctrl_tag + 2), mask))
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
        self.model.zero_grad(set_to_none=True)
        self.compute, self.stack, self.stall, self.pushes = [], [], 0.0, {}
        st = IterationStats(rank=self.ctx.rank, worker=self.widx, iter=it, warmup=it < cfg.warmup,
                            mode=cfg.mode, policy=self.plan.policy, t0_unix=0.0, expected_order=order)
        self.t0 = t0 = now()
        st.t0_unix = to_unix(t0)
        ready = []
        if not self.training:   # inference: tell each server this worker is ready for iteration it
            flag = torch.tensor([it], dtype=torch.int64)      # kept alive until the sends finish
            for s in range(cfg.num_ps):
                ready.append((s, dist.isend(flag, s, tag=self.ctrl_tag)))
        pulls: Dict[int, Transfer] = {}
        for name in order:
            info = self.by_name[name]
            data = info.param.data
            buf = None if data.is_contiguous() else torch.empty_like(data, memory_format=torch.contiguous_format)
            work = dist.irecv(data if buf is None else buf, src=info.owner, tag=info.pull_tag)
            t = Transfer(work, info.owner, f"pull of {info.name!r}", key=info.index, payload=buf)
            pulls[info.index] = t
            self.pull_watch.watch(t)
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
                out = self.model(*_as_tuple(inputs))
            f1 = now()
            st.forward = [_ms(f0, t0), _ms(f1, t0)]
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
                    predicted = _reached_params(loss, self.by_id)
                    masks = self._send_masks(predicted)
                b0 = now()
                loss.backward()
                b1 = now()
                st.backward = [_ms(b0, t0), _ms(b1, t0)]
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
        st.iter_ms = _ms(t1, t0)
        st.stall_ms = self.stall * 1e3
        st.arrival_source = self.pull_watch.source
        st.compute = self.compute
        st.pulls = [[self.infos[i].name, _ms(t.posted, t0), _ms(t.done_at, t0), self.infos[i].nbytes,
                     self.infos[i].owner] for i, t in pulls.items()]
        st.arrival_order = [p[0] for p in sorted(st.pulls, key=lambda p: p[2])]
        st.pushes = [[self.infos[i].name, _ms(t.posted, t0), _ms(t.done_at, t0), self.infos[i].nbytes,
                      self.infos[i].owner] for i, t in sorted(self.pushes.items(), key=lambda kv: kv[1].posted)]
        st.compute_metrics()
        return st


# ----------------------------------------------------------------------------------------------
# Server


def _reached_params(loss: torch.Tensor, by_id: Dict[int, ParamInfo]) -> set:
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


def _make_optimizer(cfg: PSConfig, params: List[torch.Tensor]):
    if not params:
        return None
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay,
                               nesterov=cfg.nesterov)
    return torch.optim.Adam(params, lr=cfg.lr, betas=tuple(cfg.betas), eps=cfg.eps,
                            weight_decay=cfg.weight_decay)


class _Server:
    def __init__(self, ctx: Context, cfg: PSConfig, infos: List[ParamInfo], plan: OrderPlan,
                 prio: Priorities, ctrl_tag: int, world: int):
        self.ctx, self.cfg, self.plan, self.prio, self.ctrl_tag = ctx, cfg, plan, prio, ctrl_tag
        self.owned = [i for i in infos if i.owner == ctx.rank]
        self.owned_names = {i.name for i in self.owned}
        self.by_name = {i.name: i for i in self.owned}
        self.workers = list(range(cfg.num_ps, world))
        self.training = cfg.mode == "training"
        self.trainable = [i for i in self.owned if i.param.requires_grad]
        self.eager = self.training and cfg.update == "eager"
        self.opt = _make_optimizer(cfg, [i.param for i in self.trainable]) if self.training and not self.eager else None
        # eager: one optimizer per parameter (torch.optim's state is per parameter, so the
        # arithmetic is that of one optimizer over all of them)
        self.opts = {i.index: _make_optimizer(cfg, [i.param]) for i in self.trainable} if self.eager else {}
        self.grad_watch = Watcher(ctx, "grads")
        # gradients arrive in about the backward order: the watcher gets them in that order
        # (matters only without futures, where it waits them one by one in that order)
        self.grad_order = list(reversed(self.trainable))
        self.bufs = {(w, i.index): torch.empty_like(i.param.data, memory_format=torch.contiguous_format)
                     for w in self.workers for i in self.trainable} if self.training else {}
        for i in self.owned:
            if not i.param.data.is_contiguous():
                i.param.data = i.param.data.contiguous()

    def iteration(self, it: int) -> ServerIterationStats:
        ctx, cfg = self.ctx, self.cfg
        t0 = now()
        st = ServerIterationStats(rank=ctx.rank, iter=it, t0_unix=to_unix(t0))
        if not self.training:
            for w in self.workers:
                flag = torch.zeros(1, dtype=torch.int64)
                wait_work(ctx, dist.irecv(flag, src=w, tag=self.ctrl_tag), "receive of the ready message", w)
                if int(flag.item()) != it:
                    raise RuntimeError(f"{ctx.who(ctx.rank)}: {ctx.who(w)} is at iteration {int(flag.item())}, "
                                       f"expected {it}")
        # All sends at once, in each worker's order (interleaved by position across workers).
        orders = {}
        for w in self.workers:
            full = self.plan.order_for(w - cfg.num_ps, it)
            orders[w] = [(k, self.by_name[n]) for k, n in enumerate(full) if n in self.owned_names]
        sends = []
        for j in range(len(self.owned)):
            for w in self.workers:
                k, info = orders[w][j]
                with self.prio.send(k):
                    work = dist.isend(info.param.data, w, tag=info.pull_tag)
                sends.append((info, w, now(), work))
        recvs, masks = [], []
        if self.eager:
            return self._eager_rest(it, st, t0, sends)
        if self.training:
            for w in self.workers:
                for info in self.trainable:
                    buf = self.bufs[(w, info.index)]
                    recvs.append((info, w, now(), dist.irecv(buf, src=w, tag=info.push_tag)))
                if self.trainable:
                    mask = torch.zeros(len(self.trainable), dtype=torch.uint8)
                    masks.append((w, mask, dist.irecv(mask, src=w, tag=self.ctrl_tag + 2)))
        self._wait_sends(st, t0, sends)
        if self.training:
            for info, w, posted, work in recvs:
                wait_work(ctx, work, f"receive of the gradient of {info.name!r}", w)
                st.grads.append([info.name, w, _ms(posted, t0), _ms(now(), t0)])
            has_grad = torch.zeros(len(self.trainable), dtype=torch.uint8)
            for w, mask, work in masks:
                wait_work(ctx, work, "receive of the gradient mask", w)
                has_grad |= mask
            u0 = now()
            scale = 1.0 / len(self.workers) if cfg.reduce == "mean" else 1.0
            for k, info in enumerate(self.trainable):
                if not has_grad[k]:          # no worker had a gradient: skip, like grad None
                    info.param.grad = None
                    continue
                g = self.bufs[(self.workers[0], info.index)].clone()
                for w in self.workers[1:]:
                    g.add_(self.bufs[(w, info.index)])
                if scale != 1.0:
                    g.mul_(scale)
                info.param.grad = g
            if self.opt is not None:
                self.opt.step()
                self.opt.zero_grad(set_to_none=True)
            st.update = [_ms(u0, t0), _ms(now(), t0)]
            st.update_busy_ms = st.update[1] - st.update[0]
        st.iter_ms = _ms(now(), t0)
        return st

    def _wait_sends(self, st: ServerIterationStats, t0: float, sends) -> None:
        for info, w, issued, work in sends:
            wait_work(self.ctx, work, f"send of {info.name!r}", w)
            st.sends.append([info.name, w, _ms(issued, t0), _ms(now(), t0)])

    def _eager_rest(self, it: int, st: ServerIterationStats, t0: float, sends) -> ServerIterationStats:
        """Training with update='eager': receive the workers' masks (sent before their
        backward), then update each parameter as soon as all workers' gradients of it have
        arrived, in arrival order."""
        ctx, cfg = self.ctx, self.cfg
        pos = {info.index: k for k, info in enumerate(self.trainable)}
        left = {info.index: len(self.workers) for info in self.trainable}
        lock = threading.Lock()
        ready: "queue.Queue" = queue.Queue()

        def landed(t: Transfer) -> None:
            if t.error is not None:
                ready.put(t)
                return
            with lock:
                left[t.key] -= 1
                last = left[t.key] == 0
            if last:
                ready.put(t.key)

        masks = []
        for w in self.workers:
            if self.trainable:
                mask = torch.zeros(len(self.trainable), dtype=torch.uint8)
                masks.append((w, mask, dist.irecv(mask, src=w, tag=self.ctrl_tag + 2)))
        transfers = []
        for info in self.grad_order:
            for w in self.workers:
                work = dist.irecv(self.bufs[(w, info.index)], src=w, tag=info.push_tag)
                t = Transfer(work, w, f"receive of the gradient of {info.name!r}", key=info.index, on_done=landed)
                transfers.append((info, t))
        for _, t in transfers:
            self.grad_watch.watch(t)
        self._wait_sends(st, t0, sends)
        has_grad = torch.zeros(len(self.trainable), dtype=torch.uint8)
        for w, mask, work in masks:
            wait_work(ctx, work, "receive of the gradient mask", w)
            has_grad |= mask
        by_index = {info.index: info for info in self.trainable}
        scale = 1.0 / len(self.workers) if cfg.reduce == "mean" else 1.0
        busy, first, last_end = 0.0, None, None
        for _ in range(len(self.trainable)):
            try:
                item = ready.get(timeout=ctx.timeout)
            except queue.Empty:
                t = next(t for _, t in transfers if t.done_at is None)
                raise ctx.error(t.what, t.peer, None, t.posted, timed_out=True) from None
            if isinstance(item, Transfer):
                item.wait(ctx)          # raises the PeerError
            info = by_index[item]
            u0 = now()
            first = u0 if first is None else first
            if has_grad[pos[item]]:
                # summed in place into the first worker's buffer: it is next written by the
                # next iteration's receive, posted after this update (the optimizers keep no
                # reference to a gradient), so the copy bulk makes is not needed here
                g = self.bufs[(self.workers[0], item)]
                for w in self.workers[1:]:
                    g.add_(self.bufs[(w, item)])
                if scale != 1.0:
                    g.mul_(scale)
                info.param.grad = g
                opt = self.opts[item]
                opt.step()
                opt.zero_grad(set_to_none=True)
            else:                        # no worker had a gradient: skip, like grad None
                info.param.grad = None
            last_end = now()
            busy += last_end - u0
        for info, t in transfers:
            st.grads.append([info.name, t.peer, _ms(t.posted, t0), _ms(t.done_at, t0)])
        if first is not None:
            st.update = [_ms(first, t0), _ms(last_end, t0)]
        st.update_busy_ms = busy * 1e3
        st.iter_ms = _ms(now(), t0)
        return st


# ----------------------------------------------------------------------------------------------
# Bandwidth probe (tac without a given rate)


def _probe_bandwidth(ctx: Context, server: int, worker: int, tag: int, nbytes: int = 8 << 20, reps: int = 3) -> float:
    """Bytes/s from ``server`` to ``worker`` (best of ``reps`` timed transfers after one warm-up).
    Called on both ranks; the worker's measurement is returned there (0.0 on the server)."""
    buf = torch.zeros(nbytes // 4, dtype=torch.float32)
    best = 0.0
    for r in range(reps + 1):
        if ctx.rank == server:
            wait_work(ctx, dist.isend(buf, worker, tag=tag), "send of the bandwidth probe", worker)
            wait_work(ctx, dist.irecv(torch.zeros(1), worker, tag=tag), "receive of the probe ack", worker)
        else:
            t = now()
            wait_work(ctx, dist.irecv(buf, server, tag=tag), "receive of the bandwidth probe", server)
            dt = now() - t
            wait_work(ctx, dist.isend(torch.zeros(1), server, tag=tag), "send of the probe ack", server)
            if r > 0:
                best = max(best, nbytes / max(dt, 1e-9))
    return best


# ----------------------------------------------------------------------------------------------
# run


def _default_store():
    try:
        return dist.distributed_c10d._get_default_store()
    except Exception as e:  # pragma: no cover - private API moved
        raise RuntimeError(f"tictac.torch.ps needs the default process group's store: {e}") from e


def _tensor_bytes(obj) -> bytes:
    b = io.BytesIO()
    torch.save(obj, b)
    return b.getvalue()


def _from_bytes(data: bytes):
    return torch.load(io.BytesIO(data), weights_only=False)


def run(model_fn: Callable[[], nn.Module], data_fn: Callable[[int, int], Tuple[Any, Any]],
        config: PSConfig, group=None) -> RunResult:
    """Run ``config.iters`` parameter-server iterations on the initialised default group.

    model_fn(): builds the model; called on every rank after ``torch.manual_seed(config.seed)``
      (the servers' copies hold the authoritative values).
    data_fn(worker_index, iteration) -> (inputs, target): a worker's batch (inputs: a tensor or
      a tuple of tensors passed to the model; target: given to loss_fn; unused in inference).
    Returns a RunResult (see there). Raises PeerError when a peer dies or a wait times out.
    """
    if group is not None and group is not dist.group.WORLD:
        raise NotImplementedError("tictac.torch.ps runs on the default (world) group")
    if not dist.is_initialized():
        raise RuntimeError("initialise torch.distributed first (ps.init_distributed, torchrun, or "
                           "torch.distributed.init_process_group)")
    rank, world = dist.get_rank(), dist.get_world_size()
    config.validate(world)
    run_id = next(_run_counter)
    store = dist.PrefixStore(f"tictac_ps/{run_id}/", _default_store())
    ctx = Context(rank, config.num_ps, config.timeout, store)
    is_server = rank < config.num_ps
    first_worker = config.num_ps
    try:
        return _run(model_fn, data_fn, config, ctx, store, rank, world, is_server, first_worker)
    except BaseException as e:
        msg = str(e) if isinstance(e, PeerError) else f"{ctx.who(rank)}: {type(e).__name__}: {e}"
        ctx.publish_failure(msg.split(" [reported by others")[0].strip())
        raise


def _run(model_fn, data_fn, cfg: PSConfig, ctx: Context, store, rank: int, world: int,
         is_server: bool, first_worker: int) -> RunResult:
    torch.manual_seed(cfg.seed)
    model = model_fn()
    infos = param_infos(model, cfg.num_ps)
    names = [i.name for i in infos]
    names_by_id = {id(i.param): i.name for i in infos}
    ctrl_tag = 2 * len(infos) + 16
    probe_tag = ctrl_tag + 1
    prio = Priorities(None)

    # Link rate for tac: given, from the environment, or measured server 0 -> first worker.
    rate, rate_src = cfg.bandwidth_bytes_s, "config"
    if cfg.policy == "tac" and rate is None:
        rate, rate_src = cluster_rate_from_env(), "TICTAC_CLUSTER_RATE"
        if rate is None and rank in (0, first_worker):
            rate = _probe_bandwidth(ctx, 0, first_worker, probe_tag) or None
            rate_src = "measured rank 0 -> first worker"

    # The plan: built on the first worker, read by everyone from the store.
    plan_timeout = cfg.plan_timeout or max(cfg.timeout, 300.0)
    if rank == first_worker:
        try:
            x0, _ = data_fn(0, 0)
            plan = build_plan(cfg.policy, model, _as_tuple(x0), names, names_by_id, mode=cfg.mode,
                              seed=cfg.seed, bandwidth_bytes_s=rate, bandwidth_source=rate_src)
        except Exception as e:
            store.set("plan", json.dumps({"error": f"{ctx.who(rank)} could not build the {cfg.policy!r} plan: {e}"}))
            raise
        store.set("plan", plan.to_json())
        for note in plan.notes:
            log.info("plan: %s", note)
            if "fell back" in note or "failed" in note:
                print(f"tictac.torch.ps: {note}", file=sys.stderr, flush=True)
    else:
        try:
            store.wait(["plan"], datetime.timedelta(seconds=plan_timeout))
        except Exception as e:
            raise PeerError(f"{ctx.who(rank)}: no plan from {ctx.who(first_worker)} within {plan_timeout:g} s: {e}",
                            rank=rank, peer=first_worker, what="plan") from e
        raw = json.loads(store.get("plan"))
        if "error" in raw:
            raise PeerError(raw["error"], rank=rank, peer=first_worker, what="plan")
        plan = OrderPlan(**raw)
    if plan.static:
        table = {}
        for k, n in enumerate(plan.base):
            i = names.index(n)
            table[2 * i] = k
            table[2 * i + 1] = k
        prio.install(table)
    else:
        prio.install({})

    result = RunResult(rank=rank, role="server" if is_server else "worker", plan=plan,
                       owners={i.name: i.owner for i in infos}, priorities_active=prio.active,
                       priorities_reason=prio.reason)
    if is_server:
        server = _Server(ctx, cfg, infos, plan, prio, ctrl_tag, world)
        try:
            for it in range(cfg.iters):
                result.server_stats.append(server.iteration(it))
        finally:
            server.grad_watch.close()
        result.params = {i.name: i.param.detach().clone() for i in server.owned}
        store.set(f"sstats/{rank}", json.dumps([s.to_json() for s in result.server_stats]))
        if cfg.gather_params:
            store.set(f"params/{rank}", _tensor_bytes(result.params))
    else:
        worker = _Worker(ctx, cfg, model, infos, plan, prio, ctrl_tag)
        worker.install()
        try:
            for it in range(cfg.iters):
                inputs, target = data_fn(worker.widx, it)
                st = worker.iteration(it, inputs, target)
                result.stats.append(st)
                if cfg.print_progress and rank == first_worker:
                    print(f"iter {it + 1}/{cfg.iters}{' (warmup)' if st.warmup else ''}: {st.iter_ms:.1f} ms "
                          f"(stall {st.stall_ms:.1f} ms) rank {rank}", flush=True)
        finally:
            worker.remove()
        store.set(f"stats/{rank}", json.dumps([s.to_json() for s in result.stats]))
        result.summary = summarize(result.stats, cfg.batch_size)

    if rank == 0:
        wait_s = datetime.timedelta(seconds=cfg.timeout)
        all_stats, all_sstats = [], list(result.server_stats)
        for r in range(world):
            if r < cfg.num_ps:
                if r != 0:
                    store.wait([f"sstats/{r}"], wait_s)
                    all_sstats += [ServerIterationStats(**d) for d in json.loads(store.get(f"sstats/{r}"))]
                    if cfg.gather_params:
                        store.wait([f"params/{r}"], wait_s)
                        result.params.update(_from_bytes(store.get(f"params/{r}")))
            else:
                store.wait([f"stats/{r}"], wait_s)
                all_stats += [IterationStats(**d) for d in json.loads(store.get(f"stats/{r}"))]
        result.stats, result.server_stats = all_stats, all_sstats
        if cfg.gather_params:
            result.params = {n: result.params[n] for n in names if n in result.params}
        result.summary = summarize(all_stats, cfg.batch_size)
        if cfg.log_json:
            write_json_lines(cfg.log_json, all_stats)
        if cfg.trace:
            write_chrome_trace(cfg.trace, all_stats, all_sstats, cfg.num_ps)
    return result
