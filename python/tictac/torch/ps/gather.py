"""Bringing every rank's results to rank 0 through the store: one publish per rank, one
aggregation on rank 0 (stats, server stats, optionally the final parameters, outputs)."""

from __future__ import annotations

import datetime
import json
from typing import Dict, List, Optional, Sequence, Tuple

import torch

from .protocol import from_bytes, params_key, server_stats_key, stats_key, tensor_bytes
from .stats import IterationStats, ServerIterationStats, summarize, write_chrome_trace, write_json_lines

__all__ = ["publish", "aggregate"]


def publish(store, rank: int, *, stats: Sequence[IterationStats] = (),
            server_stats: Sequence[ServerIterationStats] = (),
            params: Optional[Dict[str, torch.Tensor]] = None, is_server: bool = False) -> None:
    """Puts this rank's results in the store: a server its ServerIterationStats (and its final
    parameters when `params` is given), a worker its IterationStats."""
    if is_server:
        store.set(server_stats_key(rank), json.dumps([s.to_json() for s in server_stats]))
        if params is not None:
            store.set(params_key(rank), tensor_bytes(params))
    else:
        store.set(stats_key(rank), json.dumps([s.to_json() for s in stats]))


def aggregate(store, world: int, num_ps: int, timeout: float, own_server_stats: Sequence[ServerIterationStats],
              own_params: Dict[str, torch.Tensor], names: List[str], *, gather_params: bool, batch_size=None,
              log_json: Optional[str] = None, trace: Optional[str] = None
              ) -> Tuple[List[IterationStats], List[ServerIterationStats], Dict[str, torch.Tensor], dict]:
    """Rank 0 only: waits for every other rank's published results (each wait up to `timeout`
    seconds) and returns (worker stats, server stats, parameters in `names` order, summary). It
    writes `log_json` (JSON lines, one per worker iteration) and `trace` (Chrome trace) when given."""
    wait_s = datetime.timedelta(seconds=timeout)
    stats: List[IterationStats] = []
    sstats: List[ServerIterationStats] = list(own_server_stats)
    params = dict(own_params)
    for r in range(world):
        if r == 0:
            continue
        if r < num_ps:
            store.wait([server_stats_key(r)], wait_s)
            sstats += [ServerIterationStats(**d) for d in json.loads(store.get(server_stats_key(r)))]
            if gather_params:
                store.wait([params_key(r)], wait_s)
                params.update(from_bytes(store.get(params_key(r))))
        else:
            store.wait([stats_key(r)], wait_s)
            stats += [IterationStats(**d) for d in json.loads(store.get(stats_key(r)))]
    if gather_params:
        params = {n: params[n] for n in names if n in params}
    summary = summarize(stats, batch_size)
    if log_json:
        write_json_lines(log_json, stats)
    if trace:
        write_chrome_trace(trace, stats, sstats, num_ps)
    return stats, sstats, params, summary
