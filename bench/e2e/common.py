"""Small helpers shared by the end-to-end benchmark's modules: paths, logging, formatting."""

from __future__ import annotations

import math
import os
from typing import Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

ALL_POLICIES = ("random", "fifo", "layer", "tic", "tac", "gloo", "ddp",
                "ddp-gloo", "ddp-tictac", "ordered-layer", "ordered-tic", "ordered-tac")
# Data-parallel rows (ddp_job.py): DDP over gloo ("ddp" = "ddp-gloo"), DDP over tictac without
# ordering, tictac.torch.ordered_ddp with a policy.
DDP_POLICIES = ("ddp", "ddp-gloo", "ddp-tictac", "ordered-layer", "ordered-tic", "ordered-tac")
PS_POLICIES = ("random", "fifo", "layer", "tic", "tac")    # run as tictac PS jobs with that order
DEFAULT_MODELS = ("alexnet", "vgg16", "resnet50", "inception_v3")
MIN_IMAGE = {"inception_v3": 75, "alexnet": 63, "googlenet": 32}


def log(msg: str) -> None:
    print(msg, flush=True)


def fmt_dur(s: float) -> str:
    s = int(round(s))
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def nearest_rank(vals: Sequence[float], q: float) -> float:
    v = sorted(vals)
    if not v:
        return math.nan
    k = max(1, math.ceil(q * len(v)))
    return v[k - 1]


def union_ms(intervals) -> float:
    """Length of the union of [start, end] intervals (the one definition, in ps.stats)."""
    from tictac.torch.ps.stats import union_ms as _union_ms

    return _union_ms(intervals)


def model_spec(name: str) -> str:
    return name if ":" in name else f"torchvision:{name}"


def short_name(name: str) -> str:
    return name.split(":")[-1]


def rate_str(bytes_s: float) -> str:
    """A tc rate string in whole mbit (>= 1)."""
    return f"{max(1, int(round(bytes_s * 8 / 1e6)))}mbit"


def rate_bytes(s: str) -> int:
    from bench.cluster import parse_rate
    return parse_rate(s)


def fnum(x) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return ""
    if isinstance(x, float):
        return f"{x:.6g}" if abs(x) < 1e6 else f"{x:.0f}"
    return str(x)
