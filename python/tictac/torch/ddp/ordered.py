"""Ordered data-parallel training: TicTac's order for DistributedDataParallel users.

    model = tictac.torch.ordered_ddp(model, optimizer, policy="tic")
    for x, y in data:
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()
    model.synchronize()          # before evaluating or saving: applies the last updates

What it does (ByteScheduler / P3's idea, with the order from TicTac's policies):
- Gradients are all-reduced in buckets of parameters that are consecutive in the policy's order
  (tic / tac from the traced graph, layer = recorded execution order, fifo = declaration order),
  each at its bucket's priority (the position of its first parameter in that order: the
  parameters the next forward pass needs first are sent first; on the tictac backend the
  prioritised all-reduces run concurrently, TICTAC_COLL_CONCURRENCY, and a queued high-priority
  chunk goes before lower ones, so a later bucket overtakes a big earlier one mid-ring). Buckets
  are launched in one fixed order on every rank (reverse policy order, as backward produces
  them), so collectives always match.
- ``optimizer.step()`` does not block: each bucket's update is applied by a background thread
  as soon as its all-reduce completes (most urgent bucket first), and the next forward pass
  waits, in the pre-hook of the first module that owns one of its parameters, only for that
  bucket's update. So the updates and the next forward overlap the tail of this iteration's
  communication. ``optimizer.zero_grad()`` (and the wrapper's ``zero_grad()``) are serialised
  with the updater, which lends each parameter its averaged gradient for the update's duration.
- A parameter of at least ``shard_bytes`` (TICTAC_DDP_SHARD_BYTES, default 16 MiB; 0 = off; a
  tictac group of 2+ ranks) is updated in slices (sharded.py): its gradient is reduce-scattered,
  each rank updates its 1/world slice as soon as its part is in, and the updated slices are
  all-gathered into the parameter (posted at step() under a gate, tictac.torch.after). Same bytes
  as an all-reduce; nothing left to average or update after the last byte lands.
- The update itself is the user's optimizer, cloned per bucket (split_optimizer.py): the same
  weights as DistributedDataParallel with the same optimizer (tests/torch/test_ordered_ddp.py),
  including momentum, Adam, ``no_sync()`` gradient accumulation and unused parameters
  (a parameter no rank used keeps grad None, as DDP's find_unused_parameters does).

With sliced parameters, ``synchronize()`` gathers their averaged gradients (a collective: call
it on every rank, or ``synchronize(grads=False)`` to only apply the updates).

Not supported (refused or documented): a closure passed to step(); reading or clipping p.grad
between backward and step (p.grad holds this rank's gradient until the update is applied; call
``synchronize()`` first to get DDP's averaged gradients, then call step()); zeroing gradients
through the inner module (``module.zero_grad()``) while updates are pending; optimizers that
couple parameters (LBFGS); a parameter used outside the forward of the module that owns it is
updated at the start of the forward instead (correct, without overlap).
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import threading
import time
from typing import Any, Dict, List, Optional

import torch
import torch.distributed as dist
from torch import nn

from tictac.torch.ddp.buckets import Bucket, fill, make_buckets, reduced_grads
from tictac.torch.ddp.sharded import ShardedParam
from tictac.torch.ddp.split_optimizer import BucketOptimizer

log = logging.getLogger("tictac.torch.ddp")

POLICIES = ("tic", "tac", "layer", "fifo")
DEFAULT_BUCKET_BYTES = 4 << 20
DEFAULT_SHARD_BYTES = 16 << 20   # TICTAC_DDP_SHARD_BYTES


def _shard_bytes_from_env() -> int:
    v = os.environ.get("TICTAC_DDP_SHARD_BYTES", "").strip()
    if not v:
        return DEFAULT_SHARD_BYTES
    try:
        n = int(v)
    except ValueError:
        n = -1
    if n < 0:
        raise ValueError(f"TICTAC_DDP_SHARD_BYTES must be a byte count >= 0 (0 = no sharded updates), got {v!r}")
    return n


def _warn_if_ranks_share_cores() -> Optional[str]:
    """A warning (logged once per process, also returned) when torchrun put more ranks on this
    host (LOCAL_WORLD_SIZE) than this process may run on cores: then the ranks are CPU-bound, the
    order has nothing to overlap, and the updater thread's work costs time (docs/ddp.md, resnet50
    on 2 cores: 0.82x DDP with 4 ranks, 1.10x with 2)."""
    try:
        local = int(os.environ.get("LOCAL_WORLD_SIZE", "0") or 0)
    except ValueError:
        return None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 0)
    if cores <= 0 or local <= cores:
        return None
    msg = (f"tictac.torch.ordered_ddp: {local} ranks share {cores} CPU core(s) on this host "
           f"(LOCAL_WORLD_SIZE={local}); with the ranks CPU-bound, ordering has nothing to overlap and "
           f"its updater thread costs CPU, so plain DistributedDataParallel may be faster here (docs/ddp.md)")
    if not getattr(_warn_if_ranks_share_cores, "warned", False):
        _warn_if_ranks_share_cores.warned = True
        log.warning("%s", msg)
    return msg


class OrderedDDP(nn.Module):
    """See the module docstring. ``module`` is wrapped (its parameters and buffers are broadcast
    from the group's first rank now); ``optimizer.step`` is replaced by the deferred step."""

    def __init__(self, module: nn.Module, optimizer: torch.optim.Optimizer, policy: str = "tic", *,
                 group=None, bucket_bytes: int = DEFAULT_BUCKET_BYTES, seed: int = 0,
                 shard_bytes: Optional[int] = None):
        super().__init__()
        if policy not in POLICIES:
            raise ValueError(f"tictac.torch.ordered_ddp: unknown policy {policy!r}; one of {', '.join(POLICIES)}")
        if bucket_bytes <= 0:
            raise ValueError(f"tictac.torch.ordered_ddp: bucket_bytes must be > 0, got {bucket_bytes}")
        if not dist.is_initialized():
            raise RuntimeError("tictac.torch.ordered_ddp needs an initialised process group "
                               "(dist.init_process_group(\"tictac\") first)")
        self.module = module
        self.policy = policy
        self._group = group
        self._world = dist.get_world_size(group)
        self._src = dist.get_global_rank(group, 0) if group is not None else 0
        self._bucket_bytes = int(bucket_bytes)
        self._shard_bytes = _shard_bytes_from_env() if shard_bytes is None else int(shard_bytes)
        if self._shard_bytes < 0:
            raise ValueError(f"tictac.torch.ordered_ddp: shard_bytes must be >= 0 (0 = off), got {shard_bytes}")
        if self._world < 2 or not _is_tictac(group):
            self._shard_bytes = 0    # the gated all-gather needs the tictac backend
        self._seed = seed
        self.oversubscribed = _warn_if_ranks_share_cores()   # None, or the warning it logged
        self._optimizer = optimizer
        self._params: Dict[str, nn.Parameter] = dict(module.named_parameters())
        self._buckets: Optional[List[Bucket]] = None
        self._bucket_of: Dict[int, Bucket] = {}
        self._optims: List[BucketOptimizer] = []
        self._launch_order: List[Bucket] = []
        self._next_launch = 0
        self._in_backward = False
        self._sync = True
        self._recording = False             # inside the first forward: note which modules run
        self._owner_ran: set = set()        # modules whose forward ran in the first pass
        self._eager: List[Bucket] = []      # buckets with a parameter whose owner never runs
        self._owned: Dict[nn.Module, List[Bucket]] = {}
        self.order: List[str] = []
        self.stats = {"launched": 0, "applied_in_forward": 0, "applied_eagerly": 0, "sharded_params": 0}
        self.wait_ms: Dict[int, float] = {}  # bucket index -> ms spent waiting for its all-reduce
        # Diagnostics, off unless set to a list: (bucket index, event, time.perf_counter()) with
        # event "launch" (all-reduce started), "done" (it completed: the Work's future), "reduced"
        # (the updater took the result: later if an earlier bucket's update was still running),
        # "applied".
        self.trace: Optional[List[tuple]] = None
        with torch.no_grad():
            for t in list(module.parameters()) + list(module.buffers()):
                dist.broadcast(t, src=self._src, group=group)
        self._updater = _Updater()
        self._shard_updater = _Updater("tictac-ddp-shard")   # sharded updates, as their reduce-scatter completes
        self._user_step = optimizer.step
        self._user_zero_grad = optimizer.zero_grad
        optimizer.step = self._deferred_step  # type: ignore[method-assign]
        optimizer.zero_grad = self._locked_zero_grad  # type: ignore[method-assign]
        self._handles = [p.register_post_accumulate_grad_hook(self._on_grad)
                         for p in self._params.values() if p.requires_grad]
        self._handles += [m.register_forward_pre_hook(self._pre_forward) for m in module.modules()]

    # ---- planning (first forward) ----
    def _plan(self, args, kwargs) -> None:
        names = list(self._params)
        order = None
        if dist.get_rank(self._group) == 0:
            if self.policy == "fifo" or kwargs:
                order = names
            else:
                from tictac.torch.ps.planning import build_plan
                names_by_id = {id(p): n for n, p in self._params.items()}
                plan = build_plan(self.policy, self.module, args, names, names_by_id, mode="training",
                                  seed=self._seed)
                order = [n for n in plan.base if n in self._params] if plan.base else names
                for note in plan.notes:
                    log.info("ordered_ddp plan: %s", note)
                if plan.policy != self.policy:
                    log.warning("ordered_ddp: policy %r fell back to %r (%s)", self.policy, plan.policy,
                                "; ".join(plan.notes))
        box = [order]
        dist.broadcast_object_list(box, src=self._src, group=self._group)
        self.order = list(box[0]) + [n for n in names if n not in box[0]]
        self._buckets = make_buckets(self.order, self._params, self._bucket_bytes, self._shard_bytes)
        rank = dist.get_rank(self._group)
        for b in self._buckets:
            p = b.params[0]
            if self._shard_bytes and len(b.params) == 1 and p.numel() * p.element_size() >= self._shard_bytes:
                b.shard = ShardedParam(p, rank, self._world, self._optimizer)
                self.stats["sharded_params"] += 1
        self._optims = [None if b.shard else BucketOptimizer(self._optimizer, b.params) for b in self._buckets]
        for b in self._buckets:
            for p in b.params:
                self._bucket_of[id(p)] = b
        self._launch_order = list(reversed(self._buckets))
        for m in self.module.modules():
            own = {id(p) for p in m.parameters(recurse=False)}
            self._owned[m] = [b for b in self._buckets if any(id(p) in own for p in b.params)]

    def _note_owners(self) -> None:
        ran = {id(p) for m in self._owner_ran for p in m.parameters(recurse=False)}
        self._eager = [b for b in self._buckets if any(id(p) not in ran for p in b.params)]

    # ---- forward ----
    def forward(self, *args, **kwargs):
        first = self._buckets is None
        if first:
            self._plan(args, kwargs)
            self._recording = True
        for b in self._eager:
            if self._apply(b):
                self.stats["applied_eagerly"] += 1
        try:
            out = self.module(*args, **kwargs)
        finally:
            if first:
                self._recording = False
                self._note_owners()
        return out

    def _pre_forward(self, module, _args):
        if self._buckets is None:
            return
        if self._recording:
            self._owner_ran.add(module)
        for b in self._owned.get(module, ()):
            if self._apply(b):
                self.stats["applied_in_forward"] += 1

    # ---- backward: launch buckets in a fixed order ----
    def _on_grad(self, p) -> None:
        if not self._sync or self._buckets is None:
            return
        if not self._in_backward:
            self._in_backward = True
            self._next_launch = 0
            for b in self._buckets:
                self._apply(b)          # the previous update must land before the buffer refills
                b.ready.clear()
                b.launched = False
            torch.autograd.Variable._execution_engine.queue_callback(self._backward_done)
        b = self._bucket_of.get(id(p))
        if b is None:
            return
        b.ready.add(id(p))
        self._launch_ready(force=False)

    def _launch_ready(self, force: bool) -> None:
        while self._next_launch < len(self._launch_order):
            b = self._launch_order[self._next_launch]
            if not force and len(b.ready) < len(b.params):
                return
            self._launch(b)
            self._next_launch += 1

    def _launch(self, b: Bucket) -> None:
        if b.shard is not None:
            b.shard.fill()
            with _priority(b.index, self._group):
                b.shard.launch(self._group)
            b.work = b.shard.work
        else:
            flat = fill(b, self._world)
            with _priority(b.index, self._group):
                b.work = dist.all_reduce(flat, group=self._group, async_op=True)
        trace = self.trace
        if trace is not None:
            trace.append((b.index, "launch", time.perf_counter()))
            index = b.index
            b.work.get_future().add_done_callback(
                lambda _f: trace.append((index, "done", time.perf_counter())))
        b.launched, b.pending = True, False
        self.stats["launched"] += 1

    def _backward_done(self) -> None:
        self._launch_ready(force=True)   # buckets with parameters no gradient reached
        self._in_backward = False

    # ---- step: deferred; updates applied by the updater thread ----
    def _deferred_step(self, closure=None):
        if closure is not None:
            raise RuntimeError("tictac.torch.ordered_ddp: step(closure) is not supported (updates are deferred)")
        launched = [b for b in self._buckets or () if b.launched]
        for b in launched:                      # most urgent first: the order the forward needs
            b.pending, b.launched = True, False
            if b.shard is not None:             # posted here, in the same order on every rank
                with _priority(b.index, self._group):
                    b.shard.post_gather(self._group)
                self._trace_gather(b)
        self._updater.submit([b for b in launched if b.shard is None], self._update)
        self._shard_updater.submit([b for b in launched if b.shard is not None], self._update_shard)
        return None

    def _trace_gather(self, b: Bucket) -> None:
        trace = self.trace
        if trace is not None:
            index = b.index
            b.shard.gather_work.get_future().add_done_callback(
                lambda _f: trace.append((index, "gathered", time.perf_counter())))

    def _update_shard(self, b: Bucket) -> None:
        """On the shard updater: waits for the reduce-scatter, updates this rank's slice and lets
        the all-gather go; the next forward waits for the all-gather (_apply)."""
        b.shard.work.wait()
        if self.trace is not None:
            self.trace.append((b.index, "reduced", time.perf_counter()))
        b.shard.update()
        if self.trace is not None:
            self.trace.append((b.index, "applied", time.perf_counter()))

    def _update(self, b: Bucket) -> None:
        """On the updater thread: waits for the all-reduce (GIL released), then applies."""
        grads = reduced_grads(b)
        trace = self.trace
        if trace is not None:
            trace.append((b.index, "reduced", time.perf_counter()))
        with self._updater.lock:
            self._optims[b.index].step(grads)
        if trace is not None:
            trace.append((b.index, "applied", time.perf_counter()))

    def _release_sharded_grads(self, set_to_none: bool) -> None:
        """Before gradients are zeroed in place: a reduce-scatter may still read one."""
        if not set_to_none:
            for b in self._buckets or ():
                if b.shard is not None:
                    b.shard.release_grad()

    def _locked_zero_grad(self, set_to_none: bool = True) -> None:
        self._release_sharded_grads(set_to_none)
        with self._updater.lock:
            self._user_zero_grad(set_to_none)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """As nn.Module.zero_grad, serialised with the updater (which lends p.grad)."""
        self._release_sharded_grads(set_to_none)
        with self._updater.lock:
            self.module.zero_grad(set_to_none)

    def _apply(self, b: Bucket) -> bool:
        """Waits until the update of `b` (pending since step()) is applied; false if none was."""
        if not b.pending:
            return False
        t0 = time.perf_counter()
        if b.shard is not None:
            self._shard_updater.wait(b)
            b.shard.finish()
        else:
            self._updater.wait(b)
        # Where the next forward waits for communication (diagnostics: bench/e2e logs it).
        waited = (time.perf_counter() - t0) * 1e3
        self.wait_ms[b.index] = self.wait_ms.get(b.index, 0.0) + waited
        b.pending = False
        return True

    def synchronize(self, grads: bool = True) -> None:
        """Applies every pending update now (before evaluating, saving or reading the weights),
        and leaves each parameter's .grad = the averaged gradient of the last all-reduce, as DDP
        does (None where no rank produced one). A parameter updated in slices (shard_bytes) has
        only its slice of that gradient on each rank, so with sharded parameters this gathers
        them: a collective, every rank calls it. ``grads=False`` only applies the updates
        (local: one rank may call it, e.g. before saving)."""
        for b in self._buckets or ():
            self._apply(b)
        if not grads:
            return
        for b in self._buckets or ():
            if b.shard is not None:
                p = b.params[0]
                g = b.shard.averaged_grad(self._group)
                p.grad = g
            elif b.work is not None:
                for p, g in zip(b.params, reduced_grads(b)):
                    p.grad = None if g is None else g.clone()

    @contextlib.contextmanager
    def no_sync(self):
        """Gradients accumulate locally inside the block (no all-reduce), as DDP.no_sync()."""
        old, self._sync = self._sync, False
        try:
            yield
        finally:
            self._sync = old

    def remove(self) -> None:
        """Applies pending updates, stops the updater, removes the hooks and restores
        optimizer.step and zero_grad."""
        for b in self._buckets or ():
            self._apply(b)
        self._updater.stop()
        self._shard_updater.stop()
        for h in self._handles:
            h.remove()
        self._optimizer.step = self._user_step  # type: ignore[method-assign]
        self._optimizer.zero_grad = self._user_zero_grad  # type: ignore[method-assign]


class _Updater:
    """A thread that applies submitted buckets' updates (`apply(bucket)`) in submission order, each
    as soon as its all-reduce completes. `lock` serialises the updates (which lend p.grad the
    averaged gradient) with zero_grad(). An update that fails is re-raised by wait(). Deep copies
    (the planner copies the model, hooks included) get a fresh, idle updater."""

    def __init__(self, name: str = "tictac-ddp-update"):
        self.name = name
        self.lock = threading.Lock()
        self._queue: "queue.Queue[Optional[tuple]]" = queue.Queue()
        self._thread: Optional[threading.Thread] = None
        self._done: Dict[int, threading.Event] = {}   # bucket index -> its update is applied
        self._error: Optional[BaseException] = None

    def __deepcopy__(self, memo):
        return _Updater(self.name)

    def submit(self, buckets: List[Bucket], apply) -> None:
        if not buckets:
            return
        for b in buckets:
            self._done.setdefault(b.index, threading.Event()).clear()
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
            self._thread.start()
        for b in buckets:
            self._queue.put((b, apply))

    def wait(self, b: Bucket) -> None:
        done = self._done.get(b.index)
        if done is not None:
            done.wait()
        if self._error is not None:
            raise RuntimeError(f"tictac.torch.ordered_ddp: a deferred update failed: {self._error}") from self._error

    def stop(self) -> None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None

    def _loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            b, apply = item
            try:
                if self._error is None:
                    apply(b)
            except BaseException as e:  # noqa: BLE001  re-raised on the training thread by wait()
                self._error = e
            finally:
                self._done[b.index].set()


def _is_tictac(group) -> bool:
    try:
        backend = dist.get_backend(group)
    except Exception:  # noqa: BLE001
        backend = ""
    return "tictac" in str(backend)


@contextlib.contextmanager
def _priority(value: int, group):
    """tictac.torch.priority on a tictac group; nothing on another backend (e.g. gloo)."""
    if not _is_tictac(group):
        yield
        return
    import tictac.torch
    with tictac.torch.priority(value):
        yield


def ordered_ddp(model: nn.Module, optimizer: torch.optim.Optimizer, policy: str = "tic", **kwargs: Any) -> OrderedDDP:
    """Wraps `model` for ordered data-parallel training; see OrderedDDP."""
    return OrderedDDP(model, optimizer, policy, **kwargs)
