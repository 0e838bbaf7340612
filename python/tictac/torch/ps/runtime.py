"""Parameter-server training and inference with no model changes: ``run``.

Ranks 0..num_ps-1 are servers (``server.Server``), the others workers (``worker.Worker``). The
first worker builds the send-order plan and every rank reads it (``plan_exchange``); tags and
store keys are in ``protocol``; rank 0 gathers the results (``gather``). See docs/ps-training.md.
"""

from __future__ import annotations

import itertools
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Tuple

import torch
import torch.distributed as dist
from torch import nn

from .auto_order import AutoOrder
from .comm import Context, PeerError
from .config import PSConfig
from .gather import aggregate, publish
from .plan_exchange import agree_on_plan, install_priorities, link_rate
from .planning import OrderPlan
from .priorities import Priorities
from .protocol import Tags
from .server import Server
from .sharding import param_infos
from .stats import IterationStats, ServerIterationStats, summarize
from .worker import Worker

log = logging.getLogger("tictac.torch.ps")

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


def _default_store():
    try:
        return dist.distributed_c10d._get_default_store()
    except Exception as e:  # pragma: no cover - private API moved
        raise RuntimeError(f"tictac.torch.ps needs the default process group's store: {e}") from e


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
    tags = Tags(len(infos))
    prio = Priorities(None)
    rate, rate_src = link_rate(cfg, ctx, tags, first_worker)
    plan = agree_on_plan(cfg, ctx, store, model, data_fn, names, names_by_id, first_worker, rate, rate_src)
    install_priorities(prio, plan, names)

    result = RunResult(rank=rank, role="server" if is_server else "worker", plan=plan,
                       owners={i.name: i.owner for i in infos}, priorities_active=prio.active,
                       priorities_reason=prio.reason)
    auto = AutoOrder(cfg, store, plan, prio, rank == first_worker)
    if is_server:
        server = Server(ctx, cfg, infos, plan, prio, tags, world)
        try:
            for it in range(cfg.iters):
                auto.before(it)
                result.server_stats.append(server.iteration(it))
        finally:
            server.close()
        result.params = {i.name: i.param.detach().clone() for i in server.owned}
        publish(store, rank, server_stats=result.server_stats, is_server=True,
                params=result.params if cfg.gather_params else None)
    else:
        worker = Worker(ctx, cfg, model, infos, plan, prio, tags)
        worker.install()
        try:
            for it in range(cfg.iters):
                inputs, target = data_fn(worker.widx, it)
                auto.before(it)
                st = worker.iteration(it, inputs, target)
                auto.after(it, st)
                result.stats.append(st)
                if cfg.print_progress and rank == first_worker:
                    print(f"iter {it + 1}/{cfg.iters}{' (warmup)' if st.warmup else ''}: {st.iter_ms:.1f} ms "
                          f"(stall {st.stall_ms:.1f} ms) rank {rank}", flush=True)
        finally:
            worker.remove()
        publish(store, rank, stats=result.stats)
        result.summary = summarize(result.stats, cfg.batch_size)

    if rank == 0:
        result.stats, result.server_stats, result.params, result.summary = aggregate(
            store, world, cfg.num_ps, cfg.timeout, result.server_stats, result.params, names,
            gather_params=cfg.gather_params, batch_size=cfg.batch_size, log_json=cfg.log_json, trace=cfg.trace)
    _leave_together(store, world, rank, cfg.timeout)
    return result


def _leave_together(store, world: int, rank: int, timeout: float) -> None:
    """Waits (bounded by `timeout`) until every rank finished its run. A worker's last gradients
    have left its host when its sends complete, not reached the server's receives; a worker that
    then exits closes its connections, and the transport drops what a closed peer sent that no
    receive had taken yet, so the server failed with "the peer closed the connection (EOF)" on
    the last gradient mask (1 run in ~80 in CI). The servers arrive here only after consuming
    everything. Rank 0 hosts the TCP store (env:// and tcp:// rendezvous), so it leaves last:
    after every other rank's final store call. Best effort: the run already succeeded, so a
    store error here is logged, not raised."""
    deadline = time.monotonic() + timeout

    def wait_for(key: str, count: int) -> bool:
        while store.add(key, 0) < count:
            if time.monotonic() > deadline:
                log.warning("tictac.torch.ps: not every rank finished within %.0f s; leaving anyway", timeout)
                return False
            time.sleep(0.005)
        return True

    try:
        store.add("leaving", 1)
        if not wait_for("leaving", world):
            return
        if rank == 0:
            wait_for("left", world - 1)
        else:
            store.add("left", 1)
    except Exception as e:  # noqa: BLE001 - see above
        log.warning("tictac.torch.ps: the store failed while leaving the run (%s); the run itself completed", e)
