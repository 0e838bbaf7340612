"""Adapter to tictac.torch's priority API.

Calls ``tictac.torch.set_priorities`` / ``tictac.torch.priority`` when ``tictac.torch`` imports
and the group runs on the tictac backend; otherwise every call is a no-op (never faked) and the
reason is logged once per process.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Dict

log = logging.getLogger("tictac.torch.ps")

__all__ = ["Priorities"]

_said: set = set()


def _say_once(msg: str) -> None:
    if msg not in _said:
        _said.add(msg)
        log.warning(msg)


class Priorities:
    """Priority control for sends on one process group."""

    def __init__(self, group=None):
        self.group = group
        self.active = False
        self.reason = ""
        self._tt = None
        try:
            import tictac.torch as tt  # noqa: F401  (registers the backend)
            is_tictac = getattr(tt, "is_tictac")
        except Exception as e:  # ImportError, or a half-written package
            self.reason = f"tictac.torch is not importable ({type(e).__name__}: {e})"
        else:
            try:
                ok = bool(is_tictac(group))
            except Exception as e:
                ok = False
                self.reason = f"tictac.torch.is_tictac failed ({type(e).__name__}: {e})"
            if ok:
                self.active = True
                self._tt = tt
            elif not self.reason:
                self.reason = f"the process group does not run on the tictac backend ({_backend_name(group)})"
        if not self.active:
            _say_once(f"send priorities are not applied: {self.reason}; the transport decides the order")

    def disable(self, reason: str) -> None:
        """From now on no priorities: the tag table is emptied and send()/batch() are null
        contexts (the cheapest path, when ordering cannot help; auto_order.py)."""
        if self.active:
            self._tt.set_priorities(self.group, {})
        self.active = False
        self.reason = reason

    def install(self, table: Dict[int, int]) -> None:
        """Install a tag -> priority table (smaller = sent first) on the group's backend."""
        if self.active:
            self._tt.set_priorities(self.group, dict(table))

    def batch(self):
        """Context whose sends (this thread's) reach the transport as one batch, so that it
        orders all of them by priority before the first byte leaves (torch's coalescing, which
        the tictac backend implements as a transport batch). A null context when inactive."""
        if not self.active:
            return contextlib.nullcontext()
        import torch
        import torch.distributed as dist
        manager = getattr(dist.distributed_c10d, "_coalescing_manager", None)
        if manager is None:   # pragma: no cover - torch moved its private API
            _say_once("torch.distributed has no _coalescing_manager: sends are posted one by one, "
                      "so the first ones may leave before later, higher-priority ones exist")
            return contextlib.nullcontext()
        return manager(self.group, torch.device("cpu"), async_ops=True)

    def send(self, priority: int):
        """Context for one send: ``tictac.torch.priority(p)`` or a null context."""
        if self.active:
            return self._tt.priority(int(priority))
        return contextlib.nullcontext()


def _backend_name(group) -> str:
    try:
        import torch.distributed as dist
        return f"backend {dist.get_backend(group)!r}"
    except Exception:
        return "backend unknown"
