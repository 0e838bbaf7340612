"""Switching ordering off where it cannot help (issue 20).

The overlap of communication and computation bounds what any order can gain: with N the
communication and C the compute time of an iteration, no schedule is faster than max(N, C) and
none slower than N + C, so the best order gains at most a factor 1 + S with S = min(N, C) /
max(N, C) (SCHEDULING.md section 6; the simulator's speedup bound). When the first worker's
median S over the iterations up to ``decide_at`` is below ``PSConfig.min_overlap``, every rank
switches, from the next iteration on, to the cheapest path: declaration order (fifo), no
per-message priorities, no send batches. The first worker decides and publishes the decision in
the store (``order/decision``); every rank reads it before that next iteration, so all switch
at the same iteration. The reason is logged once (the ``tictac.torch.ps`` logger and stderr on
the first worker) and kept in ``plan.notes``; ``plan.fifo_from`` is the first fifo iteration.
"""

from __future__ import annotations

import datetime
import json
import logging
import statistics
import sys
from typing import List, Optional

from .config import PSConfig
from .planning import OrderPlan
from .priorities import Priorities

log = logging.getLogger("tictac.torch.ps")

__all__ = ["AutoOrder", "decide", "DECISION_KEY"]

DECISION_KEY = "order/decision"


def decide(s_values: List[Optional[float]], min_overlap: float) -> Optional[str]:
    """The reason to switch ordering off, or None to keep it: the median of the known S values
    is below `min_overlap`. No known value: keep ordering (nothing says it cannot help)."""
    known = [s for s in s_values if s is not None]
    if not known:
        return None
    s = statistics.median(known)
    if s >= min_overlap:
        return None
    return (f"measured speedup bound S = min(N, C) / max(N, C) = {s:.3f} (median of {len(known)} "
            f"iteration(s) of the first worker) is below min_overlap {min_overlap:g}: no order can gain "
            f"more than {100 * s:.1f}%, so the parameter server uses declaration order without "
            f"per-message priorities (TICTAC_PS_AUTO_ORDER=0 keeps the policy)")


class AutoOrder:
    """One rank's side of the decision. Call ``before(it)`` before each iteration and, on the
    first worker, ``after(it, stats)`` after each."""

    def __init__(self, cfg: PSConfig, store, plan: OrderPlan, prio: Priorities, is_first_worker: bool):
        self.cfg, self.store, self.plan, self.prio = cfg, store, plan, prio
        self.first = is_first_worker
        self.decide_at = max(0, cfg.warmup - 1)
        # nothing to switch off: fifo already, switch disabled, or no iteration after the decision
        self.enabled = (cfg.auto_order and plan.policy != "fifo" and self.decide_at + 1 < cfg.iters)
        self.s_values: List[Optional[float]] = []

    def after(self, it: int, stats) -> None:
        if not (self.enabled and self.first) or it > self.decide_at:
            return
        self.s_values.append((stats.metrics or {}).get("S"))
        if it == self.decide_at:
            reason = decide(self.s_values, self.cfg.min_overlap)
            self.store.set(DECISION_KEY, json.dumps({"off": reason is not None, "reason": reason or ""}))
            if reason:
                log.warning("tictac.torch.ps: %s", reason)
                print(f"tictac.torch.ps: {reason}", file=sys.stderr, flush=True)

    def before(self, it: int) -> None:
        if not self.enabled or it != self.decide_at + 1:
            return
        self.store.wait([DECISION_KEY], datetime.timedelta(seconds=self.cfg.timeout))
        d = json.loads(self.store.get(DECISION_KEY))
        if d["off"]:
            self.plan.fifo_from = it
            self.plan.notes.append(f"from iteration {it}: {d['reason']}")
            self.prio.disable(d["reason"])
