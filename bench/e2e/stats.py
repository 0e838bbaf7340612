"""Speedups with bootstrap confidence intervals, over paired interleaved rounds.

A (model, mode) runs every policy once per round (the policies' order rotates from round to
round, so a drift of the machine's load hits every policy alike). ``speedup(base, other)``:
median(base iteration times) / median(other's), over all measured iterations of all rounds;
its 95% interval is a stratified percentile bootstrap: each resample draws, within every
round, that round's iterations of each side with replacement, and takes the ratio of the
pooled medians (so round-to-round drift stays paired). The same for the straggler spread
(mean of base / mean of other: how many times smaller the other's spread is).
"""

from __future__ import annotations

import random
import statistics
from typing import Callable, Dict, List, Optional, Sequence, Tuple

RESAMPLES = 2000


def _by_round(vals: Sequence[float], rounds: Sequence[int]) -> Dict[int, List[float]]:
    out: Dict[int, List[float]] = {}
    for v, r in zip(vals, rounds):
        out.setdefault(r, []).append(v)
    return out


def ratio_ci(base: Sequence[float], base_rounds: Sequence[int], other: Sequence[float],
             other_rounds: Sequence[int], stat: Callable[[List[float]], float] = statistics.median,
             resamples: int = RESAMPLES, seed: int = 1, level: float = 0.95
             ) -> Tuple[Optional[float], Optional[float], Optional[float]]:
    """(stat(base) / stat(other), ci_low, ci_high); Nones when either side is empty or zero."""
    if not base or not other:
        return None, None, None
    so = stat(list(other))
    if so <= 0:
        return None, None, None
    point = stat(list(base)) / so
    b, o = _by_round(base, base_rounds), _by_round(other, other_rounds)
    rng = random.Random(seed)
    est = []
    for _ in range(resamples):
        bs = [x for v in b.values() for x in rng.choices(v, k=len(v))]
        os_ = [x for v in o.values() for x in rng.choices(v, k=len(v))]
        d = stat(os_)
        if d > 0:
            est.append(stat(bs) / d)
    if not est:
        return point, None, None
    est.sort()
    lo = est[int((1 - level) / 2 * (len(est) - 1))]
    hi = est[int((1 + level) / 2 * (len(est) - 1))]
    return point, lo, hi


def add_speedups(rows: List[dict], details: Dict[Tuple[str, str, str], dict]) -> None:
    """Per (model, mode): speedup (and CI) of every ok row against random, gloo and ddp (where
    they ran), and the straggler-spread ratio against random."""
    for r in rows:
        if r.get("status") != "ok":
            continue
        d = details.get((r["model"], r["mode"], r["policy"]))
        if d is None:
            continue
        for base, col in (("random", "speedup_vs_random"), ("gloo", "speedup_vs_gloo"), ("ddp", "speedup_vs_ddp")):
            bd = details.get((r["model"], r["mode"], base))
            if bd is None and base == "ddp":   # the data-parallel rows' baseline: DDP over gloo
                bd = details.get((r["model"], r["mode"], "ddp-gloo"))
            if bd is None:
                continue
            s, lo, hi = ratio_ci(bd["iter_ms"], bd["iter_round"], d["iter_ms"], d["iter_round"])
            r[col] = s
            pre = "speedup" if base == "random" else col
            r[f"{pre}_ci_low"], r[f"{pre}_ci_high"] = lo, hi
        bd = details.get((r["model"], r["mode"], "random"))
        if bd is not None:
            s, lo, hi = ratio_ci(bd["spread_ms"], bd["iter_round"], d["spread_ms"], d["iter_round"],
                                 stat=statistics.mean)
            r["spread_reduction_vs_random"], r["spread_reduction_ci_low"], r["spread_reduction_ci_high"] = s, lo, hi
