"""Agreeing on the plan: the link rate for tac, the plan built on the first worker and read by
every other rank from the store, and the tag -> priority table each rank installs."""

from __future__ import annotations

import datetime
import json
import logging
import sys
from typing import Callable, Dict, List, Optional, Tuple

import torch
import torch.distributed as dist
from torch import nn

from .comm import Context, PeerError, wait_work
from .config import PSConfig
from .planning import OrderPlan, build_plan, cluster_rate_from_env
from .priorities import Priorities
from .protocol import PLAN_KEY, Tags, as_tuple, now

log = logging.getLogger("tictac.torch.ps")

__all__ = ["link_rate", "agree_on_plan", "install_priorities", "probe_bandwidth"]


def probe_bandwidth(ctx: Context, server: int, worker: int, tag: int, nbytes: int = 8 << 20, reps: int = 3) -> float:
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


def link_rate(cfg: PSConfig, ctx: Context, tags: Tags, first_worker: int) -> Tuple[Optional[float], str]:
    """(bytes/s, source) of the link for tac: given, TICTAC_CLUSTER_RATE, or measured from
    rank 0 to the first worker (both of them take part; other ranks get None)."""
    rate, src = cfg.bandwidth_bytes_s, "config"
    if cfg.policy == "tac" and rate is None:
        rate, src = cluster_rate_from_env(), "TICTAC_CLUSTER_RATE"
        if rate is None and ctx.rank in (0, first_worker):
            rate = probe_bandwidth(ctx, 0, first_worker, tags.probe) or None
            src = "measured rank 0 -> first worker"
    return rate, src


def agree_on_plan(cfg: PSConfig, ctx: Context, store, model: nn.Module, data_fn: Callable, names: List[str],
                  names_by_id: Dict[int, str], first_worker: int, rate: Optional[float], rate_src: str) -> OrderPlan:
    """The first worker builds the plan and publishes it (or the error building it) under
    PLAN_KEY; every other rank waits for it (plan_timeout) and reads the same plan."""
    rank = ctx.rank
    plan_timeout = cfg.plan_timeout or max(cfg.timeout, 300.0)
    if rank == first_worker:
        try:
            x0, _ = data_fn(0, 0)
            plan = build_plan(cfg.policy, model, as_tuple(x0), names, names_by_id, mode=cfg.mode,
                              seed=cfg.seed, bandwidth_bytes_s=rate, bandwidth_source=rate_src)
        except Exception as e:
            store.set(PLAN_KEY, json.dumps({"error": f"{ctx.who(rank)} could not build the {cfg.policy!r} plan: {e}"}))
            raise
        store.set(PLAN_KEY, plan.to_json())
        for note in plan.notes:
            log.info("plan: %s", note)
            if "fell back" in note or "failed" in note:
                print(f"tictac.torch.ps: {note}", file=sys.stderr, flush=True)
        return plan
    try:
        store.wait([PLAN_KEY], datetime.timedelta(seconds=plan_timeout))
    except Exception as e:
        raise PeerError(f"{ctx.who(rank)}: no plan from {ctx.who(first_worker)} within {plan_timeout:g} s: {e}",
                        rank=rank, peer=first_worker, what="plan") from e
    raw = json.loads(store.get(PLAN_KEY))
    if "error" in raw:
        raise PeerError(raw["error"], rank=rank, peer=first_worker, what="plan")
    return OrderPlan(**raw)


def install_priorities(prio: Priorities, plan: OrderPlan, names: List[str]) -> None:
    """Static orders: the pull and push tags of the k-th parameter get priority k (per-send
    overrides still apply). Random: an empty table (every send sets its own)."""
    table = {}
    if plan.static:
        for k, n in enumerate(plan.base):
            i = names.index(n)
            table[Tags.pull(i)] = k
            table[Tags.push(i)] = k
    prio.install(table)
