"""PyTorch integration: the "tictac" c10d backend and parameter-server training.

``import tictac.torch`` registers the backend, so that::

    dist.init_process_group("tictac")            # or "cpu:tictac,cuda:tictac"

works under torchrun (env://) and with file:// or tcp:// init. Scheduling::

    tictac.torch.set_priorities(group, {tag: priority})   # smaller = sent first
    with tictac.torch.priority(-1):                        # this thread's sends inside
        dist.isend(t, dst, tag=7)

Parameter-server training with no model changes: ``tictac.torch.ps`` and
``python -m tictac.torch.train``. Graph export for TIC/TAC: ``tictac.torch.graph`` and
``python -m tictac.torch.export_graph``.
"""
from __future__ import annotations

import contextlib
import datetime
from typing import Iterator, Mapping

import torch
import torch.distributed as dist

from tictac.torch._loader import load_extension

# The compiled backend. Its absence is reported by the calls that need it (creating a "tictac"
# group, priorities, schedule), so that tictac.torch.ps / .graph / the CLIs import without it.
try:
    _C = load_extension(__path__)  # noqa: N816  (the extension module)
    _C_ERROR: ImportError | None = None
except ImportError as _exc:
    _C = None
    _C_ERROR = _exc

BACKEND_NAME = "tictac"


def _ext():
    if _C is None:
        raise ImportError(str(_C_ERROR)) from _C_ERROR
    return _C


def available() -> bool:
    """True when the compiled backend loaded (see the ImportError from _ext() when not)."""
    return _C is not None


def _create_process_group(dist_opts, backend_options):  # called by torch.distributed
    timeout = dist_opts.timeout
    if isinstance(timeout, datetime.timedelta):
        timeout_ms = int(timeout.total_seconds() * 1000)
    else:  # pragma: no cover - torch always passes a timedelta
        timeout_ms = int(timeout)
    # A whole ProcessGroup, not a Backend: torch then uses it as the group, and it reports its
    # name as "tictac" (torch names the groups it wraps around plugin backends "custom").
    return _ext().create_process_group(
        dist_opts.store,
        dist_opts.group_rank,
        dist_opts.group_size,
        datetime.timedelta(milliseconds=timeout_ms),
        str(dist_opts.group_id),
    )


def _register() -> None:
    if BACKEND_NAME in dist.Backend.backend_list:
        return
    dist.Backend.register_backend(
        BACKEND_NAME, _create_process_group, extended_api=True, devices=["cpu", "cuda"]
    )


_register()


def _backend_of(group=None):
    group = group if group is not None else dist.group.WORLD
    if group is None:
        raise RuntimeError(
            "tictac.torch: no default process group; call "
            "torch.distributed.init_process_group('tictac') first"
        )
    return group._get_backend(torch.device("cpu"))


def is_tictac(group=None) -> bool:
    """True when `group` (default: WORLD) runs on the tictac backend for CPU tensors."""
    if _C is None:
        return False
    try:
        return bool(_C.is_tictac(_backend_of(group)))
    except RuntimeError:
        return False


def peer_backends(group=None) -> list[str]:
    """The transport backend each rank's connection runs over ("tcp", "ucx", ...; "" for this
    rank), chosen from TICTAC_BACKENDS (default "tcp") when the group was created."""
    return list(_ext().peer_backends(_backend_of(group)))


def set_priorities(group, table: Mapping[int, int], *, replace: bool = True) -> None:
    """Installs the scheduler's tag -> priority table (smaller = sent first) on `group`.

    Sends with a tag in the table leave this rank in priority order, preempting larger
    priorities at chunk boundaries (TICTAC_CHUNK_BYTES); equal priorities leave FIFO. Tags not
    in the table get priority 0. ``replace=False`` updates entries and keeps the rest.
    """
    _ext().set_priorities(_backend_of(group), {int(k): int(v) for k, v in table.items()}, replace)


def priority_of(group, tag: int) -> int:
    """The priority a send with `tag` would get on this thread now."""
    return int(_ext().priority_of(_backend_of(group), int(tag)))


@contextlib.contextmanager
def priority(value: int) -> Iterator[None]:
    """Sets the priority of every tictac send this thread issues inside the block (nests)."""
    ext = _ext()
    ext.push_thread_priority(int(value))
    try:
        yield
    finally:
        ext.pop_thread_priority()


def gate():
    """A new closed gate (see ``after``): ``open()`` lets the collectives held by it move data;
    ``fail(why)`` makes them fail with `why` instead."""
    return _ext().Gate()


@contextlib.contextmanager
def after(gate) -> Iterator[None]:
    """Collectives this thread posts on a tictac group inside the block keep their place in the
    group's collective order (the ticket of this call) but move data only once `gate` opens, or
    fail if it fails or stays closed for the group timeout. For input computed later on another
    thread (ordered_ddp's sharded updates): the gate must depend only on local work and on
    collectives posted before it."""
    ext = _ext()
    ext.push_thread_gate(gate)
    try:
        yield
    finally:
        ext.pop_thread_gate()


def ordered_ddp(model, optimizer, policy: str = "tic", **kwargs):
    """Ordered data-parallel training (TicTac's order for DDP users): see tictac.torch.ddp."""
    from tictac.torch.ddp import ordered_ddp as _ordered_ddp

    return _ordered_ddp(model, optimizer, policy, **kwargs)


def schedule(graph: dict | str, policy: str, bandwidth_bps: float = 10e9, seed: int = 0) -> dict:
    """Runs a scheduling policy (random, fifo, layer, tic, tac, optimal) of the C++ library on a
    tictac-graph/1 graph (a dict or JSON text): recv op name -> priority (smaller first)."""
    import json

    text = graph if isinstance(graph, str) else json.dumps(graph)
    return dict(_ext().schedule(text, policy, float(bandwidth_bps), int(seed)))


__all__ = [
    "BACKEND_NAME",
    "available",
    "is_tictac",
    "peer_backends",
    "after",
    "gate",
    "priority",
    "priority_of",
    "schedule",
    "set_priorities",
]
