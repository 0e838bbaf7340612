"""A server rank of parameter-server training or inference.

Per iteration, as each worker's ready message lands (the worker's receives are posted), it sends
that worker each parameter it owns: with send priorities as one transport batch per worker in
declaration order, each send at its position in that worker's policy order (the transport makes
the order); without them (gloo) after every worker is ready. In training it averages (or sums) the workers' gradients and steps a real
torch.optim optimizer: per parameter as soon as its gradients have landed (update="eager"), or
once over all of them (update="bulk"). See docs/ps-training.md.
"""

from __future__ import annotations

import queue
import time
from typing import List

import torch
import torch.distributed as dist

from .comm import Context, Transfer, Watcher, wait_work
from .config import PSConfig
from .planning import OrderPlan
from .priorities import Priorities
from .protocol import Tags, ms, now
from .sharding import ParamInfo
from .stats import ServerIterationStats, to_unix
from .update_queue import ReadyUpdates

__all__ = ["Server", "make_optimizer"]


def make_optimizer(cfg: PSConfig, params: List[torch.Tensor]):
    """The server-side torch.optim optimizer of `params` (None when there are none)."""
    if not params:
        return None
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay,
                               nesterov=cfg.nesterov)
    return torch.optim.Adam(params, lr=cfg.lr, betas=tuple(cfg.betas), eps=cfg.eps,
                            weight_decay=cfg.weight_decay)


