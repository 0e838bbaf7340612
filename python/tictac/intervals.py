"""Interval arithmetic shared by the torch and TF sides (no framework import): the busy time of a
set of [start, end] intervals, as the metrics of docs (E, N, C) define it."""
from __future__ import annotations

from typing import Iterable, Sequence


def union_length(intervals: Iterable[Sequence[float]]) -> float:
    """Total length of the union of [start, end] intervals (empty or reversed ones count 0)."""
    total, cur_s, cur_e = 0.0, None, None
    for s, e in sorted((float(a), float(b)) for a, b in intervals if b > a):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total
