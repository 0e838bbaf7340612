"""The wire protocol of a parameter-server run: tags, store keys, small shared helpers.

Tags are stable per parameter: a pull (server -> worker value) is ``2*index``, a push (worker ->
server gradient) ``2*index+1``. Control messages use tags above ``2*len(params)``: ``+16``
ready (a worker posted its receives for an iteration), ``+17`` bandwidth probe, ``+18`` gradient
mask. Store keys live under the run's prefix (``tictac_ps/<run>/``): ``plan``, ``stats/<rank>``,
``sstats/<rank>``, ``params/<rank>``, ``abort/<rank>``.
"""

from __future__ import annotations

import io
import time
from dataclasses import dataclass

import torch

from .sharding import pull_tag, push_tag

__all__ = ["Tags", "PLAN_KEY", "stats_key", "server_stats_key", "params_key", "ms", "as_tuple",
           "tensor_bytes", "from_bytes", "now"]

now = time.perf_counter

PLAN_KEY = "plan"


def stats_key(rank: int) -> str:
    return f"stats/{rank}"


def server_stats_key(rank: int) -> str:
    return f"sstats/{rank}"


def params_key(rank: int) -> str:
    return f"params/{rank}"


@dataclass(frozen=True)
class Tags:
    """Every tag of a run with ``num_params`` unique parameters."""
    num_params: int

    @staticmethod
    def pull(index: int) -> int:
        return pull_tag(index)

    @staticmethod
    def push(index: int) -> int:
        return push_tag(index)

    @property
    def ready(self) -> int:
        return 2 * self.num_params + 16

    @property
    def probe(self) -> int:
        return 2 * self.num_params + 17

    @property
    def mask(self) -> int:
        return 2 * self.num_params + 18


def ms(t: float, t0: float) -> float:
    """Milliseconds from perf_counter time t0 to t."""
    return (t - t0) * 1e3


def as_tuple(x) -> tuple:
    return x if isinstance(x, tuple) else (x,)


def tensor_bytes(obj) -> bytes:
    b = io.BytesIO()
    torch.save(obj, b)
    return b.getvalue()


def from_bytes(data: bytes):
    return torch.load(io.BytesIO(data), weights_only=False)