class Server:
    """One server rank: sends its parameters, receives gradients, steps torch.optim."""

    def __init__(self, ctx: Context, cfg: PSConfig, infos: List[ParamInfo], plan: OrderPlan,
                 prio: Priorities, tags: Tags, world: int):
        self.ctx, self.cfg, self.plan, self.prio, self.tags = ctx, cfg, plan, prio, tags
        self.owned = [i for i in infos if i.owner == ctx.rank]
        self.owned_names = {i.name for i in self.owned}
        self.by_name = {i.name: i for i in self.owned}
        self.workers = list(range(cfg.num_ps, world))
        self.training = cfg.mode == "training"
        self.trainable = [i for i in self.owned if i.param.requires_grad]
        self.eager = self.training and cfg.update == "eager"
        self.opt = make_optimizer(cfg, [i.param for i in self.trainable]) if self.training and not self.eager else None
        # eager: one optimizer per parameter (torch.optim's state is per parameter, so the
        # arithmetic is that of one optimizer over all of them)
        self.opts = {i.index: make_optimizer(cfg, [i.param]) for i in self.trainable} if self.eager else {}
        self.grad_watch = Watcher(ctx, "grads")
        # gradients arrive in about the backward order: the watcher gets them in that order
        # (matters only without futures, where it waits them one by one in that order)
        self.grad_order = list(reversed(self.trainable))
        # Pipelined training: each trainable parameter's next value is sent as soon as it is
        # updated; those sends are waited for (and recorded) in the next iteration.
        self.pipelined = self.eager and cfg.pipeline
        self.pre_sent: list = []
        self._orders_it, self._orders_cache = -1, {}
        self.bufs = {(w, i.index): torch.empty_like(i.param.data, memory_format=torch.contiguous_format)
                     for w in self.workers for i in self.trainable} if self.training else {}
        for i in self.owned:
            if not i.param.data.is_contiguous():
                i.param.data = i.param.data.contiguous()

    def close(self) -> None:
        self.grad_watch.close()

    def iteration(self, it: int) -> ServerIterationStats:
        ctx, cfg = self.ctx, self.cfg
        t0 = now()
        st = ServerIterationStats(rank=ctx.rank, iter=it, t0_unix=to_unix(t0))
        # Every worker posts its receives, then says it is ready (both modes).
        sent = {info.index for info, *_ in self.pre_sent}
        unsent = [i for i in self.owned if i.index not in sent]
        sends = self.pre_sent
        self.pre_sent = []
        readies = [(w, torch.zeros(1, dtype=torch.int64)) for w in self.workers]
        readies = [(w, flag, dist.irecv(flag, src=w, tag=self.tags.ready)) for w, flag in readies]
        if self.prio.active:
            # Each worker's sends go out as soon as that worker is ready (one transport batch per
            # worker; the SendQueue orders them against what is already queued), not after the
            # slowest worker's ready message.
            for w in self._in_completion_order(readies, it):
                sends = sends + self._send_params(it, unsent, [w])
        else:
            # gloo baseline: no send priorities, so the only lever is posting every worker's sends
            # interleaved by position once all are ready (as before).
            for w, flag, work in readies:
                self._check_ready(w, flag, work, it)
            sends = sends + self._send_params(it, unsent)
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
                    masks.append((w, mask, dist.irecv(mask, src=w, tag=self.tags.mask)))
        self._wait_sends(st, t0, sends)
        if self.training:
            for info, w, posted, work in recvs:
                wait_work(ctx, work, f"receive of the gradient of {info.name!r}", w)
                st.grads.append([info.name, w, ms(posted, t0), ms(now(), t0)])
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
            st.update = [ms(u0, t0), ms(now(), t0)]
            st.update_busy_ms = st.update[1] - st.update[0]
        st.iter_ms = ms(now(), t0)
        return st

    def _check_ready(self, w: int, flag, work, it: int) -> None:
        wait_work(self.ctx, work, "receive of the ready message", w)
        if int(flag.item()) != it:
            raise RuntimeError(f"{self.ctx.who(self.ctx.rank)}: {self.ctx.who(w)} is at iteration "
                               f"{int(flag.item())}, expected {it}")

    def _in_completion_order(self, readies, it: int):
        """Yields each worker rank once its ready message has landed (checked), in the order
        they land. Polls the posted receives; past the context's timeout the first one still
        pending is waited for, which fails naming that worker."""
        pending = list(readies)
        deadline = now() + self.ctx.timeout
        while pending:
            landed = [r for r in pending if r[2].is_completed()]
            if not landed:
                if now() >= deadline:
                    landed = [pending[0]]
                else:
                    time.sleep(0.0002)
                    continue
            for r in landed:
                pending.remove(r)
                self._check_ready(r[0], r[1], r[2], it)
                yield r[0]

    def _update_ranks(self, it: int) -> dict:
        """Parameter index -> the rank of its update among those ready at once: the smallest
        position over the workers' orders for iteration it + 1 (update_order "next"), or
        nothing (arrival order)."""
        if self.cfg.update_order != "next" or it + 1 >= self.cfg.iters:
            return {}
        ranks: dict = {}
        for w in self.workers:
            for k, n in enumerate(self.plan.order_for(w - self.cfg.num_ps, it + 1)):
                info = self.by_name.get(n)
                if info is not None:
                    ranks[info.index] = min(k, ranks.get(info.index, k))
        return ranks

    def _orders(self, it: int) -> dict:
        """worker rank -> [(position in its order for `it`, owned ParamInfo)] (cached per it)."""
        if self._orders_it != it:
            self._orders_it, self._orders_cache = it, {}
            for w in self.workers:
                full = self.plan.order_for(w - self.cfg.num_ps, it)
                self._orders_cache[w] = [(k, self.by_name[n]) for k, n in enumerate(full) if n in self.owned_names]
        return self._orders_cache

    def _send_params(self, it: int, infos, workers=None) -> list:
        """Sends every worker the value for iteration `it` of each parameter in `infos`.

        With send priorities, all sends are one transport batch posted in declaration order,
        each at its position in that worker's policy order: the transport alone makes the
        order. Without them (gloo) they are posted in each worker's policy order, interleaved
        by position across workers, the only lever there. `workers`: only these (default all).
        Returns (info, worker, issued, work)."""
        orders = self._orders(it)
        wanted = {info.index for info in infos}
        if self.prio.active:
            to = self.workers if workers is None else workers
            pos = {w: {info.index: k for k, info in orders[w]} for w in to}
            plan = [(pos[w][info.index], info, w) for info in self.owned if info.index in wanted
                    for w in to]
        else:
            plan = [orders[w][j] + (w,) for j in range(len(self.owned)) for w in self.workers
                    if orders[w][j][1].index in wanted]
        sends = []
        with self.prio.batch():
            for k, info, w in plan:
                with self.prio.send(k):
                    work = dist.isend(info.param.data, w, tag=info.pull_tag)
                sends.append((info, w, now(), work))
        return sends

    def _wait_sends(self, st: ServerIterationStats, t0: float, sends) -> None:
        for info, w, issued, work in sends:
            wait_work(self.ctx, work, f"send of {info.name!r}", w)
            st.sends.append([info.name, w, ms(issued, t0), ms(now(), t0)])

    def _eager_rest(self, it: int, st: ServerIterationStats, t0: float, sends) -> ServerIterationStats:
        """Training with update='eager': receive the workers' masks (sent before their
        backward), then update each parameter as soon as all workers' gradients of it have
        arrived; of those ready at once, in cfg.update_order (update_queue.py)."""
        ctx, cfg = self.ctx, self.cfg
        pos = {info.index: k for k, info in enumerate(self.trainable)}
        # Updates ready to run, smallest rank first: update_order "next" ranks a parameter by
        # its earliest position in the workers' orders for the next iteration, "arrival" by
        # when its last gradient landed. A failed transfer goes first (its error is raised).
        ready = ReadyUpdates({info.index: len(self.workers) for info in self.trainable}, self._update_ranks(it))

        def landed(t: Transfer) -> None:
            if t.error is not None:
                ready.failed(t)
            else:
                ready.landed(t.key)

        masks = []
        for w in self.workers:
            if self.trainable:
                mask = torch.zeros(len(self.trainable), dtype=torch.uint8)
                masks.append((w, mask, dist.irecv(mask, src=w, tag=self.tags.mask)))
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
                is_failure, item = ready.get(timeout=ctx.timeout)
            except queue.Empty:
                t = next(t for _, t in transfers if t.done_at is None)
                raise ctx.error(t.what, t.peer, None, t.posted, timed_out=True) from None
            if is_failure:
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
            if self.pipelined and it + 1 < cfg.iters:
                self.pre_sent += self._send_params(it + 1, [info])
            last_end = now()
            busy += last_end - u0
        for info, t in transfers:
            st.grads.append([info.name, t.peer, ms(t.posted, t0), ms(t.done_at, t0)])
        if first is not None:
            st.update = [ms(first, t0), ms(last_end, t0)]
        st.update_busy_ms = busy * 1e3
        st.iter_ms = ms(now(), t0)
        return st
