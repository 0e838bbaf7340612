"""Unit tests of bench/e2e/stats.py: the speedup's stratified bootstrap interval, on data where
the answer follows from the numbers written here."""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)            # bench is a package at the repository root

from bench.e2e import stats  # noqa: E402


def test_equal_jobs_give_one_inside_the_interval():
    base = [100.0, 102.0, 98.0, 101.0, 99.0, 100.5, 99.5, 100.0, 101.5, 98.5]
    s, lo, hi = stats.ratio_ci(base, [0] * 10, list(base), [0] * 10)
    assert s == 1.0 and lo < 1.0 < hi


def test_a_clear_speedup_excludes_one():
    base = [150.0 + k for k in range(10)]
    other = [100.0 + k for k in range(10)]
    s, lo, hi = stats.ratio_ci(base, [0] * 10, other, [0] * 10)
    assert abs(s - 154.5 / 104.5) < 1e-9
    assert 1.0 < lo <= s <= hi


def test_rounds_are_kept_paired():
    """Round 1 ran on a machine twice as slow for both sides: resampling within rounds keeps
    every resample half slow, half fast, so the interval stays tight around 1.5."""
    base = [150.0] * 5 + [300.0] * 5
    other = [100.0] * 5 + [200.0] * 5
    rounds = [0] * 5 + [1] * 5
    s, lo, hi = stats.ratio_ci(base, rounds, other, rounds)
    assert abs(s - 1.5) < 1e-9 and abs(lo - 1.5) < 1e-9 and abs(hi - 1.5) < 1e-9


def test_add_speedups_against_each_baseline():
    d = {("m", "training", p): {"iter_ms": [t] * 10, "iter_round": [0] * 10, "spread_ms": [sp] * 10}
         for p, t, sp in (("random", 200.0, 40.0), ("tac", 100.0, 10.0), ("gloo", 150.0, 20.0))}
    rows = [{"model": "m", "mode": "training", "policy": p, "status": "ok"} for p in ("random", "tac", "gloo")]
    stats.add_speedups(rows, d)
    tac = rows[1]
    assert tac["speedup_vs_random"] == 2.0 and tac["speedup_ci_low"] == 2.0 == tac["speedup_ci_high"]
    assert tac["speedup_vs_gloo"] == 1.5 and tac["spread_reduction_vs_random"] == 4.0
    assert "speedup_vs_ddp" not in tac
